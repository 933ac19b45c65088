"""Random programs as hypothesis strategies, and their rendering as one opus kernel per batch.

An expression program is a typed tree of Nodes over the kernel's shared inputs (``x_<type>``
arrays, SLOTS values per thread); a memory program (MemProg) moves a vector through global and
maybe shared memory with bounds. Node types follow diff_types (the documented rules); the kernel
checks at trace time, through ``ty(...)``, that opus types every value the same way.
"""
from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st

from diff_types import (BITS, FLOATS, HALF, INTO, INTS, SCALARS, SPECIALS, is_float, is_int,
                        literal_type, promote)

# Known codegen bugs (see README.md) whose programs are not generated until they are fixed.
AVOIDED: set = set()
SLOTS = 3
MAX_DEPTH = 4
INT_OPS = ("add", "sub", "mul", "floordiv", "mod", "tdiv", "tmod", "and", "or", "xor", "min", "max")
FLOAT_OPS = ("add", "sub", "mul", "div", "min", "max", "floordiv", "mod")
BOOL_OPS = ("and", "or", "xor", "min", "max")
ARITH = ("add", "sub", "mul", "floordiv", "mod", "tdiv", "tmod")
CMP = ("lt", "le", "gt", "ge", "eq", "ne")
EXACT_MATH = ("sqrt", "floor", "ceil", "trunc", "rint")
APPROX_MATH = ("exp", "exp2", "log", "log2", "rsqrt", "sin", "cos", "tanh")
VECS = (1, 2, 4, 8, 16)
LANE_OPS = {False: ("add", "sub", "mul", "min", "max", "xor"), True: ("add", "mul", "min", "div")}
_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "and": "&",
        "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "lt": "<", "le": "<=", "gt": ">",
        "ge": ">=", "eq": "==", "ne": "!="}
_CALL = {"min": "opus.min", "max": "opus.max", "tdiv": "opus.tdiv", "tmod": "opus.tmod"}


class Node:
    """One operation. op: in const lit bin shift cmp neg inv abs not logic sel minmax3 fma cast
    bitcast math; attr: the slot, value, operator, predicate, (syntax, rounding) or function."""

    __slots__ = ("op", "type", "args", "attr")

    def __init__(self, op, type_, args=(), attr=None):
        self.op, self.type, self.args, self.attr = op, type_, tuple(args), attr

    def __repr__(self):
        return f"Node({self.op}, {self.type}, {self.attr!r}, {list(self.args)})"


class ExprProg:
    """A tree whose root value is stored for every thread; ``approx``: its root is a
    transcendental function, compared within ulps instead of bitwise."""

    def __init__(self, root, approx=False):
        self.root, self.approx = root, approx

    def __repr__(self):
        return f"ExprProg({self.root!r}, approx={self.approx})"

    @property
    def out_type(self):
        return "u8" if self.root.type == "bool" else self.root.type


class MemProg:
    """v = gmem(src, bound).load((t + shift) * vec); optionally ``v = v <op> 3`` lane by lane
    (``lanes_op``), then a lane-wise cast to ``conv``; optionally through shared memory (stored
    at l * vec, read back with width ``wvec`` from the chunk ``rot`` further on); stored at
    t * (output width) through a bounded gmem view.
    ``bound``: 'size', 'nbytes' or None (unbounded load, shift >= 0)."""

    def __init__(self, dtype, vec, shift, bound, lanes_op, conv, smem, wvec, rot):
        self.dtype, self.vec, self.shift, self.bound = dtype, vec, shift, bound
        self.lanes_op, self.conv, self.smem, self.wvec, self.rot = lanes_op, conv, smem, wvec, rot

    def __repr__(self):
        return f"MemProg({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    @property
    def out_type(self):
        return self.conv or self.dtype

    @property
    def out_vec(self):
        return self.wvec if self.smem else self.vec


def itemsize(t):
    return BITS[t] // 8


# -- leaves and constants ---------------------------------------------------------------------

def _value(draw, t):
    return draw(st.sampled_from(SPECIALS[t]))


def leaf(draw, t, depth):
    if t == "bool":  # no bool inputs: compare two of another type
        u = draw(st.sampled_from(INTS + FLOATS))
        return Node("cmp", "bool", (leaf(draw, u, 0), leaf(draw, u, 0)), draw(st.sampled_from(CMP)))
    return Node("in", t, (), draw(st.integers(0, SLOTS - 1)))


