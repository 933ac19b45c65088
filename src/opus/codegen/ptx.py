"""PTX bodies: a kernel rendered as PTX inside one CUDA C++ shell (``@opus.kernel(body="ptx")``).

docs/ptx_body.md has the design and the measurements that chose it. The shell is the CUDA
dialect's (codegen/cuda.py): the same signature, launch bounds and shared declarations; its body
is one ``asm volatile("{ ... }" :: inputs : "memory")`` whose inputs are the kernel's
parameters and the shared arrays' 32-bit shared-window addresses. Inside, ``PtxBody`` walks the
IR once and writes PTX:

* every SSA value is one register per lane: ``%ob<N>`` .b32 (i32/u32, and i8/i16/u8/u16 held
  sign- or zero-extended, so compares, division and shifts work on 32 bits and only + - * and
  the like re-narrow their result), ``%od<N>`` .b64 (64-bit integers, global pointers),
  ``%of<N>`` .f32, ``%ofd<N>`` .f64, ``%oh<N>`` .b16 (f16/bf16 bits), ``%op<N>`` .pred (bool);
  a shared pointer is a .b32 shared-window address. Vectors are lists of lane registers, so
  building, slicing and permuting them renames and emits nothing;
* integer and 32/64-bit float constants are immediates (f16/bf16 and bool ones a register);
* structured control flow becomes labels ``$O<N>`` and branches; a ``for``/``while`` gets one
  register per carried lane, which its ``yield`` writes.

Semantics are the IR's (ir/ops.py) exactly as cemit renders them: integer + - * wrap, floor
division and modulo with the sign fix-up and the by-zero/-1 rules, shifts by >= the width,
exact per-element bounds, f16/bf16 computed in f32 and rounded once, float arithmetic with
explicit ``.rn`` (PTX may fuse a mul and an add without it: the IR forbids that, as NVRTC's
``--fmad=false`` does for the C++ body). The op kinds rendered are targets/ptx_body.py's
table, which tracing enforces; one ``render_<kind>`` per kind, dispatched by one table.
"""
from __future__ import annotations

import struct

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import VectorType, PointerType, TensorMapType, scalar_of, op_handlers, access_operands
from .cemit import CodegenError, _located, _to_f32, _python_line_comment
from .cuda import CudaEmitter
from .tma import ptx_tma
from ..targets.nv_wgmma import WgmmaControl, wgmma_text

__all__ = ["PtxBody", "PtxShellEmitter", "render_ptx_shell"]

# register class of each scalar type, and the name prefix of its registers
_CLASS = {"bool": "pred", "f16": "b16", "bf16": "b16", "f32": "f32", "f64": "f64",
          "i64": "b64", "u64": "b64"}
_PREFIX = {"pred": "%op", "b16": "%oh", "b32": "%ob", "b64": "%od", "f32": "%of", "f64": "%ofd"}
_MOV = {"pred": "mov.pred", "b16": "mov.b16", "b32": "mov.b32", "b64": "mov.b64",
        "f32": "mov.f32", "f64": "mov.f64"}
_HALF = ("f16", "bf16")
# ld/st type of one element in memory (narrow integers load into .b32 registers, extended)
_MEM = {"bool": "u8", "i8": "s8", "u8": "u8", "i16": "s16", "u16": "u16", "i32": "s32",
        "u32": "u32", "i64": "s64", "u64": "u64", "f32": "f32", "f64": "f64", "f16": "b16",
        "bf16": "b16"}
_ST = {**{n: f"b{dt.dtype_from_name(n).bits}" for n in "i8 u8 i16 u16 i32 u32 i64 u64".split()},
       "bool": "b8", "f32": "f32", "f64": "f64", "f16": "b16", "bf16": "b16"}
_SPECIAL = {"thread_id": "%tid", "block_id": "%ctaid", "block_dim": "%ntid",
            "num_blocks": "%nctaid"}
_MATH = {"floor": "cvt.rmi", "ceil": "cvt.rpi", "trunc": "cvt.rzi", "rint": "cvt.rni"}


def _reg_class(t) -> str:
    if isinstance(t, PointerType):
        return "b32" if t.space == "shared" else "b64"
    return _CLASS.get(scalar_of(t).name, "b32")


def _wide(e: DType) -> int:
    """The register width integer type ``e`` computes in (narrow types in 32 bits)."""
    return 64 if e.bits == 64 else 32


