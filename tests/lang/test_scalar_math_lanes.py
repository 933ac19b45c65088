"""Issue 13 points 2, 5, 6, 7: med3 and min/max (nan="fast"), mdiv, finfo / numeric_limits,
readfirstlane / uniform. The interpreter (as sm_90a, warp 32, and gfx942 / gfx950, wave 64)
against numpy references; the instructions in SASS (NVRTC) and AMDGCN (clang); the emitted C
of mdiv executed on the host; GPU runs marked gpu."""
import re

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f16, f32, f64, i32, u32

TARGETS = ["sm_90a", "gfx942", "gfx950"]
RNG = np.random.default_rng(13)
SNAN = np.array([0x7F800001], np.uint32).view(np.float32)[0]


def _median_ref(a, b, c):
    """The median with ir/ops.py's NaN rule, written out per element (-0 < +0 by total order)."""
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        key = lambda v: (v, not np.signbit(v))  # noqa: E731  -0 before +0
        nums = [v for v in (x, y, z) if v == v]
        if len(nums) == 3:
            out.append(sorted(nums, key=key)[1])
        else:
            out.append(min(nums, key=key) if nums else float("nan"))
    return np.array(out, a.dtype)


def _same(got, want):
    """Equal bits, except that any NaN matches any NaN."""
    both_nan = np.isnan(got) & np.isnan(want)
    gb = got.view(np.uint32 if got.dtype == np.float32 else np.uint64)
    wb = want.view(gb.dtype)
    assert np.all(both_nan | (gb == wb)), (got[~(both_nan | (gb == wb))], want[~(both_nan | (gb == wb))])


@opus.kernel
def med3_kernel(x: opus.Ptr[f32], y: opus.Ptr[f32], z: opus.Ptr[f32], o: opus.Ptr[f32]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    o[i] = opus.med3(x[i], y[i], z[i])


def _special_triples(n):
    vals = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, SNAN, 2.5], np.float32)
    idx = np.array(np.meshgrid(*[np.arange(len(vals))] * 3)).reshape(3, -1)
    x, y, z = (vals[i] for i in idx)
    pad = n - x.size
    rand = [RNG.standard_normal(pad).astype(np.float32) for _ in range(3)]
    return [np.concatenate([a, r]) for a, r in zip((x, y, z), rand)]


@pytest.mark.parametrize("target", TARGETS)
def test_med3_f32_against_reference(target):
    """Every ordered triple of specials (signed zeros, infinities, quiet and signaling NaNs)
    and random values."""
    x, y, z = _special_triples(1024)
    o = np.zeros_like(x)
    with opus.set_target(target, interpret=True):
        med3_kernel[4, 256](x, y, z, o)
    _same(o, _median_ref(x, y, z))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("T", [i32, u32, opus.i16, f16, f64])
def test_med3_other_types(target, T):
    @opus.kernel
    def k(x: opus.Ptr[T], y: opus.Ptr[T], z: opus.Ptr[T], o: opus.Ptr[T]):
        i = opus.thread_id_x()
        o[i] = opus.med3(x[i], y[i], z[i])
    nd = T.np_dtype
    if T.is_float:
        x, y, z = (RNG.standard_normal(128).astype(nd) for _ in range(3))
        x[:3] = np.nan
    else:
        info = np.iinfo(nd)
        x, y, z = (RNG.integers(info.min, info.max, 128, endpoint=True).astype(nd) for _ in range(3))
        x[:4] = [info.min, info.max, 0, info.max]
        y[:4] = [info.max, info.min, 0, info.max]
    o = np.zeros_like(x)
    with opus.set_target(target, interpret=True):
        k[1, 128](x, y, z, o)
    want = np.where(np.isnan(x), np.fmin(y, z), np.median(np.stack([x, y, z]), axis=0)) \
        if T.is_float else np.sort(np.stack([x, y, z]), axis=0)[1]
    np.testing.assert_array_equal(o, want.astype(nd))


def test_med3_folds_python_numbers_and_clamps():
    assert opus.med3(5, 1, 3) == 3 and opus.med3(-2.0, 0.0, 1.0) == 0.0
    assert opus.med3(float("nan"), 1.0, 3.0) == 1.0


