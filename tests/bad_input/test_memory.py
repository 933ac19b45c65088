"""Bad input to memory: narrowing stores, literals out of range, bad vec/offsets/sizes, views
made of the wrong thing, shared-memory misuse, cache hints. Each case checks the error type,
that the message names the problem, the kernel line (``# ERR: <tag>``), and where a launch is
involved, that no output was written and nothing was cached."""
import numpy as np
import pytest

import opus
from opus import bf16, bool_, f16, f32, f64, fp8_e4m3, i8, i32, i64, u8, u32
from expect import no_new_cache_files, raises, unchanged

SM = "sm_90a"


def trace(k, target=SM, **constexprs):
    """Trace and render ``k`` (where every case below fails)."""
    return k.source(target=target, **constexprs)


@pytest.fixture
def interpret():
    with opus.set_target(SM, interpret=True):
        yield


# -- stores that would narrow a run-time value --------------------------------------------------

NARROWING = [(i64, i32), (f32, i32), (f32, f16), (f64, f32), (u32, i32), (i32, u8), (i32, u32),
             (f16, bf16), (bf16, f16), (i32, bool_), (f32, fp8_e4m3), (f64, f16)]


def _index_store(src, dst):
    @opus.kernel
    def k(x: opus.Ptr[src], y: opus.Ptr[dst]):
        i = opus.thread_id_x()
        y[i] = x[i]  # ERR: narrow-index
    return k


@pytest.mark.parametrize("src,dst", NARROWING, ids=lambda t: t.name)
def test_store_does_not_narrow(src, dst):
    with raises(opus.TraceError, f"{src.name} does not convert implicitly to {dst.name}",
                f"opus.cast(v, opus.{dst.name})", at="narrow-index"):
        trace(_index_store(src, dst))


@opus.kernel
def _narrow_gmem(x: opus.Ptr[i64], y: opus.Ptr[i32], n: opus.i32):
    i = opus.thread_id_x()
    g = opus.make_gmem(y, n)
    g[i] = x[i]  # ERR: narrow-gmem


def test_gmem_view_store_does_not_narrow_at_launch(interpret, cache_root):
    x = np.array([1 << 40, 2, 3, 4], np.int64)
    y = np.zeros(4, np.int32)
    with no_new_cache_files(cache_root), unchanged(y), \
            raises(opus.TraceError, "i64 does not convert implicitly to i32", at="narrow-gmem"):
        _narrow_gmem[1, 4](x, y, 4)


@opus.kernel
def _narrow_smem(x: opus.Ptr[f32], y: opus.Ptr[f16]):
    s = opus.alloc_smem(f16, 64)
    i = opus.thread_id_x()
    s[i] = x[i]  # ERR: narrow-smem
    y[i] = s[i]


def test_smem_view_store_does_not_narrow(interpret):
    x = np.full(64, 70000.0, np.float32)  # would be inf in f16
    y = np.zeros(64, np.float16)
    with unchanged(y), raises(opus.TraceError, "f32 does not convert implicitly to f16",
                              "shared f16 memory", at="narrow-smem"):
        _narrow_smem[1, 64](x, y)


@opus.kernel
def _narrow_vector(x: opus.Ptr[f32], y: opus.Ptr[f16]):
    i = opus.thread_id_x() * 4
    opus.store(y, opus.load(x, i, vec=4), i)  # ERR: narrow-vec


def test_vector_store_does_not_narrow_lanes():
    with raises(opus.TraceError, "f32x4 does not convert implicitly to f16x4", at="narrow-vec"):
        trace(_narrow_vector)


@opus.kernel
def _narrow_broadcast(x: opus.Ptr[f32], y: opus.Ptr[f16]):
    i = opus.thread_id_x()
    opus.make_gmem(y).store(x[i], i * 8, vec=8)  # ERR: narrow-bcast


def test_broadcast_store_does_not_narrow():
    with raises(opus.TraceError, "f32 does not convert implicitly to f16", at="narrow-bcast"):
        trace(_narrow_broadcast)


@opus.kernel
def _narrow_insert(x: opus.Ptr[f32], y: opus.Ptr[f16]):
    v = opus.load(y, 0, vec=2)
    v = opus.insert(v, 1, x[0])  # ERR: narrow-insert
    opus.store(y, v, 0)