def const(draw, t, depth):
    if t == "bool":
        return Node("const", t, (), draw(st.booleans()))
    return Node("const", t, (), _value(draw, t))


def _literal(draw, other):
    """A Python literal operand next to a value of type ``other``; returns (lit node, result)."""
    if is_float(other):
        x = draw(st.one_of(st.sampled_from(SPECIALS[other]), st.integers(-3, 3)))
    elif other == "bool":
        x = draw(st.booleans())
    else:
        x = draw(st.one_of(st.sampled_from(SPECIALS[other]), st.sampled_from(SPECIALS["f32"])))
    lt = literal_type(x, other)
    return Node("lit", lt, (), x), promote(lt, other)


# -- operators ---------------------------------------------------------------------------------

def _pair(draw, t):
    """Two operand types whose promotion is t."""
    a = draw(st.sampled_from(INTO[t]))
    b = draw(st.sampled_from([x for x in INTO[t] if promote(a, x) == t]))
    return (a, b) if draw(st.booleans()) else (b, a)


def _ops_for(t):
    return INT_OPS if is_int(t) else FLOAT_OPS if is_float(t) else BOOL_OPS


def binop(draw, t, depth):
    a, b = _pair(draw, t)
    op = draw(st.sampled_from(_ops_for(t)))
    return Node("bin", t, (expr(draw, a, depth), expr(draw, b, depth)), op)


def bool_arith(draw, t, depth):
    """Arithmetic on two bools computes in i32 (opus.tdiv/tmod refuse bools)."""
    args = (expr(draw, "bool", depth), expr(draw, "bool", depth))
    return Node("bin", "i32", args, draw(st.sampled_from(ARITH[:5])))


def int_true_div(draw, t, depth):
    """Integers (and bools) divided with / give f32, 64-bit integers f64."""
    u = draw(st.sampled_from([x for x in INTS + ("bool",) if (BITS[x] == 64) == (t == "f64")]))
    a, b = _pair(draw, u)
    return Node("bin", t, (expr(draw, a, depth), expr(draw, b, depth)), "div")


def lit_binop(draw, t, depth):
    other = t
    if t == "f32" and draw(st.booleans()):
        other = draw(st.sampled_from(INTS))  # int value with a float literal gives f32
    lit, rt = _literal(draw, other)
    if rt != t:
        return binop(draw, t, depth)
    x = expr(draw, other, depth)
    op = draw(st.sampled_from(_ops_for(t)))
    return Node("bin", t, (lit, x) if draw(st.booleans()) else (x, lit), op)


def shift(draw, t, depth):
    op = draw(st.sampled_from(("shl", "shr")))
    kind = draw(st.sampled_from(("value", "literal", "left literal")))
    if kind == "literal":
        amount = Node("lit", t, (), draw(st.integers(0, BITS[t] + 2)))
        return Node("shift", t, (expr(draw, t, depth), amount), op)
    if kind == "left literal":  # an int literal takes the amount's type
        lit = Node("lit", t, (), _value(draw, t))
        return Node("shift", t, (lit, expr(draw, t, depth)), op)
    u = draw(st.sampled_from(INTS))
    return Node("shift", t, (expr(draw, t, depth), expr(draw, u, depth)), op)


def unary(draw, t, depth):
    ops = ("neg", "inv", "abs") if is_int(t) else ("neg", "abs") if is_float(t) else ("inv",)
    op, arg = draw(st.sampled_from(ops)), expr(draw, t, depth)
    if op == "neg" and arg.op == "const" and t in ("f32", "f64") and \
            "neg_of_float_constant" in AVOIDED:
        arg = leaf(draw, t, 0)
    return Node(op, t, (arg,))


def select(draw, t, depth):
    ct = draw(st.sampled_from(("bool",) * 3 + INTS + FLOATS))  # non-bool conditions mean != 0
    a, b = _pair(draw, t)
    args = (expr(draw, ct, depth), expr(draw, a, depth), expr(draw, b, depth))
    return Node("sel", t, args, draw(st.sampled_from(("select", "ifexp"))))


def minmax3(draw, t, depth):
    a, b = _pair(draw, t)
    c = draw(st.sampled_from(INTO[t]))
    args = tuple(expr(draw, x, depth) for x in (a, b, c))
    return Node("minmax3", t, args, draw(st.sampled_from(("min", "max"))))


