"""The HIP dialect's helpers executed on the host (gfx942 and gfx950): bounded global accesses
through buffer resources (opus_boff / opus_nrec and the raw-buffer range check) for every
access width from 1 to 16 bytes, with masked tails, negative and huge offsets (and the same
accesses as sm_80 renders them: the C emitter's bounds conditions and vector tails); and the
software conversion paths (fp8 of the other flavour, e8m0, bf16 on gfx942, f16 rz), besides
the chip's own fp8 flavour through the shimmed instructions. References: numpy indexing
written from the bounds rule, and ml_dtypes with the documented conversion rules. The same
conversions also run for sm_80 and sm_90a, so every shimmed conversion instruction (PTX cvt,
v_cvt_*) is checked against ml_dtypes too."""
import functools

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32, i32
from hostexec import HostProgram, Launch
from hostexec.float_refs import ALL_CODES, dense_f32, e8m0_encode, ml_encode, same_floats

# NaN and out-of-range inputs are the point: numpy's casts of them need not warn
pytestmark = pytest.mark.filterwarnings("ignore:.* encountered in cast:RuntimeWarning")

AMD = ["gfx942", "gfx950"]
# (element type, vector widths): every access width the language has (1, 2, 4, 8, 16 bytes)
# with every element size that makes it
ACCESSES = [(opus.u8, (1, 2, 4, 8, 16)), (opus.bf16, (1, 2, 4, 8)), (opus.f32, (1, 2, 4)),
            (opus.i64, (1, 2))]
THREADS = 8
SENTINEL = 0x5B


@functools.lru_cache(None)
def copier(t, vec):
    """y[(t + store_shift) * vec ...] = x[load_base + t * vec ...], both through bounded views."""
    @opus.kernel
    def copy(x: opus.Ptr[t], y: opus.Ptr[t], n: i32, m: i32, base: i32, shift: i32):
        tid = opus.thread_id_x()
        v = opus.make_gmem(x, n).load(base + tid * vec, vec=vec)
        opus.make_gmem(y, m).store(v, (tid + shift) * vec)
    return copy


def _bits(t, n, seed):
    """n elements of t with random nonzero bytes (a read of 0 is never data)."""
    rng = np.random.default_rng(seed)
    return rng.integers(1, 256, n * t.itemsize, dtype=np.uint8).view(t.np_dtype)


