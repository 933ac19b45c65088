"""AMD code quality without an AMD GPU (issue 10, point 7): instructions in the inner loop,
registers and scratch of three kernels compiled for gfx942 by the same clang the original
opus is measured with, next to the original's figures.

    python benchmarks/amd_codegen.py [--before COMMIT] [--after COMMIT] [--out benchmarks/results]
        [--date D] [--name cpu-amd-codegen]

Kernels: (a) a grid-stride vector add (f32 x 4 and f16 x 8 per access, bounded and unbounded
views), (b) a one-wave MFMA GEMM (32x32x8 f16, a loop over K, one MFMA per step), (c) a
four-wave MFMA GEMM with 4x4 repeats per wave (16 MFMAs per step). The GEMMs come in two
styles: "index" (each access's offset computed in the loop, as opus.examples' GEMM) and
"soffset" (loop-invariant per-lane offsets, the K step as the wave-uniform scalar offset:
the original's s_os). With ``--before COMMIT`` the same kernels (except the soffset style,
which that code lacks) are also measured at COMMIT, from its sources in a temporary folder.

Counting: the assembly's loops are the ranges from a label to a backward branch to it; the
*hot loop* is the smallest innermost loop holding the kernel's work (an MFMA, or the store of
the vector add). Where opus versions a loop (codegen/hip.py render_for: bounded sub-dword
accesses exact per element when the bound's parity allows; a run-time step known positive;
offsets of the loop variable in range of the unclamped voffset), the hot loop is the version
taken then, and ``general loop`` is the size of the other version.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# The original opus.hpp's own test kernels, compiled for gfx942 with the same clang (issue 10)
ORIGINAL = {"vadd": {"loop": 12}, "mfma_1wave": {"loop": 9},
            "mfma_4wave_4x4": {"loop": 47, "registers": 298, "scratch_bytes": 0}}

KERNELS_SOURCE = r'''
import opus
from opus import f16, f32, i32


def view(p, n, kind):
    """A gmem view: "bounded" (n elements), "bounded, even" (n rounded down to even: the user
    states the bound's parity, so no loop versioning), "unbounded", or "u32" (unbounded, every
    offset promised in [0, 2^32 / itemsize): opus.make_gmem(offsets="u32"))."""
    if kind == "bounded":
        return opus.make_gmem(p, n)
    if kind == "bounded, even":
        return opus.make_gmem(p, n // 2 * 2)
    return opus.make_gmem(p, offsets="u32") if kind == "u32" else opus.make_gmem(p)


def vadd(T, VEC, kind):
    @opus.kernel
    def vadd_grid_stride(x: opus.Ptr[T], y: opus.Ptr[T], out: opus.Ptr[T], n: i32):
        gx, gy, go = (view(p, n, kind) for p in (x, y, out))
        step = opus.grid_size_x() * VEC
        for i in range((opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC, n, step):
            go.store(gx.load(i, vec=VEC) + gy.load(i, vec=VEC), i)
    return vadd_grid_stride


def mfma(WM, WN, RM, RN, kind, soffset, vector_c=False):
    """C (M x N, f32) = A (M x K, f16) @ B^T (B: N x K, f16); WM x WN waves per block, each
    RM x RN repeats of the 32x32x8 MFMA; one run-time loop over K. C is stored one element at
    a time (coords_c), or with ``vector_c`` as the original's tests store it: the MFMA issued
    with A and B swapped (swap_ab: each lane holds 4 consecutive elements of a C row) and each
    accumulator stored through mma.layout_c in 16-byte vectors. ``soffset``: False (each
    access's offset computed in the loop), True (per-lane offsets per repeat, the K step as
    the scalar offset) or "all" (one per-lane offset per operand and every wave-uniform part,
    the K step, the repeats' rows and C's tile, as the scalar offset)."""
    @opus.kernel(block=64 * WM * WN)
    def mfma_gemm(a: opus.Ptr[f16], b: opus.Ptr[f16], c: opus.Ptr[f32], M: i32, N: i32, K: i32):
        mma = opus.make_mma(f16, f16, f32, (32, 32, 8), swap_ab=vector_c)
        ga, gb, gc = view(a, M * K, kind), view(b, N * K, kind), view(c, M * N, kind)
        lane = opus.lane_id()
        w = opus.warp_id()
        m0 = opus.block_id_x() * (32 * RM * WM) + (w // WN) * (32 * RM)
        n0 = opus.block_id_y() * (32 * RN * WN) + (w % WN) * (32 * RN)
        row, kk = lane % 32, (lane // 32) * 4
        accs = [mma.zeros_c() for _ in range(RM * RN)]
        a_off = [(m0 + r * 32 + row) * K + kk for r in range(RM)]
        b_off = [(n0 + r * 32 + row) * K + kk for r in range(RN)]
        for k0 in range(0, K, 8):
            if soffset == "all":
                av = [ga.load(a_off[0], vec=4, soffset=k0 + r * 32 * K) for r in range(RM)]
                bv = [gb.load(b_off[0], vec=4, soffset=k0 + r * 32 * K) for r in range(RN)]
            elif soffset:
                av = [ga.load(o, vec=4, soffset=k0) for o in a_off]
                bv = [gb.load(o, vec=4, soffset=k0) for o in b_off]
            else:
                av = [ga.load(o + k0, vec=4) for o in a_off]
                bv = [gb.load(o + k0, vec=4) for o in b_off]
            accs = [mma(av[i], bv[j], accs[i * RN + j]) for i in range(RM) for j in range(RN)]
        if vector_c:
            for i in range(RM):
                for j in range(RN):
                    shift = (m0 + i * 32) * N + n0 + j * 32  # wave-uniform
                    if soffset == "all":
                        gc.store(accs[i * RN + j], mma.layout_c((N, 1)), vec=4, soffset=shift)
                    else:
                        (gc + shift).store(accs[i * RN + j], mma.layout_c((N, 1)), vec=4)
            return
        for i in range(RM):
            for j in range(RN):
                for e in range(16):
                    r, cc = mma.coords_c(lane, e)
                    gc[(m0 + i * 32 + r) * N + n0 + j * 32 + cc] = accs[i * RN + j][e]
    return mfma_gemm


CASES = {
    "vadd f32x4 bounded": ("vadd", lambda: vadd(f32, 4, "bounded")),
    "vadd f32x4 unbounded": ("vadd", lambda: vadd(f32, 4, "unbounded")),
    "vadd f32x4 u32": ("vadd", lambda: vadd(f32, 4, "u32")),
    "vadd f16x8 bounded": ("vadd", lambda: vadd(f16, 8, "bounded")),
    "vadd f16x8 unbounded": ("vadd", lambda: vadd(f16, 8, "unbounded")),
    "vadd f16x8 u32": ("vadd", lambda: vadd(f16, 8, "u32")),
    "mfma 1 wave, index, bounded": ("mfma_1wave", lambda: mfma(1, 1, 1, 1, "bounded", False)),
    "mfma 1 wave, index, unbounded": ("mfma_1wave", lambda: mfma(1, 1, 1, 1, "unbounded", False)),
    "mfma 1 wave, index, u32": ("mfma_1wave", lambda: mfma(1, 1, 1, 1, "u32", False)),
    "mfma 1 wave, soffset, bounded": ("mfma_1wave", lambda: mfma(1, 1, 1, 1, "bounded", True)),
    "mfma 4 waves 4x4, index, bounded": ("mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "bounded", False)),
    "mfma 4 waves 4x4, index, unbounded": ("mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "unbounded", False)),
    "mfma 4 waves 4x4, index, u32": ("mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "u32", False)),
    "mfma 4 waves 4x4, soffset, bounded": ("mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "bounded", True)),
    "mfma 4 waves 4x4, soffset, u32": ("mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "u32", True)),
    # C stored as the original's tests store it (swap_ab, 16-byte stores through layout_c)
    "mfma 4 waves 4x4, index, u32, vector C": (
        "mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "u32", False, True)),
    "mfma 4 waves 4x4, soffset, bounded, vector C": (
        "mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "bounded", True, True)),
    "mfma 4 waves 4x4, soffset, bounded even, vector C": (
        "mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "bounded, even", True, True)),
    # the original's idiom in full: per-lane offsets once per operand, all else the s_os
    "mfma 4 waves 4x4, soffset all, bounded even, vector C": (
        "mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "bounded, even", "all", True)),
    "mfma 4 waves 4x4, soffset all, bounded, vector C": (
        "mfma_4wave_4x4", lambda: mfma(2, 2, 4, 4, "bounded", "all", True)),
}
'''

# The original's 4-wave 4x4 test kernel in its own C++ style (buffer resources over A and B,
# per-lane offsets computed once, the K step as the wave-uniform soffset, ext_vector
# accumulators, 16-byte C stores), compiled by the same clang: its figures reproduce the issue's
# 47-instruction loop and 298 registers closely (within a few), so ours can be compared with the
# original under one compiler and one counting.
ORIGINAL_STYLE_HIP = r'''
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, 256)))
void gemm(unsigned short* a, unsigned short* b, float* c, int M, int N, int K) {
  int lane = __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  int w = __builtin_amdgcn_readfirstlane(__builtin_amdgcn_workitem_id_x() >> 6);
  int m0 = __builtin_amdgcn_workgroup_id_x() * 256 + (w / 2) * 128;
  int n0 = __builtin_amdgcn_workgroup_id_y() * 256 + (w % 2) * 128;
  int row = lane % 32, kk = (lane / 32) * 4;
  __amdgpu_buffer_rsrc_t ra = __builtin_amdgcn_make_buffer_rsrc(a, 0, M * K * 2, 0x20000);
  __amdgpu_buffer_rsrc_t rb = __builtin_amdgcn_make_buffer_rsrc(b, 0, N * K * 2, 0x20000);
  f32x16 acc[16];
  for (int i = 0; i < 16; i++) acc[i] = (f32x16)0.0f;
  int ao[4], bo[4];
  for (int r = 0; r < 4; r++) {
    ao[r] = ((m0 + r * 32 + row) * K + kk) * 2;
    bo[r] = ((n0 + r * 32 + row) * K + kk) * 2;
  }
  for (int k0 = 0; k0 < K; k0 += 8) {
    f16x4 av[4], bv[4];
    for (int r = 0; r < 4; r++) {
      av[r] = __builtin_bit_cast(f16x4, __builtin_amdgcn_raw_buffer_load_b64(ra, ao[r], k0 * 2, 0));
      bv[r] = __builtin_bit_cast(f16x4, __builtin_amdgcn_raw_buffer_load_b64(rb, bo[r], k0 * 2, 0));
    }
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++)
        acc[i * 4 + j] = __builtin_amdgcn_mfma_f32_32x32x8f16(av[i], bv[j], acc[i * 4 + j], 0, 0, 0);
  }
  // 16-byte stores of each accumulator's 4-register groups, consecutive per thread (not
  // C's row-major places: the figures depend on the epilogue, see the notes)
  for (int q = 0; q < 16; q++)
    for (int e = 0; e < 4; e++) {
      f32x4 v = {acc[q][4 * e], acc[q][4 * e + 1], acc[q][4 * e + 2], acc[q][4 * e + 3]};
      *(f32x4*)(c + ((q * 4 + e) * 256 + (int)__builtin_amdgcn_workitem_id_x()) * 4) = v;
    }
}
'''

MEASURE = r'''
import json, os, runpy, sys, tempfile
with tempfile.TemporaryDirectory() as d:  # opus reads a kernel's source from its file
    path = os.path.join(d, "amd_codegen_kernels.py")
    with open(path, "w") as f:
        f.write(sys.stdin.read())
    ns = runpy.run_path(path)
    from opus.targets import get_target
    from opus.runtime.amd_build import assemble_amd, resources_amd
    out = {}
    try:  # compiled by the measured code's build path (older ones may not take raw HIP)
        asm = assemble_amd(ns["ORIGINAL_STYLE_HIP"], get_target("gfx942"))
        (res,) = resources_amd(asm).values()
        out["original style (C++), 4 waves 4x4"] = {"family": "mfma_4wave_4x4", "asm": asm,
                                                     "resources": res}
    except Exception as e:
        out["original style (C++), 4 waves 4x4"] = {"family": "mfma_4wave_4x4",
                                                     "error": f"{type(e).__name__}: {e}"}
    for name, (family, make) in ns["CASES"].items():
        try:
            k = make()
            asm = assemble_amd(k.source(target="gfx942"), get_target("gfx942"))
        except Exception as e:  # a style the measured code lacks (soffset before it existed)
            out[name] = {"family": family, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
            continue
        (res,) = resources_amd(asm).values()
        out[name] = {"family": family, "asm": asm, "resources": res}
json.dump(out, sys.stdout)
'''


def _instructions(lines):
    return [l.strip() for l in lines
            if l.startswith("\t") and not l.strip().startswith((".", ";")) and l.strip()]


def loops(asm):
    """[(label, first line, last line)] of the kernel's loops: a label and the last backward
    branch to it."""
    lines = asm.splitlines()
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := re.match(r"^(\.LBB\w+):", l))}
    found = {}
    for i, l in enumerate(lines):
        m = re.match(r"\s+s_(?:cbranch_\w+|branch)\s+(\.LBB\w+)", l)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            found[m.group(1)] = (m.group(1), labels[m.group(1)], i)
    return lines, list(found.values())


def hot_loop(asm, family):
    """(hot loop instructions, general loop instructions or None): see the module docstring."""
    lines, found = loops(asm)
    inner = [f for f in found if not any(g is not f and f[1] <= g[1] and g[2] <= f[2] for g in found)]
    work = "v_mfma" if family.startswith("mfma") else "_store_"
    sized = sorted((len(_instructions(lines[a:b + 1])), lab) for lab, a, b in inner
                   if any(work in x for x in _instructions(lines[a:b + 1])))
    if not sized:
        return None, None
    return sized[0][0], (sized[-1][0] if len(sized) > 1 else None)


def measure(src_dir):
    """{case: figures} for the opus sources under ``src_dir``, in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=src_dir, OPUS_CACHE_DISABLE="1")
    source = KERNELS_SOURCE + f"\nORIGINAL_STYLE_HIP = {ORIGINAL_STYLE_HIP!r}\n"
    r = subprocess.run([sys.executable, "-c", MEASURE], input=source, env=env,
                       capture_output=True, text=True, check=True)
    out = {}
    for name, m in json.loads(r.stdout).items():
        if "error" in m:
            out[name] = {"family": m["family"], "unavailable": m["error"]}
            continue
        loop, general = hot_loop(m["asm"], m["family"])
        res = m["resources"]
        # .vgpr_count is the whole unified register file a wave holds on gfx90a+ (architectural
        # VGPRs up to the accumulator offset, then AGPRs): the AGPRs are inside it
        agprs = res.get("agprs", 0)
        out[name] = {"family": m["family"], "loop": loop, "general_loop": general,
                     "vgprs": res["vgprs"] - agprs, "agprs": agprs, "registers": res["vgprs"],
                     "sgprs": res["sgprs"], "scratch_bytes": res["scratch_bytes"]}
    return out


