"""Bad input to wgmma (opus.make_wgmma and its protocol): chips without it (sm_90 without 'a',
older NVIDIA, AMD), shapes and types it lacks, layouts a shared-memory descriptor cannot
express, operands in the wrong space or of the wrong type, reading an accumulator in flight,
bad wait counts and register budgets; at run time in the interpreter: a missing fence, an
accumulator waited for too early, partial warpgroups, a swizzle pattern off its boundary, a
misaligned operand, never-written shared memory. Each case checks the error type, that the
message names the problem, the kernel line (``# ERR: <tag>``) and, for launches, that the
output was not written."""
import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f16, bf16, f32, i8, u8, i32, fp8_e4m3 as e4m3
from expect import raises, unchanged

SW128 = opus.swizzle_bytes(128, f16)


# -- chips, shapes and types --------------------------------------------------------------------------

@opus.kernel(block=128)
def _make(o: opus.Ptr[f32], A: opus.constexpr = f16, B: opus.constexpr = f16,
          C: opus.constexpr = f32, SHAPE: opus.constexpr = (64, 64, 16),
          FROM: opus.constexpr = "smem"):
    wg = opus.make_wgmma(A, B, C, SHAPE, a_from=FROM)  # ERR: make
    o[0] = f32(wg.n)


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_nvidia_without_sm90a(arch):
    with raises(opus.TraceError, f"not available on {arch}", "it needs sm_90a", at="make"):
        _make.source(target=arch)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amd(arch):
    with raises(opus.TraceError, f"not available on {arch}", "NVIDIA sm_90a instruction",
                "opus.make_mma", at="make"):
        _make.source(target=arch)


@pytest.mark.parametrize("shape,needle", [
    ((64, 12, 16), "N one of 8, 16, ..., 256"), ((64, 264, 16), "N one of 8, 16, ..., 256"),
    ((64, 0, 16), "multiples of 8"), ((64, 64, 32), "K is 16"), ((128, 64, 16), "M is 64")])
def test_illegal_shape(shape, needle):
    with raises(opus.TraceError, "no wgmma of shape", needle, at="make"):
        _make.source(target="sm_90a", SHAPE=shape)


def test_int8_n_40_is_not_a_shape():
    with raises(opus.TraceError, "no wgmma of shape 64x40x32 for i8", "8, 16, 24, 32, then "
                "multiples of 16", at="make"):
        _make.source(target="sm_90a", A=i8, B=i8, C=i32, SHAPE=(64, 40, 32))


@pytest.mark.parametrize("a,b,c", [(bf16, bf16, f16), (f32, f32, f32), (i8, i8, f32),
                                   (f16, bf16, f32)])
def test_types_without_a_wgmma(a, b, c):
    with raises(opus.TraceError, f"no wgmma for {a.name} x {b.name} -> {c.name}",
                "f16xf16->f32", at="make"):
        _make.source(target="sm_90a", A=a, B=b, C=c)


def test_a_from_must_be_smem_or_regs():
    with raises(opus.TraceError, "a_from must be 'smem' or 'regs'", "'global'", at="make"):
        _make.source(target="sm_90a", FROM="global")


# -- layouts a descriptor cannot express -----------------------------------------------------------

def _layout(case):
    """The A operand's layout of each case (f16, 64 x 16)."""
    if case == "row-major-no-swizzle":
        return opus.make_layout((64, 16))
    if case == "swizzle-of-bytes":
        return opus.make_layout((64, 64), swizzle=opus.Swizzle(3, 4, 3))
    if case == "no-contiguous-dim":
        return opus.make_layout((64, 16), (2, 128))
    if case == "too-small":
        return opus.make_layout((32, 16), (16, 1), swizzle=opus.swizzle_bytes(32, f16))
    if case == "unaligned-start":
        return opus.make_layout((64, 64), swizzle=SW128) + 4
    if case == "rank-3":
        return opus.make_layout((4, 16, 16))
    if case == "wrong-pitch":
        return opus.make_layout((64, 16), (32, 1), swizzle=SW128)
    return opus.make_layout((64, 64), swizzle=SW128)


@opus.kernel(block=128)
def _desc(o: opus.Ptr[f32], CASE: opus.constexpr = "ok"):
    wg = opus.make_wgmma(f16, f16, f32, (64, 64, 16))
    s = opus.alloc_smem(f16, 64 * 64, align=1024)
    a = wg.smem_a(s, _layout(CASE))  # ERR: desc
    o[0] = f32(0.0)


