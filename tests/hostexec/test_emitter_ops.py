"""Ops of codegen/cemit.py that the differential programs do not generate, run on the host
against hand values and numpy: med3 of every type (the NaN rule of ir/ops.py), popc of every
width, readfirstlane / uniform (a shuffle from the first live lane on CUDA), "u32" offsets, the
f32 fma's single rounding, HIP's tanh helper, 16-bit stores as words (packed conversions), and
128-lane register vectors (one C variable per lane on CUDA) through loops, branches and an op
that takes them whole (issue 17.4: these kill the mutants of cemit.py that no test reached)."""
import functools

import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from opus.ir import VectorType
from hostexec import run_kernel


def _same_bits(got, want):
    assert got.tobytes() == want.tobytes(), (got, want)


# -- med3 --------------------------------------------------------------------------------------

@functools.cache
def med3_of(T):
    @opus.kernel
    def med3_k(x: opus.Ptr[T], y: opus.Ptr[T], z: opus.Ptr[T], o: opus.Ptr[T]):
        t = opus.thread_id_x()
        o[t] = opus.med3(x[t], y[t], z[t])
    return med3_k


def _med3_ref(a, b, c):
    """ir/ops.py med3 by hand: the median; with a NaN operand the minimum of the others (NaN
    when all three are); -0 < +0."""
    key = lambda v: (v, not np.signbit(v))        # orders -0 below +0
    xs = [v for v in (a, b, c) if not np.isnan(v)]
    if len(xs) < 3:
        return min(xs, key=key) if xs else np.nan
    return sorted(xs, key=key)[1]


NAN, INF = np.nan, np.inf
# orders, ties, signed zeros, infinities, one, two and three NaNs
FLOAT_TRIPLES = [(1, 2, 3), (3, 1, 2), (2, 3, 1), (-1, -1, 5), (7, 0.5, 0.5), (-0.0, 0.0, 0.0),
                 (0.0, -0.0, -0.0), (-INF, INF, 2), (NAN, 4, -3), (4, NAN, 9), (5, 6, NAN),
                 (NAN, NAN, 2.5), (NAN, -0.0, 0.0), (NAN, NAN, NAN), (-2, -8, -5), (3, -4, 0.25)]


@pytest.mark.parametrize("T", [f32, f64, f16, bf16], ids=lambda t: t.name)
@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_med3_of_floats_by_the_nan_rule(T, target, tmp_path):
    """CUDA composes fminf/fmaxf with a NaN test; HIP calls v_med3_f32 (f64: min/max)."""
    a, b, c = (np.array([t[k] for t in FLOAT_TRIPLES], np.float64) for k in range(3))
    want = np.array([_med3_ref(*v) for v in zip(a, b, c)]).astype(T.np_dtype)
    a, b, c = (v.astype(T.np_dtype) for v in (a, b, c))
    o = np.zeros(len(a), T.np_dtype)
    run_kernel(med3_of(T), 1, len(a), a, b, c, o, target=target, workdir=tmp_path)
    nan = np.isnan(want.astype(np.float64))
    assert (np.isnan(o.astype(np.float64)) == nan).all(), (o, want)
    _same_bits(o[~nan], want[~nan])               # signed zeros by their bits


@opus.kernel
def med3_f32_and_f64(x: opus.Ptr[f64], o: opus.Ptr[f64]):
    t = opus.thread_id_x()
    o[t + 4] = opus.f64(opus.med3(opus.f32(x[t]), opus.f32(x[t + 4]), opus.f32(x[t + 8])))
    o[t] = opus.med3(x[t], x[t + 4], x[t + 8])         # after the f32 one: its own helper


def test_med3_helpers_of_f32_and_f64_in_one_kernel(tmp_path):
    """Each float type its own helper: the f64 median keeps the bits an f32 one would round."""
    x = np.float64([1 + 2 ** -40, -3.0, 7.25, 0.1, 2.0, 1 + 2 ** -30, -1.0, 0.2, 5.0, 1.0, 3.0,
                    0.3])
    o = np.zeros(8, np.float64)
    run_kernel(med3_f32_and_f64, 1, 4, x, o, target="sm_80", workdir=tmp_path)
    med = np.sort(np.stack([x[0:4], x[4:8], x[8:12]]), axis=0)[1]
    np.testing.assert_array_equal(o[:4], med)                    # 1 + 2^-40, 1 + 2^-30, ...
    np.testing.assert_array_equal(o[4:], med.astype(np.float32).astype(np.float64))


