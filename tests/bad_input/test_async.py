"""Bad input to async copies and their waits: the copy a chip lacks (cp.async on AMD,
buffer_load ... lds on NVIDIA), sizes each chip has (naming the chip and its sizes), cache
operators, destinations that are not shared memory, mismatched operands, waits with bad counts
or on the wrong target, AMD waits whose group sizes are not static, and at run time misaligned,
out-of-bounds and non-uniform copies. Each case checks the error type, that the message names
the problem, and the kernel line (``# ERR: <tag>``); a launch that faults writes nothing."""
import numpy as np
import pytest

import opus
from opus import f16, f32, f64, i32, u8
from opus.interp import InterpError, MemoryFault
from expect import raises, unchanged


def trace(k, target="sm_90a", **constexprs):
    return k.source(target=target, **constexprs)


# -- the copy a chip does not have ----------------------------------------------------------------

@opus.kernel
def _cp_async(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 256)
    opus.copy_async(tile, 4 * opus.thread_id_x(), x, 4 * opus.thread_id_x(), vec=4)  # ERR: cp-amd


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_cp_async_on_amd_points_to_copy_async_lds(arch):
    with raises(opus.TraceError, f"not available on {arch}", "opus.copy_async_lds",
                "wave-uniform", at="cp-amd"):
        trace(_cp_async, arch)


@opus.kernel
def _lds(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 256)
    opus.copy_async_lds(tile, 0, x, opus.thread_id_x())  # ERR: lds-nv


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_lds_copy_on_nvidia_points_to_copy_async(arch):
    with raises(opus.TraceError, f"not available on {arch}", "opus.copy_async (cp.async)",
                at="lds-nv"):
        trace(_lds, arch)


# -- sizes ------------------------------------------------------------------------------------------

def _cp_sized(dtype, vec, cache="ca"):
    @opus.kernel
    def k(x: opus.Ptr[dtype]):
        tile = opus.alloc_smem(dtype, 1024)
        opus.copy_async(tile, 0, x, 0, vec=vec, cache=cache)  # ERR: cp-size
    return k


