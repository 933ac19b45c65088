"""Cross-lane operations in the generated code: the SASS instructions NVRTC makes of them
(SHFL.IDX/UP/DOWN/BFLY, VOTE, REDUX), the AMDGCN clang makes (ds_bpermute_b32, ds_permute_b32,
DPP quad_perm / row_shr / row_bcast / row_mirror, v_readlane_b32), and GPU runs of the NVIDIA
paths against the numpy references of test_cross_lane_interp.py (marked gpu)."""
import os
import re
import sys

import numpy as np
import pytest

import opus
from opus import f32, i32, u32

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "amd"))
import test_cross_lane_interp as X  # noqa: E402


def sass_lines(kernel, **cx):
    return [l for l in kernel.specialize(target="sm_90a", **cx).sass.splitlines() if "/*0" in l]


def amd_instrs(kernel, arch="gfx942", **cx):
    from test_amd_target import asm_of, instrs
    return instrs(asm_of(kernel, arch, **cx))


def count(lines, pattern):
    return sum(1 for l in lines if re.search(pattern, l))


# -- NVIDIA ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,sass", [("idx", "SHFL.IDX"), ("up", "SHFL.UP"),
                                       ("down", "SHFL.DOWN"), ("xor", "SHFL.BFLY")])
def test_shuffle_sass(mode, sass):
    lines = sass_lines(X.shuffle_kernel, MODE=mode, W=16)
    assert count(lines, re.escape(sass)) == 1, lines


def test_reduce_sass_butterfly_and_redux():
    """An f32 warp sum: 5 SHFL.BFLY + 5 FADD; an i32 sum: one REDUX (sm_80+), no shuffle."""
    f = sass_lines(X.reduce_kernel, OP="sum", W=32, T=f32)
    assert count(f, r"SHFL\.BFLY") == 5 and count(f, r"\bFADD\b") == 5, f
    i = sass_lines(X.reduce_kernel, OP="sum", W=32, T=i32)
    assert count(i, r"\bREDUX\b") == 1 and count(i, "SHFL") == 0, i
    narrow = sass_lines(X.reduce_kernel, OP="max", W=8, T=i32)  # groups: butterfly, no REDUX
    assert count(narrow, r"SHFL\.BFLY") == 3 and count(narrow, "REDUX") == 0, narrow


def test_vote_sass():
    lines = sass_lines(X.vote_kernel, M=32)
    assert count(lines, r"VOTE\.ANY") >= 1 and count(lines, r"VOTE\.ALL") >= 1, lines


def test_scan_sass_uses_shfl_up():
    lines = sass_lines(X.reduce_kernel, OP="sum", W=32, T=i32, SCAN="inclusive")
    assert count(lines, r"SHFL\.UP") == 5, lines


# -- AMD ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_runtime_shuffle_is_ds_bpermute(arch):
    ins = amd_instrs(X.shuffle_kernel, arch, MODE="xor", W=64)
    assert count(ins, r"^ds_bpermute_b32") == 1, ins


@pytest.mark.parametrize("mode,src,w,pattern", [
    ("xor", 1, 64, r"quad_perm:\[1,0,3,2\]"), ("xor", 2, 64, r"quad_perm:\[2,3,0,1\]"),
    ("xor", 8, 16, r"row_ror:8"), ("up", 3, 16, r"row_shr:3"), ("down", 2, 16, r"row_shl:2"),
    ("up", 1, 64, r"wave_shr:1"), ("idx", 7, 64, r"^v_readlane_b32")])
def test_compile_time_shuffles_use_dpp(mode, src, w, pattern):
    ins = amd_instrs(X.shuffle_kernel, MODE=mode, W=w, STATIC=src)
    assert count(ins, pattern) == 1 and count(ins, "ds_bpermute") == 0, ins


def test_reduce_amdgcn_dpp_ladder():
    """A 64-lane f32 sum: DPP quad_perm x2, row_half_mirror, row_mirror fused into v_add_f32,
    row_bcast:15 and :31, one readlane; no LDS round trip."""
    ins = amd_instrs(X.reduce_kernel, OP="sum", W=64, T=f32)
    for p in (r"v_add_f32_dpp.*quad_perm:\[1,0,3,2\]", r"v_add_f32_dpp.*quad_perm:\[2,3,0,1\]",
              r"v_add_f32_dpp.*row_half_mirror", r"v_add_f32_dpp.*row_mirror", r"row_bcast:15",
              r"row_bcast:31", r"^v_readlane_b32"):
        assert count(ins, p) == 1, (p, ins)
    assert count(ins, "ds_bpermute") == 0


def test_scan_amdgcn_row_shr():
    ins = amd_instrs(X.reduce_kernel, OP="sum", W=64, T=i32, SCAN="inclusive")
    for k in (1, 2, 4, 8):
        assert count(ins, rf"row_shr:{k}\b") == 1, (k, ins)
    assert count(ins, r"row_bcast:15") == 1 and count(ins, r"row_bcast:31") == 1


def test_permute_and_ballot_amdgcn():
    @opus.kernel
    def k(x: opus.Ptr[i32], o: opus.Ptr[i32], b: opus.Ptr[opus.u64]):
        t = opus.thread_id_x()
        o[t] = opus.permute(x[t], x[t] * 4)
        b[t] = opus.ballot(x[t] > 3)

    ins = amd_instrs(k)
    assert count(ins, r"^ds_permute_b32") == 1 and count(ins, r"^v_cmp_\w+_e64 s\[") >= 1, ins


