"""Branches of codegen/cemit.py's ``CEmitter.cast_expr`` that the differential programs do not
generate, run on the host against ml_dtypes, Python integers and hand values (issue 17.4: the
survivors of cast_expr's mutants):

* sub-byte lanes (fp4, fp6, int4, uint4) converted one lane at a time (vectors of fewer than 8
  lanes: no fp4 word encoder) to and from the other types: f16, bf16, f64, fp8, narrow and
  wide integers (subbyte.cast_packed, which passes the rounding and sat on);
* f64 to every integer width: CUDA's cvt.rzi must take the double, not a float rounded from it
  (the values are chosen so that rounding to f32 first moves the truncated result);
* f16 <-> bf16 with rounding "rz", "truncate" and "truncate_with_nan" (the 16-bit float to
  16-bit float branch passes the rounding on);
* the internal refusal of a rounding mode other than "rn" into f32/f64, word for word.
"""
import functools
import math
import re

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from opus.codegen.cemit import CodegenError
from opus.codegen.cuda import CudaEmitter
from opus.codegen.hip import HipEmitter
from hostexec import HostProgram, Launch

TARGETS = ["sm_90a", "gfx942"]


def _build(target, kernels, tmp_path):
    """One host program holding ``kernels`` (name -> kernel) for ``target``."""
    prog = HostProgram(target)
    ks = {name: prog.add(k.specialize(target=target)) for name, k in kernels.items()}
    prog.build(tmp_path)
    return prog, ks


def _unpack(data, bits, n):
    """Codes of a packed byte stream: element i at bits [i*bits, (i+1)*bits), little-endian."""
    stream = int.from_bytes(bytes(np.asarray(data, np.uint8)), "little")
    return [(stream >> (i * bits)) & ((1 << bits) - 1) for i in range(n)]