@pytest.mark.parametrize("case,needles", [
    ("row-major-no-swizzle", ("cannot be a wgmma descriptor", "element (1, 0) is at offset 16",
                              "8 x 16-byte core matrices")),
    ("swizzle-of-bytes", ("not a wgmma swizzle", "swizzle_bytes(32 | 64 | 128, f16)")),
    ("no-contiguous-dim", ("neither K nor M/N is contiguous",)),
    ("too-small", ("covers 32 coordinates", "needs 0 + 64")),
    ("unaligned-start", ("starts 8 bytes into the view", "16-byte aligned")),
    ("rank-3", ("2 modes (rows, K)", "rank 3")),
    ("wrong-pitch", ("element (1, 0) is at offset 32", "rows of 128 bytes")),
])
def test_layout_the_descriptor_cannot_express(case, needles):
    with raises(opus.TraceError, "wgmma A operand", *needles, at="desc"):
        _desc.source(target="sm_90a", CASE=case)


@opus.kernel(block=128)
def _fp8_mn(o: opus.Ptr[f32]):
    wg = opus.make_wgmma(e4m3, e4m3, f32, (64, 64, 32))
    s = opus.alloc_smem(e4m3, 64 * 32, align=1024)
    b = wg.smem_b(s, opus.make_layout(((1, 64), 32), ((0, 1), 64),  # ERR: mn
                                      swizzle=opus.swizzle_bytes(64, e4m3)))
    o[0] = f32(0.0)


def test_fp8_operand_must_be_k_major():
    with raises(opus.TraceError, "wgmma B operand", "M/N-major", "K-major only",
                "imm-trans exists for f16/bf16", at="mn"):
        _fp8_mn.source(target="sm_90a")


@opus.kernel(block=128)
def _dyn_stride(o: opus.Ptr[f32], ld: i32):
    wg = opus.make_wgmma(f16, f16, f32, (64, 64, 16))
    s = opus.alloc_smem(f16, 64 * 64, align=1024)
    a = wg.smem_a(s, opus.make_layout((64, 16), (ld, 1)))  # ERR: dyn
    o[0] = f32(0.0)


def test_run_time_strides():
    with raises(opus.TraceError, "must be Python ints", "linear part", at="dyn"):
        _dyn_stride.source(target="sm_90a")


# -- operands in the wrong space or of the wrong type ----------------------------------------------

@opus.kernel(block=128)
def _operands(o: opus.Ptr[f32], g16: opus.Ptr[f16], CASE: opus.constexpr = "ok"):
    FROM = "regs" if CASE in ("regs-type", "regs-to-smem") else "smem"
    wg = opus.make_wgmma(f16, f16, f32, (64, 64, 16), a_from=FROM)
    s = opus.alloc_smem(f16, 64 * 64, align=1024)
    s32 = opus.alloc_smem(f32, 64 * 64, align=1024)
    lay = opus.make_layout((64, 64), swizzle=SW128)
    acc = opus.wgmma_fence(wg.zeros_c())
    if CASE == "global":
        acc = wg((g16, lay), (s, lay), acc)  # ERR: global
    if CASE == "dtype":
        acc = wg((s32, lay), (s, lay), acc)  # ERR: dtype
    if CASE == "bounded":
        acc = wg((opus.make_smem(s, 4096), lay), (s, lay), acc)  # ERR: bounded
    if CASE == "regs-for-smem":
        acc = wg(opus.zeros(4, f16), (s, lay), acc)  # ERR: regs-for-smem
    if CASE == "regs-type":
        acc = wg(opus.zeros(4, f16), (s, lay), acc)  # ERR: regs-type
    if CASE == "b-in-registers":
        acc = wg((s, lay), opus.zeros(8, f16), acc)  # ERR: b-in-registers
    if CASE == "c-type":
        acc = wg((s, lay), (s, lay), opus.zeros(32, f16))  # ERR: c-type
    if CASE == "neg-int":
        wi = opus.make_wgmma(i8, i8, i32, (64, 64, 32))
        si = opus.alloc_smem(i8, 64 * 128, align=1024)
        li = opus.make_layout((64, 128), swizzle=opus.swizzle_bytes(128, i8))
        acc = wi((si, li), (si, li), None, neg_a=True)  # ERR: neg-int
    if CASE == "read-early":
        x = acc + 1.0  # ERR: read-early
    if CASE == "index-early":
        x = acc[0]  # ERR: index-early
    o[0] = f32(0.0)


@pytest.mark.parametrize("case,needles", [
    ("global", ("shared memory only",)),
    ("dtype", ("holds f32", "this operand is f16")),
    ("bounded", ("has a bound", "no bounds check")),
    ("regs-for-smem", ("wgmma A must be in shared memory", "smem_a(view, layout)")),
    ("regs-type", ("from registers) must be a", "f16x8", "got f16x4")),
    ("b-in-registers", ("wgmma B must be in shared memory",)),
    ("c-type", ("a wgmma accumulator is a f32x32 register vector", "got f16x32")),
    ("neg-int", ("integer wgmma has no negation",)),
    ("read-early", ("cannot be read before its wgmma completes", "opus.wgmma_wait")),
    ("index-early", ("cannot be read before its wgmma completes",)),
])
def test_operands(case, needles):
    with raises(opus.TraceError, *needles, at=case):
        _operands.source(target="sm_90a", CASE=case)


