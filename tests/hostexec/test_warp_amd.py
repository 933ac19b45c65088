"""AMD's cross-lane builtins on the host (shim/warp_hip.h: ds_bpermute, ds_permute, DPP moves,
readlane and ballots from the CDNA3 ISA's definitions): the kernels and numpy references of
tests/lang/test_cross_lane_interp.py (written from the documents, lane by lane), rendered for
gfx942/gfx950 and host-executed, so the HIP lowerings' lane arithmetic (the bpermute lane of
each shuffle mode and width, the DPP controls, masks and bound_ctrl the shuffles pick, the
reduction ladders) is checked without an AMD GPU."""
import os
import sys

import numpy as np
import pytest

import opus
from opus import i32, u32
from hostexec import HostProgram, Launch, run_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lang"))
import test_cross_lane_interp as X  # noqa: E402


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("mode", ["idx", "up", "down", "xor"])
@pytest.mark.parametrize("static", [None, 1, 3, 8])
def test_shuffles_every_width(arch, mode, static, tmp_path):
    """Run-time lanes go through ds_bpermute; compile-time ones through the DPP move or
    readlane the language picks (width 4: quad_perm, 16: row_shr/row_shl/row_ror, 64:
    wave_shr/wave_shl or readlane), else ds_bpermute."""
    n = 128
    rng = np.random.default_rng(7)
    x = rng.integers(-1000, 1000, n).astype(np.float32)
    s = rng.integers(-160, 160, n).astype(np.int32)
    src = s if static is None else np.full(n, static)
    widths = X.widths(arch)
    prog = HostProgram(arch)
    ks = [prog.add(X.shuffle_kernel.specialize(target=arch, MODE=mode, W=w, STATIC=static))
          for w in widths]
    prog.build(tmp_path)
    outs = [np.full(n, np.nan, np.float32) for _ in widths]
    prog.run([Launch(k, 2, 64, [x.copy(), s.copy(), o]) for k, o in zip(ks, outs)])
    for w, o in zip(widths, outs):
        np.testing.assert_array_equal(o, X.ref_shuffle(x, src, mode, w, 64), err_msg=f"w {w}")


MASKS = [(0xF, 0xF, True, False), (0xF, 0xF, False, False), (0xA, 0x5, False, False),
         (0xC, 0x3, True, False), (0xF, 0xF, False, True), (0xF, 0xF, True, True)]


@pytest.mark.parametrize("ctrl", [c for c, _ in X.CTRLS], ids=repr)
def test_dpp_controls_and_masks(ctrl, tmp_path):
    """Every DPP control with row/bank masks, bound_ctrl both ways, and lanes that took no part
    (they returned: an inactive source)."""
    n = 128
    rng = np.random.default_rng(8)
    old = rng.integers(-1000, -1, n).astype(np.int32)
    x = rng.integers(1, 1000, n).astype(np.int32)
    prog = HostProgram("gfx942")
    ks = [prog.add(X.dpp_kernel.specialize(target="gfx942", C=ctrl, RM=rm, BM=bm, BC=bc,
                                           DIVERGE=div)) for rm, bm, bc, div in MASKS]
    prog.build(tmp_path)
    outs = [np.zeros(n, np.int32) for _ in MASKS]
    prog.run([Launch(k, 1, n, [old.copy(), x.copy(), o]) for k, o in zip(ks, outs)])
    for (rm, bm, bc, div), o in zip(MASKS, outs):
        active = (np.arange(n) % 5 != 1) if div else np.ones(n, bool)
        want = np.where(active, X.ref_dpp(old, x, int(ctrl), rm, bm, bc, active), -7)
        np.testing.assert_array_equal(o, want, err_msg=f"{ctrl!r} rm {rm:#x} bm {bm:#x} bc {bc}")


@opus.kernel
def permutes(x: opus.Ptr[i32], a: opus.Ptr[i32], f: opus.Ptr[i32], b: opus.Ptr[i32]):
    t = opus.thread_id_x()
    f[t] = opus.permute(x[t], a[t])
    b[t] = opus.bpermute(x[t], a[t])


def test_forward_and_backward_permutes(tmp_path):
    """ds_permute: lane (addr >> 2) % 64 receives, the highest sender wins, no sender gives 0;
    ds_bpermute: each lane reads lane (addr >> 2) % 64."""
    n = 128
    x = np.arange(n, dtype=np.int32) + 100
    a = np.random.default_rng(9).integers(0, 64 * 4 * 3, n).astype(np.int32)
    f, b = np.zeros(n, np.int32), np.zeros(n, np.int32)
    run_kernel(permutes, 1, n, x, a, f, b, target="gfx942", workdir=tmp_path)
    want = np.zeros(n, np.int32)
    for t in range(n):  # ascending lanes: a later (higher) sender overwrites
        want[t - t % 64 + (a[t] >> 2) % 64] = x[t]
    np.testing.assert_array_equal(f, want)
    np.testing.assert_array_equal(b, [x[t - t % 64 + (a[t] >> 2) % 64] for t in range(n)])


@pytest.mark.parametrize("op", ["sum", "min", "max", "xor"])
@pytest.mark.parametrize("T", [i32, u32, opus.f32], ids=lambda t: t.name)
def test_reductions_every_width(op, T, tmp_path):
    """warp_reduce's DPP / bpermute ladders for every width of the wave."""
    if op == "xor" and T.is_float:
        pytest.skip("bitwise ops are for integers")
    n = 128
    x = np.random.default_rng(10).integers(0 if T is u32 else -300, 300, n).astype(np.int32)
    widths = X.widths("gfx942")
    prog = HostProgram("gfx942")
    ks = [prog.add(X.reduce_kernel.specialize(target="gfx942", OP=op, W=w, T=T)) for w in widths]
    prog.build(tmp_path)
    outs = [np.zeros(n, np.int32) for _ in widths]
    prog.run([Launch(k, 1, n, [x.copy(), o]) for k, o in zip(ks, outs)])
    for w, o in zip(widths, outs):
        np.testing.assert_array_equal(o, X.ref_reduce(x.astype(np.int64), op, w), err_msg=f"w {w}")


@opus.kernel
def two_bpermutes(x: opus.Ptr[opus.f32], s: opus.Ptr[i32], a: opus.Ptr[opus.f32],
                  b: opus.Ptr[opus.f32]):
    t = opus.thread_id_x()
    a[t] = opus.shfl(x[t], s[t])
    b[t] = opus.shfl_xor(x[t], s[t], width=16)


def test_two_bpermute_helpers_in_one_kernel(tmp_path):
    """Each (mode, width) of a run-time shuffle is its own ds_bpermute helper."""
    n = 64
    rng = np.random.default_rng(11)
    x = rng.integers(-1000, 1000, n).astype(np.float32)
    s = rng.integers(0, 64, n).astype(np.int32)
    a, b = np.zeros(n, np.float32), np.zeros(n, np.float32)
    run_kernel(two_bpermutes, 1, n, x, s, a, b, target="gfx942", workdir=tmp_path)
    np.testing.assert_array_equal(a, X.ref_shuffle(x, s, "idx", 64, 64))
    np.testing.assert_array_equal(b, X.ref_shuffle(x, s, "xor", 16, 64))