INT_TRIPLES = [(1, 2, 3), (3, 1, 2), (2, 3, 1), (5, 5, -1), (-7, 9, 9), (-128, 127, 0),
               (127, -128, -128), (0, 0, 0), (-3, -9, -6), (100, -100, 50)]


@pytest.mark.parametrize("T", [i32, u32, i8, i64, u16], ids=lambda t: t.name)
@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_med3_of_integers_is_the_middle_value(T, target, tmp_path):
    a, b, c = (np.array([t[k] for t in INT_TRIPLES], np.int64).astype(T.np_dtype)
               for k in range(3))                 # u16: the negatives wrap, still ordered
    o = np.zeros(len(a), T.np_dtype)
    run_kernel(med3_of(T), 1, len(a), a, b, c, o, target=target, workdir=tmp_path)
    np.testing.assert_array_equal(o, np.sort(np.stack([a, b, c]), axis=0)[1])


def test_med3_of_bools_is_the_majority(tmp_path):
    bits = np.array([[(i >> k) & 1 for k in range(3)] for i in range(8)], np.uint8)
    a, b, c = (np.ascontiguousarray(bits[:, k]).view(np.bool_) for k in range(3))
    o = np.zeros(8, np.bool_)
    run_kernel(med3_of(opus.bool_), 1, 8, a, b, c, o,
               target="sm_80", workdir=tmp_path)
    np.testing.assert_array_equal(o, bits.sum(axis=1) >= 2)


# -- popc --------------------------------------------------------------------------------------

@functools.cache
def popc_of(T):
    @opus.kernel
    def popc_k(x: opus.Ptr[T], o: opus.Ptr[T]):
        t = opus.thread_id_x()
        o[t] = opus.popc(x[t])
    return popc_k