# -- the protocol's arguments ------------------------------------------------------------------------

@opus.kernel(block=128)
def _protocol(o: opus.Ptr[f32], N_WAIT: opus.constexpr = 0, REGS: opus.constexpr = 40,
              CASE: opus.constexpr = "wait"):
    if CASE == "wait":
        opus.wgmma_wait(N_WAIT)  # ERR: wait-n
    if CASE == "wait-value":
        opus.wgmma_wait(0, opus.zeros(4, f32))  # ERR: wait-value
    if CASE == "maxnreg":
        opus.setmaxnreg_inc(REGS)  # ERR: maxnreg
    o[0] = f32(0.0)


@pytest.mark.parametrize("n", [-1, 1.0])
def test_wait_count(n):
    with raises(opus.TraceError, "n must be a non-negative compile-time int", at="wait-n"):
        _protocol.source(target="sm_90a", N_WAIT=n)


def test_wait_takes_accumulators():
    with raises(opus.TraceError, "takes wgmma accumulators", at="wait-value"):
        _protocol.source(target="sm_90a", CASE="wait-value")


@pytest.mark.parametrize("regs", [16, 260, 44])
def test_setmaxnreg_count(regs):
    with raises(opus.TraceError, "multiple of 8 from 24 to 256", str(regs), at="maxnreg"):
        _protocol.source(target="sm_90a", CASE="maxnreg", REGS=regs)


# -- at run time, in the interpreter ---------------------------------------------------------------

@opus.kernel
def _run(a: opus.Ptr[f16], out: opus.Ptr[f32], off: i32, CASE: opus.constexpr = "ok"):
    wg = opus.make_wgmma(f16, f16, f32, (64, 64, 16))
    pad = opus.alloc_smem(f16, 8, align=16)
    s = opus.alloc_smem(f16, 64 * 64, align=16 if CASE == "pattern" else 1024)
    lay = opus.make_layout((64, 64), swizzle=SW128)
    t = opus.thread_id_x()
    if CASE != "unwritten":
        for i in range(64 * 64 // 128):
            s[t + 128 * i] = a[t + 128 * i]
    opus.fence_proxy_async()
    opus.sync_threads()
    acc = wg.zeros_c()
    if CASE != "no-fence":
        acc = opus.wgmma_fence(acc)  # ERR: fence
    if CASE == "partial":
        if t < 64:
            acc = wg((s, lay), (s, lay), acc)  # ERR: partial
    elif CASE == "misaligned":
        acc = wg((s, lay + off), (s, lay), acc)  # ERR: misaligned
    else:
        acc = wg((s, lay), (s, lay), acc)  # ERR: mma
    opus.wgmma_commit()
    d = opus.wgmma_wait(1 if CASE == "early-wait" else 0, acc)  # ERR: wait
    opus.make_gmem(out).store(d, wg.layout_c((64, 1)), vec=2)


def _launch(case, block=128, off=0, checking=False):
    a = np.ones(64 * 64, np.float16)
    out = np.zeros(64 * 64 * 4, np.float32)
    with unchanged(out), opus.set_target("sm_90a"):
        if checking:
            with interp.checking():
                _run[1, block](a, out, off, CASE=case)
        else:
            _run[1, block](a, out, off, CASE=case)


@pytest.mark.parametrize("case,tag,needles", [
    ("no-fence", "mma", ("wgmma without opus.wgmma_fence()",)),
    ("early-wait", "wait", ("opus.wgmma_wait(1) returns an accumulator", "still in flight")),
    ("partial", "partial", ("only part of warpgroup 0", "64 of 128 threads")),
    ("pattern", "mma", ("128-byte swizzled tile starts at shared byte 16",
                        "1024-byte boundary", "align=1024")),
])
def test_protocol_at_run_time(case, tag, needles):
    with raises(interp.InterpError, *needles, at=tag):
        _launch(case)


def test_misaligned_operand_at_run_time():
    with raises(interp.MemoryFault, "not 16-byte aligned", at="misaligned"):
        _launch("misaligned", off=4)


def test_partial_warpgroup_block():
    with raises(interp.InterpError, "whole warpgroups of 128 threads", "the block has 96",
                at="fence"):
        _launch("ok", block=96)


def test_unwritten_shared_memory_in_checking_mode():
    with raises(interp.UninitializedReadError, "which nothing wrote", at="mma"):
        _launch("unwritten", checking=True)
