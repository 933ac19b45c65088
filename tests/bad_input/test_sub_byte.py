"""Bad input with the sub-byte types (fp4, fp6, int4, uint4; ir/ops.py "Sub-byte types"):
accesses that do not move whole bytes, vectors that are not whole bytes, run-time offsets that
split a byte, arguments that are not packed bytes, packing helpers given the wrong thing,
vector type names and declarations misused. Each case checks the error type, that the message
names the problem, the kernel line where one is involved (``# ERR: <tag>``), and that a failed
launch wrote nothing and cached nothing."""
import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32, fp4, i32
from opus.errors import ArgumentError
from opus.interp import MemoryFault
from expect import no_new_cache_files, raises, unchanged

SM = "sm_90a"
TARGETS = ["sm_90a", "gfx942", "gfx950"]
FP6 = opus.fp6_e2m3


def launch(k, target, *args, grid=1, block=1):
    with opus.set_target(target, interpret=True):
        k[grid, block](*args)


# -- trace-time: accesses and vectors that are not whole bytes ---------------------------------

@opus.kernel
def odd_offset(x: opus.Ptr[fp4], y: opus.Ptr[f32]):
    v = opus.load(x, 3, vec=8)  # ERR: odd-offset
    y[0] = opus.f32(v[0])


@opus.kernel
def odd_store_offset(x: opus.Ptr[fp4]):
    opus.store(x, opus.zeros(4, fp4), 5)  # ERR: odd-store


@opus.kernel
def fp6_offset(x: opus.Ptr[FP6], y: opus.Ptr[f32]):
    y[0] = opus.f32(opus.make_gmem(x, 64).load(6, vec=4)[0])  # ERR: fp6-offset


@opus.kernel
def scalar_access(x: opus.Ptr[fp4], y: opus.Ptr[f32]):
    y[0] = opus.f32(x[2])  # ERR: scalar-access


@opus.kernel
def fp6_vec2(x: opus.Ptr[FP6], y: opus.Ptr[f32]):
    y[0] = opus.f32(opus.load(x, 0, vec=2)[0])  # ERR: fp6-vec2


@opus.kernel
def too_wide(x: opus.Ptr[FP6], y: opus.Ptr[f32]):
    y[0] = opus.f32(opus.load(x, 0, vec=32)[0])  # ERR: too-wide


@opus.kernel
def three_fp4(y: opus.Ptr[fp4]):
    v = opus.make_vector(fp4(1.0), fp4(2.0), fp4(3.0))  # ERR: three-fp4
    opus.store(y, opus.concat(v, fp4(0.0)), 0)


@opus.kernel
def slice_fp4(x: opus.Ptr[fp4], y: opus.Ptr[f32]):
    v = opus.load(x, 0, vec=8)
    w = v[1:4]  # ERR: slice-fp4
    y[0] = opus.f32(w[0])


@opus.kernel
def splat_int4(y: opus.Ptr[opus.int4]):
    opus.store(y, opus.splat(opus.int4(1), 3), 0)  # ERR: splat-int4


@opus.kernel
def odd_pointer_step(x: opus.Ptr[fp4], y: opus.Ptr[f32]):
    g = opus.make_gmem(x, 64) + 1  # ERR: odd-step
    y[0] = opus.f32(g.load(0, vec=2)[0])


@opus.kernel
def odd_smem(y: opus.Ptr[f32]):
    s = opus.alloc_smem(opus.uint4, 63)  # ERR: odd-smem
    y[0] = opus.f32(s.load(0, vec=2)[0])


@opus.kernel
def fp6_nbytes(x: opus.Ptr[FP6], y: opus.Ptr[f32]):
    g = opus.make_gmem(x, nbytes=10)  # ERR: fp6-nbytes
    y[0] = opus.f32(g.load(0, vec=4)[0])


@opus.kernel
def bitcast_width(x: opus.Ptr[opus.u32], y: opus.Ptr[f32]):
    v = opus.bitcast(opus.load(x, 0, vec=2), opus.fp4x8)  # ERR: bitcast-width
    y[0] = opus.f32(v[0])


@opus.kernel
def arith_on_fp4(x: opus.Ptr[fp4], y: opus.Ptr[f32]):
    v = opus.load(x, 0, vec=2)
    y[0] = opus.f32((v + v)[0])  # ERR: arith-fp4


