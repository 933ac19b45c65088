"""C-style emitter shared by the CUDA and HIP renderers (no #include anywhere).

Walks an IR Function once and writes flat C++: one variable per SSA value, structured loops and
branches, helpers in a small prelude emitted only when used. Everything that differs between
vendors is data the dialect subclass (codegen/cuda.py, codegen/hip.py) overrides, as in
tinygrad's CStyleLanguage: qualifiers, shared declarations, the kernel signature, the barrier, thread
indices (``code_for_special``), bit casts, math names (``code_for_math``) and helper functions
(``helper_sources``) are class attributes, so a new op adds a row to each dialect's table, not a
method per dialect. Methods a dialect overrides are the lowerings that genuinely differ (fp8
conversions in hardware, float -> int, AMD's buffer-resource accesses). Per-op methods are
``render_<op kind>``, dispatched by one table (``self.renderers``), and ``emit_op`` is the one
place where an error raised while rendering an op gets the op's kernel line.

Vectors are structs ``{ T v[n]; }`` aligned to their size (up to 16 bytes), so a 16-byte
vector load is one instruction and every lane is a register (lanes are indexed by constants);
a dialect may render long register vectors as one variable per lane (``scalar_lanes_from``,
LaneNames) and 16-bit vector stores as 32-bit words (``word_stores``), which NVVM compiles
faster (docs/compile_time.md). 16-bit floats are stored as ``unsigned short`` bit patterns and computed in f32 (rounded once
per operation, as ir/ops.py specifies).
"""
from __future__ import annotations

import linecache
import math
import os
import struct

from .. import dtypes as dt
from ..dtypes import DType
from ..errors import OpusError
from ..ir import (VectorType, PointerType, TensorMapType, scalar_of, lanes_of, op_handlers,
                  access_operands)
from .tma import TmaRendering
from .sync_atomics import SyncAtomicsRendering
from . import subbyte  # the sub-byte types' register and memory forms
from .cross_lane import CrossLaneRendering

__all__ = ["CEmitter", "CodegenError", "c_identifier", "kernel_symbol"]


class CodegenError(OpusError):
    """The IR cannot be rendered for this target (an op the chip or backend lacks). Raised while
    rendering an op, it names the op's kernel line (``loc``), as a TraceError does."""

    def __init__(self, message, loc=None, kernel=None):
        self.raw_message, self.loc = message, loc
        if loc is not None:
            where = f"{loc.file}:{loc.line}" + (f" (kernel {kernel!r})" if kernel else "")
            message = f"{where}: {message}"
            if loc.text and loc.text.strip():
                message += "\n    " + loc.text.strip()
        super().__init__(message)


def _located(error, op, kernel, backend) -> CodegenError:
    """``error``, raised while rendering ``op``, as a CodegenError at the op's kernel line."""
    if isinstance(error, CodegenError):
        message = error.raw_message
    else:  # a bug in a renderer: say which op it was rendering
        message = (f"internal error rendering op {op.kind!r} for {backend}: "
                   f"{type(error).__name__}: {error}")
    return CodegenError(message, op.loc, kernel)


_CTYPES = {
    "bool": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
    "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned", "u64": "unsigned long long",
    "f32": "float", "f64": "double", "f16": "unsigned short", "bf16": "unsigned short",
    "fp8_e4m3": "unsigned char", "fp8_e4m3fnuz": "unsigned char", "fp8_e5m2": "unsigned char",
    "fp8_e5m2fnuz": "unsigned char", "e8m0": "unsigned char",
    # sub-byte types: the code in the low bits of a byte (codegen/subbyte.py)
    "fp4_e2m1": "unsigned char", "fp6_e2m3": "unsigned char", "fp6_e3m2": "unsigned char",
    "int4": "unsigned char", "uint4": "unsigned char",
}
_UNSIGNED = {8: "unsigned char", 16: "unsigned short", 32: "unsigned", 64: "unsigned long long"}
_HALF = ("f16", "bf16")
_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|", "xor": "^"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# the C library's names of the math functions (f32 and f64)
_LIBM_F32 = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf",
             "rsqrt": "rsqrtf", "sin": "sinf", "cos": "cosf", "tanh": "tanhf", "floor": "floorf",
             "ceil": "ceilf", "trunc": "truncf", "rint": "rintf"}
_LIBM_F64 = {fn: name[:-1] for fn, name in _LIBM_F32.items()}