@pytest.mark.parametrize("dtype,vec,nbytes", [(f32, 3, 12), (u8, 1, 1), (u8, 2, 2), (f16, 1, 2),
                                              (u8, 12, 12), (f64, 3, 24)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_cp_async_sizes(dtype, vec, nbytes):
    needles = (["not a multiple of 16"] if nbytes > 16 else
               [f"{nbytes} bytes per copy is not available on sm_90a", "4, 8 or 16 bytes"])
    with raises(opus.TraceError, *needles, at="cp-size"):
        trace(_cp_sized(dtype, vec))


@pytest.mark.parametrize("dtype,vec", [(f32, 1), (f32, 2)], ids=["4 bytes", "8 bytes"])
def test_cg_copies_16_bytes_only(dtype, vec):
    with raises(opus.TraceError, "cache='cg' copies 16 bytes only", "cache='ca'", at="cp-size"):
        trace(_cp_sized(dtype, vec, "cg"))


@pytest.mark.parametrize("cache", ["cs", "CG", None])
def test_unknown_cache_operator(cache):
    with raises(opus.TraceError, "cache must be 'ca' or 'cg'", at="cp-size"):
        trace(_cp_sized(f32, 4, cache))


def _lds_sized(dtype, vec):
    @opus.kernel
    def k(x: opus.Ptr[dtype]):
        tile = opus.alloc_smem(dtype, 4096)
        opus.copy_async_lds(tile, 0, x, opus.thread_id_x() * vec, vec=vec)  # ERR: lds-size
    return k


@pytest.mark.parametrize("arch,dtype,vec,nbytes,have", [
    ("gfx942", f32, 2, 8, "1, 2 or 4 bytes"), ("gfx942", f32, 3, 12, "1, 2 or 4 bytes"),
    ("gfx942", f32, 4, 16, "1, 2 or 4 bytes"), ("gfx942", f64, 1, 8, "1, 2 or 4 bytes"),
    ("gfx950", f32, 2, 8, "1, 2, 4, 12 or 16 bytes"), ("gfx950", u8, 3, 3, "1, 2, 4, 12 or 16"),
    ("gfx942", f16, 3, 6, "1, 2 or 4 bytes")], ids=lambda v: getattr(v, "name", str(v)))
def test_lds_copy_sizes_name_the_chip_and_its_sizes(arch, dtype, vec, nbytes, have):
    with raises(opus.TraceError, f"{nbytes} bytes per lane is not available on {arch}", have,
                at="lds-size"):
        trace(_lds_sized(dtype, vec), arch)


# -- operands ---------------------------------------------------------------------------------------

@opus.kernel
def _to_global(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    opus.copy_async(opus.make_gmem(y), 0, x, 0, vec=4)  # ERR: dst-gmem


@opus.kernel
def _to_pointer(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    opus.copy_async(y, 0, x, 0, vec=4)  # ERR: dst-ptr


@opus.kernel
def _to_number(x: opus.Ptr[f32]):
    opus.copy_async(3, 0, x, 0, vec=4)  # ERR: dst-int


@opus.kernel
def _from_shared(x: opus.Ptr[f32]):
    a, b = opus.alloc_smem(f32, 64), opus.alloc_smem(f32, 64)
    opus.copy_async(a, 0, b, 0, vec=4)  # ERR: src-smem


@opus.kernel
def _lds_to_global(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    opus.copy_async_lds(opus.make_gmem(y), 0, x, 0)  # ERR: lds-dst


@pytest.mark.parametrize("k,arch,tag,needles", [
    (_to_global, "sm_90a", "dst-gmem", ["needs a shared-memory destination", "a gmem view",
                                        "from global to shared"]),
    (_to_pointer, "sm_90a", "dst-ptr", ["needs a shared-memory destination", "global pointer"]),
    (_to_number, "sm_90a", "dst-int", ["needs a shared-memory destination", "Python int 3"]),
    (_from_shared, "sm_90a", "src-smem", ["needs a global-memory source",
                                          "shared memory cannot be the source"]),
    (_lds_to_global, "gfx942", "lds-dst", ["copy_async_lds needs a shared-memory destination"]),
], ids=["gmem-dst", "ptr-dst", "int-dst", "smem-src", "lds-gmem-dst"])
def test_destination_must_be_shared_and_source_global(k, arch, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k, arch)


@opus.kernel
def _bounded_dst(x: opus.Ptr[f32]):
    tile = opus.make_smem(opus.alloc_smem(f32, 64), 16)
    opus.copy_async(tile, 0, x, 0, vec=4)  # ERR: dst-bound


def test_bounded_destination_is_refused():
    with raises(opus.TraceError, "destination view has a bound", "unbounded view", at="dst-bound"):
        trace(_bounded_dst)


@opus.kernel
def _mixed_types(x: opus.Ptr[f16]):
    tile = opus.alloc_smem(f32, 64)
    opus.copy_async(tile, 0, x, 0, vec=4)  # ERR: dtypes


def test_element_types_must_match():
    with raises(opus.TraceError, "destination holds f32, the source f16", at="dtypes"):
        trace(_mixed_types)


def _vec_kernel(vec):
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        tile = opus.alloc_smem(f32, 64)
        opus.copy_async(tile, 0, x, 0, vec=vec)  # ERR: vec
    return k


@pytest.mark.parametrize("vec", [0, -4, 2.0, True, "4"], ids=repr)
def test_vec_must_be_a_positive_int(vec):
    with raises(opus.TraceError, "vec must be a positive compile-time int", at="vec"):
        trace(_vec_kernel(vec))


@opus.kernel(block=64)
def _layout_and_scalar(x: opus.Ptr[f16]):
    tile = opus.Tile((3, 16, 4, 8), ((opus.Y, opus.P), (opus.P, opus.Y)))
    u = opus.partition(tile, (32, 1))
    smem = opus.alloc_smem(f16, 48 * 32)
    opus.copy_async(smem, 0, x, u, vec=8)  # ERR: layout-scalar


@opus.kernel(block=64)
def _layouts_differ(x: opus.Ptr[f16]):
    tile = opus.Tile((3, 16, 4, 8), ((opus.Y, opus.P), (opus.P, opus.Y)))
    u = opus.partition(tile, (32, 1))
    v = opus.make_layout((2, 8), coord=(opus.Y, opus.Y))
    smem = opus.alloc_smem(f16, 48 * 32)
    opus.copy_async(smem, v, x, u, vec=8)  # ERR: layouts-differ


@opus.kernel(block=64)
def _wave_layout(x: opus.Ptr[f32]):
    u = opus.make_layout((4,), coord=(opus.Y,))
    smem = opus.alloc_smem(f32, 1024)
    opus.copy_async_lds(smem, u, x, u)  # ERR: wave-layout


@opus.kernel
def _pred_fn_scalar(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 64)
    opus.copy_async(tile, 0, x, 0, vec=4, pred=lambda i: i > 0)  # ERR: pred-fn


@pytest.mark.parametrize("k,arch,tag,needles", [
    (_layout_and_scalar, "sm_90a", "layout-scalar", ["both offsets as layouts"]),
    (_layouts_differ, "sm_90a", "layouts-differ", ["destination layout gives", "must match"]),
    (_wave_layout, "gfx942", "wave-layout", ["wave_off is a scalar offset, not a layout"]),
    (_pred_fn_scalar, "sm_90a", "pred-fn", ["predicate function takes a layout's issue"]),
], ids=["layout-vs-scalar", "layout-shapes", "lds-wave-layout", "pred-function"])
def test_offsets_and_predicates(k, arch, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k, arch)


# -- waits ------------------------------------------------------------------------------------------

def _wait_kernel(n):
    @opus.kernel
    def k(x: opus.Ptr[f32], m: i32):
        opus.wait_async(m if n == "runtime" else n)  # ERR: wait-n
    return k


@pytest.mark.parametrize("n", [-1, 1.5, None, "runtime"], ids=repr)
def test_wait_count_is_a_static_int(n):
    with raises(opus.TraceError, "wait_async(n): n must be a compile-time int >= 0", at="wait-n"):
        trace(_wait_kernel(n))


@opus.kernel
def _s_waitcnt(x: opus.Ptr[f32], VM: opus.constexpr = 0, LGKM: opus.constexpr = None):
    opus.s_waitcnt(vmcnt=VM, lgkmcnt=LGKM)  # ERR: waitcnt


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_s_waitcnt_on_nvidia_points_to_wait_async(arch):
    with raises(opus.TraceError, f"opus.s_waitcnt is not available on {arch}",
                "opus.wait_async", at="waitcnt"):
        trace(_s_waitcnt, arch)


@pytest.mark.parametrize("vm,lgkm,needles", [
    (64, None, ["vmcnt must be a compile-time int >= 0 up to 63"]),
    (-1, None, ["vmcnt must be"]),
    (None, 16, ["lgkmcnt must be a compile-time int >= 0 up to 15"]),
    (None, None, ["needs vmcnt= or lgkmcnt="])], ids=["vm64", "vm-1", "lgkm16", "neither"])
def test_s_waitcnt_counts(vm, lgkm, needles):
    with raises(opus.TraceError, *needles, at="waitcnt"):
        trace(_s_waitcnt, "gfx942", VM=vm, LGKM=lgkm)


@opus.kernel
def _amd_wait_without_commit(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 64)
    opus.copy_async_lds(tile, 0, x, opus.thread_id_x())
    opus.wait_async(0)  # ERR: no-commit


@opus.kernel
def _amd_groups_differ(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 256)
    t = opus.thread_id_x()
    opus.copy_async_lds(tile, 0, x, t)
    opus.commit_async()
    opus.copy_async_lds(tile, 64, x, t)
    opus.copy_async_lds(tile, 128, x, t)
    opus.commit_async()
    opus.wait_async(1)  # ERR: groups-differ


@opus.kernel
def _amd_group_in_branch(x: opus.Ptr[f32], n: i32):
    tile = opus.alloc_smem(f32, 64)
    if n > 0:
        opus.copy_async_lds(tile, 0, x, opus.thread_id_x())
    opus.commit_async()
    opus.wait_async(0)  # ERR: group-branch


@opus.kernel
def _amd_later_group_differs(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 256)
    t = opus.thread_id_x()
    opus.copy_async_lds(tile, 0, x, t)
    opus.commit_async()
    opus.wait_async(0)
    opus.copy_async_lds(tile, 64, x, t)
    opus.copy_async_lds(tile, 128, x, t)
    opus.commit_async()  # ERR: later-group


@pytest.mark.parametrize("k,tag,needles", [
    (_amd_wait_without_commit, "no-commit", ["no group was committed", "opus.s_waitcnt"]),
    (_amd_groups_differ, "groups-differ", ["same number of copies", "1 at line", "2 at line"]),
    (_amd_group_in_branch, "group-branch", ["another run-time branch or loop than its "
                                            "commit_async"]),
    (_amd_later_group_differs, "later-group", ["same number of copies"]),
], ids=["no-commit", "groups-differ", "copy-in-branch", "group-after-wait"])
def test_amd_wait_async_needs_static_group_sizes(k, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k, "gfx942")


# -- at run time (the interpreter) -----------------------------------------------------------------

def _faulting_copy(dst_shift, src_shift, tile=256):
    """A tile copy of 4 f32 per thread, shifted from 16-byte alignment or past an end."""
    @opus.kernel
    def k(x: opus.Ptr[f32], out: opus.Ptr[f32]):
        smem = opus.alloc_smem(f32, tile)
        t = opus.thread_id_x()
        opus.copy_async(smem, 4 * t + dst_shift, x, 4 * t + src_shift, vec=4)  # ERR: copy-fault
        opus.commit_async()
        opus.wait_async(0)
        out[t] = smem[t]
    return k


@opus.kernel
def _lds_divergent(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 256)
    t = opus.thread_id_x()
    opus.copy_async_lds(tile, t % 2 * 64, x, t)  # ERR: divergent
    opus.s_waitcnt(vmcnt=0)
    out[t] = tile[t]


@opus.kernel
def _lds_misaligned_base(x: opus.Ptr[u8], out: opus.Ptr[u8]):
    tile = opus.alloc_smem(u8, 512)
    t = opus.thread_id_x()
    opus.copy_async_lds(tile, 1, x, t)  # ERR: lds-base
    opus.s_waitcnt(vmcnt=0)
    out[t] = tile[4 * t + 1]


@pytest.mark.parametrize("k,arch,dtype,tag,exc,needles", [
    (_faulting_copy(0, 1), "sm_90a", np.float32, "copy-fault", MemoryFault,
     ["misaligned async copy source", "16-byte aligned"]),
    (_faulting_copy(2, 0), "sm_90a", np.float32, "copy-fault", MemoryFault,
     ["misaligned async copy destination", "16-byte aligned"]),
    (_faulting_copy(0, 64), "sm_90a", np.float32, "copy-fault", MemoryFault,
     ["out-of-bounds async copy read", "unchecked on the GPU"]),
    (_faulting_copy(4, 0, tile=64), "sm_90a", np.float32, "copy-fault", MemoryFault,
     ["out-of-bounds async copy write", "smem0"]),
    (_lds_divergent, "gfx942", np.float32, "divergent", InterpError,
     ["wave_off must be the same in every lane of a wave", "M0"]),
    (_lds_misaligned_base, "gfx942", np.uint8, "lds-base", MemoryFault,
     ["misaligned async copy destination", "4-byte aligned"]),
], ids=["src-align", "dst-align", "src-oob", "dst-oob", "lds-divergent", "lds-base-align"])
def test_run_time_faults_name_the_copy(k, arch, dtype, tag, exc, needles):
    x = np.arange(64, dtype=dtype)
    out = np.zeros(64, dtype)
    with opus.set_target(arch, interpret=True), unchanged(out), raises(exc, *needles, at=tag):
        k[1, 16 if arch.startswith("sm") else 64](x, out)
