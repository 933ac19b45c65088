"""Sub-byte types in generated C (fp4 e2m1, fp6 e2m3/e3m2, int4, uint4): ir/ops.py's register and
memory forms, for every dialect (CEmitter calls these functions with itself as ``em``).

* A scalar is an ``unsigned char`` holding the element's code in its low bits, the others 0.
* A vector of n elements is a struct of words ``{ W w[k]; }`` holding the packed bits, element i
  at bits [i*b, (i+1)*b) (little-endian: element 0 in the low bits of w[0]); W is 32-bit when
  the vector's bytes are a multiple of 4 (fp4x8 is one word, fp4x32 four, fp6x32 the six dwords
  gfx950's packed fp6 instructions take), else 16- or 8-bit. Its alignment is the largest power
  of two dividing its size (<= 16), so its size has no padding and ``bitcast`` through a union
  reads exactly its bytes. Lanes are read by shifts and masks (``packed_lanes``) and written by
  assembling the words (``assign_packed``), so every op that works lane by lane (casts, vector
  building, insert, extract, select, constants) works on packed vectors unchanged.
* Memory is ``unsigned char*``; element offsets become byte offsets (a multiple of pack_elems
  elements, ir/ops.py). A whole access is one load/store of the struct (or of its words, for
  the 3-, 6- and 12-byte fp6 accesses); a bounded access partly past its bound goes byte by
  byte, each byte read or rewritten under the mask of its in-range bits.
* Conversions are exact bit arithmetic with the interpreter's rules (interp/semantics.py):
  decode by placing the code's bits in an f32 and scaling by a power of two; encode by
  rounding to nearest even, values past the largest finite one giving it (fp4/fp6 have no inf
  or NaN), NaN giving the zero of the opposite sign.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import VectorType, scalar_of

__all__ = ["packed_struct", "packed_lanes", "assign_packed", "cast_packed", "packed_byte_offset",
           "render_packed_load", "render_packed_store", "render_packed_cast", "small_float_format"]

_WORD = {4: "unsigned", 2: "unsigned short", 1: "unsigned char"}


def small_float_format(d):
    """(mantissa bits, exponent bias, largest finite code) of fp4/fp6 type ``d``."""
    m = {"fp4_e2m1": 1, "fp6_e2m3": 3, "fp6_e3m2": 2}[d.name]
    e = d.bits - 1 - m
    return m, (1 << (e - 1)) - 1, (1 << (d.bits - 1)) - 1


def _word_bytes(nbytes):
    """Bytes of one word of a packed vector (or access) of ``nbytes``: 4, 2 or 1."""
    return 4 if nbytes % 4 == 0 else 2 if nbytes % 2 == 0 else 1


# -- register form -----------------------------------------------------------------------
def packed_struct(em, t):
    """The C struct of packed vector type ``t``."""
    nbytes = t.elem.nbytes(t.n)
    wb = _word_bytes(nbytes)
    align = min(16, nbytes & -nbytes)
    return (f"struct {em.align_attr.format(align)} opus_{t.elem.name}x{t.n} "
            f"{{ {_WORD[wb]} w[{nbytes // wb}]; }};")


def packed_lanes(name, t):
    """C expressions (unsigned char codes) of each element of packed vector ``name``."""
    b = t.elem.bits
    W = 8 * _word_bytes(t.elem.nbytes(t.n))
    mask = (1 << b) - 1
    out = []
    for i in range(t.n):
        k, s = divmod(i * b, W)
        x = f"((unsigned){name}.w[{k}] >> {s})" if s else f"(unsigned){name}.w[{k}]"
        if s + b > W:  # the field continues in the next word
            x = f"({x} | ((unsigned){name}.w[{k + 1}] << {W - s}))"
        out.append(f"(unsigned char)({x} & {mask}u)")
    return out


def assign_packed(em, v, exprs, indent):
    """Define packed vector v from its elements' codes (C expressions with clear high bits)."""
    t = v.type
    n = em.declare(v, indent)
    b = t.elem.bits
    W = 8 * _word_bytes(t.elem.nbytes(t.n))
    words = [[] for _ in range(t.elem.nbytes(t.n) * 8 // W)]
    for i, x in enumerate(exprs):
        k, s = divmod(i * b, W)
        words[k].append(f"((unsigned)({x}) << {s})" if s else f"(unsigned)({x})")
        if s + b > W:
            words[k + 1].append(f"((unsigned)({x}) >> {W - s})")
    ct = _WORD[W // 8]
    for k, parts in enumerate(words):
        em.line(indent, f"{n}.w[{k}] = ({ct})({' | '.join(parts)});")


# -- conversions ---------------------------------------------------------------------------
def cast_packed(em, x, src, to, rounding, sat):
    """One lane from or to a sub-byte type (exact: module docstring)."""
    if src.packed:
        if src.is_int:
            v = f"((int)(signed char)((unsigned)({x}) << 4) >> 4)" if src.kind == "int" \
                else f"(int)({x})"
            return v if to.name == "i32" else em.cast_expr(v, dt.i32, to, rounding, sat)
        f = f"{_small_decoder(em, src)}({x})"
        return f if to.name == "f32" else em.cast_expr(f, dt.f32, to, rounding, sat)
    if to.is_int:  # int4/uint4: integers wrap into them, floats truncate and saturate first
        mask = (1 << to.bits) - 1
        if src.is_int:
            return f"(unsigned char)((unsigned long long)({x}) & {mask}u)"
        lo, hi = to.int_range()
        i = em.cast_expr(x, src, dt.i32, "rn", False)
        return f"(unsigned char)((unsigned)(({i}) < {lo} ? {lo} : (({i}) > {hi} ? {hi} : ({i}))) & {mask}u)"
    f = x if src.name == "f32" else em.cast_expr(x, src, dt.f32, "rn", False)
    return f"{_small_encoder(em, to)}({f})"


def _small_decoder(em, d):
    """opus_<d>_to_f32(c): the code's magnitude bits placed in an f32 (subnormals too) and
    scaled by 2^(127-bias): exact."""
    m, bias, _ = small_float_format(d)
    n = f"opus_{d.name}_to_f32"
    mag = f"(c & {(1 << (d.bits - 1)) - 1}u)"
    v = f"{em.bits_to_f32(f'({mag} << {23 - m})')} * {float(2.0 ** (127 - bias)).hex()}f"
    return em.helper(n, f"float {n}(unsigned char c) {{ float v = {v}; "
                          f"return (c >> {d.bits - 1}) ? -v : v; }}")


def _grid_code(em, d, f, i=""):
    """(C statements, C expression, offset): the code of |f| in small float type ``d``
    (nearest even, saturating; NaN not handled) is ``expression - offset`` (mod 2^32). The
    statements declare ``a{i}`` and ``p{i}``.

    Branch-free, one rounding: a = min(|f|, largest) lies in binade e >= emin (the subnormals
    share emin's step), where d's values are the multiples of 2^(e-m). The fma adds a to
    M = 2^(e+23-m), whose f32 step is exactly 2^(e-m), so the sum rounds a to d's grid (nearest
    even, a carry into the next binade included) and its bits exceed M's by k = a / 2^(e-m)
    rounded; the code is k + ((e - emin) << m)."""
    m, bias, _ = small_float_format(d)
    sh = 23 - m
    top_value = float((2 - 2.0 ** -m) * 2.0 ** ((1 << (d.bits - 1 - m)) - 1 - bias))
    fmin, fmax, fma, fabs = (em.float_fn(g, dt.f32) for g in ("fmin", "fmax", "fma", "fabs"))
    a, p = f"a{i}", f"p{i}"
    binade = f"{fmax}({a}, {float(2.0 ** (1 - bias)).hex()}f)"  # emin's 2^emin below it
    rounded = em.f32_to_bits(f"{fma}({em.bits_to_f32(p)}, {float(2.0 ** sh).hex()}f, {a})")
    stmts = (f"float {a} = {fmin}({fabs}({f}), {top_value.hex()}f); "
             f"unsigned {p} = {em.f32_to_bits(binade)} & 0x7F800000u; ")
    # M's bits over 2^e's, and emin's (e + 127) << m
    return stmts, f"({rounded} - {p} + ({p} >> {sh}))", (sh << 23) + ((128 - bias) << m)


def _signed(d, u):
    """C expression: the sign bit of f32 bits ``u`` in place in a code of small float type d."""
    return f"(({u} >> {32 - d.bits}) & {1 << (d.bits - 1)}u)"


def _small_encoder(em, d):
    """opus_f32_to_<d>(f): nearest even; |f| at or past the largest finite value (inf too)
    gives it with f's sign; NaN the zero of the opposite sign (interp/semantics.py)."""
    n = f"opus_f32_to_{d.name}"
    stmts, code, offset = _grid_code(em, d, "f")
    body = (f"unsigned s = {_signed(d, em.f32_to_bits('f'))}; {stmts}"
            f"return (unsigned char)(f != f ? s ^ {1 << (d.bits - 1)}u : s | ({code} - {offset}u));")
    return em.helper(n, f"unsigned char {n}(float f) {{ {body} }}")


def _fp4_word_encoder(em):
    """opus_f32x8_to_fp4_e2m1x8(f0..f7): the word of eight fp4 codes (f0 in the low nibble),
    each as _small_encoder's: the codes summed into place, their offsets taken off once, the
    signs or-ed in. A NaN lane comes out as +-6 (min(NaN, 6) is 6); when there is one (rare),
    its nibble is replaced by the NaN code (found by the bits, so that the compiler keeps the
    check of the eight lanes apart from the fix and pairs it up: one FSETP per two lanes)."""
    d = dt.fp4_e2m1
    n = "opus_f32x8_to_fp4_e2m1x8"
    fs = [f"f{i}" for i in range(8)]
    # each half's four codes summed at bits 16-31, where the code's 2^e terms (bit 23 up)
    # shift out of the word: the compiler drops them
    body, halves = [], []
    for lanes in (range(4), range(4, 8)):
        sums, total = [], 0
        for i in lanes:
            stmts, code, offset = _grid_code(em, d, fs[i], i)
            body.append(stmts)
            sums.append(f"({code} << {16 + 4 * (i % 4)})")
            total += offset << (16 + 4 * (i % 4))
        halves.append(f"({' + '.join(sums)} - {total & 0xFFFFFFFF}u)")
    body.append(f"unsigned w = ({halves[0]} >> 16) | {halves[1]} | {_fp4_signs(em, fs)};")
    fix = " ".join(f"u = {em.f32_to_bits(f)}; if ((u & 0x7FFFFFFFu) > 0x7F800000u) "
                   f"w = (w & ~{15 << (4 * i)}u) | (({_signed(d, 'u')} ^ 8u) << {4 * i});"
                   for i, f in enumerate(fs))
    ordered = " && ".join(f"({a} == {a} && {b} == {b})" for a, b in zip(fs[0::2], fs[1::2]))
    body.append(f"if (!({ordered})) {{ unsigned u; {fix} }}")
    body.append("return w;")
    params = ", ".join(f"float {f}" for f in fs)
    return em.helper(n, f"unsigned {n}({params}) {{ {' '.join(body)} }}")


def _fp4_signs(em, fs):
    """C expression: the sign bits of f32 lanes ``fs`` (eight) at bits 4i + 3. With a byte
    permute (CUDA's PRMT) the top bytes of the even lanes and of the odd ones are gathered into a
    word each (three permutes), whose byte sign bits are then 4 bits too high and in place;
    else each sign is shifted and masked on its own."""
    u = [em.f32_to_bits(f) for f in fs]
    if em.byte_perm is None:
        return " | ".join(f"(({x} >> {28 - 4 * i}) & {8 << (4 * i)}u)" if i < 7 else
                          f"({x} & 0x80000000u)" for i, x in enumerate(u))
    perm = em.byte_perm.format
    tops = [perm(perm(u[j], u[j + 2], "0x0073u"), perm(u[j + 4], u[j + 6], "0x7300u"), "0x7610u")
            for j in (0, 1)]
    return f"((({tops[0]}) >> 4) & 0x08080808u) | (({tops[1]}) & 0x80808080u)"


def render_packed_cast(em, op, indent):
    """Casts of float vectors to fp4 (nearest even, 8k lanes): one word per eight lanes
    (_fp4_word_encoder). Returns False for every other cast (left to the lane-by-lane path)."""
    a, r = op.operands[0], op.results[0]
    src, to = scalar_of(a.type), op.attrs["to"]
    if (to is not dt.fp4_e2m1 or len(op.operands) != 1 or op.attrs["rounding"] != "rn"
            or not isinstance(r.type, VectorType) or r.type.n % 8 or not src.is_float
            or src.storage_only):
        return False
    fs = [x if src.name == "f32" else em.cast_expr(x, src, dt.f32, "rn", False)
          for x in em.lanes(a)]
    v = em.declare(r, indent)
    enc = _fp4_word_encoder(em)
    for k in range(r.type.n // 8):
        em.line(indent, f"{v}.w[{k}] = {enc}({', '.join(fs[8 * k:8 * k + 8])});")
    return True


# -- memory ----------------------------------------------------------------------------------
def packed_byte_offset(off_c, e):
    """C expression: the byte offset of element offset ``off_c`` (a multiple of pack_elems)."""
    per, nb = e.pack_elems, e.nbytes(e.pack_elems)
    q = f"({off_c}) / {per}" if per > 1 else f"({off_c})"
    return f"(({q}) * {nb})" if nb > 1 else f"({q})"


def _packed_whole(em, kind, vt, addr, nbytes, value, hint):
    """Lines of a whole packed access (load into / store from ``value``) at byte ``addr``:
    one access of the struct when its size is a power of two, else one per word."""
    wb = _word_bytes(nbytes)
    if nbytes & (nbytes - 1) == 0:
        parts = [(addr, vt, nbytes, value)]
    else:
        parts = [(f"{addr} + {j * wb}" if j else addr, _WORD[wb], wb, f"{value}.w[{j}]")
                 for j in range(nbytes // wb)]
    out = []
    for a, ct, nb, v in parts:
        if kind == "load":
            e = (f"*(const {ct}*)({a})" if hint is None else em.load_expr(a, ct, nb, hint))
            out.append(f"{v} = {e};")
        else:
            out.append(f"*({ct}*)({a}) = {v};" if hint is None else
                       em.store_stmt(a, v, ct, nb, hint))
    return out


def _byte_masks(em, e, vec, off_c, bound_c):
    """For each byte of a vec access at element ``off_c`` with bound ``bound_c``: the C
    expression of the mask of its bits whose elements lie in [0, bound)."""
    from .cemit import _lane_in
    b = e.bits
    masks = []
    for j in range(e.nbytes(vec)):
        terms = []
        for i in range(vec):
            lo, hi = max(i * b, 8 * j), min((i + 1) * b, 8 * j + 8)
            if lo < hi:
                bits = ((1 << (hi - lo)) - 1) << (lo - 8 * j)
                terms.append(f"(({_lane_in(off_c, bound_c, i)}) ? {bits}u : 0u)")
        masks.append(f"(unsigned char)({' | '.join(terms)})")
    return masks


def _render_packed_access(em, op, indent, vt, value, partial_bytes):
    """A packed load or store: the whole access, or with a bound, the whole access where every
    element is in range and else one statement per byte (``partial_bytes(j, mask, at)`` gives
    byte j's, ``mask`` its in-range bits, ``at`` its address as an lvalue) around a union
    ``u`` of the vector and its bytes (``value``: the vector's C name, loaded into or stored)."""
    p, off_c, bound, hint = em._access(op, indent)
    off = op.operands[1] if not op.attrs.get("soffset") else off_c
    vec, e = op.attrs["vec"], p.type.elem
    nbytes = e.nbytes(vec)
    addr = f"{em.name(p)} + {packed_byte_offset(off_c, e)}"
    whole = _packed_whole(em, op.kind, vt, addr, nbytes, value, hint)
    if bound is None:
        for text in whole:
            em.line(indent, text)
        return
    em.line(indent, f"if ({em._whole_vector_in(off, off_c, bound, vec)}) {{")
    for text in whole:
        em.line(indent + 1, text)
    em.line(indent, "} else {")
    u = em.fresh(prefix="pk")
    em.line(indent + 1, f"union {{ {vt} v; unsigned char b[{nbytes}]; }} {u};"
            + (f" {u}.v = {value};" if op.kind == "store" else ""))
    for j, m in enumerate(_byte_masks(em, e, vec, off_c, em.name(bound))):
        at = f"((unsigned char*)({addr}))[{j}]"
        em.line(indent + 1, f"{{ unsigned char m = {m}; {partial_bytes(f'{u}.b[{j}]', at)} }}")
    if op.kind == "load":
        em.line(indent + 1, f"{value} = {u}.v;")
    em.line(indent, "}")


def render_packed_load(em, op, indent):
    """Bytes past the bound read as 0 bits."""
    r = op.results[0]
    n = em.declare(r, indent)
    _render_packed_access(em, op, indent, em.ctype(r.type), n,
                          lambda b, at: f"{b} = m ? (unsigned char)({at} & m) : 0;")


def render_packed_store(em, op, indent):
    """Each byte: its in-range bits rewritten, the others kept (a read-modify-write)."""
    val = op.operands[2]
    _render_packed_access(em, op, indent, em.ctype(val.type), em.name(val),
                          lambda b, at: f"if (m) {at} = (unsigned char)(({at} & ~m) | ({b} & m));")
