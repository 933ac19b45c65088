"""PTX bodies (``@opus.kernel(body="ptx")``, docs/ptx_body.md step 1): a kernel rendered as PTX
from the IR inside one CUDA C++ shell.

Without a GPU (NVRTC to CUBIN):
* the shell keeps the CUDA dialect's signature, launch bounds and shared declarations and holds
  the body in one asm statement; the PTX body's op table and its renderer agree;
* each op kind compiles, and its SASS holds the instruction it must (no fused multiply-add
  from a separate mul and add, the f16/bf16 conversions, bounded vector accesses, ...);
* the differential suite's generated programs compile as PTX bodies (those the table
  accepts: all but the transcendental math functions);
* refusals: an op the PTX body lacks is a TraceError at its kernel line (compile-only and in
  the interpreter), body="ptx" on an AMD target at the def line, a bad body value at once;
  the option reaches the compile cache's key.
On a GPU (pytest -m gpu): the same inputs through body="ptx", body="cuda" and the interpreter
agree bit for bit (the examples, generated programs, integer division and shifts on every
width, f16/bf16 conversions, cross-lane ops, loops with carried values and a return, bounded
loads with ragged tails).
"""
import os
import re
import sys

import numpy as np
import pytest

import opus
from opus import f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from opus import examples as ex
from opus.codegen.ptx import PtxBody
from opus.ir.ops import OPS
from opus.targets.ptx_body import PTX_BODY_KINDS

from bad_input.expect import raises, cache_files
from lang.test_scalar_math_lanes import mdiv_make, mdiv_param

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "differential"))
import diff_gen  # noqa: E402
import diff_run  # noqa: E402

TARGET = "sm_90a"
INTS = [i8, u8, i16, u16, i32, u32, i64, u64]


def both(fn, **kw):
    """fn decorated twice: (C++ body, PTX body)."""
    return opus.kernel(**kw)(fn), opus.kernel(body="ptx", **kw)(fn)


def ptx_of(k):
    """The same kernel with a PTX body."""
    return opus.kernel(block=k.block, body="ptx")(k.fn)


def sass_ops(k, **constexprs):
    """The SASS opcodes of kernel k (the mnemonic and its modifiers)."""
    text = k.sass(target=TARGET, **constexprs)
    return re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", text)


# -- the shell ---------------------------------------------------------------------------------

def test_table_and_renderer_agree():
    """Every kind the table lets through tracing has its render_<kind>, and no other does
    (yield and condition are rendered by the ops that own their regions)."""
    rendered = {k for k in OPS if hasattr(PtxBody, "render_" + k)}
    assert rendered == set(PTX_BODY_KINDS) - {"yield", "condition"}


def _lines(src, start):
    return [l.strip() for l in src.splitlines() if l.strip().startswith(start)]


@pytest.mark.parametrize("k", [ex.block_reduce, ex.saxpy], ids=lambda k: k.name)
def test_shell_is_the_cuda_dialect_with_one_asm_body(k):
    cuda, ptx = k.source(target=TARGET), ptx_of(k).source(target=TARGET)
    assert _lines(ptx, 'extern "C"') == _lines(cuda, 'extern "C"')  # signature, launch bounds
    assert _lines(ptx, "__shared__") == _lines(cuda, "__shared__")
    assert ptx.count("asm volatile(") == 1
    body = ptx[ptx.index('extern "C"'):].splitlines()[1:-1]
    outside_asm = [l.strip() for l in body if not l.strip().startswith('"')]
    assert all(l.startswith(("__shared__", "asm volatile(", ":: ")) for l in outside_asm), \
        outside_asm  # no C++ statement: the body is the asm's
    assert re.search(r'"\s*:: .*"l"\(p_x_\d+\).*: "memory"\);', ptx)
    if k is ex.block_reduce:
        assert "__launch_bounds__(256)" in _lines(ptx, 'extern "C"')[0]
        assert '"r"((unsigned)__cvta_generic_to_shared(smem0))' in ptx
        assert "bar.sync 0;" in ptx and "ld.shared.f32" in ptx


# -- each op kind in SASS ------------------------------------------------------------------------

def _mul_add(a: opus.Ptr[f32], b: opus.Ptr[f32], c: opus.Ptr[f32], o: opus.Ptr[f32]):
    i = opus.thread_id_x()
    o[i] = a[i] * b[i] + c[i]          # two roundings: never contracted into an FFMA


def _fma(a: opus.Ptr[f32], b: opus.Ptr[f32], c: opus.Ptr[f32], o: opus.Ptr[f32]):
    i = opus.thread_id_x()
    o[i] = opus.fma(a[i], b[i], c[i])


