"""Sub-byte types (fp4 e2m1, fp6 e2m3/e3m2, int4, uint4) in kernels: packed registers and memory
(ir/ops.py, "Sub-byte types"), their conversions to and from f32 and the integers, vector type
names, traits, bitcasts, lanes, and bounded accesses that end inside a byte.

Each conversion runs in the interpreter as sm_90a, gfx942 and gfx950 and as generated C on the
host (tests/hostexec) for the same targets; the references are ml_dtypes (every code, both
ways) and a packer written here from the packing rule (element i at bits [i*b, (i+1)*b) of the
little-endian byte stream), never opus' own packing code. GPU tests are marked gpu.
"""
import functools

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32, i32
from hostexec import HostProgram, Launch, run_kernel
from hostexec.float_refs import dense_f32, same_floats

pytestmark = pytest.mark.filterwarnings("ignore:.* encountered in cast:RuntimeWarning")

TARGETS = ["sm_90a", "gfx942", "gfx950"]
SMALL_FLOATS = [opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2]
INTS = [opus.int4, opus.uint4]
VEC = {4: 4, 6: 4}  # elements per conversion access (16 bytes of f32); wider ones: tail tests
THREADS = 4


# -- the reference packing, written from the rule --------------------------------------------------

def ref_pack(codes, bits):
    """Codes (ints) -> bytes: element i at bits [i*bits, (i+1)*bits) of a little-endian stream."""
    stream = 0
    for i, c in enumerate(int(c) for c in codes):
        stream |= (c & ((1 << bits) - 1)) << (i * bits)
    nbytes = -(-len(codes) * bits // 8)
    return np.frombuffer(stream.to_bytes(nbytes, "little"), np.uint8).copy()


def ref_unpack(data, bits, n):
    stream = int.from_bytes(bytes(np.asarray(data, np.uint8)), "little")
    return np.array([(stream >> (i * bits)) & ((1 << bits) - 1) for i in range(n)], np.uint8)


def codes_of(x, t):
    """ml_dtypes' codes of f32 values ``x`` as type ``t`` (the reference encoder)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(t.np_dtype).view(np.uint8) & np.uint8((1 << t.bits) - 1)


# -- kernels -------------------------------------------------------------------------------------

@functools.lru_cache(None)
def converter(src, dst, vec):
    """y[i:i+vec] = cast(x[i:i+vec], dst) through bounded views (both n elements)."""
    @opus.kernel
    def conv(x: opus.Ptr[src], y: opus.Ptr[dst], n: i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec
        v = opus.make_gmem(x, n).load(i, vec=vec)
        opus.make_gmem(y, n).store(opus.cast(v, dst), i)
    return conv


def run(kernel, vec, target, how, tmp_path, *args):
    """kernel over the n elements (the last argument), vec per thread, in the interpreter or
    as host-executed C."""
    n = args[-1]
    grid = max(1, -(-n // (THREADS * vec)))
    if how == "interp":
        with opus.set_target(target, interpret=True):
            kernel[grid, THREADS](*args)
    else:
        run_kernel(kernel, grid, THREADS, *args, target=target, workdir=tmp_path)


def padded(n, per):
    return -(-n // per) * per


HOW = ["interp", "host"]


# -- conversions -------------------------------------------------------------------------------

@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", SMALL_FLOATS, ids=lambda t: t.name)
def test_every_code_decodes_to_f32_like_ml_dtypes(t, target, how, tmp_path):
    codes = np.arange(1 << t.bits, dtype=np.uint8)
    n = len(codes)
    x = ref_pack(codes, t.bits)
    y = np.full(padded(n, 32), 7.0, np.float32)
    run(converter(t, f32, VEC[t.bits]), VEC[t.bits], target, how, tmp_path, x, y, n)
    assert same_floats(y[:n], codes.view(t.np_dtype).astype(np.float32))


def encode_inputs(t):
    """Every value of t (both zeros), the midpoints between neighbours and their f32
    neighbours, values past the largest, infinities, NaNs, and a dense f32 sample."""
    vals = np.arange(1 << t.bits, dtype=np.uint8).view(t.np_dtype).astype(np.float32)
    pos = np.unique(vals[vals >= 0])
    mids = (pos[1:] + pos[:-1]) / 2
    around = np.concatenate([mids, np.nextafter(mids, 0), np.nextafter(mids, 100), pos])
    top = float(pos[-1])
    extra = np.float32([top * 1.25, top * 2, 1e30, np.inf, np.nan, 1e-30, 0.0, -0.0,
                        float(pos[1]) / 2, float(pos[1]) / 4])
    x = np.concatenate([around, -around, extra, -extra, dense_f32()[::7]])
    return x.astype(np.float32)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", SMALL_FLOATS, ids=lambda t: t.name)
def test_f32_encodes_like_ml_dtypes_and_every_code_round_trips(t, target, how, tmp_path):
    x = encode_inputs(t)
    n = padded(len(x), 32)  # whole accesses; the bounded tails have their own tests
    x = np.concatenate([x, np.zeros(n - len(x), np.float32)])
    y = np.zeros(n * t.bits // 8, np.uint8)
    run(converter(f32, t, VEC[t.bits]), VEC[t.bits], target, how, tmp_path, x, y, n)
    want = codes_of(x, t)
    got = ref_unpack(y, t.bits, n)
    bad = np.flatnonzero(got != want)
    assert not bad.size, f"{t.name}: f32 {x[bad[:5]]} gave codes {got[bad[:5]]}, want {want[bad[:5]]}"
    # and back: each code's value encodes to the code itself (NaN-free formats, -0 kept)
    codes = np.arange(1 << t.bits, dtype=np.uint8)
    assert np.array_equal(codes_of(codes.view(t.np_dtype).astype(np.float32), t), codes)


def int_ref(values, t):
    """Integers wrapped into t's bits, read back signed (int4) or unsigned (uint4)."""
    v = np.asarray(values, np.int64) & 0xF
    return np.where(v >= 8, v - 16, v) if t.kind == "int" else v


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_int4_every_value_and_the_integer_and_float_rules(t, target, how, tmp_path):
    codes = np.arange(16, dtype=np.uint8)
    n = 32
    x = ref_pack(np.tile(codes, 2), 4)
    y = np.zeros(n, np.int32)
    run(converter(t, i32, 4), 4, target, how, tmp_path, x, y, n)
    assert y.tolist() == int_ref(np.tile(codes, 2), t).tolist()  # sign-extended for int4
    # i32 -> t wraps (keeps the low 4 bits)
    ints = np.arange(-16, 16, dtype=np.int32)
    z = np.zeros(16, np.uint8)
    run(converter(i32, t, 4), 4, target, how, tmp_path, ints, z, n)
    assert ref_unpack(z, 4, n).tolist() == (ints & 0xF).tolist()
    # f32 -> t truncates toward zero and saturates, NaN -> 0
    lo, hi = (-8, 7) if t.kind == "int" else (0, 15)
    f = np.float32([np.nan, 9.5, -100, -1.5, 1.9, -0.9, 7.99, 100, np.inf, -np.inf, 3.0, -8.5,
                    15.5, 16.0, 0.5, -7.0] * 2)
    z[:] = 0
    run(converter(f32, t, 4), 4, target, how, tmp_path, f, z, n)
    want = np.where(np.isnan(f), 0, np.clip(np.trunc(np.nan_to_num(f, posinf=1e9, neginf=-1e9)),
                                            lo, hi)).astype(np.int64)
    assert ref_unpack(z, 4, n).tolist() == (want & 0xF).tolist()


# -- memory: accesses ending inside a byte, bitcasts, lanes -------------------------------------

@functools.lru_cache(None)
def tail_copier(t, vec):
    """y (bound m) gets x (bound n) vec elements per thread, through bounded views."""
    @opus.kernel
    def copy(x: opus.Ptr[t], y: opus.Ptr[t], n: i32, m: i32):
        i = opus.thread_id_x() * vec
        opus.make_gmem(y, m).store(opus.make_gmem(x, n).load(i, vec=vec), i)
    return copy


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t,vec", [(opus.fp4_e2m1, 8), (opus.fp4_e2m1, 2), (opus.fp6_e3m2, 4),
                                   (opus.fp6_e2m3, 16), (opus.uint4, 32)],
                         ids=lambda p: getattr(p, "name", str(p)))