def test_insert_does_not_narrow():
    with raises(opus.TraceError, "insert into a f16x2", "f32 does not convert implicitly",
                at="narrow-insert"):
        trace(_narrow_insert)


@opus.kernel
def _narrow_make_vector(x: opus.Ptr[f32], y: opus.Ptr[f16]):
    v = opus.make_vector(x[0], x[1], dtype=f16)  # ERR: narrow-make-vector
    opus.store(y, v, 0)


def test_make_vector_dtype_does_not_narrow():
    with raises(opus.TraceError, "make_vector of f16", "f32 does not convert implicitly",
                at="narrow-make-vector"):
        trace(_narrow_make_vector)


# -- Python literals out of the element type's range ------------------------------------------

def _literal_store(dst, value):
    @opus.kernel
    def k(y: opus.Ptr[dst]):
        y[opus.thread_id_x()] = value  # ERR: literal
    return k


@pytest.mark.parametrize("dst,value,needle", [
    (i8, 300, "does not fit i8"),
    (u8, -1, "does not fit u8"),
    (i32, 1 << 31, "does not fit i32"),
    (i32, 2.5, "not an integer"),
    (f16, 1e6, "out of the range of f16"),
    (fp8_e4m3, 1000.0, "out of the range of fp8_e4m3"),
    (bool_, 2, "not a bool"),
], ids=lambda v: str(v))
def test_literal_out_of_range(dst, value, needle):
    with raises(opus.TraceError, needle, repr(value), at="literal"):
        trace(_literal_store(dst, value))


# -- vec ---------------------------------------------------------------------------------------

@opus.kernel
def _bad_vec(x: opus.Ptr[f32], y: opus.Ptr[f32], VEC: opus.constexpr):
    v = opus.make_gmem(x).load(0, vec=VEC)  # ERR: bad-vec
    y[0] = v[0]


@pytest.mark.parametrize("vec,needle", [(0, "vec must be one of"), (3, "vec must be one of"),
                                        (64, "vec must be one of"), (4.0, "float 4.0"),
                                        (8, "32 bytes"), (True, "bool True")])
def test_bad_vec(vec, needle):
    with raises(opus.TraceError, needle, at="bad-vec"):
        trace(_bad_vec, VEC=vec)


@opus.kernel
def _store_lanes(x: opus.Ptr[f16], y: opus.Ptr[f16]):
    v = opus.load(x, 0, vec=4)
    opus.store(y, v, 0, vec=8)  # ERR: store-lanes


def test_store_vector_with_other_lane_count():
    with raises(opus.TraceError, "f16x4 (4 lanes) with vec=8", "lane count", at="store-lanes"):
        trace(_store_lanes)


@opus.kernel
def _insert_vector(x: opus.Ptr[f32]):
    v = opus.load(x, 0, vec=4)
    v = opus.insert(v, 0, opus.load(x, 4, vec=2))  # ERR: insert-vector
    opus.store(x, v, 0)


def test_insert_a_vector_into_a_lane():
    with raises(opus.TraceError, "takes a scalar", "f32x2", at="insert-vector"):
        trace(_insert_vector)


# -- offsets -----------------------------------------------------------------------------------

@opus.kernel
def _float_offset(x: opus.Ptr[f32]):
    x[1.5] = 0.0  # ERR: float-offset


@opus.kernel
def _vector_offset(x: opus.Ptr[f32], o: opus.Ptr[i32]):
    x[opus.load(o, 0, vec=2)] = 0.0  # ERR: vector-offset


@opus.kernel
def _pointer_offset(x: opus.Ptr[f32], o: opus.Ptr[i32]):
    opus.make_gmem(x, 16).load(o)  # ERR: pointer-offset


@opus.kernel
def _runtime_float_offset(x: opus.Ptr[f32]):
    x[0] = x[x[0]]  # ERR: runtime-float-offset


@opus.kernel
def _tuple_index(x: opus.Ptr[f32]):
    g = opus.make_gmem(x, 16)
    g[opus.thread_id_x(), 2] = 1.0  # ERR: tuple-index