def _half_math(a: opus.Ptr[f16], b: opus.Ptr[bf16], o: opus.Ptr[f16], p: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    o[i] = a[i] + a[i]
    p[i] = opus.cast(opus.cast(b[i], f32) * 3.0, bf16, rounding="rz")


def _int_ops(a: opus.Ptr[i32], b: opus.Ptr[i32], o: opus.Ptr[i32], q: opus.Ptr[i64]):
    i = opus.thread_id_x()
    o[i] = (a[i] // b[i]) ^ (a[i] % b[i]) ^ (a[i] << b[i]) ^ opus.popc(a[i])
    q[i] = opus.i64(a[i]) * opus.i64(b[i]) + 1


def _convert(a: opus.Ptr[f32], b: opus.Ptr[i32], o: opus.Ptr[i32], p: opus.Ptr[f64]):
    i = opus.thread_id_x()
    o[i] = opus.cast(a[i], i32) + opus.cast(opus.floor(a[i]), i32)
    p[i] = opus.cast(b[i], f64) + opus.cast(opus.sqrt(a[i]), f64)


def _select_loop(a: opus.Ptr[f32], o: opus.Ptr[f32], n: opus.i32):
    acc = 0.0
    for j in range(opus.thread_id_x(), n, 32):      # run-time loop carrying acc
        acc = opus.select(a[j] > 0.0, acc + a[j], acc)
    o[opus.thread_id_x()] = acc


def _bounded_vector(a: opus.Ptr[f32], o: opus.Ptr[f32], n: opus.i32):
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 4
    ga, go = opus.make_gmem(a, n), opus.make_gmem(o, n)
    go.store(ga.load(i, vec=4) * 2.0, i)


def _shared(a: opus.Ptr[f32], o: opus.Ptr[f32]):
    s = opus.alloc_smem(f32, 64)
    t = opus.thread_id_x()
    s[t] = a[t]
    opus.sync_threads()
    o[t] = s[63 - t]


def _warp(a: opus.Ptr[f32], b: opus.Ptr[i32], o: opus.Ptr[f32], q: opus.Ptr[u32]):
    t = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    x, y = a[t], b[t]
    s = x + opus.shfl_xor(x, 1)
    s = s + opus.shfl_down(s, 2)
    s = s + opus.shfl_up(s, 4, width=16)
    o[t] = s + opus.shfl(s, 3)
    q[t * 4 + 3] = opus.bitcast(opus.warp_reduce(y, "max") + opus.warp_reduce(y), u32)
    if y > 0:                                   # the lanes of a partial warp vote
        q[t * 4] = opus.ballot(y > 10)
        q[t * 4 + 1] = opus.cast(opus.any_lanes(y > 40), u32)
        q[t * 4 + 2] = opus.cast(opus.all_lanes(y > 2), u32)


def _dynamic_smem(a: opus.Ptr[f32], o: opus.Ptr[i32]):
    s = opus.dynamic_smem(f32)                   # two views of one region, and a static array
    w = opus.dynamic_smem(i32, 256 * 4)
    st = opus.alloc_smem(i32, 128)
    t = opus.thread_id_x()
    s[t] = a[t]
    w[t] = opus.bitcast(a[t], i32) ^ t
    st[t] = t * 3
    opus.sync_threads()
    o[t] = opus.bitcast(s[127 - t], i32) + w[(t + 5) % 128] + st[(t + 9) % 128]


def _sync(a: opus.Ptr[f32], o: opus.Ptr[f32], c: opus.Ptr[u32]):
    s = opus.alloc_smem(f32, 32)
    t = opus.thread_id_x()
    if t < 32:                                   # the producer warp
        s[t] = a[t] * 2.0
        opus.fence("block")
        opus.barrier_arrive(1, 64)
    else:                                        # the consumer warp
        opus.barrier_sync(1, 64)
        o[t - 32] = s[t - 32] + 1.0
    opus.sync_warp()
    opus.barrier_sync(2)                         # the whole block (no count)
    t0, g0 = opus.clock64(), opus.globaltimer()
    c[t] = opus.cast((opus.clock64() >= t0) & (opus.globaltimer() >= g0), u32) + opus.clock() * 0


SASS_CASES = {  # kernel, opcodes (regex) its SASS must hold, opcodes it must not
    "mul_add_not_fused": (_mul_add, [r"FMUL", r"FADD"], [r"FFMA"]),
    "fma": (_fma, [r"FFMA"], []),
    "f16_bf16": (_half_math, [r"F2FP\.F16", r"F2FP\.BF16.*RZ|F2FP\.RZ.*BF16|F2FP\.BF16"], []),
    "int_ops": (_int_ops, [r"POPC", r"IMAD\.HI|MUFU\.RCP", r"SHF|SHL", r"IMAD\.WIDE"], []),
    "convert": (_convert, [r"F2I\.TRUNC", r"FRND\.FLOOR", r"I2F\.F64", r"F2F\.F64\.F32"], []),
    "select_loop": (_select_loop, [r"FSETP", r"BRA"], []),
    "bounded_vector": (_bounded_vector, [r"LDG\.E\.128", r"STG\.E\.128", r"LDG\.E$",
                                         r"STG\.E$"], []),
    "shared_barrier": (_shared, [r"STS", r"LDS", r"BAR\.SYNC", r"S2R"], []),
    "dynamic_smem": (_dynamic_smem, [r"STS", r"LDS", r"BAR\.SYNC"], []),
    "synchronization": (_sync, [r"BAR\.ARV", r"BAR\.SYNC", r"WARPSYNC", r"MEMBAR", r"CS2R",
                                r"S2UR|S2R"], []),
    "cross_lane": (_warp, [r"SHFL\.BFLY", r"SHFL\.DOWN", r"SHFL\.UP", r"SHFL\.IDX", r"VOTE\.ANY",
                           r"VOTE\.ALL", r"REDUX\.MAX\.S32", r"REDUX\.SUM\.S32"], []),
}


@pytest.mark.parametrize("case", sorted(SASS_CASES))
def test_op_kinds_compile_to_the_expected_sass(case):
    fn, want, never = SASS_CASES[case]
    cuda, ptx = both(fn)
    for k in (cuda, ptx):  # the C++ body has them too: the expectation is the hardware's
        ops = sass_ops(k)
        for w in want:
            assert any(re.fullmatch(f"(?:{w})(?:\\..*)?", o) for o in ops), \
                (k.body, w, sorted(set(ops)))
        for w in never:
            assert not any(re.fullmatch(f"(?:{w})(?:\\..*)?", o) for o in ops), (k.body, w)
    assert "asm volatile" in ptx.source(target=TARGET)
    assert ptx.resources(target=TARGET)["spill_stores"] == 0


def _params(o: opus.Ptr[u64], b: opus.bool_, c: i8, d: u8, e: i16, f: u16, g: i32, h: u32,
            k: i64, m: u64, r: f32, s: f64):
    t = opus.thread_id_x() * 12
    for j, x in enumerate((b, c, d, e, f, g, h, k, m, r, s)):   # compile-time loop
        bits = opus.bitcast(x, {2: u16, 4: u32, 8: u64}[x.dtype.itemsize]) if x.dtype.is_float else x
        o[t + j] = opus.cast(bits, u64)
    o[t + 11] = opus.cast(c < 0, u64) + opus.cast(b, u64)


PARAMS = [True, -5, 250, -30000, 65000, -2 ** 31, 2 ** 32 - 1, -2 ** 63, 2 ** 64 - 1, 3.0e38,
          -1e-300]


def test_scalar_parameters_of_every_type_enter_the_asm():
    src = opus.kernel(body="ptx")(_params).source(target=TARGET)
    for constraint in ('"r"((unsigned)p_b_', '"r"((int)p_c_', '"r"((unsigned)p_d_', '"l"(p_k_',
                       '"f"(p_r_', '"d"(p_s_'):
        assert constraint in src, constraint
    assert opus.kernel(body="ptx")(_params).sass(target=TARGET)


@opus.kernel(body="ptx")
def _nothing():
    opus.sync_threads()


def test_a_kernel_without_parameters():
    assert "::  : \"memory\");" in _nothing.source(target=TARGET) and _nothing.sass(target=TARGET)


def test_a_vector_parameter_enters_lane_by_lane():
    """An mdiv parameter (16 bytes by value, a u32x4) reaches the asm as four operands."""
    src = ptx_of(mdiv_param).source(target=TARGET)
    assert all(f'.v[{i}])' in src for i in range(4)), src
    assert "mul.hi.u32" in src and ptx_of(mdiv_param).sass(target=TARGET)


@pytest.mark.parametrize("k", [ex.vector_add, ex.vector_add_f16, ex.vector_add_bf16, ex.saxpy,
                               ex.block_reduce], ids=lambda k: k.name)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_examples_compile_as_ptx_bodies(k, arch):
    p = ptx_of(k)
    assert p.sass(target=arch)
    assert p.resources(target=arch)["spill_stores"] == 0


# -- the differential suite's generated programs -------------------------------------------------

PTX_KERNEL = '@opus.kernel(block=BLOCK, body="ptx")'


def ptx_batch_kernel(progs):
    """The batch's generated kernel with a PTX body, and its source path."""
    source, _ = diff_gen.render(progs, 128)
    assert "@opus.kernel(block=BLOCK)" in source
    return diff_run.load_kernel(source.replace("@opus.kernel(block=BLOCK)", PTX_KERNEL))


def accepted(progs):
    """The programs a PTX body renders (each traced alone), and the ones it refuses."""
    ok, refused = [], []
    for p in progs:
        try:
            ptx_batch_kernel([p])[0].ir(target=TARGET)
            ok.append(p)
        except opus.TraceError as e:
            assert "is not available in a PTX body" in str(e), str(e)
            refused.append(e.raw_message)
    return ok, refused


def _batches(n, seed=0):
    from hypothesis import given, settings, Phase, HealthCheck
    out = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(diff_gen.batches(16))
    def draw(batch):
        out.append(batch)
    draw()
    return out


def test_generated_programs_compile_as_ptx_bodies():
    total = refused_n = 0
    for progs, _ in _batches(6):
        ok, refused = accepted(progs)
        total += len(progs)
        refused_n += len(refused)
        assert all(r.startswith("opus.") for r in refused), refused  # transcendental math only
        if ok:
            k, path = ptx_batch_kernel(ok)
            assert "asm volatile" in k.source(target=TARGET), path
            assert k.sass(target=TARGET), path
    assert refused_n < total // 5, (refused_n, total)


# -- refusals ------------------------------------------------------------------------------------

@opus.kernel(body="ptx")
def _uses_exp(a: opus.Ptr[f32], o: opus.Ptr[f32]):
    i = opus.thread_id_x()
    o[i] = opus.exp(a[i])  # ERR: exp


@opus.kernel(body="ptx")
def _uses_printf(a: opus.Ptr[i32]):
    opus.printf("%d\n", a[opus.thread_id_x()])  # ERR: printf


def test_unsupported_op_is_a_trace_error_at_its_line():
    with raises(opus.TraceError, "opus.exp", "body='ptx'", at="exp"):
        _uses_exp.source(target=TARGET)
    with raises(opus.TraceError, "op 'printf'", "body='ptx'", at="printf"):
        _uses_printf.sass(target=TARGET)


def test_unsupported_op_is_refused_in_the_interpreter_too():
    a, o = np.ones(32, np.float32), np.zeros(32, np.float32)
    with opus.set_target(TARGET, interpret=True):
        with raises(opus.TraceError, "opus.exp", "body='ptx'", at="exp"):
            _uses_exp[1, 32](a, o)
    assert not o.any()


def test_a_ptx_body_kernel_runs_in_the_interpreter():
    """The interpreter runs the IR: a body="ptx" kernel launches there as any other."""
    n = 1003
    r = np.random.default_rng(5)
    x, y = (r.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    with opus.set_target(TARGET, interpret=True):
        ptx_of(ex.vector_add)[(n + 1023) // 1024, 256](x, y, out, n)
    assert np.array_equal(out, x + y)


def test_ptx_inspection():
    """k.ptx() is NVVM's output around the body: the asm's instructions are in it."""
    text = ptx_of(ex.block_reduce).ptx(target=TARGET)
    assert "bar.sync 0;" in text and "ld.shared.f32" in text and ".reg .b32 %ob<" in text


@opus.kernel(body="ptx")
def _ptx_kernel(a: opus.Ptr[f32], o: opus.Ptr[f32]):  # ERR: amd
    o[opus.thread_id_x()] = a[opus.thread_id_x()]


def test_amd_targets_refuse_a_ptx_body_at_the_def_line():
    with raises(opus.TraceError, "body='ptx'", "gfx942", "AMD", at="amd"):
        _ptx_kernel.source(target="gfx942")
    hip = opus.kernel(_ptx_kernel.fn).source(target="gfx942")  # body="cuda": HIP C++ there
    assert "for gfx942" in hip and "asm volatile" not in hip


@pytest.mark.parametrize("bad", ["sass", "PTX", None, 1])
def test_bad_body_value_names_the_argument(bad):
    with raises(opus.OpusError, "body=", "'cuda'", "'ptx'", repr(bad)):
        opus.kernel(body=bad)(_ptx_kernel.fn)


def test_body_is_part_of_the_cache_key(cache_root):
    cuda, ptx = both(_shared)
    cuda.sass(target=TARGET)
    first = cache_files(cache_root)
    ptx.sass(target=TARGET)
    assert len(cache_files(cache_root) - first) == 1  # its own entry, not the C++ body's
    assert cuda.source(target=TARGET) != ptx.source(target=TARGET)


# -- GPU: PTX body = C++ body = interpreter, bit for bit --------------------------------------------

def run(kernel, grid, block, args, on_gpu, smem=0):
    """Launch with numpy arrays (copied back) and scalars; returns the arrays after."""
    if not on_gpu:
        out = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        with opus.set_target(TARGET, interpret=True):
            kernel[grid, block](*out, smem=smem)
        return [a for a in out if isinstance(a, np.ndarray)]
    from opus.runtime.device_array import DeviceArray
    from opus.runtime import cuda_driver
    dev = [DeviceArray.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
    with opus.set_target(TARGET, interpret=False):
        kernel[grid, block](*dev, smem=smem)
    cuda_driver.synchronize()
    return [d.to_numpy() for d in dev if isinstance(d, DeviceArray)]


def same_bits(xs, ys):
    return all(x.dtype == y.dtype and np.array_equal(x.view(np.uint8), y.view(np.uint8))
               for x, y in zip(xs, ys))


def three_way(fn, grid, threads, args, interp=True, smem=0, same=same_bits, **kw):
    """Outputs of the PTX body on the GPU, checked bit for bit against the C++ body on the GPU
    and (``interp``) against the interpreter by ``same`` (bit for bit unless the test says)."""
    cuda, ptx = both(fn, **kw)
    got = run(ptx, grid, threads, args, True, smem)
    assert same_bits(got, run(cuda, grid, threads, args, True, smem)), "PTX body != C++ body"
    if interp:
        assert same(got, run(cuda, grid, threads, args, False, smem)), \
            "PTX body != interpreter"
    return got


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [f32, f16, bf16], ids=lambda t: t.name)
def test_gpu_vector_add_ragged_tail(dtype):
    k = {f32: ex.vector_add, f16: ex.vector_add_f16, bf16: ex.vector_add_bf16}[dtype]
    vec, n = 16 // dtype.itemsize, 100_003  # not a multiple of vec: the last vector is partial
    r = np.random.default_rng(0)
    x, y = (r.standard_normal(n).astype(dtype.np_dtype) for _ in range(2))
    out = np.full(n, np.nan, dtype.np_dtype)
    grid = (n + 256 * vec - 1) // (256 * vec)
    (got,) = three_way(k.fn, grid, 256, [x, y, out, n], interp=False)[2:]
    want = (x.astype(np.float32) + y.astype(np.float32)).astype(dtype.np_dtype)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.gpu
def test_gpu_saxpy_and_block_reduce():
    r = np.random.default_rng(3)
    n = 20_003
    a = np.float32(r.standard_normal())
    x, y = (r.standard_normal(n).astype(np.float32) for _ in range(2))
    (_, got) = three_way(ex.saxpy.fn, 4, 256, [float(a), x, y, n], interp=False)
    assert np.array_equal(got, a * x + y)
    blocks = 6
    n = blocks * 1024 - 37
    x = r.standard_normal(n).astype(np.float32)
    out = np.full(blocks, np.nan, np.float32)
    (_, got) = three_way(ex.block_reduce.fn, blocks, 256, [x, out, n], block=256)
    want = np.add.reduceat(np.concatenate([x, np.zeros(37, np.float32)]).astype(np.float64),
                           np.arange(0, blocks * 1024, 1024))
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)


def _edge_ints(t, n, rng):
    """n values of integer type t: random bits, with the edge values (MIN, -1, 0, 1, MAX, the
    width and its neighbours, ...) first."""
    edges = [-(1 << (t.bits - 1)), 1 - (1 << (t.bits - 1)), -1, 0, 1, 2, 3, 7, 8, -3, -5,
             (1 << (t.bits - 1)) - 1, (1 << t.bits) - 1, t.bits - 1, t.bits, t.bits + 1,
             2 * t.bits]
    unsigned = np.dtype(f"u{t.itemsize}")
    x = rng.integers(0, 256, n * t.itemsize, dtype=np.uint8).view(unsigned)
    x[:len(edges)] = [v % (1 << t.bits) for v in edges]
    return x.view(t.np_dtype)


def _int_kernel(t):
    def ints(a: opus.Ptr[t], b: opus.Ptr[t], o: opus.Ptr[t], n: opus.i32):
        i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        if i < n:
            x, y = a[i], b[i]
            o[i * 16 + 0] = x // y
            o[i * 16 + 1] = x % y
            o[i * 16 + 2] = opus.tdiv(x, y)
            o[i * 16 + 3] = opus.tmod(x, y)
            o[i * 16 + 4] = x << y
            o[i * 16 + 5] = x >> y
            o[i * 16 + 6] = x + y
            o[i * 16 + 7] = x - y
            o[i * 16 + 8] = x * y
            o[i * 16 + 9] = opus.min(x, y) ^ opus.max(x, y)
            o[i * 16 + 10] = -x
            o[i * 16 + 11] = ~x
            o[i * 16 + 12] = abs(x)
            o[i * 16 + 13] = opus.select(x < y, x & y, x | y)
            o[i * 16 + 14] = opus.popc(x)
            o[i * 16 + 15] = x // 3 + x % (-5 if t.kind == "int" else 5)  # constant divisors
    return ints


def _typed(values, t):
    """Python integers as an array of integer type t (wrapped to its width)."""
    return np.array([v % (1 << t.bits) for v in values], f"u{t.itemsize}").view(t.np_dtype)


POW2 = (1, 2, 8, 64)     # constant divisors a PTX body turns into shifts and masks
# constant divisors besides powers of two: 3, 7, 100 and negatives
UNSIGNED_DIVISORS, SIGNED_DIVISORS = (3, 7, 100, 127), (3, -5, -8, 100)


def _const_divisors(t):
    return SIGNED_DIVISORS if t.kind == "int" else UNSIGNED_DIVISORS


def _div_kernel(t, divisors):
    """o[16 i + 4 j ..]: x // k, x % k, tdiv(x, k), tmod(x, k) for the j-th constant k."""
    def divs(a: opus.Ptr[t], o: opus.Ptr[t], n: opus.i32):
        i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        if i < n:
            x = a[i]
            for j, k in enumerate(divisors):        # compile-time: each constant divisor
                o[i * 16 + 4 * j] = x // k
                o[i * 16 + 4 * j + 1] = x % k
                o[i * 16 + 4 * j + 2] = opus.tdiv(x, k)
                o[i * 16 + 4 * j + 3] = opus.tmod(x, k)
    return divs


def _no_division_sequence(types, divisors_of):
    for t in types:
        ops = sass_ops(opus.kernel(block=128, body="ptx")(_div_kernel(t, divisors_of(t))))
        assert not [o for o in ops if o.startswith(("MUFU", "I2F", "CALL"))], (t, ops)


def _check_divisions(t, divisors, seed):
    """The kernel on edge values, three ways, against Python's integers."""
    n = 1024
    a = _edge_ints(t, n, np.random.default_rng(seed))
    got = three_way(_div_kernel(t, divisors), n // 128, 128,
                    [a, np.zeros(n * 16, t.np_dtype), n])[1]
    want = []
    for v in (int(v) for v in a):
        for k in divisors:
            tq = abs(v) // abs(k) * (1 if (v >= 0) == (k > 0) else -1)
            want += [v // k, v % k, tq, v - tq * k]
    assert np.array_equal(got, _typed(want, t))


def test_power_of_two_divisors_compile_to_shifts_and_masks():
    """No division sequence (ptxas kept div.u32 by 8 as I2F + MUFU.RCP + IMAD.HI)."""
    _no_division_sequence((i32, u32, i64, u64, i8), lambda t: POW2)


@pytest.mark.parametrize("n", [32, 64])
def test_magic_numbers_divide_exactly(n):
    """The multipliers of constant divisions, emulated with Python integers as the PTX
    sequence computes them (mul.hi, wrapping add, shifts), against Python's division."""
    from opus.codegen.ptx import unsigned_magic, signed_magic
    rng = np.random.default_rng(5)

    def wrap(v):
        v &= (1 << n) - 1
        return v - (1 << n) if v >> (n - 1) else v
    top = 1 << n
    divisors = list(range(2, 200)) + [641, top - 1, top - 3, top // 2 + 1, top // 2 - 1] + [
        int(v) for v in rng.integers(3, top - 1, 100, dtype=np.uint64, endpoint=True)]
    for d in divisors:
        m, shift, add = unsigned_magic(d, n)
        assert 0 <= m < top
        for x in [0, 1, d - 1, d, d + 1, top - 1, top - 2, top // 2] + [
                int(v) for v in rng.integers(0, top - 1, 50, dtype=np.uint64, endpoint=True)]:
            t = (x * m) >> n
            assert ((t + ((x - t) >> 1)) >> shift if add else t >> shift) == x // d, (d, x)
    for d in [v for v in range(-200, 200) if abs(v) >= 2] + [top // 2 - 1, 1 - top // 2,
                                                            -top // 2, 3 * 1000003]:
        m, shift = signed_magic(d, n)
        assert -top // 2 <= m < top // 2
        for x in [0, 1, -1, d, -d, d - 1, d + 1, -top // 2, top // 2 - 1] + [
                int(v) for v in rng.integers(-top // 2, top // 2 - 1, 50, dtype=np.int64
                                             if n == 64 else np.int64, endpoint=True)]:
            x = wrap(x)
            q = (wrap(((m * x) >> n) + x) >> shift) - (x >> (n - 1))
            want = abs(x) // abs(d) * (1 if (x >= 0) == (d > 0) else -1)
            assert wrap(-q if d < 0 else q) == wrap(want), (d, x)


def test_constant_divisors_compile_without_a_division_sequence():
    """x // 3, x % -5 and the powers of two on every width: multiplies and shifts only."""
    _no_division_sequence((i32, u32, i64, u64, i8, u16), _const_divisors)


@pytest.mark.gpu
@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_gpu_constant_divisors(t):
    """Floor and truncating division and modulo by constants against Python's integers."""
    _check_divisions(t, _const_divisors(t), 4)


@pytest.mark.gpu
@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_gpu_power_of_two_divisors(t):
    """Floor and truncating division and modulo by 1, 2, 8, 64 against Python's integers."""
    _check_divisions(t, POW2, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("t", INTS, ids=lambda t: t.name)
def test_gpu_integer_ops_on_edge_values(t):
    """Floor division and modulo of negative values, by 0 and -1, MIN // -1, shifts by the
    width and beyond, wrapping + - *, on every integer width."""
    rng = np.random.default_rng(1)
    e = _edge_ints(t, 17, rng)
    n = 1024
    a, b = _edge_ints(t, n, rng), _edge_ints(t, n, rng)
    a[:17 * 17], b[:17 * 17] = np.repeat(e, 17), np.tile(e, 17)  # every pair of edge values
    o = np.zeros(n * 16, t.np_dtype)
    three_way(_int_kernel(t), n // 128, 128, [a, b, o, n])


def _cast_kernel(src, dsts, rounding):
    def casts(a: opus.Ptr[src], o: opus.Ptr[u64], n: opus.i32):
        i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        if i < n:
            x = a[i]
            for j, d in enumerate(dsts):   # compile-time loop: one cast per destination
                y = opus.cast(x, d, rounding=rounding if d in (f16, bf16) else "rn")
                o[i * len(dsts) + j] = opus.cast(opus.bitcast(y, {1: u8, 2: u16, 4: u32,
                                                                  8: u64}[d.itemsize]), u64)
    return casts


CAST_TYPES = INTS + [f16, bf16, f32, f64]


def _cast_inputs(src, rng, n):
    """n inputs of type src: all 65536 codes of f16/bf16; special and random floats; integer
    edge values and random bits."""
    if src in (f16, bf16):
        return np.arange(1 << 16, dtype=np.uint16).view(src.np_dtype)[:n]
    if src.is_float:
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, 1.5, 2.5, -2.5, 65504.0,
                            65520.0, 3.4e38, -1e10, 1e-40, 2 ** 31, -2 ** 31 - 1, 2 ** 63, 255.5,
                            -128.5, 32767.5], dtype=src.np_dtype)
        bits = rng.integers(0, 1 << (8 * src.itemsize), n, dtype=np.uint64, endpoint=False)
        x = bits.astype({4: np.uint32, 8: np.uint64}[src.itemsize]).view(src.np_dtype)
        x[:len(special)] = special
        return x
    return _edge_ints(src, n, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("rounding", ["rn", "rz", "truncate", "truncate_with_nan"])
@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda t: t.name)
def test_gpu_casts(src, rounding):
    """Every cast from src (f16/bf16: all 65536 codes), and to f16/bf16 with each rounding."""
    dsts = [d for d in CAST_TYPES if rounding == "rn" or d in (f16, bf16)]
    if rounding.startswith("truncate"):
        dsts = [bf16]
    rng = np.random.default_rng(2)
    n = 1 << 16 if src in (f16, bf16) else 4096
    a = _cast_inputs(src, rng, n)
    o = np.zeros(n * len(dsts), np.uint64)
    three_way(_cast_kernel(src, tuple(dsts), rounding), n // 256, 256, [a, o, n],
              interp=n <= 4096 or len(dsts) <= 2,
              same=_same_casts(dsts, rounding == "truncate" and src.name != "f32"))


def _same_casts(dsts, nan_in_may_be_inf=False):
    """Cast outputs compared bit for bit, except that a NaN result of a float type matches any
    NaN: the sign and payload of a conversion's NaN are not defined (docs/language.md; the
    H100's cvt gives 0x7FFF for every NaN, F2F.BF16.F32 keeps the sign, the interpreter
    follows ml_dtypes). ``nan_in_may_be_inf``: a NaN input may also give an infinity (plain
    truncation of the f32 a NaN converts to, whose payload is not defined)."""
    def same(xs, ys):
        (a, x), (b, y) = xs, ys
        if not np.array_equal(a.view(np.uint8), b.view(np.uint8)):
            return False
        x, y = x.reshape(-1, len(dsts)), y.reshape(-1, len(dsts))
        nan_in = (np.zeros(len(a), bool) if a.dtype.kind in "iub"
                  else np.isnan(a.astype(np.float64)))
        for j, d in enumerate(dsts):
            bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}.get(d.itemsize)
            ok = x[:, j] == y[:, j]
            if d.is_float:
                fx, fy = (v[:, j].astype(bits).view(d.np_dtype).astype(np.float64) for v in (x, y))
                ok |= np.isnan(fx) & np.isnan(fy)
                if nan_in_may_be_inf:
                    special = ~np.isfinite(fx) & ~np.isfinite(fy)
                    ok |= nan_in & special
            if not ok.all():
                return False
        return True
    return same


def _widen_and_shift(a: opus.Ptr[u32], b: opus.Ptr[i32], o: opus.Ptr[i64], p: opus.Ptr[u64]):
    i = opus.thread_id_x()
    o[i] = opus.cast(a[i], i64) << 18          # zero-extended, then shifted
    p[i] = opus.cast(b[i], u64) << 18          # sign-extended, then shifted


def test_widening_is_named_by_the_source_signedness():
    """u32 -> i64 is cvt.u64.u32 and i32 -> u64 cvt.s64.s32: ptxas sign-extended a
    cvt.s64.u32 whose result was shifted left (a generated program found it on the H100)."""
    text = opus.kernel(block=32, body="ptx")(_widen_and_shift).specialize(target=TARGET).source
    assert "cvt.u64.u32" in text and "cvt.s64.s32" in text
    assert "cvt.s64.u32" not in text and "cvt.u64.s32" not in text


@pytest.mark.gpu
def test_gpu_widening_then_shift():
    a = np.array([0xD4C6D500, 0xFFFFFFEC, 0x80000000, 7] * 8, np.uint32)
    b = a.view(np.int32).copy()
    got = three_way(_widen_and_shift, 1, 32, [a, b, np.zeros(32, np.int64),
                                              np.zeros(32, np.uint64)])
    assert np.array_equal(got[2], a.astype(np.int64) << 18)
    assert np.array_equal(got[3], b.astype(np.int64).view(np.uint64) << np.uint64(18))


def _loops(a: opus.Ptr[f32], b: opus.Ptr[i32], o: opus.Ptr[f32], q: opus.Ptr[i32], n: opus.i32,
           step: opus.i32):
    t = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if t >= 250:                                # a return under a run-time branch
        return
    acc, cnt, v = 0.0, 0, opus.make_vector(0.0, 1.0, dtype=f32)
    for j in range(t % 7, n, step):            # run-time step (either sign)
        if b[j] % 3 == 0:
            acc = acc * 0.5 + a[j]
            cnt = cnt + 1
        else:
            v = v + a[j]
        cnt, v = cnt ^ (j & 1), v * 0.75
    for j in range(n - 1, t % 5, -2):          # a downward loop
        cnt = cnt - b[j] // 4
    k = 0
    while k < cnt % 9:                          # a while loop carrying k and acc
        acc = acc + 1.0
        k = k + 1
    o[t * 3] = acc
    o[t * 3 + 1], o[t * 3 + 2] = v[0], v[1]
    q[t] = cnt


@pytest.mark.gpu
@pytest.mark.parametrize("step", [1, 3, -1])
def test_gpu_loops_with_carried_values(step):
    rng = np.random.default_rng(4)
    n = 200
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.integers(-50, 50, n).astype(np.int32)
    o, q = np.zeros(3 * 256, np.float32), np.zeros(256, np.int32)
    three_way(_loops, 2, 128, [a, b, o, q, n, step])


def _bounded_kernel(t, vec):
    def bounded(a: opus.Ptr[t], o: opus.Ptr[t], o2: opus.Ptr[t], n: opus.i32, shift: opus.i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec + shift
        ga, go = opus.make_gmem(a, n), opus.make_gmem(o, n)
        go.store(ga.load(i, vec=vec), i)                             # bounded both ways
        shifted = opus.make_gmem(a + vec, n - vec)                    # a ptr_add's own bound
        opus.make_gmem(o2, n).store(shifted.load(i - 2 * vec, vec=vec), i)  # offsets below 0
    return bounded


@pytest.mark.gpu
@pytest.mark.parametrize("t,vec", [(i8, 16), (u8, 4), (f16, 8), (bf16, 2), (f32, 4), (i64, 2),
                                   (f64, 2), (u16, 8)], ids=lambda x: str(x))
@pytest.mark.parametrize("shift", [0, 3 * 16])
def test_gpu_bounded_loads_ragged_tail(t, vec, shift):
    """n not a multiple of vec: the last vector straddles the bound (element by element);
    offsets below 0 read zeros."""
    n = 1000 + vec // 2 + 1
    a = np.arange(1, n + 1).astype(t.np_dtype)
    o, o2 = np.full(n, 7, t.np_dtype), np.full(n, 9, t.np_dtype)
    grid = (n + 128 * vec - 1) // (128 * vec) + 1
    got = three_way(_bounded_kernel(t, vec), grid, 128, [a, o, o2, n, shift])
    assert np.array_equal(got[1][shift:n], a[shift:n])
    assert np.array_equal(got[1][:shift], o[:shift])


@pytest.mark.gpu
def test_gpu_scalar_parameters():
    (got,) = three_way(_params, 1, 32, [np.zeros(12 * 32, np.uint64)] + PARAMS)
    assert got[1] == 2 ** 64 - 5 and got[10] == np.array(-1e-300).view(np.uint64) and got[11] == 2


@pytest.mark.gpu
def test_gpu_dynamic_shared_memory():
    a = np.random.default_rng(8).standard_normal(128).astype(np.float32)
    three_way(_dynamic_smem, 1, 128, [a, np.zeros(128, np.int32)], smem=2048)


@pytest.mark.gpu
def test_gpu_named_barriers_fences_clocks():
    a = np.random.default_rng(9).standard_normal(32).astype(np.float32)
    got = three_way(_sync, 1, 64, [a, np.zeros(32, np.float32), np.zeros(64, np.uint32)])
    assert np.array_equal(got[1], a * 2 + 1) and np.all(got[2] == 1)


@pytest.mark.gpu
def test_gpu_mdiv():
    """Division by magic numbers (mulhi, shifts, selects), the divisor made in the kernel and
    passed as an mdiv parameter (a vector parameter)."""
    rng = np.random.default_rng(7)
    n = rng.integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    d = rng.integers(1, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    d[:8] = [1, 2, 3, 7, 0x80000000, 0xFFFFFFFF, 641, 6700417]
    q, r = np.zeros(1024, np.uint32), np.zeros(1024, np.uint32)
    got = three_way(mdiv_make.fn, 8, 128, [n, d, q, r])
    assert np.array_equal(got[2], n // d) and np.array_equal(got[3], n % d)
    got = three_way(mdiv_param.fn, 8, 128, [n, opus.mdiv(641), q, r])  # arrays: n, q, r
    assert np.array_equal(got[1], n // 641) and np.array_equal(got[2], n % 641)


@pytest.mark.gpu
def test_gpu_cross_lane():
    """Shuffles (each mode, a narrower width), votes in a partial warp, warp reductions."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal(256).astype(np.float32)
    b = rng.integers(-50, 50, 256).astype(np.int32)
    three_way(_warp, 2, 128, [a, b, np.zeros(256, np.float32), np.zeros(1024, np.uint32)])


@pytest.mark.gpu
def test_gpu_generated_programs_ptx_body_vs_interpreter():
    """The differential suite's programs (those a PTX body renders) on the GPU through a PTX
    body, against the interpreter, bit for bit (NaN payloads aside, as the suite compares)."""
    failures, programs = [], 0
    for progs, seed in _batches(int(os.environ.get("OPUS_DIFF_EXAMPLES", 60))):
        ok, _ = accepted(progs)
        if not ok:
            continue
        k, path = ptx_batch_kernel(ok)
        args = diff_run.make_args(ok, 256, seed)
        got = diff_run.run_interp(k, ok, args, 256, 128)
        want = diff_run.run_gpu(k, ok, args, 256, 128)
        for j, p in enumerate(ok):
            bad = diff_run.mismatches(p, got[f"o{j}"], want[f"o{j}"])
            if len(bad):
                failures.append(f"{path}: program {j}: {p!r}")
        programs += len(ok)
    assert not failures, f"{len(failures)} of {programs} programs differ; first: {failures[:3]}"
