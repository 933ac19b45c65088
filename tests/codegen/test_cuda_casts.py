"""Conversions to and from the storage types (fp8 OCP and FNUZ, e8m0) on the CUDA backend.

* the interpreter (as sm_90a) against ml_dtypes with the documented rules, over all 256 codes
  (decode) and a dense set of f32 inputs with every rounding boundary (encode);
* the rendered CUDA compiles with NVRTC for every storage conversion on sm_80 and sm_90a, and
  sm_90a uses the hardware cvt (F2FP in SASS), one instruction per lane pair;
* the bit-arithmetic fallback (what sm_80 and FNUZ use) runs on the host, compiled from the
  rendered kernel, and matches the interpreter bit for bit;
* on a GPU (pytest -m gpu) every conversion matches the interpreter bit for bit.
"""
import functools
import re
import subprocess

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32

from hostexec.cxx import host_cxx
from hostexec.float_refs import ALL_CODES, NAN_CODE, dense_f32, e8m0_encode, ml_encode, same_floats

FP8 = [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz]
STORAGE = FP8 + [opus.e8m0]
# (storage type, sat, rounding) for every encoder
ENCODINGS = [(t, sat, "rn") for t in STORAGE for sat in (False, True)] + \
            [(opus.e8m0, sat, "rz") for sat in (False, True)]


def enc_id(e):
    t, sat, rnd = e
    return f"{t.name}-{'sat' if sat else 'nosat'}-{rnd}"


# -- kernels ------------------------------------------------------------------------------------