def test_bounds_inside_a_byte_are_exact_per_element(t, vec, target, how, tmp_path):
    """Loads past the bound read 0; stores past it leave every bit there as it was, also the
    other half of a byte holding the last element (a read-modify-write of that byte)."""
    total = THREADS * vec
    rng = np.random.default_rng(total + t.bits)
    src_codes = rng.integers(1, 1 << t.bits, total, dtype=np.uint8)  # never 0: 0 means unread
    cases = [(total - 1, total - 3), (total - vec - 1, total), (total, vec + 1), (3, 1)]
    xs = [ref_pack(src_codes, t.bits) for _ in cases]
    ys = [np.full(total * t.bits // 8, 0xFF, np.uint8) for _ in cases]  # a dropped store shows
    copy = tail_copier(t, vec)
    if how == "interp":
        with opus.set_target(target, interpret=True):
            for x, y, (n, m) in zip(xs, ys, cases):
                copy[1, THREADS](x, y, n, m)
    else:  # one host program, one launch per case
        prog = HostProgram(target)
        k = prog.add(copy.specialize(target=target))
        prog.build(tmp_path)
        prog.run([Launch(k, 1, THREADS, [x, y, n, m]) for x, y, (n, m) in zip(xs, ys, cases)])
    for y, (n, m) in zip(ys, cases):
        got = ref_unpack(y, t.bits, total)
        loaded = np.where(np.arange(total) < n, src_codes, 0)
        want = np.where(np.arange(total) < m, loaded, (1 << t.bits) - 1)
        assert got.tolist() == want.tolist(), (n, m)

@opus.kernel
def words_and_lanes(x: opus.Ptr[opus.u32], y: opus.Ptr[opus.u32], z: opus.Ptr[f32]):
    w = opus.load(x, 0, vec=4)                        # 4 words: 32 packed fp4
    v = opus.bitcast(w, opus.fp4x32)
    z[0] = opus.f32(v[0])                             # lane 0: the low nibble of word 0
    z[1] = opus.f32(v[9])                             # lane 9: bits 4..7 of word 1
    z[2] = opus.f32(v[31])                            # the high nibble of word 3
    v = opus.insert(v, 5, opus.fp4(-3.0))             # lane 5: bits 20..23 of word 0
    v = opus.insert(v, 30, opus.cast(6.5, opus.fp4))  # saturates to 6
    opus.store(y, opus.bitcast(v, opus.u32x4), 0)
    six = opus.bitcast(opus.concat(opus.load(x, 4, vec=2), x[6]), opus.fp6_e3m2x16)  # 3 words
    z[3] = opus.f32(six[5])  # bits 30..35: crosses from word 0 into word 1


def test_words_bitcast_to_packed_lanes_and_back(tmp_path):
    words = np.random.default_rng(3).integers(0, 1 << 32, 8, dtype=np.uint64).astype(np.uint32)
    stream = int.from_bytes(words[:4].tobytes(), "little")
    nib = [(stream >> (4 * i)) & 0xF for i in range(32)]
    fp4 = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    six = int.from_bytes(words[4:8].tobytes(), "little")
    want_z = [fp4[nib[0]], fp4[nib[9]], fp4[nib[31]],
              np.uint8((six >> 30) & 63).view(ml_dtypes.float6_e3m2fn).astype(np.float32)]
    nib[5], nib[30] = 0b1101, 0b0111  # -3.0 and 6.0
    want_y = np.frombuffer(sum(c << (4 * i) for i, c in enumerate(nib)).to_bytes(16, "little"),
                           np.uint32)
    for target in TARGETS:
        for how in HOW:
            y, z = np.zeros(4, np.uint32), np.zeros(4, np.float32)
            if how == "interp":
                with opus.set_target(target, interpret=True):
                    words_and_lanes[1, 1](words, y, z)
            else:
                run_kernel(words_and_lanes, 1, 1, words, y, z, target=target, workdir=tmp_path)
            assert y.tolist() == want_y.tolist(), (target, how)
            assert z.tolist() == [float(v) for v in want_z], (target, how)


@opus.kernel
def names_and_declarations(x: opus.Ptr[f32], y: opus.Ptr[opus.fp4], z: opus.Ptr[opus.f16]):
    a: opus.f32x4 = opus.load(x, 0, vec=4)
    h = opus.f16x4(a)                        # lane-wise conversion
    q = opus.fp4x4(a[0], a[1], a[2], 0.5)    # four lanes, each converted
    opus.store(y, opus.concat(q, opus.fp4x4(1.0)), 0)  # and a splat
    s: opus.f16x4 = opus.f16(2.0)            # a scalar declared as a vector is repeated
    opus.store(z, h * s, 0)


def test_vector_type_names_declare_convert_and_construct():
    x = np.float32([1.0, -2.0, 3.0, 9.0])
    for target in TARGETS:
        y, z = np.zeros(4, np.uint8), np.zeros(4, np.float16)
        with opus.set_target(target, interpret=True):
            names_and_declarations[1, 1](x, y, z)
        assert z.tolist() == [2.0, -4.0, 6.0, 18.0]
        want = codes_of(np.float32([1.0, -2.0, 3.0, 0.5, 1, 1, 1, 1]), opus.fp4)
        assert y.tolist() == ref_pack(want, 4).tolist()
    assert opus.f16x8 == opus.vector_type(opus.f16, 8) and opus.f16x8 is opus.fp16x8
    assert repr(opus.bf16x4) == "opus.bf16x4" and opus.fp8x16.n == 16


def test_traits():
    assert [opus.sizeof_bits(t) for t in (opus.fp4, opus.fp6_e2m3, opus.int4, opus.bool_,
                                          opus.f16, opus.fp4x32, opus.fp6_e3m2x32, opus.i8x4)] \
        == [4, 6, 4, 8, 16, 128, 192, 32]
    assert [opus.is_packed(t) for t in (opus.fp4, opus.uint4, opus.fp6_e3m2, opus.fp8, opus.e8m0,
                                        opus.fp4x2, opus.f32x4)] == [True] * 3 + [False] * 2 + [True, False]
    assert [opus.num_packs(t) for t in (opus.fp4, opus.int4, opus.fp6_e2m3, opus.e8m0, opus.f32,
                                        opus.fp4x8)] == [2, 2, 4, 1, 1, 2]


# -- compile checks and the GPU --------------------------------------------------------------------

@opus.kernel
def fp4_pipeline(x: opus.Ptr[opus.fp4], s: opus.Ptr[f32], y: opus.Ptr[opus.fp4], n: i32):
    """Packed fp4 in, f32 arithmetic, packed fp4 out (a bound that may end inside a byte)."""
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 32
    v = opus.make_gmem(x, n).load(i, vec=32)           # 16 bytes: one access
    f = opus.cast(v, f32) * s[0] + 0.5
    opus.make_gmem(y, n).store(opus.cast(f, opus.fp4), i)


def pipeline_ref(vals, scale):
    return codes_of((vals * np.float32(scale) + np.float32(0.5)).astype(np.float32), opus.fp4)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "gfx942", "gfx950"])
