"""One check of "this must be shared memory" (lang/memory.py _shared_pointer) serves make_smem,
the async copies, ldmatrix/stmatrix/ds_read_tr, wgmma and TMA: each refuses global memory with
the same form of message (its own verb, the same list of what it takes, the caller's hint), and
refuses a bounded view only where the instruction cannot honour the bound."""
import pytest

import opus
from opus import f16, f32

TAKES = "(a view from opus.alloc_smem or opus.dynamic_smem, or its .ptr)"


@opus.kernel(block=32)
def _smem_of_global(x: opus.Ptr[f16]):
    opus.make_smem(x, 16)


@opus.kernel(block=32)
def _copy_to_global(x: opus.Ptr[f16], y: opus.Ptr[f16]):
    opus.copy_async(y, 0, x, 0, vec=8)


@opus.kernel(block=32)
def _ldmatrix_of_global(x: opus.Ptr[f16], o: opus.Ptr[f16]):
    o[opus.lane_id()] = opus.ldmatrix(x, opus.lane_id() * 8)[0]


@opus.kernel(block=32)
def _tma_into_global(a: opus.TensorMap, g: opus.Ptr[f32]):
    a.declare(f32, (8, 16))
    opus.tma_load(a, g, (0, 0), opus.alloc_mbarriers(1)[0])


@pytest.mark.parametrize("kernel,verb,hint", [
    (_smem_of_global, "make_smem needs shared memory", "viewed with opus.make_gmem"),
    (_copy_to_global, "copy_async needs a shared-memory destination",
     "cannot be the destination"),
    (_ldmatrix_of_global, "ldmatrix reads and writes shared memory only", "make_gmem"),
    (_tma_into_global, "tma_load needs shared memory", "between a tensor map's tensor and shared"),
], ids=["make_smem", "copy_async", "ldmatrix", "tma_load"])
def test_global_memory_refused_in_one_form(kernel, verb, hint):
    with pytest.raises(opus.TraceError) as e:
        kernel.source(target="sm_90a")
    msg = str(e.value)
    assert verb in msg and TAKES in msg and "a global pointer to" in msg and hint in msg, msg


@opus.kernel(block=32)
def _ldmatrix_bounded(o: opus.Ptr[f16]):
    s = opus.make_smem(opus.alloc_smem(f16, 256), 200)
    o[opus.lane_id()] = opus.ldmatrix(s, opus.lane_id() * 8)[0]


@opus.kernel(block=32)
def _copy_bounded(x: opus.Ptr[f16]):
    s = opus.make_smem(opus.alloc_smem(f16, 256), 200)
    opus.copy_async(s, 0, x, 0, vec=8)


@pytest.mark.parametrize("kernel,role,why", [
    (_ldmatrix_bounded, "the smem view has a bound", "no bounds check on the hardware"),
    (_copy_bounded, "the destination view has a bound", "no bound can cut"),
], ids=["ldmatrix", "copy_async"])
def test_bounded_view_refused_where_unchecked(kernel, role, why):
    with pytest.raises(opus.TraceError) as e:
        kernel.source(target="sm_90a")
    msg = str(e.value)
    assert role in msg and why in msg and "pass an unbounded view" in msg, msg


@opus.kernel(block=32)
def _tma_into_bounded(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.make_smem(opus.alloc_smem(f32, 128, align=128), 128)
    opus.tma_load(a, tile, (0, 0), opus.alloc_mbarriers(1)[0])


def test_tma_takes_a_bounded_view():
    # a TMA box is clipped by the tensor map, never by the view: the bound is not refused
    assert "cp.async.bulk.tensor" in _tma_into_bounded.source(target="sm_90a")
