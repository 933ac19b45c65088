"""f32 -> fp4 e2m1 in generated C (codegen/subbyte.py): the lane encoder and the word encoder
that converts eight lanes into one 32-bit word (vectors of 8k lanes), against ml_dtypes with
the interpreter's rule (clamp to +-6, then ml_dtypes: nearest even; NaN gives the zero of the
opposite sign, which is what ml_dtypes does).

Inputs: every bf16 code times each power of two an MX block scale applies to it (the MXFP4
case: the scaled values are exactly these), the f32 neighbours of every rounding threshold, NaN
in each lane of a word among ordinary values, and random f32 bit patterns. Run as host-executed
C (tests/hostexec) for sm_90a and gfx942 (gfx950 converts fp4 in hardware: its pairs run too),
in the interpreter, and (marked gpu) on the GPU. The SASS test bounds the instructions per
element of the CUDA conversion (the MXFP4 benchmark is issue-bound on it). Also: opus.mx_quantize
to fp4, opus.scaled_cast to fp8 and opus.amax of every bf16 code (lang/quantize.py widens bf16
vectors from their 32-bit words), host-executed, interpreted and on the GPU.
"""
import functools
import re

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32, i32
from hostexec import run_kernel

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FP4 = opus.fp4_e2m1
THREADS = 64


def ref_codes(x):
    """ml_dtypes' fp4 codes of f32 ``x`` after the clamp to +-6 (interp/semantics.py's rule)."""
    return np.clip(x, -6.0, 6.0).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & np.uint8(15)


def unpack(data, n):
    """Bytes -> n fp4 codes, element 0 in the low nibble of byte 0 (the packing rule)."""
    b = np.asarray(data, np.uint8)
    return np.stack([b & 15, b >> 4], axis=1).ravel()[:n]


def bf16_times_scales():
    """Every bf16 code (NaN, inf, both zeros, subnormals) times 2^-j for the scales an MX block
    applies (j = 0..12 and the far ones 100, 126, 127, 133), as exact f32."""
    b = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    js = list(range(13)) + [100, 126, 127, 133]
    return np.concatenate([(b.astype(np.float64) * 2.0 ** -j).astype(np.float32) for j in js])


def threshold_neighbours():
    """The rounding thresholds of e2m1 (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5), its values, the
    saturation edge and each one's f32 neighbours, both signs; f32 subnormals, inf, NaNs with
    payloads in the low bits only."""
    t = np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1, 1.5, 2, 3, 4, 6, 6.5, 7, 8])
    near = np.concatenate([t, np.nextafter(t, 0), np.nextafter(t, 100),
                           np.nextafter(np.nextafter(t, 0), 0), np.nextafter(np.nextafter(t, 100), 100)])
    special = np.uint32([0, 1, 0x7FFFFF, 0x800000, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF,
                         0x7F7FFFFF, 0x3E800001, 0x3E7FFFFF]).view(np.float32)
    v = np.concatenate([near, special])
    return np.concatenate([v, -v]).astype(np.float32)


def nan_in_each_lane():
    """Words of eight ordinary values (both signs, around thresholds) with a NaN (of either
    sign) in lane k, k = 0..7: the word encoder's rare path, lane by lane."""
    base = np.float32([0.3, -1.3, 2.6, -5.1, 0.74, 1.76, -3.4, 7.0])
    nans = np.uint32([0x7FC00000, 0xFFC00000, 0x7F800001]).view(np.float32)
    words = []
    for nan in nans:
        for k in range(8):
            w = base.copy()
            w[k] = nan
            words.append(w)
    return np.concatenate(words)


def random_f32(n=1 << 20, seed=3):
    return np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(
        np.uint32).view(np.float32)