@pytest.mark.parametrize("ctrl,asm", [(0xb1, r"quad_perm:\[1,0,3,2\]"), (260, r"row_shl:4"),
                                      (276, r"row_shr:4"), (0x13C, r"wave_ror:1"),
                                      (0x141, r"row_half_mirror")])
def test_upd_dpp_raw_numbers(ctrl, asm):
    """The original's raw dpp_ctrl numbers reach the DPP modifier they name, with the masks."""
    ins = amd_instrs(X.dpp_kernel, C=ctrl, RM=0xF, BM=0x5, BC=False)
    assert count(ins, asm + r".*bank_mask:0x5") == 1, ins


# -- on the GPU (NVIDIA): the same references as the interpreter tests ------------------------------

def _gpu(kernel, grid, block, arrays, **cx):
    from opus.runtime.device_array import DeviceArray
    dev = [DeviceArray.from_numpy(a) for a in arrays]
    with opus.set_target(opus.current_target().target.name, interpret=False):
        kernel[grid, block](*dev, **cx)
    return [d.to_numpy() for d in dev]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["idx", "up", "down", "xor"])
@pytest.mark.parametrize("static", [None, 1, 3])
def test_gpu_shuffles(mode, static):
    n = 128
    x = X.RNG.integers(-1000, 1000, n).astype(np.float32)
    s = X.RNG.integers(-96, 96, n).astype(np.int32)
    for w in (1, 2, 4, 8, 16, 32):
        o = _gpu(X.shuffle_kernel, 2, 64, [x, s, np.zeros(n, np.float32)], MODE=mode, W=w,
                 STATIC=static)[2]
        src = s if static is None else np.full(n, static)
        np.testing.assert_array_equal(o, X.ref_shuffle(x, src, mode, w, 32), err_msg=f"w {w}")


@pytest.mark.gpu
def test_gpu_divergent_shuffle():
    n = 64
    active = np.arange(n) % 3 != 0
    x = np.arange(n, dtype=np.float32) + 1
    src = np.array([X.RNG.choice([l for l in range(32) if active[t - t % 32 + l]])
                    for t in range(n)], np.int32)
    o = _gpu(X.divergent_kernel, 1, n, [x, src, np.zeros(n, np.float32)])[2]
    want = np.where(active, X.ref_shuffle(x, src, "idx", 32, 32, active), -1)
    np.testing.assert_array_equal(o, want)


@pytest.mark.gpu
def test_gpu_votes():
    n = 64
    active = np.arange(n) % 4 != 3
    p = X.RNG.integers(0, 2, n).astype(np.int32)
    ob, oa = _gpu(X.vote_kernel, 1, n, [p, np.zeros(2 * n, np.uint32), np.zeros(3 * n, np.int32)],
                  M=32)[1:]
    for w in range(2):
        lanes = [t for t in range(32 * w, 32 * w + 32) if active[t]]
        ballot = sum(1 << (t % 32) for t in lanes if p[t])
        amask = sum(1 << (t % 32) for t in lanes)
        for t in lanes:
            assert [int(ob[2 * t]), int(ob[2 * t + 1])] == [ballot, amask]
            anyp, allp = int(any(p[u] for u in lanes)), int(all(p[u] for u in lanes))
            assert list(oa[3 * t:3 * t + 3]) == [anyp, allp, allp]


@pytest.mark.gpu
@pytest.mark.parametrize("op", list(X.NP_OPS))
@pytest.mark.parametrize("T", [i32, u32, f32])
@pytest.mark.parametrize("scan", [None, "inclusive", "exclusive"])
def test_gpu_reduce_and_scan(op, T, scan):
    if op in ("and", "or", "xor") and T == f32:
        pytest.skip("integers only")
    n = 128
    x = X.RNG.integers(0 if T == u32 else -300, 300, n).astype(np.int32)
    identity = {"sum": 0, "max": -2 ** 31, "min": 2 ** 31 - 1, "xor": 0, "and": -1, "or": 0}[op]
    if T == u32:
        identity = {"max": 0, "min": -1}.get(op, identity)
    for w in (2, 8, 32):
        o = _gpu(X.reduce_kernel, 1, n, [x, np.zeros(n, np.int32)], OP=op, W=w, T=T,
                 SCAN=scan)[1]
        want = X.ref_reduce(x.astype(np.int64), op, w, scan, identity)
        np.testing.assert_array_equal(o, want.astype(np.int32), err_msg=f"w {w}")


@pytest.mark.gpu
def test_gpu_lane_masks_and_bpermute():
    n = 64
    x = X.RNG.normal(size=n).astype(np.float32)
    a = X.RNG.integers(0, 512, n).astype(np.int32)

    @opus.kernel
    def k(x: opus.Ptr[f32], a: opus.Ptr[i32], o: opus.Ptr[f32], m: opus.Ptr[u32]):
        t = opus.thread_id_x()
        o[t] = opus.bpermute(x[t], a[t])
        m[2 * t] = opus.lanemask_lt()
        m[2 * t + 1] = opus.lanemask_ge()

    o, m = _gpu(k, 1, n, [x, a, np.zeros(n, np.float32), np.zeros(2 * n, np.uint32)])[2:]
    np.testing.assert_array_equal(o, [x[t - t % 32 + (a[t] >> 2) % 32] for t in range(n)])
    lane = np.arange(n) % 32
    np.testing.assert_array_equal(m[0::2], ((1 << lane) - 1).astype(np.uint32))
    np.testing.assert_array_equal(m[1::2], (~((1 << lane) - 1)).astype(np.uint32))