@pytest.mark.parametrize("T", [i8, u8, i16, u16, i32, u32, i64, u64], ids=lambda t: t.name)
@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_popc_counts_the_bits_of_its_own_width(T, target, tmp_path):
    """Negative narrow integers count their own width's bits only (-1 as i8: 8, not 32)."""
    bits = T.bits
    vals = [0, 1, 2 ** bits - 1, 2 ** (bits - 1), 2 ** (bits - 1) - 1, 0x5A5A5A5A5A5A5A5A % 2 ** bits,
            3 << (bits - 2), 2 ** (bits // 2) + 1]
    x = np.array(vals, np.uint64).astype(np.dtype(f"u{T.itemsize}")).view(T.np_dtype)
    o = np.full(len(x), 99, T.np_dtype)
    run_kernel(popc_of(T), 1, len(x), x, o, target=target, workdir=tmp_path)
    np.testing.assert_array_equal(o, [bin(v).count("1") for v in vals])


# -- readfirstlane / uniform -----------------------------------------------------------------------

@functools.cache
def first_lane_of(T):
    @opus.kernel
    def first_lane_k(x: opus.Ptr[T], o: opus.Ptr[T], u: opus.Ptr[T], skip: i32):
        t = opus.thread_id_x()
        if t < skip:
            return          # lanes that returned: the first live lane of warp 0 is lane `skip`
        o[t] = opus.readfirstlane(x[t])
        u[t] = opus.uniform(x[opus.warp_id() * 1000])   # one value per warp, as promised
    return first_lane_k


@pytest.mark.parametrize("T", [i8, f16, i32, f32, i64, f64], ids=lambda t: t.name)
def test_readfirstlane_reads_every_word_of_the_first_live_lane(T, tmp_path):
    """CUDA: readfirstlane is a shuffle of each 32-bit word from the lowest lane of
    __activemask() (tests/hostexec/shim/warp_cuda.h); every lane's value differs in every word."""
    n, skip = 64, 3
    raw = (np.arange(2000, dtype=np.uint64) * 0x0101010101010101 + 0x1122334455667788)
    x = raw.astype(np.dtype(f"u{T.itemsize}")).view(T.np_dtype)
    o, u = np.zeros(n, T.np_dtype), np.zeros(n, T.np_dtype)
    run_kernel(first_lane_of(T), 1, n, x, o, u, skip, target="sm_80", workdir=tmp_path)
    want = np.zeros(n, T.np_dtype)
    want[skip:32], want[32:] = x[skip], x[32]         # warp 0 from lane 3, warp 1 from lane 32
    _same_bits(o, want)
    want_u = np.zeros(n, T.np_dtype)
    want_u[skip:32], want_u[32:] = x[0], x[1000]
    _same_bits(u, want_u)



@opus.kernel
def first_lane_of_two_types(a: opus.Ptr[i32], b: opus.Ptr[f32], o: opus.Ptr[i32],
                            p: opus.Ptr[f32]):
    t = opus.thread_id_x()
    o[t] = opus.readfirstlane(a[t])
    p[t] = opus.readfirstlane(b[t])       # its own helper: an f32 through an int one truncates


def test_readfirstlane_of_two_types_in_one_kernel(tmp_path):
    a = np.arange(32, dtype=np.int32) * 3 - 40
    b = np.arange(32, dtype=np.float32) * 0.25 + 0.125
    o, p = np.zeros(32, np.int32), np.zeros(32, np.float32)
    run_kernel(first_lane_of_two_types, 1, 32, a, b, o, p, target="sm_80", workdir=tmp_path)
    np.testing.assert_array_equal(o, np.full(32, a[0]))
    np.testing.assert_array_equal(p, np.full(32, b[0]))

@pytest.mark.parametrize("T", [i8, f16, f32, i64, f64], ids=lambda t: t.name)
def test_readfirstlane_and_uniform_of_uniform_values_on_amd(T, tmp_path):
    """HIP: each 32-bit word through __builtin_amdgcn_readfirstlane (the host shim is the
    identity, right for the uniform values given here); a wave of 64 lanes."""
    n = 128
    raw = (np.arange(2000, dtype=np.uint64) * 0x0101010101010101 + 0x1122334455667788)
    x = raw.astype(np.dtype(f"u{T.itemsize}")).view(T.np_dtype)
    o, u = np.zeros(n, T.np_dtype), np.zeros(n, T.np_dtype)

    @opus.kernel
    def uniform_k(x: opus.Ptr[T], o: opus.Ptr[T], u: opus.Ptr[T]):
        t = opus.thread_id_x()
        w = opus.warp_id()
        o[t] = opus.readfirstlane(x[w * 7])
        u[t] = opus.uniform(x[w * 1000 + 1])
    run_kernel(uniform_k, 1, n, x, o, u, target="gfx942", workdir=tmp_path)
    _same_bits(o, np.repeat(x[[0, 7]], 64))
    _same_bits(u, np.repeat(x[[1, 1001]], 64))


# -- "u32" offsets -------------------------------------------------------------------------------

@opus.kernel
def u32_copies(x: opus.Ptr[f32], y: opus.Ptr[f32], s: i32):
    t = opus.thread_id_x()
    v = opus.load(x, t * 4, vec=4, soffset=s, offsets="u32")      # x[4t + s ..]
    w = opus.load(x, t, offsets="u32")                              # x[t]
    opus.store(y, v, t * 4, vec=4, soffset=s, offsets="u32")        # y[4t + s ..]
    opus.store(y, w + 0.5, t, offsets="u32")                        # y[t]: after the above
    opus.store(y, opus.load(x, 3 * t, soffset=s, offsets="u32"), 100 + t, offsets="u32")


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_u32_offsets_with_and_without_soffset(target, tmp_path):
    """The base plus a 32-bit element offset (HIP: a byte offset of the element size), the
    scalar offset added where given."""
    x = np.arange(128, dtype=np.float32) * 1.5 - 7
    y = np.full(128, -1.0, np.float32)
    s = 5
    run_kernel(u32_copies, 1, 8, x, y, s, target=target, workdir=tmp_path)
    want = np.full(128, -1.0, np.float32)
    for t in range(8):
        want[4 * t + s:4 * t + s + 4] = x[4 * t + s:4 * t + s + 4]
    for t in range(8):      # each lane runs to its end: lane t's y[t] after lanes < t's vectors
        want[t] = x[t] + 0.5
        want[4 * t + s:4 * t + s + 4] = x[4 * t + s:4 * t + s + 4]
        want[100 + t] = x[3 * t + s]
    np.testing.assert_array_equal(y, want)


# -- fma rounds once; HIP's f64 rsqrt helper -----------------------------------------------------

@opus.kernel
def fma_f32(a: opus.Ptr[f32], o: opus.Ptr[f32]):
    o[0] = opus.fma(a[0], a[1], a[2])


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_f32_fma_rounds_once(target, tmp_path):
    """(1 + 2^-12)^2 + 2^-60 = 1 + 2^-11 + 2^-24 + 2^-60: above the halfway point between two
    floats, so fmaf gives 1 + 2^-11 + 2^-23; an f64 fma rounds to 1 + 2^-11 + 2^-24 first (a
    tie for f32), whose even neighbour is 1 + 2^-11."""
    a = np.float32([1 + 2 ** -12, 1 + 2 ** -12, 2 ** -60])
    o = np.zeros(1, np.float32)
    run_kernel(fma_f32, 1, 1, a, o, target=target, workdir=tmp_path)
    assert o[0] == np.float32(1 + 2 ** -11 + 2 ** -23)


@opus.kernel
def rsqrt_f64(x: opus.Ptr[f64], o: opus.Ptr[f64]):
    t = opus.thread_id_x()
    o[t] = opus.rsqrt(x[t])


def test_f64_rsqrt_through_the_hip_helper(tmp_path):
    x = np.float64([4.0, 2.0, 0.01, 1e300, 3.0, 1e-300, 7.0, 0.5])
    o = np.zeros(8, np.float64)
    run_kernel(rsqrt_f64, 1, 8, x, o, target="gfx942", workdir=tmp_path)
    np.testing.assert_array_equal(o, 1.0 / np.sqrt(x))     # opus_rsqrt64: 1 / sqrt in f64


# -- 16-bit stores as words (CEmitter._word_store, _packed_pairs) -------------------------------

@opus.kernel
def half_stores(x: opus.Ptr[f32], y: opus.Ptr[f16], n: i32):
    t = opus.thread_id_x()
    v16 = opus.cast(opus.concat(opus.load(x, 0, vec=4), opus.load(x, 4, vec=4),
                                opus.load(x, 8, vec=4), opus.load(x, 12, vec=4)), f16)
    v8 = v16[0:8]
    opus.store(y, v8[0:2], 0, vec=2)              # 4 bytes: one word          (words)
    opus.store(y, v8[0:4], 2, vec=4)              # 8 bytes: two words         (words)
    opus.store(y, v8, 6, vec=8)                   # 16 bytes: four words       (words)
    opus.store(y, v8[2:6], 14, vec=4)             # pairs kept                 (words)
    opus.store(y, v8[1:5], 18, vec=4)             # pairs split                (struct)
    opus.store(y, v8[1:3], 22, vec=2)             # one pair split             (struct)
    opus.store(y, v16[8:16], 24, vec=8)           # the upper eight            (words)
    opus.store(y, v16[4:12][2:6], 32, vec=4)      # a slice of a slice: 6..9   (words)
    opus.store(y, opus.load(y, 0, vec=4), 36, vec=4)   # loaded, not converted (struct)
    acc = opus.cast(opus.load(x, 16, vec=2), f16)
    for i in opus.range(n):
        acc = acc + acc                           # loop-carried: no conversion's pairs
    opus.store(y, acc, 40, vec=2)                 #                            (struct)


# the order of half_stores' stores: True where the pairs of one packed conversion are stored
# as 32-bit words (docs/compile_time.md: word stores only for packed-conversion pairs)
HALF_STORE_WORDS = [("unsigned", 1), ("u32x2", 2), ("u32x4", 4), ("u32x2", 2), None, None,
                    ("u32x4", 4), ("u32x2", 2), None, None]


def test_16_bit_stores_of_packed_pairs_are_words(tmp_path):
    x = (np.arange(18, dtype=np.float32) - 6.3) * 1.7
    y = np.zeros(48, np.float16)
    run_kernel(half_stores, 1, 1, x, y, 3, target="sm_80", workdir=tmp_path)
    h = x.astype(np.float16)
    want = np.zeros(48, np.float16)
    want[0:2], want[2:6], want[6:14], want[14:18] = h[0:2], h[0:4], h[0:8], h[2:6]
    want[18:22], want[22:24], want[24:32], want[32:36] = h[1:5], h[1:3], h[8:16], h[6:10]
    want[36:40] = want[0:4]
    want[40:42] = h[16:18] * 8                    # doubled three times: exact in f16
    _same_bits(y, want)


def _stores(source):
    """The kinds of the kernel's stores in order: ("unsigned", 1) for one word, ("u32xN", N)
    for N words, None for a struct (or scalar) store."""
    import re
    out = []
    for line in source.splitlines():
        line = line.strip()
        m = re.match(r"\{ opus_(u32x\d) w_;(.*)\*\(opus_u32x\d\*\)", line)
        if m:
            out.append((m.group(1), m.group(2).count("w_.v[")))
        elif line.startswith("*(unsigned*)("):
            out.append(("unsigned", 1))
        elif re.match(r"\*\(opus_f16x\d\*\)\(", line):
            out.append(None)
    return out


def test_which_16_bit_stores_are_words():
    assert _stores(half_stores.source(target="sm_80")) == HALF_STORE_WORDS


@opus.kernel
def rounded_halves(x: opus.Ptr[f32], y: opus.Ptr[f16], z: opus.Ptr[opus.bf16]):
    v = opus.load(x, 0, vec=4)
    opus.store(y, opus.cast(v, f16, rounding="rz"), 0, vec=4)          # cvt.rz.f16x2: words
    opus.store(z, opus.cast(v, opus.bf16, rounding="truncate"), 0, vec=4)   # no pairs: struct


def test_word_stores_follow_the_casts_own_rounding():
    """A truncating bf16 cast has no packed instruction (its 'rn' form does): its lanes are
    not pairs, so its store stays a struct."""
    src = rounded_halves.source(target="sm_80")
    assert _stores(src) == [("u32x2", 2)] and "*(opus_bf16x4*)(" in src


def test_hip_and_vectors_of_other_types_keep_their_stores():
    """HIP stores every vector as it is (word_stores False); so does CUDA for f32 lanes."""
    assert _stores(half_stores.source(target="gfx942")) == [None] * len(HALF_STORE_WORDS)

    @opus.kernel
    def f32_pair(x: opus.Ptr[f32], y: opus.Ptr[f32]):
        opus.store(y, opus.load(x, 0, vec=2) * 2.0, 0, vec=2)
    src = f32_pair.source(target="sm_80")
    assert "*(opus_f32x2*)(" in src and "w_" not in src and "*(unsigned*)" not in src


# -- 128-lane register vectors: one C variable per lane on CUDA (scalar_lanes_from) -------------

@opus.kernel
def wide_vectors(x: opus.Ptr[f32], y: opus.Ptr[i32], n: i32):
    t = opus.thread_id_x()
    v = opus.concat(*[opus.load(x, k * 4, vec=4) for k in range(32)])    # 128 lanes
    s = opus.f32(0.0)
    for i in opus.range(n):
        v = v * 2.0 + 1.0                          # one carried vector
    for i in opus.range(n):
        v, s = v - 1.0, s + v[5]                   # a vector and a scalar carried together
    if t > 0:
        v = v + 1.0                                # a branch's vector result
    b = opus.bitcast(v, VectorType(i32, 128))      # an op that takes vectors whole (structs)
    h = opus.bitcast(v * 0.5, VectorType(i32, 128))    # a second one in the same scope
    for k in range(32):
        opus.store(y, b[k * 4:(k + 1) * 4], t * 385 + k * 4, vec=4)
        opus.store(y, h[k * 4:(k + 1) * 4], t * 385 + 256 + k * 4, vec=4)
    y[t * 385 + 128] = opus.cast(s, i32)


def test_128_lane_vectors_through_loops_branches_and_whole_vector_ops(tmp_path):
    x = np.arange(128, dtype=np.float32) * 0.5 - 20
    y = np.zeros(2 * 385, np.int32)
    n = 3
    run_kernel(wide_vectors, 1, 2, x, y, n, target="sm_80", workdir=tmp_path)
    v = x.astype(np.float64)
    for _ in range(n):
        v = v * 2 + 1
    s = 0.0
    for _ in range(n):
        s, v = s + v[5], v - 1
    for t in range(2):
        want = (v + (1 if t > 0 else 0)).astype(np.float32)     # every value exact in f32
        np.testing.assert_array_equal(y[t * 385:t * 385 + 128], want.view(np.int32))
        np.testing.assert_array_equal(y[t * 385 + 256:t * 385 + 384], (want * 0.5).view(np.int32))
        assert y[t * 385 + 128] == int(s)
    src = wide_vectors.source(target="sm_80")
    assert "opus_f32x128" in src and "_127 = " in src   # structs for the bitcast, lanes elsewhere


# -- pointer arithmetic on packed types: whole bytes -------------------------------------------

@opus.kernel
def fp4_through_offset_pointers(x: opus.Ptr[f32], q: opus.Ptr[opus.fp4_e2m1]):
    t = opus.thread_id_x()
    v = opus.concat(opus.load(x, 8 * t, vec=4), opus.load(x, 8 * t + 4, vec=4))
    dst = q + 8 * t                     # 8 fp4 codes: 4 bytes further per lane
    opus.store(dst, opus.cast(v, opus.fp4_e2m1), 0, vec=8)


def test_packed_pointer_arithmetic_moves_whole_bytes(tmp_path):
    """E2M1 codes by hand (OCP MX v1.0: 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign), two per
    byte, the even element in the low nibble."""
    vals = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -1.0, -6.0, -3.0, 1.5, 0.5, 2.0, 4.0]
    codes = {0.0: 0, 0.5: 1, 1.0: 2, 1.5: 3, 2.0: 4, 3.0: 5, 4.0: 6, 6.0: 7}
    code = lambda v: codes[abs(v)] | (8 if v < 0 else 0)
    x = np.float32(vals)
    q = np.zeros(8, np.uint8)
    run_kernel(fp4_through_offset_pointers, 1, 2, x, q, target="sm_90a", workdir=tmp_path)
    want = [code(vals[2 * i]) | code(vals[2 * i + 1]) << 4 for i in range(8)]
    np.testing.assert_array_equal(q, want)


# -- the two bf16 truncations in one kernel --------------------------------------------------

@opus.kernel
def truncations(x: opus.Ptr[f32], a: opus.Ptr[opus.bf16], b: opus.Ptr[opus.bf16]):
    t = opus.thread_id_x()
    a[t] = opus.cast(x[t], opus.bf16, rounding="truncate")
    b[t] = opus.cast(x[t], opus.bf16, rounding="truncate_with_nan")


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_both_bf16_truncations_in_one_kernel(target, tmp_path):
    """ir/ops.py cast: the high 16 bits; 'truncate_with_nan' also sets bit 0 when the exponent
    is all ones and the low half is not 0. By hand: 0x3FC0C000 -> 0x3FC0 (both); the NaN
    0x7F800001 -> 0x7F80 (an infinity) / 0x7F81 (a NaN); 0xFFC00000 -> 0xFFC0 (both: its
    payload is in the high half); 0xBFFFFFFF -> 0xBFFF (both: not a NaN)."""
    bits = np.uint32([0x3FC0C000, 0x7F800001, 0xFFC00000, 0xBFFFFFFF])
    a, b = np.zeros(4, np.uint16), np.zeros(4, np.uint16)
    run_kernel(truncations, 1, 4, bits.view(np.float32), a.view(opus.bf16.np_dtype),
               b.view(opus.bf16.np_dtype), target=target, workdir=tmp_path)
    np.testing.assert_array_equal(a, [0x3FC0, 0x7F80, 0xFFC0, 0xBFFF])
    np.testing.assert_array_equal(b, [0x3FC0, 0x7F81, 0xFFC0, 0xBFFF])