def fma(draw, t, depth):
    a, b = _pair(draw, t)
    c = draw(st.sampled_from(INTO[t]))
    return Node("fma", t, tuple(expr(draw, x, depth) for x in (a, b, c)))


def cast(draw, t, depth):
    src = draw(st.sampled_from(SCALARS))
    syntax = draw(st.sampled_from(("call", "to", "cast", "cast")))
    rounding = "rn"
    if syntax == "cast" and t in HALF:  # rz is offered for narrowing to 16-bit floats
        rounding = draw(st.sampled_from(("rn", "rz")))
    return Node("cast", t, (expr(draw, src, depth),), (syntax, rounding))


def bitcast(draw, t, depth):
    """Integers reinterpret freely; float sources are inputs (exact bits, no NaN payloads from
    arithmetic, which hardware and numpy produce differently)."""
    ints = [x for x in INTS if BITS[x] == BITS[t] and x != t]
    floats = [x for x in FLOATS if BITS[x] == BITS[t] and x != t]
    src = draw(st.sampled_from(ints + floats))
    arg = leaf(draw, src, 0) if is_float(src) else expr(draw, src, depth)
    return Node("bitcast", t, (arg,))


def exact_math(draw, t, depth):
    src = t if t != "f32" else draw(st.sampled_from(("f32",) * 3 + INTS))  # ints go to f32
    return Node("math", t, (expr(draw, src, depth),), draw(st.sampled_from(EXACT_MATH)))


def compare(draw, t, depth):
    u = draw(st.sampled_from(SCALARS))
    if draw(st.integers(0, 3)) == 0 and u != "bool":
        lit, rt = _literal(draw, u)
        if rt is not None:
            x = expr(draw, u, depth)
            return Node("cmp", "bool", (x, lit) if draw(st.booleans()) else (lit, x),
                        draw(st.sampled_from(CMP)))
    a, b = _pair(draw, u)
    return Node("cmp", "bool", (expr(draw, a, depth), expr(draw, b, depth)),
                draw(st.sampled_from(CMP)))


def logic(draw, t, depth):
    """Python and/or/not: operands of any type count as != 0."""
    kind = draw(st.sampled_from(("and", "or", "not")))
    n = 1 if kind == "not" else 2
    args = tuple(expr(draw, draw(st.sampled_from(SCALARS)), depth) for _ in range(n))
    return Node("not" if kind == "not" else "logic", "bool", args, kind)


def fma_residual(draw, t, depth):
    """fma(a, b, -(a * b)): the rounding error of a product, nonzero only if fma is exact."""
    a, b = expr(draw, t, depth), expr(draw, t, depth)
    return Node("fma", t, (a, b, Node("neg", t, (Node("bin", t, (a, b), "mul"),))))


# (maker, weight) per kind of result type; the first is what hypothesis shrinks towards
MAKERS = {
    "int": ((leaf, 1), (const, 1), (binop, 6), (lit_binop, 2), (shift, 3), (unary, 2),
            (select, 2), (minmax3, 1), (fma, 1), (cast, 4), (bitcast, 2)),
    "float": ((leaf, 1), (const, 1), (binop, 6), (lit_binop, 2), (unary, 2), (select, 2),
              (minmax3, 1), (fma, 2), (fma_residual, 1), (cast, 4), (bitcast, 1),
              (exact_math, 2)),
    "bool": ((leaf, 1), (const, 1), (compare, 4), (logic, 2), (binop, 2), (unary, 1),
             (select, 1), (cast, 1)),
}
EXTRA = {"i32": ((bool_arith, 1),), "f32": ((int_true_div, 1),), "f64": ((int_true_div, 1),)}


def expr(draw, t, depth):
    if depth <= 0:
        return leaf(draw, t, 0)
    makers = MAKERS["int" if is_int(t) else "float" if is_float(t) else "bool"] + EXTRA.get(t, ())
    i = draw(st.integers(0, sum(w for _, w in makers) - 1))
    for maker, w in makers:
        if i < w:
            return maker(draw, t, depth - 1)
        i -= w
    raise AssertionError("unreachable")


# -- programs and batches ----------------------------------------------------------------------

@st.composite
def expr_programs(draw):
    t = draw(st.sampled_from(SCALARS))
    depth = draw(st.integers(2, MAX_DEPTH))
    if is_float(t) and draw(st.integers(0, 3)) == 0:
        src = t if t != "f32" else draw(st.sampled_from(("f32", "f32") + INTS))
        root = Node("math", t, (expr(draw, src, depth - 1),), draw(st.sampled_from(APPROX_MATH)))
        return ExprProg(root, approx=True)
    return ExprProg(expr(draw, t, depth))