def _cases(t, vec):
    """(n, m, load base, store shift): tails cut at every lane, empty and negative bounds,
    negative offsets, and element offsets whose byte offset is 2^32 (wraps to 0 in 32 bits) or
    beyond any resource."""
    length = (THREADS + 2) * vec
    bounds = sorted({length, length - 1, length - vec - 1, THREADS * vec // 2 + 1, 1, 0, -5})
    out = [(n, m, 0, 0) for n in bounds for m in (length, length - 1, vec // 2 + 1, 0)]
    out += [(length, length, -vec, 0), (length, length, -2 * vec, -1), (length, length, 2 * vec, -2),
            (length, length, -(2 ** 31) + vec * 4, 1), (length, length, (2 ** 30 // vec) * vec, 0)]
    if t.itemsize >= 4:  # element offset 2^32 / size: its byte offset wraps to 0 in 32 bits
        wrap = 2 ** 32 // t.itemsize
        out += [(length, length, wrap - vec * 2, 0), (length, length, wrap, 0)]
    return [c for c in out if c[0] <= length and c[1] <= length]


def expected_copy(x, y, vec, n, m, base, shift):
    """The bounds rule: lane j loads x[i] if 0 <= i < n else 0; stores where 0 <= i < m."""
    out = y.copy()
    for tid in range(THREADS):
        for j in range(vec):
            i = base + tid * vec + j
            v = x[i] if 0 <= i < n else np.zeros((), x.dtype)
            o = (tid + shift) * vec + j
            if 0 <= o < m:
                out[o] = v
    return out


@pytest.fixture(scope="module", params=AMD + ["sm_80"])
def copies(request, tmp_path_factory):
    """Every (type, vec, case) launch of the copier on one target, run in one host program."""
    target = request.param
    prog = HostProgram(target)
    runs = []
    for t, vecs in ACCESSES:
        for vec in vecs:
            k = prog.add(copier(t, vec).specialize(target=target))
            for case in _cases(t, vec):
                x = _bits(t, (THREADS + 2) * vec, len(runs))
                y = np.full(len(x) * t.itemsize, SENTINEL, np.uint8).view(t.np_dtype)
                runs.append((t, vec, case, x, y.copy(), Launch(k, 1, THREADS, [x.copy(), y, *case])))
    prog.build(tmp_path_factory.mktemp(target))
    prog.run([r[-1] for r in runs])
    return target, runs


def test_bounded_accesses_every_width(copies):
    target, runs = copies
    bad = []
    for t, vec, case, x, y0, launch in runs:
        want = expected_copy(x, y0, vec, *case)
        got = launch.args[1]
        if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
            bad.append(f"{t.name} vec={vec} (n, m, base, shift)={case}: got {got.view(np.uint8)[:32]}, "
                       f"want {want.view(np.uint8)[:32]}")
    assert not bad, f"{len(bad)} of {len(runs)} bounded copies wrong on {target}:\n" + "\n".join(bad[:6])


def test_every_access_width_was_exercised():
    made = {(t.itemsize, t.itemsize * v) for t, vecs in ACCESSES for v in vecs}
    assert made == {(s, w) for s in (1, 2, 4, 8) for w in (1, 2, 4, 8, 16) if w >= s}


# -- conversions ------------------------------------------------------------------------------

FP8 = [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz]
ENCODINGS = [(t, sat, "rn") for t in FP8 + [opus.e8m0] for sat in (False, True)] + \
            [(opus.e8m0, sat, "rz") for sat in (False, True)] + \
            [(opus.bf16, False, "rn"), (opus.bf16, False, "rz"), (opus.f16, False, "rn"),
             (opus.f16, False, "rz")]
VEC = 4


@functools.lru_cache(None)
def converter(src, dst, sat, rounding):
    @opus.kernel
    def conv(x: opus.Ptr[src], y: opus.Ptr[dst], n: i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
        v = opus.make_gmem(x, n).load(i, vec=VEC)
        opus.make_gmem(y, n).store(opus.cast(v, dst, rounding=rounding, sat=sat), i)
    return conv


def boundary_f32():
    """Every bf16 value and its f32 neighbours (every fp8/e8m0/bf16 code, midpoint and
    overflow threshold), some f16 rounding ties, padded to the vector width."""
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    f16_ties = f16[np.isfinite(f16)].astype(np.float32).view(np.uint32) + (1 << 12)
    u = np.unique(np.concatenate([hi, hi + 1, hi - 1, f16_ties, f16_ties + 1, f16_ties - 1]))
    return np.resize(u, -(-len(u) // VEC) * VEC).view(np.float32)


def f16_rz(x):
    """f32 -> f16 toward zero: the f16 value of largest magnitude not beyond |x|."""
    with np.errstate(over="ignore"):
        rn = x.astype(np.float16)
    toward0 = np.nextafter(rn, np.float16(0))
    over = np.abs(rn.astype(np.float64)) > np.abs(x.astype(np.float64))
    return np.where(over & np.isfinite(x), toward0, rn)


def reference_encode(x, t, sat, rounding):
    if t.name == "e8m0":
        return e8m0_encode(x, rounding, sat)
    if t.name == "bf16":
        if rounding == "rz":  # truncation of the bits; NaN stays NaN
            cut = (x.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
            return np.where(np.isnan(x), ml_dtypes.bfloat16(np.nan), cut)
        return x.astype(ml_dtypes.bfloat16)
    if t.name == "f16":
        with np.errstate(over="ignore"):
            return f16_rz(x) if rounding == "rz" else x.astype(np.float16)
    return ml_encode(x, t, sat)


@pytest.fixture(scope="module", params=AMD + ["sm_80", "sm_90a"])
def conversions(request, tmp_path_factory):
    target = request.param
    prog = HostProgram(target)
    x = boundary_f32()
    runs = []
    for t, sat, rnd in ENCODINGS:
        out = np.zeros(len(x), t.np_dtype)
        k = prog.add(converter(f32, t, sat, rnd).specialize(target=target))
        runs.append(("encode", (t, sat, rnd), out,
                     Launch(k, len(x) // VEC // 128, 128, [x.copy(), out, len(x)])))
    for t in FP8 + [opus.e8m0]:
        out = np.zeros(256, np.float32)
        k = prog.add(converter(t, f32, False, "rn").specialize(target=target))
        runs.append(("decode", t, out, Launch(k, 1, 256 // VEC, [ALL_CODES.view(t.np_dtype).copy(), out, 256])))
    prog.build(tmp_path_factory.mktemp(target))
    prog.run([r[-1] for r in runs])
    return target, x, runs


def test_conversions_match_ml_dtypes(conversions):
    target, x, runs = conversions
    bad = []
    for kind, what, got, _ in runs:
        if kind == "encode":
            t, sat, rnd = what
            want = reference_encode(x, t, sat, rnd)
            if t.name in ("bf16", "f16"):
                ok = same_floats(got, np.asarray(want).view(got.dtype))
            else:
                ok = np.array_equal(got.view(np.uint8), np.asarray(want).view(np.uint8))
            if not ok:
                g, w = got.view(f"u{t.itemsize}"), np.asarray(want).view(f"u{t.itemsize}")
                i = np.flatnonzero(g != w)[:4]
                bad.append(f"{t.name} sat={sat} {rnd}: x={x[i].view(np.uint32)} got {g[i]} want {w[i]}")
        else:
            want = ALL_CODES.view(what.np_dtype).astype(np.float32)
            if not same_floats(got, want):
                bad.append(f"decode {what.name}")
    assert not bad, f"on {target}:\n" + "\n".join(bad)


def test_both_paths_are_exercised():
    """gfx942 converts FNUZ fp8 in hardware and OCP in software, gfx950 the other way round;
    gfx942 rounds bf16 in software, gfx950 with its instruction (Target.hw_fp8, hw_bf16)."""
    src = {t: converter(f32, opus.fp8_e4m3, False, "rn").source(target=t) for t in AMD}
    assert "__builtin_amdgcn_cvt_pk_fp8_f32" in src["gfx950"]
    assert "__builtin_amdgcn_cvt_pk_fp8_f32" not in src["gfx942"]
    bf = {t: converter(f32, opus.bf16, False, "rn").source(target=t) for t in AMD}
    assert "(__bf16)" in bf["gfx950"] and "(__bf16)" not in bf["gfx942"]
