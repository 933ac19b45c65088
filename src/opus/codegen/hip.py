"""HIP C++ dialect for AMD CDNA (gfx942, gfx950): headerless device-only source.

No #include and no HIP headers: kernels are ``extern "C" __attribute__((global))`` functions,
thread/block indices, barriers and memory instructions are ``__builtin_amdgcn_*`` calls, math is
``__builtin_*`` (lowered by the AMDGPU backend, no device library), 16-bit floats are converted
with ``_Float16``/``__bf16`` casts or bit operations. Global accesses with a bound go through
raw buffer resources (``__builtin_amdgcn_make_buffer_rsrc``) so out-of-bounds lanes read 0 and
drop stores in hardware, as ir/ops.py specifies.

Bounded access lowering (offset O in elements, element size s, bound B elements; ir/ops.py
states the buffer unit's range check this relies on):
* the voffset is ``min(O, L) * s`` with L*s = 0xfffffff0 (always >= num_records; the per-dword
  check's +12 cannot wrap): negative or huge element offsets never alias back into range. One
  v_min_u32 and a shift for 32-bit offsets, nothing for bytes with a 32-bit offset and bound;
* in a loop version taken where every offset ``iv + c`` of the induction variable is known to
  lie in [0, L] (``render_for``), the voffset is ``(iv + c) * s`` with no clamp;
* num_records is ``min(B*s, 0xfffffff0)`` (0 for B <= 0): arrays accessed with a bound must be
  smaller than 4 GiB (as in the original's ``make_gmem``);
* a whole vector is one buffer instruction wherever the hardware's dword check is exact per
  element (``_exactness``: always for s >= 4 through a pointer aligned to the access; for
  s < 4 where the bound is a multiple of the elements per dword, a wave-uniform test of the
  bound when it is known only at run time); elsewhere a vector partly in range takes one b8/b16
  access per element (each checked exactly);
* a scalar offset (soffset) is the instruction's SGPR offset (readfirstlane), clamped alike;
* cache hints are the cache-policy bits of the builtins' aux argument (targets/amd.py).
"""
from __future__ import annotations

from collections import namedtuple

from .. import dtypes as dt
from ..ir import scalar_of, access_operands
from .cemit import CEmitter, CodegenError
from .sync_atomics import HipAtomics
from ..targets.base import SR_FORMATS
from .fp8 import FP8_FORMATS, StorageConversions


def np_f32_bits(x: float) -> int:
    """The bits of float x as an f32."""
    import struct
    return struct.unpack("<I", struct.pack("<f", x))[0]

__all__ = ["render_hip", "HipEmitter"]

_OOB = 0xFFFFFFF0
_BUF_T = {1: "unsigned char", 2: "unsigned short", 4: "unsigned", 8: "opus_u32x2_t",
          16: "opus_u32x4_t"}
_BUF_B = {1: "b8", 2: "b16", 4: "b32", 8: "b64", 16: "b128"}

# a loop is versioned for a run-time step's sign or its accesses' ranges (HipEmitter.render_for)
# only when it holds at most this many ops: the fast version saves an instruction or two per
# iteration, which matters in small loops; in large ones the second copy costs more (code size)
_VERSIONED_LOOP_OPS = 128

# the parts of a bounded buffer access (HipEmitter._bounded)
_Access = namedtuple("_Access", "p off bound soffset elem s rsrc soff aux")


def _static_int(v):
    """The value of IR integer ``v`` when it is a compile-time constant, else None."""
    if v.owner is not None and v.owner.kind == "const" and isinstance(v.owner.attrs["value"], int):
        return v.owner.attrs["value"]
    return None


def _iv_plus_const(off, iv):
    """c where IR integer ``off`` is ``iv + c`` (c a compile-time int), else None."""
    if off is iv:
        return 0
    op = off.owner
    if op is None or op.kind != "binary" or op.attrs["op"] not in ("add", "sub"):
        return None
    a, b = op.operands
    if a is iv and _static_int(b) is not None:
        return _static_int(b) if op.attrs["op"] == "add" else -_static_int(b)
    if b is iv and op.attrs["op"] == "add" and _static_int(a) is not None:
        return _static_int(a)
    return None


def _known_multiple(v, g) -> bool:
    """Is IR integer ``v`` known (without running the kernel) to be a multiple of ``g``:
    a constant, a select of two, a product with one, or a sum or difference of two."""
    k = _static_int(v)
    if k is not None:
        return k % g == 0
    op = v.owner
    if op is None:
        return False
    if op.kind == "select":
        return _known_multiple(op.operands[1], g) and _known_multiple(op.operands[2], g)
    if op.kind == "binary" and op.attrs["op"] == "mul":
        return any(_known_multiple(x, g) for x in op.operands)
    if op.kind == "binary" and op.attrs["op"] in ("add", "sub"):
        return all(_known_multiple(x, g) for x in op.operands)
    return False


# bodies of f32 -> f16/bf16 (bits) by rounding; bf16 'rn' is chosen by the target (hw_bf16)
_NAN_TO_BF16 = "if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); "
_TO_HALF = {
    "opus_f2h_rn": "return __builtin_bit_cast(unsigned short, (_Float16)f);",
    # RNE, then one step toward zero where it rounded away from zero (inf -> max finite)
    "opus_f2h_rz": ("unsigned short h = __builtin_bit_cast(unsigned short, (_Float16)f); "
                    "float back = (float)__builtin_bit_cast(_Float16, h); "
                    "return (f == f && __builtin_fabsf(back) > __builtin_fabsf(f)) ? "
                    "(unsigned short)(h - 1) : h;"),
    "opus_f2b_rz": ("unsigned u = __builtin_bit_cast(unsigned, f); " + _NAN_TO_BF16
                    + "return (unsigned short)(u >> 16);"),
}
_BF16_RN = {
    True: "return __builtin_bit_cast(unsigned short, (__bf16)f);",  # v_cvt_pk_bf16_f32 (RNE)
    False: ("unsigned u = __builtin_bit_cast(unsigned, f); " + _NAN_TO_BF16  # software RNE
            + "return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);"),
}


