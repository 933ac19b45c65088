"""The HIP renderer's loop versions (codegen/hip.py ``render_for``): a loop whose bounded global
accesses sit at the induction variable plus a constant is emitted twice, a fast version without
voffset clamps (and without the per-iteration sign test of a run-time step) taken where
conditions checked once before the loop hold, and the general version. The conditions and both
versions' key lines by hand, from ``_iv_ranges``' rule: offsets lie in [lb + c, ub - 1 + c],
which must be within [0, L] (L = 0xfffffff0 // elem size), and ub + step <= 2^31 (the i32
induction variable never wraps). Every version is correct C; these pin which one is chosen."""
import opus
from opus import f32, f64, i32, u8


def _body(kernel, **constexprs):
    src = kernel.source(target="gfx942", **constexprs)
    lines = [l for l in src.splitlines() if not l.lstrip().startswith(("//", "#line"))]
    return lines[next(i for i, l in enumerate(lines) if "_opus(" in l and "void" in l) + 1:]


@opus.kernel
def runtime_step(x: opus.Ptr[f32], y: opus.Ptr[f32], lb: opus.i32, ub: opus.i32,
                 st: opus.i32, n: opus.i32):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(lb, ub, st):
        acc = acc + opus.load(x, i + 2, bound=n)
    y[t] = acc


def test_a_run_time_step_and_an_offset_iv_plus_2():
    """f32 (L = 1073741820): lb + 2 >= 0, ub + 2 <= L + 1, ub + st <= 2^31 and st > 0 (the
    conditions sorted); the fast version steps without a sign test and reads at (i + 2) * 4
    unclamped, the general one keeps both."""
    b = [l.strip() for l in _body(runtime_step)]
    assert b[2] == ("if ((long long)p_lb_3 + 2 >= 0 && (long long)p_ub_4 + (long long)p_st_5 "
                    "<= 2147483648ll && (long long)p_ub_4 + 2 <= 1073741821ll && p_st_5 > 0) {")
    assert b[3] == "for (int i9 = p_lb_3; i9 < p_ub_4; i9 += p_st_5) {"
    assert "(int)((unsigned)v10 * 4u), 0, 0));" in b[6]
    els = b.index("} else {")
    assert b[els + 1] == "int flip15 = p_st_5 > 0 ? (int)0 : (int)~(int)0;"
    assert b[els + 2] == ("for (int i14 = p_lb_3; (int)(i14 ^ flip15) < (int)(p_ub_4 ^ flip15); "
                          "i14 += p_st_5) {")
    assert "(int)(((unsigned)v16 < 1073741820u ? (unsigned)v16 : 1073741820u) * 4u), 0, 0));" \
        in b[els + 5]


@opus.kernel
def stores_back(x: opus.Ptr[f64], lb: opus.i32, ub: opus.i32, n: opus.i32,
                STEP: opus.constexpr):
    for i in opus.range(lb, ub, STEP):
        opus.store(x, opus.f64(1.0), i - 1, bound=n)


def test_a_constant_positive_step_and_a_store_at_iv_minus_1():
    """f64 (L = 536870910), step 2: lb - 1 >= 0, ub - 1 <= L + 1, ub + 2 <= 2^31; no sign test
    in either version (the step is known)."""
    b = [l.strip() for l in _body(stores_back, STEP=2)]
    assert b[0] == ("if ((long long)p_lb_2 + -1 >= 0 && (long long)p_ub_3 + (long long)2 <= "
                    "2147483648ll && (long long)p_ub_3 + -1 <= 536870911ll) {")
    assert b[1] == "for (int i5 = p_lb_2; i5 < p_ub_3; i5 += 2) {"
    assert b[4].endswith("rsrc7, (int)((unsigned)v6 * 8u), 0, 0);")
    assert b[6] == "} else {" and b[7] == "for (int i8 = p_lb_2; i8 < p_ub_3; i8 += 2) {"
    assert b[10].endswith("rsrc10, (int)(((unsigned)v9 < 536870910u ? (unsigned)v9 : 536870910u) "
                          "* 8u), 0, 0);")


def test_a_negative_constant_step_has_one_version():
    """A loop counting down: no range the conditions could establish (they assume a positive
    step), so one loop, clamped."""
    b = [l.strip() for l in _body(stores_back, STEP=-1)]
    assert b[0] == "for (int i5 = p_lb_2; i5 > p_ub_3; i5 += -1) {"
    assert not any(l.startswith(("if (", "} else {")) for l in b)
    assert "(int)(((unsigned)v6 < 536870910u ? (unsigned)v6 : 536870910u) * 8u), 0, 0);" in b[3]


@opus.kernel
def bytes_loop(x: opus.Ptr[u8], y: opus.Ptr[u8], ub: opus.i32, n: opus.i32):
    t = opus.thread_id_x()
    acc = opus.u8(0)
    for i in opus.range(0, ub, 1):
        acc = acc + opus.load(x, i, bound=n)
    y[t] = acc