def _fitting(vec_bytes):
    return [t for t in INTS + FLOATS if itemsize(t) * vec_bytes <= 16]


@st.composite
def mem_programs(draw):
    vec = draw(st.sampled_from(VECS))
    dtype = draw(st.sampled_from(_fitting(vec)))
    bound = draw(st.sampled_from(("size", "nbytes", None)))
    shift = draw(st.integers(0 if bound is None else -2, 2))
    lanes_op = draw(st.one_of(st.none(), st.sampled_from(LANE_OPS[is_float(dtype)])))
    conv = draw(st.one_of(st.none(), st.sampled_from(_fitting(vec))))
    smem = draw(st.booleans())
    wvec = draw(st.sampled_from(VECS)) if smem else vec
    if smem and itemsize(conv or dtype) * wvec > 16:
        wvec = vec
    rot = draw(st.integers(0, 3))
    return MemProg(dtype, vec, shift, bound, lanes_op, conv, smem, wvec, rot)


@st.composite
def programs(draw):
    """One program: an expression, or (one in eight) a memory program."""
    return draw(mem_programs() if draw(st.integers(0, 7)) == 7 else expr_programs())


@st.composite
def batches(draw, size):
    """``size`` programs and a seed for their inputs."""
    progs = draw(st.lists(programs(), min_size=size, max_size=size))
    return progs, draw(st.integers(0, 2 ** 32 - 1))


def diff_settings(default_examples, shrink, count_env="OPUS_DIFF_EXAMPLES"):
    """Hypothesis settings: ``count_env`` batches (default ``default_examples``),
    deterministic unless OPUS_DIFF_SEED picks a seed. GPU runs do not shrink (every step is
    a compile) and report every mismatch instead."""
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    config = settings(max_examples=int(os.environ.get(count_env, default_examples)),
                      derandomize="OPUS_DIFF_SEED" not in os.environ, database=None,
                      deadline=None, phases=phases, print_blob=False,
                      suppress_health_check=list(HealthCheck))

    def apply(test):
        test = config(test)
        if "OPUS_DIFF_SEED" in os.environ:
            test = seed(int(os.environ["OPUS_DIFF_SEED"]))(test)
        return test
    return apply


# -- rendering -----------------------------------------------------------------------------------

