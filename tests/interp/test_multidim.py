"""Multi-dimensional launches: thread_id_y/z, block_id_y/z and the block and grid sizes in y and
z, in the interpreter (as NVIDIA and AMD chips), each thread's linear id and indices against
numpy's meshgrid of the grid; and that the kernel renders each axis to its own builtin and
compiles for sm_90a and gfx942. The GPU twin is tests/test_gpu_gaps.py."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opus  # noqa: E402
import gap_kernels as GK  # noqa: E402


def test_the_reference_numbers_every_thread_once():
    # the meshgrid reference is a permutation of 0..threads-1 (so each thread has its own slot)
    for grid, block in GK.LAUNCHES:
        lin, packed = GK.linear_ids_reference(grid, block)
        n = int(np.prod(grid)) * int(np.prod(block))
        assert sorted(lin.ravel().tolist()) == list(range(n))
        assert len(set(packed.ravel().tolist())) == n
    # one thread worked out by hand: grid (3, 2, 4), block (4, 3, 2), global (x, y, z) = (5, 4, 3)
    # is thread (1, 1, 1) of block (1, 1, 1): block 1 + 3 * (1 + 2 * 1) = 10, thread 1 + 4 * (1 + 3)
    lin, packed = GK.linear_ids_reference((3, 2, 4), (4, 3, 2))
    assert lin[3, 4, 5] == 10 * 24 + 17
    assert packed[3, 4, 5] == 1 + 16 + 256 + 4096 + 65536 + 1048576


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("grid,block", GK.LAUNCHES)
def test_each_thread_knows_its_six_indices_and_the_sizes(target, grid, block):
    shape = tuple(g * b for g, b in zip(grid[::-1], block[::-1]))
    out, packed = np.full(shape, -1, np.int32), np.full(shape, -1, np.int32)
    with opus.set_target(target, interpret=True):
        GK.linear_ids[grid, block](out, packed)
    want_lin, want_packed = GK.linear_ids_reference(grid, block)
    np.testing.assert_array_equal(packed, want_packed)
    np.testing.assert_array_equal(out, want_lin)


CUDA_AXES = ["threadIdx.{}", "blockIdx.{}", "blockDim.{}", "gridDim.{}"]
HIP_AXES = ["__builtin_amdgcn_workitem_id_{}()", "__builtin_amdgcn_workgroup_id_{}()",
            "__builtin_amdgcn_workgroup_size_{}()", "__builtin_amdgcn_grid_size_{}()"]


@pytest.mark.parametrize("target,axes", [("sm_90a", CUDA_AXES), ("gfx942", HIP_AXES)])
def test_each_axis_renders_to_its_own_builtin_and_compiles(target, axes, request):
    spec = GK.linear_ids.specialize(target=target)
    source = GK.linear_ids.source(target=target)
    for a in "xyz":
        for builtin in axes:
            if builtin.startswith(("gridDim", "__builtin_amdgcn_grid")) and a == "z":
                continue  # the kernel reads no grid size in z
            assert builtin.format(a) in source, (builtin.format(a), source)
    if target.startswith("gfx"):   # rendered above without it; compiling needs clang
        request.getfixturevalue("requires_amd_compiler")
    assert len(spec.compiled.binary) > 0