def _pack(codes, bits):
    stream = sum((int(c) & ((1 << bits) - 1)) << (i * bits) for i, c in enumerate(codes))
    return np.frombuffer(stream.to_bytes(len(codes) * bits // 8, "little"), np.uint8).copy()


# -- sub-byte lanes to the other types ---------------------------------------------------------

SUB_BYTE = [opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2, opus.int4, opus.uint4]
DECODED = (f16, bf16, f64, i8, i64, u16, opus.fp8_e4m3)


@functools.cache
def decoder(S):
    """Each thread converts one access (pack_elems lanes) of S to every type of DECODED and
    stores the lanes one by one."""
    vec = S.pack_elems

    @opus.kernel
    def decode(x: opus.Ptr[S], a: opus.Ptr[f16], b: opus.Ptr[bf16], c: opus.Ptr[f64],
               d: opus.Ptr[i8], e: opus.Ptr[i64], g: opus.Ptr[u16],
               h: opus.Ptr[opus.fp8_e4m3]):
        i = opus.thread_id_x() * vec
        v = opus.load(x, i, vec=vec)
        for out, t in ((a, f16), (b, bf16), (c, f64), (d, i8), (e, i64), (g, u16),
                       (h, opus.fp8_e4m3)):
            w = opus.cast(v, t)
            for k in range(vec):
                out[i + k] = w[k]
    return decode


def _values_of_codes(S):
    """Every code of S and its value: ml_dtypes for the floats, two's complement by hand for
    int4."""
    codes = np.arange(1 << S.bits, dtype=np.uint8)
    if S.kind == "float":
        return codes, codes.view(S.np_dtype).astype(np.float64)
    vals = codes.astype(np.int64)
    return codes, (np.where(vals >= 8, vals - 16, vals) if S.kind == "int" else vals)


def _decoded_refs(S, vals):
    """What each DECODED type holds for the values of S (ir/ops.py cast: floats exact,
    ints wrap, floats to ints truncate and saturate)."""
    as_int = np.trunc(vals).astype(np.int64)
    vals = vals.astype(np.float64)                # exact: at most 5 significant bits
    return {
        f16: vals.astype(np.float16).view(np.uint16),
        bf16: vals.astype(ml_dtypes.bfloat16).view(np.uint16),
        f64: vals.view(np.uint64),
        i8: as_int.astype(np.int8),
        i64: as_int,
        u16: (np.clip(as_int, 0, 65535) if S.kind == "float" else as_int & 0xFFFF).astype(np.uint16),
        opus.fp8_e4m3: vals.astype(ml_dtypes.float8_e4m3fn).view(np.uint8),
    }


@pytest.mark.parametrize("target", TARGETS)
def test_every_sub_byte_code_converts_lane_by_lane_to_the_other_types(target, tmp_path):
    """Every code of fp4, both fp6 and both 4-bit integers into f16, bf16, f64, i8, i64, u16 and
    fp8 e4m3 (all exact but the float -> int truncations; u16 takes negative floats to 0 and
    wraps negative ints); -0.0 keeps its sign bit."""
    prog, ks = _build(target, {S.name: decoder(S) for S in SUB_BYTE}, tmp_path)
    outs = {}
    launches = []
    for S in SUB_BYTE:
        codes, _ = _values_of_codes(S)
        n = len(codes)
        outs[S] = {t: np.zeros(n, t.np_dtype) for t in DECODED}
        args = [_pack(codes, S.bits)] + [outs[S][t] for t in DECODED]
        launches.append(Launch(ks[S.name], 1, n // S.pack_elems, args))
    prog.run(launches)
    for S in SUB_BYTE:
        _, vals = _values_of_codes(S)
        for t, want in _decoded_refs(S, vals).items():
            got = outs[S][t].view(want.dtype)
            assert got.tolist() == want.tolist(), (S.name, t.name, vals, got, want)


# -- the other types to sub-byte lanes ---------------------------------------------------------

@functools.cache
def encoder(src, dst):
    vec = dst.pack_elems

    @opus.kernel
    def encode(x: opus.Ptr[src], y: opus.Ptr[dst]):
        i = opus.thread_id_x() * vec
        opus.store(y, opus.cast(opus.load(x, i, vec=vec), dst), i, vec=vec)
    return encode


NAN, INF = math.nan, math.inf
# (source, destination, values, their codes by hand)
ENCODINGS = [
    # E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6: codes 0-7, bit 3 the sign): ties to the even code,
    # saturation at 6, NaN -> the zero of the opposite sign
    (f64, opus.fp4_e2m1, [0.25, 0.75, 1.25, 2.5, 5.0, 100.0, -1.75, -0.0, NAN, -INF],
     [0, 2, 2, 4, 6, 7, 0xC, 8, 8, 0xF]),
    # int4: floats truncate toward zero and saturate at -8..7, NaN -> 0
    (f64, opus.int4, [-9.5, 7.9, -0.5, 3.99, NAN, 1e300, -1e300, 2.0],
     [8, 7, 0, 3, 0, 7, 8, 2]),
    # uint4: integers wrap (the low 4 bits)
    (i16, opus.uint4, [-1, 16, 17, 300, -32768, 15, 7, 8], [15, 0, 1, 12, 0, 15, 7, 8]),
    # E2M3 (steps of 0.125 below 2, 0.25 to 4, 0.5 to 7.5; bit 5 the sign): ties to even,
    # saturation at 7.5
    (bf16, opus.fp6_e2m3, [0.0625, 0.1875, 7.5, 8.0, -3.25, 1.0625, -0.0, 100.0],
     [0, 2, 31, 31, 32 | 21, 8, 32, 31]),
]


@pytest.mark.parametrize("target", TARGETS)
def test_other_types_convert_lane_by_lane_to_sub_byte_codes(target, tmp_path):
    kernels = {f"{s.name}_{d.name}": encoder(s, d) for s, d, _, _ in ENCODINGS}
    prog, ks = _build(target, kernels, tmp_path)
    launches, outs = [], []
    for s, d, vals, _ in ENCODINGS:
        y = np.zeros(len(vals) * d.bits // 8, np.uint8)
        outs.append(y)
        launches.append(Launch(ks[f"{s.name}_{d.name}"], 1, len(vals) // d.pack_elems,
                               [np.array(vals).astype(s.np_dtype), y]))
    prog.run(launches)
    for (s, d, vals, codes), y in zip(ENCODINGS, outs):
        assert _unpack(y, d.bits, len(vals)) == codes, (s.name, d.name, vals)


def test_hand_codes_agree_with_ml_dtypes():
    """The float codes above are ml_dtypes' (through f32, as docs/language.md says)."""
    for s, d, vals, codes in ENCODINGS:
        if d.kind == "float":
            x = np.array(vals, np.float32)
            ok = ~np.isnan(x)   # ml_dtypes keeps a NaN's sign the other way round for e2m1
            got = x[ok].astype(d.np_dtype).view(np.uint8) & ((1 << d.bits) - 1)
            assert got.tolist() == np.array(codes)[ok].tolist(), d.name


# -- f64 to every integer width ------------------------------------------------------------------

INTS = (i32, u32, i64, u64, i8, u8, i16, u16)

# each value truncates differently once rounded to f32 (16777217.5 -> 16777218.0f,
# 2.9999999999 -> 3.0f, 1e15 + 0.5 -> 999999986991104.0f, ...), for some width
F64_VALUES = [16777217.5, 2.9999999999, -2.9999999999, 100.99999999, 200.9999999,
              -30000.999999, 65000.99999, 3000000001.75, 1e15 + 0.5, -1e15 - 0.5,
              1.8e19, NAN, INF, -INF, 1e300, -1e300, 0.0, -0.5,
              # a half and one and a half either side of each width's limits (saturation
              # starts exactly there); past 2^53 the doubles next to 2^63 and 2^64
              *(v + d for t in INTS if t.bits < 64 for v in t.int_range()
                for d in (-1.5, -0.5, 0.5, 1.5)),
              2.0 ** 63 - 1024, 2.0 ** 63, -2.0 ** 63, -2.0 ** 63 - 2048, 2.0 ** 64 - 2048, 2.0 ** 64]


@opus.kernel
def f64_to_ints(x: opus.Ptr[f64], a: opus.Ptr[i32], b: opus.Ptr[u32], c: opus.Ptr[i64],
                d: opus.Ptr[u64], e: opus.Ptr[i8], g: opus.Ptr[u8], h: opus.Ptr[i16],
                k: opus.Ptr[u16]):
    t = opus.thread_id_x()
    v = x[t]
    a[t] = opus.cast(v, i32)
    b[t] = opus.cast(v, u32)
    c[t] = opus.cast(v, i64)
    d[t] = opus.cast(v, u64)
    e[t] = opus.cast(v, i8)
    g[t] = opus.cast(v, u8)
    h[t] = opus.cast(v, i16)
    k[t] = opus.cast(v, u16)


def _to_int(v, t):
    """ir/ops.py cast by hand: toward zero, saturating, NaN -> 0 (Python integers: exact)."""
    lo, hi = t.int_range()
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(math.trunc(v), lo), hi)


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_f64_to_every_integer_width_truncates_the_double(target, tmp_path):
    prog, ks = _build(target, {"k": f64_to_ints}, tmp_path)
    x = np.float64(F64_VALUES)
    outs = [np.zeros(len(x), t.np_dtype) for t in INTS]
    prog.run([Launch(ks["k"], 1, len(x), [x] + outs)])
    for t, got in zip(INTS, outs):
        want = [_to_int(v, t) for v in F64_VALUES]
        with np.errstate(over="ignore"):
            through_f32 = [_to_int(float(np.float32(v)), t) for v in F64_VALUES]
        assert want != through_f32, t.name          # the values tell the two apart
        assert got.tolist() == want, t.name


def test_f64_to_integers_compile_to_truncating_f2i():
    """The same kernel through NVRTC (no GPU needed): each cvt.rzi helper is valid PTX with its
    register constraints, one truncating F2I per destination kind (the 8/16-bit widths go
    through the 32-bit conversions)."""
    sass = f64_to_ints.specialize(target="sm_80").sass
    assert set(re.findall(r"F2I\S*", sass)) == {"F2I.F64.TRUNC", "F2I.U32.F64.TRUNC",
                                                 "F2I.S64.F64.TRUNC", "F2I.U64.F64.TRUNC"}


# -- f16 <-> bf16 with each rounding ---------------------------------------------------------------

@opus.kernel
def half_to_half(x: opus.Ptr[f16], y: opus.Ptr[bf16], rz: opus.Ptr[bf16], tr: opus.Ptr[bf16],
                 trn: opus.Ptr[bf16], rn: opus.Ptr[bf16], hz: opus.Ptr[f16], hn: opus.Ptr[f16]):
    t = opus.thread_id_x()
    rz[t] = opus.cast(x[t], bf16, rounding="rz")
    tr[t] = opus.cast(x[t], bf16, rounding="truncate")
    trn[t] = opus.cast(x[t], bf16, rounding="truncate_with_nan")
    rn[t] = opus.cast(x[t], bf16)
    hz[t] = opus.cast(y[t], f16, rounding="rz")
    hn[t] = opus.cast(y[t], f16)


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_f16_and_bf16_convert_to_each_other_with_the_casts_rounding(target, tmp_path):
    """By hand. f16 -> bf16 (f32 bits, then their high half toward zero, or to nearest even):
    0x3C06 (1 + 2^-8 + 2^-9: 0x3F80C000) -> 0x3F80 / 0x3F81; its negative; 0x7BFF (65504:
    0x477FE000) -> 0x477F / 0x4780; 0x3555 (0x3EAAA000) -> 0x3EAA / 0x3EAB; 2.0 and inf exact.
    bf16 -> f16: 0x4780 (65536) -> 0x7BFF (the largest finite) / 0x7C00 (inf); its negative;
    0x33C0 (1.5 * 2^-24) -> 0x0001 / 0x0002 (the tie to even); 0x3F81 (1 + 2^-7) exact;
    0x3340 (0.75 * 2^-24) -> 0x0000 / 0x0001; 2.0 exact."""
    prog, ks = _build(target, {"k": half_to_half}, tmp_path)
    x = np.uint16([0x3C06, 0xBC06, 0x7BFF, 0x3555, 0x4000, 0x7C00])
    y = np.uint16([0x4780, 0xC780, 0x33C0, 0x3F81, 0x3340, 0x4000])
    outs = [np.zeros(6, np.uint16) for _ in range(6)]
    prog.run([Launch(ks["k"], 1, 6, [x.view(np.float16), y.view(ml_dtypes.bfloat16)]
                     + [o.view(t.np_dtype) for o, t in zip(outs, (bf16,) * 4 + (f16,) * 2)])])
    rz, tr, trn, rn, hz, hn = (o.tolist() for o in outs)
    toward_zero = [0x3F80, 0xBF80, 0x477F, 0x3EAA, 0x4000, 0x7F80]
    assert rz == tr == trn == toward_zero
    assert rn == [0x3F81, 0xBF81, 0x4780, 0x3EAB, 0x4000, 0x7F80]
    assert hz == [0x7BFF, 0xFBFF, 0x0001, 0x3C08, 0x0000, 0x4000]
    assert hn == [0x7C00, 0xFC00, 0x0002, 0x3C08, 0x0001, 0x4000]


# -- the internal refusal ------------------------------------------------------------------------

@opus.kernel
def widen(x: opus.Ptr[f32], y: opus.Ptr[f64]):
    y[0] = opus.cast(x[0], f64)


@pytest.mark.parametrize("emitter,target", [(CudaEmitter, "sm_80"), (HipEmitter, "gfx942")])
def test_rounding_into_f32_or_f64_is_an_internal_error(emitter, target):
    """Tracing refuses "rz" into f64 (Target.conversion); should it reach the renderer, the
    error says it is internal, with the rounding, the type and the backend."""
    with pytest.raises(opus.TraceError, match="conversions to f64 round to nearest"):
        @opus.kernel
        def rz_f64(x: opus.Ptr[f32], y: opus.Ptr[f64]):
            y[0] = opus.cast(x[0], f64, rounding="rz")
        rz_f64.source(target=target)
    spec = widen.specialize(target=target)
    em = emitter(spec.function, spec.target)
    for src, to, rnd in ((f32, f64, "rz"), (i32, f32, "truncate")):
        with pytest.raises(CodegenError) as info:
            em.cast_expr("x", src, to, rnd, False)
        assert info.value.raw_message == (
            f"internal: rounding {rnd!r} to {to.name} reached the {em.backend} renderer "
            f"(Target.conversion refuses it)")
