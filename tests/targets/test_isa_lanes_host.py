"""The MFMA lowering's operand order against the ISA, without an AMD GPU.

The ISA defines v_mfma as D = A * B + C with A in src0, B in src1 and C in src2 (CDNA3 ISA
Reference Guide, chapter 7; the AMD Matrix Instruction Calculator prints "A matrix source
field: Src0, B matrix source field: Src1, C matrix source field: Src2"). The host shim of the
builtins (tests/hostexec/shim/mfma.h) is generated from that definition and the lane tables
transcribed from the AMD documents (isa_lanes.py), never from opus' code. Here a GEMM in the
demo's form (opus.examples' mma_gemm, with the row's own A, B and C types), built with each MFMA
row of gfx942 and gfx950, is rendered to HIP, compiled for the host and run over whole waves
(tests/hostexec): D must be numpy's A @ B. A and B swapped in the builtin call computes each
tile's transpose (the data makes every tile differ from it); a STEP_K row whose halves went to
the wrong instruction would multiply A's K slices with B's other ones.
"""
import ml_dtypes  # noqa: F401  (bf16 operands)
import numpy as np
import pytest

from opus.targets import get_target

from hostexec import HostProgram, Launch
from isa_lanes import operand_values

ARCHS = ("gfx942", "gfx950")
M, N, K = 64, 32, 128  # every row's m, n and k divide these; M != N


def gemm_for(atom):
    """D (M x N) = A (M x K) @ B (K x N) with one row: one wave per m x n tile of D, a K loop
    carrying the accumulator (opus.examples' mma_gemm, with the row's A, B and C types)."""
    from opus.examples import _mma_gemm_for
    return _mma_gemm_for(atom.a, atom.shape, atom.b, atom.c)


def gemm_launches(arch, program, rng):
    """(atom, a, b, d, Launch) for every MFMA row of ``arch``: the GEMM with that row."""
    out = []
    for atom in get_target(arch).matrix_atoms():
        kernel = program.add(gemm_for(atom).specialize(target=arch))
        a = operand_values(atom.a, rng, (M, K))
        b = operand_values(atom.b, rng, (K, N))
        d = np.full((M, N), -1, atom.c.np_dtype)
        waves = (M // atom.m) * (N // atom.n)
        out.append((atom, a, b, d, Launch(kernel, waves, get_target(arch).warp_size, [a, b, d, M, N, K])))
    return out


def tiles(x, m, n):
    return [x[i:i + m, j:j + n] for i in range(0, M, m) for j in range(0, N, n)]


@pytest.mark.parametrize("arch", ARCHS)
def test_mfma_gemm_executed_on_the_host_is_a_times_b(arch, tmp_path):
    program = HostProgram(arch)
    runs = gemm_launches(arch, program, np.random.default_rng(5))
    program.build(tmp_path)
    program.run([launch for *_, launch in runs])
    for atom, a, b, d, _ in runs:
        want = a.astype(np.float64) @ b.astype(np.float64)  # exact: the inputs are (operand_values)
        # the data tells A @ B from what a swapped call computes (each tile transposed)
        assert all(not np.allclose(t, t.T, atol=1e-3) for t in tiles(want, atom.m, atom.n))
        np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{arch} {atom.name} ({atom.lowering['hip'].builtin})")
