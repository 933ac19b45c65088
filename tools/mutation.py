"""Mutation testing per core module with mutmut 3 (issue 17.4; docs/testing.md says how to read it).

    .venv/bin/python tools/mutation.py --list                 # the modules and their test selection
    .venv/bin/python tools/mutation.py cache                  # run one module, print its score
    .venv/bin/python tools/mutation.py cache --score          # the score of the last run, no run
    .venv/bin/python tools/mutation.py cache --survivors      # each surviving mutant's diff
    .venv/bin/python tools/mutation.py cache --retest         # re-run the survivors (new tests)
    .venv/bin/python tools/mutation.py semantics --only 'opus.interp.semantics.x_fma*'  # some
    .venv/bin/python tools/mutation.py semantics --check      # its tests, unmutated (new machine)

mutmut mutates a copy (`mutants/`) and runs pytest there, but its configuration holds one test
selection; each module here has its own (the tests that exercise it), so the module runs in its
own scratch folder `.mutation/<module>/`: a fresh copy of src/, tests/, benchmarks/ and
pyproject.toml whose [tool.mutmut] section is the repository's (the shared settings) plus this
module's files and tests. Nothing under src/ is ever written: `mutmut apply` is not
offered (run it by hand in the scratch folder only, where it edits the copy). Results stay in the
scratch folder, so a later run only re-tests functions whose code changed and mutants not yet
checked (``--only`` re-runs the matching mutants whatever their last result; changing a module's
files starts it afresh). Where only some functions of a file belong to the module (`functions`),
the run names them (mutmut's mutant-name globs).

A surviving mutant is killed by a test or argued away: `EQUIVALENT` maps a mutant's name to the
mutated line's text (checked against the mutant's diff, so an entry goes stale loudly when the
code moves) and the argument why no test can tell it apart. The score counts those apart.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, ".mutation")


@dataclass(frozen=True)
class Module:
    files: tuple[str, ...]            # paths under src/ that mutmut mutates
    tests: tuple[str, ...]            # the pytest selection that exercises them
    why: str                          # why these tests (docs/testing.md repeats it)
    functions: tuple[str, ...] = ()   # mutant-name globs: only these functions of the files
    env: dict = field(default_factory=dict)
    # mutant-name globs of functions that run while the tests are imported or collected (the
    # targets and their matrix rows, built and self-checked there): mutmut's fork server
    # collects the tests once before forking each mutant's pytest, so such a mutant runs
    # unmutated and survives whatever the tests check. Their survivors are run again with the
    # fork server's warm-up off (each mutant's pytest imports everything itself: slower)
    fresh: tuple[str, ...] = ()


# engine.py's memory and bounds parts: shared-memory checking (Shadow), faults, alignment and
# bound checks, loads, stores, addresses (mutmut 3 names a function's mutants
# <module>.x_<function>__mutmut_<n>, a method's <module>.xǁ<Class>ǁ<method>__mutmut_<n>)
_ENGINE_MEMORY = tuple(f"opus.interp.engine.{f}__mutmut_*" for f in (
    "xǁShadowǁ*", "x__fault", "x__check_align", "x__eidx_valid", "x__check_uniform",
    "x__check_all", "x__check_masked", "x__shadow", "x_mem_load", "x_mem_store",
    "x__flat_with_tids", "x__multi", "xǁProgramǁ_address", "xǁProgramǁexec_ptr_add",
    "xǁProgramǁ_window", "xǁProgramǁ_access_address", "xǁProgramǁexec_load",
    "xǁProgramǁexec_store"))

# the host-executed conversions that reach cemit.py's bf16 truncations, its stochastic-rounding
# and fp4 cast branches (one or two cases each: the rest exercise the dialects' conversions)
_CONV = "tests/conversions/test_conversion_codegen.py::test_host_"
_CEMIT_CONVERSIONS = (
    _CONV + "packed_and_truncating_casts[sm_80-f32-bf16-truncate-nosat]",
    _CONV + "packed_and_truncating_casts[gfx942-f32-bf16-truncate_with_nan-nosat]",
    _CONV + "software_stochastic_rounding[sm_80-bf16-False]",
    _CONV + "software_stochastic_rounding[sm_80-fp8_e4m3-True]",
    "tests/conversions/test_fp4_encoder.py::test_host_executed_encoder_matches_ml_dtypes[sm_90a-8]")

_U32 = "tests/lang/test_u32_offset_views.py::test_"

MODULES = {
    "semantics": Module(
        files=("src/opus/interp/semantics.py", "src/opus/interp/engine.py"),
        functions=("opus.interp.semantics.*",) + _ENGINE_MEMORY,
        tests=("tests/interp", "tests/differential/test_diff_interp.py",
               "tests/codegen/test_cuda_casts.py", "tests/bad_input/test_memory.py",
               "tests/lang/test_async_copy.py", "tests/lang/test_ldmatrix_interp.py",
               "tests/targets/test_isa_lanes_ldst.py",
               "tests/amd/test_amd_codegen.py::test_soffset_interpreter_against_numpy",
               "tests/amd/test_amd_codegen.py::test_soffset_must_be_warp_uniform",
               # the same element functions reached through kernels (med3, popc, min/max
               # NaN modes, stochastic rounding's hand table)
               "tests/lang/test_popc.py::test_popc_interpreter",
               "tests/lang/test_scalar_math_lanes.py::test_med3_f32_against_reference",
               "tests/lang/test_scalar_math_lanes.py::test_med3_other_types",
               "tests/lang/test_scalar_math_lanes.py::test_minmax_nan_modes",
               "tests/conversions/test_stochastic.py::test_hand_derived_table",
               # u32 offset views (_access_address, _promised_u32), 64-bit and unsigned bounds
               # (_window), sub-byte pointer steps and offsets (exec_ptr_add, _check_align):
               # the interpreter's tests of those files, not their slow compile checks
               *(_U32 + t for t in (
                   "plain_accesses_match_numpy", "layout_access_through_a_shifted_view",
                   "soffset_is_part_of_the_offset", "negative_off_with_soffset_in_range",
                   "inactive_lanes_are_not_checked", "the_limit_is_the_promise_not_the_buffer",
                   "u64_offsets")),
               "tests/bad_input/test_u32_views.py",
               "tests/bad_input/test_sub_byte.py::"
               "test_runtime_offsets_that_split_bytes_fault_in_the_interpreter"),
        why="the interpreter's arithmetic, casts, fma and memory checks: its own tests by hand "
            "values (tests/interp/test_semantics_reference.py: each element function against "
            "Python integers, IEEE rules written out, fractions, ml_dtypes), generated programs "
            "against the independent reference (diff_ref), fp8/e8m0 conversions against "
            "ml_dtypes, memory faults (bad-input), checking mode's messages (races, "
            "uninitialized reads, async copies, ldmatrix), pointers merged from two buffers, "
            "warp accesses against the ISA tables, AMD soffset",
        env={"OPUS_DIFF_EXAMPLES": "40", "OPUS_INTERPRET_COMPILE": "0"},
        # _FLOAT_BIN's min/max are made when semantics.py is imported
        fresh=("opus.interp.semantics.x__signed_zero_aware__mutmut_*",)),
    "cemit": Module(
        files=("src/opus/codegen/cemit.py",),
        tests=("tests/differential/test_diff_host.py", "tests/hostexec", "tests/codegen",
               *_CEMIT_CONVERSIONS),
        why="the emitted C executed on the host against the reference (the differential "
            "programs; tests/hostexec/test_emitter_paths.py and test_emitter_ops.py for the "
            "paths and ops they do not generate: dynamic smem, printf, while, pointer "
            "arithmetic, early return, 64-bit bounds, med3, popc, readfirstlane, u32 offsets, "
            "word stores, 128-lane vectors; bf16 truncation, stochastic rounding and the fp4 "
            "word encoder host-executed by tests/conversions), plus rendering and compile "
            "checks (tests/codegen/test_cemit_paths.py: async waits, the base emitter, the "
            "internal refusals)",
        env={"OPUS_DIFF_HOST_EXAMPLES": "6", "OPUS_TEST_FRESH_SPECS": "1"}),
    "dialects": Module(
        files=("src/opus/codegen/cuda.py", "src/opus/codegen/hip.py", "src/opus/codegen/fp8.py"),
        tests=("tests/differential/test_diff_host.py", "tests/hostexec", "tests/codegen",
               "tests/amd/test_amd_codegen.py", "tests/targets/test_isa_lanes_host.py",
               # session 13: the conversions' host-executed and assembly tests (packed pairs,
               # stochastic rounding, gfx950's fp4) and the cross-lane assembly tests reach
               # functions nothing above reached (no tests: hw_sr, sr_grid, _shuffle, ...)
               "tests/conversions/test_conversion_codegen.py",
               "tests/conversions/test_stochastic.py", "tests/conversions/test_gfx950_fp4_hw.py",
               "tests/lang/test_cross_lane_compile.py",
               # session 14: cp.async and buffer_load ... lds compiled (NVRTC's SASS, clang's
               # AMDGCN) and TMA's PTX compiled: render_cp_async, render_lds_load, _asm_text
               "tests/lang/test_async_compile.py", "tests/lang/test_tma_interp.py",
               "tests/lang/test_packed_types.py"),   # sub-byte accesses routed to subbyte.py
        why="CUDA/HIP spellings and helpers: host-executed C of both dialects, HIP helpers, "
            "AMD assembly checks, MFMA operand order on the host, conversions on the host and "
            "in AMD assembly, cross-lane lowerings in SASS and AMDGCN; the HIP renderer's "
            "offset facts by hand values (tests/codegen/test_hip_offset_analysis.py)",
        env={"OPUS_DIFF_HOST_EXAMPLES": "6", "OPUS_TEST_FRESH_SPECS": "1"}),
    "targets": Module(
        files=("src/opus/targets/base.py", "src/opus/targets/limits.py",
               "src/opus/targets/matrix.py"),
        tests=("tests/targets", "tests/bad_input/test_cache_and_targets.py",
               "tests/bad_input/test_mma_sync.py", "tests/bad_input/test_mfma.py",
               "tests/lang/test_mma_layouts.py"),   # OperandLayout.transposed (swap_ab)
        why="target tables, availability, launch limits and matrix-atom rows: the ISA lane "
            "tables, availability and contract tests, and the bad-input cases they refuse",
        env={"OPUS_INTERPRET_COMPILE": "0"},
        # made while the tests are collected (they are parametrized over targets and rows)
        fresh=tuple(f"opus.targets.{f}__mutmut_*" for f in (
            "base.xǁTargetǁ__init__", "base.xǁInstructionǁ__init__", "base.xǁSinceǁ__init__",
            "base.xǁOnlyOnǁ__init__", "limits.xǁLimitsǁ__init__", "matrix.x_round_mantissa",
            "matrix.xǁOperandLayoutǁ*", "matrix.xǁLaneLayoutǁ*", "matrix.xǁMatrixAtomǁ__post_init__",
            "matrix.xǁMatrixAtomǁ_check_fields", "matrix.x__check_covers_once", "matrix.x__bound",
            "matrix.x_instruction_table", "matrix.x_atom_index", "matrix.x_require_accumulator",
            "matrix.x_register_type", "matrix.x_operand_type"))),
    "cache": Module(
        files=("src/opus/runtime/cache.py", "src/opus/runtime/build.py"),
        functions=("opus.runtime.cache.*", "opus.runtime.build.x__pack__*",   # build.py: its
                   "opus.runtime.build.x__unpack__*", "opus.runtime.build.x_build__*"),  # key
        tests=("tests/runtime/test_disk_cache.py", "tests/runtime/test_cache_keys.py",
               "tests/bad_input/test_cache_and_targets.py",
               "tests/runtime/test_toolchain_faults.py"),
        why="the disk cache (keys, layout, corruption, read-only folders) and build's key and "
            "packing"),
    "specialization": Module(
        files=("src/opus/frontend/kernel.py", "src/opus/frontend/calls.py"),
        functions=("opus.frontend.calls.*",) + tuple(   # kernel.py: its key and guard parts
            f"opus.frontend.kernel.{f}__mutmut_*" for f in (
                "x_type_signature", "x__hashable", "x__default", "x__default_tails",
                "xǁKernelǁbind", "xǁKernelǁ_bind_plan", "xǁKernelǁconst_key",
                "xǁKernelǁlaunch_arguments", "xǁKernelǁentry_key",
                "xǁKernelǁ_constexprs_from",
                "xǁKernelǁspecialize", "xǁKernelǁspecialization", "xǁKernelǁ_respecialize")),
        tests=("tests/frontend/test_bind.py", "tests/frontend/test_helpers.py",
               "tests/frontend/test_launch_memo.py", "tests/frontend/test_kernel_definition.py",
               "tests/frontend/test_tracing.py", "tests/runtime/test_cache_keys.py",
               "tests/frontend/test_guards.py", "tests/frontend/test_calls_in_kernels.py",
               "tests/bad_input/test_definition.py",
               # these three also count the binaries that compiling each launch leaves
               # (OPUS_INTERPRET_COMPILE=1, a check of the runtime cache's keys: `cache` runs
               # them); their interpreted results are checked by other tests here
               *(x for t in ("constexpr_string_tuples_cut_differently_are_two_specializations",
                             "negative_zero_constexpr_is_its_own_specialization",
                             "namedtuple_constexpr_fields_keep_their_types")
                 for x in ("--deselect", f"tests/runtime/test_cache_keys.py::test_{t}"))),
        why="specialization keys and global guards: binding, helper calls, memoized launches, "
            "retracing on changed globals, the guards' parts by hand values, the refusals of "
            "kernel definitions (mutable globals, Python math on run-time values)",
        env={"OPUS_INTERPRET_COMPILE": "0"},
        # run when a test module is imported: @opus.func, @opus.kernel's defaults
        fresh=("opus.frontend.calls.x_func__mutmut_*", "opus.frontend.kernel.x__default__mutmut_*",
               "opus.frontend.kernel.x__default_tails__mutmut_*")),
}

# mutant name -> (text of the mutated line, as `mutmut show` prints it after "+", and why no
# test can tell the mutant from the original). Filled as surviving mutants are argued away.
_BUILD_MESSAGE = ("build._unpack's message is never shown: build() catches the ValueError and "
                  "rebuilds (an entry of another format)")
_ONE_ROW = ("with one row of element indices the faulting lane is 0 whichever branch is taken "
            "(k // vec is 0 for k < vec; k is 0 for one element)")
_PROMOTED = ("printf is variadic: C's default argument promotions (C11 6.5.2.2p6-7) pass a float "
             "as double and a bool, char or short as int whether or not the emitter casts it, and "
             "a 32-bit integer cast to int reaches printf as the same 32 bits")
_SLOW_PATH = ("a slower path that computes the same values: a stricter whole-vector condition "
              "(or the 64-bit one where the 32-bit one would do) sends accesses to the "
              "per-element path; a compile-time loop step taken as a run-time one compares "
              "through the flip mask; a kernel with a fixed (one-dimensional) block size "
              "computes its thread index with the general x + X * (y + Y * z), y and z being "
              "0. Only speed differs; no CPU-side test measures it")
_PREFIX = ("a fresh C name's prefix: fresh() keeps every name unique whatever the prefix, so "
           "only the spelling of the generated C changes")
_EMPTY_ELSE = ("an `else` whose region only yields nothing is emitted as an empty `else { }`: "
               "the same C program, one more line")
_NO_33_BITS = "integer types have 8, 16, 32 or 64 bits: > 33 is > 32 for each of them"
_UP_TO_33_BITS = "integer types have 8, 16, 32 or 64 bits: <= 33 is <= 32 for each of them"
_SAT_FP8_ONLY = ("sat applies to fp8 and e8m0 destinations only (lang/values.py cast): a decoded "
                 "value goes on to f32, f16, bf16 or f64 here")
_HELPER_NAME = "a helper's name: still one distinct name per (format, rounding, sat)"
_STRUCT_LANES = ("a register vector of >= 128 lanes (CUDA's scalar_lanes_from) kept as one struct "
                 "where it would be one C variable per lane (LaneNames): every use goes through "
                 "lanes() / lane(), which spell both, so the values are the same; only NVVM's "
                 "compile time differs (docs/compile_time.md)")
_WHOLE_RESULTS = ("structs_only unset while an op is rendered through structs: it only decides "
                  "whether that op's own results are split, and of the ops rendered this way only "
                  "bitcast has results of >= 128 lanes (loads and stores move at most 16 bytes, "
                  "mma.sync and ldmatrix results have at most 8 lanes, wgmma is lane-wise), which "
                  "render_bitcast names with fresh(), never split")
_SAME_NAMES = ("a value of a type split_lanes accepts is named by a LaneNames wherever it is "
               "defined (assign_lanes, declare, fresh_of, the results of _through_structs), so "
               "copy_stmt's two names are both split or neither")
_WIDE_POPC = ("a wider intermediate for popc's operand (a 64-bit cast, or an all-ones mask at 32 "
              "or 64 bits): __popc and __builtin_popcount take an unsigned int, so the same 32 "
              "bits reach them; 64-bit operands already use the 64-bit form")
_WORD_BYTES = ("the word store's bytes are the same: words are built from the lanes as 4 // "
               "itemsize lanes of 8 * itemsize bits each (5 // 2 is 4 // 2 for the 16-bit lanes "
               "that reach it), and the 1-byte lanes of packed fp8 pairs that the weakened size "
               "check lets through fill words the same way (2-byte vectors still return None)")
_SAT_IN_RANGE = ("sat decides only what the fp8 and e8m0 encoders give past the format's largest "
                 "finite value (fp8: 448, 57344, 240; e8m0: 2^127) and their helper's name; the "
                 "values reaching them here, a bool's 0 or 1 and the decoded sub-byte codes (at "
                 "most 28 in magnitude: fp6 e3m2; int4 -8, uint4 15; no NaN or inf), are far "
                 "below, and every other destination (sub-byte ones included) never reads sat")
_F32_WIDENING = ("sat of the widening to f32 on the way to f16/bf16: the source there is f32, "
                 "f64 or an integer (bool, sub-byte and storage sources return earlier), whose "
                 "conversion to f32 is a plain C cast that never reads sat")
_F64_OR_NOT = ("float_to_int (CUDA's cvt.rzi helper, HIP's compare-and-cast) reads only whether "
               "its src is f64; `or True` passes the lane's own f16/bf16/f32 type where dt.f32 "
               "was passed: the same helper and C")
_F64_DEFAULT = ("numpy's default type (np.zeros(shape, None), astype(None)) is float64: for a float C "
                "the type chosen anyway; for an integer C (i8/u8 operands, i32 accumulator) every "
                "product and partial sum is an integer below 2^53 in magnitude (k * 2^14 + 2^31), "
                "exact in float64, and the i32 wrap-around of _round_to_c is exact there too")
_ONE_STEP = ("k_slices() of a one-step row is one array of every K index, 0..k-1 in order (every K "
             "is held by some lane): A[:, :, ks] @ B[:, ks, :] is then the same matrix product as "
             "with slice(None)")
_RESHAPE_NEG = ("numpy (2.x, as installed) takes any negative size in reshape as the one unknown "
                "dimension: reshape(-2) is reshape(-1)")
_MEMO = ("a memo skipped, refilled or bounded at one more entry: Kernel.bind then computes the "
         "plan again (_bind_plan, the same pure function of the call's shape), so the bound "
         "arguments are the same; only the launch path's speed or the memo's size differs")
_WRAP = ("an integer C's wrap-around moved by 2 * lo: lo is 0 (unsigned) or -(hi - lo + 1) / 2 "
         "(two's complement), so 2 * lo is a multiple of the type's range, and astype to the "
         "C type keeps the value modulo that range either way")
_MEMO_TYPES = ("negative_zero's memo of which types are floating skipped, refilled or bounded at "
               "one more entry: the answer is computed again from the same isinstance tests")
_COPYSIGN = ("math.copysign(1.0, x) is 1.0 or -1.0, so < 0, <= 0 and < 1 agree, and "
             "copysign(2.0, x) has the same sign")
_REBIND = ("the helper bound again at each call instead of once per trace: TraceState.bind makes "
           "the same function from the same rewrite and namespace (its code information is "
           "registered once per rewrite), so the trace is the same")
_FRAME_KIND = ("a helper frame's kind spelled otherwise: Frame.kind is only ever compared with "
               "'kernel' (frontend/control.py), so any other value is a helper's")
_MEMO_KINDS = ("_kind's memo of each type's kind bounded at one more entry or refilled: the kind "
               "is computed again by the same tests")
_SAME_BUILTINS = ("which builtins the namespace holds: a module's globals always hold "
                  "'__builtins__' (import and exec set it), and it and calls.py's own are the one "
                  "builtins module or its dict; names resolve through _Namespace.__getitem__, "
                  "which falls back to self._builtins itself (checked: an unknown name is still "
                  "a NameError and min() is found with the entry None or missing)")
_FAST_PATH = ("Kernel.specialization's unlocked fast path (or the re-check under the lock) "
              "taking the slow branch: in one thread both checks see the same specialization "
              "and guards, so the same one is returned or made; with threads racing a second "
              "thread could retrace once more, making an equal specialization (no test races "
              "threads on one key's guards)")
_TABLES_AGAIN = ("the vendor's instruction tables loaded again at every ask: the first ones stored "
                 "in the class are kept and returned (the same dicts), so only speed differs")
_TABLES_LAST = ("the vendor's instruction tables stored whether or not another thread stored them "
                "first: only two threads loading them at once differ (the class then keeps the "
                "last ones, built from the same rows, equal to the first); one thread stores them "
                "once and returns them thereafter either way")
_FACTORY_NAME = ("the name of the factory function that makes a helper's rewritten function: it is "
                 "called once, at once, and never seen (the helper keeps its own name)")
_INFO_AGAIN = ("a rewrite's code information registered again in the trace's code_info: the same "
               "entries written again (update with the same dict)")
_DIV_STAND_IN = ("the stand-in divisor where b is 0 (and -1 for signed types) only avoids numpy's "
                 "division by zero (and INT_MIN // -1): those lanes' results are replaced by "
                 "np.where(bz, ...) / np.where(bm1, ...) whatever the stand-in gives")
_MOD_BY_ONE = ("a % b for b == -1 taken as a % 1 (or fmod(a, 1)): 0, the value np.where(bm1, "
               "zero, ...) gives anyway")
_TDIV_SIGNS = ("the truncation fix-up's sign tests differ only at a == 0 (then a % bs == 0, no "
               "fix-up) or bs == 0 (never: b == 0 is replaced by 1)")
_ALL_ONES = ("-1 of a signed type and ~0 are the same bits (two's complement): m1 is the same "
             "value on either branch")
_SHADOW_RESET = ("Shadow's initial last-writer/last-reader tables: Program.launch calls "
                 "new_block() before the first block runs, whose barrier() sets both to -1 (the "
                 "tables then hold int64 values or, from an object array, Python ints: the same "
                 "comparisons)")
_MULHI_BITS = ("the 64-bit product in int64 or uint64: both wrap modulo 2^64 (numpy arrays), so bits "
               "32..63 are the same, and the cast to 32 bits after >> 32 keeps just those (an "
               "arithmetic or logical shift differs only in the bits dropped)")
_FMA_SLOWER = ("fma_f64's fast path taken for fewer lanes (a stricter range or tie test): the others "
               "are computed exactly with Fractions (_fma_exact), giving the same correctly "
               "rounded value; only speed differs")
_FMA_WIDER = ("fma_f64's range for the error-free transformations widened at its edge (|a|, |b| up "
              "to 2^996, |c| or the product up to 2^1001, the product down to 2^-901): the bounds "
              "have margin: Veltkamp's split is exact below 2^996 (_split), sums below 2^1002 do "
              "not overflow, and a product of at least 2^-901 keeps Dekker's partial products "
              "(at least 2^-1005) normal, so the transformations stay exact there")
_FMA_TINY_R = ("the tie test allowed for |r| below 2^-1000: halving the gap to r's neighbour is "
               "exact for every gap but the smallest subnormal one, where half rounds to 0 and "
               "the test fails (the lane takes the exact path); the sums are exact error-free "
               "transformations with subnormals too")
_FMA_TRIVIAL = ("a product with an operand 1 is exact, so a*b + c rounds once as the fma does; a "
                "zero product no longer taken as trivial goes to _fma_exact, whose zero result "
                "is a*b + c in IEEE arithmetic (the same signed zero)")
_FMA_F64_IN = ("np.asarray without float64: the engine passes f64 arrays for an f64 fma (and "
               "Python floats are float64 anyway)")
_ERRSTATE = ("numpy's error state left as it is for overflow or invalid operations of lanes whose "
             "result is discarded (zeros, infinities, NaN): only warnings differ")
_ARANGE_I64 = "numpy's default integer for np.arange(T) is int64 on the 64-bit platforms we run"
_SCALAR_ROW = ("element indices are one-dimensional only for a scalar access (vec == 1; a vector "
               "access's are (T, vec)), where k // vec is k")
_SHIFT_DEFINED = ("numpy's shift ufuncs define shifts by the width or more (npy_lshift/npy_rshift: 0, "
                  "or the sign fill of a signed >>; an unsigned amount cast to the signed type is "
                  "negative, i.e. huge): without the guard those lanes get the same values (checked "
                  "for every integer type at amounts w, w + 1, 2w, -1 and -w)")
_SHIFT_STAND_IN = ("the stand-in amount of the lanes shifting by the width or more: their results "
                   "are replaced by np.where(ge, ...)")
_SAME_VIEW = "a view of an array as its own dtype has the same values"
_AS_F64 = "astype(None) is numpy's default float type, float64: the same conversion"
_EXACT_COMPARE = ("16-bit and storage floats compared in float64, or directly (numpy's float16, "
                  "ml_dtypes' comparisons), instead of in float32: their values are exact in each, "
                  "so every comparison agrees")
_FIX_ONLY_OFF_S = "the branch runs only where rd != s, so s > rd and s >= rd agree"
_TIE_ERR_NONZERO = "tie lanes are fix lanes, which have err != 0: err > 0 and err >= 0 agree"
_F32_FMA_PATH = ("an f32 fma through the 16-bit path: fma_f32 of astype(f32) copies, then astype(f32): "
                 "the same values")
_FMA_F32_WIDENS = "fma_f32 converts its operands to float64 first: the same values"
_FMA_W_ZERO = ("at w == 0 the half gap taken above r instead of below: the lane is fast only if "
               "2|q| is below it, and at a power of two (the only place the gaps differ, by a factor "
               "2) that still keeps |q| below the smaller half gap, so r is correctly rounded")
_FMA_W_GRID = ("w is a multiple of ulp(z) and |q| <= ulp(z) / 2, so r is correctly rounded whenever "
               "|w| < half; at |w| == half, 2 / |q| > 0 still fails the test (the exact path)")
_HUGE_SIGN = "float(x) overflows only for |x| >= 2^1024, where x > 0, x >= 0 and x > 1 agree"
_TWO_SUM_WRONG = ("the error term off by 2(s - bb), about 2a: far beyond half a gap, so no lane "
                  "passes fma_f64's near-tie test and every one takes the exact Fraction path "
                  "(fma_f32 has its own TwoSum): the same values, only speed differs")
_SPLIT_CONSTANT = ("Veltkamp's constant 2^27 + 2 = 2 (2^26 + 1) still splits a double into a hi and "
                   "a lo of at most 26 significant bits with hi + lo exact (checked on 200000 random "
                   "and all-ones significands), so Dekker's partial products stay exact")
_TWO_TO_64 = ("float(hi) + 1.0, float(hi) - 1.0 and float(hi) + 2.0 all round to 2^63 (2^64 for u64) "
              "in float64: the same threshold")
_TRUNCATE_CONVERTS = ("truncate_to_bf16 converts its input to f32 itself (ascontiguousarray(x, F32)): "
                      "the same numpy/ml_dtypes round-to-nearest conversion cast_fn(src, f32) makes")
_BOOL_OF_EXACT = ("x != 0 of f16/bf16/storage floats compared directly (numpy, ml_dtypes) or in f64 "
                  "instead of f32: the values are exact in each, the same answer")
_BOOL_SOURCE = ("a bool's values 0 and 1 are exact and in range in every destination type, so "
                "rounding and sat change nothing ('sr' and the truncations return earlier)")
_SAT_UNREAD = ("sat is read only for conversions to storage floats (_to_small_float), which return "
               "earlier: from a storage float to any other type it is never read")
_STORAGE_EXACT = ("a storage float's values are exact in f32 and f64, and the conversions from f32 "
                  "below treat an f64 array of them alike")
_SRC_UNREAD = "_float_to_int never reads its src argument"
_F32_AS_F32 = "an f32 source through astype(F32) first: the same array"
_SAME_WIDTH = ("a same-width float -> float conversion (f32 -> f32, f64 -> f64) is the identity "
               "through astype or through round-toward-zero")
_E8M0_EDGE = "at u == 0x800000 (2^-126), the one value between the two tests, both branches give k = 1"
_SR_SOURCES_EXACT = ("the source's values reach stochastic_grid unconverted (or through an f32 -> "
                     "f32 identity): stochastic_grid makes them f32 itself, exactly for "
                     "f16/bf16/f32 sources (SR_SOURCES)")
_FIRST_BINADE = ("the first normal binade through the small path: floor(|x| * 2^(23 - emin)) is "
                 "there the 24-bit significand the normal path adds the random bits to, and the "
                 "result q * 2^(emin - m) the same value")
_INF_STAYS = ("+-inf through the normal path: its zero fraction plus random bits below the kept "
              "mantissa never carries, and the mask leaves the infinity")
_PEND_NONE = "the pending bytes are read only as pend >= 0: -2 and -1 both mean none"
_RZ_HALVES_ONLY = ("an int (or narrower float) source to f32/f64 through rnd instead of astype: "
                   "rnd is astype itself but for 'rz', which reaches only f16/bf16/e8m0 "
                   "destinations (RZ_CONVERSIONS; those return earlier)")
_E8M0_K_F64 = ("the subnormal branch's k as float64 (0.0 or 1.0) instead of uint32: small integers, "
               "exact, made uint8 at the end: the same codes")
_TWO_OPERANDS = "ptr_add has two operands: operands[:3] is operands[:2]"
_UNSIGNED_32 = ('_wrap_type of a 32-bit type from the other branch: _UNSIGNED[32] is "unsigned", '
                "the same C text (64-bit types take _UNSIGNED[64] either way)")
_SHIFT_BY_0 = ("an i32 result through the narrow types' sign extension: (int)((int)(w << 0) >> 0) "
               "is (int)w, the same conversion of the same bits; only narrower types shift")
_PACKED_TO_F32 = ("sat of a sub-byte lane's widening to f32: cast_packed returns a float code's "
                  "decoded value as it is and passes an int4/uint4 lane's int on to cast_expr "
                  "(i32 -> f32: a plain C cast), neither reads sat; the rounding is read there "
                  "(the mutants changing it: tests/hostexec/test_arith_paths.py)")
_STORAGE_TO_F32 = ("rounding and sat of an fp8/e8m0 lane's widening to f32: "
                   "StorageConversions.cast_storage (codegen/fp8.py) returns decode_storage's "
                   "exact value for an f32 destination without reading either, and CUDA's "
                   "override reads them only for f16 destinations")
_NO_EMPTY_VECTOR = ("the vector struct's alignment for 0 bytes: nbytes is n * itemsize with n >= 1 "
                    "(VectorType refuses fewer lanes) and itemsize >= 1 (sub-byte types return "
                    "earlier), so the else branch is never taken")
_PLUS_ZERO = ("element i of an unhinted access spelled p[off] or p[off + i] for i = 0, vec = 1 or "
              "not: off + 0 is off's value (after the integer promotions, whatever off's C "
              "expression), so the same element")
_ONE_ELEMENT_WHOLE = ("a one-element load (vec 1) through at(None), the whole-vector form: its "
                      "result type is the element type (load results are scalars for vec 1, "
                      "ctype of a DType is scalar_ctype), so *(const T*)(p + off) is p[off], and "
                      "with a hint load_expr gets the same address, type and size")
_INDENT = "the indentation of one emitted C line: whitespace, the same program"
_RESET_BY_RENDER = ("render() sets lines and line_locs to [] before the first line is emitted "
                    "(signature() and kernel_top() return theirs): the initial value is never read")
_SIGN_OF_ONE = ("copysign(1 or 2, f) is +-1 or +-2, never 0: > 0 and >= 0 both test f's sign bit, "
                "which is what tells -0.0 from 0.0")
_PACKED_MASK = ("ml_dtypes keeps a 4- or 6-bit value in the low bits of its byte, the others 0 "
                "(int4 -1 is 0x0f): a mask of every bit (-1) or of one more bit keeps the same code")
_VECTOR_NAME_MEMO = ("ctype's vector_types memo: the name it returns is computed from the key "
                     "either way, the dict's first insertion fixes the structs' order (render "
                     "reads only its keys), and re-setting a key keeps its place")
_DYN_SMEM_ALIGN_SET = ("the default is never used: tracing (frontend/kernel.py) puts "
                       "dyn_smem_align in every function's attrs (16 unless a dynamic_smem view "
                       "asked for more), and only traced functions reach codegen")
_EVERY_PARAM_ALIGNED = ("tracing (frontend/kernel.py) gives every parameter an entry in the "
                        "function's 'align' attrs, so the default is never used")
_ZERO_OFFSET_ALIGNMENT = ("for a traced zero offset, lowbit only has to be at least the base "
                          "pointer's alignment, which is the size in bytes of an access through "
                          "it (lang/memory.py align_req), far below 2^30: 2^31 and 2 * 2^30 "
                          "give the same minimum")
_NO_DELTA_NO_WHOLE = ("whole_off matters only with delta > 0 (off + delta may be in range while off "
                      "is negative); with delta 0 a negative offset is out of range either way "
                      "(clamped to 0xfffffff0, or >= 2^31 unsigned past a 32-bit bound's "
                      "records), and every call with a delta passes whole_off itself")
_F32_TO_F32 = ("cast_expr from f32 to f32 is the expression itself: the branch that skips it "
               "gives the same C")
_WIDENING_SAT = ("saturation of a widening to f32 (a 16-bit float or fp8 value) never applies: "
                 "every such value is an f32")
_NOT_SAT_BRANCH = ("sat passed on as None inside `if not sat:`, where sat is False: fp8_overflowed "
                   "reads it only as `if sat`")
_SR_HALF_TYPE = ("the element type of the zero vector given as the instruction's `old` operand "
                 "(_Float16 or __bf16): its bits are zero either way and the builtin's result type is "
                 "the builtin's own; clang 22 gives the same gfx950 instructions for both spellings "
                 "(checked: conv_kernels.stochastic(f32, bf16 / f16) for gfx950, 87 instructions, "
                 "identical)")
_FP4_EXACT = ("the rounding mode or sat handed on to fp4 pairs: the encoder (v_cvt_scalef32_pk_fp4_f32, "
              "round to nearest even, fed values clamped to +-6) reads neither, and the two decoded "
              "lanes are e2m1 values (0, +-0.5 .. +-6), exact in every destination they go on to "
              "(f32, f16, bf16, the fp8 types)")
_ONE_FP4_ENCODER = ("the name of the one fp4 pair encoder helper (opus_f32x2_to_fp4_e2m1): no other "
                    "helper has it, spelled either way")
_SR_SAT_UNREAD = ("Target.conversion reads sat only for 'rn'/'rz' casts of storage types: for 'sr' "
                  "it answers from hw_sr by the destination alone")
_POW2_LIMITS = ("the float-to-integer limits are powers of two (2^bits, -2^(bits-1), 2^(bits-1), 0), "
                "exact as float and as double: the literal's suffix (f, F or none) changes no "
                "comparison's result")
_ALWAYS_VEC = ("load and store ops always carry vec (lang/memory.py emits it), and a vec-1 access "
               "gives no condition anyway (_uniform_exactness: g = 1 returns None): which "
               "default get() has, or skipping vec 2 as well as vec 1, changes nothing but the "
               "work done")
_DPP_OLD_UNREAD = ("a shuffle's DPP move has full row and bank masks (0xF, 0xF): old is read only "
                   "by a lane whose source is invalid, and that lane gets 0 when bound_ctrl is "
                   "set, as it is exactly when old is 0u; so bound_ctrl None (false) with old "
                   "0u, or old = the word with bound_ctrl set, gives the same lanes")
_C_SUFFIX_CASE = "a C integer literal's suffix is case-insensitive (0u is 0U)"
_GRID_EDGE = ("the software stochastic grid at the destination's smallest normal exponent: the "
              "subnormal formula with shift 0 is the normal one (q = (2^23 + frac + r) >> (23 - "
              "m) steps of 2^(emin-m) is what (a + r) & keep spells in the f32 bits, carry "
              "included); and bf16's steps as (float)q * 0x1p-133f instead of their bit pattern "
              "give the same exact f32 subnormal where f32 denormals are kept, as on both "
              "toolchains (NVRTC without -ftz; clang's gfx942/gfx950 kernels carry "
              ".amdhsa_float_denorm_mode_32 3, checked)")
_ROUND_TRIP_F16 = ("f16 -> f32 -> f16 (rn) where the f16 itself was used: every f16 value, NaN "
                   "included (as a NaN), comes back; fp8 codes decoded through f32 instead of "
                   "the f16 pair decoder are exact in f16 either way")
_SPACE_ALWAYS = ("a PointerType always has a space, 'global' or 'shared' (ir/types.py refuses any "
                 "other): getattr's default and 'generic' are never used")
_BITCAST_SAME = ("_buf_store reads the value's C type only to skip a __builtin_bit_cast to the buffer "
                 "type the value already has: without it the value is bit-cast to its own type, "
                 "the same bits")
_LIM_VALUES = ("0xfffffff0 // s for s = 1, 2, 4, 8 is 0xfffffff0, 0x7ffffff8, 0x3ffffffc or "
               "0x1ffffffe: never 2^31, so < and <= (and > and >=) 2^31 agree")
_STATIC_OFF_CHECKED = ("the straddle test (off >= 0 || off <= -vec) added where it was known "
                       "true (a static offset of 0 or more, or with a scalar offset, where a "
                       "negative off is out of range whole on both paths): the same elements, "
                       "one more run-time test")
EQUIVALENT: dict[str, tuple[str, str]] = {
    "opus.runtime.build.x__unpack__mutmut_5": (
        "if start + n >= len(data):",
        "differs only for an entry whose binary is empty; entries are written by build() from a "
        "successful NVRTC compile (never an empty CUBIN) and a truncated file never reaches "
        "_unpack (DiskCache checks the length and SHA-256 of every entry)"),
    "opus.runtime.build.x__unpack__mutmut_6": ('raise ValueError(None)', _BUILD_MESSAGE),
    "opus.runtime.build.x__unpack__mutmut_7": ('raise ValueError("XXtruncated build entryXX")',
                                               _BUILD_MESSAGE),
    "opus.runtime.build.x__unpack__mutmut_8": ('raise ValueError("TRUNCATED BUILD ENTRY")',
                                               _BUILD_MESSAGE),
    # engine._fault: `lane = lane if eidx_b.shape[0] > 1 else 0` only matters for one row of
    # indices, where lane is already 0 (k // vec < 1 for a (1, vec) array, k = 0 for (1,))
    "opus.interp.engine.x__fault__mutmut_12": (
        "lane = lane if (eidx_b.shape[0] > 1) or True else 0", _ONE_ROW),
    "opus.interp.engine.x__fault__mutmut_14": ("lane = lane if eidx_b.shape[0] >= 1 else 0",
                                               _ONE_ROW),
    "opus.interp.engine.x__fault__mutmut_21": (
        "i = int(eidx_b.reshape(-2)[k])", _RESHAPE_NEG),
    # frontend/calls.py
    **{f"opus.frontend.calls.x_negative_zero__mutmut_{n}": (text, _MEMO_TYPES) for n, text in (
        (4, "floating = None"), (5, "floating = _FLOATING.get(None)"),
        (10, "if len(_FLOATING) <= 4096:"), (11, "if len(_FLOATING) < 4097:"),
        (12, "_FLOATING[t] = None"))},
    **{f"opus.frontend.calls.x_negative_zero__mutmut_{n}": (text, _COPYSIGN) for n, text in (
        (22, "return x == 0 and math.copysign(2.0, x) < 0"),
        (23, "return x == 0 and math.copysign(1.0, x) <= 0"),
        (24, "return x == 0 and math.copysign(1.0, x) < 1"))},
    "opus.frontend.calls.x__runtime_value_hint__mutmut_10": (
        'module = getattr(f, "__module__", None) or "XXXX"',
        "a function whose __module__ is None: '' and 'XXXX' are both no numeric module and not "
        "'builtins', so no hint either way"),
    **{f"opus.frontend.calls.xǁTraceStateǁbind__mutmut_{n}": (text, _FACTORY_NAME) for n, text in (
        (10, "g = types.FunctionType(rewritten.factory, ns, None)(self.rt)"),
        (13, "g = types.FunctionType(rewritten.factory, ns, )(self.rt)"),
        (14, 'g = types.FunctionType(rewritten.factory, ns, "XX__opus_factoryXX")(self.rt)'),
        (15, 'g = types.FunctionType(rewritten.factory, ns, "__OPUS_FACTORY")(self.rt)'))},
    **{f"opus.frontend.calls.xǁTraceStateǁbind__mutmut_{n}": (text, _INFO_AGAIN) for n, text in (
        (17, "if id(None) not in self.info_seen:"), (19, "self.info_seen.add(None)"),
        (20, "self.info_seen.add(id(None))"))},
    "opus.frontend.calls.xǁTraceStateǁbind__mutmut_22": ("self.bound[fn] = None", _REBIND),
    "opus.frontend.calls.x_call__mutmut_27": (
        "conv = _CONVERSIONS.get(None, _UNSEEN)",
        "a method's conversion looked up under None, never a key: _conversion(fn) computes it "
        "again (the same rewrite of the same code), so only the trace's speed differs"),
    "opus.frontend.calls.x_call__mutmut_52": (
        'elif getattr(t, "_opus_launch_only", None):',
        "the default of a missing attribute None instead of False: both are false"),
    "opus.frontend.calls.x__call_helper__mutmut_4": ("g = None", _REBIND),
    "opus.frontend.calls.x__call_helper__mutmut_5": ("g = state.bound.get(None)", _REBIND),
    **{f"opus.frontend.calls.x__call_helper__mutmut_{n}": (text, _FRAME_KIND) for n, text in (
        (13, "state.frames.append(Frame(None))"), (14, 'state.frames.append(Frame("XXhelperXX"))'),
        (15, 'state.frames.append(Frame("HELPER"))'))},
    "opus.frontend.calls.x__conversion__mutmut_28": (
        "source = explicit if explicit is not None else capture_source(fn, None)",
        "capture_source's at_definition None instead of False: it is only tested for truth"),
    "opus.frontend.kernel.xǁKernelǁlaunch_arguments__mutmut_1": (
        "memoizable = None",
        "no launch is memoized per argument count (None is false): the launch path binds and "
        "looks up the entry every time, with the same result; only its speed differs"),
    **{f"opus.frontend.calls.x__kind__mutmut_{n}": (text, _MEMO_KINDS) for n, text in (
        (19, "if len(_KIND_OF_TYPE) <= 4096:"), (20, "if len(_KIND_OF_TYPE) < 4097:"),
        (21, "_KIND_OF_TYPE[t] = None"))},
    "opus.frontend.calls.xǁFrameǁ__init____mutmut_3": (
        "self.returned = None", "read only for its truth (control.py): None is false as False is"),
    "opus.frontend.calls.xǁFrameǁ__init____mutmut_5": (
        'self.value = ""',
        "read only after a return set it (control.py sets returned and value together, and "
        "reads value where returned is true)"),
    "opus.frontend.calls.xǁ_Namespaceǁ__getitem____mutmut_25": (
        "self._state.read(module, name, name, value, None)",
        "from_cell None instead of False: only tested for truth (the refusal's wording)"),
    **{f"opus.frontend.calls.xǁ_Namespaceǁ__init____mutmut_{n}": (text, _SAME_BUILTINS)
       for n, text in (
        (11, 'b = fn.__globals__.get(None, __builtins__)'),
        (12, 'b = fn.__globals__.get("__builtins__", None)'),
        (14, 'b = fn.__globals__.get("__builtins__", )'),
        (15, 'b = fn.__globals__.get("XX__builtins__XX", __builtins__)'),
        (16, 'b = fn.__globals__.get("__BUILTINS__", __builtins__)'),
        (21, 'dict.__setitem__(self, None, self._builtins)'),
        (22, 'dict.__setitem__(self, "__builtins__", None)'),
        (26, 'dict.__setitem__(self, "XX__builtins__XX", self._builtins)'),
        (27, 'dict.__setitem__(self, "__BUILTINS__", self._builtins)'))},
    **{f"opus.frontend.kernel.xǁKernelǁspecialization__mutmut_{n}": (text, _FAST_PATH)
       for n, text in ((3, "s = None"), (4, "s = self._specs.get(None)"),
                       (7, "if s is None or (s.guards or not guards_hold(s.guards)):"),
                       (14, "if s is None or (s.guards or not guards_hold(s.guards)):"))},
    "opus.frontend.kernel.xǁKernelǁ_respecialize__mutmut_21": (
        "earlier.insert(1, stale)",
        "the stale specialization kept second instead of first among the earlier ones: one is "
        "taken only when its guards hold, and two whose guards both hold were traced under "
        "today's values alike"),
    "opus.frontend.kernel.xǁKernelǁ_respecialize__mutmut_22": (
        "del earlier[9:]", "nine earlier specializations kept instead of eight: memory only"),
    # frontend/kernel.py Kernel.bind: its two memos (the defaults completing a positional call,
    # a plan per call shape) skipped, refilled or bounded otherwise
    # _default_tails: the defaults completing a positional call, a memo of Kernel.bind's
    # fast path; a tail missing (or None) sends the call to the plan, with the same result
    **{f"opus.frontend.kernel.x__default_tails__mutmut_{n}": (text, _MEMO) for n, text in (
        (5, "for n in range(0, -1):"), (6, "for n in range(len(params), -1):"),
        (7, "for n in range(len(params), 0, ):"), (8, "for n in range(len(params), 1, -1):"),
        (9, "for n in range(len(params), 0, +1):"), (17, "tail = None"),
        (19, "tails[n - 1] = None"))},
    **{f"opus.frontend.kernel.xǁKernelǁbind__mutmut_{n}": (text, _MEMO) for n, text in (
        (2, "tail = None"), (3, "tail = self._default_tails.get(None)"), (8, "plan = None"),
        (9, "plan = self._bind_plans.get(None)"), (12, "if len(self._bind_plans) <= 256:"),
        (13, "if len(self._bind_plans) < 257:"), (14, "self._bind_plans[shape] = None"))},
    # targets/matrix.py
    **{f"opus.targets.matrix.xǁMatrixAtomǁ_round_to_c__mutmut_{n}": (text, _WRAP) for n, text in (
        (3, "return ((x - lo) % (hi - lo + 1) - lo).astype(self.c.np_dtype)"),
        (5, "return ((x + lo) % (hi - lo + 1) + lo).astype(self.c.np_dtype)"))},
    "opus.targets.matrix.xǁOperandLayoutǁcoords__mutmut_31": (
        "k = len(d)",
        "k is 0 before the first of the two x-dims (OperandLayout refuses any other count), so "
        "k = len(d) and k += len(d) give the same k for the second; after it k is not read"),
    "opus.targets.matrix.xǁOperandLayoutǁ__init____mutmut_37": (
        "self.y_order = None if (order == tuple(range(len(ys)))) and False else order",
        "an identity register order kept as (0, 1, ...) instead of None: both mean left to "
        "right to every reader (the layout's own _slots are computed from `order` either way; "
        "transposed() and lang/mma.py pass y_order on to OperandLayout / opus.Layout, which "
        "take None and the identity alike)"),
    # targets/matrix.py MatrixAtom.emulate
    **{f"opus.targets.matrix.xǁMatrixAtomǁemulate__mutmut_{n}": (text, _F64_DEFAULT) for n, text in (
        (11, "exact = None"),
        (12, "exact = np.int64 if (self.c.is_int) and False else np.float64"),
        (16, "A = np.zeros((W, self.m, self.k), None)"),
        (18, "A = np.zeros((W, self.m, self.k), )"),
        (21, "B = np.zeros((W, self.k, self.n), None)"),
        (23, "B = np.zeros((W, self.k, self.n), )"),
        (26, "C = np.zeros((W, self.m, self.n), None)"),
        (28, "C = np.zeros((W, self.m, self.n), )"),
        (36, "A[w, ar[None], ac[None]] = np.asarray(a).astype(None).reshape(W, self.warp, -1)"),
        (47, "B[w, br[None], bc[None]] = np.asarray(b).astype(None).reshape(W, self.warp, -1)"),
        (58, "C[w, cr[None], cc[None]] = np.asarray(c).astype(None).reshape(W, self.warp, -1)"))},
    **{f"opus.targets.matrix.xǁMatrixAtomǁemulate__mutmut_{n}": (text, _RESHAPE_NEG) for n, text in (
        (39, "A[w, ar[None], ac[None]] = np.asarray(a).astype(exact).reshape(W, self.warp, -2)"),
        (50, "B[w, br[None], bc[None]] = np.asarray(b).astype(exact).reshape(W, self.warp, -2)"),
        (61, "C[w, cr[None], cc[None]] = np.asarray(c).astype(exact).reshape(W, self.warp, -2)"))},
    **{f"opus.targets.base.xǁTargetǁrequire_cp_async__mutmut_{n}": (
        f'def require_cp_async(self, nbytes, cache="{text}"):',
        "the default cache operator spelled otherwise: it is only compared with 'cg', so any "
        "other default means .ca as 'ca' does") for n, text in ((1, "XXcaXX"), (2, "CA"))},
    "opus.targets.matrix.xǁMatrixAtomǁ__post_init____mutmut_29": (
        'getattr(fn, "check", lambda atom: 0)(self)',
        "a lowering without a check gets a no-op returning 0 instead of None: the value is "
        "discarded"),
    "opus.targets.matrix.x_round_mantissa__mutmut_52": ("return out.astype(None)",
                                                       "astype(None) is numpy's default, float64"),
    "opus.targets.matrix.xǁMatrixAtomǁemulate__mutmut_89": (
        "return [D[w, cr[None], cc[None]].reshape(T, -2)]", _RESHAPE_NEG),
    **{f"opus.targets.base.xǁTargetǁ_instruction_tables__mutmut_{n}": (text, _TABLES_AGAIN)
       for n, text in ((1, "tables = None"), (2, 'tables = cls.__dict__.get(None)'),
                       (3, 'tables = cls.__dict__.get("XX_tablesXX")'),
                       (4, 'tables = cls.__dict__.get("_TABLES")'))},
    **{f"opus.targets.base.xǁTargetǁ_instruction_tables__mutmut_{n}": (text, _TABLES_LAST)
       for n, text in ((10, "if cls.__dict__.get(None) is None:"),
                       (11, 'if cls.__dict__.get("XX_tablesXX") is None:'),
                       (12, 'if cls.__dict__.get("_TABLES") is None:'))},
    **{f"opus.targets.base.xǁTargetǁconversion__mutmut_{n}": (
        f'def conversion(self, src, dst, rounding="{text}", sat=False) -> str:',
        "the default rounding spelled otherwise: conversion() only compares rounding with 'sr' "
        "and looks it up among 'rz'/'truncate'/'truncate_with_nan'/'sr' (_check_rounding), so "
        "any other default means round to nearest as 'rn' does") for n, text in (
        (1, "XXrnXX"), (2, "RN"))},
    "opus.targets.base.xǁTargetǁconversion__mutmut_3": (
        'def conversion(self, src, dst, rounding="rn", sat=True) -> str:',
        "conversion() never reads sat (saturation changes the values, not how the chip converts: "
        "the dialects read it from the cast op)"),
    "opus.targets.matrix.xǁMatrixAtomǁemulate__mutmut_68": (
        "for ks in (self.k_slices() if (self.numerics.k_steps > 1) or True else [slice(None)]):",
        _ONE_STEP),
    "opus.targets.matrix.xǁMatrixAtomǁemulate__mutmut_69": (
        "for ks in (self.k_slices() if self.numerics.k_steps >= 1 else [slice(None)]):",
        _ONE_STEP),
    # interp/semantics.py and engine.py (the `semantics` module; docs/testing.md's table)
    **{f"opus.interp.semantics.x__int_div__mutmut_{n}": (text, _DIV_STAND_IN) for n, text in (
        (4, "one, zero = nd.type(2), nd.type(0)"), (24, "bs = np.where(None, one, b)"),
        (55, "bs = np.where(None, one, b)"), (61, "bs = np.where(bz & bm1, one, b)"))},
    **{f"opus.interp.semantics.x__int_div__mutmut_{n}": (text, _MOD_BY_ONE) for n, text in (
        (89, "return np.where(bz, a, np.where(None, zero, a % bs))"),
        (133, "return np.where(bz, a, np.where(None, zero, np.fmod(a, bs)))"))},
    **{f"opus.interp.semantics.x__int_div__mutmut_{n}": (text, _TDIV_SIGNS) for n, text in (
        (106, "adj = ((a % bs) != 0) & ((a <= 0) != (bs < 0))"),
        (107, "adj = ((a % bs) != 0) & ((a < 1) != (bs < 0))"),
        (109, "adj = ((a % bs) != 0) & ((a < 0) != (bs <= 0))"),
        (110, "adj = ((a % bs) != 0) & ((a < 0) != (bs < 1))"))},
    **{f"opus.interp.semantics.x_{f}__mutmut_{n}": (text, _ALL_ONES) for f, n, text in (
        ("_int_div", 8, 'm1 = nd.type(-1) if (e.kind == "int") and False else ~zero'),
        ("_int_div", 14, 'm1 = nd.type(-1) if e.kind == "XXintXX" else ~zero'),
        ("_int_div", 15, 'm1 = nd.type(-1) if e.kind == "INT" else ~zero'),
        ("_shift", 8, 'm1 = nd.type(-1) if (e.kind == "int") and False else ~z'),
        ("_shift", 14, 'm1 = nd.type(-1) if e.kind == "XXintXX" else ~z'),
        ("_shift", 15, 'm1 = nd.type(-1) if e.kind == "INT" else ~z'))},
    "opus.interp.semantics.x__shift__mutmut_16": (
        'm1 = nd.type(-1) if e.kind == "int" else z',
        "m1 (the sign fill of >> by the width or more) is read only on the signed branch; the "
        "unsigned value of m1 is never used"),
    "opus.interp.semantics.x_med3_fn__mutmut_30": (
        "return np.where(nan, mn(mn(a, b), c), med) if (np.any(nan)) or True else med",
        "the NaN rule applied also when no operand is NaN: np.where with an all-false mask "
        "returns med; only speed differs"),
    "opus.interp.semantics.x__ieee2008__mutmut_13": (
        "return np.where(s, r.dtype.type(np.nan), r) if (np.any(s)) or True else r",
        "np.where with an all-false mask returns r; only speed differs"),
    "opus.interp.semantics.x__ieee2008__mutmut_20": (
        "return np.where(s, r.dtype.type(None), r) if np.any(s) else r",
        "numpy's float32(None) and float64(None) are NaN (a quiet one): the same value"),
    **{f"opus.interp.engine.xǁShadowǁ__init____mutmut_{n}": (text, _SHADOW_RESET) for n, text in (
        (10, "self.wtid = np.full(nbytes, -1, None)"), (12, "self.wtid = np.full(nbytes, I64)"),
        (13, "self.wtid = np.full(nbytes, -1, )"), (14, "self.wtid = np.full(nbytes, +1, I64)"),
        (15, "self.wtid = np.full(nbytes, -2, I64)"), (19, "self.rtid = np.full(nbytes, -1, None)"),
        (21, "self.rtid = np.full(nbytes, I64)"), (22, "self.rtid = np.full(nbytes, -1, )"),
        (23, "self.rtid = np.full(nbytes, +1, I64)"), (24, "self.rtid = np.full(nbytes, -2, I64)"))},
    "opus.interp.engine.xǁShadowǁbarrier__mutmut_3": (
        "self.wtid[:] = -2",
        "the last writer is read only as `w >= 0` (here and in sync_atomics._forget_accesses): "
        "-2 and -1 both mean none"),
    "opus.interp.engine.xǁShadowǁ_bytes__mutmut_17": (
        "b = ((buf.byte0 + eidx * isz)[:, None] + _arange(isz)).reshape(-2)", _RESHAPE_NEG),
    "opus.interp.engine.x__flat_with_tids__mutmut_28": ("return e.reshape(-2), t.reshape(-1)",
                                                       _RESHAPE_NEG),
    "opus.interp.engine.x__flat_with_tids__mutmut_31": ("return e.reshape(-1), t.reshape(-2)",
                                                       _RESHAPE_NEG),
    "opus.interp.engine.xǁProgramǁexec_store__mutmut_39": (
        "state.writes += 2",
        "state.writes is read only by LoopProgress.check, which asks whether it changed between "
        "two iterations of one loop; every store and every changing atomic adds a positive "
        "count (sync_atomics adds the number of changed elements), so 2 per store changes it "
        "exactly when 1 does (a Python int, from 0 per block: no overflow)"),
    "opus.interp.engine.xǁProgramǁ_window__mutmut_24": (
        "return lo, lo + b.astype(None)",
        "the window's end as float64 instead of int64: it is only compared with element indices "
        "of a real buffer (_eidx_valid), or in async copies less an index (hi - sidx, hi - lo) "
        "and the difference compared with small counts; below 2^53 float64 holds all of it "
        "exactly, and a sum it rounds (|lo + b| past 2^53: a u64 bound clamped to 2^62, a huge "
        "i64) stays past every index on the same side, so no comparison changes"),
    **{f"opus.interp.engine.x__flat_with_tids__mutmut_{n}": (text, _ARANGE_I64) for n, text in (
        (17, "t = np.broadcast_to(np.arange(T, dtype=None).reshape("),
        (19, "t = np.broadcast_to(np.arange(T, ).reshape("))},
    **{f"opus.interp.engine.x__fault__mutmut_{n}": (text, _SCALAR_ROW) for n, text in (
        (6, "lane = k // vec if (eidx_b.ndim > 1) or True else k"),
        (8, "lane = k // vec if eidx_b.ndim >= 1 else k"))},
    **{f"opus.interp.semantics.x__mulhi__mutmut_{n}": (text, _MULHI_BITS) for n, text in (
        (6, 'wide = np.dtype(np.int64 if (e.kind == "int") and False else np.uint64)'),
        (7, 'wide = np.dtype(np.int64 if (e.kind == "int") or True else np.uint64)'),
        (8, 'wide = np.dtype(np.int64 if e.kind != "int" else np.uint64)'),
        (9, 'wide = np.dtype(np.int64 if e.kind == "XXintXX" else np.uint64)'),
        (10, 'wide = np.dtype(np.int64 if e.kind == "INT" else np.uint64)'))},
    **{f"opus.interp.semantics.x__popc__mutmut_{n}": (text, "a copy made or not: the same values")
       for n, text in ((8, "astype(e.np_dtype, copy=None)"), (10, "astype(e.np_dtype, )"),
                       (12, "astype(e.np_dtype, copy=True)"))},
    "opus.interp.semantics.x_med3_fn__mutmut_46": (
        "return _via_f32(f, e) if (_is_half(e)) and False else f",
        "med3 of 16-bit floats computed on them directly instead of on f32 copies: min, max and "
        "the NaN rule return one of the operands, so no rounding happens either way"),
    "opus.interp.engine.xǁShadowǁnew_block__mutmut_1": (
        "self.written[:] = None", "None stored into a bool array is False"),
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_SLOWER) for n, text in (
        (36, 'exact = ((np.abs(a) < 2.0 * 995) & (np.abs(b) < 2.0**995) & (np.abs(c) < 2.0**1000)'), (41, 'exact = ((np.abs(a) < 2.0**995) & (np.abs(b) < 2.0 * 995) & (np.abs(c) < 2.0**1000)'), (46, 'exact = ((np.abs(a) < 2.0**995) & (np.abs(b) < 2.0**995) & (np.abs(c) < 2.0 * 1000)'), (51, '& (np.abs(p) < 2.0 * 1000) & (np.abs(p) >= 2.0**-900))'), (55, '& (np.abs(p) < 2.0**1000) & (np.abs(p) > 2.0**-900))'), (58, '& (np.abs(p) < 2.0**1000) & (np.abs(p) >= 2.0**+900))'), (83, 'far_from_tie = (np.abs(w) + 3 * np.abs(q) < half) & (np.abs(r) >= 2.0**-1000)'), (87, 'far_from_tie = (np.abs(w) + 2 * np.abs(q) < half) & (np.abs(r) > 2.0**-1000)'), (89, 'far_from_tie = (np.abs(w) + 2 * np.abs(q) < half) & (np.abs(r) >= 3.0**-1000)'), (90, 'far_from_tie = (np.abs(w) + 2 * np.abs(q) < half) & (np.abs(r) >= 2.0**+1000)'), (94, 'ok = exact & ((q == 0) & far_from_tie)'))},
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_WIDER) for n, text in (
        (35, 'exact = ((np.abs(a) <= 2.0**995) & (np.abs(b) < 2.0**995) & (np.abs(c) < 2.0**1000)'), (38, 'exact = ((np.abs(a) < 2.0**996) & (np.abs(b) < 2.0**995) & (np.abs(c) < 2.0**1000)'), (40, 'exact = ((np.abs(a) < 2.0**995) & (np.abs(b) <= 2.0**995) & (np.abs(c) < 2.0**1000)'), (43, 'exact = ((np.abs(a) < 2.0**995) & (np.abs(b) < 2.0**996) & (np.abs(c) < 2.0**1000)'), (45, 'exact = ((np.abs(a) < 2.0**995) & (np.abs(b) < 2.0**995) & (np.abs(c) <= 2.0**1000)'), (48, 'exact = ((np.abs(a) < 2.0**995) & (np.abs(b) < 2.0**995) & (np.abs(c) < 2.0**1001)'), (50, '& (np.abs(p) <= 2.0**1000) & (np.abs(p) >= 2.0**-900))'), (53, '& (np.abs(p) < 2.0**1001) & (np.abs(p) >= 2.0**-900))'), (59, '& (np.abs(p) < 2.0**1000) & (np.abs(p) >= 2.0**-901))'))},
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_TINY_R) for n, text in (
        (88, 'far_from_tie = (np.abs(w) + 2 * np.abs(q) < half) & (np.abs(r) >= 2.0 * -1000)'), (91, 'far_from_tie = (np.abs(w) + 2 * np.abs(q) < half) & (np.abs(r) >= 2.0**-1001)'))},
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_TRIVIAL) for n, text in (
        (101, 'trivial = ~(np.isfinite(a) & np.isfinite(b)) | (a == 0) & (b == 0)'), (108, 'trivial = ~(np.isfinite(a) & np.isfinite(b)) | (a == 1) | (b == 0)'), (110, 'trivial = ~(np.isfinite(a) & np.isfinite(b)) | (a == 0) | (b == 1)'))},
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_F64_IN) for n, text in (
        (3, 'a, b, c = np.broadcast_arrays(*(np.asarray(x, None) for x in (a, b, c)))'), (5, 'a, b, c = np.broadcast_arrays(*(np.asarray(x, ) for x in (a, b, c)))'))},
    "opus.interp.semantics.x_fma_f64__mutmut_6": (
        'with np.errstate(all=None):',
        "np.errstate(all=None) leaves numpy's error handling as it is: the overflow or invalid "
        "operations of the discarded fast-path lanes then warn; the values are the same"),
    **{f"opus.interp.semantics.x_truncate_to_bf16__mutmut_{n}": (text, (
        "every caller passes an f32 array (cast_fn converts other sources first), which "
        "ascontiguousarray keeps")) for n, text in (
        (4, "u = np.ascontiguousarray(x, None).view(np.uint32)"),
        (6, "u = np.ascontiguousarray(x, ).view(np.uint32)"))},
    **{f"opus.interp.semantics.x__stochastic__mutmut_{n}": (text, (
        "the source's values reach stochastic_grid unconverted (or through an f32 -> f32 "
        "identity): stochastic_grid makes them f32 itself, exactly for f16/bf16/f32 sources "
        "(SR_SOURCES)")) for n, text in (
        (20, 'exact = cast_fn(src, dt.f32) if src.name == "f32" else (lambda a: a)'),
        (21, 'exact = cast_fn(src, dt.f32) if src.name != "XXf32XX" else (lambda a: a)'),
        (22, 'exact = cast_fn(src, dt.f32) if src.name != "F32" else (lambda a: a)'))},
    "opus.interp.semantics.x__via_f32__mutmut_3": (
        "return f(*[x.astype(None) for x in xs]).astype(nd)",
        "16-bit float arithmetic in f64 instead of f32, rounded once to the 16-bit type: both "
        "carry at least 2p + 2 bits of the 11- or 8-bit significands, so the double rounding "
        "of + - * / gives the correctly rounded result either way (min/max/neg/abs are exact)"),
    "opus.interp.semantics.x_binary_fn__mutmut_19": (
        "return _via_f32(f, e) if (_is_half(e)) and False else f",
        "f16/bf16 arithmetic on the 16-bit arrays directly: numpy's float16 and ml_dtypes' "
        "bfloat16 compute each operation in float32 and round once, as _via_f32 does"),
    "opus.interp.semantics.x_unary_fn__mutmut_10": (
        'return _via_f32(f, e) if (_is_half(e)) and False else f',
        'neg and abs are exact: on f16/bf16 arrays directly or through f32, the same value'),
    "opus.interp.semantics.x_unary_fn__mutmut_11": (
        'return _via_f32(f, e) if (_is_half(e)) or True else f',
        'neg and abs are exact: on f16/bf16 arrays directly or through f32, the same value'),
    "opus.interp.semantics.x_unary_fn__mutmut_45": (
        'return lambda a: np.where(a <= z, z - a, a)',
        'integer abs at a == 0: z - a is 0, a is 0'),
    "opus.interp.semantics.x_stochastic_grid__mutmut_29": (
        'with np.errstate(over=None, invalid="ignore"):',
        _ERRSTATE),
    "opus.interp.semantics.x_stochastic_grid__mutmut_30": (
        'with np.errstate(over="ignore", invalid=None):',
        _ERRSTATE),
    "opus.interp.semantics.x_stochastic_grid__mutmut_31": (
        'with np.errstate(invalid="ignore"):',
        _ERRSTATE),
    "opus.interp.semantics.x_stochastic_grid__mutmut_32": (
        'with np.errstate(over="ignore", ):',
        _ERRSTATE),
    "opus.interp.semantics.x_stochastic_grid__mutmut_4": (
        'u = np.ascontiguousarray(x, None).view(np.uint32)',
        'the caller (_stochastic) passes f32 values, which ascontiguousarray keeps'),
    "opus.interp.semantics.x_stochastic_grid__mutmut_6": (
        'u = np.ascontiguousarray(x, ).view(np.uint32)',
        'the caller (_stochastic) passes f32 values, which ascontiguousarray keeps'),
    "opus.interp.semantics.x_stochastic_grid__mutmut_42": (
        's = np.floor(np.abs(x.astype(None)) * 2.0 ** (23 - emin)).astype(np.uint64)',
        "numpy's default float type is float64: the same conversion"),
    "opus.interp.semantics.x_stochastic_grid__mutmut_58": (
        'small = (q.astype(None) * 2.0 ** (emin - m)).astype(F32).view(np.uint32)',
        "numpy's default float type is float64: the same conversion"),
    "opus.interp.semantics.x_stochastic_grid__mutmut_69": (
        'mag = np.where(a > np.uint32((emin + 127) << 23), normal, small)',
        "at |x| == 2^emin exactly both paths give the same value: the small path's floor(|x| * 2^(23 - emin)) is 2^23, the significand the normal path adds the random bits to"),
    "opus.interp.engine.x__fault__mutmut_7": (
        "lane = k / vec if eidx_b.ndim > 1 else k",
        "the lane as a float k / vec: it is only passed to state.who(), which takes int(t), and "
        "int(k / vec) is k // vec for 0 <= k < 2^53"),
    # session 9: the survivors left after the by-hand kills (docs/testing.md)
    **{f"opus.interp.semantics.x__shift__mutmut_{n}": (text, _SHIFT_DEFINED) for n, text in (
        (22, 'ge = None'),
        (23, 'ge = bu > w'),
        (25, 'sh = np.where(None, uz, bu)'))},
    **{f"opus.interp.semantics.x__shift__mutmut_{n}": (text, _SHIFT_STAND_IN) for n, text in (
        (4, 'uz, z = ut.type(1), nd.type(0)'),)},
    **{f"opus.interp.semantics.x__shift__mutmut_{n}": (text, _SAME_VIEW) for n, text in (
        (19, 'bu = b.view(ut) if (b.dtype != ut) or True else b'),
        (36, 'r = (a.view(ut) << sh).view(nd) if (a.dtype != ut) or True else a << sh'))},
    **{f"opus.interp.semantics.x_cmp_fn__mutmut_{n}": (text, _EXACT_COMPARE) for n, text in (
        (2, 'if _is_half(e) and e.storage_only:'),
        (9, 'return lambda a, b: f(a.astype(None), b.astype(F32))'),
        (10, 'return lambda a, b: f(a.astype(F32), b.astype(None))'))},
    **{f"opus.interp.semantics.x_fma_f32__mutmut_{n}": (text, _AS_F64) for n, text in (
        (2, 'a, b, c = a.astype(None), b.astype(F64), c.astype(F64)'),
        (3, 'a, b, c = a.astype(F64), b.astype(None), c.astype(F64)'),
        (4, 'a, b, c = a.astype(F64), b.astype(F64), c.astype(None)'),
        (19, 'rd = r.astype(None)'),
        (46, 'tie = fix & ((rd + other.astype(None)) * 0.5 == s)'))},
    **{f"opus.interp.semantics.x_fma_f32__mutmut_{n}": (text, _FIX_ONLY_OFF_S) for n, text in (
        (38, 'other = np.nextafter(r, np.where(s >= rd, np.float32(np.inf), np.float32(-np.inf)))'),)},
    **{f"opus.interp.semantics.x_fma_f32__mutmut_{n}": (text, _TIE_ERR_NONZERO) for n, text in (
        (72, 'r = np.where(tie, np.where(err >= 0, up, dn), r)'),)},
    **{f"opus.interp.semantics.x_fma_fn__mutmut_{n}": (text, _F32_FMA_PATH) for n, text in (
        (5, 'if e.name == "XXf32XX":'),
        (6, 'if e.name == "F32":'))},
    **{f"opus.interp.semantics.x_fma_fn__mutmut_{n}": (text, _FMA_F32_WIDENS) for n, text in (
        (16, 'return lambda a, b, c: fma_f32(a.astype(None), b.astype(F32), c.astype(F32)).astype(nd)'),
        (17, 'return lambda a, b, c: fma_f32(a.astype(F32), b.astype(None), c.astype(F32)).astype(nd)'),
        (18, 'return lambda a, b, c: fma_f32(a.astype(F32), b.astype(F32), c.astype(None)).astype(nd)'))},
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_W_ZERO) for n, text in (
        (74, 'half = np.abs(np.nextafter(r, np.where(w >= 0, np.inf, -np.inf)) - r) * 0.5'),)},
    **{f"opus.interp.semantics.x_fma_f64__mutmut_{n}": (text, _FMA_W_GRID) for n, text in (
        (82, 'far_from_tie = (np.abs(w) + 2 / np.abs(q) < half) & (np.abs(r) >= 2.0**-1000)'),)},
    **{f"opus.interp.semantics.x__fma_exact__mutmut_{n}": (text, _HUGE_SIGN) for n, text in (
        (14, 'return math.inf if x >= 0 else -math.inf'),
        (15, 'return math.inf if x > 1 else -math.inf'))},
    **{f"opus.interp.semantics.x__two_sum__mutmut_{n}": (text, _TWO_SUM_WRONG) for n, text in (
        (6, 'return s, (a + (s - bb)) + (b - bb)'),)},
    **{f"opus.interp.semantics.x__split__mutmut_{n}": (text, _SPLIT_CONSTANT) for n, text in (
        (3, 't = a * 134217730.0  # 2**27 + 1'),)},
    **{f"opus.interp.semantics.x__float_to_int__mutmut_{n}": (text, _AS_F64) for n, text in (
        (5, 'x = np.trunc(a.astype(None))'),)},
    **{f"opus.interp.semantics.x__float_to_int__mutmut_{n}": (text, _TWO_TO_64) for n, text in (
        (12, 'big = x >= float(hi) - 1.0  # 2**63 or 2**64'),
        (14, 'big = x >= float(hi) + 2.0  # 2**63 or 2**64'))},
    **{f"opus.interp.semantics.x__round_rz__mutmut_{n}": (text, _AS_F64) for n, text in (
        (5, 'over = np.abs(r.astype(None)) > np.abs(x.astype(F64))'),
        (8, 'over = np.abs(r.astype(F64)) > np.abs(x.astype(None))'))},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _TRUNCATE_CONVERTS) for n, text in (
        (19, 'to_f32 = cast_fn(src, dt.f32) if (src.name != "f32") and False else (lambda a: a)'),
        (20, 'to_f32 = cast_fn(src, dt.f32) if (src.name != "f32") or True else (lambda a: a)'),
        (25, 'to_f32 = cast_fn(src, dt.f32) if src.name == "f32" else (lambda a: a)'),
        (26, 'to_f32 = cast_fn(src, dt.f32) if src.name != "XXf32XX" else (lambda a: a)'),
        (27, 'to_f32 = cast_fn(src, dt.f32) if src.name != "F32" else (lambda a: a)'))},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _BOOL_OF_EXACT) for n, text in (
        (39, 'if _is_half(src) and src.storage_only:'),
        (42, 'return lambda a: a.astype(None) != 0'))},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _BOOL_SOURCE) for n, text in (
        (51, 'inner = cast_fn(dt.i32, to, None, sat)'),
        (52, 'inner = cast_fn(dt.i32, to, rounding, None)'),
        (55, 'inner = cast_fn(dt.i32, to, sat)'),
        (56, 'inner = cast_fn(dt.i32, to, rounding, )'),
        (59, 'return lambda a: inner(a.astype(None))'))},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _SAT_UNREAD) for n, text in (
        (76, 'inner = cast_fn(dt.f32, to, rounding, None)'),
        (80, 'inner = cast_fn(dt.f32, to, rounding, )'))},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _STORAGE_EXACT) for n, text in (
        (83, 'return lambda a: inner(a.astype(None))  # exact'),)},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _SRC_UNREAD) for n, text in (
        (87, 'return _float_to_int(None, to)'),)},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _F32_AS_F32) for n, text in (
        (98, 'if src.name == "XXf32XX":'),
        (99, 'if src.name == "F32":'))},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _SAME_WIDTH) for n, text in (
        (104, 'if src.is_int or src.bits < to.bits:'),)},
    **{f"opus.interp.semantics.x_cast_fn__mutmut_{n}": (text, _RZ_HALVES_ONLY) for n, text in (
        (103, 'if src.is_int and src.bits <= to.bits:'),)},
    **{f"opus.interp.semantics.x__nan_code__mutmut_{n}": (text, _AS_F64) for n, text in (
        (7, 'return 0x80 if np.isnan(np.uint8(0x80).view(d.np_dtype).astype(None)) else 0x7F'),)},
    **{f"opus.interp.semantics.x__to_e8m0__mutmut_{n}": (text, _E8M0_EDGE) for n, text in (
        (21, 'k = np.where(u <= 0x800000, (u >= 0x600000).astype(np.uint32), (u + 0x400000) >> 23)'),
        (22, 'k = np.where(u < 8388609, (u >= 0x600000).astype(np.uint32), (u + 0x400000) >> 23)'))},
    **{f"opus.interp.semantics.x__to_e8m0__mutmut_{n}": (text, _E8M0_K_F64) for n, text in (
        (23, 'k = np.where(u < 0x800000, (u >= 0x600000).astype(None), (u + 0x400000) >> 23)'),)},
    **{f"opus.interp.semantics.x__to_small_float__mutmut_{n}": (text, _ERRSTATE) for n, text in (
        (26, 'with np.errstate(over=None, invalid="ignore"):'),
        (27, 'with np.errstate(over="ignore", invalid=None):'),
        (28, 'with np.errstate(invalid="ignore"):'),
        (29, 'with np.errstate(over="ignore", ):'))},
    **{f"opus.interp.semantics.x__stochastic__mutmut_{n}": (text, _SR_SOURCES_EXACT) for n, text in (
        (14, 'exact = cast_fn(src, dt.f32) if (src.name != "f32") and False else (lambda a: a)'),
        (15, 'exact = cast_fn(src, dt.f32) if (src.name != "f32") or True else (lambda a: a)'))},
    **{f"opus.interp.semantics.x_stochastic_grid__mutmut_{n}": (text, _FIRST_BINADE) for n, text in (
        (73, 'mag = np.where(a >= np.uint32((emin + 128) << 23), normal, small)'),)},
    **{f"opus.interp.semantics.x_stochastic_grid__mutmut_{n}": (text, _INF_STAYS) for n, text in (
        (85, 'special = (a == 0) | (a > np.uint32(0x7F800000))'),
        (87, 'special = (a == 0) | (a >= np.uint32(2139095041))'))},
    "opus.interp.engine.xǁProgramǁexec_ptr_add__mutmut_2": (
        'address, sr = self._address(*op.operands[:3]), self.slot(op.results[0])',
        _TWO_OPERANDS),
    "opus.interp.engine.xǁShadowǁnew_block__mutmut_6": ('self.pend[:] = -2', _PEND_NONE),
    # codegen/cemit.py
    "opus.codegen.cemit.xǁCEmitterǁrender_printf__mutmut_15": ('elif e.name == "XXf32XX":',
                                                            _PROMOTED),
    "opus.codegen.cemit.xǁCEmitterǁrender_printf__mutmut_16": ('elif e.name == "F32":',
                                                            _PROMOTED),
    "opus.codegen.cemit.xǁCEmitterǁrender_printf__mutmut_18": (
        "elif e.is_bool and e.bits < 32:", _PROMOTED),
    "opus.codegen.cemit.xǁCEmitterǁrender_printf__mutmut_19": (
        "elif e.is_bool or e.bits <= 32:", _PROMOTED),
    "opus.codegen.cemit.xǁCEmitterǁrender_printf__mutmut_20": (
        "elif e.is_bool or e.bits < 33:", _PROMOTED),
    "opus.codegen.cemit.x__whole_vector_in__mutmut_1": (
        "(long long){off_c} + {vec + 1} < (long long){bound_c}", _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁ_whole_vector_in__mutmut_6": (
        "scalar_of(off.type).bits >= 32", _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁ_whole_vector_in__mutmut_9": (
        "or scalar_of(bound.type).bits >= 32):", _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁ_whole_vector_in__mutmut_7": (
        "scalar_of(off.type).bits > 33", _NO_33_BITS),
    "opus.codegen.cemit.xǁCEmitterǁ_whole_vector_in__mutmut_10": (
        "or scalar_of(bound.type).bits > 33):", _NO_33_BITS),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_9": ('ivn = self.fresh(iv, prefix=None)', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_11": ('ivn = self.fresh(iv, )', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_12": ('ivn = self.fresh(iv, prefix="XXiXX")', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_13": ('ivn = self.fresh(iv, prefix="I")', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_41": ('flip = self.fresh(prefix=None)', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_42": ('flip = self.fresh(prefix="XXflipXX")', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_43": ('flip = self.fresh(prefix="FLIP")', _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_21": ('step_static = None', _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_25": ('step_static = step.owner is not None and step.owner.kind == "XXconstXX"', _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_26": ('step_static = step.owner is not None and step.owner.kind == "CONST"', _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_37": ('if s >= 0 else', "a compile-time step of 0 is refused while tracing (range() step must not be zero), so s >= 0 is s > 0"),
    "opus.codegen.cemit.xǁCEmitterǁ_assign_yield__mutmut_3": ("if len(names) < 1:", "one carried value assigned through a temporary: the same value, one more C variable"),
    "opus.codegen.cemit.xǁCEmitterǁlinear_thread_id__mutmut_2": ('if self.fn.attrs.get(None):', _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁlinear_thread_id__mutmut_3": ('if self.fn.attrs.get("XXblock_sizeXX"):', _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁlinear_thread_id__mutmut_4": ('if self.fn.attrs.get("BLOCK_SIZE"):', _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁ_carried__mutmut_4": (
        'n = self.fresh_of(v.type, None)',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_carried__mutmut_7": (
        'n = self.fresh_of(v.type, "XXcXX")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_carried__mutmut_8": (
        'n = self.fresh_of(v.type, "C")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_assign_yield__mutmut_29": (
        't = self.fresh_of(v.type, None)',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_assign_yield__mutmut_32": (
        't = self.fresh_of(v.type, "XXtXX")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_assign_yield__mutmut_33": (
        't = self.fresh_of(v.type, "T")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_5": (
        'n = self.fresh_of(r.type, None)',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_8": (
        'n = self.fresh_of(r.type, "XXrXX")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_9": (
        'n = self.fresh_of(r.type, "R")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_4": (
        'n = self.fresh_of(None, "r")',
        _STRUCT_LANES),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_33": (
        'if op.regions[1].ops or any(',
        _EMPTY_ELSE),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_37": (
        'any(o.kind == "yield" or o.operands',
        _EMPTY_ELSE),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_38": (
        'any(o.kind != "XXyieldXX" or o.operands',
        _EMPTY_ELSE),
    "opus.codegen.cemit.xǁCEmitterǁrender_if__mutmut_39": (
        'any(o.kind != "YIELD" or o.operands',
        _EMPTY_ELSE),
    "opus.codegen.cemit.xǁCEmitterǁfresh_of__mutmut_2": (
        'n = self.fresh(prefix=None)',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_u32_address__mutmut_11": (
        'n = self.fresh(prefix=None)',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_u32_address__mutmut_12": (
        'n = self.fresh(prefix="XXuaXX")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_u32_address__mutmut_13": (
        'n = self.fresh(prefix="UA")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_7": (
        't = self.fresh(prefix=None)',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_8": (
        't = self.fresh(prefix="XXsvXX")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_9": (
        't = self.fresh(prefix="SV")',
        _PREFIX),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_22": (
        'self.structs_only = None',
        _WHOLE_RESULTS),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_23": (
        'self.structs_only = False',
        _WHOLE_RESULTS),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_28": (
        'self.structs_only = None',
        _WHOLE_RESULTS),
    "opus.codegen.cemit.xǁCEmitterǁ_through_structs__mutmut_31": (
        'if self.split_lanes(None):',
        _STRUCT_LANES),
    "opus.codegen.cemit.xǁCEmitterǁcopy_stmt__mutmut_1": (
        'if isinstance(dst, LaneNames) and isinstance(src, LaneNames):',
        _SAME_NAMES),
    "opus.codegen.cemit.xǁCEmitterǁdecl_stmt__mutmut_9": (
        'xs = init if (isinstance(init, list)) and False else',
        "no caller passes lane expressions (a list) for a split name: decl_stmt's list form is "
        "used only for _through_structs' struct temporaries, the split names get a name or "
        "nothing"),
    "opus.codegen.cemit.xǁCEmitterǁsplit_lanes__mutmut_6": (
        'return (self.scalar_lanes_from > 1 and not self.structs_only',
        "scalar_lanes_from is 0 (the base emitter, HIP) or 128 (CUDA): > 1 is > 0 for each"),
    "opus.codegen.cemit.xǁCEmitterǁemit_for_loop__mutmut_27": (
        'if step_static and step_sign:',
        _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁ_word_store__mutmut_6": (
        'if e.itemsize != 2 and nbytes not in (4, 8, 16) or not self._packed_pairs(val):',
        _WORD_BYTES),
    "opus.codegen.cemit.xǁCEmitterǁ_word_store__mutmut_17": (
        'per, bits = 5 // e.itemsize, 8 * e.itemsize',
        _WORD_BYTES),
    "opus.codegen.cemit.xǁCEmitterǁpopc__mutmut_3": (
        'u = "unsigned long long" if (e.bits == 64) or True else "unsigned"',
        _WIDE_POPC),
    "opus.codegen.cemit.xǁCEmitterǁpopc__mutmut_11": (
        'mask = "" if (e.bits >= 32) and False else',
        _WIDE_POPC),
    "opus.codegen.cemit.xǁCEmitterǁpopc__mutmut_14": (
        'mask = "" if e.bits > 32 else',
        _WIDE_POPC),
    "opus.codegen.cemit.xǁCEmitterǁpopc__mutmut_15": (
        'mask = "" if e.bits >= 33 else',
        _WIDE_POPC),
    "opus.codegen.cemit.xǁCEmitterǁbf16_truncation__mutmut_5": (
        '(u & 0x7f800000u) == 0x7f800000u && (u & 0xffffu) != 0u)',
        "hexadecimal digits in lower case: the same C literals"),
    "opus.codegen.cemit.xǁCEmitterǁ_lane_read__mutmut_13": (
        'n = (e.itemsize + 4) // 4',
        "one more 32-bit word in the union than the value fills: read from the first lane but "
        "never returned (u.v is the value's own bytes)"),
    "opus.codegen.cemit.xǁCEmitterǁrender_uniform__mutmut_3": (
        'self._lane_read(op, indent, None)',
        "uniform's promise is that every lane holds the first lane's value, so the value itself "
        "is what the read from the first lane gives; only where AMD keeps it (an SGPR) "
        "differs (a lane breaking the promise is the checking interpreter's finding)"),
    "opus.codegen.cemit.xǁCEmitterǁrender_med3__mutmut_35": (
        'f = self.med3_helper(dt.f64 if (e.name == "f64") or True else dt.f32)',
        "the f64 median helper for f32 (and f16/bf16) operands: the result is one of the "
        "operands (the median, or the least of those not NaN), exact in f64 and again in f32, "
        "with the same NaN and signed-zero rules; only speed differs"),
    "opus.codegen.cemit.xǁCEmitterǁrender_while__mutmut_23": (
        "self._emit_region(cond, indent + 1, None)",
        "a while's condition region ends in a `condition` op and never holds a yield (an `if` "
        "inside it assigns its own carried names), so the carried names passed for it are "
        "never read"),
    # CEmitter.cast_expr (the rest of its survivors: tests/hostexec/test_cast_paths.py)
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_11": (
        'return self.cast_expr(f"({x} ? 1 : 0)", dt.i32, to, rounding, None)', _SAT_IN_RANGE),
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_23": (
        "return subbyte.cast_packed(self, x, src, to, rounding, None)", _SAT_IN_RANGE),
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_56": (
        'return self.float_to_int(f, src if (src.name == "f64") or True else dt.f32, to)',
        _F64_OR_NOT),
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_69": (
        'i = self.float_to_int(f, src if (src.name == "f64") or True else dt.f32, dt.i32)',
        _F64_OR_NOT),
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_74": (
        "if src.name not in _HALF:",
        "the two branches swapped: an f16/bf16 source is widened by cast_expr to "
        "(float)(opus_h2f(x)), the value opus_h2f(x) is; an f32, f64 or integer source reaches "
        "the f16/bf16 helper without the (float) cast, but every helper from_f32 names "
        "(opus_f2h_rn/rz, opus_f2b_rn/rz, the two bf16 truncations; CUDA and HIP) takes a float "
        "parameter, and C++ converts the argument to it as the cast does ([expr.call]p4: "
        "[conv.double], [conv.fpint])"),
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_95": (
        'return self.from_f32(self.cast_expr(x, src, dt.f32, "rn", None), to, rounding)',
        _F32_WIDENING),
    "opus.codegen.cemit.xǁCEmitterǁcast_expr__mutmut_103": (
        'return self.from_f32(self.cast_expr(x, src, dt.f32, "rn", True), to, rounding)',
        _F32_WIDENING),
    # _wrap_type, _narrow, to_f32, vector_struct (the rest: tests/hostexec/test_arith_paths.py)
    "opus.codegen.cemit.x__wrap_type__mutmut_3": (
        'return _UNSIGNED[e.bits] if e.bits > 32 else "unsigned"', _UNSIGNED_32),
    "opus.codegen.cemit.x__wrap_type__mutmut_4": (
        'return _UNSIGNED[e.bits] if e.bits >= 33 else "unsigned"', _UNSIGNED_32),
    "opus.codegen.cemit.xǁCEmitterǁ_narrow__mutmut_7": (
        'if e.kind == "int" and e.bits <= 32:', _SHIFT_BY_0),
    "opus.codegen.cemit.xǁCEmitterǁ_narrow__mutmut_8": (
        'if e.kind == "int" and e.bits < 33:', _SHIFT_BY_0),
    "opus.codegen.cemit.xǁCEmitterǁto_f32__mutmut_6": (
        'return subbyte.cast_packed(self, expr, e, dt.f32, "rn", None)', _PACKED_TO_F32),
    "opus.codegen.cemit.xǁCEmitterǁto_f32__mutmut_15": (
        'return subbyte.cast_packed(self, expr, e, dt.f32, "rn", True)', _PACKED_TO_F32),
    **{f"opus.codegen.cemit.xǁCEmitterǁto_f32__mutmut_{n}": (
        f"return self.cast_storage(expr, e, dt.f32, {args})", _STORAGE_TO_F32)
       for n, args in ((19, 'None, False'), (20, '"rn", None'), (26, '"XXrnXX", False'),
                       (27, '"RN", False'), (28, '"rn", True'))},
    "opus.codegen.cemit.xǁCEmitterǁvector_struct__mutmut_15": (
        "if (nbytes) or True else 1", _NO_EMPTY_VECTOR),
    "opus.codegen.cemit.xǁCEmitterǁvector_struct__mutmut_25": (
        "if nbytes else 2", _NO_EMPTY_VECTOR),
    # binary_expr's mulhi, render_load (the rest: tests/hostexec/test_mulhi_select_loads.py)
    **{f"opus.codegen.cemit.xǁCEmitterǁbinary_expr__mutmut_{n}": (
        f'wide = "long long" if {cond} else "unsigned long long"',
        "i32 mulhi through unsigned long long: (unsigned long long)x is x sign-extended modulo "
        "2^64, so the unsigned product's 64 bits are those of the exact signed product "
        "(|x * y| <= 2^62 fits, no overflow either way); the logical >> 32 differs from the "
        "arithmetic one only in bits 32-63 of its result, which the (int) cast drops")
       for n, cond in ((93, '(e.kind == "int") and False'), (98, 'e.kind == "XXintXX"'),
                       (99, 'e.kind == "INT"'))},
    "opus.codegen.cemit.xǁCEmitterǁrender_load__mutmut_14": (
        'off = op.operands[1] if (not op.attrs.get("soffset")) and False else off_c',
        _SLOW_PATH),
    "opus.codegen.cemit.xǁCEmitterǁrender_load__mutmut_51": (
        'f"{ptr_c}[{off_c}]" if (i == 0 and vec == 1) and False else f"{ptr_c}[{off_c} + {i}]")',
        "p[off + 0] for p[off] (a one-element load without a hint): off + 0 is off's value "
        "(after the integer promotions, whatever off's C expression), so the same element"),
    # render_load, render_store (the rest: tests/hostexec/test_store_paths.py)
    **{f"opus.codegen.cemit.xǁCEmitterǁrender_load__mutmut_{n}": (
        f'f"{{ptr_c}}[{{off_c}}]" if {cond} else f"{{ptr_c}}[{{off_c}} + {{i}}]")', _PLUS_ZERO)
       for n, cond in ((53, "i == 0 or vec == 1"), (54, "i != 0 and vec == 1"),
                       (55, "i == 1 and vec == 1"), (56, "i == 0 and vec != 1"),
                       (57, "i == 0 and vec == 2"))},
    "opus.codegen.cemit.xǁCEmitterǁrender_store__mutmut_67": (
        'f"{ptr_c}[{off_c}] = {v};" if i == 0 or vec == 1 else', _PLUS_ZERO),
    "opus.codegen.cemit.xǁCEmitterǁrender_load__mutmut_88": (
        "self.assign_lanes(r, [at(None)], indent)", _ONE_ELEMENT_WHOLE),
    "opus.codegen.cemit.xǁCEmitterǁrender_load__mutmut_106": (
        '? {at(None)} : {zero})"], indent)', _ONE_ELEMENT_WHOLE),
    **{f"opus.codegen.cemit.xǁCEmitterǁrender_load__mutmut_{n}": (text, _INDENT) for n, text in (
        (129, 'self.line(indent - 1, f"{n} = {at()};")'),
        (130, 'self.line(indent + 2, f"{n} = {at()};")'),
        (142, 'self.line(indent - 1, f"{self.lane(n, i)} = ({_lane_in(off_c, bound_c, i)}) ? '
              '{at(i)} : {zero};")'),
        (143, 'self.line(indent + 2, f"{self.lane(n, i)} = ({_lane_in(off_c, bound_c, i)}) ? '
              '{at(i)} : {zero};")'))},
    "opus.codegen.cemit.xǁCEmitterǁrender_store__mutmut_14": (
        'off = op.operands[1] if (not op.attrs.get("soffset")) and False else off_c',
        _SLOW_PATH),
    # session 12's device and by-hand checks
    **{f"opus.codegen.cemit.xǁCEmitterǁrender_store__mutmut_{n}": (text, _INDENT) for n, text in (
        (132, "self.line(indent - 1, put())"), (133, "self.line(indent + 2, put())"),
        (145, 'self.line(indent - 1, f"if ({_lane_in(off_c, bound_c, i)}) {put(i)}")'),
        (146, 'self.line(indent + 2, f"if ({_lane_in(off_c, bound_c, i)}) {put(i)}")'))},
    **{f"opus.codegen.cemit.xǁCEmitterǁ_access__mutmut_{n}": (f"off_c = self.fresh(prefix={p})",
                                                          _PREFIX)
       for n, p in ((40, "None"), (41, '"XXeoXX"'), (42, '"EO"'))},
    "opus.codegen.cemit.xǁCEmitterǁ_access__mutmut_31": (
        'so = f"(long long){self.uniform(so) if scalar_of(soff.type).bits <= 33 else so}"',
        _UP_TO_33_BITS),
    **{f"opus.codegen.cemit.xǁCEmitterǁconst_expr__mutmut_{n}": (
        f"code = int(np.array(x, dtype=e.np_dtype).view(np.uint8)) & ({m} - 1)", _PACKED_MASK)
       for n, m in ((16, "(1 >> e.bits)"), (17, "(2 << e.bits)"))},
    "opus.codegen.cemit.xǁCEmitterǁassign_lanes__mutmut_10": (
        "if self.split_lanes(None):",
        "a vector split into per-lane variables then takes the branch for vectors: declare() "
        "declares its lanes (split_lanes of its own type) and each lane is assigned through "
        "lane(), the same C values as the per-lane definitions, in two statements each"),
    **{f"opus.codegen.cemit.xǁCEmitterǁ__init____mutmut_{n}": (text, _RESET_BY_RENDER)
       for n, text in ((6, "self.lines = None"), (7, "self.line_locs = None"))},
    "opus.codegen.cemit.xǁCEmitterǁ__init____mutmut_11": (
        "self.structs_only = None", "read only as `not self.structs_only`: None is False there"),
    **{f"opus.codegen.cemit.xǁCEmitterǁconst_expr__mutmut_{n}": (text, _SIGN_OF_ONE)
       for n, text in ((92, "math.copysign(2, f) > 0"), (93, "math.copysign(1, f) >= 0"),
                       (128, "math.copysign(2, f) > 0"), (129, "math.copysign(1, f) >= 0"))},
    # session 13
    **{f"opus.codegen.cemit.xǁCEmitterǁctype__mutmut_{n}": (text, _VECTOR_NAME_MEMO)
       for n, text in ((3, "name = None"), (4, "name = self.vector_types.get(None)"),
                       (7, "self.vector_types[key] = None"))},
    "opus.codegen.cemit.xǁCEmitterǁctype__mutmut_9": (
        "return self.tensor_map_param_type(None)",
        "tensor_map_param_type (codegen/tma.py) ignores its argument: a tensor map parameter "
        "has one C type per dialect"),
    **{f"opus.codegen.cemit.xǁCEmitterǁkernel_top__mutmut_{n}": (text, _DYN_SMEM_ALIGN_SET)
       for n, text in ((7, 'self.fn.attrs.get("dyn_smem_align", None)'),
                       (9, 'self.fn.attrs.get("dyn_smem_align", )'),
                       (12, 'self.fn.attrs.get("dyn_smem_align", 17)'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_param_alignment__mutmut_{n}": (text, _EVERY_PARAM_ALIGNED)
       for n, text in ((7, "align.get(p.name, None)"), (9, "align.get(p.name, )"),
                       (10, "align.get(p.name, 2)"))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_alignment__mutmut_{n}": (text, _ZERO_OFFSET_ALIGNMENT)
       for n, text in ((24, "if k else 2 << 30"), (25, "if k else 1 << 31"))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_voffset__mutmut_{n}": (text, _NO_DELTA_NO_WHOLE)
       for n, text in ((2, "delta=0, whole_off=True):"), (15, "if delta or whole_off:"))},
    "opus.codegen.hip.xǁHipEmitterǁ_voffset__mutmut_14": (
        "known <= _OOB / s:",
        "0xfffffff0 is a multiple of every element size (1, 2, 4, 8): / and // give the same "
        "number, compared with an int"),
    **{f"opus.codegen.hip.xǁHipEmitterǁ_voffset__mutmut_{n}": (
        text, _UP_TO_33_BITS)
       for n, text in ((25, "if s == 1 and t.bits <= 33 and t.kind"), (30, "bt.bits <= 33 and"),
                       (38, "if t.bits <= 33 and (t.kind"))},
    **{f"opus.codegen.hip.xǁHipEmitterǁrender_for__mutmut_{n}": (text, _INDENT) for n, text in (
        (44, "self.emit_for_loop(op, indent - 1, names, 1 if step_cond else None)"),
        (45, "self.emit_for_loop(op, indent + 2, names, 1 if step_cond else None)"),
        (62, "self.emit_for_loop(op, indent - 1, names)"),
        (63, "self.emit_for_loop(op, indent + 2, names)"))},
    "opus.codegen.hip.xǁHipEmitterǁrender_for__mutmut_48": (
        "self.emit_for_loop(op, indent + 1, names, 2 if step_cond else None)",
        "emit_for_loop reads only the sign of step_sign (s > 0)"),
    "opus.codegen.hip.xǁHipEmitterǁ_step_version__mutmut_6": (
        "return k >= 0, frozenset()", "a compile-time step of 0 is refused while tracing "
        "(frontend/control.py: range() step must not be zero)"),
    "opus.codegen.hip.xǁHipEmitterǁ_step_version__mutmut_10": (
        "return True, frozenset()", "render_for uses `positive` only together with "
        "self._small(op), which is False on this path"),
    "opus.codegen.hip.xǁHipEmitterǁ_iv_ranges__mutmut_51": (
        "bt.bits <= 33:", _UP_TO_33_BITS),
    **{f"opus.codegen.hip.xǁHipEmitterǁpacked_pair__mutmut_{n}": (
        f"t = self.fresh(prefix={p})", _PREFIX) for n, p in ((21, "None"), (22, '"XXpkXX"'),
                                                             (23, '"PK"'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_pair_lanes__mutmut_{n}": (text, _F32_TO_F32)
       for n, text in ((1, '(to.name == "f32") and False'), (4, 'to.name == "XXf32XX"'),
                       (5, 'to.name == "F32"'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_as_f32__mutmut_{n}": (text, _F32_TO_F32)
       for n, text in ((1, '(src.name == "f32") and False'), (4, 'src.name == "XXf32XX"'),
                       (5, 'src.name == "F32"'))},
    **{k: (text, _SAT_FP8_ONLY) for k, text in (
        ("opus.codegen.hip.xǁHipEmitterǁpacked_pair__mutmut_36",
         "return self._pair_lanes(t, to, rnd, None)"),
        ("opus.codegen.hip.xǁHipEmitterǁ_pair_lanes__mutmut_10", "dt.f32, to, rnd, None)"))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_as_f32__mutmut_{n}": (text, _WIDENING_SAT)
       for n, text in ((10, 'dt.f32, "rn", None)'), (18, 'dt.f32, "rn", True)'))},
    **{f"opus.codegen.fp8.xǁStorageConversionsǁcast_storage__mutmut_{n}": (text, _F32_TO_F32)
       for n, text in ((19, '(to.name == "f32") and False'), (20, '(to.name == "f32") or True'),
                       (21, 'to.name != "f32"'), (22, 'to.name == "XXf32XX"'),
                       (23, 'to.name == "F32"'), (35, '(src.name == "f32") and False'),
                       (36, '(src.name == "f32") or True'), (37, 'src.name != "f32"'),
                       (38, 'src.name == "XXf32XX"'), (39, 'src.name == "F32"'))},
    "opus.codegen.fp8.xǁStorageConversionsǁcast_storage__mutmut_28": (
        "self.cast_expr(f, dt.f32, to, rounding, None)", _SAT_FP8_ONLY),
    **{f"opus.codegen.fp8.xǁStorageConversionsǁcast_storage__mutmut_{n}": (text, _WIDENING_SAT)
       for n, text in ((44, 'dt.f32, "rn", None)'), (52, 'dt.f32, "rn", True)'))},
    "opus.codegen.fp8.xǁStorageConversionsǁfp8_fixup__mutmut_5": (
        "'XX_satXX' if sat", _HELPER_NAME),
    **{f"opus.codegen.fp8.xǁStorageConversionsǁ{f}__mutmut_{n}": (
        text, "a C hexadecimal literal's digits and prefix are case-insensitive")
       for f, n, text in (("sw_fp8_decoder", 8, "0x7fffffffu"), ("sw_fp8_decoder", 9, "0X7FFFFFFFU"),
                          ("sw_fp8_decoder", 25, "(0x7f800000u |"),
                          ("e8m0_decoder", 4, "0xffu ? 0x7fffffffu"),
                          ("e8m0_encoder", 29, "u - 1u < 0x7f800000u"))},
    **{f"opus.codegen.fp8.xǁStorageConversionsǁ{f}__mutmut_{n}": (
        text, _HELPER_NAME)
       for f, n, text in (("sw_fp8_encoder", 7, "'XX_satXX' if sat"),
                          ("sw_fp8_encoder", 8, "'_SAT' if sat"),
                          ("sw_fp8_encoder", 9, "'_sat' if sat else 'XXXX'"),
                          ("e8m0_encoder", 4, "'XX_satXX' if sat"), ("e8m0_encoder", 5, "'_SAT' if sat"),
                          ("e8m0_encoder", 6, "'_sat' if sat else 'XXXX'"))},
    **{f"opus.codegen.fp8.xǁStorageConversionsǁcast_sr_expr__mutmut_{n}": (
        text, "to_f32 of an f32 is the expression itself (cemit.py): both branches give the same C")
       for n, text in ((2, '(src.name == "f32") and False'), (3, '(src.name == "f32") or True'),
                       (4, 'src.name != "f32"'), (5, 'src.name == "XXf32XX"'),
                       (6, 'src.name == "F32"'))},
    **{f"opus.codegen.cuda.xǁCudaEmitterǁpacked_pair__mutmut_{n}": (
        f"t = self.fresh(prefix={p})", _PREFIX) for n, p in ((2, "None"), (3, '"XXpkXX"'),
                                                             (4, '"PK"'))},
    **{f"opus.codegen.cuda.xǁCudaEmitterǁpacked_pair__mutmut_{n}": (text, _WIDENING_SAT)
       for n, text in ((29, 'dt.f32, "rn", None) for v in (lo, hi)'),
                       (37, 'dt.f32, "rn", True) for v in (lo, hi)'))},
    "opus.codegen.cuda.xǁCudaEmitterǁpacked_pair__mutmut_61": (
        "dt.f32, to, rnd, None) for h in halves", _SAT_FP8_ONLY),
    "opus.codegen.cemit.xǁCEmitterǁconst_expr__mutmut_148": (
        "raise CodegenError(None)",
        "unreachable: every DType is bool, packed, an integer, a 16-bit or storage-only float "
        "(tf32 included: scalar_ctype refuses it there), f32 or f64"),
    # session 14: the gfx942/gfx950 conversion helpers, host-executed through the v_cvt_sr_* shims
    **{f"opus.codegen.{f}__mutmut_{n}": (text, _HELPER_NAME) for f, n, text in (
        ("hip.xǁHipEmitterǁhw_fp8_encode", 5, "'XX_satXX' if sat"),
        ("hip.xǁHipEmitterǁhw_fp8_encode", 6, "'_SAT' if sat"),
        ("hip.xǁHipEmitterǁhw_fp8_encode", 7, "'_sat' if sat else 'XXXX'"),
        ("hip.xǁHipEmitterǁ_pk_encoder", 12, "'XX_satXX' if sat"),
        ("hip.xǁHipEmitterǁ_pk_encoder", 13, "'_SAT' if sat"),
        ("hip.xǁHipEmitterǁ_pk_encoder", 14, "'_sat' if sat else 'XXXX'"),
        ("hip.xǁHipEmitterǁhw_sr", 30, "'XX_satXX' if sat"),
        ("hip.xǁHipEmitterǁhw_sr", 31, "'_SAT' if sat"),
        ("hip.xǁHipEmitterǁhw_sr", 32, "'_sat' if sat else 'XXXX'"),
        ("fp8.xǁStorageConversionsǁfp8_fixup", 6, "'_SAT' if sat"),
        ("fp8.xǁStorageConversionsǁfp8_fixup", 7, "'_sat' if sat else 'XXXX'"))},
    "opus.codegen.hip.xǁHipEmitterǁhw_fp8_encode__mutmut_21": (
        "self.fp8_overflowed(d, None,", _NOT_SAT_BRANCH),
    "opus.codegen.fp8.xǁStorageConversionsǁfp8_fixup__mutmut_14": (
        "self.fp8_overflowed(d, None,", _NOT_SAT_BRANCH),
    "opus.codegen.hip.xǁHipEmitterǁhw_sr__mutmut_44": (
        "if (info[\"signed_ovf\"]) or True else",
        "only the FNUZ formats have signed_ovf False, and their ovf_bits are 0x80: 0x80 | the "
        "sign bit (0x80 or 0) is 0x80"),
    **{f"opus.codegen.hip.xǁHipEmitterǁhw_sr__mutmut_{n}": (text, _SR_HALF_TYPE)
       for n, text in ((7, '(to.name == "bf16") and False'), (8, '(to.name == "bf16") or True'),
                       (11, 'to.name != "bf16"'), (12, 'to.name == "XXbf16XX"'),
                       (13, 'to.name == "BF16"'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_fp4_pair__mutmut_{n}": (
        f"t = self.fresh(prefix={p})", _PREFIX) for n, p in ((2, "None"), (3, '"XXpkXX"'),
                                                             (4, '"PK"'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ{f}__mutmut_{n}": (text, _FP4_EXACT) for f, n, text in (
        ("_fp4_pair", 11, "self._pair_lanes(t, to, None, sat)"),
        ("_fp4_pair", 12, "self._pair_lanes(t, to, rnd, None)"),
        ("packed_pair", 9, "self._fp4_pair(pk, lo, hi, src, to, None, sat, indent)"),
        ("packed_pair", 10, "self._fp4_pair(pk, lo, hi, src, to, rnd, None, indent)"))},
    "opus.codegen.hip.xǁHipEmitterǁpacked_pair__mutmut_4": (
        "self._fp4_pair(None, lo, hi,",
        "_fp4_pair never reads pk: src.storage_only chooses the decode or the encode"),
    **{f"opus.codegen.hip.xǁHipEmitterǁ_fp4_pk_encoder__mutmut_{n}": (text, _ONE_FP4_ENCODER)
       for n, text in ((15, "n = None"), (16, 'n = "XXopus_f32x2_to_fp4_e2m1XX"'),
                       (17, 'n = "OPUS_F32X2_TO_FP4_E2M1"'))},
    **{f"opus.codegen.fp8.xǁStorageConversionsǁcast_sr_expr__mutmut_{n}": (text, _SR_SAT_UNREAD)
       for n, text in ((14, 'self.target.conversion(src, to, "sr", None)'),
                       (18, 'self.target.conversion(src, to, "sr", )'))},
    **{f"opus.codegen.cuda.xǁCudaEmitterǁ_hinted__mutmut_{n}": (
        text, "a hinted access helper's name spelled otherwise: each character maps to one fixed "
              "string as before, so names stay distinct per (kind, hint, C type) exactly when they "
              "were") for n, text in (
        (3, '"XXXX".join(c if c.isalnum()'), (6, 'else "XX_XX" for c in hint'),
        (9, 'for c in hint + "XX_XX" + ctype'))},
    **{f"opus.codegen.cuda.xǁCudaEmitterǁ_hinted__mutmut_{n}": (
        text, "one register in braces ({%0}) where it stood alone: ptxas reads a one-element "
              "list as the register itself (checked: a VEC=1 f32 copy with STREAMING loads and "
              "stores, sm_90a, the same 24 SASS instructions)") for n, text in (
        (60, 'if (n > 1) or True else lanes'), (61, 'if n >= 1 else lanes'))},
    "opus.codegen.cuda.xǁCudaEmitterǁrender_cp_async__mutmut_20": (
        "n = nbytes / src.type.elem.itemsize",
        "the element count as a Python float (4.0 for 16 bytes of f32): C converts the "
        "double literal to opus_cp_async_elems' int parameter exactly"),
    # session 14: loop versions that only cost speed, literal spellings, shims' edge cases
    **{f"opus.codegen.hip.xǁHipEmitterǁ{f}__mutmut_{n}": (text, _SLOW_PATH) for f, n, text in (
        ("render_for", 35, "self._assumed & exact,"),
        ("_voffset", 41, 't.kind == "XXuintXX" or lim'),
        ("_small", 2, "sum(2 for _ in"), ("_small", 4, ") < _VERSIONED_LOOP_OPS"),
        ("_uniform_exactness", 8, "g = max(2, min(T, 4) // s)"),
        ("_loop_exactness", 7, '("load", "XXstoreXX")'), ("_loop_exactness", 8, '("load", "STORE")'),
        ("_loop_exactness", 17, 'inner.attrs.get("vec", 1) == 2'),
        ("_loop_exactness", 18, "break"), ("_loop_exactness", 27, "break"),
        ("_loop_exactness", 22, "if bound is None and not self._is_global(p) or bound not in"))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_loop_exactness__mutmut_{n}": (text, _ALWAYS_VEC)
       for n, text in ((10, 'inner.attrs.get("vec", None) == 1'), (11, "inner.attrs.get(1) == 1"),
                       (12, 'inner.attrs.get("vec", ) == 1'), (15, 'inner.attrs.get("vec", 2) == 1'))},
    "opus.codegen.hip.xǁHipEmitterǁ_loop_exactness__mutmut_3": (
        'if inner.kind not in ("load", "store") and inner.attrs',
        "other ops pass the first test only when they have a vec other than 1: atomics; "
        "access_operands then takes an atomic's value for its bound, which (when defined before "
        "the loop) only adds a loop version whose condition no access inside assumes unless it "
        "is the very condition that access needs (and then it was checked): slower, the same "
        "results; a shared atomic is skipped by _is_global"),
    **{f"opus.codegen.hip.xǁHipEmitterǁfloat_to_int__mutmut_{n}": (text, _POW2_LIMITS)
       for n, text in ((5, '(src.name == "f64") and False'), (6, '(src.name == "f64") or True'),
                       (8, 'src.name != "f64"'), (9, 'src.name == "XXf64XX"'),
                       (10, 'src.name == "F64"'), (12, 'src.name == "f64" else "F"'))},
    **{f"opus.codegen.hip.x__shuffle__mutmut_{n}": (text, _DPP_OLD_UNREAD) for n, text in (
        (14, "0xF, 0xF, None)"), (22, "word if (old_is_x) or True else"))},
    "opus.codegen.hip.x__shuffle__mutmut_24": ('else "0U", word', _C_SUFFIX_CASE),
    "opus.codegen.hip.x__lane_id__mutmut_3": ('count = "0U"', _C_SUFFIX_CASE),
    **{f"opus.codegen.fp8.xǁStorageConversionsǁsr_grid__mutmut_{n}": (text, _GRID_EDGE)
       for n, text in ((11, "if (emin == -126) and False else"), (17, "if emin == +126 else"),
                       (18, "if emin == -127 else"), (31, "(emin + 128) << 23"))},
    "opus.codegen.fp8.xǁStorageConversionsǁsw_fp8_encoder__mutmut_57": (
        "float(2.0 ** (2 - bias)).hex()",
        "the subnormal formula rint(a * 2^(m+bias-1)) taken for the first normal binade too: "
        "there it is 2^m + the rounded fraction, which is the code (exponent field 1), and "
        "2^(m+1) at the binade's top is the next binade's first code"),
    "opus.codegen.hip.xǁHipEmitterǁ_helper_buffer__mutmut_1": (
        "self.helper(None, f\"unsigned opus_nrec(",
        "the key the one opus_nrec helper is registered under in a kernel: no other helper is "
        "registered under None"),
    "opus.codegen.hip.xǁHipEmitterǁ_buf_store__mutmut_2": (
        "if (ctype == _BUF_T[nbytes]) and False else",
        "__builtin_bit_cast of a value to its own type is the value"),
    "opus.codegen.hip.x_np_f32_bits__mutmut_6": (
        'struct.unpack("<i",',
        "its one use is the bits of a format's largest finite value, positive: signed and "
        "unsigned read the same"),
    **{f"opus.codegen.cuda.xǁCudaEmitterǁ{f}__mutmut_{n}": (text, _ROUND_TRIP_F16) for f, n, text in (
        ("cast_storage", 4, 'to.name == "XXf16XX"'), ("cast_storage", 5, 'to.name == "F16"'),
        ("packed_pair", 52, '(to.name == "f16") and False'),
        ("packed_pair", 55, 'to.name == "XXf16XX"'), ("packed_pair", 56, 'to.name == "F16"'))},
    **{f"opus.codegen.cuda.xǁCudaEmitterǁ_hw_encoder__mutmut_{n}": (text, _HELPER_NAME)
       for n, text in ((4, "'XX_satXX' if sat"), (5, "'_SAT' if sat"),
                       (6, "'_sat' if sat else 'XXXX'"))},
    "opus.codegen.cuda.xǁCudaEmitterǁ_hw_encoder__mutmut_24": (
        "fix = self.fp8_fixup(d, None)", _NOT_SAT_BRANCH),
    **{f"opus.codegen.hip.xǁHipEmitterǁ_vector_access__mutmut_{n}": (text, _INDENT)
       for n, text in ((21, "whole(indent - 1)"), (22, "whole(indent + 2)"),
                       (28, "whole(indent - 1)"), (29, "whole(indent + 2)"),
                       (37, "per_element(indent - 1)"), (38, "per_element(indent + 2)"))},
    **{f"opus.codegen.hip.xǁHipEmitterǁrender_store__mutmut_{n}": (text, _BITCAST_SAME)
       for n, text in ((34, "self._buf_store(value_c, None, a, self._voffset(off, s, bound), s))"),
                       (49, "vt = None"), (63, "self._buf_store(value_c, None, a, voff, vec * s))"),
                       (91, 'self._buf_store(f"{value_c}.v[{i}]", None, a, voff, s))'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_is_global__mutmut_{n}": (text, _SPACE_ALWAYS)
       for n, text in ((3, 'getattr(p.type, "space", None)'), (6, 'getattr(p.type, "space", )'),
                       (9, '"XXglobalXX")'), (10, '"GLOBAL")'), (14, '"XXgenericXX")'),
                       (15, '"GENERIC")'))},
    **{f"opus.codegen.hip.xǁHipEmitterǁ_helper_buffer__mutmut_{n}": (
        text, "the key the one opus_nrec helper is registered under (it only dedupes the helper; "
              "no other helper has it)") for n, text in ((5, 'self.helper("XXopus_nrecXX",'),
                                                         (6, 'self.helper("OPUS_NREC",'))},
    "opus.codegen.hip.xǁHipEmitterǁ_voffset__mutmut_42": ('t.kind == "UINT" or lim', _SLOW_PATH),
    "opus.codegen.hip.xǁHipEmitterǁ_voffset__mutmut_43": ("lim <= 2 ** 31):", _LIM_VALUES),
    "opus.codegen.hip.xǁHipEmitterǁ_soffset__mutmut_20": ("lim > 2 ** 31:", _LIM_VALUES),
    **{f"opus.codegen.hip.xǁHipEmitterǁ_soffset__mutmut_{n}": (text, _UP_TO_33_BITS)
       for n, text in ((9, "if t.bits > 33:"), (16, "if t.bits <= 33 and t.kind"))},
    "opus.codegen.hip.xǁHipEmitterǁ_soffset__mutmut_8": (
        "if t.bits >= 32:",
        "a 32-bit scalar offset clamped through the 64-bit compare first: a negative i32 "
        "sign-extends past the limit and becomes it (as the negative check or min makes it), an "
        "unsigned one zero-extends and compares as before: the same soffset"),
    **{f"opus.codegen.hip.xǁHipEmitterǁ_exactness__mutmut_{n}": (text, _STATIC_OFF_CHECKED)
       for n, text in ((16, "o = None"), (23, "if a.soffset is None or not aligned"),
                       (29, "o is not None and o > 0"), (30, "o is not None and o >= 1"))},
    "opus.codegen.fp8.xǁStorageConversionsǁrender_cast__mutmut_15": (
        "if (len(op.operands) == 1) or True else None",
        "a cast with random bits is 'sr', and no target's packed_conversions has an 'sr' entry: "
        "packed_conversion gives None either way"),
    **{f"opus.codegen.fp8.xǁStorageConversionsǁrender_cast__mutmut_{n}": (
        text, "two-lane casts converted lane by lane instead of through one pair instruction: "
              "the pair instructions give each lane what the single conversion gives (both "
              "are checked against the interpreter lane by lane); one more instruction")
       for n, text in ((25, "if len(xs) <= 2 or pk is None:"), (26, "if len(xs) < 3 or pk is None:"))},
}

_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
           36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
           -11: "segfault", -9: "segfault", None: "not checked"}


# through the interpreter, not the console script: mutmut installed with `pip --target` (the
# GPU machine has no index, so wheels are carried there) has no script beside sys.executable
_MUTMUT = (sys.executable, "-m", "mutmut")


def _scratch(name):
    return os.path.join(SCRATCH, name)


def _toml_value(v) -> str:
    return json.dumps(v, ensure_ascii=False)   # JSON strings and arrays of them are TOML


def _pyproject(module: Module, fresh=False) -> str:
    """The repository's pyproject.toml with [tool.mutmut] set for this module."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        base = tomllib.load(f).get("tool", {}).get("mutmut", {})
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        lines = f.read().splitlines()
    kept, skipping = [], False
    for line in lines:
        if line.startswith("["):
            skipping = line.strip() == "[tool.mutmut]"
        if not skipping:
            kept.append(line)
    # forkserver: with mutmut's default ("fork") each mutant's pytest is forked from the process
    # that ran the statistics pass, inheriting what it memoized: a module-level kernel's rendered
    # source (Kernel._specs) stays the unmutated one, so every codegen mutant it reaches survives
    settings = dict(base, only_mutate=list(module.files), process_isolation="forkserver",
                    forkserver_warmup="none" if fresh else "collect",
                    # without the warm-up each mutant's pytest imports and collects within its
                    # time limit (15 x its tests' duration + this): without room for that, slow
                    # imports on a busy machine would count as timeouts, i.e. as kills
                    timeout_constant=120.0 if fresh else base.get("timeout_constant", 1.0),
                    pytest_add_cli_args_test_selection=list(module.tests))
    section = ["", "[tool.mutmut]"] + [f"{k} = {_toml_value(v)}" for k, v in settings.items()]
    return "\n".join(kept + section) + "\n"


