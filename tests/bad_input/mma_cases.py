"""The make_mma kernel and the 'combination the chip lacks' check shared by the matrix-atom
bad-input files (test_mfma.py, test_mma_sync.py). The kernel's line is tagged here, so a case
asks for it with ``raises(..., at="make", file=MAKE_FILE)``."""
import opus
from opus import f32
from expect import raises

__all__ = ["MAKE_FILE", "make_kernel", "no_row"]

MAKE_FILE = __file__


@opus.kernel(block=64)
def make_kernel(out: opus.Ptr[f32], A: opus.constexpr, B: opus.constexpr, C: opus.constexpr,
                S: opus.constexpr):
    opus.make_mma(A, B, C, S)  # ERR: make


def no_row(arch, a, b, c, shape, *needles):
    """make_mma(a, b, c, shape) on ``arch`` fails at the kernel's line, naming the types and
    shape given, the chip and the list of what it has (and every needle)."""
    with raises(opus.TraceError, "no matrix instruction", f"on {arch}", "available:", *needles,
                at="make", file=MAKE_FILE):
        make_kernel.source(target=arch, A=a, B=b, C=c, S=shape)
