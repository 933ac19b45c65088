"""wgmma test kernels and their numpy references, shared by the interpreter tests
(test_wgmma_interp.py) and their GPU twins (test_gpu_wgmma.py).

``wg_gemm`` is one warpgroup computing D (64 x N) = A (64 x KT) @ B (KT x N) + C: A and B^T
arrive row-major from global memory (A as 64 x KT, B as N x KT) and are written into shared
memory through the tile layouts of ``tile_layout`` (every major-ness and swizzle wgmma reads),
then KT / K wgmmas accumulate (A from shared memory or from registers) and D is stored through
``layout_c``. The references are written from the PTX ISA's definition of the instruction:
products of the inputs as the hardware reads them (tf32: low 13 mantissa bits dropped),
summed exactly, C added where scale-d, rounded once to D's type (integers wrap at 32 bits).
"""
import numpy as np

import opus
from opus import f32, i32

try:
    TF32 = opus.tf32
except AttributeError:  # an opus without the tf32 operand type
    TF32 = None


def memory_type(d):
    """The element type tf32 operands are stored in (f32); others themselves."""
    return f32 if d is TF32 else d


def k_of(d):
    return 8 if d is TF32 else 32 // d.itemsize


def tile_layout(rows, cols, dtype, major, sw):
    """The shared layout of a rows x cols tile (coordinates (row, k)) that wgmma reads with
    ``major`` ('K': k contiguous; 'MN': rows contiguous) and a ``sw``-byte swizzle (0: none),
    in the PTX ISA's canonical form (core matrices of 8 rows x 16 bytes)."""
    T = 16 // dtype.itemsize
    swz = opus.swizzle_bytes(sw, dtype) if sw else None
    if major == "K":
        if sw:  # rows of sw bytes; K beyond one row in further panels of rows x RW
            rw = sw // dtype.itemsize
            if cols <= rw:
                return opus.make_layout((rows, cols), (rw, 1), swizzle=swz)
            return opus.make_layout((rows, (cols // rw, rw)), (rw, (rows * rw, 1)), swizzle=swz)
        return opus.make_layout(((rows // 8, 8), (cols // T, T)), ((8 * cols, T), (8 * T, 1)))
    if sw:  # panels of RW contiguous rows, one per k
        rw = sw // dtype.itemsize
        return opus.make_layout(((rows // rw, rw), cols), ((rw * cols, 1), rw), swizzle=swz)
    return opus.make_layout(((rows // T, T), (cols // 8, 8)), ((8 * T, 1), (8 * rows, T)))


def tile_elements(rows, cols, dtype, major, sw):
    return rows * max(cols, sw // dtype.itemsize if (sw and major == "K") else cols)


_KERNELS = {}


def wg_gemm_for(ma, mb, mc):
    """The kernel for A, B, C stored as ``ma``, ``mb``, ``mc`` (one per combination, cached)."""
    key = (ma.name, mb.name, mc.name)
    if key not in _KERNELS:
        _KERNELS[key] = _wg_gemm(ma, mb, mc)
    return _KERNELS[key]


def _wg_gemm(ma, mb, mc):
    @opus.kernel(block=128)
    def wg_gemm(a: opus.Ptr[ma], b: opus.Ptr[mb], c: opus.Ptr[mc], out: opus.Ptr[mc], sd: i32,
                AT: opus.constexpr, BT: opus.constexpr, CT: opus.constexpr, N: opus.constexpr,
                KT: opus.constexpr, A_MAJOR: opus.constexpr = "K", B_MAJOR: opus.constexpr = "K",
                SW_A: opus.constexpr = 128, SW_B: opus.constexpr = 128,
                A_FROM: opus.constexpr = "smem", NEG_A: opus.constexpr = False,
                NEG_B: opus.constexpr = False):
        K = k_of(AT)
        MA, MB = memory_type(AT), memory_type(BT)
        wg = opus.make_wgmma(AT, BT, CT, (64, N, K), a_from=A_FROM)
        t = opus.thread_id_x()
        ga, gb = opus.make_gmem(a), opus.make_gmem(b)
        lb = tile_layout(N, KT, MB, B_MAJOR, SW_B)
        sb = opus.alloc_smem(MB, tile_elements(N, KT, MB, B_MAJOR, SW_B), align=1024)
        for i in range((N * KT + 127) // 128):
            e = t + 128 * i
            if e < N * KT:
                sb[lb(e // KT, e % KT)] = gb[e]
        if A_FROM == "smem":
            la = tile_layout(64, KT, MA, A_MAJOR, SW_A)
            sa = opus.alloc_smem(MA, tile_elements(64, KT, MA, A_MAJOR, SW_A), align=1024)
            for i in range(64 * KT // 128):
                e = t + 128 * i
                sa[la(e // KT, e % KT)] = ga[e]
        opus.fence_proxy_async()   # generic-proxy writes, read by wgmma through the async proxy
        opus.sync_threads()
        acc = opus.make_gmem(c).load(wg.layout_c((N, 1)), vec=2)
        steps = KT // K
        if A_FROM == "smem":
            acc = opus.wgmma_fence(acc)
            regs = None
        else:
            p = 4 // MA.itemsize
            regs = [ga.load(wg.layout_a((KT, 1)) + K * s, vec=p) for s in range(steps)]
            pinned = opus.wgmma_fence(acc, *regs)
            acc, regs = pinned[0], pinned[1:]
        for s in range(steps):
            src = wg.smem_a(sa, la, origin=(0, K * s)) if A_FROM == "smem" else regs[s]
            acc = wg(src, wg.smem_b(sb, lb, origin=(0, K * s)), acc,
                     scale_d=(sd != 0) if s == 0 else True, neg_a=NEG_A, neg_b=NEG_B)
        opus.wgmma_commit()
        d = opus.wgmma_wait(0, acc)
        opus.make_gmem(out).store(d, wg.layout_c((N, 1)), vec=2)
    return wg_gemm


# -- host side -------------------------------------------------------------------------------------

def np_type(d):
    return memory_type(d).np_dtype


def random_operand(rng, shape, d):
    """Values of type ``d``: integers over the type's range, floats normal (fp8 within +-8)."""
    if d.kind == "int":
        info = np.iinfo(d.np_dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(d.np_dtype)
    x = rng.standard_normal(shape) * (2 if d.itemsize == 1 else 1)
    return x.astype(np.float32).astype(np_type(d))


def tf32_of(x):
    """The tf32 value the tensor cores read from an f32: the low 13 mantissa bits dropped."""
    u = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return u.view(np.float32)


def reference(A, B, C, at, ct, scale_d, neg_a=False, neg_b=False):
    """D after KT / K instructions, each D = (+-A_s) @ (+-B_s^T) (+ C) exact, then rounded once
    to ``ct`` (integers wrap at 32 bits); C is ignored by the first where not ``scale_d``."""
    if at is TF32:
        A, B = tf32_of(A), tf32_of(B)
    k = k_of(at)
    integer = ct.kind == "int"
    wide = np.int64 if integer else np.float64
    sa, sb = (-1 if neg_a else 1), (-1 if neg_b else 1)
    D = C if scale_d else np.zeros_like(C)
    for s in range(A.shape[1] // k):
        part = (sa * A[:, s * k:(s + 1) * k].astype(wide)) @ (sb * B[:, s * k:(s + 1) * k].astype(wide)).T
        exact = part + D.astype(wide)
        D = ((exact & 0xFFFFFFFF).astype(np.uint32).view(np.int32) if integer
             else exact.astype(ct.np_dtype))
    return D


def launch_here(kernel, arrays, sd, constexprs):
    """Launch on numpy arrays (the interpreter); the output array, filled."""
    kernel[1, 128](*arrays, sd, **constexprs)
    return arrays[3]


def run_gemm(at, bt, ct, n, kt, seed=0, scale_d=True, launch=launch_here, **kw):
    """(D from the kernel, the numpy reference); ``launch(kernel, arrays, sd, constexprs)``
    runs it and returns the output (the GPU twins pass device arrays)."""
    rng = np.random.default_rng(seed)
    A = random_operand(rng, (64, kt), at)
    B = random_operand(rng, (n, kt), bt)
    C = random_operand(rng, (64, n), ct if ct.kind == "int" else f32).astype(ct.np_dtype)
    out = np.zeros((64, n), ct.np_dtype)
    kernel = wg_gemm_for(memory_type(at), memory_type(bt), ct)
    arrays = [A.reshape(-1), B.reshape(-1), C.reshape(-1), out.reshape(-1)]
    got = launch(kernel, arrays, int(scale_d), dict(AT=at, BT=bt, CT=ct, N=n, KT=kt, **kw))
    return (np.asarray(got).reshape(64, n),
            reference(A, B, C, at, ct, scale_d, kw.get("NEG_A", False), kw.get("NEG_B", False)))


def assert_close(got, want, ct, ulps=1):
    """Equal for integers; within ``ulps`` units in the last place of D's type otherwise."""
    if ct.kind == "int":
        np.testing.assert_array_equal(got, want)
        return
    w = want.astype(np.float64)
    eps = float(np.finfo(ct.np_dtype).eps)
    np.testing.assert_allclose(got.astype(np.float64), w, rtol=ulps * eps, atol=ulps * eps * 1e-3)