def sources_at(commit, folder):
    """Extract ``src/`` of ``commit`` into ``folder``; returns the src path."""
    data = subprocess.run(["git", "-C", REPO, "archive", commit, "src"], capture_output=True,
                          check=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=data, check=True)
    return os.path.join(folder, "src")


def _commit():
    return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def _clang():
    sys.path.insert(0, os.path.join(REPO, "src"))
    from opus.runtime.amd_build import hip_compiler
    return hip_compiler().what


def report(after, before, meta):
    rows = ["| kernel | original loop | before: loop (general) | before: regs (v+a), sgprs, scratch "
            "| after: loop (general) | after: regs (v+a), sgprs, scratch |",
            "| --- | --- | --- | --- | --- | --- |"]

    def loop(m):
        if m is None or "unavailable" in m:
            return "n/a"
        return f"{m['loop']}" + (f" ({m['general_loop']})" if m["general_loop"] else "")

    def regs(m):
        if m is None or "unavailable" in m:
            return "n/a"
        return f"{m['registers']} ({m['vgprs']}+{m['agprs']}), {m['sgprs']}, {m['scratch_bytes']}"
    for name, m in after.items():
        orig = ORIGINAL[m["family"]]
        o = f"{orig['loop']}" + (f", {orig['registers']} regs, {orig['scratch_bytes']} scratch"
                                 if "registers" in orig else "")
        b = (before or {}).get(name)
        rows.append(f"| {name} | {o} | {loop(b)} | {regs(b)} | {loop(m)} | {regs(m)} |")
    return "\n".join([
        f"# opus AMD code quality (gfx942), {meta['date']}, CPU only (no AMD GPU)", "",
        f"{meta['clang']}; opus `{meta['after']}`" + (f", before: `{meta['before']}`" if before else ""),
        "", "Instructions in the hot inner loop (AMDGCN, the loop of a label and its backward branch; "
        "in parentheses the other version where opus versions a loop: on the bounds' parity, a "
        "run-time step's sign, the loop variable's range), "
        "registers (.vgpr_count: VGPRs + AGPRs), SGPRs and scratch bytes. Original: C++ opus's own test "
        "kernels, same clang (issue 10). benchmarks/amd_codegen.py describes the kernels.", "",
        *rows, "", "Notes:", "", *NOTES, ""])