@opus.kernel
def minmax_kernel(x: opus.Ptr[f32], y: opus.Ptr[f32], a: opus.Ptr[f32], b: opus.Ptr[f32],
                  NAN: opus.constexpr = "number"):
    i = opus.thread_id_x()
    a[i] = opus.max(x[i], y[i], nan=NAN)
    b[i] = opus.min(x[i], y[i], nan=NAN)


def _minmax_ref(x, y, fn, snan_quiets):
    """IEEE 754-2019 maximumNumber / minimumNumber (-0 < +0); with snan_quiets (2008 maxNum)
    a signaling NaN operand gives NaN."""
    out = []
    # signaling: NaN with the quiet bit clear, read from the f32 bits (a Python float would
    # quiet it on the way)
    snan = lambda a: np.isnan(a) & (a.view(np.uint32) & 0x400000 == 0)  # noqa: E731
    for p, q, sp, sq in zip(x.tolist(), y.tolist(), snan(x), snan(y)):
        if snan_quiets and (sp or sq):
            out.append(float("nan"))
        elif p != p:
            out.append(q)
        elif q != q:
            out.append(p)
        else:
            key = lambda v: (v, not np.signbit(v))  # noqa: E731
            out.append(fn((p, q), key=key))
    return np.array(out, np.float32)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fast", [False, True])
def test_minmax_nan_modes(target, fast):
    vals = np.array([0.0, -0.0, 1.0, -3.0, np.inf, -np.inf, np.nan, SNAN], np.float32)
    x, y = (v.ravel() for v in np.meshgrid(vals, vals))
    a, b = np.zeros_like(x), np.zeros_like(x)
    with opus.set_target(target, interpret=True):
        minmax_kernel[1, x.size](x, y, a, b, NAN="fast" if fast else "number")
    quiets = fast and target.startswith("gfx")  # AMD's one instruction: IEEE 754-2008
    _same(a, _minmax_ref(x, y, max, quiets))
    _same(b, _minmax_ref(x, y, min, quiets))


def test_minmax_nan_must_be_a_mode():
    with pytest.raises(opus.TraceError, match="nan must be 'number' or 'fast'"):
        minmax_kernel.source(target="sm_90a", NAN="fastest")


# -- instructions ------------------------------------------------------------------------------
def _sass(k, **cx):
    return [l.split("*/")[1].split(";")[0].strip() for l in k.sass(target="sm_90a", **cx).splitlines()
            if "*/" in l and ";" in l]


def _amd(k, arch="gfx942", **cx):
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()        # skipped with the reason where no AMD compiler is installed
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    return [l.strip() for l in k.asm(target=arch, **cx).splitlines()
            if l.startswith("\t") and not l.strip().startswith((".", ";"))]


def test_med3_is_one_v_med3_on_amd():
    ins = _amd(med3_kernel)
    assert sum(i.startswith("v_med3_f32") for i in ins) == 1, ins
    assert not any(i.startswith(("v_cmp", "v_cndmask")) for i in ins), ins


@pytest.mark.parametrize("T,mnemonic", [(i32, "v_med3_i32"), (u32, "v_med3_u32")])
def test_med3_int_is_one_instruction_on_amd(T, mnemonic):
    @opus.kernel
    def k(x: opus.Ptr[T], o: opus.Ptr[T]):
        i = opus.thread_id_x()
        o[i] = opus.med3(x[i], x[i + 64], x[i + 128])
    ins = _amd(k)
    assert sum(i.startswith(mnemonic) for i in ins) == 1, ins
    assert not any(i.startswith(("v_min", "v_max", "v_cmp")) for i in ins), ins


def test_med3_on_nvidia_is_min_max():
    ins = _sass(med3_kernel)
    assert sum(i.startswith("FMNMX") or i.startswith("@") and "FMNMX" in i for i in ins) == 5, ins


def test_minmax_instruction_counts():
    """NVIDIA: one FMNMX each (exact already). AMD: operands loaded from memory are quieted
    first (v_max x, x: 3 instructions per max, the operands are reloaded after the first
    store), nan="fast" is the one v_max_f32 / v_min_f32."""
    for nan in ("number", "fast"):
        assert sum("FMNMX" in i for i in _sass(minmax_kernel, NAN=nan)) == 2
    exact = _amd(minmax_kernel)
    assert sum(i.startswith(("v_max_f32", "v_min_f32")) for i in exact) == 6, exact
    fast = _amd(minmax_kernel, NAN="fast")
    assert sum(i.startswith(("v_max_f32", "v_min_f32")) for i in fast) == 2, fast