@opus.kernel
def narrowing_store(x: opus.Ptr[f32], y: opus.Ptr[fp4]):
    opus.store(y, opus.load(x, 0, vec=2), 0)  # ERR: narrow-store


@opus.kernel
def rz_to_fp4(x: opus.Ptr[f32], y: opus.Ptr[fp4]):
    opus.store(y, opus.cast(opus.load(x, 0, vec=2), fp4, rounding="rz"), 0)  # ERR: rz-fp4


TRACE_CASES = [
    (odd_offset, ["offset 3", "fp4_e2m1", "does not start a byte", "multiples of 2"], "odd-offset"),
    (odd_store_offset, ["offset 5", "does not start a byte"], "odd-store"),
    (fp6_offset, ["offset 6", "fp6_e2m3", "multiples of 4"], "fp6-offset"),
    (scalar_access, ["vec=1", "whole bytes", "multiple of 2"], "scalar-access"),
    (fp6_vec2, ["vec=2", "fp6_e2m3", "multiple of 4"], "fp6-vec2"),
    (too_wide, ["vec=32", "24 bytes", "at most 16"], "too-wide"),
    (three_fp4, ["vector of 3 fp4_e2m1", "whole bytes", "multiple of 2"], "three-fp4"),
    (slice_fp4, ["vector of 3 fp4_e2m1"], "slice-fp4"),
    (splat_int4, ["vector of 3 int4"], "splat-int4"),
    (odd_pointer_step, ["pointer arithmetic", "offset 1", "does not start a byte"], "odd-step"),
    (odd_smem, ["alloc_smem(uint4, 63)", "multiple of 2"], "odd-smem"),
    (fp6_nbytes, ["nbytes", "multiple of 3", "got 10"], "fp6-nbytes"),
    (bitcast_width, ["bitcast", "64 bits", "32 bits"], "bitcast-width"),
    (arith_on_fp4, ["storage type", "no arithmetic"], "arith-fp4"),
    (narrowing_store, ["does not convert implicitly", "opus.cast"], "narrow-store"),
    (rz_to_fp4, ["rounding='rz'", "fp4_e2m1"], "rz-fp4"),
]


@pytest.mark.parametrize("kernel,needles,tag", TRACE_CASES, ids=[c[2] for c in TRACE_CASES])
@pytest.mark.parametrize("target", ["sm_90a", "gfx950"])
def test_refused_while_tracing(kernel, needles, tag, target, cache_root):
    with no_new_cache_files(cache_root), raises(opus.TraceError, *needles, at=tag):
        kernel.source(target=target)


# -- run time: offsets that split a byte (the interpreter checks; unchecked on the GPU) -------

@opus.kernel
def runtime_offset(x: opus.Ptr[fp4], y: opus.Ptr[fp4], k: i32):
    opus.store(y, opus.load(x, k, vec=4), 0)  # ERR: rt-offset


@opus.kernel
def runtime_view_step(x: opus.Ptr[FP6], y: opus.Ptr[FP6], k: i32):
    g = opus.make_gmem(x, 32) + k  # ERR: rt-step
    opus.store(y, g.load(0, vec=4), 0)


@opus.kernel
def runtime_misaligned(x: opus.Ptr[fp4], y: opus.Ptr[fp4], k: i32):
    opus.store(y, opus.load(x, k, vec=8), 0)  # ERR: rt-align


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kernel,dtype,k,needles,tag", [
    (runtime_offset, fp4, 3, ["misaligned", "x[3]", "does not start a byte"], "rt-offset"),
    (runtime_offset, fp4, 59, ["misaligned", "x[59]", "does not start a byte"], "rt-offset"),
    (runtime_view_step, FP6, 2, ["pointer step of 2", "multiples of 4"], "rt-step"),
    (runtime_misaligned, fp4, 4, ["misaligned", "4-byte access is not 4-byte aligned"], "rt-align"),
], ids=["odd", "odd-near-end", "fp6-step", "byte-but-unaligned"])
def test_runtime_offsets_that_split_bytes_fault_in_the_interpreter(kernel, dtype, k, needles, tag,
                                                                   target):
    x = opus.pack(np.ones(64, np.float32), dtype)
    y = np.zeros_like(x)
    with unchanged(y), raises(MemoryFault, *needles, at=tag):
        launch(kernel, target, x, y, k)


# -- arguments: packed bytes only ---------------------------------------------------------------