def _waitcnt_imm(vmcnt, lgkmcnt, expcnt=None) -> int:
    """gfx9's s_waitcnt immediate: vmcnt in bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8;
    None is no wait (vmcnt 63, expcnt 7, lgkmcnt 15)."""
    vm = 63 if vmcnt is None else vmcnt
    lgkm = 15 if lgkmcnt is None else lgkmcnt
    exp = 7 if expcnt is None else expcnt
    return (vm & 0xF) | (vm >> 4) << 14 | exp << 4 | lgkm << 8


def _to_half(name, body):
    return f"unsigned short {name}(float f) {{ {body} }}"


def _lane_id(s, axis):
    """Lanes of the wave below this one: each mbcnt counts 32 of them (lo: lanes 0-31, hi:
    lanes 32-63), as many as the target's wave has."""
    count = "0u"
    for half in ("lo", "hi")[:s.target.warp_size // 32]:
        count = f"__builtin_amdgcn_mbcnt_{half}(~0u, {count})"
    return f"(int){count}"


# cross-lane ops (codegen/cross_lane.py) on 32-bit words: ds_bpermute with the lane each lane
# reads (ir/ops.py shuffle) computed from the lane id, or the DPP move / readlane the language
# chose for a compile-time pattern; votes are ballots into an SGPR pair
_SHFL_LANE = {
    "idx": "int j = (l & ~{m}) | (src & {m});",
    "up": "int j = l - (src & {ws1}); j = j < (l & ~{m}) ? l : j;",
    "down": "int j = l + (src & {ws1}); j = j > ((l & ~{m}) | {m}) ? l : j;",
    "xor": "int j = l ^ (src & {ws1}); j = j > ((l & ~{m}) | {m}) ? l : j;",
}


def _bpermute(s, word, src, mode, width):
    name = f"opus_bperm_{mode}_{width}"
    lane = _SHFL_LANE[mode].format(m=width - 1, ws1=s.target.warp_size - 1)
    s.helper(name, f"unsigned {name}(unsigned x, int src) {{ int l = {_lane_id(s, None)}; {lane} "
                   f"return (unsigned)__builtin_amdgcn_ds_bpermute(j << 2, (int)x); }}")
    return f"{name}({word}, {src})"


def _update_dpp(old, word, ctrl, row_mask, bank_mask, bound_ctrl):
    return (f"(unsigned)__builtin_amdgcn_update_dpp((int){old}, (int){word}, {ctrl:#x}, "
            f"{row_mask:#x}, {bank_mask:#x}, {'true' if bound_ctrl else 'false'})")


def _shuffle(s, word, src, mask, attrs):
    low = attrs["lowering"]
    if low == "readlane":
        return f"(unsigned)__builtin_amdgcn_readlane((int){word}, {src})"
    if low is not None:  # ('dpp', ctrl, old_is_x): a lane reading past the edge keeps its own
        _, ctrl, old_is_x = low
        return _update_dpp(word if old_is_x else "0u", word, ctrl, 0xF, 0xF, not old_is_x)
    return _bpermute(s, word, src, attrs["mode"], attrs["width"])


_BALLOT = "__builtin_amdgcn_ballot_w64({})"
_CROSS_LANE = {
    "shuffle": _shuffle,
    "dpp": lambda s, old, word, a: _update_dpp(old, word, a["ctrl"], a["row_mask"],
                                               a["bank_mask"], a["bound_ctrl"]),
    "vote": lambda s, p, mask, mode: {
        "ballot": _BALLOT.format(p), "any": f"({_BALLOT.format(p)} != 0ull)",
        "all": f"({_BALLOT.format(p)} == {_BALLOT.format('true')})"}[mode],
    "permute": lambda s, word, addr: f"(unsigned)__builtin_amdgcn_ds_permute({addr}, (int){word})",
}


class HipEmitter(StorageConversions, HipAtomics, CEmitter):
    backend = "hip"
    device_fn_qualifiers = "static __attribute__((device)) __attribute__((always_inline)) inline"
    align_attr = "__attribute__((aligned({})))"
    shared_qualifier = "__attribute__((shared))"
    kernel_signature = 'extern "C" __attribute__((global)) {launch_bounds}void {symbol}({params})'
    # as HIP's __syncthreads: release LDS writes, s_barrier, acquire
    barrier = ('__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");',
               "__builtin_amdgcn_s_barrier();",
               '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");')
    # synchronization (codegen/sync_atomics.py): a wave is in lockstep, so sync_warp is a wave
    # barrier (no instruction) that the compiler does not move memory accesses across
    code_for_sync = {
        "sync_warp": ('(void){mask}; __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "wavefront"); '
                      "__builtin_amdgcn_wave_barrier();"),
        "fence": {(scope, order): f'__builtin_amdgcn_fence({o}, "{s}");'
                  for scope, s in (("block", "workgroup"), ("device", "agent"), ("system", ""))
                  for order, o in (("acq_rel", "__ATOMIC_ACQ_REL"), ("seq_cst", "__ATOMIC_SEQ_CST"))},
        "clock": {"clock": "(unsigned)__builtin_amdgcn_s_memtime()",
                  "clock64": "(unsigned long long)__builtin_amdgcn_s_memtime()",
                  "s_memtime": "(unsigned long long)__builtin_amdgcn_s_memtime()",
                  "s_memrealtime": "(unsigned long long)__builtin_amdgcn_s_memrealtime()"},
        "hint": {"s_setprio": "__builtin_amdgcn_s_setprio({0});",
                 "s_nop": '__asm__ volatile("s_nop {0}");',
                 "s_sleep": "__builtin_amdgcn_s_sleep({0});",
                 "sched_barrier": "__builtin_amdgcn_sched_barrier({0});",
                 "sched_group_barrier": "__builtin_amdgcn_sched_group_barrier({0}, {1}, {2});"},
    }
    prelude = ("typedef unsigned opus_u32x2_t __attribute__((ext_vector_type(2)));",
               "typedef float opus_f32x2_t __attribute__((ext_vector_type(2)));",
               "typedef unsigned opus_u32x4_t __attribute__((ext_vector_type(4)));")
    thread_index = "__builtin_amdgcn_workitem_id_{}()"
    block_size_along = "__builtin_amdgcn_workgroup_size_{}()"
    code_for_special = {
        **CEmitter.code_for_special,
        "block_id": lambda s, a: f"(int)__builtin_amdgcn_workgroup_id_{a}()",
        # the dispatch packet's grid size counts work items (one scalar load)
        "grid_size": lambda s, a: f"(int)__builtin_amdgcn_grid_size_{a}()",
        # blocks: the implicit kernel argument hidden_block_count_{x,y,z} (code object v5:
        # the first three dwords of the implicit arguments, filled by the runtime), one scalar
        # load where dividing the grid size by the block size costs ~20 instructions
        "num_blocks": lambda s, a: (f"(int)((const unsigned*)__builtin_amdgcn_implicitarg_ptr())"
                                    f"[{'xyz'.index(a)}]"),
        "lane_id": _lane_id,
        "warp_id": lambda s, a: (f"(int)__builtin_amdgcn_readfirstlane((int)({s.linear_thread_id()} >> "
                                 f"{s.target.warp_size.bit_length() - 1}))"),
    }
    code_for_bitcast = {"u32->f32": "__builtin_bit_cast(float, (unsigned){})",
                        "u64->f64": "__builtin_bit_cast(double, (unsigned long long){})",
                        "f32->u32": "__builtin_bit_cast(unsigned, {})"}
    math_prefix = "__builtin_"
    popc_fns = ("__builtin_popcount", "__builtin_popcountll")
    code_for_cross_lane = _CROSS_LANE
    # groups are counted by the waits (vmcnt), so a commit is nothing; the empty asm keeps the
    # compiler from moving LDS accesses across the s_waitcnt
    async_wait = staticmethod(lambda s, attrs: (
        f"__builtin_amdgcn_s_waitcnt({hex(_waitcnt_imm(attrs['vmcnt'], attrs['lgkmcnt'], attrs.get('expcnt')))});",
        '__asm__ volatile("" ::: "memory");'))
    code_for_math = {
        "f32": {"exp": "__builtin_expf", "exp2": "__builtin_exp2f", "log": "__builtin_logf",
                "log2": "__builtin_log2f", "sqrt": "__builtin_sqrtf", "rsqrt": "__builtin_amdgcn_rsqf",
                "sin": "__builtin_sinf", "cos": "__builtin_cosf", "tanh": "opus_tanhf",
                "floor": "__builtin_floorf", "ceil": "__builtin_ceilf", "trunc": "__builtin_truncf",
                "rint": "__builtin_rintf"},
        # the f64 functions the target's table lists (Target.math_f64)
        "f64": {"sqrt": "__builtin_sqrt", "floor": "__builtin_floor", "ceil": "__builtin_ceil",
                "trunc": "__builtin_trunc", "rint": "__builtin_rint", "rsqrt": "opus_rsqrt64"},
    }
    readfirstlane_word = uniform_word = "(unsigned)__builtin_amdgcn_readfirstlane((int){})"
    helper_sources = {
        # v_med3_f32 on quieted operands (ir/ops.py med3; quieting is free on computed values)
        "opus_med3_f32": ("float opus_med3_f32(float a, float b, float c) { return "
                          "__builtin_amdgcn_fmed3f(__builtin_canonicalizef(a), "
                          "__builtin_canonicalizef(b), __builtin_canonicalizef(c)); }"),
        # min/max written as the compiler's own (smin/smax) so it matches v_med3_i32/u32
        **{f"opus_med3_{t}": (f"{c} opus_med3_{t}({c} a, {c} b, {c} c) {{ return "
                              "__builtin_elementwise_max(__builtin_elementwise_min(a, b), "
                              "__builtin_elementwise_min(__builtin_elementwise_max(a, b), c)); }")
           for t, c in (("i32", "int"), ("u32", "unsigned"))},
        # nan='ieee2008': the instruction itself (fmaxf quiets signaling NaNs first: 3 instructions)
        **{f"opus_{o}_ieee2008_{t}": (f"{c} opus_{o}_ieee2008_{t}({c} a, {c} b) {{ {c} r; "
                                      f'__asm__("v_{o}_{t} %0, %1, %2" : "=v"(r) : "v"(a), "v"(b)); '
                                      f"return r; }}")
           for o in ("min", "max") for t, c in (("f32", "float"), ("f64", "double"))},
        "opus_h2f": "float opus_h2f(unsigned short h) { return (float)__builtin_bit_cast(_Float16, h); }",
        "opus_b2f": ("float opus_b2f(unsigned short h) "
                     "{ return __builtin_bit_cast(float, (unsigned)h << 16); }"),
        **{name: _to_half(name, body) for name, body in _TO_HALF.items()},
        "opus_f2b_rn": lambda s: _to_half("opus_f2b_rn", _BF16_RN[bool(s.target.hw_bf16)]),
        "opus_rsqrt64": "double opus_rsqrt64(double x) { return 1.0 / __builtin_sqrt(x); }",
        # cephes tanhf: odd polynomial near 0, 1 - 2/(e^{2|x|}+1) elsewhere (~2 ulp)
        "opus_tanhf": ("float opus_tanhf(float x) { "
                       "float a = __builtin_fabsf(x); "
                       "if (a < 0.625f) { float z = x * x; return "
                       "((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z "
                       "+ 1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x; } "
                       "float r = a > 9.0f ? 1.0f : 1.0f - 2.0f / (__builtin_expf(2.0f * a) + 1.0f); "
                       "return __builtin_copysignf(r, x); }"),
    }

    def launch_attributes(self, hints) -> str:
        attrs = [f"amdgpu_flat_work_group_size(1, {hints['max_threads']})"]
        if "waves_per_eu" in hints:
            attrs.append(f"amdgpu_waves_per_eu({hints['waves_per_eu']})")
        if "num_vgpr" in hints:
            attrs.append(f"amdgpu_num_vgpr({hints['num_vgpr']})")
        return f"__attribute__(({', '.join(attrs)})) "

    def float_to_int(self, f, src, to):
        # toward zero, saturating, NaN -> 0 (C's cast is undefined out of range)
        ct = self.scalar_ctype(to)
        lo, hi = to.int_range()
        fl = "" if src.name == "f64" else "f"
        lim_hi = f"{float(hi) + 1:.1f}{fl}"   # 2^bits (exactly representable)
        lim_lo = f"{float(lo):.1f}{fl}"
        hi_c = self.const_expr(hi, to)
        lo_c = self.const_expr(lo, to)
        return (f"({f} != {f} ? ({ct})0 : ({f} >= {lim_hi} ? {hi_c} : "
                f"({f} <= {lim_lo} ? {lo_c} : ({ct})({f}))))")

    # -- storage types: fp8 and e8m0 ----------------------------------------------------------
    # The chip's flavour of fp8 (Target.hw_fp8: FNUZ on gfx942, OCP on gfx950) converts with
    # its instructions; the other flavour and e8m0 with the exact bit arithmetic of
    # codegen/fp8.py, the same as on NVIDIA.
    def hw_fp8_decode(self, x, d):
        info = FP8_FORMATS[d.name]
        n = f"opus_{d.name}_to_f32"
        self.helper(n, f"float {n}(unsigned char b) "
                       f"{{ return __builtin_amdgcn_cvt_f32_{info['kind']}((int)b, 0); }}")
        return f"{n}({x})"

    def hw_fp8_encode(self, f, d, sat):
        info = FP8_FORMATS[d.name]
        n = f"opus_f32_to_{d.name}{'_sat' if sat else ''}"
        mx = f"{info['max']:.1f}f"
        cvt = f"(unsigned char)__builtin_amdgcn_cvt_pk_{info['kind']}_f32(f, f, 0, false)"
        clamp = f"f = __builtin_fminf(__builtin_fmaxf(f, -{mx}), {mx}); return {cvt};"
        body = f"if (f != f) return (unsigned char){info['nan']}; "
        if not sat:
            cond, code = self.fp8_overflowed(d, sat, "__builtin_fabsf(f)")
            body += f"if ({cond}) return (unsigned char){code}; "
        self.helper(n, f"unsigned char {n}(float f) {{ {body}{clamp} }}")
        return f"{n}({f})"

    # -- two lanes per instruction (Target.packed_conversion) -----------------------------------
    def packed_pair(self, pk, lo, hi, src, to, rnd, sat, indent):
        """f32 <-> the flavour's fp8 (v_cvt_pk_{fp8,bf8}_f32, v_cvt_pk_f32_{fp8,bf8}). (gfx950's
        f32 -> bf16 pairs need nothing here: clang fuses two (__bf16) casts into one
        v_cvt_pk_bf16_f32.)"""
        if pk.startswith("v_cvt_scalef32_pk_"):
            return self._fp4_pair(pk, lo, hi, src, to, rnd, sat, indent)
        t = self.fresh(prefix="pk")
        kind = FP8_FORMATS[(src if src.storage_only else to).name]["kind"]
        if src.storage_only:  # v_cvt_pk_f32_{fp8,bf8}: bytes 0 and 1 of the word
            self.line(indent, f"opus_f32x2_t {t} = __builtin_amdgcn_cvt_pk_f32_{kind}"
                              f"((int)((unsigned){lo} | ((unsigned){hi} << 8)), false);")
            return self._pair_lanes(t, to, rnd, sat)
        f = self._as_f32((lo, hi), src)
        self.line(indent, f"unsigned short {t} = {self._pk_encoder(to, sat, kind)}({f[0]}, {f[1]});")
        return [f"(unsigned char){t}", f"(unsigned char)({t} >> 8)"]

    def _pair_lanes(self, t, to, rnd, sat):
        """The two lanes of a decoded pair ``t`` (an opus_f32x2_t), converted to ``to``."""
        return [f"{t}[{i}]" if to.name == "f32" else self.cast_expr(f"{t}[{i}]", dt.f32, to, rnd, sat)
                for i in (0, 1)]

    def _as_f32(self, values, src):
        """``values`` of type ``src`` as f32 C expressions (what the pair encoders take)."""
        return [v if src.name == "f32" else self.cast_expr(v, src, dt.f32, "rn", False)
                for v in values]

    def _fp4_pair(self, pk, lo, hi, src, to, rnd, sat, indent):
        """gfx950's fp4 pair conversions at scale 1.0 (targets/amd.py _GFX950_FP4): decode one
        byte (lo in its low nibble) with v_cvt_scalef32_pk_f32_fp4, or encode two f32 with
        v_cvt_scalef32_pk_fp4_f32 (opus_f32x2_to_fp4_e2m1)."""
        t = self.fresh(prefix="pk")
        if src.storage_only:
            self.line(indent, f"opus_f32x2_t {t} = __builtin_amdgcn_cvt_scalef32_pk_f32_fp4("
                              f"(unsigned)({lo} | ({hi} << 4)), 1.0f, 0);")
            return self._pair_lanes(t, to, rnd, sat)
        f = self._as_f32((lo, hi), src)
        self.line(indent, f"unsigned char {t} = {self._fp4_pk_encoder()}({f[0]}, {f[1]});")
        return [f"(unsigned char)({t} & 15u)", f"(unsigned char)({t} >> 4)"]

    def _fp4_pk_encoder(self):
        """opus_f32x2_to_fp4_e2m1(lo, hi): the byte of two fp4 codes (lo in the low nibble). The
        instruction rounds to nearest even; it is fed values clamped to +-6 (so infinities and
        overflow give +-6 as the language's rule says, not by its own overflow rule) and a NaN
        lane is given the language's code afterwards (the zero of the opposite sign)."""
        fix = self.helper("opus_fix_fp4_e2m1",
                          "unsigned opus_fix_fp4_e2m1(float f, unsigned b) { return f != f ? "
                          "((__builtin_bit_cast(unsigned, f) >> 31) ^ 1u) << 3 : b; }")
        clamp = "__builtin_fminf(__builtin_fmaxf({}, -6.0f), 6.0f)"
        n = "opus_f32x2_to_fp4_e2m1"
        return self.helper(n, f"unsigned char {n}(float lo, float hi) {{ unsigned w = "
                              f"__builtin_amdgcn_cvt_scalef32_pk_fp4_f32(0u, {clamp.format('lo')}, "
                              f"{clamp.format('hi')}, 1.0f, 0); return (unsigned char)({fix}(lo, w & 15u) | "
                              f"({fix}(hi, (w >> 4) & 15u) << 4)); }}")

    def _pk_encoder(self, d, sat, kind):
        """opus_f32x2_to_<d>[_sat](lo, hi): one v_cvt_pk_{fp8,bf8}_f32 of the clamped lanes (lo in
        byte 0), NaN and overflow fixed up per lane as hw_fp8_encode does."""
        fix = self.fp8_fixup(d, sat)
        mx = f"{FP8_FORMATS[d.name]['max']:.1f}f"
        n = f"opus_f32x2_to_{d.name}{'_sat' if sat else ''}"
        clamp = "__builtin_fminf(__builtin_fmaxf({}, -{mx}), {mx})"
        return self.helper(n, f"unsigned short {n}(float lo, float hi) {{ unsigned w = (unsigned)"
                              f"__builtin_amdgcn_cvt_pk_{kind}_f32({clamp.format('lo', mx=mx)}, "
                              f"{clamp.format('hi', mx=mx)}, 0, false); "
                              f"return (unsigned short)({fix}(lo, w & 0xFFu) | ({fix}(hi, (w >> 8) & 0xFFu) << 8)); }}")

    # -- stochastic rounding in hardware (Target.hw_sr) ------------------------------------------
    def hw_sr(self, f, bits, to, sat):
        """v_cvt_sr_{fp8,bf8}_f32 (gfx942: FNUZ, gfx950: OCP) and gfx950's v_cvt_sr_{bf16,f16}_f32.
        fp8: NaN takes the canonical code; with sat the value is clamped first (the grid then
        never passes max), without it overflow is decided from the bits as the rule says
        (the top bits of r added below the kept mantissa carry past the largest finite value)."""
        if to.name in ("bf16", "f16"):
            ht = "__bf16" if to.name == "bf16" else "_Float16"
            n = f"opus_sr_{to.name}"
            self.helper(n, f"unsigned short {n}(float f, unsigned r) {{ typedef {ht} h2 "
                           f"__attribute__((ext_vector_type(2))); h2 z = {{0, 0}}; "
                           f"return __builtin_bit_cast(unsigned short, "
                           f"__builtin_amdgcn_cvt_sr_{to.name}_f32(z, f, r, false)[0]); }}")
            return f"{n}({f}, {bits})"
        info = FP8_FORMATS[to.name]
        m, _ = SR_FORMATS[to.name]
        mx = f"{info['max']:.1f}f"
        n = f"opus_sr_{to.name}{'_sat' if sat else ''}"
        body = (f"unsigned a = __builtin_bit_cast(unsigned, f) & 0x7FFFFFFFu; "
                f"if (a > 0x7F800000u) return (unsigned char){info['nan']}u; ")
        if not sat:
            maxbits = int(np_f32_bits(info["max"]))
            code = (f"({info['ovf_bits']}u | ((__builtin_bit_cast(unsigned, f) >> 24) & 0x80u))"
                    if info["signed_ovf"] else f"{info['ovf_bits']}u")
            body += (f"if (((a + (r >> {9 + m})) & {hex((0xFFFFFFFF << (23 - m)) & 0xFFFFFFFF)}u) > "
                     f"{maxbits}u) return (unsigned char){code}; ")
        body += (f"f = __builtin_fminf(__builtin_fmaxf(f, -{mx}), {mx}); "
                 f"return (unsigned char)__builtin_amdgcn_cvt_sr_{info['kind']}_f32(f, (int)r, 0, 0);")
        self.helper(n, f"unsigned char {n}(float f, unsigned r) {{ {body} }}")
        return f"{n}({f}, {bits})"

    # -- memory: buffer resources for bounded global accesses ----------------------------------
    def _is_global(self, p):
        return getattr(p.type, "space", "global") in ("global", None, "generic")

    def _helper_buffer(self):
        self.helper("opus_nrec", f"unsigned opus_nrec(long long bound, unsigned s) {{ "
                                 f"return bound <= 0 ? 0u : ((unsigned long long)bound >= {_OOB}ull / s ? "
                                 f"{hex(_OOB)}u : (unsigned)bound * s); }}")

    def _rsrc(self, ptr_c, bound_c, s, indent):
        self._helper_buffer()
        r = self.fresh(prefix="rsrc")
        self.line(indent, f"__amdgpu_buffer_rsrc_t {r} = __builtin_amdgcn_make_buffer_rsrc("
                          f"(void*){ptr_c}, (short)0, (int)opus_nrec((long long){bound_c}, {s}u), "
                          f"(int){hex(self.target.buffer_config)});")
        return r

    def _buf_load(self, a, voff, nbytes, ctype):
        raw = (f"__builtin_amdgcn_raw_buffer_load_{_BUF_B[nbytes]}({a.rsrc}, (int){voff}, "
               f"{a.soff}, {a.aux})")
        return raw if ctype == _BUF_T[nbytes] else f"__builtin_bit_cast({ctype}, {raw})"

    def _buf_store(self, val, ctype, a, voff, nbytes):
        v = val if ctype == _BUF_T[nbytes] else f"__builtin_bit_cast({_BUF_T[nbytes]}, {val})"
        return (f"__builtin_amdgcn_raw_buffer_store_{_BUF_B[nbytes]}({v}, {a.rsrc}, (int){voff}, "
                f"{a.soff}, {a.aux});")

    def _voffset(self, off, s, bound, delta=0, whole_off=False):
        """C expression: the buffer voffset (bytes) of element ``off + delta``: off * s where
        0 <= off + delta and (off + delta) * s < 0xfffffff0, else 0xfffffff0 (always >=
        num_records, and the per-dword check's +12 cannot wrap), so negative or huge offsets
        never alias back into range. One v_min_u32 and a shift for 32-bit offsets; none for
        byte elements with a 32-bit signed offset and bound (a negative offset reads as >= 2^31,
        beyond any num_records a 32-bit bound gives)."""
        o, t, bt = self.name(off), scalar_of(off.type), scalar_of(bound.type)
        # in range (_iv_ranges) only where the enclosing loop version established it (no
        # default: for bytes _OOB // 1 is _OOB itself, so every offset would pass, and a 64-bit
        # one past 2^32 would wrap into range)
        known = self._unclamped.get(off)
        if not delta and known is not None and known <= _OOB // s:
            return f"((unsigned){o} * {s}u)"
        if delta and whole_off:  # (soffset accesses) off itself must be >= 0
            o, t = f"((long long){o} < 0 ? -1ll : (long long){o} + {delta})", dt.i64
        elif delta:
            o, t = f"((long long){o} + {delta})", dt.i64
        if s == 1 and t.bits <= 32 and t.kind == "int" and bt.bits <= 32 and bt.kind == "int":
            return f"(unsigned){o}"
        lim = _OOB // s
        if t.bits <= 32 and (t.kind == "uint" or lim < 2 ** 31):  # a negative i32 is >= 2^31 > lim
            u = f"(unsigned){o}"
            return f"(({u} < {lim}u ? {u} : {lim}u) * {s}u)"
        u = f"(unsigned long long){o}"
        return f"((unsigned)({u} < {lim}ull ? {u} : {lim}ull) * {s}u)"

    def _soffset(self, soff, s):
        """C expression: the buffer soffset (bytes) of wave-uniform element offset ``soff``
        (readfirstlane puts it in an SGPR), clamped as _voffset clamps (negative -> out of
        range) with 32-bit scalar min/compare, which stay branch-free."""
        if soff is None:
            return "0"
        t, lim = scalar_of(soff.type), _OOB // s
        n = self.name(soff)
        if t.bits > 32:  # readfirstlane is 32-bit: clamp to 32 bits first
            n = f"((unsigned long long){n} < {lim}ull ? (unsigned){n} : {lim}u)"
        u = f"(unsigned)__builtin_amdgcn_readfirstlane((int){n})"
        clamped = f"__builtin_elementwise_min({u}, {lim}u)"  # s_min_u32 (a ?: becomes a branch)
        if t.bits <= 32 and t.kind == "int" and lim >= 2 ** 31:  # bytes: catch negatives
            clamped = f"(__builtin_amdgcn_readfirstlane((int){n}) < 0 ? {lim}u : {clamped})"
        return f"(int)({clamped} * {s}u)"

    def _param_alignment(self):
        """{parameter value: bytes it is aligned to}: the launch checks each pointer
        argument's alignment for the widest access made through it (Function attrs 'align')."""
        align = self.fn.attrs.get("align") or {}
        return {p.value: align.get(p.name, 1) for p in self.fn.params}

    def _alignment(self, p):
        """Bytes pointer ``p`` is known to be aligned to (its element size at least)."""
        s = p.type.elem.itemsize
        if p in self._param_alignment():
            return max(s, self._param_alignment()[p])
        if p.owner is not None and p.owner.kind == "ptr_add":
            base, k = p.owner.operands
            k = _static_int(k)
            if k is not None:
                lowbit = (k * s) & -(k * s) if k else 1 << 30
                return max(s, min(self._alignment(base), lowbit))
        return s

    def _uniform_exactness(self, p, bound, vec, s):
        """The wave-uniform condition under which a vec access through ``p`` (aligned to it)
        with ``bound`` is exact (``_exactness``), when that is all it needs; None when it is
        exact without one or needs a per-lane test."""
        T = vec * s
        g = max(1, min(T, 4) // s)
        if g == 1 or self._alignment(p) < T or _known_multiple(bound, g):
            return None
        return f"(({self.name(bound)}) & {g - 1}) == 0"

    def render_for(self, op, indent):
        """A loop is emitted twice, a fast version taken where conditions known before the
        loop hold and the general one, when the fast version saves work in every iteration:
        bounded sub-dword vector accesses exact as whole vectors (the bounds' parity,
        ``_loop_exactness``); a run-time step's sign (``_step_version``: no sign test per
        iteration); bounded accesses at the induction variable in range of the plain voffset
        (``_iv_ranges``: no clamp per access). One branch before the loop keeps these tests
        out of its body."""
        exact = self._loop_exactness(op)
        positive, step_cond = self._step_version(op)
        ranges, unclamped = self._iv_ranges(op) if positive and self._small(op) else ((), {})
        conds = exact | step_cond | frozenset(ranges)
        if not conds:
            return super().render_for(op, indent)
        names = self._carried(op.operands[3:], indent)
        self.line(indent, f"if ({' && '.join(sorted(conds))}) {{")
        before = self._assumed, self._unclamped
        self._assumed, self._unclamped = self._assumed | exact, {**self._unclamped, **unclamped}
        self.emit_for_loop(op, indent + 1, names, 1 if step_cond else None)
        self._assumed, self._unclamped = before
        self.line(indent, "} else {")
        self.emit_for_loop(op, indent + 1, names)
        self.line(indent, "}")
        self._bind_args(op.results, names)

    _assumed = frozenset()  # exactness conditions the enclosing loop version established
    _unclamped = {}  # offset value -> L: the enclosing loop version established 0 <= it <= L

    @staticmethod
    def _small(op):
        return sum(1 for _ in HipEmitter._ops_within(op)) <= _VERSIONED_LOOP_OPS

    def _step_version(self, op):
        """(the step is positive in the fast version, the condition that makes it so): a
        compile-time step needs none; a run-time one, in a small loop, the test ``step > 0``
        (the general version keeps the per-iteration sign test, cemit.emit_for_loop)."""
        step = op.operands[2]
        k = _static_int(step)
        if k is not None:
            return k > 0, frozenset()
        if not self._small(op):
            return False, frozenset()
        return True, frozenset({f"{self.name(step)} > 0"})

    def _iv_ranges(self, op):
        """(conditions, {offset value: L}) under which the loop's bounded global accesses at
        the induction variable plus a constant c need no voffset clamp (``_voffset``). With a
        positive step and ub + step <= 2^31 (the i32 induction variable never wraps), every
        offset lies in [lb + c, ub - 1 + c]; lb + c >= 0 and ub - 1 + c <= L (L*s = 0xfffffff0
        at most) make off * s exact, with no unsigned wrap."""
        lb, ub, step = op.operands[:3]
        iv = op.regions[0].args[0]
        t = scalar_of(iv.type)
        if t.kind != "int" or t.bits != 32:
            return (), {}
        conds, unclamped = set(), {}
        for inner in self._ops_within(op):
            if inner.kind not in ("load", "store") or inner.attrs.get("soffset"):
                continue
            p, off, _, bound, _ = access_operands(inner)
            c = _iv_plus_const(off, iv)
            if bound is None or c is None or not self._is_global(p) or p.type.elem.packed:
                continue
            bt = scalar_of(bound.type)
            if p.type.elem.itemsize == 1 and bt.kind == "int" and bt.bits <= 32:
                continue  # bytes need no clamp (_voffset)
            lim = _OOB // p.type.elem.itemsize
            plus = f" + {c}" if c else ""
            conds |= {f"(long long){self.name(lb)}{plus} >= 0",
                      f"(long long){self.name(ub)}{plus} <= {lim + 1}ll"}
            unclamped[off] = min(lim, unclamped.get(off, lim))
        if conds:
            conds.add(f"(long long){self.name(ub)} + (long long){self.name(step)} <= 2147483648ll")
        return conds, unclamped

    def _loop_exactness(self, op):
        """The uniform exactness conditions (``_uniform_exactness``) of the bounded global
        vector accesses in loop ``op`` whose bound is defined before the loop."""
        conds = set()
        for inner in self._ops_within(op):
            if inner.kind not in ("load", "store") or inner.attrs.get("vec", 1) == 1:
                continue
            p, _, _, bound, _ = access_operands(inner)
            if bound is None or not self._is_global(p) or bound not in self.names:
                continue
            c = self._uniform_exactness(p, bound, inner.attrs["vec"], p.type.elem.itemsize)
            if c is not None and c not in self._assumed:
                conds.add(c)
        return frozenset(conds)

    @staticmethod
    def _ops_within(op):
        for region in op.regions:
            for inner in region.ops:
                yield inner
                yield from HipEmitter._ops_within(inner)

    def _exactness(self, a, vec):
        """When the buffer unit's check of a whole vector is exact per element (ir/ops.py: the
        hardware checks each dword, or the whole access when it is smaller, against
        num_records; offsets are unsigned): (static: True/False, C condition or None).
        Two things can break it: a vector starting below 0 and ending above (the clamped
        voffset puts all of it out of range) and a dword holding elements on both sides of
        the bound (s < 4: the dword is dropped whole)."""
        s, off, bound = a.s, a.off, a.bound
        T = vec * s
        g = max(1, min(T, 4) // s)  # elements per checked granule
        o = _static_int(off)
        aligned = self._alignment(a.p) >= T  # then off (+ soffset) is a multiple of vec
        conds = []
        # with a soffset a negative off is out of range whole (ir/ops.py): no straddling
        if a.soffset is None and not aligned and not (o is not None and o >= 0):
            conds.append(f"((long long){self.name(off)} >= 0 || (long long){self.name(off)} <= -{vec})")
        if g > 1 and not (aligned and _known_multiple(bound, g)):
            b = self.name(bound)
            if aligned:  # uniform where the bound is: a scalar branch
                c = self._uniform_exactness(a.p, bound, vec, s)
                if c not in self._assumed:
                    conds.append(c)
            else:
                start = f"(long long){self.name(off)}" + (
                    f" + (long long){self.name(a.soffset)}" if a.soffset is not None else "")
                conds.append(f"(((long long){b} - ({start})) & {g - 1}) == 0")
        return " && ".join(conds) or None

    def _vector_access(self, a, vec, whole, per_element, indent):
        """Emit a bounded vector access from its two forms: ``whole`` (one buffer instruction
        of the vector's 2 to 16 bytes: tracing refuses wider accesses, lang/memory.py
        _check_vec; the hardware's range check) and ``per_element`` (one access per element,
        each checked exactly), the whole form wherever it is exact (``_exactness``)."""
        cond = self._exactness(a, vec)
        if cond is None:
            whole(indent)
            return
        o, b = f"(long long){self.name(a.off)}", f"(long long){self.name(a.bound)}"
        inside = f"{o} >= 0 && {o} + {vec} <= {b}"  # the whole vector in range: exact too
        if a.soffset is not None:
            so = f"(long long){self.name(a.soffset)}"
            inside = f"{o} >= 0 && {so} >= 0 && {o} + {so} + {vec} <= {b}"
        # two branches, not one on (cond || inside): cond alone is often wave-uniform (a
        # scalar branch, the per-lane test off the common path)
        self.line(indent, f"if ({cond}) {{")
        whole(indent + 1)
        self.line(indent, f"}} else if ({inside}) {{")
        whole(indent + 1)
        self.line(indent, "} else {")
        per_element(indent + 1)
        self.line(indent, "}")

    def _bounded(self, op, indent):
        """The parts of a bounded buffer access: element type, size, resource, soffset, aux."""
        p, off, _, bound, soff = access_operands(op)
        e = p.type.elem
        if e.bits % 8 and not e.is_bool:  # bool is one byte in memory
            raise CodegenError(f"internal: bounded {op.kind}s of {e.name} reached the hip renderer "
                               "(sub-byte types are refused while tracing)")
        s = e.itemsize
        rsrc = self._rsrc(self.name(p), self.name(bound), s, indent)
        aux = self.target.cache_policy(op.attrs.get("cache", "normal"), op.kind)
        return _Access(p, off, bound, soff, e, s, rsrc, self._soffset(soff, s), aux)

    def uniform(self, expr):
        return f"__builtin_amdgcn_readfirstlane((int){expr})"

    def u32_address(self, ptr_c, off_c, elem):
        """The byte offset in 32 bits, then one add to the base: clang's pattern for the global
        instructions' SGPR base + 32-bit VGPR offset (a 64-bit element index would not be)."""
        et = self.scalar_ctype(elem)
        return f"({et}*)((char*){ptr_c} + {off_c} * {elem.itemsize}u)"

    def _nontemporal(self, hint):
        if hint != self.target.cache_hints["streaming"]["load"]:
            raise CodegenError(f"internal: cache policy {hint} on an unbounded access reached the "
                               f"hip renderer (only STREAMING's nt has a builtin there)")

    def load_expr(self, addr, ctype, nbytes, hint):
        """Unbounded loads with STREAMING: clang's nontemporal load (global_load ... nt)."""
        self._nontemporal(hint)
        raw = _BUF_T[nbytes]
        return f"__builtin_bit_cast({ctype}, __builtin_nontemporal_load((const {raw}*)({addr})))"

    def store_stmt(self, addr, value, ctype, nbytes, hint):
        self._nontemporal(hint)
        raw = _BUF_T[nbytes]
        return f"__builtin_nontemporal_store(__builtin_bit_cast({raw}, {value}), ({raw}*)({addr}));"

    def render_load(self, op, indent):
        p, off, _, bound, soff = access_operands(op)
        if not self._is_global(p) or p.type.elem.packed:  # sub-byte: codegen/subbyte.py
            return super().render_load(op, indent)
        if bound is None:
            return super().render_load(op, indent)
        r = op.results[0]
        vec = op.attrs["vec"]
        a = self._bounded(op, indent)
        s, ect = a.s, self.scalar_ctype(a.elem)
        if vec == 1:
            self.assign_lanes(r, [self._buf_load(a, self._voffset(off, s, bound), s, ect)], indent)
            return
        n = self.declare(r, indent)
        vt = self.ctype(r.type)

        def whole(ind):
            voff = self._voffset(off, s, bound)
            self.line(ind, f"{n} = {self._buf_load(a, voff, vec * s, vt)};")

        def per_element(ind):
            for i in range(vec):
                voff = self._voffset(off, s, bound, i, soff is not None)
                self.line(ind, f"{n}.v[{i}] = {self._buf_load(a, voff, s, ect)};")

        self._vector_access(a, vec, whole, per_element, indent)

    def render_store(self, op, indent):
        p, off, val, bound, soff = access_operands(op)
        if not self._is_global(p) or p.type.elem.packed:  # sub-byte: codegen/subbyte.py
            return super().render_store(op, indent)
        if bound is None:
            return super().render_store(op, indent)
        vec = op.attrs["vec"]
        a = self._bounded(op, indent)
        s, ect = a.s, self.scalar_ctype(a.elem)
        value_c = self.name(val)
        if vec == 1:
            self.line(indent, self._buf_store(value_c, ect, a, self._voffset(off, s, bound), s))
            return
        vt = self.ctype(val.type)

        def whole(ind):
            voff = self._voffset(off, s, bound)
            self.line(ind, self._buf_store(value_c, vt, a, voff, vec * s))

        def per_element(ind):
            for i in range(vec):
                voff = self._voffset(off, s, bound, i, soff is not None)
                self.line(ind, self._buf_store(f"{value_c}.v[{i}]", ect, a, voff, s))

        self._vector_access(a, vec, whole, per_element, indent)

    def render_lds_load(self, op, indent):
        """buffer_load ... lds (ir/ops.py lds_load): the source through a buffer resource (a
        bounded view's range check; an unbounded view's spans 4 GiB), its voffset clamped as
        bounded loads clamp theirs (negative: out of range), the LDS base wave-uniform (M0)
        from the first lane's offset."""
        dst, wave_off, src, src_off = op.operands[:4]
        nbytes = op.attrs["nbytes"]
        s = src.type.elem.itemsize
        bound_c = self.name(op.operands[4]) if len(op.operands) > 4 else f"{_OOB}ll"
        rsrc = self._rsrc(self.name(src), bound_c, s, indent)
        lds = (f"(__attribute__((address_space(3))) void*)({self.name(dst)} + "
               f"__builtin_amdgcn_readfirstlane((int){self.name(wave_off)}))")
        o, lim = f"(unsigned long long)(long long){self.name(src_off)}", _OOB // s
        voff = f"(unsigned)({o} < {lim}ull ? {o} : {lim}ull) * {s}u"
        self.line(indent, f"__builtin_amdgcn_raw_ptr_buffer_load_lds({rsrc}, {lds}, {nbytes}, "
                          f"{voff}, 0, 0, 0);")


def render_hip(fn, target) -> str:
    """Headerless HIP C++ (device only) for a traced Function."""
    return HipEmitter(fn, target).render()
