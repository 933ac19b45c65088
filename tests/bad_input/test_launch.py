"""Bad input at launch: grid/block shapes, shared memory, streams, arguments, and what a target
does not have. Every case runs in the interpreter as a target, which checks a launch as that
target's GPU does (one table per target: opus/targets); a refused launch writes nothing."""
import numpy as np
import pytest

import opus
from opus import f32, i32
from opus.errors import ArgumentError

from expect import no_new_cache_files, raises, unchanged


@opus.kernel
def fill(out: opus.Ptr[f32], n: i32, v: f32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    opus.make_gmem(out, n).store(v, i)


@opus.kernel(block=64)
def fill64(out: opus.Ptr[f32], n: i32):
    i = opus.block_id_x() * 64 + opus.thread_id_x()
    opus.make_gmem(out, n).store(1.0, i)


@opus.kernel
def dyn(out: opus.Ptr[f32]):
    s = opus.dynamic_smem(f32)
    s[opus.thread_id_x()] = 1.0
    out[opus.thread_id_x()] = s[opus.thread_id_x()]


@opus.kernel
def static_and_dyn(out: opus.Ptr[f32]):
    a = opus.alloc_smem(f32, 10 * 1024)  # 40 KiB static
    d = opus.dynamic_smem(f32)
    a[opus.thread_id_x()] = 1.0
    d[opus.thread_id_x()] = a[opus.thread_id_x()]
    out[opus.thread_id_x()] = d[opus.thread_id_x()]


def launch(kernel, cfg, arch="sm_90a", *args, **kw):
    """kernel[cfg](*args, **kw) in the interpreter as ``arch``."""
    with opus.set_target(arch, interpret=True):
        kernel[cfg](*args, **kw)


def out_array(n=64):
    return np.full(n, -3.0, np.float32)


# -- grid and block shapes --------------------------------------------------------------------

@pytest.mark.parametrize("grid,block,needle", [
    (0, 32, "grid"), (-1, 32, "grid"), ((2.0,), 32, "grid"), (True, 32, "grid"),
    ((1, 1, 1, 1), 32, "grid"), ([], 32, "grid"), ("4", 32, "grid"),
    (1, 0, "block"), (1, (32, 0), "block"), (1, 1.5, "block"), (1, (32, -2), "block"),
    (1, (1, 1, 1, 1), "block"), (1, (np.float32(4),), "block"),
], ids=["grid0", "grid-neg", "grid-float", "grid-bool", "grid-4d", "grid-empty", "grid-str",
        "block0", "block-y0", "block-float", "block-neg", "block-4d", "block-npfloat"])
def test_bad_shape(grid, block, needle):
    out = out_array()
    with unchanged(out), raises(ArgumentError, needle):
        launch(fill, (grid, block), "sm_90a", out, 64, 1.0)


def test_launch_needs_grid_and_block():
    out = out_array()
    with unchanged(out), raises(ArgumentError, "grid, block", "give both"):
        launch(fill, 4, "sm_90a", out, 64, 1.0)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_block_z_128_is_refused_on_nvidia_by_name(arch):
    out = out_array(128)
    with unchanged(out), raises(ArgumentError, "block.z = 128", f"{arch}'s limit of 64"):
        launch(fill, (1, (1, 1, 128)), arch, out, 128, 1.0)


def test_block_z_128_runs_on_amd():
    out = out_array(128)
    launch(fill, (1, (1, 1, 128)), "gfx942", out, 128, 2.0)
    assert out[0] == 2.0  # only thread (0, 0, z) has x = 0; every z writes element 0


@pytest.mark.parametrize("arch,block,needle", [
    ("sm_90a", (2048,), "block.x = 2048"), ("gfx950", (1, 2048), "block.y = 2048"),
    ("sm_90a", (32, 32, 2), "2048 threads"), ("gfx942", (64, 64), "4096 threads"),
])
def test_too_many_threads(arch, block, needle):
    out = out_array()
    with unchanged(out), raises(ArgumentError, needle, arch):
        launch(fill, (1, block), arch, out, 64, 1.0)


@pytest.mark.parametrize("arch,grid,needle", [
    ("sm_90a", (1, 65536), "grid.y = 65536"), ("sm_80", (1, 1, 70000), "grid.z = 70000"),
    ("sm_89", (2 ** 31,), "grid.x = 2147483648"),
    ("gfx942", (2 ** 23,), "work-items"),  # 2^23 blocks of 1024 = 2^33 work-items
])
def test_grid_beyond_the_targets_limit(arch, grid, needle):
    out = out_array()
    with unchanged(out), raises(ArgumentError, needle, arch):
        launch(fill, (grid, 1024), arch, out, 64, 1.0)


@pytest.mark.parametrize("block", [128, (64, 2), (32,)])
def test_block_differs_from_the_declared_one(block):
    out = out_array()
    with unchanged(out), raises(ArgumentError, "declared with block=64"):
        launch(fill64, (1, block), "sm_90a", out, 64)


# -- shared memory ------------------------------------------------------------------------------

@pytest.mark.parametrize("smem", [-1, 1.5, True, "64", None], ids=["neg", "float", "bool", "str", "none"])
def test_smem_must_be_bytes(smem):
    out = out_array()
    with unchanged(out), raises(ArgumentError, "smem must be a non-negative int"):
        launch(dyn, (1, 32), "sm_90a", out, smem=smem)


@pytest.mark.parametrize("arch,smem,limit", [
    ("sm_90a", 1 << 20, 232448), ("sm_86", 101377, 101376), ("sm_80", 166913, 166912),
    ("gfx942", 65537, 65536), ("gfx950", 163841, 163840),
])
def test_dynamic_smem_beyond_the_targets_limit(arch, smem, limit):
    """Checked against the table before anything is allocated (1 MiB used to reach numpy)."""
    out = out_array()
    with unchanged(out), raises(ArgumentError, f"{smem} dynamic", f"{arch} allows {limit}"):
        launch(dyn, (1, 32), arch, out, smem=smem)


def test_dynamic_smem_at_the_limit_runs():
    out = out_array()
    launch(dyn, (1, 64), "sm_86", out, smem=101376)
    assert (out == 1.0).all()


def test_static_plus_dynamic_must_fit():
    out = out_array()
    with unchanged(out), raises(ArgumentError, "40960 static + 196608 dynamic", "allows 232448"):
        launch(static_and_dyn, (1, 32), "sm_90a", out, smem=192 * 1024)


@opus.kernel
def huge_static(out: opus.Ptr[f32]):
    s = opus.alloc_smem(f32, 1 << 20)  # ERR: static-4mib
    out[0] = s[0]


@pytest.mark.parametrize("arch", ["sm_90a", "gfx950"])
def test_4mib_static_smem_is_a_trace_error_at_its_line(arch, cache_root):
    out = out_array()
    with unchanged(out), raises(opus.TraceError, "static shared memory of 4194304 bytes", arch,
                                at="static-4mib"):
        launch(huge_static, (1, 1), arch, out)
    with no_new_cache_files(cache_root), raises(opus.TraceError, arch, at="static-4mib"):
        huge_static.specialize(target=arch).compiled


@opus.kernel
def static_49k(out: opus.Ptr[f32]):
    s = opus.alloc_smem(f32, 49 * 256)  # ERR: static-49k
    s[opus.thread_id_x()] = 2.0
    out[opus.thread_id_x()] = s[opus.thread_id_x()]


def test_static_smem_beyond_48k_on_nvidia_names_dynamic_smem():
    out = out_array()
    with unchanged(out), raises(opus.TraceError, "limit of 49152", "dynamic_smem", at="static-49k"):
        launch(static_49k, (1, 64), "sm_90a", out)
    launch(static_49k, (1, 64), "gfx950", out)  # 160 KiB of LDS: fine there
    assert (out == 2.0).all()


@opus.kernel
def two_arrays(out: opus.Ptr[f32]):
    a = opus.alloc_smem(f32, 10 * 1024)
    b = opus.alloc_smem(f32, 10 * 1024)  # ERR: second-array
    out[0] = a[0] + b[0]


def test_static_arrays_add_up():
    with raises(opus.TraceError, "81920 bytes", "gfx942's limit of 65536", at="second-array"):
        launch(two_arrays, (1, 1), "gfx942", out_array())


@pytest.mark.parametrize("count", [0, True, 2.0], ids=["zero", "bool", "float"])
def test_alloc_smem_count(count):
    @opus.kernel
    def k(out: opus.Ptr[f32]):
        s = opus.alloc_smem(f32, count)  # ERR: count
        out[0] = s[0]
    with raises(opus.TraceError, "count must be a positive compile-time int", at="count"):
        launch(k, (1, 1), "sm_90a", out_array())


def test_dynamic_smem_offset_beyond_any_block():
    @opus.kernel
    def k(out: opus.Ptr[f32]):
        s = opus.dynamic_smem(f32, 1 << 20)  # ERR: offset
        out[0] = s[0]
    with raises(opus.TraceError, "offset 1048576", "232448", at="offset"):
        launch(k, (1, 1), "sm_90a", out_array(), smem=0)


# -- streams --------------------------------------------------------------------------------------

class _NoHandle:
    cuda_stream = "x"


@pytest.mark.parametrize("stream", ["abc", -1, True, 1.5, object(), _NoHandle(), 2 ** 64],
                         ids=["str", "neg", "bool", "float", "object", "bad-attr", "too-big"])
def test_stream_is_checked_in_the_interpreter_as_on_the_gpu(stream):
    out = out_array()
    with unchanged(out), raises(ArgumentError, "stream must be an int handle"):
        launch(fill, (1, 64), "sm_90a", out, 64, 1.0, stream=stream)


def test_good_streams_are_accepted_and_ignored():
    out = out_array()

    class TorchLike:
        cuda_stream = 0x1234
    for s in (None, 0, 7, TorchLike()):
        launch(fill, (1, 64), "sm_90a", out, 64, 5.0, stream=s)
    assert (out == 5.0).all()


# -- arguments -------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,kw,needles", [
    ((out_array(), 64, 1.0, 2), {}, ("takes 3 arguments", "got 4")),
    ((out_array(), 64), {}, ("missing argument", "'v'")),
    ((out_array(), 64, 1.0), {"w": 1}, ("unexpected", "w")),
    ((out_array(),), {"n": 64, "out": out_array(), "v": 1.0}, ("unexpected or repeated", "out")),
], ids=["too-many", "missing", "unknown-kw", "repeated"])
def test_argument_count_and_names(args, kw, needles):
    with raises(ArgumentError, *needles):
        launch(fill, (1, 64), "sm_90a", *args, **kw)