@opus.kernel
def copy_fp4(x: opus.Ptr[fp4], y: opus.Ptr[fp4]):
    opus.store(y, opus.load(x, 0, vec=2), 0)


@opus.kernel
def copy_fp6(x: opus.Ptr[FP6], y: opus.Ptr[FP6]):
    opus.store(y, opus.load(x, 0, vec=4), 0)


@pytest.mark.parametrize("kernel,make_x,needles", [
    (copy_fp4, lambda: np.zeros(8, ml_dtypes.float4_e2m1fn),
     ["'x'", "float4_e2m1fn", "one element per byte", "opus.pack_fp4"]),
    (copy_fp4, lambda: np.zeros(8, np.float32), ["'x'", "uint8", "got an array of float32"]),
    (copy_fp4, lambda: np.zeros(8, np.int8), ["'x'", "got an array of int8"]),
    (copy_fp6, lambda: np.zeros(10, np.uint8), ["'x'", "10 bytes", "whole number of groups"]),
    (copy_fp6, lambda: np.zeros(4, ml_dtypes.float6_e2m3fn), ["'x'", "one element per byte"]),
    (copy_fp4, lambda: np.zeros(8, np.uint8)[::2], ["'x'", "C-contiguous"]),
    (copy_fp4, lambda: [0, 1], ["'x'", "numpy array", "list"]),
], ids=["ml-dtypes-fp4", "float32", "int8", "fp6-10-bytes", "ml-dtypes-fp6", "strided", "list"])
def test_interpreter_arguments(kernel, make_x, needles):
    y = np.zeros(6, np.uint8)
    with unchanged(y), raises(ArgumentError, *needles):
        launch(kernel, SM, make_x(), y)


class FakeCuda:
    """A device array seen only through __cuda_array_interface__ (never dereferenced)."""

    def __init__(self, shape, dtype):
        self.dtype = np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": self.dtype.str,
                                         "data": (4096, False), "strides": None, "version": 3}


@pytest.mark.parametrize("dtype,arg,needles", [
    (fp4, FakeCuda((8,), ml_dtypes.float4_e2m1fn), ["'x'", "one element per byte", "pack_fp4"]),
    (FP6, FakeCuda((10,), np.uint8), ["'x'", "10 bytes", "whole number of groups"]),
    (opus.int4, FakeCuda((4,), np.float16), ["'x'", "int4", "got an array of float16"]),
], ids=["cai-ml-dtypes-fp4", "cai-fp6-10-bytes", "cai-f16-for-int4"])
def test_gpu_argument_checks(dtype, arg, needles):
    from opus.runtime.tensor_args import device_pointer
    with raises(ArgumentError, *needles):
        device_pointer(arg, param="x", dtype=dtype)


# -- the host helpers -----------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,needles", [
    (lambda: opus.unpack_fp4(np.zeros(4, np.uint8), 9), ArgumentError, ["count=9", "4 bytes hold 8"]),
    (lambda: opus.unpack_fp6(np.zeros(4, np.uint8)), ArgumentError, ["4 bytes", "groups of 3"]),
    (lambda: opus.unpack_fp4(np.zeros(4, np.float32)), ArgumentError, ["uint8", "float32"]),
    (lambda: opus.unpack_fp4(np.zeros(4, ml_dtypes.float4_e2m1fn)), ArgumentError,
     ["unpacked already"]),
    (lambda: opus.pack_int4([3, 8]), ArgumentError, ["8 is outside int4's range -8..7"]),
    (lambda: opus.pack_uint4(np.array([-1, 2])), ArgumentError, ["-1", "uint4", "0..15"]),
    (lambda: opus.pack_int4([1.5]), ArgumentError, ["int4 takes integers", "float64"]),
    (lambda: opus.pack(np.zeros((2, 3)), fp4), ArgumentError, ["last axis holds 3", "groups of 2"]),
    (lambda: opus.pack(np.zeros(4), opus.f16), ArgumentError, ["sub-byte types", "opus.f16"]),
    (lambda: opus.pack_fp6(np.zeros(4), fp4), ArgumentError, ["fp6_e2m3 or opus.fp6_e3m2"]),
    (lambda: opus.pack(np.array(["a", "b"]), fp4), ArgumentError, ["cannot convert", "fp4_e2m1"]),
    (lambda: opus.torch_dtype(opus.fp8), ValueError, ["opus.fp8", "concrete"]),
    (lambda: opus.torch_dtype("f16"), TypeError, ["opus dtype", "'f16'"]),
    (lambda: opus.vector_type(opus.fp4, 3), ValueError, ["vector of 3 fp4_e2m1", "multiple of 2"]),
    (lambda: opus.vector_type(opus.f16, 1), ValueError, ["n >= 2", "scalar type"]),
    (lambda: opus.vector_type("f16", 4), TypeError, ["opus dtype", "'f16'"]),
    (lambda: opus.sizeof_bits(np.float32), TypeError, ["sizeof_bits", "opus dtype or vector type"]),
    (lambda: opus.fp4x3, AttributeError, ["fp4x3"]),
], ids=["unpack-count", "unpack-fp6-bytes", "unpack-float32", "unpack-unpacked", "int4-range",
        "uint4-negative", "int4-float", "pack-ragged-rows", "pack-f16", "pack-fp6-fp4",
        "pack-strings", "torch-flavoured", "torch-not-dtype", "vector-type-3-fp4",
        "vector-type-1-lane", "vector-type-not-dtype", "sizeof-numpy", "no-fp4x3"])