def inputs():
    x = np.concatenate([bf16_times_scales(), threshold_neighbours(), nan_in_each_lane(),
                        random_f32()])
    n = -(-len(x) // (32 * THREADS)) * 32 * THREADS
    return np.concatenate([x, np.zeros(n - len(x), np.float32)])


@functools.lru_cache(None)
def converter(vec):
    """q[i:i+vec] = fp4(x[i:i+vec]): the f32 lanes loaded 4 at a time, one cast of vec lanes."""
    @opus.kernel
    def conv(x: opus.Ptr[f32], q: opus.Ptr[FP4], n: i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec
        g = opus.make_gmem(x)
        v = opus.concat(*[g.load(i + 4 * j, vec=4) for j in range(vec // 4)])
        opus.make_gmem(q).store(opus.cast(v, FP4), i)
    return conv


def check(x, q):
    want, got = ref_codes(x), unpack(q, len(x))
    bad = np.flatnonzero(got != want)
    assert not bad.size, (f"{bad.size} wrong: f32 bits {[hex(v) for v in x[bad[:6]].view(np.uint32)]} "
                          f"gave {got[bad[:6]]}, want {want[bad[:6]]}")


@pytest.mark.parametrize("vec", [8, 32])
@pytest.mark.parametrize("target", ["sm_90a", "gfx942", "gfx950"])
def test_host_executed_encoder_matches_ml_dtypes(target, vec, tmp_path):
    x = inputs()
    q = np.zeros(len(x) // 2, np.uint8)
    run_kernel(converter(vec), len(x) // (vec * THREADS), THREADS, x, q, len(x), target=target,
               workdir=tmp_path)
    check(x, q)


def test_the_word_encoder_is_rendered_for_8k_lanes_only():
    assert "opus_f32x8_to_fp4_e2m1x8" in converter(8).source(target="sm_90a")
    assert "opus_f32x8_to_fp4_e2m1x8" in converter(32).source(target="gfx942")
    assert "opus_f32x8_to_fp4_e2m1x8" not in converter(4).source(target="sm_90a")


def test_interpreter_agrees_on_the_same_inputs():
    x = np.concatenate([threshold_neighbours(), nan_in_each_lane(), random_f32(1 << 14)])
    x = np.concatenate([x, np.zeros(-len(x) % (8 * THREADS), np.float32)])
    q = np.zeros(len(x) // 2, np.uint8)
    with opus.set_target("sm_90a", interpret=True):
        converter(8)[len(x) // (8 * THREADS), THREADS](x, q, len(x))
    check(x, q)


def _fast_path(sass):
    """The instructions (no NOPs) of a SASS listing outside its rare blocks: those a forward
    conditional branch jumps over to a BSYNC (the word encoder's NaN fix-up)."""
    lines = re.findall(r"/\*([0-9a-f]{4})\*/\s+((?:@!?U?P\w+\s+)?[A-Z][A-Z0-9_.]*)(.*?);", sass)
    at = {int(a, 16): (op, rest) for a, op, rest in lines}
    skip = set()
    for addr, (op, rest) in at.items():
        m = re.match(r"@!?P\w+\s+BRA", op) and re.search(r"0x([0-9a-f]+)\s*$", rest)
        if m and int(m.group(1), 16) > addr and at.get(int(m.group(1), 16), ("",))[0] == "BSYNC":
            skip.update(range(addr + 16, int(m.group(1), 16), 16))
    return [op.split()[-1] for addr, (op, _) in sorted(at.items())
            if addr not in skip and op.split()[-1] != "NOP"]


def test_cuda_conversion_takes_at_most_10_instructions_per_element():
    """32 lanes per thread: the whole kernel (loads, address arithmetic, the NaN checks, four
    eight-lane words, the store) on its usual path, counted in the SASS: 9.1 with NVRTC 13. The
    lane-by-lane encoder with branches that the word encoder replaced: 23.6 per element here,
    counted over all its branches."""
    fast = _fast_path(converter(32).sass(target="sm_90a"))
    assert "FFMA" in fast and "STG.E.128" in fast
    per = len(fast) / 32
    assert per <= 10, f"{per:.2f} instructions per element on the usual path"


# -- on the GPU ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("vec", [4, 8, 32])
def test_gpu_encoder_matches_ml_dtypes(vec, requires_gpu):
    """Every bf16 code times the MX scales, the thresholds' neighbours, NaN in each lane of a
    word and 2^20 random patterns, converted on the GPU (vec 4: the lane encoder; 8 and 32: the
    word encoder)."""
    from opus.runtime.device_array import DeviceArray
    x = inputs()
    q = DeviceArray.zeros(len(x) // 2, np.uint8)
    converter(vec)[len(x) // (vec * THREADS), THREADS](DeviceArray.from_numpy(x), q, len(x))
    check(x, q.to_numpy())


@opus.kernel
def mxfp4(x: opus.Ptr[opus.bf16], q: opus.Ptr[FP4], s: opus.Ptr[opus.e8m0]):
    """opus.mx_quantize of one block of 32 bf16 per thread (bf16 widened from its words)."""
    b = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    g = opus.make_gmem(x)
    v = opus.concat(*[g.load(b * 32 + 8 * j, vec=8) for j in range(4)])
    qv, sv = opus.mx_quantize(v, FP4)
    opus.make_gmem(q).store(qv, b * 32)
    s[b] = sv


def every_bf16_code_in_blocks():
    """Every bf16 code once, shuffled into blocks of 32 (NaN and inf blocks included)."""
    bits = np.random.default_rng(9).permutation(1 << 16).astype(np.uint16)
    return bits.view(ml_dtypes.bfloat16)


def check_mx(x, q, s):
    """Scales and elements against OCP MX v1.0 written out in numpy: amax of each block
    ignoring NaN lanes, X = 2^(floor(log2 amax) - 2) from the exponent bits (0xFF for an
    infinite amax), elements x / X to fp4. NaN lanes are left out: the GPU's f32 multiply gives
    the canonical (positive) NaN whatever the input NaN's sign, numpy keeps the sign, and the
    NaN's sign picks the fp4 code (+-0)."""
    xs = x.astype(np.float32).reshape(-1, 32)
    amax = np.nanmax(np.where(np.isnan(xs), 0, np.abs(xs)), axis=1)
    field = (amax.view(np.uint32) >> 23) & 0xFF
    code = np.where(field == 255, 255, np.where(field > 2, field - 2, 0)).astype(np.uint8)
    assert np.array_equal(np.asarray(s).view(np.uint8), code)
    inv = np.where(code == 255, np.nan, 2.0 ** (127.0 - code.astype(np.float64)))
    scaled = (xs.astype(np.float64) * inv[:, None]).astype(np.float32).ravel()
    ok = ~np.isnan(xs.ravel())
    got = unpack(q, len(scaled))
    bad = np.flatnonzero((got != ref_codes(scaled)) & ok)
    assert not bad.size, f"{bad.size} wrong, e.g. bf16 {xs.ravel()[bad[:4]]} gave {got[bad[:4]]}"


@pytest.mark.parametrize("how", ["sm_90a", "gfx942", "interp"])
def test_mxfp4_of_every_bf16_code(how, tmp_path):
    x = every_bf16_code_in_blocks()
    q = np.zeros(len(x) // 2, np.uint8)
    s = np.zeros(len(x) // 32, ml_dtypes.float8_e8m0fnu)
    if how == "interp":
        with opus.set_target("sm_90a", interpret=True):
            mxfp4[len(x) // (32 * 64), 64](x, q, s)
    else:
        run_kernel(mxfp4, len(x) // (32 * 64), 64, x, q, s, target=how, workdir=tmp_path)
    check_mx(x, q, s)


@pytest.mark.gpu
def test_gpu_mxfp4_of_every_bf16_code(requires_gpu):
    from opus.runtime.device_array import DeviceArray
    x = every_bf16_code_in_blocks()
    q = DeviceArray.zeros(len(x) // 2, np.uint8)
    s = DeviceArray.zeros(len(x) // 32, ml_dtypes.float8_e8m0fnu)
    mxfp4[len(x) // (32 * 64), 64](DeviceArray.from_numpy(x), q, s)
    check_mx(x, q.to_numpy(), s.to_numpy())


@opus.kernel
def scaled_fp8(x: opus.Ptr[opus.bf16], inv: opus.Ptr[f32], q: opus.Ptr[opus.fp8_e4m3], a: opus.Ptr[f32]):
    """opus.scaled_cast and opus.amax of 16 bf16 lanes per thread (widened from their words)."""
    b = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    v = opus.concat(*[opus.make_gmem(x).load(b * 16 + 8 * j, vec=8) for j in range(2)])
    opus.make_gmem(q).store(opus.scaled_cast(v, opus.fp8_e4m3, inv[0]), b * 16)
    a[b] = opus.amax(v)


@pytest.mark.parametrize("how", ["sm_90a", "gfx942", "interp"])
def test_scaled_cast_and_amax_of_every_bf16_code(how, tmp_path):
    from hostexec.float_refs import ml_encode
    x = every_bf16_code_in_blocks()
    inv = np.float32([3.7])
    q = np.zeros(len(x), ml_dtypes.float8_e4m3fn)
    a = np.zeros(len(x) // 16, np.float32)
    if how == "interp":
        with opus.set_target("sm_90a", interpret=True):
            scaled_fp8[len(x) // (16 * 64), 64](x, inv, q, a)
    else:
        run_kernel(scaled_fp8, len(x) // (16 * 64), 64, x, inv, q, a, target=how, workdir=tmp_path)
    xf = x.astype(np.float32)
    p = xf * inv[0]
    ok = ~np.isnan(xf)  # the NaN's sign after the multiplication: see check_mx
    assert np.array_equal(q.view(np.uint8)[ok], ml_encode(p, opus.fp8_e4m3, True)[ok])
    blocks = np.where(np.isnan(xf), 0, np.abs(xf)).reshape(-1, 16)
    assert np.array_equal(a, blocks.max(axis=1))