def test_fp4_pipeline_compiles_headerless(target):
    s = fp4_pipeline.specialize(target=target)
    assert "#include" not in s.source
    assert s.compiled.binary


@pytest.mark.parametrize("target", TARGETS)
def test_fp4_pipeline_runs_as_generated_c_and_in_the_interpreter(target, tmp_path):
    n = 200 + 1  # ends inside a byte
    vals = np.arange(n, dtype=np.uint8) % 16
    x = ref_pack(vals, 4)
    fvals = vals.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    want = ref_unpack(ref_pack(pipeline_ref(fvals, -1.5), 4), 4, n)
    for how in HOW:
        y = np.full(len(x), 0xA0, np.uint8)  # the last byte's high nibble (0xA) must survive
        grid = -(-n // (32 * THREADS))
        if how == "interp":
            with opus.set_target(target, interpret=True):
                fp4_pipeline[grid, THREADS](x, np.float32([-1.5]), y, n)
        else:
            run_kernel(fp4_pipeline, grid, THREADS, x, np.float32([-1.5]), y, n, target=target,
                       workdir=tmp_path)
        assert ref_unpack(y, 4, n).tolist() == want.tolist(), how
        assert y[-1] >> 4 == 0xA, how


@pytest.mark.gpu
def test_fp4_pipeline_on_the_gpu(requires_gpu):
    from opus.runtime.device_array import DeviceArray
    n = (1 << 16) + 3
    vals = np.random.default_rng(5).integers(0, 16, n, dtype=np.uint8)
    x = DeviceArray.from_numpy(ref_pack(vals, 4))
    y = DeviceArray.from_numpy(np.full(-(-n // 2), 0xA0, np.uint8))
    fvals = vals.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    s = DeviceArray.from_numpy(np.float32([3.0]))
    fp4_pipeline[-(-n // (32 * 128)), 128](x, s, y, n)
    got = y.to_numpy()
    assert ref_unpack(got, 4, n).tolist() == pipeline_ref(fvals, 3.0).tolist()
    assert got[-1] >> 4 == 0xA


@pytest.mark.gpu
@pytest.mark.parametrize("t", SMALL_FLOATS + INTS, ids=lambda t: t.name)
def test_every_code_on_the_gpu_matches_the_interpreter(t, requires_gpu):
    from opus.runtime.device_array import DeviceArray
    codes = np.tile(np.arange(1 << t.bits, dtype=np.uint8), 2)
    n = len(codes)
    out_t = i32 if t.is_int else f32
    want = np.zeros(n, out_t.np_dtype)
    with opus.set_target("sm_90a", interpret=True):
        converter(t, out_t, 4)[-(-n // 16), THREADS](ref_pack(codes, t.bits), want, n)
    x = DeviceArray.from_numpy(ref_pack(codes, t.bits))
    y = DeviceArray.zeros(n, out_t.np_dtype)
    converter(t, out_t, 4)[-(-n // 16), THREADS](x, y, n)
    assert same_floats(y.to_numpy(), want)
    if not t.is_int:
        enc = encode_inputs(t)
        m = padded(len(enc), 32)
        enc = np.concatenate([enc, np.zeros(m - len(enc), np.float32)])
        dev = DeviceArray.zeros(m * t.bits // 8, np.uint8)
        converter(f32, t, VEC[t.bits])[-(-m // (THREADS * VEC[t.bits])), THREADS](
            DeviceArray.from_numpy(enc), dev, m)
        assert ref_unpack(dev.to_numpy(), t.bits, m).tolist() == codes_of(enc, t).tolist()
