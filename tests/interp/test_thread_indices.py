"""Thread, block and grid indices in multi-dimensional launches, against values worked out by
hand: num_blocks_* count blocks (CUDA gridDim), grid_size_* count threads (the original opus's
grid size: gridDim * blockDim)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opus  # noqa: E402
import view_kernels as VK  # noqa: E402


def expected_indices(grid, block):
    """Rows of (thread xyz, block xyz, block size xyz, blocks xyz, grid threads xyz), in the
    order grid_indices writes them (linear thread index in the grid, x fastest)."""
    rows = []
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            rows.append([tx, ty, tz, bx, by, bz, *block, *grid,
                                         grid[0] * block[0], grid[1] * block[1],
                                         grid[2] * block[2]])
    return rows


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("grid,block", [((2, 3, 4), (5, 3, 2)), ((3, 1, 1), (64, 1, 1)),
                                        ((1, 2, 1), (1, 1, 7))])
def test_indices_in_3d_launches(target, grid, block):
    n = 15 * int(np.prod(grid)) * int(np.prod(block))
    out = np.full(n, -1, np.int32)
    with opus.set_target(target, interpret=True):
        VK.grid_indices[grid, block](out)
    assert out.reshape(-1, 15).tolist() == expected_indices(grid, block)


def test_grid_stride_loop_visits_each_element_once():
    # grid (3, 2) of blocks (4, 2): 12 x 4 threads; thread (i, j) starts at k0 = 12 j + i and
    # steps by 48, so element k is written by the thread with k0 = k % 48, and by no other
    n = 100
    y = np.full(n, -1, np.int32)
    with opus.set_target("sm_90a", interpret=True):
        VK.grid_stride_fill[(3, 2), (4, 2)](y, n)
    assert y.tolist() == [k % 48 for k in range(n)]


def test_rendered_sources():
    # CUDA multiplies gridDim by blockDim; AMD's grid size is already in threads (no division
    # followed by a multiplication), and the block count is the implicit kernel argument
    # hidden_block_count (code object v5), not a division of the grid size by the block size
    cuda = VK.grid_indices.source(target="sm_90a")
    for a in "xyz":
        assert f"(int)(gridDim.{a} * blockDim.{a})" in cuda
        assert f"(int)gridDim.{a};" in cuda
    for target in ("gfx942", "gfx950"):
        hip = VK.grid_indices.source(target=target)
        for a in "xyz":
            assert f"(int)__builtin_amdgcn_grid_size_{a}();" in hip
            assert (f"(int)((const unsigned*)__builtin_amdgcn_implicitarg_ptr())"
                    f"[{'xyz'.index(a)}]") in hip
            assert f"__builtin_amdgcn_grid_size_{a}() / " not in hip
            assert f"__builtin_amdgcn_grid_size_{a}() * " not in hip