def unsigned_magic(d, n):
    """(m, shift, add) with x // d == (mulhi(x, m) >> shift) for every n-bit unsigned x, or,
    where add, == ((t + ((x - t) >> 1)) >> shift) with t = mulhi(x, m); 2 <= d < 2**n."""
    lg = (d - 1).bit_length()                  # ceil(log2 d)
    for p in range(n, n + lg + 1):             # the smallest multiplier that is exact
        m = -(-(1 << p) // d)
        if m < (1 << n) and m * d - (1 << p) <= (1 << (p - n)):
            return m, p - n, False
    return ((1 << n) * ((1 << lg) - d)) // d + 1, lg - 1, True


def signed_magic(d, n):
    """(m, shift): the n-bit signed multiplier with x / |d| truncated == ((x + mulhi(x, m)) >>
    shift) - (x >> (n - 1)) for every n-bit signed x; 2 <= |d| <= 2**(n-1)."""
    lg = max((abs(d) - 1).bit_length(), 1)
    return 1 + (1 << (n + lg - 1)) // abs(d) - (1 << n), lg - 1


def _ity(e: DType) -> str:
    """PTX integer type of ``e``'s arithmetic: s32/u32/s64/u64."""
    return ("s" if e.kind == "int" else "u") + str(_wide(e))


def _narrow_int(e: DType) -> bool:
    return e.is_int and not e.is_bool and e.bits < 32


class PtxBody:
    """The PTX lines of one Function's body. ``inputs``: {Value: [operand index per lane]}, the
    asm operands holding the parameters and shared arrays; their registers are filled first.
    ``dyn_smem_input``: the operand holding dynamic shared memory's address (None: unused)."""

    def __init__(self, fn, target, inputs, dyn_smem_input=None):
        self.fn, self.target, self.inputs = fn, target, inputs
        self.dyn_smem_input = dyn_smem_input
        self.dyn_smem_base = None  # its register
        self.names = {}      # Value -> [operand per lane: register or immediate]
        self.counts = {c: 0 for c in _PREFIX}
        self.labels = 0
        self.lines = []
        self.loc = None
        self.shown = None    # the kernel line the last comment named
        self.pending = None  # its comment, written before the line's first instruction
        self.exit_label = self.label()
        self.program = None  # _ProgramOrder (dies_here), made when first asked
        self.quotients = {}  # (x, y, type) -> the register of div x, y (quotient)
        self.renderers = op_handlers(self, "render_")  # op kind -> render_<kind>

    # -- registers, immediates, labels ---------------------------------------------------------
    def new(self, cls) -> str:
        self.counts[cls] += 1
        return f"{_PREFIX[cls]}{self.counts[cls]}"

    def new_of(self, e) -> str:
        return self.new(_reg_class(e))

    def label(self) -> str:
        self.labels += 1
        return f"$O{self.labels}"

    def lanes(self, v) -> list:
        n = self.names.get(v)
        if n is None:
            raise CodegenError(f"internal: value {v!r} used before definition")
        return n

    def lane(self, v, i=0):
        ls = self.lanes(v)
        return ls[i if len(ls) > 1 else 0]

    def reg(self, x, cls) -> str:
        """Operand ``x`` in a register (an immediate moved into a fresh one of class cls)."""
        if x.startswith("%"):
            return x
        r = self.new(cls)
        self.ins(f"{_MOV[cls]} {r}, {x};")
        return r

    def imm(self, x, e: DType) -> str:
        """The PTX immediate of Python scalar ``x`` as type ``e`` (32/64-bit floats, integers)."""
        if e.name == "f32":
            return f"0f{struct.unpack('<I', struct.pack('<f', _to_f32(float(x))))[0]:08X}"
        if e.name == "f64":
            return f"0d{struct.unpack('<Q', struct.pack('<d', float(x)))[0]:016X}"
        return str(int(x))

    @staticmethod
    def const_of(x):
        """The int value of immediate operand ``x``, or None for a register."""
        if x.startswith("%") or x.startswith("0f") or x.startswith("0d"):
            return None
        return int(x, 0)

    # -- output -----------------------------------------------------------------------------
    def ins(self, text):
        if self.pending:
            self.lines.append(self.pending)
            self.pending = None
        self.lines.append("  " + text)

    def put_label(self, name):
        self.forget()
        self.lines.append(f"{name}:")

    def render(self) -> list:
        """The body's PTX lines, register declarations first."""
        for v, operands in self.inputs.items():
            self._bind_input(v, operands)
        if self.dyn_smem_input is not None:
            self.dyn_smem_base = self.new("b32")
            self.ins(f"mov.b32 {self.dyn_smem_base}, #in{self.dyn_smem_input}#;")
        self.emit_block(self.fn.body)
        self.put_label(self.exit_label)
        decls = [f"  .reg .{c} {_PREFIX[c]}<{n + 1}>;"
                 for c, n in self.counts.items() if n]
        return decls + self.lines

    def _bind_input(self, v, operands):
        t = v.type
        if isinstance(t, TensorMapType):
            cls, elem = "b64", None
        else:
            cls = _reg_class(t)
            elem = None if isinstance(t, PointerType) else scalar_of(t)
        regs = []
        for o in operands:
            r = self.new(cls)
            if elem is not None and elem.is_bool:
                self.ins(f"setp.ne.u32 {r}, #in{o}#, 0;")
            else:
                self.ins(f"{_MOV[cls]} {r}, #in{o}#;")
            regs.append(r)
        self.names[v] = regs

    def emit_block(self, block):
        for op in block.ops:
            self.emit_op(op)

    def emit_op(self, op):
        """Render ``op`` by the table; an error becomes a CodegenError at its kernel line."""
        outer = self.loc
        self.loc = op.loc or outer
        self.comment_line()
        try:
            render = self.renderers.get(op.kind)
            if render is None:
                raise CodegenError(f"internal: the PTX body has no rendering of op {op.kind!r} "
                                   "(targets/ptx_body.py refuses it while tracing)")
            render(op)
        except Exception as e:
            if isinstance(e, CodegenError) and e.loc is not None:
                raise
            raise _located(e, op, self.fn.name, f"ptx ({self.target.name})") from e
        finally:
            self.loc = outer

    def comment_line(self):
        """``// file.py:12  <that line>`` before the first instruction of a new kernel line."""
        loc = self.loc
        if loc is not None and (loc.file, loc.line) != self.shown:
            self.shown = (loc.file, loc.line)
            self.pending = "  " + _python_line_comment(loc)

    def define(self, v, lanes):
        self.names[v] = list(lanes)

    def bcast(self, v, n):
        ls = self.lanes(v)
        return ls * n if len(ls) == 1 else ls

    # -- f16/bf16 through f32 ------------------------------------------------------------------
    def to_f32(self, x, e: DType) -> str:
        """f32 register of lane ``x`` of type e (f16/bf16 widened exactly; f32 as is)."""
        if e.name == "f16":
            f = self.new("f32")
            self.ins(f"cvt.f32.f16 {f}, {x};")
            return f
        if e.name == "bf16":
            w, f = self.new("b32"), self.new("f32")
            self.ins(f"cvt.u32.u16 {w}, {x};")
            self.ins(f"shl.b32 {w}, {w}, 16;")
            self.ins(f"mov.b32 {f}, {w};")
            return f
        return x

    def from_f32(self, f, e: DType, rounding="rn") -> str:
        """Lane of type e (f16/bf16) from f32 ``f``, rounded as cemit's from_f32 does."""
        h = self.new("b16")
        if rounding in ("truncate", "truncate_with_nan"):  # the high half of the bits
            w, hi = self.new("b32"), self.new("b32")
            self.ins(f"mov.b32 {w}, {self.reg(f, 'f32')};")
            self.ins(f"shr.u32 {hi}, {w}, 16;")
            if rounding == "truncate_with_nan":  # keep a NaN whose payload is in the low half
                p, q, t = self.new("pred"), self.new("pred"), self.new("b32")
                self.ins(f"and.b32 {t}, {w}, 2139095040;")
                self.ins(f"setp.eq.u32 {p}, {t}, 2139095040;")
                self.ins(f"and.b32 {t}, {w}, 65535;")
                self.ins(f"setp.ne.and.u32 {q}, {t}, 0, {p};")
                self.ins(f"@{q} or.b32 {hi}, {hi}, 1;")
            self.ins(f"cvt.u16.u32 {h}, {hi};")
            return h
        self.ins(f"cvt.{rounding}.{e.name}.f32 {h}, {self.reg(f, 'f32')};")
        return h

    def narrow(self, d, e: DType) -> str:
        """Re-extend register d (b32) to narrow integer type e's canonical form."""
        if _narrow_int(e):
            if e.kind == "int":
                self.ins(f"bfe.s32 {d}, {d}, 0, {e.bits};")
            else:
                self.ins(f"and.b32 {d}, {d}, {(1 << e.bits) - 1};")
        return d

    # -- constants ---------------------------------------------------------------------------
    def const_lane(self, x, e: DType) -> str:
        if e.is_bool:
            p = self.new("pred")
            self.ins(f"setp.ne.u32 {p}, {1 if x else 0}, 0;")
            return p
        if e.name in _HALF:
            import numpy as np  # only kernels with such constants pay for the import
            bits = int(np.array(x, dtype=e.np_dtype).view(np.uint16))
            h = self.new("b16")
            self.ins(f"mov.b16 {h}, {bits};")
            return h
        if e.is_int:
            return str(int(x))
        return self.imm(x, e)

    def render_const(self, op):
        r = op.results[0]
        e = scalar_of(r.type)
        val = op.attrs["value"]
        vals = list(val) if isinstance(r.type, VectorType) else [val]
        self.define(r, [self.const_lane(x, e) for x in vals])

    # -- arithmetic ---------------------------------------------------------------------------
    def render_binary(self, op):
        a, b = op.operands
        r = op.results[0]
        e = scalar_of(r.type)
        n = r.type.n if isinstance(r.type, VectorType) else 1
        self.define(r, [self.binary_lane(op.attrs["op"], x, y, e)
                        for x, y in zip(self.bcast(a, n), self.bcast(b, n))])

    def binary_lane(self, o, x, y, e: DType) -> str:
        if e.is_float:
            if e.name in _HALF:
                return self.from_f32(self.binary_lane(o, self.to_f32(x, e), self.to_f32(y, e),
                                                      dt.f32), e)
            d = self.new_of(e)
            rn = "" if o in ("min", "max") else ".rn"
            self.ins(f"{o}{rn}.{e.name} {d}, {x}, {y};")
            return d
        if e.is_bool:
            logic = {"and": "and", "or": "or", "xor": "xor", "min": "and", "max": "or"}.get(o)
            if logic is None:
                raise CodegenError(f"{o} on bool")
            d = self.new("pred")
            self.ins(f"{logic}.pred {d}, {x}, {y};")
            return d
        w, ity = _wide(e), _ity(e)
        if o in ("floordiv", "mod", "tdiv", "tmod"):
            return self.divide(o, x, y, e)
        if o in ("shl", "shr"):
            return self.shift(o, x, y, e)
        d = self.new_of(e)
        if o in ("add", "sub"):
            self.ins(f"{o}.{ity} {d}, {x}, {y};")
            return self.narrow(d, e)
        if o == "mul":
            self.ins(f"mul.lo.{ity} {d}, {x}, {y};")
            return self.narrow(d, e)
        if o in ("and", "or", "xor"):
            self.ins(f"{o}.b{w} {d}, {x}, {y};")
            return d
        if o in ("min", "max"):
            self.ins(f"{o}.{ity} {d}, {x}, {y};")
            return d
        if o == "mulhi":  # 32-bit only (lang)
            self.ins(f"mul.hi.{ity} {d}, {x}, {y};")
            return d
        raise CodegenError(f"binary {o} on {e.name}")

    def divide(self, o, x, y, e: DType) -> str:
        """floordiv/mod/tdiv/tmod with ir/ops.py's rules (cemit's helper_div): by zero the
        quotient is all ones and the remainder a; signed by -1 the quotient is -a (wrapping),
        the remainder 0; floor forms move a non-zero remainder to the divisor's sign."""
        w, ity = _wide(e), _ity(e)
        signed = e.kind == "int"
        quotient = o in ("floordiv", "tdiv")
        k = self.const_of(y)
        if k is not None and k > 0 and k & (k - 1) == 0:
            return self.narrow(self.divide_by_power_of_two(o, x, k, e), e)
        d = self.new_of(e)
        if k is not None and abs(k) >= 2:     # truncating, by a multiply-high (C's / and %)
            q = self.divide_by_constant(x, k, e)
            if quotient:
                self.ins(f"mov.b{w} {d}, {q};")
            else:
                self.ins(f"mul.lo.{ity} {d}, {q}, {k};")
                self.ins(f"sub.{ity} {d}, {x}, {d};")
        elif k is not None:  # by 0, 1 or -1: the fix-ups below decide
            self.ins(f"{'div' if quotient else 'rem'}.{ity} {d}, {x}, {y};")
        elif quotient:
            self.ins(f"mov.b{w} {d}, {self.quotient(x, y, e)};")
        else:  # a - q*b: the quotient's division shared (ptxas shares no rem with a div)
            self.ins(f"mul.lo.{ity} {d}, {self.quotient(x, y, e)}, {y};")
            self.ins(f"sub.{ity} {d}, {x}, {d};")
        if signed and o in ("floordiv", "mod"):
            rem = d if o == "mod" else self.new_of(e)
            if o == "floordiv":
                self.ins(f"mul.lo.{ity} {rem}, {d}, {y};")
                self.ins(f"sub.{ity} {rem}, {x}, {rem};")
            p, t = self.new("pred"), self.new_of(e)
            self.ins(f"setp.ne.{ity} {p}, {rem}, 0;")
            self.ins(f"xor.b{w} {t}, {x if o == 'floordiv' else rem}, {y};")
            self.ins(f"setp.lt.and.{ity} {p}, {t}, 0, {p};")
            self.ins(f"@{p} {'sub' if o == 'floordiv' else 'add'}.{ity} {d}, {d}, "
                     f"{1 if o == 'floordiv' else y};")
        if signed and k in (None, -1):  # by -1: -a (wrapping), remainder 0
            p = self.new("pred")
            self.ins(f"setp.eq.{ity} {p}, {y}, -1;")
            if quotient:
                self.ins(f"@{p} sub.{ity} {d}, 0, {x};")
            else:
                self.ins(f"@{p} mov.b{w} {d}, 0;")
        if k in (None, 0):  # by zero: all ones, remainder a
            p = self.new("pred")
            ones = -1 if signed else (1 << e.bits) - 1
            self.ins(f"setp.eq.{ity} {p}, {y}, 0;")
            self.ins(f"@{p} mov.b{w} {d}, {ones if quotient else x};")
        return self.narrow(d, e)

    def divide_by_power_of_two(self, o, x, k, e: DType) -> str:
        """x / k for k = 2**s by shifts and masks, as NVVM writes it for the C++ body (ptxas
        does not: a div.u32 by 8 became its generic reciprocal sequence). Floor forms: an
        arithmetic shift and a mask; truncating ones of signed types round the negative x
        toward zero first (x + k - 1 where x < 0)."""
        w, s = _wide(e), k.bit_length() - 1
        d = self.new_of(e)
        if o in ("mod", "tmod") and not (o == "tmod" and e.kind == "int"):
            self.ins(f"and.b{w} {d}, {x}, {k - 1};")   # floor mod, or unsigned: the low bits
            return d
        if o == "floordiv" or e.kind != "int":
            self.ins(f"shr.{_ity(e)} {d}, {x}, {s};")
            return d
        t = self.new_of(e)                             # truncating, signed
        self.ins(f"shr.s{w} {t}, {x}, {w - 1};")
        self.ins(f"shr.u{w} {t}, {t}, {w - s};")
        self.ins(f"add.s{w} {t}, {x}, {t};")
        if o == "tdiv":
            self.ins(f"shr.s{w} {d}, {t}, {s};")
        else:                                          # x - (the biased x rounded down to k)
            self.ins(f"and.b{w} {t}, {t}, {-k};")
            self.ins(f"sub.s{w} {d}, {x}, {t};")
        return d

    def divide_by_constant(self, x, k, e: DType) -> str:
        """x / k truncated, for a constant |k| >= 2, by a multiply-high and shifts (Granlund and
        Montgomery, "Division by invariant integers using multiplication", 1994; what NVVM
        writes for the C++ body: ptxas keeps a div by a constant as its generic sequence)."""
        w = _wide(e)
        q, t = self.new_of(e), self.new_of(e)
        if e.kind != "int":
            m, shift, add = unsigned_magic(k, w)
            self.ins(f"mul.hi.u{w} {t}, {x}, 0x{m:X};")
            if add:         # the 33rd bit of m: q = (t + (x - t) / 2) >> shift
                self.ins(f"sub.u{w} {q}, {x}, {t};")
                self.ins(f"shr.u{w} {q}, {q}, 1;")
                self.ins(f"add.u{w} {t}, {q}, {t};")
            self.ins(f"shr.u{w} {q}, {t}, {shift};")
            return q
        m, shift = signed_magic(k, w)
        self.ins(f"mul.hi.s{w} {t}, {x}, 0x{m % (1 << w):X};")   # m's bits
        self.ins(f"add.s{w} {t}, {t}, {x};")
        self.ins(f"shr.s{w} {t}, {t}, {shift};")
        self.ins(f"shr.s{w} {q}, {x}, {w - 1};")
        self.ins(f"sub.s{w} {q}, {t}, {q};")       # + 1 for a negative x: toward zero
        if k < 0:
            self.ins(f"neg.s{w} {q}, {q};")
        return q

    def quotient(self, x, y, e: DType) -> str:
        """The register of div x, y (run-time y), one division per pair of operands in a
        straight stretch of code (floor division and modulo of the same operands share it,
        as NVVM shares them for the C++ body); ``forget`` ends the stretch."""
        key = (x, y, _ity(e))
        q = self.quotients.get(key)
        if q is None:
            q = self.quotients[key] = self.new_of(e)
            self.ins(f"div.{_ity(e)} {q}, {x}, {y};")
        return q

    def forget(self):
        """Registers may hold other values from here (a join, a loop head, a register written
        again): the known quotients no longer hold."""
        self.quotients = {}

    def shift(self, o, x, y, e: DType) -> str:
        """shl/shr: the amount read as unsigned at e's width; amounts >= the width give 0 (shl,
        logical shr) or the sign fill. PTX clamps shift amounts above the register width to
        it, which gives exactly that on 32-bit registers; 64-bit amounts are clamped first
        (the instruction takes 32 bits of amount)."""
        w = _wide(e)
        kind = "shl.b" if o == "shl" else ("shr.s" if e.kind == "int" else "shr.u")
        d = self.new_of(e)
        k = self.const_of(y)
        if w == 64:
            if k is not None:
                amt = str(min(k & ((1 << 64) - 1), 64))
            else:
                t, amt = self.new("b64"), self.new("b32")
                self.ins(f"min.u64 {t}, {y}, 64;")
                self.ins(f"cvt.u32.u64 {amt}, {t};")
            self.ins(f"{kind}64 {d}, {x}, {amt};")
            return d
        mask = (1 << e.bits) - 1
        if k is not None:
            amt = str(min(k & mask, 32))
        elif _narrow_int(e) and e.kind == "int":  # the amount's bits at e's width, unsigned
            amt = self.new("b32")
            self.ins(f"and.b32 {amt}, {y}, {mask};")
        else:
            amt = y
        self.ins(f"{kind}32 {d}, {x}, {amt};")
        return self.narrow(d, e) if o == "shl" else d

    def render_cmp(self, op):
        a, b = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        pred = op.attrs["pred"]
        out = []
        for x, y in zip(self.lanes(a), self.lanes(b)):
            p = self.new("pred")
            if e.is_float:
                f = e if e.name in ("f32", "f64") else dt.f32
                x, y = self.to_f32(x, e), self.to_f32(y, e)
                self.ins(f"setp.{'neu' if pred == 'ne' else pred}.{f.name} {p}, {x}, {y};")
            elif e.is_bool:  # false < true
                x, y = self.pred_to_u32(x), self.pred_to_u32(y)
                self.ins(f"setp.{pred}.u32 {p}, {x}, {y};")
            else:
                self.ins(f"setp.{pred}.{_ity(e)} {p}, {x}, {y};")
            out.append(p)
        self.define(r, out)

    def pred_to_u32(self, p) -> str:
        d = self.new("b32")
        self.ins(f"selp.u32 {d}, 1, 0, {p};")
        return d

    def render_unary(self, op):
        (a,) = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        o = op.attrs["op"]
        out = []
        for x in self.lanes(a):
            if o == "not":
                d = self.new("pred")
                self.ins(f"not.pred {d}, {x};")
            elif e.is_float:
                f = e if e.name in ("f32", "f64") else dt.f32
                y = self.to_f32(x, e)
                d = self.new_of(f)
                self.ins(f"{'neg' if o == 'neg' else 'abs'}.{f.name} {d}, {self.reg(y, f.name)};")
                if e.name in _HALF:
                    d = self.from_f32(d, e)
            elif o == "invert":
                d = self.new_of(e)
                self.ins(f"not.b{_wide(e)} {d}, {x};")
                d = self.narrow(d, e) if e.kind == "uint" else d
            elif o == "neg":
                d = self.new_of(e)
                self.ins(f"sub.{_ity(e)} {d}, 0, {x};")
                d = self.narrow(d, e)
            elif o == "abs":
                if e.kind == "uint":
                    d = x
                else:
                    d = self.new_of(e)
                    self.ins(f"abs.{_ity(e)} {d}, {self.reg(x, _reg_class(e))};")
                    d = self.narrow(d, e)
            elif o == "popc":
                src = x
                if _narrow_int(e):
                    src = self.new("b32")
                    self.ins(f"and.b32 {src}, {x}, {(1 << e.bits) - 1};")
                c = self.new("b32")
                self.ins(f"popc.b{_wide(e)} {c}, {src};")
                d = c
                if e.bits == 64:
                    d = self.new("b64")
                    self.ins(f"cvt.u64.u32 {d}, {c};")
            else:
                raise CodegenError(f"unary {o} on {e.name}")
            out.append(d)
        self.define(r, out)

    def render_math(self, op):
        (a,) = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        fn = op.attrs["fn"]
        f = e if e.name in ("f32", "f64") else dt.f32
        out = []
        for x in self.lanes(a):
            y = self.reg(self.to_f32(x, e), f.name)
            d = self.new_of(f)
            if fn == "sqrt":
                self.ins(f"sqrt.rn.{f.name} {d}, {y};")
            else:
                self.ins(f"{_MATH[fn]}.{f.name}.{f.name} {d}, {y};")
            out.append(self.from_f32(d, e) if e.name in _HALF else d)
        self.define(r, out)

    def render_fma(self, op):
        r = op.results[0]
        e = scalar_of(r.type)
        n = r.type.n if isinstance(r.type, VectorType) else 1
        f = e if e.name in ("f32", "f64") else dt.f32
        out = []
        for x, y, z in zip(*(self.bcast(v, n) for v in op.operands)):
            d = self.new_of(f)
            xs = [self.to_f32(v, e) for v in (x, y, z)]
            self.ins(f"fma.rn.{f.name} {d}, {', '.join(xs)};")
            out.append(self.from_f32(d, e) if e.name in _HALF else d)
        self.define(r, out)

    def render_select(self, op):
        c, a, b = op.operands
        r = op.results[0]
        n = r.type.n if isinstance(r.type, VectorType) else 1
        cls = _reg_class(r.type)
        out = []
        for p, x, y in zip(self.bcast(c, n), self.bcast(a, n), self.bcast(b, n)):
            d = self.new(cls)
            if cls == "pred":
                self.ins(f"@{p} mov.pred {d}, {x};")
                self.ins(f"@!{p} mov.pred {d}, {y};")
            else:
                self.ins(f"selp.{cls} {d}, {x}, {y}, {p};")
            out.append(d)
        self.define(r, out)

    def render_uniform(self, op):
        self.define(op.results[0], self.lanes(op.operands[0]))  # NVIDIA: the value itself

    # -- conversions -------------------------------------------------------------------------
    def render_cast(self, op):
        a, r = op.operands[0], op.results[0]
        src, to = scalar_of(a.type), op.attrs["to"]
        self.define(r, [self.cast_lane(x, src, to, op.attrs["rounding"])
                        for x in self.lanes(a)])

    def cast_lane(self, x, src: DType, to: DType, rounding) -> str:
        """One lane of a cast, as cemit's cast_expr (and the CUDA dialect's float_to_int)."""
        if to.is_bool:
            p = self.new("pred")
            if src.is_bool:
                return x
            if src.is_float:
                f = src if src.name in ("f32", "f64") else dt.f32
                zero = self.imm(0.0, f)
                self.ins(f"setp.neu.{f.name} {p}, {self.to_f32(x, src)}, {zero};")
            else:
                self.ins(f"setp.ne.{_ity(src)} {p}, {x}, 0;")
            return p
        if src.is_bool:
            return self.cast_lane(self.pred_to_u32(x), dt.i32, to, rounding)
        if to.is_int and src.is_int:
            return self.int_to_int(x, src, to)
        if to.is_int:
            return self.float_to_int(x, src, to)
        if to.name in _HALF:
            f = self.to_f32(x, src) if src.name in _HALF else self.cast_lane(x, src, dt.f32, "rn")
            return self.from_f32(f, to, rounding)
        if rounding != "rn":
            raise CodegenError(f"internal: rounding {rounding!r} to {to.name} reached the PTX body")
        if src.is_int:
            d = self.new_of(to)
            self.ins(f"cvt.rn.{to.name}.{_ity(src)} {d}, {self.reg(x, _reg_class(src))};")
            return d
        f = self.to_f32(x, src)
        fsrc = dt.f32 if src.name in _HALF else src
        if fsrc.name == to.name:
            return f
        d = self.new_of(to)
        rn = ".rn" if to.name == "f32" else ""  # f64 -> f32 rounds; f32 -> f64 is exact
        self.ins(f"cvt{rn}.{to.name}.{fsrc.name} {d}, {self.reg(f, fsrc.name)};")
        return d

    def int_to_int(self, x, src: DType, to: DType) -> str:
        """Wraps: the low bits, extended by the source's signedness (C's conversions)."""
        ws, wt = _wide(src), _wide(to)
        if ws == wt:
            if not _narrow_int(to):
                return x
            d = self.new("b32")
            self.ins(f"mov.b32 {d}, {x};")
            return self.narrow(d, to)
        d = self.new_of(to)
        x = self.reg(x, _reg_class(src))
        if wt == 64:  # extended by the source's signedness, named in both types: ptxas
            # sign-extended a cvt.s64.u32 whose result was shifted left (sm_90a, CUDA 13.0)
            self.ins(f"cvt.{_ity(src)[0]}64.{_ity(src)} {d}, {x};")
            return d
        self.ins(f"cvt.u32.u64 {d}, {x};")
        return self.narrow(d, to)

    def float_to_int(self, x, src: DType, to: DType) -> str:
        """Toward zero, saturating (cvt.rzi saturates), NaN -> 0; narrow types through i32,
        clamped to their range."""
        f = self.to_f32(x, src)
        fty = "f64" if src.name == "f64" else "f32"
        f = self.reg(f, fty)
        via = to if to.bits >= 32 else dt.i32
        w = _wide(via)
        d, p = self.new_of(via), self.new("pred")
        self.ins(f"cvt.rzi.{_ity(via)}.{fty} {d}, {f};")
        self.ins(f"setp.nan.{fty} {p}, {f}, {f};")
        self.ins(f"@{p} mov.b{w} {d}, 0;")
        if via is not to:
            lo, hi = to.int_range()
            self.ins(f"min.s32 {d}, {d}, {hi};")
            self.ins(f"max.s32 {d}, {d}, {lo};")
        return d

    def render_bitcast(self, op):
        """The source's bits (lanes packed from lane 0 in the low bits, as memory holds them)
        as 32-bit words, then read as the result's lanes."""
        (a,), r = op.operands, op.results[0]
        e = scalar_of(r.type)
        if not isinstance(a.type, VectorType) and isinstance(r.type, DType) and e.bits >= 32:
            d = self.new_of(e)  # one register's bits read as another's type
            self.ins(f"mov.b{e.bits} {d}, {self.reg(self.lane(a), _reg_class(a.type))};")
            self.define(r, [d])
            return
        words = self.to_words(self.lanes(a), scalar_of(a.type))
        n = r.type.n if isinstance(r.type, VectorType) else 1
        self.define(r, [self.lane_from_words(words, i * e.bits, e) for i in range(n)])

    def to_words(self, lanes, e: DType) -> list:
        """Lanes of type e as 32-bit words (the last one's unused high bits 0)."""
        words = []
        if e.bits == 64:
            for x in lanes:
                lo, hi = self.new("b32"), self.new("b32")
                self.ins(f"mov.b64 {{{lo}, {hi}}}, {self.reg(x, _reg_class(e))};")
                words += [lo, hi]
            return words
        for i, x in enumerate(lanes):
            bits = self.new("b32")
            if e.name in _HALF:
                self.ins(f"cvt.u32.u16 {bits}, {x};")
            elif e.bits < 32:
                self.ins(f"and.b32 {bits}, {x}, {(1 << e.bits) - 1};")
            else:
                self.ins(f"mov.b32 {bits}, {x};")
            shift = i * e.bits % 32
            if shift == 0:
                words.append(bits)
                continue
            w = self.new("b32")
            self.ins(f"shl.b32 {bits}, {bits}, {shift};")
            self.ins(f"or.b32 {w}, {words[-1]}, {bits};")
            words[-1] = w
        return words

    def lane_from_words(self, words, at, e: DType) -> str:
        """The lane of type e whose bits start at bit ``at`` of ``words``."""
        w = words[at // 32]
        if e.bits == 64:
            d = self.new_of(e)
            self.ins(f"mov.b64 {d}, {{{w}, {words[at // 32 + 1]}}};")
            return d
        if e.bits == 32:
            d = self.new_of(e)
            self.ins(f"mov.b32 {d}, {w};")
            return d
        bits = self.new("b32")
        signed = e.kind == "int"
        self.ins(f"bfe.{'s' if signed else 'u'}32 {bits}, {w}, {at % 32}, {e.bits};")
        if e.name in _HALF:
            h = self.new("b16")
            self.ins(f"cvt.u16.u32 {h}, {bits};")
            return h
        return bits

    # -- vectors (renames) --------------------------------------------------------------------
    def render_vector(self, op):
        self.define(op.results[0], [self.lane(x) for x in op.operands])

    def render_extract(self, op):
        self.define(op.results[0], [self.lanes(op.operands[0])[op.attrs["index"]]])

    def render_insert(self, op):
        v, s = op.operands
        ls = list(self.lanes(v))
        ls[op.attrs["index"]] = self.lane(s)
        self.define(op.results[0], ls)

    def render_broadcast(self, op):
        self.define(op.results[0], [self.lane(op.operands[0])] * op.attrs["n"])

    def render_vector_permute(self, op):
        ls = self.lanes(op.operands[0])
        self.define(op.results[0], [ls[i] for i in op.attrs["indices"]])

    # -- threads ------------------------------------------------------------------------------
    def linear_thread_id(self) -> str:
        """The thread's index in its block (cemit's linear_thread_id)."""
        t = self.new("b32")
        self.ins(f"mov.u32 {t}, %tid.x;")
        if self.fn.attrs.get("block_size"):
            return t
        y, z, nx, ny = (self.new("b32") for _ in range(4))
        for r, s in ((y, "%tid.y"), (z, "%tid.z"), (nx, "%ntid.x"), (ny, "%ntid.y")):
            self.ins(f"mov.u32 {r}, {s};")
        self.ins(f"mad.lo.u32 {y}, {ny}, {z}, {y};")
        self.ins(f"mad.lo.u32 {t}, {nx}, {y}, {t};")
        return t

    def render_special(self, op):
        kind, _, axis = op.attrs["which"].partition(".")
        d = self.new("b32")
        if kind in _SPECIAL:
            self.ins(f"mov.u32 {d}, {_SPECIAL[kind]}.{axis};")
        elif kind == "grid_size":  # blocks times threads per block, wrapping
            n = self.new("b32")
            self.ins(f"mov.u32 {d}, %nctaid.{axis};")
            self.ins(f"mov.u32 {n}, %ntid.{axis};")
            self.ins(f"mul.lo.u32 {d}, {d}, {n};")
        elif kind == "lane_id":
            self.ins(f"and.b32 {d}, {self.linear_thread_id()}, {self.target.warp_size - 1};")
        elif kind == "warp_id":
            shift = self.target.warp_size.bit_length() - 1
            self.ins(f"shr.u32 {d}, {self.linear_thread_id()}, {shift};")
        else:
            raise CodegenError(f"special register {op.attrs['which']!r}")
        self.define(op.results[0], [d])

    def render_barrier(self, op):
        self.ins("bar.sync 0;")

    # synchronization: the CUDA dialect's instructions (codegen/cuda.py code_for_sync)
    def render_sync_warp(self, op):
        self.ins(f"bar.warp.sync {self.lane(op.operands[0])};")

    def render_named_barrier(self, op):
        """bar.sync / bar.arrive id, count; count defaults to the whole block's threads."""
        ops = op.operands
        if op.attrs["counted"]:
            count = self.lane(ops[1])
        else:
            count, n = self.new("b32"), self.new("b32")
            self.ins(f"mov.u32 {count}, %ntid.x;")
            for a in "yz":
                self.ins(f"mov.u32 {n}, %ntid.{a};")
                self.ins(f"mul.lo.u32 {count}, {count}, {n};")
        self.ins(f"bar.{'arrive' if op.attrs['arrive'] else 'sync'} {self.lane(ops[0])}, {count};")

    def render_memory_fence(self, op):
        scope = {"block": "cta", "device": "gpu", "system": "sys"}[op.attrs["scope"]]
        order = {"acq_rel": "acq_rel", "seq_cst": "sc"}[op.attrs["order"]]
        self.ins(f"fence.{order}.{scope};")

    def render_clock(self, op):
        which = op.attrs["which"]
        reg = {"clock": ("b32", "u32", "%clock"), "clock64": ("b64", "u64", "%clock64"),
               "globaltimer": ("b64", "u64", "%globaltimer")}.get(which)
        if reg is None:
            raise CodegenError(f"internal: clock {which!r} reached the PTX body (an AMD counter)")
        d = self.new(reg[0])
        self.ins(f"mov.{reg[1]} {d}, {reg[2]};")
        self.define(op.results[0], [d])

    # -- cross-lane (32-bit words; the CUDA dialect's instructions, codegen/cuda.py) -----------
    def members(self, op) -> str:
        """The member mask: the op's mask operand, else the lanes active here (activemask)."""
        if op.attrs.get("mask"):
            return self.lane(op.operands[-1])
        m = self.new("b32")
        self.ins(f"activemask.b32 {m};")
        return m

    def render_shuffle(self, op):
        """shfl.sync with c = ((32 - width) << 8) | clamp (0 for up, 31 otherwise)."""
        x, src = op.operands[:2]
        mode = op.attrs["mode"]
        c = ((32 - op.attrs["width"]) << 8) | (0 if mode == "up" else 0x1F)
        m = self.members(op)
        d = self.new(_reg_class(x.type))
        ptx_mode = {"idx": "idx", "up": "up", "down": "down", "xor": "bfly"}[mode]
        self.ins(f"shfl.sync.{ptx_mode}.b32 {d}, {self.reg(self.lane(x), _reg_class(x.type))}, "
                 f"{self.lane(src)}, {c}, {m};")
        self.define(op.results[0], [d])

    def render_vote(self, op):
        mode = op.attrs["mode"]
        m = self.members(op)
        p = self.lane(op.operands[0])
        d = self.new("b32" if mode == "ballot" else "pred")
        self.ins(f"vote.sync.{mode}.{'b32' if mode == 'ballot' else 'pred'} {d}, {p}, {m};")
        self.define(op.results[0], [d])

    def render_warp_redux(self, op):
        """redux.sync: .add/.min/.max on .u32/.s32, .and/.or/.xor on .b32 (sm_80)."""
        x = op.operands[0]
        o, e = op.attrs["op"], scalar_of(x.type)
        t = "b32" if o in ("and", "or", "xor") else ("s32" if e.name == "i32" else "u32")
        m = self.members(op)
        d = self.new("b32")
        self.ins(f"redux.sync.{o}.{t} {d}, {self.reg(self.lane(x), 'b32')}, {m};")
        self.define(op.results[0], [d])

    # -- mbarriers, TMA, fences, bulk groups: codegen/tma.py's PTX_TMA, filled with registers --
    def tma(self, key, **fields):
        self.ins(ptx_tma(key, **fields))

    def parity(self, v) -> str:
        """The low bit of the phase parity (the CUDA dialect passes (unsigned)parity & 1u)."""
        x = self.lane(v)
        k = self.const_of(x)
        if k is not None:
            return str(k & 1)
        d = self.new("b32")
        self.ins(f"and.b32 {d}, {x}, 1;")
        return d

    def render_mbarrier_init(self, op):
        bar, count = op.operands
        self.tma("mbarrier_init", bar=self.lane(bar), count=self.reg(self.lane(count), "b32"))

    def render_mbarrier_arrive(self, op):
        bar = self.lane(op.operands[0])
        state = self.new("b64")  # the phase state, unused (as in the CUDA dialect)
        if op.attrs["expect_tx"]:
            self.tma("mbarrier_arrive_expect_tx", state=state, bar=bar,
                     bytes=self.reg(self.lane(op.operands[1]), "b32"))
        else:
            self.tma("mbarrier_arrive", state=state, bar=bar)

    def render_mbarrier_expect_tx(self, op):
        bar, nbytes = op.operands
        self.tma("mbarrier_expect_tx", bar=self.lane(bar), bytes=self.reg(self.lane(nbytes), "b32"))

    def render_mbarrier_try_wait(self, op):
        """A test (mbarrier.test_wait never suspends: codegen/cuda.py says why not try_wait)."""
        bar, parity = op.operands
        p = self.new("pred")
        self.tma("mbarrier_test_wait", pred=p, bar=self.lane(bar), parity=self.parity(parity))
        self.define(op.results[0], [p])

    def render_mbarrier_wait(self, op):
        """try_wait until the phase of that parity completes (the branch reads it at once)."""
        bar, parity = op.operands
        par, p, head = self.parity(parity), self.new("pred"), self.label()
        self.put_label(head)
        self.tma("mbarrier_try_wait", pred=p, bar=self.lane(bar), parity=par)
        self.ins(f"@!{p} bra {head};")

    def render_fence(self, op):
        self.tma(f"fence_{op.attrs['kind']}")

    def coords(self, values) -> str:
        """The brace list of TMA coordinates: registers, innermost first."""
        return "{" + ", ".join(self.reg(self.lane(c), "b32") for c in reversed(values)) + "}"

    def render_tma_load(self, op):
        tmap, dst, bar = op.operands[:3]
        self.tma("tma_load", rank=len(op.operands) - 3, dst=self.lane(dst), tmap=self.lane(tmap),
                 bar=self.lane(bar), coords=self.coords(op.operands[3:]))

    def render_tma_store(self, op):
        tmap, src = op.operands[:2]
        self.tma("tma_store", rank=len(op.operands) - 2, tmap=self.lane(tmap), src=self.lane(src),
                 coords=self.coords(op.operands[2:]))

    def render_bulk_commit_group(self, op):
        self.tma("bulk_commit_group")

    def render_bulk_wait_group(self, op):
        self.tma("bulk_wait_group_read" if op.attrs["read"] else "bulk_wait_group", n=op.attrs["n"])

    # -- wgmma and setmaxnreg (targets/nv_wgmma.py's rows and instruction text) ----------------
    def render_target_op(self, op):
        ins = self.target.instruction(op.attrs["name"])
        if isinstance(ins, WgmmaControl):
            self.wgmma_control(ins, op)
        else:
            self.wgmma(ins, op)

    def wgmma_control(self, row, op):
        """fence and wait pass their values through unchanged (the same registers: ptxas
        orders the accumulators' accesses around them); commit and setmaxnreg stand alone."""
        if row.op.startswith("setmaxnreg"):
            self.ins(f"{row.isa} {op.attrs['count']};")
            return
        self.ins(f"{row.isa} {op.attrs['n']};" if row.op == "wait" else f"{row.isa};")
        for r, v in zip(op.results, op.operands):
            self.define(r, self.lanes(v))

    def wgmma(self, atom, op):
        """wgmma.mma_async with D in the accumulator's own registers where the accumulator dies
        here (the k-loop's carried value: ptxas then neither copies it nor waits), else in
        fresh registers it is copied into. Descriptors: the static bits OR the start address."""
        d, tok = op.results
        if atom.a_from == "smem":
            pa, oa, pb, ob, c, scale = op.operands
            a_text = self.descriptor(pa, oa, op.attrs["desc_a"])
        else:
            a_regs, pb, ob, c, scale = op.operands
            a_text = "{" + ", ".join(self.words(self.lanes(a_regs), atom.reg_a)) + "}"
        b_text = self.descriptor(pb, ob, op.attrs["desc_b"])
        acc = self.accumulator(c, op)
        words = acc if atom.c.itemsize == 4 else None
        if words is None:
            raise CodegenError(f"internal: {atom.name} (a {atom.c.name} accumulator) reached the "
                               "PTX body (targets/ptx_body.py refuses it)")
        self.forget()  # D's registers written again
        self.ins(wgmma_text(atom, "{" + ", ".join(words) + "}", a_text, b_text,
                            self.lane(scale), op.attrs))
        self.define(d, acc)
        self.define(tok, ["0"])

    def accumulator(self, c, op) -> list:
        """Registers for the D of wgmma ``op``: its accumulator c's own where c dies at op,
        else a copy."""
        lanes = self.lanes(c)
        if self.dies_here(c, op) and len(set(lanes)) == len(lanes) and \
                all(x.startswith("%") for x in lanes):
            return lanes
        cls = _reg_class(c.type)
        regs = [self.new(cls) for _ in lanes]
        for r, x in zip(regs, lanes):
            self.ins(f"{_MOV[cls]} {r}, {x};")
        return regs

    def dies_here(self, v, op) -> bool:
        """v's registers are read by no op after ``op`` (which reads v): every other use of v,
        and of each value v renames back to registers of its own (through wgmma fences and
        waits, to a block argument's, a wgmma's D or a for/while/if result), comes before op in program order, none
        renames it (a slice would share its registers), and no loop around op lies inside v's
        scope (its next iteration would read v again)."""
        if self.program is None:
            self.program = _ProgramOrder(self.fn)
        order = self.program
        while True:
            for use in order.uses.get(v, ()):
                if use is op:
                    continue
                if order.index[use] > order.index[op] or use.kind in _RENAMES or \
                        use.kind == "target_op":
                    return False
            if order.loop_between(op, v):
                return False
            owner = v.owner
            if owner is None:
                return True  # a block argument: its own registers
            if owner.kind in ("for", "while", "if"):
                return True  # its carried or joined registers
            if owner.kind != "target_op":
                return False
            if not isinstance(self.target.instruction(owner.attrs["name"]), WgmmaControl):
                return True  # a wgmma's D
            # fence/wait: v is the value passed through (its registers); go on from there
            op, v = owner, owner.operands[owner.results.index(v)]

    def descriptor(self, p, off, static_bits) -> str:
        """A .b64 wgmma descriptor: static_bits | ((shared address of p[off] & 0x3FFFF) >> 4)."""
        addr = self.address(p, off)[1:-1]
        base, _, imm = addr.partition("+")
        t, d = self.new("b32"), self.new("b64")
        if imm:
            self.ins(f"add.s32 {t}, {base}, {imm};")
            self.ins(f"and.b32 {t}, {t}, 262143;")
        else:
            self.ins(f"and.b32 {t}, {base}, 262143;")
        self.ins(f"shr.u32 {t}, {t}, 4;")
        self.ins(f"cvt.u64.u32 {d}, {t};")
        self.ins(f"or.b64 {d}, {d}, {static_bits};")
        return d

    def words(self, lanes, e: DType) -> list:
        """Lanes of 16- or 32-bit type e as 32-bit registers (pairs packed, lane 0 low)."""
        if e.itemsize == 4:
            return [self.reg(x, _reg_class(e)) for x in lanes]
        out = []
        for i in range(0, len(lanes), 2):
            w = self.new("b32")
            self.ins(f"mov.b32 {w}, {{{lanes[i]}, {lanes[i + 1]}}};")
            out.append(w)
        return out

    # -- memory -------------------------------------------------------------------------------
    def render_smem_alloc(self, op):
        pass  # declared in the shell; its address is an input

    def render_dyn_smem(self, op):
        """A view ``offset`` bytes into dynamic shared memory (declared in the shell)."""
        d, off = self.new("b32"), op.attrs["offset"]
        self.ins(f"add.s32 {d}, {self.dyn_smem_base}, {off};")
        self.define(op.results[0], [d])

    def address(self, p, off) -> str:
        """``[reg+imm]``: element ``off`` of pointer ``p`` (global: 64-bit
        addresses, the offset sign- or zero-extended by its type; shared: 32-bit)."""
        s = p.type.elem.itemsize
        base = self.lane(p)
        shared = p.type.space == "shared"
        x = self.lane(off)
        k = self.const_of(x)
        e = scalar_of(off.type)
        if k is not None and -(1 << 31) <= k * s < (1 << 31):  # PTX's 32-bit address offset
            return f"[{base}+{k * s}]"
        x = self.reg(x, _reg_class(e))
        if shared:
            a = self.new("b32")
            if e.bits == 64:
                t = self.new("b32")
                self.ins(f"cvt.u32.u64 {t}, {x};")
                x = t
            self.ins(f"mad.lo.s32 {a}, {x}, {s}, {base};")
        else:
            a = self.new("b64")
            if e.bits == 64:
                self.ins(f"mad.lo.s64 {a}, {x}, {s}, {base};")
            else:
                self.wide_offset(a, x, s, base, e)
        return f"[{a}]"

    def wide_offset(self, d, x, s, base, e: DType):
        """d = base + x * s, x a 32-bit offset extended by its type (mul.wide + add, NVVM's
        spelling, which ptxas makes one IMAD.WIDE; a mad.wide became IMAD.HI + IADD3)."""
        t = self.new("b64")
        self.ins(f"mul.wide.{_ity(e)} {t}, {x}, {s};")
        self.ins(f"add.s64 {d}, {base}, {t};")

    @staticmethod
    def _offset_by(addr, nbytes) -> str:
        """``[reg+imm]`` moved on by nbytes."""
        reg, _, imm = addr[1:-1].partition("+")
        total = (int(imm) if imm else 0) + nbytes
        return f"[{reg}+{total}]" if total else f"[{reg}]"

    def render_ptr_add(self, op):
        p, off = op.operands
        s = p.type.elem.itemsize
        x, base = self.lane(off), self.lane(p)
        shared = p.type.space == "shared"
        d = self.new("b32" if shared else "b64")
        k = self.const_of(x)
        e = scalar_of(off.type)
        x = self.reg(x, _reg_class(e))
        if k is not None and -(1 << 31) <= k * s < (1 << 31):
            self.ins(f"add.{'s32' if shared else 's64'} {d}, {base}, {k * s};")
        elif shared:
            if e.bits == 64:
                t = self.new("b32")
                self.ins(f"cvt.u32.u64 {t}, {x};")
                x = t
            self.ins(f"mad.lo.s32 {d}, {x}, {s}, {base};")
        elif e.bits == 64:
            self.ins(f"mad.lo.s64 {d}, {x}, {s}, {base};")
        else:
            self.wide_offset(d, x, s, base, e)
        self.define(op.results[0], [d])

    def in_range(self, off, i, bound) -> str:
        """Predicate: element off+i lies in [0, bound) (exact, as ir/ops.py says)."""
        eo, eb = scalar_of(off.type), scalar_of(bound.type)
        x, b = self.lane(off), self.lane(bound)
        p = self.new("pred")
        if eo.kind == eb.kind == "int" and eo.bits <= 32 and eb.bits <= 32:
            # in 32 bits: off+i wrapping past INT_MAX is negative, out of range as it should be
            t = self.new("b32")
            self.ins(f"add.s32 {t}, {x}, {i};")
            self.ins(f"setp.lt.s32 {p}, {t}, {b};")
            self.ins(f"setp.ge.and.s32 {p}, {t}, 0, {p};")
            return p
        t, wb = self.widen64(x, eo), self.widen64(b, eb)
        self.ins(f"add.s64 {t}, {t}, {i};")
        self.ins(f"setp.lt.s64 {p}, {t}, {wb};")
        self.ins(f"setp.ge.and.s64 {p}, {t}, 0, {p};")
        return p

    def whole_in(self, off, vec, bound) -> str:
        """Predicate: elements off .. off+vec-1 all lie in [0, bound)."""
        eo, eb = scalar_of(off.type), scalar_of(bound.type)
        x, b = self.lane(off), self.lane(bound)
        p = self.new("pred")
        if eo.kind == eb.kind == "int" and eo.bits <= 32 and eb.bits <= 32:
            # bound >= vec && (unsigned)off <= (unsigned)(bound - vec): one unsigned compare
            t = self.new("b32")
            self.ins(f"sub.s32 {t}, {b}, {vec};")
            self.ins(f"setp.le.u32 {p}, {x}, {t};")
            self.ins(f"setp.ge.and.s32 {p}, {b}, {vec}, {p};")
            return p
        t, wb = self.widen64(x, eo), self.widen64(b, eb)
        self.ins(f"setp.ge.s64 {p}, {t}, 0;")
        self.ins(f"add.s64 {t}, {t}, {vec - 1};")
        self.ins(f"setp.lt.and.s64 {p}, {t}, {wb}, {p};")
        return p

    def widen64(self, x, e: DType) -> str:
        """A fresh .b64 register holding integer lane x of type e, exactly."""
        d = self.new("b64")
        if e.bits == 64:
            self.ins(f"mov.b64 {d}, {x};")
        else:
            self.ins(f"cvt.{_ity(e)[0]}64.{_ity(e)} {d}, {self.reg(x, 'b32')};")
        return d

    def zero(self, e: DType) -> str:
        return "0" if e.name in _HALF or not e.is_float else self.imm(0, e)

    @staticmethod
    def _chunks(e: DType, vec):
        """(first element, elements) of each instruction of a vec-element access: a power of
        two of elements, at most 16 bytes and at most the alignment the access promises (the
        largest power of two dividing its bytes: ir/ops.py load)."""
        nbytes = vec * e.itemsize
        align = min(16, nbytes & -nbytes)
        per = max(1, align // e.itemsize)
        return [(i, min(per, vec - i)) for i in range(0, vec, per)]

    def load_lanes(self, space, addr, e: DType, k, pred=None) -> list:
        """Registers of k elements of e loaded from ``addr`` (k*itemsize bytes, aligned)."""
        guard = f"@{pred} " if pred else ""
        cls = "b32" if e.is_bool else _reg_class(e)
        if k <= 4:
            regs = [self.new(cls) for _ in range(k)]
            v = "" if k == 1 else f".v{k}"
            dst = regs[0] if k == 1 else "{" + ", ".join(regs) + "}"
            self.ins(f"{guard}ld.{space}{v}.{_MEM[e.name]} {dst}, {addr};")
        else:  # 8 or 16 narrow elements: 32-bit words, unpacked
            words = [self.new("b32") for _ in range(k * e.itemsize // 4)]
            self.ins(f"{guard}ld.{space}.v{len(words)}.b32 {{{', '.join(words)}}}, {addr};")
            regs = []
            per = 4 // e.itemsize
            for w in words:
                if e.name in _HALF:
                    lo, hi = self.new("b16"), self.new("b16")
                    self.ins(f"mov.b32 {{{lo}, {hi}}}, {w};")
                    regs += [lo, hi]
                    continue
                sign = "s" if e.kind == "int" else "u"
                for j in range(per):
                    r = self.new("b32")
                    self.ins(f"bfe.{sign}32 {r}, {w}, {j * 8 * e.itemsize}, {8 * e.itemsize};")
                    regs.append(r)
        if e.is_bool:
            preds = []
            for r in regs:
                p = self.new("pred")
                self.ins(f"setp.ne.u32 {p}, {r}, 0;")
                preds.append(p)
            return preds
        return regs

    def store_lanes(self, space, addr, e: DType, values, pred=None):
        """Store registers ``values`` (elements of e) at ``addr``."""
        guard = f"@{pred} " if pred else ""
        cls = _reg_class(e)
        if e.is_bool:
            values = [self.pred_to_u32(v) for v in values]
            cls = "b32"
        values = [self.reg(v, cls) for v in values]
        k = len(values)
        if k <= 4:
            v = "" if k == 1 else f".v{k}"
            src = values[0] if k == 1 else "{" + ", ".join(values) + "}"
            self.ins(f"{guard}st.{space}{v}.{_ST[e.name]} {addr}, {src};")
            return
        per = 4 // e.itemsize
        words = []
        for i in range(0, k, per):
            w = self.new("b32")
            part = values[i:i + per]
            if e.name in _HALF:
                self.ins(f"mov.b32 {w}, {{{part[0]}, {part[1]}}};")
            elif per == 2:
                self.ins(f"prmt.b32 {w}, {part[0]}, {part[1]}, 0x5410;")
            else:
                lo, hi = self.new("b32"), self.new("b32")
                self.ins(f"prmt.b32 {lo}, {part[0]}, {part[1]}, 0x3340;")
                self.ins(f"prmt.b32 {hi}, {part[2]}, {part[3]}, 0x3340;")
                self.ins(f"prmt.b32 {w}, {lo}, {hi}, 0x5410;")
            words.append(w)
        self.ins(f"{guard}st.{space}.v{len(words)}.b32 {addr}, {{{', '.join(words)}}};")

    def load_one(self, space, addr, e: DType, pred) -> str:
        """One element at ``addr`` where ``pred`` holds, else zero (a bounded access)."""
        if e.is_bool:
            t, d = self.new("b32"), self.new("pred")
            self.ins(f"mov.b32 {t}, 0;")
            self.ins(f"@{pred} ld.{space}.u8 {t}, {addr};")
            self.ins(f"setp.ne.u32 {d}, {t}, 0;")
            return d
        cls = _reg_class(e)
        d = self.new(cls)
        self.ins(f"{_MOV[cls]} {d}, {self.zero(e)};")
        self.ins(f"@{pred} ld.{space}.{_MEM[e.name]} {d}, {addr};")
        return d

    def whole_access(self, p, off, vec, do_chunk):
        """``do_chunk(address, first element, elements)`` for each instruction of an
        unchecked vec-element access at element off of p."""
        s = p.type.elem.itemsize
        base = self.address(p, off)
        for i, k in self._chunks(p.type.elem, vec):
            do_chunk(self._offset_by(base, i * s), i, k)

    def render_load(self, op):
        p, off, _, bound, _ = access_operands(op)
        e, vec, space = p.type.elem, op.attrs["vec"], p.type.space
        r = op.results[0]
        if bound is None:
            out = []
            self.whole_access(p, off, vec,
                              lambda a, i, k: out.extend(self.load_lanes(space, a, e, k)))
            self.define(r, out)
            return
        if vec == 1:
            self.define(r, [self.load_one(space, self.address(p, off), e,
                                          self.in_range(off, 0, bound))])
            return
        # the whole vector in one access where it lies inside, else element by element
        cls = _reg_class(e)
        regs = [self.new(cls) for _ in range(vec)]
        part, done = self.label(), self.label()
        self.ins(f"@!{self.whole_in(off, vec, bound)} bra {part};")

        def whole(a, i, k):
            for j, g in enumerate(self.load_lanes(space, a, e, k)):
                self.ins(f"{_MOV[cls]} {regs[i + j]}, {g};")
        self.whole_access(p, off, vec, whole)
        self.ins(f"bra.uni {done};")
        self.put_label(part)
        base = self.address(p, off)
        for i in range(vec):
            g = self.load_one(space, self._offset_by(base, i * e.itemsize), e,
                              self.in_range(off, i, bound))
            self.ins(f"{_MOV[cls]} {regs[i]}, {g};")
        self.put_label(done)
        self.define(r, regs)

    def render_store(self, op):
        p, off, val, bound, _ = access_operands(op)
        e, vec, space = p.type.elem, op.attrs["vec"], p.type.space
        values = self.bcast(val, vec)

        def whole(a, i, k):
            self.store_lanes(space, a, e, values[i:i + k])
        if bound is None:
            self.whole_access(p, off, vec, whole)
            return
        if vec == 1:
            self.store_lanes(space, self.address(p, off), e, values, self.in_range(off, 0, bound))
            return
        part, done = self.label(), self.label()
        self.ins(f"@!{self.whole_in(off, vec, bound)} bra {part};")
        self.whole_access(p, off, vec, whole)
        self.ins(f"bra.uni {done};")
        self.put_label(part)
        base = self.address(p, off)
        for i in range(vec):
            self.store_lanes(space, self._offset_by(base, i * e.itemsize), e, [values[i]],
                             self.in_range(off, i, bound))
        self.put_label(done)

    # -- control flow -------------------------------------------------------------------------
    def carried_registers(self, values, loop) -> list:
        """Registers for the lanes of ``values`` (the carried values of ``loop``), per value:
        an initial value's own where it dies at the loop (no copy: a wgmma accumulator still
        in flight must not be read, ptxas would serialize the wgmmas, C7514), else fresh."""
        out, taken = [], set()
        for v in values:
            lanes = self.lanes(v)
            own = (all(x.startswith("%") for x in lanes) and len(set(lanes)) == len(lanes)
                   and not taken & set(lanes) and self.dies_here(v, loop))
            out.append(list(lanes) if own else [self.new(_reg_class(v.type)) for _ in lanes])
            taken.update(out[-1])
        return out

    def assign(self, regs, values, parallel):
        """regs[i] (per value, per lane) = the lanes of values[i]; ``parallel``: through
        temporaries, since a yielded value may be another carried register."""
        pairs = [(d, s, _reg_class(v.type)) for ds, v in zip(regs, values)
                 for d, s in zip(ds, self.bcast(v, len(ds))) if d != s]
        self.forget()
        written = {d for d, _, _ in pairs}
        if parallel and any(s in written for _, s, _ in pairs):
            temps = []
            for d, s, cls in pairs:
                t = self.new(cls)
                self.ins(f"{_MOV[cls]} {t}, {s};")
                temps.append(t)
            pairs = [(d, t, cls) for (d, _, cls), t in zip(pairs, temps)]
        for d, s, cls in pairs:
            self.ins(f"{_MOV[cls]} {d}, {s};")

    def region(self, block, regs, exit_label=None, parallel=False):
        """A region's ops; its yield writes ``regs``, its condition leaves to ``exit_label``."""
        for op in block.ops:
            if op.kind == "yield":
                self.assign(regs, op.operands, parallel)
            elif op.kind == "condition":
                self.ins(f"@!{self.lane(op.operands[0])} bra {exit_label};")
            else:
                self.emit_op(op)

    def bind(self, args, regs):
        for a, r in zip(args, regs):
            self.names[a] = r

    def render_for(self, op):
        lb, ub, step = op.operands[:3]
        inits = op.operands[3:]
        body = op.regions[0]
        iv = body.args[0]
        e = scalar_of(iv.type)
        ity, w = _ity(e), _wide(e)
        regs = self.carried_registers(inits, op)
        self.assign(regs, inits, False)
        i = self.new_of(e)
        self.ins(f"mov.b{w} {i}, {self.lane(lb)};")
        k = self.const_of(self.lane(step))
        flip = None
        if k is None:  # iv > ub <=> ~iv < ~ub: one compare against a flip mask (cemit)
            flip, ps = self.new_of(e), self.new("pred")
            self.ins(f"setp.gt.{ity} {ps}, {self.lane(step)}, 0;")
            self.ins(f"selp.b{w} {flip}, 0, -1, {ps};")
        head, end = self.label(), self.label()

        def past_the_end():  # the loop's test: one compare (cemit's)
            stop = self.new("pred")
            if flip is None:
                self.ins(f"setp.{'ge' if k > 0 else 'le'}.{ity} {stop}, {i}, {self.lane(ub)};")
            else:
                a, b = self.new_of(e), self.new_of(e)
                self.ins(f"xor.b{w} {a}, {i}, {flip};")
                self.ins(f"xor.b{w} {b}, {self.lane(ub)}, {flip};")
                self.ins(f"setp.ge.{ity} {stop}, {a}, {b};")
            return stop
        # rotated: tested once before the first iteration, then at the bottom of each
        self.ins(f"@{past_the_end()} bra {end};")
        self.put_label(head)
        self.names[iv] = [i]
        self.bind(body.args[1:], regs)
        self.region(body, regs, parallel=True)
        self.ins(f"add.{ity} {i}, {i}, {self.lane(step)};")
        self.narrow(i, e)
        self.ins(f"@!{past_the_end()} bra {head};")
        self.put_label(end)
        self.bind(op.results, regs)

    def render_while(self, op):
        cond, body = op.regions
        regs = self.carried_registers(op.operands, op)
        self.assign(regs, op.operands, False)
        head, end = self.label(), self.label()
        self.put_label(head)
        self.bind(cond.args, regs)
        self.bind(body.args, regs)
        self.region(cond, regs, exit_label=end)
        self.region(body, regs, parallel=True)
        self.ins(f"bra.uni {head};")
        self.put_label(end)
        self.bind(op.results, regs)

    def render_if(self, op):
        (c,) = op.operands
        regs = [[self.new(_reg_class(r.type))
                 for _ in range(r.type.n if isinstance(r.type, VectorType) else 1)]
                for r in op.results]
        other, end = self.label(), self.label()
        has_else = any(o.kind != "yield" or o.operands for o in op.regions[1].ops)
        self.ins(f"@!{self.lane(c)} bra {other if has_else else end};")
        self.region(op.regions[0], regs)
        if has_else:
            self.ins(f"bra.uni {end};")
            self.put_label(other)
            self.region(op.regions[1], regs)
        self.put_label(end)
        self.bind(op.results, regs)

    def render_return(self, op):
        self.ins(f"bra.uni {self.exit_label};")


# op kinds whose results are (some of) their operands' registers
_RENAMES = frozenset({"vector_permute", "extract", "insert", "broadcast", "vector", "uniform"})


class _ProgramOrder:
    """Each op's place in program order (a pre-order walk), the ops using each value, and the
    loops around each op."""

    def __init__(self, fn):
        self.index, self.uses, self.parent = {}, {}, {}
        self.block_owner = {id(fn.body): None}

        def walk(block, parent):
            for op in block.ops:
                self.index[op] = len(self.index)
                self.parent[op] = parent
                for x in op.operands:
                    self.uses.setdefault(x, []).append(op)
                for r in op.regions:
                    self.block_owner[id(r)] = op
                    walk(r, op)
        walk(fn.body, None)

    def loop_between(self, op, v) -> bool:
        """A for/while encloses op inside the block v is defined in."""
        scope = self.block_owner.get(id(v.block)) if v.block is not None else None
        p = self.parent[op]
        while p is not None and p is not scope:
            if p.kind in ("for", "while"):
                return True
            p = self.parent[p]
        return False


def _asm_string(lines) -> list:
    """The PTX lines as C string literals of an asm template: % doubled, operand references
    (written #in<N>#) as %<N>, quotes and backslashes escaped."""
    import re
    out = []
    for text in lines:
        t = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
        t = re.sub(r"#in(\d+)#", r"%\1", t)
        out.append(f'"{t}\\n"')
    return out


# the asm constraint and C expression of an input of scalar type e (C name x)
def _input(e: DType, x: str) -> str:
    if e.is_bool or (e.is_int and e.kind == "uint" and e.bits <= 32):
        return f'"r"((unsigned){x})'
    if e.is_int and e.bits <= 32:
        return f'"r"((int){x})'
    if e.bits == 64 and e.is_int:
        return f'"l"({x})'
    return {"f32": f'"f"({x})', "f64": f'"d"({x})', "f16": f'"h"({x})', "bf16": f'"h"({x})'}[e.name]


class PtxShellEmitter(CudaEmitter):
    """The CUDA dialect with its body replaced by one asm statement holding the PTX body:
    the signature, launch bounds, shared declarations and helper structs are the dialect's."""

    def emit_block(self, block, indent):
        inputs, operands = {}, []

        def add(value, exprs):
            inputs[value] = list(range(len(operands), len(operands) + len(exprs)))
            operands.extend(exprs)

        for p in self.fn.params:
            x, t = self.names[p.value], p.type
            if isinstance(t, TensorMapType):
                add(p.value, [f'"l"((unsigned long long)&{x})'])
            elif isinstance(t, PointerType):
                add(p.value, [f'"l"({x})'])
            elif isinstance(t, VectorType):
                add(p.value, [_input(t.elem, self.lane(x, i)) for i in range(t.n)])
            else:
                add(p.value, [_input(t, x)])
        for op in self.fn.walk():
            if op.kind == "smem_alloc":
                add(op.results[0],
                    [f'"r"((unsigned)__cvta_generic_to_shared({op.attrs["name"]}))'])
        dyn = None
        if self.fn.attrs.get("dyn_smem"):
            dyn = len(operands)
            operands.append('"r"((unsigned)__cvta_generic_to_shared(opus_dyn_smem))')
        body = PtxBody(self.fn, self.target, inputs, dyn).render()
        self.loc = None
        self.line(indent, "asm volatile(")
        self.line(indent + 1, '"{\\n"')
        for s in _asm_string(body):
            self.line(indent + 1, s)
        self.line(indent + 1, '"}"')
        self.line(indent + 1, f":: {', '.join(operands)} : \"memory\");")


def render_ptx_shell(fn, target) -> str:
    """CUDA C++ whose kernel body is the PTX body of ``fn`` (one asm statement)."""
    return PtxShellEmitter(fn, target).render()
