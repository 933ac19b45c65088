"""Bad input to the warp-level shared accesses (opus.ldmatrix, stmatrix, ds_read_tr): an
instruction the chip lacks, the wrong element size, memory that is not shared (or has a bound
the instruction cannot honour), bad num/trans/value, and a launch that is not whole warps. Each
case checks the error type, that the message names the problem (and the chip or argument), the
kernel line (``# ERR: <tag>``), and, for launches, that no output was written."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i8, i32, u16
from expect import raises, unchanged


# -- an instruction the chip does not have ----------------------------------------------------------

@opus.kernel(block=32)
def _st(o: opus.Ptr[f16], TRANS: opus.constexpr = False):
    s = opus.alloc_smem(f16, 256)
    v = opus.make_vector(*[o[i] for i in range(8)])
    opus.stmatrix(s, opus.lane_id() * 8, v, trans=TRANS)  # ERR: st-chip


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_before_sm90(arch, trans):
    x4 = "stmatrix.x4.trans" if trans else "stmatrix.x4"
    with raises(opus.TraceError, f"{x4} is not available on {arch}", "sm_90 or later",
                at="st-chip"):
        _st.source(target=arch, TRANS=trans)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_stmatrix_on_amd(arch):
    with raises(opus.TraceError, f"not available on {arch}", "not an AMD instruction",
                "no transposing LDS store", at="st-chip"):
        _st.source(target=arch)


@opus.kernel(block=64)
def _tr(o: opus.Ptr[f16]):
    s = opus.alloc_smem(f16, 256)
    v = opus.ds_read_tr(s, opus.lane_id() * 4)  # ERR: tr-chip
    o[opus.lane_id()] = v[0]


def test_ds_read_tr_on_gfx942():
    with raises(opus.TraceError, "ds_read_b64_tr_b16 is not available on gfx942", "gfx950",
                at="tr-chip"):
        _tr.source(target="gfx942")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ds_read_tr_on_nvidia(arch):
    with raises(opus.TraceError, f"not available on {arch}", "opus.ldmatrix(..., trans=True)",
                at="tr-chip"):
        _tr.source(target=arch)


def test_ds_read_tr_on_gfx942_in_the_interpreter():
    """The interpreter running as gfx942 refuses it as the compiler would, writing nothing."""
    out = np.zeros(64, np.float16)
    with opus.set_target("gfx942"), unchanged(out), raises(opus.TraceError, "gfx942",
                                                           at="tr-chip"):
        _tr[1, 64](out)


@opus.kernel(block=64)
def _ld_amd(o: opus.Ptr[f16]):
    s = opus.alloc_smem(f16, 256)
    v = opus.ldmatrix(s, opus.lane_id() * 8)  # ERR: ld-amd
    o[opus.lane_id()] = v[0]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_ldmatrix_on_amd(arch):
    with raises(opus.TraceError, f"ldmatrix.x4 is not available on {arch}", "opus.ds_read_tr",
                at="ld-amd"):
        _ld_amd.source(target=arch)


# -- element size ------------------------------------------------------------------------------------

def _ld_of(dtype):
    @opus.kernel(block=32)
    def k(o: opus.Ptr[f32]):
        s = opus.alloc_smem(dtype, 512)
        v = opus.ldmatrix(s, opus.lane_id() * 8)  # ERR: ld-size
        o[opus.lane_id()] = opus.cast(v[0], f32)
    return k


@pytest.mark.parametrize("dtype", [f32, i8, opus.u8, i32, opus.f64, opus.fp8_e4m3], ids=str)
def test_ldmatrix_needs_16_bit_elements(dtype):
    with raises(opus.TraceError, "opus.ldmatrix moves 16-bit elements", f"holds {dtype.name}",
                at="ld-size"):
        _ld_of(dtype).source(target="sm_90a")


@opus.kernel(block=32)
def _st_f32(o: opus.Ptr[f32]):
    s = opus.alloc_smem(f32, 512)
    opus.stmatrix(s, opus.lane_id() * 8, opus.make_vector(o[0], o[1]))  # ERR: st-size


def test_stmatrix_needs_16_bit_elements():
    with raises(opus.TraceError, "opus.stmatrix moves 16-bit elements", "holds f32",
                at="st-size"):
        _st_f32.source(target="sm_90a")


def _tr_of(dtype):
    @opus.kernel(block=64)
    def k(o: opus.Ptr[f32]):
        s = opus.alloc_smem(dtype, 512)
        v = opus.ds_read_tr(s, opus.lane_id() * 2)  # ERR: tr-size
        o[opus.lane_id()] = opus.cast(v[0], f32)
    return k


@pytest.mark.parametrize("dtype", [f32, i32, opus.f64], ids=str)
def test_ds_read_tr_needs_16_or_8_bit_elements(dtype):
    with raises(opus.TraceError, "16-bit or 8-bit elements", f"holds {dtype.name}", at="tr-size"):
        _tr_of(dtype).source(target="gfx950")


# -- memory that is not (plain) shared memory ------------------------------------------------------

@opus.kernel(block=32)
def _ld_global(x: opus.Ptr[f16], o: opus.Ptr[f16], VIEW: opus.constexpr = True):
    g = opus.make_gmem(x) if VIEW else x
    v = opus.ldmatrix(g, opus.lane_id() * 8)  # ERR: ld-global
    o[opus.lane_id()] = v[0]


@pytest.mark.parametrize("view", [True, False], ids=["gmem-view", "global-pointer"])
def test_ldmatrix_of_global_memory(view):
    what = "a gmem view of f16" if view else "a global pointer to f16"
    with raises(opus.TraceError, "opus.ldmatrix reads and writes shared memory only", what,
                at="ld-global"):
        _ld_global.source(target="sm_90a", VIEW=view)


@opus.kernel(block=64)
def _tr_global(x: opus.Ptr[f16], o: opus.Ptr[f16]):
    v = opus.ds_read_tr(opus.make_gmem(x), opus.lane_id() * 4)  # ERR: tr-global
    o[opus.lane_id()] = v[0]


def test_ds_read_tr_of_global_memory():
    with raises(opus.TraceError, "opus.ds_read_tr reads and writes shared memory only",
                "gmem view", at="tr-global"):
        _tr_global.source(target="gfx950")


@opus.kernel(block=32)
def _st_global(x: opus.Ptr[f16]):
    v = opus.make_vector(x[0], x[1])
    opus.stmatrix(x, opus.lane_id() * 8, v)  # ERR: st-global


def test_stmatrix_to_global_memory():
    with raises(opus.TraceError, "opus.stmatrix reads and writes shared memory only",
                "global pointer", at="st-global"):
        _st_global.source(target="sm_90a")


@opus.kernel(block=32)
def _ld_bounded(o: opus.Ptr[f16]):
    s = opus.make_smem(opus.alloc_smem(f16, 256), 200)
    v = opus.ldmatrix(s, opus.lane_id() * 8)  # ERR: ld-bounded
    o[opus.lane_id()] = v[0]


def test_ldmatrix_of_a_bounded_view():
    with raises(opus.TraceError, "has a bound", "no bounds check", "its .ptr", at="ld-bounded"):
        _ld_bounded.source(target="sm_90a")


@opus.kernel(block=32)
def _ld_scalar(o: opus.Ptr[f16]):
    v = opus.ldmatrix(o[0], 0)  # ERR: ld-scalar
    o[opus.lane_id()] = v[0]


def test_ldmatrix_of_a_value():
    with raises(opus.TraceError, "needs an smem view", "run-time f16 value", at="ld-scalar"):
        _ld_scalar.source(target="sm_90a")


# -- bad num, trans, offset and value ----------------------------------------------------------------

@opus.kernel(block=32)
def _ld_args(o: opus.Ptr[f16], NUM: opus.constexpr = 4, TRANS: opus.constexpr = False,
             OFF: opus.constexpr = 0):
    s = opus.alloc_smem(f16, 512)
    v = opus.ldmatrix(s, OFF, num=NUM, trans=TRANS)  # ERR: ld-args
    o[opus.lane_id()] = v[0]


@pytest.mark.parametrize("num", [0, 3, 8, True, 2.0])
def test_ldmatrix_num(num):
    with raises(opus.TraceError, "num must be one of (1, 2, 4)", at="ld-args"):
        _ld_args.source(target="sm_90a", NUM=num)


@pytest.mark.parametrize("trans", [1, "yes", None])
def test_ldmatrix_trans_is_a_bool(trans):
    with raises(opus.TraceError, "trans must be a compile-time bool", at="ld-args"):
        _ld_args.source(target="sm_90a", TRANS=trans)


@pytest.mark.parametrize("off", [1.5, (0, 8)])
def test_ldmatrix_offset_is_an_integer(off):
    with raises(opus.TraceError, "offset must be a scalar integer", at="ld-args"):
        _ld_args.source(target="sm_90a", OFF=off)


@opus.kernel(block=32)
def _st_value(o: opus.Ptr[f16], q: opus.Ptr[u16], KIND: opus.constexpr = "odd"):
    s = opus.alloc_smem(f16, 512)
    if KIND == "odd":
        v = opus.make_vector(o[0], o[1], o[2])
    elif KIND == "long":
        v = opus.make_vector(*[o[i] for i in range(16)])
    elif KIND == "dtype":
        v = opus.make_vector(q[0], q[1])
    else:
        v = o[0]
    opus.stmatrix(s, opus.lane_id() * 8, v)  # ERR: st-value


@pytest.mark.parametrize("kind,got", [("odd", "f16x3"), ("long", "f16x16"), ("dtype", "u16x2"),
                                      ("scalar", "f16")])
def test_stmatrix_value(kind, got):
    with raises(opus.TraceError, "value must be a vector of 2, 4 or 8 f16", got, at="st-value"):
        _st_value.source(target="sm_90a", KIND=kind)


# -- launches that are not whole warps -------------------------------------------------------------

@opus.kernel
def _ld_block(o: opus.Ptr[f16]):
    s = opus.alloc_smem(f16, 512)
    for k in range(16):
        s[k * 32 + opus.lane_id()] = f16(1.0)
    opus.sync_threads()
    v = opus.ldmatrix(s, opus.lane_id() * 8)
    o[opus.thread_id_x()] = v[0]


def test_ldmatrix_block_not_whole_warps():
    out = np.zeros(48, np.float16)
    with opus.set_target("sm_90a"), unchanged(out), raises(
            opus.interp.InterpError, "48 threads", "not a whole number of 32-thread warps"):
        _ld_block[1, 48](out)