NOTES = [
    "- Registers are the metadata's .vgpr_count: on gfx90a+ the one register file a wave holds, "
    "architectural VGPRs up to the accumulator offset and the AGPRs after them (in parentheses "
    "the split). Reports before 2026-11-24 (registers) added the AGPRs to it a second time.",
    "- The row 'original style (C++)' is the original's 4-wave 4x4 test kernel written in its "
    "C++ style (benchmarks/amd_codegen.py ORIGINAL_STYLE_HIP: buffer resources, offsets computed "
    "once, the K step as soffset, ext_vector accumulators, 16-byte C stores to consecutive "
    "places) compiled by the same clang: 37 / 301 under our counting, near the issue's 47 / 298. "
    "It is the register figure to meet with this clang.",
    "- The vector add's loops (issue 10: the original's grid-stride vector add of f32 x 4, "
    "12 instructions): f32x4 bounded and u32 now take 12. codegen/hip.py emits a small loop "
    "with a run-time step (here grid_size_x() * 4, whose sign the kernel cannot know: a grid "
    "of 2^31 work-items or more wraps it) twice: a version taken where the step is positive "
    "compares once per iteration (no sign test), and where its start and end put every offset "
    "i + c of the loop variable in [0, 0xfffffff0 / itemsize] with no wrap of i (ub + step <= "
    "2^31), its bounded accesses at i + c drop the voffset clamp (v_min_u32). The conditions "
    "are tested once before the loop; the general version (in parentheses: 14) keeps both and "
    "is exact for any step and offset (tests/amd: host execution of both versions at offsets "
    "that would wrap to element 0 unclamped). f16x8 takes 14: its 8 halves need 4 v_pk_add_f16 "
    "where 4 floats need 2 v_pk_add_f32. Unbounded i32 views keep their 64-bit addresses (15 / "
    "17).",
    "- 'u32' rows: opus.make_gmem(ptr, offsets=\"u32\"), an unbounded view whose offsets the user "
    "promises are in [0, 2^32 / itemsize) (the interpreter checks it on every access). The address "
    "is the SGPR base plus a 32-bit VGPR byte offset (global_load ... vN, s[..]): no "
    "v_ashrrev_i32 / v_lshl_add_u64 per access. With a soffset the u32 view adds it to the "
    "32-bit offset (the global instructions have no scalar offset), so its loop is the index "
    "style's.",
    "- 'vector C' rows store C as the original's tests do: the MFMA issued with A and B swapped "
    "(make_mma(..., swap_ab=True): each lane holds 4 consecutive elements of a C row) and each "
    "accumulator stored through mma.layout_c((N, 1)) in 16-byte vectors; the other rows keep "
    "the per-element coords_c stores (256 scalar stores with their index arithmetic).",
    "- 'bounded even' rows give the bound as n // 2 * 2: a user who knows the bound is even "
    "(here M*K with K a multiple of 8) states the parity so, which the HIP lowering sees "
    "(codegen/hip.py _known_multiple): no loop versioned on the bounds' parity, no general copy. "
    "docs/layouts.md documents the idiom.",
    "- 'soffset all' rows write the GEMM in the original's idiom throughout: one per-lane offset "
    "per operand, and every wave-uniform part of an offset as the buffer instruction's scalar "
    "offset (s_os): the K step, the repeats' rows (k0 + r * 32 * K) and C's tiles "
    "(gc.store(acc, layout_c, soffset=tile), not a shifted view). With a stated parity: a "
    "44-instruction loop and 296 registers (256+40), at or under the original style's 37 / 47 "
    "and 301 (tests/amd: the registers against the original style's, the product against "
    "numpy through the interpreter). This is the register figure met; it needs no new code "
    "(the 'before' columns hold the same figures).",
    "- Why the per-repeat-offset kernel ('soffset, bounded even, vector C') holds 304, not 301 "
    "(read side by side with the original style, measured by editing the generated HIP): the "
    "loops are the same (38 / 37 instructions: 16 MFMAs, 8 buffer loads, 8 per-lane offsets, "
    "the soffset as SGPRs, no 64-bit address math, no readfirstlane missing); the difference "
    "is where clang's allocator places 256 accumulator registers across the kernel, which "
    "moves by tens of registers with changes outside the loop, for the original style too: "
    "its MFMA operands swapped (the same values) give 305; its C stored row-major through the "
    "same layout as ours give 483 (57-instruction loop); told K >= 1 (__builtin_assume, no "
    "zero-trip path joining the loop's exit) it holds 292. Ours with the epilogue's "
    "per-element path removed (a shifted view's run-time shift hides the alignment) holds 306 "
    "with 32 registers spilled to AGPRs inside the loop (101 instructions), and 292 when also "
    "told K >= 1; with the path and K >= 1, 320; 32-bit offsets in that path give 320. The "
    "lowering does not move the uniform part of a per-lane "
    "offset into the soffset by itself: off >= 0 and soffset >= 0 are checked apart (ir/ops.py), "
    "so that needs run-time conditions (left for later); the 'soffset all' rows show what it "
    "would give.",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", help="a commit to measure too (its src/ in a temporary folder)")
    ap.add_argument("--after", help="measure this commit's src/ instead of the working tree's "
                                    "(other work in progress left out)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--name", default="cpu-amd-codegen", help="the results' name after the date")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        after = measure(sources_at(args.after, d) if args.after else os.path.join(REPO, "src"))
    before = None
    if args.before:
        with tempfile.TemporaryDirectory() as d:
            before = measure(sources_at(args.before, d))
    meta = {"date": args.date, "clang": _clang(), "after": args.after or _commit(),
            "before": args.before, "target": "gfx942", "original": ORIGINAL}
    base = os.path.join(args.out, f"{args.date}-{args.name}")
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "after": after, "before": before}, f, indent=1)
    text = report(after, before, meta)
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
