"""load_if / store_if on a bounded view with a per-lane predicate keep the view's bound (a
false access's offset moves past it): values against numpy in the interpreter, and on AMD one
buffer instruction per access with the resource in scalar registers, where a per-lane bound
made clang loop over the lanes' distinct resources (v_readfirstlane + s_and_saveexec)."""
import numpy as np
import pytest

import opus
from opus import f32, i32


@opus.kernel(block=64)
def _masked_copy(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32, keep: i32, step: i32):
    gx, gy = opus.make_gmem(x, n), opus.make_gmem(y, n)
    t = opus.thread_id_x()
    v = gx.load_if(t % 4 < keep, t * 4, vec=4, soffset=step)
    gy.store_if(t % 2 == 0, v, t * 4, vec=4)


@pytest.mark.parametrize("target", ["gfx942", "sm_90a"])
def test_values(target):
    n = 64 * 4 + 8
    x = np.arange(n, dtype=np.float32) + 1
    y = np.full(n, -1, np.float32)
    with opus.set_target(target, interpret=True):
        _masked_copy[1, 64](x, y, n, 3, 8)
    want = np.full(n, -1, np.float32)
    for t in range(0, 64, 2):                       # even lanes store
        src = x[t * 4 + 8:t * 4 + 12] if t % 4 < 3 else np.zeros(4, np.float32)
        if len(src) < 4:                            # past the bound: zeros
            src = np.concatenate([src, np.zeros(4 - len(src), np.float32)])
        want[t * 4:t * 4 + 4] = src
    np.testing.assert_array_equal(y, want)


def test_amdgcn_keeps_the_resource_uniform():
    asm = _masked_copy.asm(target="gfx942")
    assert "s_and_saveexec_b64" not in asm and "v_readfirstlane" not in asm, asm
    assert asm.count("buffer_load_dwordx4") == 1 and asm.count("buffer_store_dwordx4") == 1