def test_host_helpers(call, exc, needles):
    with raises(exc, *needles):
        call()


# -- vector type names in kernels: constructors and declarations ---------------------------------

@opus.kernel
def wrong_lane_count(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    v = opus.f32x4(x[0], x[1], x[2])  # ERR: lane-count
    opus.store(y, v, 0)


@opus.kernel
def wrong_vector(x: opus.Ptr[f32], y: opus.Ptr[opus.f16]):
    v = opus.f16x4(opus.load(x, 0, vec=2))  # ERR: wrong-vector
    opus.store(y, v, 0)


@opus.kernel
def declared_lanes(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    v: opus.f32x4 = opus.load(x, 0, vec=2)  # ERR: declared-lanes
    opus.store(y, v, 0)


@opus.kernel
def declared_narrowing(x: opus.Ptr[f32], y: opus.Ptr[fp4]):
    v: opus.fp4x2 = opus.load(x, 0, vec=2)  # ERR: declared-narrow
    opus.store(y, v, 0)


@opus.kernel
def declared_scalar(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    v: opus.f32 = opus.load(x, 0, vec=2)  # ERR: declared-scalar
    y[0] = v


@pytest.mark.parametrize("kernel,needles,tag", [
    (wrong_lane_count, ["opus.f32x4", "4 lanes, got 3"], "lane-count"),
    (wrong_vector, ["opus.f16x4(f32x2)", "2 lanes", "vector of 4", "bitcast"], "wrong-vector"),
    (declared_lanes, ["declared opus.f32x4", "f32x2", "2 lanes, not 4"], "declared-lanes"),
    (declared_narrowing, ["declared opus.fp4_e2m1x2", "does not convert implicitly",
                          "opus.cast"], "declared-narrow"),
    (declared_scalar, ["f32x2 declared as the scalar type opus.f32"], "declared-scalar"),
], ids=["lane-count", "wrong-vector", "declared-lanes", "declared-narrow", "declared-scalar"])
def test_vector_names_misused_in_kernels(kernel, needles, tag):
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    with unchanged(y), raises(opus.TraceError, *needles, at=tag):
        launch(kernel, SM, x, y if kernel is not wrong_vector else np.zeros(4, np.float16))


@opus.kernel
def async_fp4(x: opus.Ptr[fp4], y: opus.Ptr[f32]):
    s = opus.alloc_smem(fp4, 64)
    opus.copy_async(s, 0, opus.make_gmem(x, 64), 0, vec=32)  # ERR: async-fp4
    y[0] = 0.0


@opus.kernel
def async_lds_int4(x: opus.Ptr[opus.int4], y: opus.Ptr[f32]):
    s = opus.alloc_smem(opus.int4, 256)
    opus.copy_async_lds(s, 0, opus.make_gmem(x, 256), 0, vec=8)  # ERR: lds-int4
    y[0] = 0.0


@pytest.mark.parametrize("kernel,target,tag", [(async_fp4, "sm_90a", "async-fp4"),
                                               (async_lds_int4, "gfx950", "lds-int4")],
                         ids=["cp-async-fp4", "lds-int4"])
def test_async_copies_refuse_sub_byte_types(kernel, target, tag, cache_root):
    with no_new_cache_files(cache_root), raises(opus.TraceError, "sub-byte types",
                                                "no async copies", at=tag):
        kernel.source(target=target)
