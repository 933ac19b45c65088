"""wgmma in SASS (NVRTC for sm_90a, cuobjdump): HGMMA (f16/bf16/tf32), QGMMA (fp8) and IGMMA
(int8) of the row's shape and types, A from a descriptor or from registers, the fence and
wait (WARPGROUP.ARRIVE, WARPGROUP.DEPBAR), setmaxnreg in the PTX; and the descriptors'
static bits in the generated source, worked by hand from the PTX ISA's Matrix Descriptor
Format for each swizzle mode."""
import pathlib
import re
import sys

import pytest

import opus
from opus import f16, bf16, f32, i8, u8, i32, fp8_e4m3 as e4m3, fp8_e5m2 as e5m2

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "lang"))
from wgmma_kernels import TF32, wg_gemm_for, memory_type, k_of  # noqa: E402

CASES = [  # A, B, C, A from, N, the SASS mnemonic
    (f16, f16, f32, "smem", 64, "HGMMA.64x64x16.F32 "),
    (f16, f16, f16, "regs", 32, "HGMMA.64x32x16.F16 "),
    (bf16, bf16, f32, "smem", 256, "HGMMA.64x256x16.F32.BF16 "),
    (e4m3, e5m2, f32, "smem", 64, "QGMMA.64x64x32.F32.E4M3.E5M2 "),
    (e5m2, e4m3, f16, "regs", 64, "QGMMA.64x64x32.F16.E5M2.E4M3 "),
    (i8, u8, i32, "smem", 48, "IGMMA.64x48x32.S8.U8 "),
    (u8, u8, i32, "regs", 64, "IGMMA.64x64x32.U8.U8 "),
] + ([(TF32, TF32, f32, "smem", 64, "HGMMA.64x64x8.F32.TF32 ")] if TF32 is not None else [])


def _sass(a, b, c, a_from, n):
    k = k_of(a)
    sw = lambda d: 2 * k * memory_type(d).itemsize
    return wg_gemm_for(memory_type(a), memory_type(b), c).sass(
        target="sm_90a", AT=a, BT=b, CT=c, N=n, KT=2 * k, A_FROM=a_from, SW_A=sw(a), SW_B=sw(b))


@pytest.mark.parametrize("a,b,c,a_from,n,mnemonic", CASES,
                         ids=[f"{x[0].name}x{x[1].name}-{x[2].name}-{x[3]}-n{x[4]}" for x in CASES])
def test_sass_has_the_gmma(a, b, c, a_from, n, mnemonic):
    lines = [l for l in _sass(a, b, c, a_from, n).splitlines() if "GMMA" in l]
    assert len(lines) == 2, lines  # two k-steps
    assert all(mnemonic in l for l in lines), lines
    # A from registers: a register operand before the descriptor (one gdesc holds both A's and
    # B's descriptors in the shared-memory form)
    assert all(bool(re.search(r"R\d+, R\d+, gdesc", l)) == (a_from == "regs") for l in lines), lines


def test_fence_and_wait_in_sass():
    s = _sass(f16, f16, f32, "smem", 64)
    assert "WARPGROUP.ARRIVE" in s and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in s


@pytest.mark.parametrize("sw,desc", [
    (128, 0x4000_0040_0001_0000),  # SBO 8 rows x 128 B = 1024 -> 64; LBO unused -> 1; mode 1
    (64, 0x8000_0020_0001_0000),   # SBO 512 -> 32; mode 2
    (32, 0xC000_0010_0001_0000),   # SBO 256 -> 16; mode 3
    (0, 0x0000_0010_0008_0000),    # interleaved: LBO 128 B -> 8, SBO 256 B -> 16; mode 0
])
def test_descriptor_bits_in_the_source(sw, desc):
    """f16 64 x 16 operands, K-major: the static part of the descriptor the C code ORs with the
    start address is the hand-packed value (the tile layouts are wgmma_kernels.tile_layout)."""
    src = wg_gemm_for(f16, f16, f32).source(target="sm_90a", AT=f16, BT=f16, CT=f32, N=64, KT=16,
                                            SW_A=sw, SW_B=sw)
    assert src.count(f"0x{desc:016x}ull") == 2  # A and B


@opus.kernel(block=256)
def warp_specialized(out: opus.Ptr[i32]):
    if opus.warp_id() < 4:
        opus.setmaxnreg_dec(40)
    else:
        opus.setmaxnreg_inc(232)
    out[opus.thread_id_x()] = opus.warp_id()


def test_setmaxnreg_in_ptx():
    """setmaxnreg reaches ptxas as PTX (SASS USETMAXREG appears only in kernels ptxas
    register-allocates for it: here it drops the instructions as having no effect)."""
    p = warp_specialized.ptx(target="sm_90a")
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in p and "setmaxnreg.inc.sync.aligned.u32 232;" in p