@pytest.mark.parametrize("bad,needles", [
    ([0.0] * 64, ("'out'", "numpy array", "list")),
    (np.zeros(64, np.float64), ("'out'", "f32", "float64")),
    (np.zeros((64, 2), np.float32)[:, 0], ("'out'", "contiguous")),
    (3, ("'out'", "int")),
], ids=["list", "wrong-dtype", "strided", "int"])
def test_pointer_arguments_in_the_interpreter(bad, needles):
    with raises(ArgumentError, *needles):
        launch(fill, (1, 64), "sm_90a", bad, 64, 1.0)


@pytest.mark.parametrize("n,v,needles", [
    (2 ** 31, 1.0, ("'n'", "i32", "2147483648")), (-2 ** 31 - 1, 1.0, ("'n'", "outside")),
    (64.0, 1.0, ("'n'", "integer", "float")), (True, 1.0, ("'n'", "bool")),
    (np.uint64(2 ** 40), 1.0, ("'n'", "outside")),
    (64, 1e39, ("'v'", "f32", "outside its range")), (64, "1", ("'v'", "number", "str")),
    (64, np.bool_(True), ("'v'", "number")),
], ids=["i32-over", "i32-under", "float-for-int", "bool-for-int", "np-u64-over", "f32-over",
        "str-for-f32", "npbool-for-f32"])
