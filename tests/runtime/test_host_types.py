"""The host side of the element types (opus.host_types): packing sub-byte arrays against a
packer written here from ir/ops.py's rule, torch's dtypes (where torch is installed), and the
GPU argument checks accepting packed bytes."""
import ml_dtypes
import numpy as np
import pytest

import opus

PACKED = [opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2, opus.int4, opus.uint4]


def ref_pack_row(codes, bits):
    stream = sum((int(c) & ((1 << bits) - 1)) << (i * bits) for i, c in enumerate(codes))
    return list(stream.to_bytes(-(-len(codes) * bits // 8), "little"))


@pytest.mark.parametrize("t", PACKED, ids=lambda t: t.name)
def test_pack_and_unpack_every_code_by_the_rule(t):
    codes = np.random.default_rng(t.bits).integers(0, 1 << t.bits, (3, 4 * t.pack_elems),
                                                  dtype=np.uint8)
    values = codes.view(t.np_dtype)  # ml_dtypes arrays are taken as they are
    packed = opus.pack(values, t)
    assert packed.dtype == np.uint8 and packed.shape == (3, 4 * t.nbytes(t.pack_elems))
    assert packed.tolist() == [ref_pack_row(row, t.bits) for row in codes]
    back = opus.unpack(packed, t)
    assert back.dtype == t.np_dtype and back.view(np.uint8).tolist() == codes.tolist()
    # numbers convert: floats to nearest even (as ml_dtypes), integers exactly
    nums = values.astype(np.float32) if t.is_float else values.astype(np.int64)
    assert opus.pack(nums, t).tolist() == packed.tolist()


def test_one_dimensional_tails_are_padded_and_counted():
    x = np.float32([1.0, -2.0, 6.0, 0.5, 3.0])
    b = opus.pack_fp4(x)
    assert b.tolist() == [0x2 | 0xC << 4, 0x7 | 0x1 << 4, 0x5]  # 1, -2 | 6, 0.5 | 3, pad 0
    assert opus.unpack_fp4(b, 5).astype(np.float32).tolist() == x.tolist()
    assert opus.unpack_fp4(b).shape == (6,)
    six = opus.pack_fp6([7.5, -1.0, 0.125, 2.0, 1.0], opus.fp6_e2m3)
    assert six.shape == (6,)  # 5 elements: two groups of four in three bytes each
    assert opus.unpack_fp6(six, count=5).astype(np.float32).tolist() == [7.5, -1.0, 0.125, 2.0, 1.0]
    assert opus.pack_int4([-8, 7, -1]).tolist() == [0x8 | 0x7 << 4, 0xF]
    assert opus.unpack_int4(np.uint8([0x8F]), 2).astype(int).tolist() == [-1, -8]
    assert opus.pack_uint4([15, 0, 9, 1]).tolist() == [0x0F, 0x19]


def test_packed_bytes_are_what_device_arguments_take():
    from opus.runtime.tensor_args import device_pointer

    class FakeCuda:
        def __init__(self, n, dtype):
            self.dtype = np.dtype(dtype)
            self.__cuda_array_interface__ = {"shape": (n,), "typestr": self.dtype.str,
                                             "data": (8192, False), "strides": None, "version": 3}
    for t, n in [(opus.fp4, 7), (opus.fp6_e3m2, 9), (opus.uint4, 1)]:
        assert device_pointer(FakeCuda(n, np.uint8), param="x", dtype=t) == 8192
    assert device_pointer(FakeCuda(4, ml_dtypes.float8_e4m3fn), param="x",
                          dtype=opus.fp8_e4m3) == 8192


def _torch():
    """torch, or a clean skip where it is not installed (opus never needs it)."""
    return pytest.importorskip("torch")


def test_torch_dtypes_where_torch_has_them():
    torch = _torch()
    want = {opus.f16: "float16", opus.bf16: "bfloat16", opus.f32: "float32", opus.i8: "int8",
            opus.u8: "uint8", opus.bool_: "bool", opus.fp8_e4m3: "float8_e4m3fn",
            opus.fp8_e5m2: "float8_e5m2", opus.fp8_e4m3fnuz: "float8_e4m3fnuz",
            opus.fp8_e5m2fnuz: "float8_e5m2fnuz", opus.e8m0: "float8_e8m0fnu",
            opus.fp4: "float4_e2m1fn_x2"}
    for d, name in want.items():
        assert opus.torch_dtype(d) is getattr(torch, name, None), d
    for d in (opus.int4, opus.uint4, opus.fp6_e2m3, opus.fp6_e3m2):
        assert opus.torch_dtype(d) is None


@pytest.mark.gpu
def test_torch_packed_tensors_are_fp4_arguments(requires_gpu):
    torch = _torch()
    import ml_dtypes as md
    vals = np.random.default_rng(1).integers(0, 16, 256, dtype=np.uint8)
    packed = opus.pack(vals.view(md.float4_e2m1fn), opus.fp4)

    @opus.kernel
    def double(x: opus.Ptr[opus.fp4], y: opus.Ptr[opus.fp4]):
        i = opus.thread_id_x() * 8
        opus.store(y, opus.cast(opus.cast(opus.load(x, i, vec=8), opus.f32) * 2.0, opus.fp4), i)
    want = opus.pack((vals.view(md.float4_e2m1fn).astype(np.float32) * 2).astype(md.float4_e2m1fn),
                     opus.fp4)
    x = torch.from_numpy(packed).cuda()
    y = torch.zeros_like(x)
    double[1, 32](x, y)
    assert y.cpu().numpy().tolist() == want.tolist()
    if hasattr(torch, "float4_e2m1fn_x2"):
        y2 = torch.zeros_like(x).view(torch.float4_e2m1fn_x2)
        double[1, 32](x.view(torch.float4_e2m1fn_x2), y2)
        assert y2.view(torch.uint8).cpu().numpy().tolist() == want.tolist()
    with pytest.raises(opus.ArgumentError, match="packed bytes"):
        double[1, 32](torch.zeros(256, device="cuda"), y)