@pytest.mark.parametrize("k,tag,needle", [
    (_float_offset, "float-offset", "the Python float 1.5"),
    (_vector_offset, "vector-offset", "i32x2"),
    (_pointer_offset, "pointer-offset", "global pointer to i32"),
    (_runtime_float_offset, "runtime-float-offset", "run-time f32"),
    (_tuple_index, "tuple-index", "one-dimensional"),
], ids=["float-offset", "vector-offset", "pointer-offset", "runtime-float-offset", "tuple-index"])
def test_bad_offset(k, tag, needle):
    with raises(opus.TraceError, "offset must be a scalar integer", needle, at=tag):
        trace(k)


@opus.kernel
def _store_pointer(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    y[0] = x  # ERR: store-pointer


def test_storing_a_pointer():
    with raises(opus.TraceError, "a pointer", at="store-pointer"):
        trace(_store_pointer)


# -- loads and stores through things that are not pointers --------------------------------------

@opus.kernel
def _load_scalar(x: opus.Ptr[f32], n: opus.i32):
    x[0] = opus.load(n, 0)  # ERR: load-scalar


@opus.kernel
def _load_view(x: opus.Ptr[f32], n: opus.i32):
    x[0] = opus.load(opus.make_gmem(x, n), 1)  # ERR: load-view


@opus.kernel
def _store_python(x: opus.Ptr[f32]):
    opus.store([1, 2], x[0], 0)  # ERR: store-python


@pytest.mark.parametrize("k,tag,needles", [
    (_load_scalar, "load-scalar", ("load needs a pointer", "run-time i32")),
    (_load_view, "load-view", ("load needs a pointer", "gmem view", "view.load")),
    (_store_python, "store-python", ("store needs a pointer", "list")),
], ids=["load-scalar", "load-view", "store-python"])
def test_access_through_a_non_pointer(k, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k)


# -- make_gmem / make_smem -------------------------------------------------------------------------

@opus.kernel
def _gmem_of_scalar(x: opus.Ptr[f32], n: opus.i32):
    g = opus.make_gmem(n, 4)  # ERR: gmem-scalar
    x[0] = g[0]


@opus.kernel
def _gmem_of_shared(x: opus.Ptr[f32]):
    s = opus.alloc_smem(f32, 32)
    g = opus.make_gmem(s.ptr, 32)  # ERR: gmem-shared
    x[0] = g[0]


@opus.kernel
def _gmem_of_smem_view(x: opus.Ptr[f32]):
    g = opus.make_gmem(opus.alloc_smem(f32, 32))  # ERR: gmem-smem-view
    x[0] = g[0]


@opus.kernel
def _gmem_of_gmem(x: opus.Ptr[f32], n: opus.i32):
    g = opus.make_gmem(opus.make_gmem(x, n), n)  # ERR: gmem-gmem
    x[0] = g[0]


@opus.kernel
def _gmem_size_and_nbytes(x: opus.Ptr[f32], n: opus.i32):
    g = opus.make_gmem(x, n, nbytes=n * 4)  # ERR: size-and-nbytes
    x[0] = g[0]


@opus.kernel
def _gmem_nbytes_ragged(x: opus.Ptr[f32]):
    g = opus.make_gmem(x, nbytes=10)  # ERR: nbytes-ragged
    x[0] = g[0]


@opus.kernel
def _gmem_negative_size(x: opus.Ptr[f32]):
    g = opus.make_gmem(x, -4)  # ERR: negative-size
    x[0] = g[0]


@opus.kernel
def _gmem_float_size(x: opus.Ptr[f32]):
    g = opus.make_gmem(x, 16.0)  # ERR: float-size
    x[0] = g[0]


@opus.kernel
def _smem_of_global(x: opus.Ptr[f32]):
    s = opus.make_smem(x, 16)  # ERR: smem-global
    x[0] = s[0]


@opus.kernel
def _smem_of_gmem_view(x: opus.Ptr[f32]):
    s = opus.make_smem(opus.make_gmem(x, 16))  # ERR: smem-gmem-view
    x[0] = s[0]


@opus.kernel
def _smem_of_number(x: opus.Ptr[f32]):
    s = opus.make_smem(256)  # ERR: smem-number
    x[0] = s[0]


@pytest.mark.parametrize("k,tag,needles", [
    (_gmem_of_scalar, "gmem-scalar", ("make_gmem needs a global pointer", "run-time i32")),
    (_gmem_of_shared, "gmem-shared", ("shared-memory pointer", "opus.make_smem")),
    (_gmem_of_smem_view, "gmem-smem-view", ("smem view", "opus.make_smem")),
    (_gmem_of_gmem, "gmem-gmem", ("gmem view", "g + offset")),
    (_gmem_size_and_nbytes, "size-and-nbytes", ("either size", "nbytes", "not both")),
    (_gmem_nbytes_ragged, "nbytes-ragged", ("multiple of 4", "got 10")),
    (_gmem_negative_size, "negative-size", ("size must be >= 0", "-4")),
    (_gmem_float_size, "float-size", ("size must be a scalar integer", "float 16.0")),
    (_smem_of_global, "smem-global", ("make_smem needs shared memory", "global pointer",
                                      "opus.make_gmem")),
    (_smem_of_gmem_view, "smem-gmem-view", ("make_smem needs shared memory", "gmem view",
                                            "opus.make_gmem")),
    (_smem_of_number, "smem-number", ("make_smem needs shared memory", "python int 256")),
], ids=lambda v: v if isinstance(v, str) and "-" in v else "")
def test_bad_view(k, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k)


# -- alloc_smem ------------------------------------------------------------------------------

@opus.kernel
def _alloc_smem(x: opus.Ptr[f32], n: opus.i32, DT: opus.constexpr, COUNT: opus.constexpr,
                ALIGN: opus.constexpr):
    s = opus.alloc_smem(DT, n if COUNT == "n" else COUNT, ALIGN)  # ERR: alloc-smem
    x[0] = s[0]


@pytest.mark.parametrize("dtype,count,align,needles", [
    (f32, 0, 16, ("count must be a positive compile-time int", "0")),
    (f32, -8, 16, ("count must be a positive compile-time int", "-8")),
    (f32, "n", 16, ("count must be a positive compile-time int",)),
    (f32, 2.5, 16, ("count must be a positive compile-time int", "2.5")),
    (f32, 64, 3, ("align must be a power of two", "3")),
    (f32, 64, 2048, ("align must be a power of two up to 1024", "2048")),
    (np.float32, 64, 16, ("alloc_smem needs an opus dtype",)),
    ("f32", 64, 16, ("alloc_smem needs an opus dtype", "'f32'")),
], ids=str)
def test_bad_alloc_smem(dtype, count, align, needles):
    with raises(opus.TraceError, *needles, at="alloc-smem"):
        trace(_alloc_smem, DT=dtype, COUNT=count, ALIGN=align)


def test_runtime_smem_count_at_launch(interpret):
    x = np.zeros(4, np.float32)
    with unchanged(x), raises(opus.TraceError, "count must be a positive compile-time int",
                              at="alloc-smem"):
        _alloc_smem[1, 1](x, 8, f32, "n", 16)


# -- cache hints ----------------------------------------------------------------------------------

@opus.kernel
def _cache_load(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    y[0] = opus.make_gmem(x, 4).load(0, cache="streaming")  # ERR: cache-load


@opus.kernel
def _cache_store(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    opus.store(y, x[0], 0, cache="wb")  # ERR: cache-store


@opus.kernel
def _cache_view_store(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    opus.make_smem(opus.alloc_smem(f32, 4)).store(x[0], 0, cache="nt")  # ERR: cache-smem


@pytest.mark.parametrize("k,tag,what", [(_cache_load, "cache-load", ("load:", "'streaming'")),
                                        (_cache_store, "cache-store", ("store:", "'wb'")),
                                        (_cache_view_store, "cache-smem", ("store:", "'nt'"))],
                         ids=["load", "store", "smem-store"])
def test_cache_hint_refused(k, tag, what):
    # a hint is an opus.Cache member (strings are refused, naming the members)
    with raises(opus.TraceError, *what, "cache must be an opus.Cache member",
                "opus.Cache.STREAMING", at=tag):
        trace(k)


def test_cache_hint_refused_at_launch_writes_nothing(interpret, cache_root):
    x = np.arange(4, dtype=np.float32)
    y = np.zeros(4, np.float32)
    with no_new_cache_files(cache_root), unchanged(x, y), \
            raises(opus.TraceError, "opus.Cache member", at="cache-store"):
        _cache_store[1, 1](x, y)