# -- mdiv ----------------------------------------------------------------------------------------
EDGE_DIVISORS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 25, 125, 641, 1000, 2 ** 16 - 1, 2 ** 16,
                 2 ** 16 + 1, 6700417, 2 ** 24 + 1, 2 ** 30, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1,
                 3 * 2 ** 30, 2 ** 32 - 2, 2 ** 32 - 1] + [2 ** k for k in range(32)]


def _edge_dividends(d):
    n = [0, 1, d - 1, d, d + 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1]
    for k in (2, 3, 7, (2 ** 32 - 1) // d, (2 ** 32 - 1) // d - 1, 2 ** 31 // d):
        n += [k * d - 1, k * d, k * d + 1]
    n += RNG.integers(0, 2 ** 32, 8, dtype=np.uint64).tolist()
    return [v for v in n if 0 <= v < 2 ** 32]


def _edge_pairs():
    pairs = [(n, d) for d in sorted(set(EDGE_DIVISORS)) for n in _edge_dividends(d)]
    n, d = (np.array(v, np.uint64).astype(np.uint32) for v in zip(*pairs))
    return n, d


@opus.kernel
def mdiv_make(n: opus.Ptr[u32], d: opus.Ptr[u32], q: opus.Ptr[u32], r: opus.Ptr[u32]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    m = opus.mdiv.make(d[i])
    q[i], r[i] = m.divmod(n[i])


@opus.kernel
def mdiv_param(n: opus.Ptr[u32], m: opus.mdiv, q: opus.Ptr[u32], r: opus.Ptr[u32]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    q[i] = m.div(n[i])
    r[i] = m.mod(n[i])


def _pad(a, block):
    return np.concatenate([a, np.ones(-a.size % block, a.dtype)])


def _check_div(n, d, q, r):
    nn, dd = n.astype(np.uint64), d.astype(np.uint64)
    np.testing.assert_array_equal(q, (nn // dd).astype(np.uint32))
    np.testing.assert_array_equal(r, (nn % dd).astype(np.uint32))


def test_magic_numbers_by_hand():
    """magic = floor(2**32 * (2**s - d) / d) + 1, s = ceil(log2 d), computed by hand."""
    from opus.lang.mdiv import magic_of
    assert magic_of(1) == (1, 0) and magic_of(2) == (1, 1)
    assert magic_of(3) == (0x55555556, 2)        # 2**32 // 3 + 1
    assert magic_of(7) == (0x24924925, 3)        # 2**32 * 1 // 7 + 1
    assert magic_of(2 ** 31) == (1, 31)
    assert magic_of(2 ** 32 - 1) == (2, 32)      # 2**32 * 1 // (2**32 - 1) + 1


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_mdiv_edges_made_in_kernel(target):
    n, d = _edge_pairs()
    n, d = _pad(n, 256), _pad(d, 256)
    q, r = np.zeros_like(n), np.zeros_like(n)
    with opus.set_target(target, interpret=True):
        mdiv_make[n.size // 256, 256](n, d, q, r)
    _check_div(n, d, q, r)


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_mdiv_random_million(target):
    """>= 10**6 random (n, d) pairs, divisors of every bit length."""
    size = 1 << 20
    n = RNG.integers(0, 2 ** 32, size, dtype=np.uint64).astype(np.uint32)
    bits = RNG.integers(1, 33, size)
    d = np.maximum(RNG.integers(0, 2 ** 32, size, dtype=np.uint64) >> (32 - bits).astype(np.uint64),
                   1).astype(np.uint32)
    q, r = np.zeros_like(n), np.zeros_like(n)
    with opus.set_target(target, interpret=True):
        mdiv_make[size // 1024, 1024](n, d, q, r)
    _check_div(n, d, q, r)


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("d", [1, 3, 7, 641, 6700417, 2 ** 31, 2 ** 32 - 1])
def test_mdiv_host_made_parameter(target, d):
    n = _pad(np.array(_edge_dividends(d), np.uint64).astype(np.uint32), 64)
    q, r = np.zeros_like(n), np.zeros_like(n)
    with opus.set_target(target, interpret=True):
        mdiv_param[1, n.size](n, opus.mdiv(d), q, r)
    _check_div(n, np.full_like(n, d), q, r)


def test_mdiv_divisor_zero_in_kernel_is_documented():
    """Made in a kernel, a divisor of 0 gives quotient 0 and remainder n."""
    n = np.array([0, 1, 12345, 2 ** 32 - 1], np.uint32)
    q, r = np.ones_like(n), np.zeros_like(n)
    with opus.set_target("sm_90a", interpret=True):
        mdiv_make[1, 4](n, np.zeros_like(n), q, r)
    np.testing.assert_array_equal(q, 0)
    np.testing.assert_array_equal(r, n)


def test_mdiv_host_values_fold():
    m = opus.mdiv(641)
    assert m.div(2 ** 32 - 1) == (2 ** 32 - 1) // 641 and m.divmod(1000) == (1, 359)
    assert m.opus_param_bytes() == np.array([m.magic, m.shift, 641, 0], "<u4").tobytes()


def test_mdiv_instructions():
    """One multiply-high per division: IMAD.HI / IMAD.WIDE.U32 in SASS, v_mul_hi_u32 on AMD,
    no 64-bit software division for a host-made divisor."""
    sass = _sass(mdiv_param)
    assert sum(i.startswith(("IMAD.HI.U32", "IMAD.WIDE.U32")) for i in sass) == 2, sass
    assert not any("CALL" in i for i in sass), sass
    ins = _amd(mdiv_param)
    assert sum(i.startswith("v_mul_hi_u32") for i in ins) == 2, ins
    assert not any(i.startswith("s_cselect") or i.startswith("v_cndmask") for i in ins), ins


def test_mdiv_host_executed(tmp_path):
    """The emitted C itself (CUDA and HIP renderings compiled for the CPU) on edge pairs."""
    hostexec = pytest.importorskip("hostexec")
    n, d = _edge_pairs()
    n, d = _pad(n, 128), _pad(d, 128)
    for target in ("sm_90a", "gfx942"):
        q, r = np.zeros_like(n), np.zeros_like(n)
        (tmp_path / target).mkdir()
        hostexec.run_kernel(mdiv_make, n.size // 128, 128, n, d, q, r, target=target,
                            workdir=tmp_path / target)
        _check_div(n, d, q, r)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 3, 641, 2 ** 31, 2 ** 32 - 1])
def test_gpu_mdiv(d):
    torch = pytest.importorskip("torch")
    size = 1 << 20
    n = RNG.integers(0, 2 ** 32, size, dtype=np.uint64).astype(np.uint32)
    dev = lambda a: torch.from_numpy(a.view(np.int32)).cuda().view(torch.uint32)  # noqa: E731
    tn, tq, tr = dev(n), dev(np.zeros_like(n)), dev(np.zeros_like(n))
    mdiv_param[size // 256, 256](tn, opus.mdiv(d), tq, tr)
    dd = np.full(size, d, np.uint32)
    td = dev(dd)
    tq2, tr2 = dev(np.zeros_like(n)), dev(np.zeros_like(n))
    mdiv_make[size // 256, 256](tn, td, tq2, tr2)
    torch.cuda.synchronize()
    for q, r in ((tq, tr), (tq2, tr2)):
        _check_div(n, dd, q.view(torch.int32).cpu().numpy().view(np.uint32),
                   r.view(torch.int32).cpu().numpy().view(np.uint32))


@pytest.mark.gpu
def test_gpu_med3_minmax():
    torch = pytest.importorskip("torch")
    x, y, z = _special_triples(1024)
    tx, ty, tz = (torch.from_numpy(v).cuda() for v in (x, y, z))
    o = torch.zeros_like(tx)
    med3_kernel[4, 256](tx, ty, tz, o)
    _same(o.cpu().numpy(), _median_ref(x, y, z))
    a, b = torch.zeros_like(tx), torch.zeros_like(tx)
    minmax_kernel[1, 1024](tx, ty, a, b, NAN="fast")      # one block: it indexes by thread
    _same(a.cpu().numpy(), _minmax_ref(x, y, max, False))
    _same(b.cpu().numpy(), _minmax_ref(x, y, min, False))


# -- finfo / numeric_limits ----------------------------------------------------------------------
ML = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
      "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
      "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "fp8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
      "fp6_e2m3": ml_dtypes.float6_e2m3fn, "fp6_e3m2": ml_dtypes.float6_e3m2fn,
      "fp4_e2m1": ml_dtypes.float4_e2m1fn, "e8m0": ml_dtypes.float8_e8m0fnu}


@pytest.mark.parametrize("name", sorted(ML))
def test_finfo_against_ml_dtypes(name):
    mine, ref = opus.finfo(getattr(opus, name)), ml_dtypes.finfo(ML[name])
    assert mine.bits == ref.bits
    for field in ("max", "min", "eps", "tiny", "smallest_normal", "smallest_subnormal"):
        assert getattr(mine, field) == float(getattr(ref, field)), field


# FNUZ by hand (bias one more than OCP, every exponent finite, NaN = 0x80): e4m3fnuz's largest
# is 0.1111.111 = 1.875 * 2**(15 - 8) = 240; e5m2fnuz's 0.11111.11 = 1.75 * 2**(31 - 16) = 57344.
@pytest.mark.parametrize("name,mx,tiny,sub", [
    ("fp8_e4m3fnuz", 240.0, 2.0 ** -7, 2.0 ** -10),
    ("fp8_e5m2fnuz", 57344.0, 2.0 ** -15, 2.0 ** -17),
    ("fp8_e4m3", 448.0, 2.0 ** -6, 2.0 ** -9),
    ("tf32", (2 - 2 ** -10) * 2.0 ** 127, 2.0 ** -126, 2.0 ** -136)])
def test_finfo_by_hand(name, mx, tiny, sub):
    fi = opus.finfo(getattr(opus, name))
    assert (fi.max, fi.min, fi.tiny, fi.smallest_subnormal) == (mx, -mx, tiny, sub)


@pytest.mark.parametrize("name", ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "int4",
                                  "uint4"])
def test_iinfo_and_numeric_limits_ints(name):
    t = getattr(opus, name)
    ref = ml_dtypes.iinfo(t.np_dtype) if name.endswith("int4") else np.iinfo(t.np_dtype)
    ii, nl = opus.iinfo(t), opus.numeric_limits(t)
    assert (ii.min, ii.max, ii.bits) == (int(ref.min), int(ref.max), ref.bits)
    assert (nl.min(), nl.lowest(), nl.max(), nl.epsilon()) == (int(ref.min), int(ref.min),
                                                              int(ref.max), 0)


@pytest.mark.parametrize("name", sorted(ML))
def test_numeric_limits_floats_cpp_names(name):
    t, ref = getattr(opus, name), ml_dtypes.finfo(ML[name])
    nl = opus.numeric_limits(t)
    assert nl.max() == float(ref.max) and nl.lowest() == float(ref.min)
    assert nl.min() == float(ref.smallest_normal) and nl.epsilon() == float(ref.eps)
    assert nl.denorm_min() == float(ref.smallest_subnormal)
    has_inf = bool(np.isinf(np.array(np.inf).astype(ML[name])))
    assert (nl.infinity() == float("inf")) if has_inf else nl.infinity() is None
    has_nan = bool(np.isnan(np.array(np.nan).astype(ML[name])))
    assert (nl.quiet_NaN() != nl.quiet_NaN()) if has_nan else nl.quiet_NaN() is None


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_limits_fold_into_kernel_constants(target):
    @opus.kernel
    def k(x: opus.Ptr[f16], o: opus.Ptr[f16]):
        i = opus.thread_id_x()
        o[i] = opus.min(x[i], opus.finfo(f16).max) * opus.numeric_limits(f16).epsilon()
    x = np.array([np.inf, 1.0, -2.0, 60000.0], np.float16)
    o = np.zeros_like(x)
    with opus.set_target(target, interpret=True):
        k[1, 4](x, o)
    np.testing.assert_array_equal(o, np.minimum(x, np.float16(65504)) * np.float16(2 ** -10))
    assert "0x7bff" in k.source(target=target)  # 65504 as f16 bits: folded to a constant


# -- readfirstlane / uniform ---------------------------------------------------------------------
@opus.kernel
def rfl_kernel(x: opus.Ptr[f32], o: opus.Ptr[f32], q: opus.Ptr[i32]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i % 5 != 1:  # the first active lane of warp w is 32w or 64w unless 1 mod 5 skips it
        o[i] = opus.readfirstlane(x[i])
    q[i] = opus.readfirstlane(opus.lane_id() * 7 + 3) + opus.uniform(opus.warp_id())


@pytest.mark.parametrize("target", TARGETS)
def test_readfirstlane_against_numpy(target):
    T = 256
    x = RNG.standard_normal(T).astype(np.float32)
    o, q = np.full(T, -9.0, np.float32), np.zeros(T, np.int32)
    with opus.set_target(target, interpret=True):
        rfl_kernel[1, T](x, o, q)
    ws = opus.targets.get_target(target).warp_size
    want = np.full(T, -9.0, np.float32)
    for w in range(T // ws):
        lanes = [t for t in range(w * ws, (w + 1) * ws) if t % 5 != 1]
        want[lanes] = x[lanes[0]]
    np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(q, 3 + np.arange(T) // ws)


@opus.kernel
def broken_uniform(x: opus.Ptr[i32], o: opus.Ptr[i32]):
    i = opus.thread_id_x()
    o[i] = opus.uniform(x[i])


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_uniform_checking_mode_names_the_lane_and_line(target):
    x = np.zeros(128, np.int32)
    x[70] = 5  # lane 70: warp 2 of 32, warp 1 of 64; differs from its warp's first lane
    o = np.zeros_like(x)
    with opus.set_target(target, interpret=True):
        broken_uniform[1, 128](x, o)  # not checking: each lane's own value
        np.testing.assert_array_equal(o, x)
        with opus.interp.checking(), pytest.raises(opus.interp.InterpError) as e:
            broken_uniform[1, 128](x, o)
    msg = str(e.value)
    assert "opus.uniform" in msg and "thread (70, 0, 0)" in msg and "has 5" in msg
    assert "test_scalar_math_lanes.py:" in msg


@opus.kernel
def uniform_loop(x: opus.Ptr[f32], o: opus.Ptr[f32], n: opus.Ptr[i32], UNIFORM: opus.constexpr):
    t = opus.thread_id_x()
    count = n[t // 64]  # the same in each wave of 64, but a VGPR value to the compiler
    if UNIFORM:
        count = opus.uniform(count)
    acc = 0.0
    for j in opus.range(count):
        acc = acc + x[j * 64 + t]
    o[t] = acc


def test_uniform_keeps_loop_bound_in_sgprs():
    """A bound loaded through a pointer is a VGPR value (the compiler cannot know it is the same
    in every lane): the loop exits through exec masking. Declared uniform, it is read with
    v_readfirstlane_b32 and the loop compares in s registers."""
    hinted, plain = _amd(uniform_loop, UNIFORM=True), _amd(uniform_loop, UNIFORM=False)
    assert any(i.startswith("v_readfirstlane_b32") for i in hinted), hinted
    assert any(re.match(r"s_cmp_\w+ s\d+, ", i) for i in hinted), hinted  # the trip test
    assert any(re.match(r"s_add_i32 s\d+, s\d+, -1", i) for i in hinted), hinted  # the counter
    assert not any("exec" in i or i.startswith("v_cmp") for i in hinted), hinted
    assert not any(i.startswith("v_readfirstlane_b32") for i in plain)
    assert any(i.startswith("v_cmp") for i in plain) and any("exec" in i for i in plain), plain


def test_readfirstlane_renderings():
    assert "__builtin_amdgcn_readfirstlane" in rfl_kernel.source(target="gfx942")
    src = rfl_kernel.source(target="sm_90a")
    assert "__shfl_sync" in src and "__activemask" in src
    assert any(i.startswith("SHFL.IDX") for i in _sass(rfl_kernel))
    assert any(i.startswith("v_readfirstlane_b32") for i in _amd(rfl_kernel))


@pytest.mark.gpu
def test_gpu_readfirstlane_and_uniform():
    torch = pytest.importorskip("torch")
    T = 256
    x = RNG.standard_normal(T).astype(np.float32)
    tx, to = torch.from_numpy(x).cuda(), torch.full((T,), -9.0, device="cuda")
    tq = torch.zeros(T, dtype=torch.int32, device="cuda")
    rfl_kernel[1, T](tx, to, tq)
    want = np.full(T, -9.0, np.float32)
    for w in range(T // 32):
        lanes = [t for t in range(w * 32, (w + 1) * 32) if t % 5 != 1]
        want[lanes] = x[lanes[0]]
    np.testing.assert_array_equal(to.cpu().numpy(), want)
    np.testing.assert_array_equal(tq.cpu().numpy(), 3 + np.arange(T) // 32)