@functools.lru_cache(None)
def encoder(t, sat, rounding="rn", vec=1, src=f32):
    @opus.kernel
    def enc(x: opus.Ptr[src], y: opus.Ptr[t], n: opus.i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec
        gx, gy = opus.make_gmem(x, n), opus.make_gmem(y, n)
        gy.store(opus.cast(gx.load(i, vec=vec), t, rounding=rounding, sat=sat), i)
    return enc


@functools.lru_cache(None)
def decoder(t, to=f32, vec=1):
    @opus.kernel
    def dec(b: opus.Ptr[t], y: opus.Ptr[to], n: opus.i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec
        gb, gy = opus.make_gmem(b, n), opus.make_gmem(y, n)
        gy.store(opus.cast(gb.load(i, vec=vec), to), i)
    return dec


def launch(kernel, src, out_dtype, vec=1, device=None):
    """Run kernel(src, out, n) in the interpreter (device=None) or on the GPU; returns out."""
    n = len(src)
    grid = ((n + vec - 1) // vec + 255) // 256
    if device is None:
        out = np.zeros(n, out_dtype)
        with opus.set_target("sm_90a", interpret=True):
            kernel[grid, 256](src, out, n)
        return out
    from opus.runtime.device_array import DeviceArray
    from opus.runtime import cuda_driver
    d_src, d_out = DeviceArray.from_numpy(src), DeviceArray.zeros(n, out_dtype)
    with opus.set_target(device, interpret=False):
        kernel[grid, 256](d_src, d_out, n)
    cuda_driver.synchronize()
    return d_out.to_numpy()


def interp_encode(t, sat, rounding, x):
    return launch(encoder(t, sat, rounding, 4), x, t.np_dtype, vec=4).view(np.uint8)


def interp_decode(t, to=f32):
    return launch(decoder(t, to), ALL_CODES.view(t.np_dtype), to.np_dtype)


# -- interpreter semantics ---------------------------------------------------------------------

@pytest.mark.parametrize("t", STORAGE, ids=lambda t: t.name)
def test_interp_decodes_all_codes_like_ml_dtypes(t):
    ref = ALL_CODES.view(t.np_dtype).astype(np.float32)
    assert same_floats(interp_decode(t), ref)
    for to in (opus.f16, opus.bf16, opus.f64):
        with np.errstate(over="ignore"):  # e8m0 beyond f16's range: inf
            assert same_floats(interp_decode(t, to), ref.astype(to.np_dtype))


@pytest.mark.parametrize("t", FP8, ids=lambda t: t.name)
@pytest.mark.parametrize("sat", [False, True])
def test_interp_encodes_dense_f32_like_ml_dtypes(t, sat):
    x = dense_f32()
    got = interp_encode(t, sat, "rn", x)
    ref = ml_encode(x, t, sat)
    bad = np.flatnonzero(got != ref)
    assert bad.size == 0, [(hex(int(x[i:i + 1].view(np.uint32)[0])), hex(got[i]), hex(ref[i])) for i in bad[:8]]


@pytest.mark.parametrize("rounding", ["rn", "rz"])
@pytest.mark.parametrize("sat", [False, True])
def test_interp_encodes_e8m0_by_the_documented_rule(rounding, sat):
    x = dense_f32()
    got = interp_encode(opus.e8m0, sat, rounding, x)
    np.testing.assert_array_equal(got, e8m0_encode(x, rounding, sat))
    if rounding == "rn" and not sat:
        # ml_dtypes agrees except for f32 subnormals in [2^-127, 1.5 * 2^-127), where it rounds
        # up to 2^-126 (not the nearest power of two)
        u = x.view(np.uint32)
        quirk = (u > 0x400000) & (u < 0x600000)
        with np.errstate(invalid="ignore", over="ignore"):
            ml = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
        np.testing.assert_array_equal(got[~quirk], ml[~quirk])


def _next(v, to):
    return np.nextafter(np.float32(v), np.float32(to))


# hand-checked boundary cases: (type, input, byte without sat, byte with sat)
SPOTS = [
    (opus.fp8_e4m3, 1.0, 0x38, 0x38), (opus.fp8_e4m3, 1.0625, 0x38, 0x38),    # tie to even
    (opus.fp8_e4m3, 1.1875, 0x3A, 0x3A), (opus.fp8_e4m3, 448, 0x7E, 0x7E),
    (opus.fp8_e4m3, 464, 0x7E, 0x7E), (opus.fp8_e4m3, _next(464, 1e9), 0x7F, 0x7E),
    (opus.fp8_e4m3, -_next(464, 1e9), 0xFF, 0xFE), (opus.fp8_e4m3, np.inf, 0x7F, 0x7E),
    (opus.fp8_e4m3, -np.inf, 0xFF, 0xFE), (opus.fp8_e4m3, np.nan, 0x7F, 0x7F),
    (opus.fp8_e4m3, -np.nan, 0x7F, 0x7F), (opus.fp8_e4m3, -0.0, 0x80, 0x80),
    (opus.fp8_e4m3, 2.0**-9, 0x01, 0x01), (opus.fp8_e4m3, 2.0**-10, 0x00, 0x00),
    (opus.fp8_e4m3, _next(2.0**-10, 1), 0x01, 0x01), (opus.fp8_e4m3, -2.0**-10, 0x80, 0x80),
    (opus.fp8_e4m3, 1.5 * 2.0**-9, 0x02, 0x02), (opus.fp8_e4m3, 15 * 2.0**-10, 0x08, 0x08),
    (opus.fp8_e5m2, 1.0, 0x3C, 0x3C), (opus.fp8_e5m2, 57344, 0x7B, 0x7B),
    (opus.fp8_e5m2, _next(61440, 0), 0x7B, 0x7B), (opus.fp8_e5m2, 61440, 0x7C, 0x7B),
    (opus.fp8_e5m2, -np.inf, 0xFC, 0xFB), (opus.fp8_e5m2, np.nan, 0x7F, 0x7F),
    (opus.fp8_e5m2, 2.0**-16, 0x01, 0x01), (opus.fp8_e5m2, -2.0**-17, 0x80, 0x80),
    (opus.fp8_e4m3fnuz, 1.0, 0x40, 0x40), (opus.fp8_e4m3fnuz, 240, 0x7F, 0x7F),
    (opus.fp8_e4m3fnuz, _next(248, 0), 0x7F, 0x7F), (opus.fp8_e4m3fnuz, 248, 0x80, 0x7F),
    (opus.fp8_e4m3fnuz, -np.inf, 0x80, 0xFF), (opus.fp8_e4m3fnuz, -0.0, 0x00, 0x00),
    (opus.fp8_e4m3fnuz, -2.0**-11, 0x00, 0x00), (opus.fp8_e4m3fnuz, -np.nan, 0x80, 0x80),
    (opus.fp8_e5m2fnuz, 1.0, 0x40, 0x40), (opus.fp8_e5m2fnuz, 61440, 0x80, 0x7F),
    (opus.e8m0, 1.0, 127, 127), (opus.e8m0, 1.5, 128, 128), (opus.e8m0, _next(1.5, 0), 127, 127),
    (opus.e8m0, 0.75, 127, 127), (opus.e8m0, 3.0, 129, 129), (opus.e8m0, 0.0, 255, 255),
    (opus.e8m0, -4.0, 255, 255), (opus.e8m0, np.inf, 255, 254), (opus.e8m0, 2.0**127, 254, 254),
    (opus.e8m0, 1.5 * 2.0**127, 255, 254), (opus.e8m0, 2.0**-127, 0, 0), (opus.e8m0, 2.0**-149, 0, 0),
    (opus.e8m0, np.nan, 255, 255),
]


@pytest.mark.parametrize("t,x,plain,saturated", SPOTS,
                         ids=[f"{s[0].name}-{float(s[1])!r}" for s in SPOTS])
def test_interp_boundary_cases(t, x, plain, saturated):
    xs = np.full(4, x, np.float32)
    assert interp_encode(t, False, "rn", xs)[0] == plain
    assert interp_encode(t, True, "rn", xs)[0] == saturated


def test_interp_special_decodes_and_bool():
    e4, e5 = interp_decode(opus.fp8_e4m3), interp_decode(opus.fp8_e5m2)
    assert np.isnan(e4[[0x7F, 0xFF]]).all() and e4[0x7E] == 448 and e4[0x01] == 2.0**-9
    assert np.signbit(e4[0x80]) and e4[0x80] == 0
    assert e5[0x7C] == np.inf and e5[0xFC] == -np.inf and np.isnan(e5[[0x7D, 0x7E, 0x7F]]).all()
    assert np.isnan(interp_decode(opus.fp8_e4m3fnuz)[0x80]) and interp_decode(opus.e8m0)[0] == 2.0**-127
    b = launch(decoder(opus.fp8_e4m3, opus.bool_), np.uint8([0x00, 0x80, 0x01, 0x7F]).view(
        ml_dtypes.float8_e4m3fn), np.bool_)
    assert b.tolist() == [False, False, True, True]  # -0 is zero, NaN is not


def test_rz_to_fp8_is_refused():
    with pytest.raises(opus.TraceError, match="rz.*fp8_e4m3"):  # refused when tracing
        interp_encode(opus.fp8_e4m3, False, "rz", np.zeros(4, np.float32))


# -- CUDA: renders and compiles for every conversion; hardware instructions on sm_90a -----------

OTHERS = [opus.f32, opus.f16, opus.bf16, opus.f64, opus.i32, opus.i8, opus.u64, opus.bool_]


def _conversions_kernel(src):
    """A kernel converting a src value to every storage type (all sat/rounding variants) and a
    storage value of src's type (if storage) to every type; results are folded into one u64."""
    targets = tuple((t, sat, rnd) for (t, sat, rnd) in ENCODINGS) if not src.storage_only else \
        tuple((t, False, "rn") for t in STORAGE + OTHERS if t is not src)

    @opus.kernel
    def conv(x: opus.Ptr[src], out: opus.Ptr[opus.u64]):
        i = opus.thread_id_x()
        acc = opus.u64(0)
        for t, sat, rnd in targets:
            r = opus.cast(x[i], t, rounding=rnd, sat=sat)
            acc = acc ^ opus.u64(opus.cast(r, opus.f64) if t.storage_only else r)
        out[i] = acc
    return conv


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("src", STORAGE + OTHERS, ids=lambda t: t.name)
def test_every_storage_conversion_compiles(arch, src):
    s = _conversions_kernel(src).specialize(target=arch)
    assert "#include" not in s.source
    assert s.resources["spill_stores"] == 0
    # sm_90a converts OCP fp8 in hardware (every kernel here encodes to it); sm_80 has no fp8 cvt
    assert bool(re.search(r"F2FP\.\S*E[45]M[23]", s.sass)) == (arch == "sm_90a")


@pytest.mark.parametrize("t", [opus.fp8_e4m3, opus.fp8_e5m2], ids=lambda t: t.name)
@pytest.mark.parametrize("sat", [False, True])
def test_sm90a_uses_one_cvt_per_lane_pair(t, sat):
    kind = t.name.split("_")[1].upper()
    sass = encoder(t, sat, "rn", 4).sass(target="sm_90a")
    assert sass.count(f"F2FP.SATFINITE.{kind}.F32.PACK_AB") == 2  # 4 lanes, 2 instructions
    sass = encoder(t, sat, "rn", 4, opus.bf16).sass(target="sm_90a")
    assert sass.count(f"F2FP.SATFINITE.{kind}.F32.PACK_AB") == 2
    for to in (f32, opus.f16, opus.bf16):
        sass = decoder(t, to, 4).sass(target="sm_90a")
        assert sass.count(f"F2FP.F16.{kind}.UNPACK_B") == 2
    assert "F2FP" not in encoder(t, sat, "rn", 4).sass(target="sm_80")


@pytest.mark.parametrize("t", [opus.fp8_e4m3, opus.fp8_e5m2], ids=lambda t: t.name)
def test_sm90a_saturating_encode_is_the_bare_cvt(t):
    """With sat the cvt's own result is the answer (NaN: 0x7F from the instruction itself, as
    test_gpu_every_nan_encodes_to_the_canonical_code checks): no NaN test, no byte repacking."""
    sass = encoder(t, True, "rn", 4).sass(target="sm_90a")
    assert "FSETP" not in sass and "F2FP" in sass
    assert "FSETP" in encoder(t, False, "rn", 4).sass(target="sm_90a")  # overflow codes


def test_cuda_rz_to_fp8_is_a_clear_error():
    with pytest.raises(opus.TraceError, match="rz.*fp8_e4m3"):
        encoder(opus.fp8_e4m3, False, "rz").source(target="sm_90a")


# -- the bit-arithmetic fallback, compiled for the host from the rendered sm_80 kernel -----------

_SHIM = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n) __attribute__((aligned(n)))
static struct { unsigned x, y, z; } threadIdx, blockIdx, blockDim, gridDim;
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
"""
_MAIN = r"""
int main(int argc, char** argv) {  // one thread per block: element i is block i
  int n = atoi(argv[1]);
  IN* a = (IN*)malloc(sizeof(IN) * n); OUT* b = (OUT*)calloc(n, sizeof(OUT));
  if (fread(a, sizeof(IN), n, stdin) != (size_t)n) return 1;
  blockDim.x = 1;
  for (int i = 0; i < n; i++) { blockIdx.x = i; KERNEL(a, b, n); }
  fwrite(b, sizeof(OUT), n, stdout);
  return 0;
}
"""


def host_run(kernel, name, in_ctype, out_ctype, src, out_dtype, tmp_path):
    from opus.codegen import kernel_symbol
    code = kernel.source(target="sm_80")
    assert "asm(" not in code  # pure C arithmetic: runs the same on the host
    path = tmp_path / f"{name}.cpp"
    path.write_text(_SHIM + code + f"#define IN {in_ctype}\n#define OUT {out_ctype}\n#define KERNEL {kernel_symbol(name)}\n"
                    + _MAIN)
    exe = tmp_path / name
    subprocess.run(host_cxx() + ["-O1", "-std=c++17", "-o", str(exe), str(path)], check=True)
    out = subprocess.run([str(exe), str(len(src))], input=src.tobytes(), capture_output=True, check=True)
    return np.frombuffer(out.stdout, out_dtype)


@pytest.mark.parametrize("enc", ENCODINGS, ids=enc_id)
def test_host_fallback_encoder_matches_interp(enc, tmp_path):
    t, sat, rnd = enc
    x = dense_f32()
    got = host_run(encoder(t, sat, rnd), "enc", "float", "unsigned char", x, np.uint8, tmp_path)
    np.testing.assert_array_equal(got, interp_encode(t, sat, rnd, x))


@pytest.mark.parametrize("t", STORAGE, ids=lambda t: t.name)
def test_host_fallback_decoder_matches_interp(t, tmp_path):
    got = host_run(decoder(t), "dec", "unsigned char", "float", ALL_CODES, np.float32, tmp_path)
    assert same_floats(got, interp_decode(t))


# -- on the GPU: every conversion bit for bit as the interpreter ---------------------------------

def _gpu_arch():
    return opus.current_target().target.name


@pytest.mark.gpu
@pytest.mark.parametrize("vec", [1, 4])
@pytest.mark.parametrize("enc", ENCODINGS, ids=enc_id)
def test_gpu_encode_matches_interp(enc, vec):
    t, sat, rnd = enc
    x = dense_f32()
    x = x[:len(x) // 4 * 4]
    got = launch(encoder(t, sat, rnd, vec), x, t.np_dtype, vec, device=_gpu_arch()).view(np.uint8)
    ref = interp_encode(t, sat, rnd, x)
    bad = np.flatnonzero(got != ref)
    assert bad.size == 0, [(hex(int(x[i:i + 1].view(np.uint32)[0])), hex(got[i]), hex(ref[i])) for i in bad[:8]]


@pytest.mark.gpu
@pytest.mark.parametrize("sat", [False, True])
@pytest.mark.parametrize("t", [opus.fp8_e4m3, opus.fp8_e5m2], ids=lambda t: t.name)
def test_gpu_every_nan_encodes_to_the_canonical_code(t, sat):
    """All 2^24 - 2 f32 NaNs (both signs, every payload) encode to the format's one NaN code
    0x7F (OCP MX v1.0: S.1111.111 / S.11111.11 with the sign cleared, as the interpreter
    gives): the sm_89+ cvt does this itself, which lets the saturating encoder skip a test."""
    m = np.arange(1, 1 << 23, dtype=np.uint32)
    x = np.concatenate([0x7F800000 | m, 0xFF800000 | m]).view(np.float32)
    got = launch(encoder(t, sat, "rn", 4), x, t.np_dtype, 4, device=_gpu_arch()).view(np.uint8)
    assert NAN_CODE[t.name] == 0x7F and np.all(got == 0x7F), np.unique(got)


@pytest.mark.gpu
@pytest.mark.parametrize("sat", [False, True])
@pytest.mark.parametrize("src", [opus.f16, opus.bf16], ids=lambda t: t.name)
@pytest.mark.parametrize("t", FP8, ids=lambda t: t.name)
def test_gpu_encode_every_16bit_value_matches_interp(t, src, sat):
    x = np.arange(1 << 16, dtype=np.uint16).view(src.np_dtype)
    got = launch(encoder(t, sat, "rn", 4, src), x, t.np_dtype, 4, device=_gpu_arch()).view(np.uint8)
    ref = launch(encoder(t, sat, "rn", 4, src), x, t.np_dtype, 4).view(np.uint8)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(ref, ml_encode(x.astype(np.float32), t, sat))


@pytest.mark.gpu
@pytest.mark.parametrize("vec", [1, 4])
@pytest.mark.parametrize("to", [opus.f32, opus.f16, opus.bf16], ids=lambda t: t.name)
@pytest.mark.parametrize("t", STORAGE, ids=lambda t: t.name)
def test_gpu_decode_matches_interp(t, to, vec):
    got = launch(decoder(t, to, vec), ALL_CODES.view(t.np_dtype), to.np_dtype, vec, device=_gpu_arch())
    assert same_floats(got, interp_decode(t, to))
