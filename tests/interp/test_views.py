"""Bounded views shifted with ``g + k``: the bound counts from the view's own start (ir/ops.py
'load'), in the interpreter as on the GPU (tests/test_gpu_views_threads.py runs the same
kernels there). Expected values are worked out by hand from x = 1..16."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opus  # noqa: E402
import view_kernels as VK  # noqa: E402


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


X = np.arange(1, 17, dtype=np.float32)  # x[k] = k + 1


def test_shifted_view_loads_from_its_own_start():
    # the case: n = 16, base = 4, thread i reads g[i]: x[4..15] then 4 zeros
    out = np.full(16, -1, np.float32)
    VK.shifted_load[1, 16](X, out, 16, 4, 0)
    assert out.tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0]


def test_shifted_view_negative_offsets_read_zero():
    # g = view(x, 16) + 4; thread i reads g[i - 2]: offsets -2, -1 are before the view's start
    # (x[2], x[3] exist, but the view does not reach them); offsets 12, 13 are past its end
    out = np.full(16, -1, np.float32)
    VK.shifted_load[1, 16](X, out, 16, 4, -2)
    assert out.tolist() == [0, 0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0]


def test_shifted_view_stores_land_inside_its_window():
    # h = view(y, 16) + 4; thread i writes h[i] = x[i]: y[4 + i] for i < 12, the rest dropped
    y = np.full(16, -1, np.float32)
    VK.shifted_store[1, 16](X, y, 16, 4)
    assert y.tolist() == [-1, -1, -1, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_shifted_view_vector_loads():
    # n = 14, base = 4: the view holds x[4..13] (10 elements); thread t reads 4 at 4t
    out = np.full(16, -1, np.float32)
    VK.shifted_load_vec4[1, 4](X, out, 14, 4)
    assert out.tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 0, 0, 0, 0, 0]


def test_shifted_view_vector_stores():
    # n = 14, base = 4: thread t writes x[4t .. 4t+3] at h[4t]; only h[0..9] = y[4..13] exist
    y = np.full(16, -1, np.float32)
    VK.shifted_store_vec4[1, 4](X, y, 14, 4)
    assert y.tolist() == [-1, -1, -1, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1, -1]


def test_view_shifted_twice_and_past_its_end():
    # (view(x, 16) + 4) + 6 holds x[10..15]; shifted by 20 it holds nothing (bound -4)
    out = np.full(16, -1, np.float32)
    VK.shifted_twice[1, 16](X, out, 16, 4, 6)
    assert out.tolist() == [11, 12, 13, 14, 15, 16] + [0] * 10
    out[:] = -1
    VK.shifted_twice[1, 16](X, out, 16, 4, 16)
    assert out.tolist() == [0] * 16


def test_shifted_smem_view():
    # shared memory too: s = alloc_smem(16) filled with x; (make_smem(s, 16) + 4)[i]
    out = np.full(16, -1, np.float32)
    VK.shifted_smem[1, 16](X, out, 4)
    assert out.tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0]


def test_renderers_bound_the_shifted_pointer():
    # CUDA and HIP apply the rule the interpreter follows: the access goes through the shifted
    # pointer and compares the offset with the shrunk bound (HIP: a buffer resource based at
    # the shifted pointer, num_records from the shrunk bound)
    import re
    for target in ("sm_90a", "gfx942"):
        src = VK.shifted_load.source(target=target)
        ptr = re.search(r"float\* (\w+) = \(p_x_\w+ \+ p_base_\w+\);", src).group(1)
        bound = re.search(r"int (\w+) = \(int\)\(\(unsigned\)p_n_\w+ - \(unsigned\)p_base_\w+\);",
                          src).group(1)
        if target == "sm_90a":
            assert re.search(rf"\((\w+)\) >= 0 && \(\1\) < {bound} \? {ptr}\[\1\]", src), src
        else:
            assert (f"__builtin_amdgcn_make_buffer_rsrc((void*){ptr}, (short)0, "
                    f"(int)opus_nrec((long long){bound}, 4u)") in src, src