def _to_f32(x) -> float:
    """``x`` rounded to the nearest float32 (ties to even), overflow to +-inf, as numpy does."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:  # struct refuses finite values beyond float32's range
        return math.copysign(math.inf, x)


def _whole_vector_in(off_c, bound_c, vec):
    """C condition: elements off_c .. off_c+vec-1 all lie in [0, bound_c) (C expressions)."""
    return f"{off_c} >= 0 && (long long){off_c} + {vec - 1} < (long long){bound_c}"


def _lane_in(off_c, bound_c, i):
    """C condition: element off_c+i lies in [0, bound_c)."""
    return f"(long long){off_c} + {i} >= 0 && (long long){off_c} + {i} < (long long){bound_c}"


def c_identifier(name: str) -> str:
    """``name`` (a Python identifier) spelled with ASCII letters, digits and ``_`` only, one to
    one: an ASCII name is itself; in any other, ``_`` is doubled and each non-ASCII character
    becomes ``_<code point in hex>_`` (``größe`` -> ``gr_f6__df_e``), so two names that differ
    only in non-ASCII letters stay apart."""
    if name.isascii():
        return name
    return "".join("__" if c == "_" else c if c.isascii() else f"_{ord(c):x}_" for c in name)


def kernel_symbol(name: str) -> str:
    """The C symbol of the kernel named ``name``: the runtime looks it up by this, profilers
    show it. A fixed suffix keeps user names off C/C++ keywords and device builtins (``exp``,
    ``printf``, ``template``, ``threadIdx``) and off the ``opus_`` helpers; names with
    non-ASCII letters end in ``_opus_u``, which no ASCII name's symbol does, so no two kernel
    names share a symbol."""
    return f"{name}_opus" if name.isascii() else f"{c_identifier(name)}_opus_u"


def _wrap_type(e: DType) -> str:
    """The C type in which integer + - * and negation wrap as the language says: unsigned (signed
    overflow is UB in C) and at least 32 bits (narrower operands would be promoted to int,
    where 65535 * 65535 overflows)."""
    return _UNSIGNED[e.bits] if e.bits >= 32 else "unsigned"


def _c_string(text: str) -> str:
    """``text`` as the body of a C string literal (file names in #line markers)."""
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return "".join(out)


def _python_line_comment(loc) -> str:
    """``// file.py:12  <that line of Python>``: where the following C lines come from."""
    text = loc.text if loc.text is not None else linecache.getline(loc.file, loc.line)
    text = text.strip()
    text = "".join(c for c in text if c.isprintable()).rstrip("\\ ")  # a final \ would splice
    if len(text) > 100:
        text = text[:97] + "..."
    return f"// {os.path.basename(loc.file)}:{loc.line}  {text}".rstrip()


def with_line_markers(lines, locs) -> list:
    """``lines`` (parallel ``locs``: each line's source location or None) with, before each
    run of lines from one Python line, a comment naming it, and ``#line`` markers wherever the
    compiler's own count (one more per line) would not give the line's Python location: its
    diagnostics and profilers (ncu -lineinfo) then name the kernel's lines. The file name is
    repeated only when it changes. Without the markers (runtime.diagnostics
    .strip_line_markers) the text is what ``kernel.source()`` shows."""
    out, file, next_no, shown = [], None, None, None
    for text, loc in zip(lines, locs):
        if loc is not None:
            indent = text[:len(text) - len(text.lstrip())]
            if (loc.file, loc.line) != shown:
                out.append(indent + _python_line_comment(loc))
                shown = (loc.file, loc.line)
                if next_no is not None:
                    next_no += 1
            if (loc.file, loc.line) != (file, next_no):
                name = "" if loc.file == file else f' "{_c_string(loc.file)}"'
                out.append(f"{indent}#line {loc.line}{name}")
                file, next_no = loc.file, loc.line
        out.append(text)
        if next_no is not None:
            next_no += 1
    return out


class LaneNames(str):
    """The C name of a register vector rendered as one scalar variable per lane, named
    ``<name>_<i>`` (CEmitter.scalar_lanes_from); lowerings ask ``lane(i)``."""

    def lane(self, i) -> str:
        return f"{self}_{i}"


# ops whose renderers read and define vectors lane by lane only (lanes, assign_lanes), so they
# take vectors split into scalars as they are; control flow copies them with decl_stmt/copy_stmt
_LANEWISE_KINDS = frozenset({
    "const", "binary", "cmp", "unary", "math", "fma", "med3", "select", "cast", "vector",
    "extract", "insert", "broadcast", "vector_permute", "for", "if", "while"})


class CEmitter(TmaRendering, CrossLaneRendering, SyncAtomicsRendering):  # the mbarrier and TMA ops (codegen/tma.py)
    # and the cross-lane ops (codegen/cross_lane.py)
    """Renders one Function. A dialect subclass sets ``backend`` and the spellings below."""

    # -- dialect spellings: each dialect overrides these (data, not methods) -------------------
    backend = "c"
    device_fn_qualifiers = "static inline"  # before every helper function's definition
    align_attr = "alignas({})"               # alignment of a vector struct or shared array
    shared_qualifier = ""                    # storage class of shared-memory arrays
    # the kernel's signature; launch_attributes(hints) (targets/occupancy.launch_hints: the
    # block size, occupancy and register hints in the vendor's terms) goes in its place
    kernel_signature = "void {launch_bounds}{symbol}({params})"
    barrier = ()                  # the lines of a block-wide barrier
    prelude = ()                  # lines before everything else (typedefs)
    # unsigned thread index and block size along axis {} (for the linear thread id)
    thread_index = "{}"
    block_size_along = "{}"
    # special registers: kind ('thread_id', ..., 'lane_id') -> fn(emitter, axis) -> C int;
    # a dialect adds its block_id, grid_size, num_blocks, lane_id and warp_id
    code_for_special: dict = {
        "thread_id": lambda s, a: f"(int){s.thread_index.format(a)}",
        "block_dim": lambda s, a: f"(int){s.block_size_along.format(a)}",
    }
    # bit casts: 'u32->f32', 'u64->f64', 'f32->u32' -> C template of the value {}
    code_for_bitcast: dict = {}
    # math: 'f32'/'f64' -> {function: C name}; fabs, fma, fmin, fmax: math_prefix + C name
    code_for_math = {"f32": _LIBM_F32, "f64": _LIBM_F64}
    math_prefix = ""
    # async copies: the lines of a group commit, and fn(emitter, async_wait attrs) -> lines
    async_commit = ()
    async_wait = staticmethod(lambda s, attrs: s._not_here("an async wait", "wait rules"))
    # helper functions by name: their C definition (a str, or fn(emitter) -> str where a
    # target answer chooses the body), emitted once where used
    helper_sources: dict = {}
    # readfirstlane / uniform: a 32-bit word read from the warp's first active lane ({}: the
    # word), after lane_read_setup; uniform_word None: a uniform value is the value itself
    readfirstlane_word = None
    uniform_word = None
    lane_read_setup = ""
    byte_perm = None  # "f({}, {}, {})": bytes of (y:x) picked by selector nibbles (CUDA __byte_perm)
    # whole-vector stores of 16-bit lanes as 32-bit words (_word_store)
    word_stores = False
    # register vectors of at least this many lanes are one C variable per lane (LaneNames)
    # instead of a struct (0: never): NVVM spends much of its time on big structs (a wgmma
    # accumulator of 128 floats copied whole at every wgmma, fence and loop step)
    scalar_lanes_from = 0

    def __init__(self, fn, target):
        self.fn = fn
        self.target = target
        self.names = {}
        self.counter = 0
        self.lines = []
        self.line_locs = []  # the source location (ir Loc or None) of each of self.lines
        self.loc = None  # the location of the op being emitted
        self.helpers = {}  # name -> code, in first-use order
        self.vector_types = {}  # (elem name, n) -> struct name
        self.structs_only = False  # while an op that takes vectors whole is rendered
        self.symbol = kernel_symbol(fn.name)
        self.renderers = op_handlers(self, "render_")  # op kind -> render_<kind>

    # -- names and types ---------------------------------------------------------------------
    def name(self, v):
        n = self.names.get(v)
        if n is None:
            raise CodegenError(f"internal: value {v!r} used before definition")
        return n

    def fresh(self, v=None, prefix="v"):
        self.counter += 1
        n = f"{prefix}{self.counter}"
        if v is not None:
            self.names[v] = n
        return n

    def scalar_ctype(self, e: DType) -> str:
        c = _CTYPES.get(e.name)
        if c is None:
            raise CodegenError(f"internal: {e.name} reached the {self.backend} renderer "
                               "(the target's table refuses it while tracing)")
        return c

    def ctype(self, t) -> str:
        if isinstance(t, DType):
            return self.scalar_ctype(t)
        if isinstance(t, VectorType):
            key = (t.elem.name, t.n)
            name = self.vector_types.get(key)
            if name is None:
                name = f"opus_{t.elem.name}x{t.n}"
                self.vector_types[key] = name
            return name
        if isinstance(t, PointerType):
            return f"{self.scalar_ctype(t.elem)}*"
        if isinstance(t, TensorMapType):
            return self.tensor_map_param_type(t)
        raise CodegenError(f"no C type for {t!r}")

    def vector_struct(self, elem_name, n):
        e = dt.dtype_from_name(elem_name)
        if e.packed:
            return subbyte.packed_struct(self, VectorType(e, n))
        nbytes = n * e.itemsize
        align = min(16, 1 << (nbytes.bit_length() - 1)) if nbytes else 1
        return (f"struct {self.align_attr.format(align)} opus_{elem_name}x{n} "
                f"{{ {self.scalar_ctype(e)} v[{n}]; }};")

    def helper(self, name, definition):
        """Define device function ``name`` once (``definition``: its C text, without the
        dialect's inline/device qualifiers) and return the name to call it by."""
        if name not in self.helpers:
            self.helpers[name] = f"{self.device_fn_qualifiers} {definition}"
        return name

    def use_helper(self, name):
        """The helper ``name`` of the dialect's table (``helper_sources``), defined once."""
        source = self.helper_sources.get(name)
        if source is None:
            raise CodegenError(f"internal: the {self.backend} renderer has no helper {name}")
        return self.helper(name, source(self) if callable(source) else source)

    # -- output -------------------------------------------------------------------------------
    def line(self, indent, s):
        self.lines.append("  " * indent + s)
        self.line_locs.append(self.loc)

    def render(self) -> str:
        signature = self.signature()  # names the parameters
        top = self.kernel_top()       # names the shared arrays
        self.lines, self.line_locs = [], []
        self.emit_block(self.fn.body, 1)
        out = [f"// opus kernel {self.fn.name} (symbol {self.symbol}) for {self.target.name} "
               "(generated; no headers)"]
        out += self.prelude
        out += [self.vector_struct(e, n) for (e, n) in self.vector_types]
        out += list(self.helpers.values())
        out.append(signature + " {")
        out += top
        out += with_line_markers(self.lines, self.line_locs)
        out.append("}")
        return "\n".join(out) + "\n"

    def params_decl(self) -> str:
        """The kernel's C parameter list; each name is ``p_<name>_<n>`` (ASCII, unique)."""
        return ", ".join(f"{self.ctype(p.type)} {self.fresh(p.value, f'p_{c_identifier(p.name)}_')}"
                         for p in self.fn.params)

    # -- the kernel's frame: signature and declarations -----------------------------------
    def signature(self):
        from ..targets.occupancy import launch_hints
        a = self.fn.attrs
        hints = launch_hints(self.target, a.get("block_size"), a.get("min_blocks"),
                             a.get("maxnreg"))
        return self.kernel_signature.format(launch_bounds=self.launch_attributes(hints),
                                            symbol=self.symbol, params=self.params_decl())

    def launch_attributes(self, hints) -> str:
        """The attributes before the kernel's name for ``launch_hints``' answer (dialects)."""
        return ""

    def shared_decl(self, ct, name, count, align):
        return f"{self.shared_qualifier} {self.align_attr.format(align)} {ct} {name}[{count}];"

    def kernel_top(self):
        """Declarations at the top of the kernel body (shared-memory arrays)."""
        out = []
        if self.fn.attrs.get("dyn_smem"):
            align = self.fn.attrs.get("dyn_smem_align", 16)
            out.append(f"  extern {self.shared_decl('unsigned char', 'opus_dyn_smem', '', align)}")
        for op in self.fn.walk():
            if op.kind == "smem_alloc":
                a = op.attrs
                nm = a["name"]
                self.names[op.results[0]] = nm
                d, count = a["dtype"], a["count"]
                if d.packed:  # the packed bytes
                    count = d.nbytes(count)
                out.append(f"  {self.shared_decl(self.scalar_ctype(d), nm, count, a['align'])}")
        return out

    # -- expressions --------------------------------------------------------------------------
    def lane(self, expr, i):
        return expr.lane(i) if isinstance(expr, LaneNames) else f"{expr}.v[{i}]"

    def split_lanes(self, t) -> bool:
        """Whether values of type ``t`` are rendered one C variable per lane."""
        return (self.scalar_lanes_from > 0 and not self.structs_only
                and isinstance(t, VectorType) and not t.elem.packed
                and t.n >= self.scalar_lanes_from)

    def fresh_of(self, t, prefix):
        """A fresh name for a variable of type ``t`` (LaneNames where split)."""
        n = self.fresh(prefix=prefix)
        return LaneNames(n) if self.split_lanes(t) else n

    def decl_stmt(self, t, n, init=None) -> str:
        """The declaration of variable ``n`` of type ``t``, from the lane expressions ``init``
        (or the value of the name ``init``) where given."""
        if isinstance(n, LaneNames):
            ct = self.scalar_ctype(t.elem)
            if init is None:
                return f"{ct} {', '.join(n.lane(i) for i in range(t.n))};"
            xs = init if isinstance(init, list) else [self.lane(init, i) for i in range(t.n)]
            return f"{ct} {', '.join(f'{n.lane(i)} = {x}' for i, x in enumerate(xs))};"
        if isinstance(init, list):  # a struct from lanes
            return f"{self.ctype(t)} {n}; " + " ".join(
                f"{self.lane(n, i)} = {x};" for i, x in enumerate(init))
        return f"{self.ctype(t)} {n}" + ("" if init is None else f" = {init}") + ";"

    def copy_stmt(self, t, dst, src) -> str:
        """``dst = src`` for names of type ``t`` (lane by lane where split)."""
        if isinstance(dst, LaneNames) or isinstance(src, LaneNames):
            return " ".join(f"{self.lane(dst, i)} = {self.lane(src, i)};" for i in range(t.n))
        return f"{dst} = {src};"

    def lanes(self, v):
        """C expressions for each lane of value v (a scalar has one)."""
        n = self.name(v)
        if isinstance(v.type, VectorType):
            if v.type.elem.packed:
                return subbyte.packed_lanes(n, v.type)
            return [self.lane(n, i) for i in range(v.type.n)]
        return [n]

    def const_expr(self, x, e: DType) -> str:
        if e.is_bool:
            return "true" if x else "false"
        if e.packed:  # the code (codegen/subbyte.py)
            import numpy as np
            code = int(np.array(x, dtype=e.np_dtype).view(np.uint8)) & ((1 << e.bits) - 1)
            return f"(unsigned char){hex(code)}"
        if e.is_int:
            x = int(x)
            suffix = {"i64": "ll", "u64": "ull", "u32": "u"}.get(e.name, "")
            if e.name == "i64" and x == -(1 << 63):
                return "(-9223372036854775807ll - 1)"
            if e.name == "i32" and x == -(1 << 31):
                return "(-2147483647 - 1)"
            return f"{x}{suffix}" if e.bits >= 32 else f"({self.scalar_ctype(e)}){x}"
        if e.name in _HALF or e.storage_only:
            import numpy as np  # only kernels with such constants pay for the import
            bits = int(np.array(x, dtype=e.np_dtype).view(f"u{e.itemsize}"))
            return f"({self.scalar_ctype(e)}){hex(bits)}"
        if e.name == "f32":
            f = _to_f32(x)
            if math.isfinite(f):
                return f"{f.hex()}f" if f != 0 or math.copysign(1, f) > 0 else "-0.0f"
            bits = struct.unpack("<I", struct.pack("<f", f))[0]
            return self.bits_to_f32(f"{hex(bits)}u")
        if e.name == "f64":
            f = float(x)
            if math.isfinite(f):
                return f.hex() if f != 0 or math.copysign(1, f) > 0 else "-0.0"
            bits = struct.unpack("<Q", struct.pack("<d", f))[0]
            return self.bits_to_f64(f"{hex(bits)}ull")
        raise CodegenError(f"constant of type {e.name}")

    def bits_to_f32(self, bits):
        return self.code_for_bitcast["u32->f32"].format(bits)

    def bits_to_f64(self, bits):
        return self.code_for_bitcast["u64->f64"].format(bits)

    def f32_to_bits(self, f):
        return self.code_for_bitcast["f32->u32"].format(f)

    # f32 view of a 16-bit float or storage-type lane (computation happens in f32)
    def to_f32(self, expr, e: DType):
        if e.packed:
            return subbyte.cast_packed(self, expr, e, dt.f32, "rn", False)
        if e.storage_only:
            return self.cast_storage(expr, e, dt.f32, "rn", False)
        if e.name == "f16":
            return f"{self.use_helper('opus_h2f')}({expr})"
        if e.name == "bf16":
            return f"{self.use_helper('opus_b2f')}({expr})"
        return expr

    def from_f32(self, expr, e: DType, rounding="rn"):
        if rounding in ("truncate", "truncate_with_nan"):
            return f"{self.bf16_truncation(rounding)}({expr})"
        if e.name == "f16":
            return f"{self.use_helper(f'opus_f2h_{rounding}')}({expr})"
        if e.name == "bf16":
            return f"{self.use_helper(f'opus_f2b_{rounding}')}({expr})"
        return expr

    def bf16_truncation(self, rounding):
        """opus_f2b_<rounding>(f): the original's bf16 truncations (ir/ops.py cast): the high
        half of the bits; 'truncate_with_nan' sets bit 0 of a NaN whose payload is in the low
        half, so it stays a NaN."""
        keep = (" | (unsigned short)((u & 0x7F800000u) == 0x7F800000u && (u & 0xFFFFu) != 0u)"
                if rounding == "truncate_with_nan" else "")
        n = f"opus_f2b_{rounding}"
        return self.helper(n, f"unsigned short {n}(float f) {{ unsigned u = {self.f32_to_bits('f')}; "
                              f"return (unsigned short)(u >> 16){keep}; }}")

    # -- statements ---------------------------------------------------------------------------
    def declare(self, v, indent):
        n = self.fresh(v)
        if self.split_lanes(v.type):
            n = self.names[v] = LaneNames(n)
        self.line(indent, self.decl_stmt(v.type, n))
        return n

    def assign_lanes(self, v, exprs, indent):
        """Define v from per-lane expressions."""
        if isinstance(v.type, VectorType) and v.type.elem.packed:
            return subbyte.assign_packed(self, v, exprs, indent)
        if self.split_lanes(v.type):
            n = self.names[v] = LaneNames(self.fresh())
            ct = self.scalar_ctype(v.type.elem)
            for i, x in enumerate(exprs):
                self.line(indent, f"{ct} {n.lane(i)} = {x};")
        elif isinstance(v.type, VectorType):
            n = self.declare(v, indent)
            for i, x in enumerate(exprs):
                self.line(indent, f"{self.lane(n, i)} = {x};")
        else:
            n = self.fresh(v)
            self.line(indent, f"{self.ctype(v.type)} {n} = {exprs[0]};")

    def emit_block(self, block, indent):
        for op in block.ops:
            self.emit_op(op, indent)

    def emit_op(self, op, indent):
        """Emit ``op`` through the dispatch table; the lines it writes carry its source location
        (else the enclosing op's). The one choke point for errors: any error raised while
        rendering an op becomes a CodegenError naming the op's kernel file:line."""
        outer = self.loc
        self.loc = op.loc or outer
        try:
            render = self.renderers.get(op.kind)
            if render is None:
                raise CodegenError(f"internal: the {self.backend} renderer has no rendering of "
                                   f"op {op.kind!r}")
            if self.scalar_lanes_from and not self.lanewise(op):
                self._through_structs(op, render, indent)
            else:
                render(op, indent)
        except Exception as e:
            if isinstance(e, CodegenError) and e.loc is not None:
                raise  # located already, by an op nested in this one
            raise _located(e, op, self.fn.name, f"{self.backend} ({self.target.name})") from e
        finally:
            self.loc = outer

    def lanewise(self, op) -> bool:
        """Whether ``op``'s renderer takes vectors split into scalars (_LANEWISE_KINDS; the
        dialect names the target ops whose lowerings do)."""
        return op.kind in _LANEWISE_KINDS or (op.kind == "target_op"
                                              and self.lanewise_target_op(op.attrs["name"]))

    def lanewise_target_op(self, name) -> bool:
        return False

    def _through_structs(self, op, render, indent):
        """Render ``op``, whose renderer takes vectors whole, with structs in place of the
        vectors split into scalars: such operands copied into struct temporaries, its
        results defined as structs and then split."""
        saved = {}
        for v in op.operands:
            n = self.names.get(v)
            if isinstance(n, LaneNames) and v not in saved:
                t = self.fresh(prefix="sv")
                self.line(indent, self.decl_stmt(v.type, t, self.lanes(v)))
                saved[v], self.names[v] = n, t
        self.structs_only = True
        try:
            render(op, indent)
        finally:
            self.structs_only = False
            self.names.update(saved)
        for r in op.results:
            if self.split_lanes(r.type):
                whole = self.names[r]
                n = self.names[r] = LaneNames(self.fresh())
                self.line(indent, self.decl_stmt(r.type, n, whole))

    # per-op emitters ------------------------------------------------------------------------
    def render_const(self, op, indent):
        r = op.results[0]
        e = scalar_of(r.type)
        val = op.attrs["value"]
        if isinstance(r.type, VectorType):
            self.assign_lanes(r, [self.const_expr(x, e) for x in val], indent)
        else:
            self.names[r] = self.const_expr(val, e)  # scalar constants are inlined

    def render_binary(self, op, indent):
        a, b = op.operands
        r = op.results[0]
        e = scalar_of(r.type)
        o = op.attrs["op"]
        if op.attrs.get("nan") == "ieee2008":  # the chip's own min/max (ir/ops.py)
            f = self.use_helper(f"opus_{o}_ieee2008_{e.name}")
            self.assign_lanes(r, [f"{f}({x}, {y})"
                                  for x, y in zip(self._bcast(a, r), self._bcast(b, r))], indent)
            return
        self.assign_lanes(r, [self.binary_expr(o, x, y, e)
                              for x, y in zip(self._bcast(a, r), self._bcast(b, r))], indent)

    def _bcast(self, v, like):
        ls = self.lanes(v)
        return ls * lanes_of(like.type) if len(ls) == 1 else ls

    def binary_expr(self, o, x, y, e: DType) -> str:
        if e.is_float:
            if e.name in _HALF:
                return self.from_f32(self.binary_expr(o, self.to_f32(x, e), self.to_f32(y, e), dt.f32), e)
            if o in ("min", "max"):
                return f"{self.float_fn('f' + o, e)}({x}, {y})"
            return f"({x} {_SYM[o]} {y})"
        ct = self.scalar_ctype(e)
        if e.is_bool:
            if o in ("and", "or", "xor"):
                return f"({x} {_SYM[o]} {y})"
            if o in ("min", "max"):
                return f"({x} {'&&' if o == 'min' else '||'} {y})"
            raise CodegenError(f"{o} on bool")
        ut = _UNSIGNED[e.bits]
        if o in ("add", "sub", "mul"):
            cu = _wrap_type(e)
            return self._narrow(f"(({cu}){x} {_SYM[o]} ({cu}){y})", e)
        if o in ("and", "or", "xor"):
            return f"({ct})({x} {_SYM[o]} {y})"
        if o in ("min", "max"):
            return f"({x} {'<' if o == 'min' else '>'} {y} ? {x} : {y})"
        if o == "mulhi":  # 32-bit only (lang); IMAD.HI / v_mul_hi_[iu]32
            wide = "long long" if e.kind == "int" else "unsigned long long"
            return f"({ct})((({wide}){x} * ({wide}){y}) >> 32)"
        if o in ("floordiv", "mod", "tdiv", "tmod"):
            return f"{self.helper_div(o, e)}({x}, {y})"
        if o in ("shl", "shr"):
            w = e.bits
            if o == "shl":
                return f"(({ut}){y} < {w}u ? ({ct})(({ut}){x} << {y}) : ({ct})0)"
            if e.kind == "int":
                return f"(({ut}){y} < {w}u ? ({ct})({x} >> {y}) : ({ct})({x} < 0 ? -1 : 0))"
            return f"(({ut}){y} < {w}u ? ({ct})({x} >> {y}) : ({ct})0)"
        raise CodegenError(f"binary {o} on {e.name}")

    def helper_div(self, o, e: DType):
        ct, ut = self.scalar_ctype(e), _UNSIGNED[e.bits]
        name = f"opus_{o}_{e.name}"
        if e.kind == "uint":
            body = {"floordiv": "return b == 0 ? ({t})~({t})0 : ({t})(a / b);",
                    "tdiv": "return b == 0 ? ({t})~({t})0 : ({t})(a / b);",
                    "mod": "return b == 0 ? a : ({t})(a % b);",
                    "tmod": "return b == 0 ? a : ({t})(a % b);"}[o].format(t=ct)
        else:
            neg = f"({ct})(({ut})0 - ({ut})a)"
            body = {
                "tdiv": f"if (b == 0) return ({ct})-1; if (b == -1) return {neg}; return ({ct})(a / b);",
                "tmod": f"if (b == 0) return a; if (b == -1) return 0; return ({ct})(a % b);",
                "floordiv": (f"if (b == 0) return ({ct})-1; if (b == -1) return {neg}; "
                             f"{ct} q = ({ct})(a / b); return ({ct})(q - (((a % b) != 0) & ((a < 0) != (b < 0))));"),
                "mod": (f"if (b == 0) return a; if (b == -1) return 0; {ct} r = ({ct})(a % b); "
                        f"return ({ct})(r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0));"),
            }[o]
        return self.helper(name, f"{ct} {name}({ct} a, {ct} b) {{ {body} }}")

    def render_cmp(self, op, indent):
        a, b = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        c = _CMP[op.attrs["pred"]]
        xs, ys = self.lanes(a), self.lanes(b)
        self.assign_lanes(r, [f"({self.to_f32(x, e)} {c} {self.to_f32(y, e)})" for x, y in zip(xs, ys)],
                          indent)

    def render_unary(self, op, indent):
        (a,) = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        o = op.attrs["op"]
        ct = self.scalar_ctype(e)
        out = []
        for x in self.lanes(a):
            if o == "not":
                out.append(f"(!{x})")
            elif e.is_float:
                f = self.to_f32(x, e)
                fn = self.float_fn("fabs", e)
                out.append(self.from_f32(f"(-({f}))" if o == "neg" else f"{fn}({f})", e))
            elif o == "neg":
                out.append(self._negate(x, e))
            elif o == "invert":
                out.append(f"({ct})(~{x})")
            elif o == "abs":
                out.append(f"({x} < 0 ? {self._negate(x, e)} : {x})")
            elif o == "popc":
                out.append(self.popc(x, e))
        self.assign_lanes(r, out, indent)

    def popc(self, x, e: DType):
        """The set bits of integer x (the dialects' count: CUDA's __popc / __popcll, HIP's
        builtins), in x's type."""
        u = "unsigned long long" if e.bits == 64 else "unsigned"
        mask = "" if e.bits >= 32 else f" & {(1 << e.bits) - 1}u"
        fn = self.popc_fns[e.bits == 64]
        return f"({self.scalar_ctype(e)}){fn}(({u})({x}){mask})"

    popc_fns = ("__popc", "__popcll")

    def float_fn(self, base, e: DType) -> str:
        """The C math function ``base`` (fabs, fma, fmin, fmax) for f64, else its f32 form (f16
        and bf16 compute in f32), after the dialect's ``math_prefix`` (HIP: builtins)."""
        return self.math_prefix + (base if e.name == "f64" else base + "f")

    def _negate(self, x, e: DType):
        """-x wrapping at e's width."""
        cu = _wrap_type(e)
        return self._narrow(f"(({cu})0 - ({cu}){x})", e)

    def _narrow(self, wide, e: DType):
        """An unsigned 32/64-bit result ``wide`` as integer type e. Narrow signed types are
        sign-extended by shifts: NVRTC 13.0 drops the truncation of (short)(0 - x) (also when it
        proves the left operand 0) if the result is widened later: -(-32768) came out 32768."""
        ct = self.scalar_ctype(e)
        if e.kind == "int" and e.bits < 32:
            sh = 32 - e.bits
            return f"({ct})((int)({wide} << {sh}) >> {sh})"
        return f"({ct}){wide}"

    def math_fn(self, fn, e: DType):
        """The dialect's name of math function ``fn`` for ``e`` (``code_for_math``; f16 and
        bf16 compute in f32), its helper defined where the name is one."""
        name = self.code_for_math["f64" if e.name == "f64" else "f32"].get(fn)
        if name is None:
            raise CodegenError(f"internal: {e.name} {fn} reached the {self.backend} renderer for "
                               f"{self.target.name} (Target.math_f64 refuses it while tracing)")
        if name in self.helper_sources:
            self.use_helper(name)
        return name

    def render_math(self, op, indent):
        (a,) = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        f = self.math_fn(op.attrs["fn"], e)
        self.assign_lanes(r, [self.from_f32(f"{f}({self.to_f32(x, e)})", e) for x in self.lanes(a)],
                          indent)

    def render_fma(self, op, indent):
        r = op.results[0]
        e = scalar_of(r.type)
        f = self.float_fn("fma", e)
        lanes = zip(*(self._bcast(v, r) for v in op.operands))
        self.assign_lanes(r, [self.from_f32(f"{f}({', '.join(self.to_f32(x, e) for x in l)})", e)
                              for l in lanes], indent)

    def render_med3(self, op, indent):
        r = op.results[0]
        e = scalar_of(r.type)
        lanes = zip(*(self._bcast(v, r) for v in op.operands))
        if f"opus_med3_{e.name}" in self.helper_sources:  # the dialect's instruction
            f = self.use_helper(f"opus_med3_{e.name}")
            self.assign_lanes(r, [f"{f}({x}, {y}, {z})" for x, y, z in lanes], indent)
            return
        if not e.is_float:  # NVIDIA: VIMNMX
            out = []
            for x, y, z in lanes:
                if e.is_bool:  # the majority
                    out.append(f"(({x} && {y}) || ({z} && ({x} || {y})))")
                else:
                    mn = f"({x} < {y} ? {x} : {y})"
                    mx = f"({x} > {y} ? {x} : {y})"
                    inner = f"({mx} < {z} ? {mx} : {z})"
                    out.append(f"({mn} > {inner} ? {mn} : {inner})")
            self.assign_lanes(r, out, indent)
            return
        f = self.med3_helper(dt.f64 if e.name == "f64" else dt.f32)
        self.assign_lanes(r, [self.from_f32(f"{f}({', '.join(self.to_f32(x, e) for x in l)})", e)
                              for l in lanes], indent)

    def med3_helper(self, e: DType):
        """The float median helper: the dialect's own (HIP: v_med3_f32), else min/max composed
        with the NaN rule of ir/ops.py (a NaN operand: the minimum of the others)."""
        name = f"opus_med3_{e.name}"
        if name in self.helper_sources:
            return self.use_helper(name)
        ct, mn, mx = self.scalar_ctype(e), self.float_fn("fmin", e), self.float_fn("fmax", e)
        return self.helper(name, f"{ct} {name}({ct} a, {ct} b, {ct} c) {{ "
                                 f"{ct} lo = {mn}(a, b), m = {mx}(lo, {mn}({mx}(a, b), c)); "
                                 f"return (a == a && b == b && c == c) ? m : {mn}(lo, c); }}")

    def render_readfirstlane(self, op, indent):
        self._lane_read(op, indent, self.readfirstlane_word)

    def render_uniform(self, op, indent):
        """The promise of one value per warp: read from the first lane where the dialect keeps
        such values apart (AMD: an SGPR), else the value itself."""
        self._lane_read(op, indent, self.uniform_word)

    def _lane_read(self, op, indent, word):
        (a,), r = op.operands, op.results[0]
        if word is None:
            self.names[r] = self.name(a)
            return
        e = scalar_of(r.type)
        ct = self.scalar_ctype(e)
        n = (e.itemsize + 3) // 4
        name = f"opus_{op.kind}_{e.name}"
        reads = " ".join(f"u.w[{i}] = {word.format(f'u.w[{i}]')};" for i in range(n))
        f = self.helper(name, f"{ct} {name}({ct} x) {{ {self.lane_read_setup} "
                              f"union {{ {ct} v; unsigned w[{n}]; }} u; u.w[0] = 0; u.v = x; "
                              f"{reads} return u.v; }}")
        self.assign_lanes(r, [f"{f}({self.name(a)})"], indent)

    def render_select(self, op, indent):
        c, a, b = op.operands
        r = op.results[0]
        self.assign_lanes(r, [f"({x} ? {y} : {z})" for x, y, z in
                              zip(self._bcast(c, r), self._bcast(a, r), self._bcast(b, r))], indent)

    def render_cast(self, op, indent):
        a = op.operands[0]
        r = op.results[0]
        src, to = scalar_of(a.type), op.attrs["to"]
        if to.packed and subbyte.render_packed_cast(self, op, indent):  # fp4: a word per 8 lanes
            return
        if op.attrs["rounding"] == "sr":  # the random bits are the second operand
            self.assign_lanes(r, [self.cast_sr_expr(x, bits, src, to, op.attrs["sat"])
                                  for x, bits in zip(self.lanes(a), self.lanes(op.operands[1]))],
                              indent)
            return
        self.assign_lanes(r, [self.cast_expr(x, src, to, op.attrs["rounding"], op.attrs["sat"])
                              for x in self.lanes(a)], indent)

    def cast_sr_expr(self, x, bits, src, to, sat):
        """Stochastic rounding of one lane (codegen/fp8.py StorageConversions)."""
        raise CodegenError(f"internal: the {self.backend} renderer has no stochastic rounding")

    def cast_expr(self, x, src: DType, to: DType, rounding, sat):
        ct = self.scalar_ctype(to)
        if to.is_bool:
            return f"({self.to_f32(x, src)} != 0)"
        if src.is_bool:
            return self.cast_expr(f"({x} ? 1 : 0)", dt.i32, to, rounding, sat)
        if src.packed or to.packed:
            return subbyte.cast_packed(self, x, src, to, rounding, sat)
        if src.storage_only or to.storage_only:
            return self.cast_storage(x, src, to, rounding, sat)
        if to.is_int and src.is_int:
            return f"({ct})({x})"
        if to.is_int:  # float -> int: toward zero, saturating, NaN -> 0
            f = self.to_f32(x, src)
            if to.bits >= 32:
                return self.float_to_int(f, src if src.name == "f64" else dt.f32, to)
            lo, hi = to.int_range()
            i = self.float_to_int(f, src if src.name == "f64" else dt.f32, dt.i32)
            return f"({ct})({i} < {lo} ? {lo} : ({i} > {hi} ? {hi} : {i}))"
        # -> float
        if to.name in _HALF:
            if src.name in _HALF:
                return self.from_f32(self.to_f32(x, src), to, rounding)
            return self.from_f32(self.cast_expr(x, src, dt.f32, "rn", False), to, rounding)
        if rounding != "rn":
            raise CodegenError(f"internal: rounding {rounding!r} to {to.name} reached the "
                               f"{self.backend} renderer (Target.conversion refuses it)")
        return f"({ct})({self.to_f32(x, src)})"

    def float_to_int(self, f, src, to):
        return f"({self.scalar_ctype(to)})({f})"

    def cast_storage(self, x, src, to, rounding, sat):
        """Conversions from or to a storage type (codegen/fp8.py StorageConversions)."""
        raise CodegenError(f"internal: the {self.backend} renderer has no storage conversions")

    def render_bitcast(self, op, indent):
        (a,) = op.operands
        r = op.results[0]
        ta, tr = self.ctype(a.type), self.ctype(r.type)
        n = self.fresh(r)
        self.line(indent, f"{tr} {n};")
        self.line(indent, f"{{ union {{ {ta} a; {tr} b; }} u_; u_.a = {self.name(a)}; {n} = u_.b; }}")

    def render_vector(self, op, indent):
        self.assign_lanes(op.results[0], [self.name(x) for x in op.operands], indent)

    def render_extract(self, op, indent):
        (v,) = op.operands
        self.assign_lanes(op.results[0], [self.lanes(v)[op.attrs["index"]]], indent)

    def render_insert(self, op, indent):
        v, s = op.operands
        ls = self.lanes(v)
        ls[op.attrs["index"]] = self.name(s)
        self.assign_lanes(op.results[0], ls, indent)

    def render_broadcast(self, op, indent):
        (s,) = op.operands
        self.assign_lanes(op.results[0], [self.name(s)] * op.attrs["n"], indent)

    def render_vector_permute(self, op, indent):
        (v,) = op.operands
        ls = self.lanes(v)
        self.assign_lanes(op.results[0], [ls[i] for i in op.attrs["indices"]], indent)

    def render_ptr_add(self, op, indent):
        p, off = op.operands
        o = self.name(off)
        if p.type.elem.packed:  # whole bytes (ir/ops.py)
            o = subbyte.packed_byte_offset(o, p.type.elem)
        self.assign_lanes(op.results[0], [f"({self.name(p)} + {o})"], indent)

    def render_smem_alloc(self, op, indent):
        pass  # declared at the kernel top

    def render_dyn_smem(self, op, indent):
        ct = self.scalar_ctype(op.attrs["dtype"])
        self.assign_lanes(op.results[0], [f"(({ct}*)(opus_dyn_smem + {op.attrs['offset']}))"], indent)

    # memory ----------------------------------------------------------------------------------
    def load_expr(self, addr, ctype, nbytes, hint):
        """C expression: a load of one ``ctype`` (a scalar or vector struct of ``nbytes``) at
        address ``addr`` with cache hint ``hint`` (the target's cache_hints spelling; a
        dialect with hints overrides this)."""
        return f"*(const {ctype}*)({addr})"

    def store_stmt(self, addr, value, ctype, nbytes, hint):
        """C statement: a store of ``value`` (one ``ctype`` of ``nbytes``) at address ``addr``
        (hint: as load_expr)."""
        return f"*({ctype}*)({addr}) = {value};"

    def uniform(self, expr):
        """``expr`` (a 32-bit or narrower integer the same on every lane of a warp) where the
        compiler keeps it in a scalar register (AMD: readfirstlane); as is elsewhere."""
        return expr

    def _access(self, op, indent):
        """(pointer, offset C expression, bound, cache spelling or None) of a load or store;
        a scalar offset (ir/ops.py) is added to the offset here, and with a bound a negative
        off or soffset moves the access wholly below 0 (out of range)."""
        p, off, _, bound, soff = access_operands(op)
        hint = op.attrs.get("cache")
        hint = None if hint is None else self.target.cache_policy(hint, op.kind)
        off_c = self.name(off)
        if soff is not None and not op.attrs.get("u32"):  # u32: _u32_address adds it
            so = self.name(soff)
            so = f"(long long){self.uniform(so) if scalar_of(soff.type).bits <= 32 else so}"
            o = f"(long long){off_c}"
            e = f"{o} + {so}" if bound is None else \
                f"({o} >= 0 && {so} >= 0 ? {o} + {so} : -{op.attrs['vec']}ll)"
            off_c = self.fresh(prefix="eo")
            self.line(indent, f"long long {off_c} = {e};")
        return p, off_c, bound, hint

    def _u32_address(self, op, indent):
        """(pointer C name, "0") of a "u32" access (ir/ops.py load/store attrs u32): the base
        plus the element offset off (+ soffset) as a 32-bit unsigned value, which the promise
        makes exact (``u32_address`` spells it per dialect). No readfirstlane on the soffset:
        in the loop it made clang hoist 64-bit offsets (and spill) in AMD's 4-wave GEMM."""
        p, off, _, _, soff = access_operands(op)
        o = f"(unsigned){self.name(off)}"
        if soff is not None:
            o = f"({o} + (unsigned){self.name(soff)})"
        et = self.scalar_ctype(p.type.elem)
        n = self.fresh(prefix="ua")
        self.line(indent, f"{et}* {n} = {self.u32_address(self.name(p), o, p.type.elem)};")
        return n, "0"

    def u32_address(self, ptr_c, off_c, elem):
        """C pointer: ``ptr_c`` plus the 32-bit unsigned element offset ``off_c``: a 32-bit
        index widened in one multiply-add (NVIDIA: IMAD.WIDE.U32)."""
        return f"({ptr_c} + {off_c})"

    def _whole_vector_in(self, off, off_c, bound, vec):
        """C condition: elements off .. off+vec-1 lie in [0, bound): in 32-bit arithmetic
        where both are 32-bit (one unsigned compare per access against a uniform limit)."""
        bound_c = self.name(bound)
        if (isinstance(off, str) or scalar_of(off.type).bits > 32
                or scalar_of(bound.type).bits > 32):
            return _whole_vector_in(off_c, bound_c, vec)
        return f"{bound_c} >= {vec} && (unsigned){off_c} <= (unsigned)({bound_c} - {vec})"

    def render_load(self, op, indent):
        if op.operands[0].type.elem.packed:
            return subbyte.render_packed_load(self, op, indent)
        p, off_c, bound, hint = self._access(op, indent)
        off = op.operands[1] if not op.attrs.get("soffset") else off_c
        r = op.results[0]
        vec = op.attrs["vec"]
        ptr_c, off_c = self._u32_address(op, indent) if op.attrs.get("u32") else (self.name(p), off_c)
        elem = p.type.elem
        zero = self.const_expr(0, elem)
        vt, et = self.ctype(r.type), self.scalar_ctype(elem)

        def at(i=None):  # the load of the whole vector (i None) or of element i
            if hint is None:
                return (f"*(const {vt}*)({ptr_c} + {off_c})" if i is None else
                        f"{ptr_c}[{off_c}]" if i == 0 and vec == 1 else f"{ptr_c}[{off_c} + {i}]")
            addr = f"{ptr_c} + {off_c}" + (f" + {i}" if i else "")
            return self.load_expr(addr, vt if i is None else et,
                                  elem.itemsize * (vec if i is None else 1), hint)
        if bound is None:
            if vec == 1:
                self.assign_lanes(r, [at(0)], indent)
            else:
                n = self.fresh(r)
                self.line(indent, f"{vt} {n} = {at()};")
            return
        bound_c = self.name(bound)
        if vec == 1:
            self.assign_lanes(r, [f"(({off_c}) >= 0 && ({off_c}) < {bound_c} ? {at(0)} : {zero})"], indent)
            return
        n = self.declare(r, indent)
        self.line(indent, f"if ({self._whole_vector_in(off, off_c, bound, vec)}) {{")
        self.line(indent + 1, f"{n} = {at()};")
        self.line(indent, "} else {")
        for i in range(vec):
            self.line(indent + 1, f"{self.lane(n, i)} = ({_lane_in(off_c, bound_c, i)}) ? {at(i)} : {zero};")
        self.line(indent, "}")

    def _word_store(self, addr, val):
        """The store of register vector ``val`` (4, 8 or 16 bytes of 16-bit lanes that packed
        conversions made in pairs) at ``addr`` as 32-bit words built from its lanes, or None
        for other vectors. Stored as a struct of 16-bit lanes, NVVM splits each cvt's word and
        packs it again (PRMTs in SASS) and takes longer over it (docs/compile_time.md). Other
        vectors stay structs: as words, a loop's f16 sums and fp8 encoders came out longer."""
        e = scalar_of(val.type)
        nbytes = val.type.n * e.itemsize
        if e.itemsize != 2 or nbytes not in (4, 8, 16) or not self._packed_pairs(val):
            return None
        per, bits = 4 // e.itemsize, 8 * e.itemsize
        lanes = self.lanes(val)
        words = [" | ".join(f"((unsigned)({_UNSIGNED[bits]}){lanes[w * per + j]} << {bits * j})"
                            for j in range(per)) for w in range(nbytes // 4)]
        if nbytes == 4:
            return f"*(unsigned*)({addr}) = {words[0]};"
        wt = self.ctype(VectorType(dt.u32, nbytes // 4))
        fill = " ".join(f"w_.v[{i}] = {w};" for i, w in enumerate(words))
        return f"{{ {wt} w_; {fill} *({wt}*)({addr}) = w_; }}"

    def _packed_pairs(self, v) -> bool:
        """Whether each aligned lane pair of vector ``v`` is one packed conversion's result: a
        cast the target pairs (Target.packed_conversion), through slices that keep pairs."""
        while v.owner is not None and v.owner.kind == "vector_permute":
            idx = v.owner.attrs["indices"]
            if any(idx[i] % 2 or idx[i + 1] != idx[i] + 1 for i in range(0, len(idx) - 1, 2)):
                return False
            v = v.owner.operands[0]
        op = v.owner
        return (op is not None and op.kind == "cast" and len(op.operands) == 1
                and self.target.packed_conversion(scalar_of(op.operands[0].type),
                                                  op.attrs["to"], op.attrs["rounding"]) is not None)

    def render_store(self, op, indent):
        if op.operands[0].type.elem.packed:
            return subbyte.render_packed_store(self, op, indent)
        p, off_c, bound, hint = self._access(op, indent)
        off = op.operands[1] if not op.attrs.get("soffset") else off_c
        val = op.operands[2]
        vec = op.attrs["vec"]
        ptr_c, value_c = self.name(p), self.name(val)
        if op.attrs.get("u32"):
            ptr_c, off_c = self._u32_address(op, indent)
        vt, et = self.ctype(val.type), self.scalar_ctype(p.type.elem)

        def put(i=None):  # the store of the whole vector (i None) or of element i
            v = value_c if i is None or vec == 1 else self.lane(value_c, i)
            if hint is None and i is None and self.word_stores:
                words = self._word_store(f"{ptr_c} + {off_c}", val)
                if words is not None:
                    return words
            if hint is None:
                return (f"*({vt}*)({ptr_c} + {off_c}) = {v};" if i is None else
                        f"{ptr_c}[{off_c}] = {v};" if i == 0 and vec == 1 else
                        f"{ptr_c}[{off_c} + {i}] = {v};")
            addr = f"{ptr_c} + {off_c}" + (f" + {i}" if i else "")
            return self.store_stmt(addr, v, vt if i is None else et,
                                   p.type.elem.itemsize * (vec if i is None else 1), hint)
        if bound is None:
            self.line(indent, put(0) if vec == 1 else put())
            return
        bound_c = self.name(bound)
        if vec == 1:
            self.line(indent, f"if ({off_c} >= 0 && {off_c} < {bound_c}) {put(0)}")
            return
        self.line(indent, f"if ({self._whole_vector_in(off, off_c, bound, vec)}) {{")
        self.line(indent + 1, put())
        self.line(indent, "} else {")
        for i in range(vec):
            self.line(indent + 1, f"if ({_lane_in(off_c, bound_c, i)}) {put(i)}")
        self.line(indent, "}")

    # asynchronous copies ---------------------------------------------------------------------
    # Each vendor has one kind of copy (cp.async, buffer_load ... lds), rendered by its dialect;
    # the target refuses the other while tracing. Commits and waits are dialect lines.
    def _not_here(self, what, check):
        raise CodegenError(f"internal: {what} reached the {self.backend} renderer for "
                           f"{self.target.name} (Target.{check} refuses it while tracing)")

    def render_cp_async(self, op, indent):
        self._not_here("cp.async", "require_cp_async")

    def render_lds_load(self, op, indent):
        self._not_here("buffer_load ... lds", "require_lds_load")

    def render_async_commit(self, op, indent):
        for text in self.async_commit:
            self.line(indent, text)

    def render_async_wait(self, op, indent):
        for text in self.async_wait(self, op.attrs):
            self.line(indent, text)

    # control flow -----------------------------------------------------------------------------
    def _bind_args(self, args, names):
        for a, n in zip(args, names):
            self.names[a] = n

    def _carried(self, inits, indent):
        names = []
        for v in inits:
            n = self.fresh_of(v.type, "c")
            self.line(indent, self.decl_stmt(v.type, n, self.name(v)))
            names.append(n)
        return names

    def _assign_yield(self, yop, names, indent):
        vals = [self.name(v) for v in yop.operands]
        if len(names) <= 1:
            for n, v, x in zip(names, vals, yop.operands):
                if n != v:
                    self.line(indent, self.copy_stmt(x.type, n, v))
            return
        tmps = []
        for v, src in zip(yop.operands, vals):
            t = self.fresh_of(v.type, "t")
            self.line(indent, self.decl_stmt(v.type, t, src))
            tmps.append(t)
        for n, t, v in zip(names, tmps, yop.operands):
            self.line(indent, self.copy_stmt(v.type, n, t))

    def _emit_region(self, block, indent, carried_names):
        """Emit a region's ops; its terminator yield assigns to ``carried_names``."""
        for op in block.ops:
            if op.kind == "yield":
                self._assign_yield(op, carried_names, indent)
            elif op.kind == "condition":
                self.line(indent, f"if (!({self.name(op.operands[0])})) break;")
            else:
                self.emit_op(op, indent)

    def render_for(self, op, indent):
        names = self._carried(op.operands[3:], indent)
        self.emit_for_loop(op, indent, names)
        self._bind_args(op.results, names)

    def emit_for_loop(self, op, indent, names, step_sign=None):
        """The C loop of ``for`` op ``op`` whose carried variables are ``names`` (declared);
        a dialect may emit it more than once (versions of one loop under a condition).
        ``step_sign`` (1 or -1): the run-time step's sign, which the version's condition
        established (one compare per iteration, as for a compile-time step)."""
        lb, ub, step = op.operands[:3]
        body = op.regions[0]
        iv = body.args[0]
        ivn = self.fresh(iv, prefix="i")
        self._bind_args(body.args[1:], names)
        it = self.ctype(iv.type)
        step_static = step.owner is not None and step.owner.kind == "const"
        if step_static or step_sign:
            s = step.owner.attrs["value"] if step_static else step_sign
            cond = f"{ivn} < {self.name(ub)}" if s > 0 else f"{ivn} > {self.name(ub)}"
        else:
            # iv > ub <=> ~iv < ~ub (bitwise not reverses the order of signed and unsigned
            # integers alike): one compare per iteration against a loop-invariant flip mask,
            # where a select of two compares costs the GPU ~7 instructions per iteration
            flip = self.fresh(prefix="flip")
            self.line(indent, f"{it} {flip} = {self.name(step)} > 0 ? ({it})0 : ({it})~({it})0;")
            cond = f"({it})({ivn} ^ {flip}) < ({it})({self.name(ub)} ^ {flip})"
        unroll = op.attrs.get("unroll")
        if unroll:
            self.line(indent, f"#pragma unroll {unroll}")
        self.line(indent, f"for ({it} {ivn} = {self.name(lb)}; {cond}; {ivn} += {self.name(step)}) {{")
        self._emit_region(body, indent + 1, names)
        self.line(indent, "}")

    def render_if(self, op, indent):
        (c,) = op.operands
        names = []
        for r in op.results:
            n = self.fresh_of(r.type, "r")
            self.line(indent, self.decl_stmt(r.type, n))
            names.append(n)
        self.line(indent, f"if ({self.name(c)}) {{")
        self._emit_region(op.regions[0], indent + 1, names)
        if op.regions[1].ops and any(o.kind != "yield" or o.operands for o in op.regions[1].ops):
            self.line(indent, "} else {")
            self._emit_region(op.regions[1], indent + 1, names)
        self.line(indent, "}")
        self._bind_args(op.results, names)

    def render_while(self, op, indent):
        cond, body = op.regions
        names = self._carried(op.operands, indent)
        self._bind_args(cond.args, names)
        self._bind_args(body.args, names)
        self.line(indent, "while (true) {")
        self._emit_region(cond, indent + 1, names)
        self._emit_region(body, indent + 1, names)
        self.line(indent, "}")
        self._bind_args(op.results, names)

    def render_return(self, op, indent):
        self.line(indent, "return;")

    # threads ----------------------------------------------------------------------------------
    def linear_thread_id(self):
        """The thread's index in its block (unsigned): x alone when the kernel fixes its
        block size (then one-dimensional)."""
        t, d = self.thread_index.format, self.block_size_along.format
        if self.fn.attrs.get("block_size"):
            return t("x")
        return f"({t('x')} + {d('x')} * ({t('y')} + {d('y')} * {t('z')}))"

    def render_special(self, op, indent):
        kind, _, axis = op.attrs["which"].partition(".")
        self.assign_lanes(op.results[0], [self.code_for_special[kind](self, axis)], indent)

    def render_barrier(self, op, indent):
        for text in self.barrier:
            self.line(indent, text)

    def render_target_op(self, op, indent):
        ins = self.target.instruction(op.attrs["name"])
        lower = ins.lower.get(self.backend)
        if lower is None:
            raise CodegenError(f"{op.attrs['name']} has no {self.backend} lowering")
        res = [self.declare(r, indent) for r in op.results]
        for l in lower([self.name(o) for o in op.operands], res, op.attrs):
            self.line(indent, l)

    def render_printf(self, op, indent):
        if not self.target.has_printf:
            raise CodegenError(f"internal: printf reached the {self.backend} renderer for "
                               f"{self.target.name} (Target.printf_missing: tracing refuses it)")
        args = []
        for v in op.operands:
            e = scalar_of(v.type)
            x = self.name(v)
            if e.name in _HALF:
                x = f"(double){self.to_f32(x, e)}"
            elif e.name == "f32":
                x = f"(double){x}"
            elif e.is_bool or e.bits < 32:
                x = f"(int){x}"
            args.append(x)
        fmt = op.attrs["fmt"].replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        self.line(indent, f'printf("{fmt}"{"".join(", " + a for a in args)});')
