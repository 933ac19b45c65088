import ml_dtypes
import numpy as np
import pytest

from opus import dtypes as dt
from opus.errors import ArgumentError
from opus.runtime.tensor_args import device_pointer, is_contiguous, stream_of

FAKE_PTR = 0x7F0000001000  # never dereferenced


class FakeCudaArray:
    """A numpy array dressed up as GPU memory through __cuda_array_interface__."""

    def __init__(self, host, ptr=FAKE_PTR, strides=None, expose_dtype=True):
        self._host, self._ptr, self._strides = host, ptr, strides
        if expose_dtype:
            self.dtype = host.dtype

    @property
    def __cuda_array_interface__(self):
        return {"shape": self._host.shape, "typestr": self._host.dtype.str,
                "data": (self._ptr, False), "strides": self._strides, "version": 3}


class FakeNoDtype(FakeCudaArray):
    """Only the interface dict: ml_dtypes types arrive as bare 'V' typestrs."""

    def __init__(self, host, **kw):
        super().__init__(host, expose_dtype=False, **kw)


NUMERIC = [dt.bool_, dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.u16, dt.u32, dt.u64,
           dt.f16, dt.bf16, dt.f32, dt.f64, dt.fp8_e4m3, dt.fp8_e4m3fnuz, dt.fp8_e5m2,
           dt.fp8_e5m2fnuz, dt.e8m0]


@pytest.mark.parametrize("opus_dtype", NUMERIC, ids=lambda d: d.name)
def test_cai_dtype_mapping(opus_dtype):
    arr = FakeCudaArray(np.zeros(4, opus_dtype.np_dtype))
    assert device_pointer(arr, param="x", dtype=opus_dtype) == FAKE_PTR


def test_cai_wrong_dtype_names_parameter():
    arr = FakeCudaArray(np.zeros(4, np.float32))
    with pytest.raises(ArgumentError, match=r"parameter 'x' expects f16 but got .*f32"):
        device_pointer(arr, param="x", dtype=dt.f16)
    with pytest.raises(TypeError):  # ArgumentError is a TypeError too
        device_pointer(arr, param="x", dtype=dt.i32)


def test_cai_ml_dtypes_by_dtype_attribute_are_exact():
    arr = FakeCudaArray(np.zeros(4, ml_dtypes.float8_e5m2))
    assert device_pointer(arr, param="w", dtype=dt.fp8_e5m2) == FAKE_PTR
    with pytest.raises(ArgumentError, match="parameter 'w' expects fp8_e4m3 but got .*fp8_e5m2"):
        device_pointer(arr, param="w", dtype=dt.fp8_e4m3)


def test_cai_bare_void_typestr_matches_by_width():
    bf = FakeNoDtype(np.zeros(4, ml_dtypes.bfloat16))
    assert bf.__cuda_array_interface__["typestr"] == "<V2"
    assert device_pointer(bf, param="a", dtype=dt.bf16) == FAKE_PTR
    with pytest.raises(ArgumentError, match="parameter 'a' expects fp8_e4m3"):
        device_pointer(bf, param="a", dtype=dt.fp8_e4m3)  # width differs
    with pytest.raises(ArgumentError, match="parameter 'a' expects f16"):
        device_pointer(bf, param="a", dtype=dt.f16)  # '<f2' is not a V type
    fp8 = FakeNoDtype(np.zeros(4, ml_dtypes.float8_e4m3fn))
    assert device_pointer(fp8, param="b", dtype=dt.fp8_e4m3) == FAKE_PTR
    assert device_pointer(FakeNoDtype(np.zeros(4, np.float16)), param="c", dtype=dt.f16) == FAKE_PTR


def test_dtype_none_skips_check():
    assert device_pointer(FakeCudaArray(np.zeros(2, np.int8)), param="p", dtype=None) == FAKE_PTR


def test_raw_int_and_none():
    assert device_pointer(0x1234, param="p", dtype=dt.f32) == 0x1234
    with pytest.raises(ArgumentError, match="parameter 'p' got None"):
        device_pointer(None, param="p", dtype=dt.f32)
    with pytest.raises(ArgumentError, match="parameter 'p' got a builtins.bool"):
        device_pointer(True, param="p", dtype=dt.f32)
    with pytest.raises(ArgumentError, match="parameter 'q' got a builtins.str"):
        device_pointer("hello", param="q", dtype=dt.f32)


def test_numpy_array_is_on_cpu_via_dlpack():
    host = np.zeros(4, np.float32)
    with pytest.raises(ArgumentError) as info:
        device_pointer(host, param="out", dtype=dt.f32)
    msg = str(info.value)
    assert "parameter 'out' is on cpu" in msg
    assert "opus needs CUDA memory on the GPU (or run in the interpreter)" in msg


class PretendCudaDLPack:
    """numpy's own DLPack capsule, with the device reported as CUDA, to test capsule reading."""

    def __init__(self, host):
        self.host = host

    def __dlpack__(self, stream=None):
        return self.host.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.parametrize("np_dtype,opus_dtype", [
    (np.float32, dt.f32), (np.float16, dt.f16), (np.int64, dt.i64), (np.uint8, dt.u8),
    (np.bool_, dt.bool_)])
def test_dlpack_capsule_is_read(np_dtype, opus_dtype):
    host = np.arange(8).astype(np_dtype)
    obj = PretendCudaDLPack(host)
    assert device_pointer(obj, param="x", dtype=opus_dtype) == host.ctypes.data
    view = PretendCudaDLPack(host[2:])
    assert device_pointer(view, param="x", dtype=opus_dtype) == host[2:].ctypes.data


def test_dlpack_wrong_dtype():
    obj = PretendCudaDLPack(np.zeros(4, np.float64))
    with pytest.raises(ArgumentError, match=r"parameter 'y' expects f32 but got .* of f64"):
        device_pointer(obj, param="y", dtype=dt.f32)


def test_is_contiguous():
    host = np.zeros((4, 6), np.float32)
    assert is_contiguous(FakeCudaArray(host))
    assert is_contiguous(FakeCudaArray(host, strides=(24, 4)))
    assert not is_contiguous(FakeCudaArray(host, strides=(4, 16)))  # transposed
    assert is_contiguous(PretendCudaDLPack(host))
    assert not is_contiguous(PretendCudaDLPack(host[:, ::2]))
    assert is_contiguous(0xABC)
    assert is_contiguous(host) and not is_contiguous(host.T)
    # non-contiguous arrays are still accepted: the pointer is the base
    assert device_pointer(FakeCudaArray(host, strides=(4, 16)), param="x", dtype=dt.f32) == FAKE_PTR


def test_stream_of_without_torch():
    assert stream_of([FakeCudaArray(np.zeros(1, np.float32)), 5, None]) is None
    assert stream_of([]) is None


def test_torch_cpu_tensor_errors():
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, dtype=torch.float32)
    with pytest.raises(ArgumentError, match="parameter 'x' is on cpu"):
        device_pointer(t, param="x", dtype=dt.f32)
    assert stream_of([t]) is None