def test_byte_accesses_need_no_version():
    """u8 with a 32-bit offset and bound: the voffset is the offset itself (a negative one is
    >= 2^31 unsigned, past any 32-bit bound's records), so nothing to version."""
    b = [l.strip() for l in _body(bytes_loop)]
    assert b[2] == "for (int i7 = 0; i7 < p_ub_3; i7 += 1) {"
    assert b[4] == ("unsigned char v9 = __builtin_amdgcn_raw_buffer_load_b8(rsrc8, (int)(unsigned)i7, "
                    "0, 0);")
    assert not any(l.startswith("if (") for l in b)


@opus.kernel
def long_loop(x: opus.Ptr[f32], y: opus.Ptr[f32], ub: opus.i32, st: opus.i32, n: opus.i32):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(0, ub, st):
        for k in range(LONG):          # unrolled: more ops than a versioned loop may hold
            acc = acc * 0.5 + opus.load(x, i + k, bound=n)
    y[t] = acc


LONG = 40


def test_a_loop_of_more_than_128_ops_is_not_versioned_for_its_step():
    """_VERSIONED_LOOP_OPS: a second copy of a long loop costs more than the tests it saves."""
    b = [l.strip() for l in _body(long_loop)]
    assert not any(l.startswith(("if (", "} else {")) for l in b)
    assert any(l.startswith("int flip") for l in b)


@opus.kernel
def mixed(x: opus.Ptr[f32], b: opus.Ptr[u8], d: opus.Ptr[f64], y: opus.Ptr[f32], ub: opus.i32,
          n: opus.i32, s: opus.i32):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(0, ub, 1):
        acc = acc + opus.load(x, t, bound=n)                    # not at the iv: no condition
        acc = acc + opus.f32(opus.load(b, i, bound=n))          # bytes: no condition
        acc = acc + opus.load(x, i + 1, bound=n, soffset=s)     # a scalar offset: none
        acc = acc + opus.f32(opus.load(d, i, bound=n))          # f64 at i: L = 536870910
        acc = acc + opus.load(x, i, bound=n)                    # f32 at the same i
        acc = acc + opus.load(x, i - 3, bound=n)                # f32 at i - 3
    y[t] = acc


def test_the_conditions_of_each_access_at_the_induction_variable():
    """Accesses skipped (not at iv + c, bytes, with a soffset) add nothing and do not stop the
    others; i - 3 gives lb - 3 >= 0 and ub - 3 <= L32 + 1, i gives lb >= 0 (no "+ 0") and
    ub <= L + 1 for f32 and for f64; the offset i, used at both sizes, is unclamped for both in
    the fast version (its limit the smaller, f64's)."""
    b = [l.strip() for l in _body(mixed)]
    assert b[2] == ("if ((long long)0 + -3 >= 0 && (long long)0 >= 0 && (long long)p_ub_5 + "
                    "(long long)1 <= 2147483648ll && (long long)p_ub_5 + -3 <= 1073741821ll && "
                    "(long long)p_ub_5 <= 1073741821ll && (long long)p_ub_5 <= 536870911ll) {")
    fast = b[:b.index("} else {")]
    assert any(l.endswith("raw_buffer_load_b32(rsrc11, (int)(((unsigned)v8 < 1073741820u ? "
                          "(unsigned)v8 : 1073741820u) * 4u), 0, 0));") for l in fast)  # t: clamped
    assert any(l.endswith("raw_buffer_load_b64(rsrc22, (int)((unsigned)i10 * 8u), 0, 0));")
               for l in fast)
    assert any(l.endswith("raw_buffer_load_b32(rsrc26, (int)((unsigned)i10 * 4u), 0, 0));")
               for l in fast)


@opus.kernel
def wide_iv(x: opus.Ptr[f32], y: opus.Ptr[f32], ub: opus.i64, n: opus.i32):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(opus.i64(0), ub, 1):
        acc = acc + opus.load(x, i, bound=n)
    y[t] = acc


@opus.kernel
def packed_loop(q: opus.Ptr[opus.fp4_e2m1], y: opus.Ptr[f32], ub: opus.i32, n: opus.i64):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(0, ub, 2):
        v = opus.cast(opus.load(q, i, vec=2, bound=n), f32)
        acc = acc + v[0] + v[1]
    y[t] = acc


def test_64_bit_induction_variables_and_packed_accesses_are_not_versioned():
    """The range argument needs an i32 induction variable (ub + step <= 2^31); packed types
    are accessed through codegen/subbyte.py, not buffer instructions (with a 64-bit bound, which
    the rule for bytes does not cover)."""
    b = [l.strip() for l in _body(wide_iv)]
    assert b[2] == "for (long long i7 = 0ll; i7 < p_ub_3; i7 += 1ll) {"
    assert not any(l.startswith("if ((long long)") for l in b)
    b = [l.strip() for l in _body(packed_loop)]
    assert b[2] == "for (int i7 = 0; i7 < p_ub_3; i7 += 2) {"
    assert not any(l.startswith("if ((long long)") for l in b)


@opus.kernel
def unit_step(x: opus.Ptr[f32], y: opus.Ptr[f32], ub: opus.i32, n: opus.i32):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(0, ub):
        acc = acc + opus.load(x, i, bound=n)
    y[t] = acc


def test_a_unit_step_is_positive():
    b = [l.strip() for l in _body(unit_step)]
    assert b[2] == ("if ((long long)0 >= 0 && (long long)p_ub_3 + (long long)1 <= 2147483648ll "
                    "&& (long long)p_ub_3 <= 1073741821ll) {")