def _py(x):
    """Python source of a literal value (exact: repr round-trips floats)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "math.nan" if math.isnan(x) else ("math.inf" if x > 0 else "-math.inf")
    return repr(x)


def _dt(t):
    return "opus.bool_" if t == "bool" else f"opus.{t}"


class Renderer:
    """Writes the kernel body: shared input loads first, then each program's lines."""

    def __init__(self):
        self.loads = {}   # (type, slot) -> variable
        self.lines = []
        self.count = 0

    def value(self, n, p):
        """Source of node n (a variable or a literal) of program p, emitting its lines."""
        if n.op == "in":
            key = (n.type, n.attr)
            if key not in self.loads:
                self.loads[key] = f"a_{n.type}_{n.attr}"
            return self.loads[key]
        if n.op == "lit":
            return _py(n.attr)
        text = self.expr_text(n, [self.value(a, p) for a in n.args])
        self.count += 1
        var = f"p{p}_{self.count}"
        self.lines.append(f"    {var} = ty({n.type!r}, {text})")
        return var

    @staticmethod
    def expr_text(n, a):
        op, t, attr = n.op, n.type, n.attr
        if op == "const":
            return f"{_dt(t)}({_py(attr)})"
        if op in ("bin", "shift", "cmp"):
            if attr in _CALL:
                return f"{_CALL[attr]}({a[0]}, {a[1]})"
            return f"({a[0]} {_SYM[attr]} {a[1]})"
        if op in ("neg", "inv"):
            return f"({'-' if op == 'neg' else '~'}{a[0]})"
        if op == "abs":
            return f"abs({a[0]})"
        if op == "not":
            return f"(not {a[0]})"
        if op == "logic":
            return f"({a[0]} {attr} {a[1]})"
        if op == "sel":
            return f"opus.select({a[0]}, {a[1]}, {a[2]})" if attr == "select" else \
                f"({a[1]} if {a[0]} else {a[2]})"
        if op == "minmax3":
            return f"opus.{attr}({a[0]}, {a[1]}, {a[2]})"
        if op == "fma":
            return f"opus.fma({a[0]}, {a[1]}, {a[2]})"
        if op == "cast":
            syntax, rounding = attr
            if syntax == "call":
                return f"{_dt(t)}({a[0]})"
            if syntax == "to":
                return f"{a[0]}.to({_dt(t)})"
            return f"opus.cast({a[0]}, {_dt(t)}, rounding={rounding!r})"
        if op == "bitcast":
            return f"opus.bitcast({a[0]}, {_dt(t)})"
        if op == "math":
            return f"opus.{attr}({a[0]})"
        raise ValueError(f"unknown node {op}")

    def expr_program(self, k, prog):
        self.lines.append(f"    # program {k}")
        v = self.value(prog.root, k)
        self.lines.append(f"    o{k}[t] = {'opus.u8(' + v + ')' if prog.root.type == 'bool' else v}")

    def mem_program(self, k, m):
        L = self.lines
        L.append(f"    # program {k}")
        size = {"size": f", n{k}", "nbytes": f", nbytes=n{k}", None: ""}[m.bound]
        L.append(f"    v{k} = opus.make_gmem(m{k}{size}).load((t + {m.shift}) * {m.vec}, vec={m.vec})")
        if m.lanes_op in _CALL:
            L.append(f"    v{k} = {_CALL[m.lanes_op]}(v{k}, 3)")
        elif m.lanes_op:
            L.append(f"    v{k} = v{k} {_SYM[m.lanes_op]} 3")
        if m.conv:
            L.append(f"    v{k} = opus.cast(v{k}, {_dt(m.conv)})")
        if m.smem:
            chunks = f"(BLOCK * {m.vec} // {m.wvec})"
            L.append(f"    s{k} = opus.alloc_smem({_dt(m.out_type)}, BLOCK * {m.vec})")
            L.append(f"    s{k}.store(v{k}, l * {m.vec})")
            L.append("    opus.sync_threads()")
            L.append(f"    v{k} = s{k}.load(((l * {m.vec} // {m.wvec} + {m.rot}) % {chunks}) * "
                     f"{m.wvec}, vec={m.wvec})")
        L.append(f"    opus.make_gmem(o{k}, k{k}).store(v{k}, t * {m.out_vec})")


def params(progs):
    """Kernel parameters as (name, kind, type): kind 'ptr' or 'scalar'."""
    used = sorted({t for p in progs if isinstance(p, ExprProg) for t in _input_types(p.root)},
                  key=SCALARS.index)
    out = [(f"x_{t}", "ptr", t) for t in used]
    for k, p in enumerate(progs):
        if isinstance(p, MemProg):
            out.append((f"m{k}", "ptr", p.dtype))
            if p.bound:
                out.append((f"n{k}", "scalar", "i32"))
            out += [(f"o{k}", "ptr", p.out_type), (f"k{k}", "scalar", "i32")]
        else:
            out.append((f"o{k}", "ptr", p.out_type))
    return out


def _input_types(n):
    if n.op == "in":
        yield n.type
    for a in n.args:
        yield from _input_types(a)


HEADER = '''import math

import opus
from opus import Ptr

BLOCK = {block}


def ty(name, v):
    """Trace-time check that opus types v as the reference does."""
    if v.dtype.name != name:
        raise TypeError(f"opus typed a value {{v.dtype.name}}; the reference expects {{name}}")
    return v


@opus.kernel(block=BLOCK)
def diff_kernel({params}):
    t = opus.block_id_x() * BLOCK + opus.thread_id_x()
    l = opus.thread_id_x()
'''


def render(progs, block):
    """Python source of a module defining ``diff_kernel`` for the batch, and each program's
    lines (for failure reports)."""
    r = Renderer()
    spans = []
    for k, p in enumerate(progs):
        start = len(r.lines)
        (r.mem_program if isinstance(p, MemProg) else r.expr_program)(k, p)
        spans.append((start, len(r.lines)))
    ps = ", ".join(f"{n}: Ptr[{_dt(t)}]" if kind == "ptr" else f"{n}: {_dt(t)}"
                   for n, kind, t in params(progs))
    loads = [f"    {v} = x_{t}[t * {SLOTS} + {s}]" for (t, s), v in sorted(r.loads.items())]
    head = HEADER.format(block=block, params=ps) + "\n".join(loads) + "\n"
    return head + "\n".join(r.lines) + "\n", [r.lines[a:b] for a, b in spans]