def test_scalar_arguments_in_the_interpreter(n, v, needles):
    out = out_array()
    with unchanged(out), raises(ArgumentError, *needles):
        launch(fill, (1, 64), "sm_90a", out, n, v)


# -- what a target does not have: refused while tracing, the same in the interpreter -------------

@opus.kernel
def exp64(x: opus.Ptr[opus.f64]):
    x[0] = opus.exp(x[1])  # ERR: exp64


@opus.kernel
def say(x: opus.Ptr[f32]):
    opus.printf("%f\n", x[0])  # ERR: printf


@opus.kernel
def rz_fp8(x: opus.Ptr[f32], y: opus.Ptr[opus.fp8]):
    y[0] = opus.cast(x[0], opus.fp8, rounding="rz")  # ERR: rz-fp8


UNAVAILABLE = [
    (exp64, "gfx942", lambda: (np.ones(4),), "opus.exp on f64 is not available on gfx942", "exp64"),
    (exp64, "gfx950", lambda: (np.ones(4),), "opus.exp on f64 is not available on gfx950", "exp64"),
    (say, "gfx942", lambda: (out_array(),), "printf is not available on gfx942", "printf"),
    (say, "gfx950", lambda: (out_array(),), "printf is not available on gfx950", "printf"),
    (rz_fp8, "gfx942", lambda: (out_array(), np.zeros(4, opus.fp8_e4m3fnuz.np_dtype)),
     "rounding='rz'", "rz-fp8"),
]


@pytest.mark.parametrize("kernel,arch,make_args,needle,tag", UNAVAILABLE,
                         ids=[f"{c[0].name}-{c[1]}" for c in UNAVAILABLE])
def test_unavailable_on_the_target_in_interpreter_and_compiler(kernel, arch, make_args, needle,
                                                               tag, cache_root):
    args = make_args()
    with unchanged(*args), raises(opus.TraceError, needle, at=tag):
        launch(kernel, (1, 1), arch, *args)
    with no_new_cache_files(cache_root), raises(opus.TraceError, needle, at=tag):
        kernel.source(target=arch)


def test_what_amd_lacks_runs_on_nvidia():
    x = np.array([0.0, 1.0, 0, 0])
    launch(exp64, (1, 1), "sm_90a", x)
    assert x[0] == np.exp(1.0)
