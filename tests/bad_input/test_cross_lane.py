"""Bad input to the cross-lane operations (opus.shfl*, mov_dpp/upd_dpp and opus.dpp, ballot /
any / all, permute / bpermute, warp_reduce / warp_scan): widths that are not powers of two or
exceed the warp, DPP and the forward permute on NVIDIA, DPP controls and masks out of range,
lane indices and masks of the wrong type, reductions of an op a dtype lacks, and the
interpreter's reports of member masks and reads of lanes that do not take part. Each case
checks the error type, that the message names the problem (and argument or chip) and the
kernel line (``# ERR: <tag>``); launches check that the output was not written."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32
from expect import raises, unchanged

NVIDIA = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"]


# -- widths -------------------------------------------------------------------------------------------

@opus.kernel
def _shfl_w(x: opus.Ptr[f32], W: opus.constexpr, FN: opus.constexpr = "shfl"):
    t = opus.thread_id_x()
    x[t] = getattr(opus, FN)(x[t], 1, width=W)  # ERR: width


@pytest.mark.parametrize("fn", ["shfl", "shfl_up", "shfl_down", "shfl_xor"])
@pytest.mark.parametrize("w", [3, 12, 0, -4])
def test_width_not_a_power_of_two(fn, w):
    with raises(opus.TraceError, "width must be a compile-time power of two", f"got int {w}",
                at="width"):
        _shfl_w.source(target="sm_90a", W=w, FN=fn)


@pytest.mark.parametrize("arch,w", [("sm_90a", 64), ("sm_80", 128), ("gfx942", 128)])
def test_width_past_the_warp(arch, w):
    ws = 32 if arch.startswith("sm") else 64
    with raises(opus.TraceError, f"warp size ({ws} on {arch})", f"got int {w}", at="width"):
        _shfl_w.source(target=arch, W=w)


@pytest.mark.parametrize("w", [16.0, True, "32"])
def test_width_not_an_int(w):
    with raises(opus.TraceError, "width must be a compile-time power of two", at="width"):
        _shfl_w.source(target="gfx950", W=w)


@opus.kernel
def _scan_w(x: opus.Ptr[i32], W: opus.constexpr, FN: opus.constexpr = "warp_reduce"):
    t = opus.thread_id_x()
    x[t] = getattr(opus, FN)(x[t], "sum", width=W)  # ERR: reduce-width


@pytest.mark.parametrize("fn", ["warp_reduce", "warp_scan"])
@pytest.mark.parametrize("arch,w", [("sm_90a", 6), ("gfx942", 96)])
def test_reduce_width(fn, arch, w):
    with raises(opus.TraceError, f"opus.{fn}", "width", at="reduce-width"):
        _scan_w.source(target=arch, W=w, FN=fn)


# -- DPP and the forward permute on NVIDIA -------------------------------------------------------------

@opus.kernel
def _dpp(x: opus.Ptr[i32], FN: opus.constexpr = "mov_dpp", C: opus.constexpr = 0xB1,
         RM: opus.constexpr = 0xF, BM: opus.constexpr = 0xF, BC: opus.constexpr = True):
    t = opus.thread_id_x()
    if FN == "mov_dpp":
        x[t] = opus.mov_dpp(x[t], C, row_mask=RM, bank_mask=BM, bound_ctrl=BC)  # ERR: mov
    else:
        x[t] = opus.upd_dpp(x[t] + 1, x[t], C, row_mask=RM, bank_mask=BM, bound_ctrl=BC)  # ERR: upd


@pytest.mark.parametrize("arch", NVIDIA)
@pytest.mark.parametrize("fn,tag", [("mov_dpp", "mov"), ("upd_dpp", "upd")])
def test_dpp_on_nvidia(arch, fn, tag):
    with raises(opus.TraceError, f"opus.{fn} is not available on {arch}", "AMD GFX9",
                "opus.shfl", at=tag):
        _dpp.source(target=arch, FN=fn)


def test_dpp_on_nvidia_in_the_interpreter(cache_root):
    x = np.arange(32, dtype=np.int32)
    with unchanged(x), raises(opus.TraceError, "not available on sm_90a", at="mov"):
        with opus.set_target("sm_90a", interpret=True):
            _dpp[1, 32](x)


@opus.kernel
def _perm(x: opus.Ptr[i32]):
    t = opus.thread_id_x()
    x[t] = opus.permute(x[t], t * 4)  # ERR: permute


@pytest.mark.parametrize("arch", NVIDIA)
def test_forward_permute_on_nvidia(arch):
    with raises(opus.TraceError, f"opus.permute is not available on {arch}", "bpermute",
                at="permute"):
        _perm.source(target=arch)


# -- DPP controls and masks ---------------------------------------------------------------------------

@pytest.mark.parametrize("ctrl", [0x100, 0x110, 0x120, 0x131, 0x144, 0x150, 0x160, -1, 0x200])
@pytest.mark.parametrize("fn,tag", [("mov_dpp", "mov"), ("upd_dpp", "upd")])
def test_dpp_ctrl_out_of_range(ctrl, fn, tag):
    with raises(opus.TraceError, "ctrl must be a compile-time DPP control", "no GFX9 control",
                at=tag):
        _dpp.source(target="gfx942", FN=fn, C=ctrl)


@pytest.mark.parametrize("ctrl", ["row_shr", 1.0, None])
def test_dpp_ctrl_of_a_wrong_type(ctrl):
    with raises(opus.TraceError, "ctrl must be a compile-time DPP control", at="mov"):
        _dpp.source(target="gfx950", C=ctrl)


@pytest.mark.parametrize("build,needle", [
    (lambda: opus.dpp.row_shr(0), "opus.dpp.row_shr: the shift must be"),
    (lambda: opus.dpp.row_shl(16), "opus.dpp.row_shl: the shift must be"),
    (lambda: opus.dpp.row_ror(2.0), "opus.dpp.row_ror: the shift must be"),
    (lambda: opus.dpp.quad_perm(4, 0, 0, 0), "selector must be a compile-time int 0..3"),
    (lambda: opus.dpp.quad_perm(0, 1, 2, -1), "selector must be a compile-time int 0..3")])
def test_dpp_builder_arguments(build, needle):
    with raises(opus.TraceError, needle):
        build()


@pytest.mark.parametrize("kw,needle", [
    ({"RM": 0x10}, "row_mask must be a compile-time int from 0 to 0xf"),
    ({"RM": -1}, "row_mask must be"),
    ({"BM": 16}, "bank_mask must be a compile-time int from 0 to 0xf"),
    ({"BM": 2.5}, "bank_mask must be"),
    ({"BC": 1}, "bound_ctrl must be a compile-time bool"),
    ({"BC": None}, "bound_ctrl must be a compile-time bool")])
def test_dpp_masks(kw, needle):
    with raises(opus.TraceError, needle, at="upd"):
        _dpp.source(target="gfx942", FN="upd_dpp", **kw)


@opus.kernel
def _upd_types(x: opus.Ptr[f32], y: opus.Ptr[i32]):
    t = opus.thread_id_x()
    x[t] = opus.upd_dpp(y[t], x[t], opus.dpp.row_shr(1))  # ERR: old-type


def test_upd_dpp_old_of_another_type():
    with raises(opus.TraceError, "old (i32) and x (f32) must have one type", at="old-type"):
        _upd_types.source(target="gfx942")


# -- lane indices, masks, values ----------------------------------------------------------------------

@opus.kernel
def _lane(x: opus.Ptr[f32], L: opus.constexpr, FN: opus.constexpr = "shfl"):
    t = opus.thread_id_x()
    lane = x[t] if L == "f32" else (opus.make_vector(t, t) if L == "vector" else L)
    x[t] = getattr(opus, FN)(x[t], lane)  # ERR: lane


@pytest.mark.parametrize("fn,name", [("shfl", "the lane"), ("shfl_xor", "the lane"),
                                     ("shfl_up", "delta"), ("shfl_down", "delta"),
                                     ("bpermute", "addr")])
@pytest.mark.parametrize("lane,got", [(1.5, "float 1.5"), ("f32", "f32"), ("vector", "i32x2"),
                                      ("3", "str")])
def test_lane_of_a_wrong_type(fn, name, lane, got):
    with raises(opus.TraceError, f"{name} must be an integer", got, at="lane"):
        _lane.source(target="sm_90a", L=lane, FN=fn)


def test_lane_past_32_bits():
    with raises(opus.TraceError, "does not fit in an i32", at="lane"):
        _lane.source(target="gfx942", L=2 ** 31)


@opus.kernel
def _masked(x: opus.Ptr[f32], M: opus.constexpr):
    t = opus.thread_id_x()
    x[t] = opus.shfl_xor(x[t], 1, mask=M)  # ERR: mask


@pytest.mark.parametrize("arch,m,needle", [
    ("sm_90a", 1 << 32, "is not a 32-bit lane mask"), ("gfx942", 1 << 64, "64-bit lane mask"),
    ("sm_80", -1, "is not a 32-bit lane mask"), ("sm_90a", 1.0, "mask must be a lane mask"),
    ("gfx950", "all", "mask must be a lane mask")])
def test_member_mask_argument(arch, m, needle):
    with raises(opus.TraceError, needle, at="mask"):
        _masked.source(target=arch, M=m)


@opus.kernel
def _vote(x: opus.Ptr[i32], P: opus.constexpr, FN: opus.constexpr = "ballot"):
    t = opus.thread_id_x()
    p = opus.make_vector(t, t) > 0 if P == "vector" else P
    x[t] = i32(getattr(opus, FN)(p))  # ERR: vote


@pytest.mark.parametrize("fn", ["ballot", "any_lanes", "all_lanes", "warp_all", "warp_any"])
@pytest.mark.parametrize("p,needle", [("vector", "the predicate must be a scalar"),
                                      ("yes", "the predicate must be a bool")])
def test_vote_predicate(fn, p, needle):
    with raises(opus.TraceError, needle, at="vote"):
        _vote.source(target="sm_90a", P=p, FN=fn)


@opus.kernel
def _ptr_shfl(x: opus.Ptr[f32]):
    x[0] = opus.shfl(x, 0)  # ERR: ptr


def test_shuffle_of_a_pointer():
    with raises(opus.TraceError, "moves numbers", "ptr", at="ptr"):
        _ptr_shfl.source(target="gfx942")


# -- reductions of an op a dtype lacks -------------------------------------------------------------------

@opus.kernel
def _red(x: opus.Ptr[f32], T: opus.constexpr, OP: opus.constexpr, FN: opus.constexpr = "warp_reduce"):
    t = opus.thread_id_x()
    v = opus.cast(x[t], T)
    x[t] = opus.cast(getattr(opus, FN)(v, OP), f32)  # ERR: reduce-op


@pytest.mark.parametrize("fn", ["warp_reduce", "warp_scan"])
@pytest.mark.parametrize("T,op,needle", [
    (f32, "and", "has no bitwise and"), (f16, "xor", "has no bitwise xor"),
    (opus.f64, "or", "has no bitwise or"), (opus.bool_, "sum", "not bool"),
    (opus.bool_, "max", "not bool"), (i32, "prod", "op must be one of"),
    (i32, "add", "op must be one of")])
def test_reduce_op_the_dtype_lacks(fn, T, op, needle):
    with raises(opus.TraceError, f"opus.{fn}", needle, at="reduce-op"):
        _red.source(target="sm_90a", T=T, OP=op, FN=fn)


@opus.kernel
def _excl(x: opus.Ptr[i32], E: opus.constexpr):
    t = opus.thread_id_x()
    x[t] = opus.warp_scan(x[t], "sum", exclusive=E)  # ERR: exclusive


@pytest.mark.parametrize("e", [1, "yes", None])
def test_scan_exclusive_not_a_bool(e):
    with raises(opus.TraceError, "exclusive must be a compile-time bool", at="exclusive"):
        _excl.source(target="gfx942", E=e)


# -- the interpreter's reports ----------------------------------------------------------------------------

@opus.kernel
def _part(x: opus.Ptr[f32], o: opus.Ptr[f32], MASK: opus.constexpr, LIMIT: opus.constexpr):
    t = opus.thread_id_x()
    if t < LIMIT:
        o[t] = opus.shfl_xor(x[t], 1, mask=MASK)  # ERR: interp-mask


@pytest.mark.parametrize("arch", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("limit,needle", [(1, "does not execute"), (3, "leaves it out")])
def test_member_mask_in_the_interpreter(arch, limit, needle):
    o = np.zeros(64, np.float32)
    with unchanged(o), raises(opus.interp.InterpError, needle, at="interp-mask"):
        with opus.set_target(arch, interpret=True):
            _part[1, 64](np.zeros(64, np.float32), o, MASK=0b11, LIMIT=limit)


@opus.kernel
def _inactive(x: opus.Ptr[f32], o: opus.Ptr[f32], OP: opus.constexpr):
    t = opus.thread_id_x()
    if t % 2 == 0:
        if OP == "shfl":
            o[t] = opus.shfl_down(x[t], 1)  # ERR: inactive-shfl
        else:
            o[t] = opus.warp_reduce(x[t], "max")  # ERR: inactive-reduce


@pytest.mark.parametrize("arch", ["sm_90a", "gfx942", "gfx950"])
@pytest.mark.parametrize("op,tag", [("shfl", "inactive-shfl"), ("reduce", "inactive-reduce")])
def test_read_of_an_inactive_lane_in_checking_mode(arch, op, tag):
    o = np.zeros(64, np.float32)
    with unchanged(o), opus.interp.checking(), raises(opus.interp.InactiveLaneReadError,
                                                       "lane", at=tag):
        with opus.set_target(arch, interpret=True):
            _inactive[1, 64](np.ones(64, np.float32), o, OP=op)