def prepare(name: str, module: Module):
    """A fresh copy of src/, tests/, benchmarks/ and pyproject.toml in the module's scratch
    folder (mtimes kept: mutmut re-mutates a file only when its source is newer than its mutant)."""
    where = _scratch(name)
    os.makedirs(where, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for folder in ("src", "tests", "benchmarks"):   # tests import benchmark kernels
        shutil.rmtree(os.path.join(where, folder), ignore_errors=True)
        shutil.copytree(os.path.join(ROOT, folder), os.path.join(where, folder), ignore=ignore)
    config = _pyproject(module)
    stamp = os.path.join(where, "mutated-files.json")   # which files mutmut mutates
    what = json.dumps(module.files)
    if not os.path.exists(stamp) or open(stamp).read() != what:
        shutil.rmtree(os.path.join(where, "mutants"), ignore_errors=True)   # mutmut would keep them
        with open(stamp, "w") as f:
            f.write(what)
    with open(os.path.join(where, "pyproject.toml"), "w") as f:
        f.write(config)
    return where


def run(name: str, module: Module, only, children: int) -> int:
    where = prepare(name, module)
    env = dict(os.environ, OPUS_CACHE_DIR=os.path.join(where, "opus-cache"), **module.env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    names = list(only or ())
    if not names and module.functions:
        # mutmut re-runs every mutant it is given by name: after the first run, name only the
        # module's mutants not yet checked (new or changed functions)
        last = results(name, module)
        names = [k for k, s in last.items() if s == "not checked"] if last else list(
            module.functions)
        if not names:
            print(f"{name}: every mutant has a result (--only or --retest to re-run some)")
            return 0
    is_fresh = lambda k: any(fnmatch(k, g) for g in module.fresh)
    first = [k for k in names if not is_fresh(k)] if names else []
    if not names or first:
        status = _mutmut_run(where, env, first, children)
        if status or not module.fresh:
            return status
    # a fresh function's mutants that survived with the warm-up (or were named): again without
    again = [k for k, s in results(name, module).items() if is_fresh(k) and (
        (s == "survived" and (not names or k in names)) or (names and k in names and k not in first))]
    if not again:
        return 0
    print(f"{name}: {len(again)} mutants of functions run at collection, again without the "
          f"fork server's warm-up")
    with open(os.path.join(where, "pyproject.toml"), "w") as f:
        f.write(_pyproject(module, fresh=True))
    try:
        return _mutmut_run(where, env, again, children)
    finally:
        with open(os.path.join(where, "pyproject.toml"), "w") as f:
            f.write(_pyproject(module))


def _mutmut_run(where, env, names, children) -> int:
    return subprocess.call([*_MUTMUT, "run", "--max-children", str(children), *names],
                           cwd=where, env=env)


def results(name: str, module: Module) -> dict[str, str]:
    """mutant name -> status, from the .meta files of the module's last run."""
    out = {}
    for path in module.files:
        meta = os.path.join(_scratch(name), "mutants", path + ".meta")
        if not os.path.exists(meta):
            continue
        with open(meta) as f:
            codes = json.load(f)["exit_code_by_key"]
        for key, code in codes.items():
            if not module.functions or any(fnmatch(key, g) for g in module.functions):
                out[key] = _STATUS.get(code, "suspicious")
    return out


def diff(name: str, mutant: str) -> str:
    return subprocess.run([*_MUTMUT, "show", mutant], cwd=_scratch(name), capture_output=True,
                          text=True).stdout


def _equivalent_holds(name: str, mutant: str) -> bool:
    text = EQUIVALENT[mutant][0]
    added = [ln[1:].strip() for ln in diff(name, mutant).splitlines()
             if ln.startswith("+") and not ln.startswith("+++")]
    return any(text.strip() in ln for ln in added)


def score(name: str, module: Module, show: bool) -> bool:
    """Print the module's counts; True when no mutant survives unexplained."""
    status = results(name, module)
    if not status:
        print(f"{name}: no results (run it first)")
        return False
    counts: dict[str, int] = {}
    unexplained, stale = [], []
    for mutant, s in sorted(status.items()):
        if s == "survived" and mutant in EQUIVALENT:
            if _equivalent_holds(name, mutant):
                s = "equivalent"
            else:
                stale.append(mutant)
        if s in ("survived", "no tests", "suspicious", "not checked"):
            unexplained.append(mutant)
        counts[s] = counts.get(s, 0) + 1
    total = len(status)
    killed = counts.get("killed", 0) + counts.get("timeout", 0) + counts.get("segfault", 0)
    argued = counts.get("equivalent", 0)
    pct = 100.0 * (killed + argued) / total
    print(f"{name}: {total} mutants: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + f"; score {pct:.1f}% (killed + timeout + equivalent)")
    for mutant in stale:
        print(f"  stale EQUIVALENT entry (the mutated line changed): {mutant}")
    for mutant in unexplained:
        print(f"  {status[mutant]}: {mutant}")
        if show:
            print(diff(name, mutant))
    return not unexplained


def check(module: Module) -> int:
    """The module's test selection, unmutated, as mutmut runs it (its env, GPU tests left out,
    a private compile cache), stopping at the first failure."""
    import tempfile
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, OPUS_CACHE_DIR=cache, **module.env)
        return subprocess.call([sys.executable, "-m", "pytest", "-x", "-p", "no:cacheprovider",
                                "-m", "not gpu", *module.tests], cwd=ROOT, env=env)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module", nargs="?", choices=sorted(MODULES))
    ap.add_argument("--list", action="store_true", help="the modules and their test selection")
    ap.add_argument("--score", action="store_true", help="print the last run's score, no run")
    ap.add_argument("--survivors", action="store_true", help="also print each survivor's diff")
    ap.add_argument("--only", nargs="+", help="mutant-name globs to (re-)run")
    ap.add_argument("--retest", action="store_true",
                    help="re-run the last run's survivors not argued equivalent (after adding "
                         "tests)")
    ap.add_argument("--children", type=int, default=2, help="parallel test processes (2)")
    ap.add_argument("--check", action="store_true",
                    help="run the module's tests unmutated in this tree, with its environment "
                         "(mutmut's first runs need them to pass: check a new machine first)")
    args = ap.parse_args(argv)
    if args.list or not args.module:
        for name, m in MODULES.items():
            print(f"{name}: {' '.join(m.files)}\n    tests: {' '.join(m.tests)}\n    {m.why}")
        return 0
    module = MODULES[args.module]
    if args.check:
        return check(module)
    if not (args.score or args.survivors):
        only = args.only or []
        if args.retest:
            # survivors not argued equivalent (those would survive again, each costing a
            # whole run of its tests)
            only += [k for k, s in results(args.module, module).items()
                     if s == "survived" and k not in EQUIVALENT]
        if (args.retest or args.only) and not only:
            print(f"{args.module}: nothing to re-run")
        else:
            status = run(args.module, module, only, args.children)
            if status:
                print(f"mutmut failed (exit status {status}); to see pytest's error, add "
                      f"'debug = true' under [tool.mutmut] in {_scratch(args.module)}/"
                      f"pyproject.toml and run mutmut run there")
                return status
    return 0 if score(args.module, module, args.survivors) else 1


if __name__ == "__main__":
    sys.exit(main())
