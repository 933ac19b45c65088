"""Run-time side of the AST rewrite: turns rewritten loops and branches into IR or unrolls them.

Every rewritten construct calls one function here (``for_``, ``if_``, ``while_``, ...). A
construct whose condition or bounds are compile-time runs in Python; otherwise it becomes an IR
region op whose loop-carried values / branch results are the construct's assigned variables.
Variables may hold run-time values, Python numbers, or containers of them (tuples, lists, gmem
views): containers are flattened into leaves, each leaf carried on its own.
"""
from __future__ import annotations

from ..ir import Block, PointerType, Value, VectorType, scalar_of, type_str
from ..lang.context import ctx, TraceError
from ..lang.values import (Undefined, as_value, cast, const, emit, emit1, is_static, promote_types,
                           py_default_type, to_bool)
from ..lang.math import select
from .calls import call

__all__ = ["Undefined", "RangeSpec", "OpusRange", "static_ford", "Runtime", "RT"]

_MAX_RETRACE = 4
_MAX_STATIC_WHILE = 1 << 20


# -- ranges ---------------------------------------------------------------------------------------

class RangeSpec:
    """The arguments of a builtin ``range(...)`` in a kernel's ``for``."""

    __slots__ = ("start", "stop", "step")

    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TraceError(f"range expected 1 to 3 arguments, got {len(args)}")
        if len(args) == 1:
            self.start, self.stop, self.step = 0, args[0], 1
        else:
            self.start, self.stop = args[0], args[1]
            self.step = args[2] if len(args) == 3 else 1
        for a in (self.start, self.stop, self.step):
            if isinstance(a, float) or (not is_static(a) and not isinstance(a, Value)):
                raise TraceError(f"range arguments must be integers, got {a!r}")

    def is_static(self):
        return all(is_static(a) for a in (self.start, self.stop, self.step))


class OpusRange(RangeSpec):
    """``for i in opus.range(start, stop, step, unroll=N)``: always a run-time loop, even with
    compile-time bounds (Python's ``range`` over compile-time bounds unrolls at trace time).

    :param args: ``stop``, ``start, stop`` or ``start, stop, step``, as for Python's range
    :type args: run-time integer values or Python ints
    :param unroll: a hint to the compiler to unroll by this factor (None: its choice)
    :type unroll: int or None
    :targets: all targets
    """

    __slots__ = ("unroll",)

    def __init__(self, *args, unroll=None):
        super().__init__(*args)
        if unroll is not None and (not isinstance(unroll, int) or unroll < 1):
            raise TraceError(f"unroll must be a positive int, got {unroll!r}")
        self.unroll = unroll

    def __iter__(self):
        raise TraceError("opus.range can only drive a `for` loop in a kernel")


def static_ford(*dims):
    """Nested compile-time loops, unrolled at trace time: ``for i, j in opus.static_ford(2, 3)``
    visits (0, 0), (0, 1), (0, 2), (1, 0), ... (the last dimension fastest).

    :param dims: the extent of each dimension (or one tuple of them)
    :type dims: ints (compile-time)
    :returns: the index tuples, in order
    :rtype: generator of tuples of ints
    :targets: all targets
    """
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    for d in dims:
        if not isinstance(d, int):
            raise TraceError(f"static_ford dimensions must be compile-time ints, got {d!r}")
    def rec(prefix, rest):
        if not rest:
            yield prefix
            return
        for i in range(rest[0]):
            yield from rec(prefix + (i,), rest[1:])
    return rec((), dims)


# -- pytrees: variables holding containers --------------------------------------------------------

class _Node:
    """Structure of a flattened variable: a leaf, or a container with children."""

    __slots__ = ("kind", "children", "rebuild")

    def __init__(self, kind, children=(), rebuild=None):
        self.kind, self.children, self.rebuild = kind, children, rebuild

    def same_shape(self, other):
        if self.kind != other.kind or len(self.children) != len(other.children):
            return False
        return all(a.same_shape(b) for a, b in zip(self.children, other.children))


_LEAF = _Node("leaf")


def flatten(x, leaves):
    if isinstance(x, (tuple, list)):
        return _Node(type(x), tuple(flatten(c, leaves) for c in x))
    f = getattr(type(x), "__opus_flatten__", None)
    if f is not None:
        children, rebuild = x.__opus_flatten__()
        return _Node(type(x), tuple(flatten(c, leaves) for c in children), rebuild)
    leaves.append(x)
    return _LEAF


def unflatten(node, it):
    if node.kind == "leaf":
        return next(it)
    kids = [unflatten(c, it) for c in node.children]
    if node.rebuild is not None:
        return node.rebuild(kids)
    return node.kind(kids)


def _same_static(a, b):
    if a is b:
        return True
    if is_static(a) and is_static(b):
        return type(a) is type(b) and a == b
    return False


def _number(x):
    return is_static(x) and not isinstance(x, Value)


# -- the runtime object handed to rewritten kernels -----------------------------------------------

def _frame():
    """The call (of the kernel or a helper) being traced now."""
    return ctx().frontend.frames[-1]


class Runtime:
    """Functions the rewritten kernel calls (as ``__opus_rt.<name>``)."""

    range_spec = RangeSpec
    call = staticmethod(call)

    @staticmethod
    def declare(value, annotation):  # ``name: annotation = value`` (lang.vectors.declare)
        from ..lang.vectors import declare
        return declare(value, annotation)

    @staticmethod
    def current(local_vars, names):
        return tuple(local_vars[n] if n in local_vars else
                     Undefined(n, "is used before it is assigned") for n in names)

    # -- boolean operators that accept run-time values --------------------------------------
    @staticmethod
    def bool_and(*thunks):
        dyn = None
        for t in thunks:
            v = t()
            if isinstance(v, Value):
                b = to_bool(v, "operand of `and`")
                dyn = b if dyn is None else dyn & b
            elif not v:
                return v if dyn is None else False
            elif t is thunks[-1] and dyn is None:
                return v
        return dyn

    @staticmethod
    def bool_or(*thunks):
        dyn = None
        for t in thunks:
            v = t()
            if isinstance(v, Value):
                b = to_bool(v, "operand of `or`")
                dyn = b if dyn is None else dyn | b
            elif v:
                return v if dyn is None else True
            elif t is thunks[-1] and dyn is None:
                return v
        return dyn

    @staticmethod
    def bool_not(x):
        if isinstance(x, Value):
            return ~to_bool(x, "operand of `not`")
        return not x

    @staticmethod
    def if_exp(c, then, other):
        if not isinstance(c, Value):
            return then() if c else other()
        return select(c, then(), other())

    # -- constructs with break/continue stay Python and must be static ----------------------
    @staticmethod
    def static_iter(it, line):
        if isinstance(it, OpusRange):
            raise TraceError("a loop over opus.range cannot use break/continue")
        if isinstance(it, RangeSpec):
            if not it.is_static():
                raise TraceError("a loop containing break/continue needs compile-time range() "
                                 "bounds (run-time break/continue are not supported yet)")
            return range(it.start, it.stop, it.step)
        if isinstance(it, Value) and not isinstance(it.type, VectorType):
            raise TraceError("cannot iterate over a run-time scalar")
        return it

    @staticmethod
    def static_cond(c, line):
        if isinstance(c, Value):
            raise TraceError("a loop or `if` containing break/continue needs a compile-time "
                             "condition (run-time break/continue are not supported yet)")
        return c

    # -- return -------------------------------------------------------------------------
    @staticmethod
    def do_return(value, line):
        """``return value`` inside a rewritten construct: a compile-time return ends the trace
        of the function; in a kernel under run-time control flow it is an IR return; in a
        helper under a run-time ``if`` the ``if`` merges what its branches return."""
        f = _frame()
        if f.regions and f.kind == "kernel":
            emit("return")
        elif "loop" in f.regions:
            raise TraceError(f"a helper function cannot return from inside a run-time loop "
                             f"(line {line}); assign the result to a variable and return it "
                             f"after the loop")
        f.returned, f.value = True, value

    @staticmethod
    def returned():
        return _frame().returned

    @staticmethod
    def result():
        return _frame().value

    # -- if ---------------------------------------------------------------------------------
    @staticmethod
    def if_(cond, then_fn, else_fn, names, values, line):
        if not isinstance(cond, Value):
            return (then_fn if cond else else_fn)(*values)
        if isinstance(cond.type, VectorType):
            raise TraceError("`if` on a vector condition; use opus.select for lane-wise choice")
        cond = to_bool(cond, "`if` condition")
        f = _frame()
        b = ctx().builder
        outs, blocks, rets = [], [], []
        for fn in (then_fn, else_fn):
            leaves = []
            trees = [flatten(v, leaves) for v in values]
            fresh = iter(leaves)
            inputs = [unflatten(t, fresh) for t in trees]  # each branch gets its own containers
            blk = b.new_block()
            outs.append(_run_region(blk, fn, inputs, "if"))
            blocks.append(blk)
            rets.append((f.returned, f.value))
            f.returned, f.value = False, None
        if rets[0][0] or rets[1][0]:  # a helper's branch returned (a kernel's emitted a return)
            if not (rets[0][0] and rets[1][0]):
                raise TraceError(f"the helper function returns in only one branch of the "
                                 f"run-time `if` at line {line}: return in both branches (or "
                                 f"assign a result in both and return it after the `if`)")
            f.returned, f.value = True, _merge_branches(
                cond, blocks, ("the returned value",), [(rets[0][1],), (rets[1][1],)], line,
                strict=True)[0]
            return tuple(values)  # not used: the helper returns
        return _merge_branches(cond, blocks, names, outs, line)

    # -- for ------------------------------------------------------------------------------
    @staticmethod
    def for_(it, body, names, values, line):
        if isinstance(it, RangeSpec):
            if it.is_static() and not isinstance(it, OpusRange):
                return _static_loop(range(it.start, it.stop, it.step), body, values)
            return _dynamic_for(it, body, names, values, line)
        if isinstance(it, Value) and not isinstance(it.type, VectorType):
            raise TraceError("cannot iterate over a run-time scalar; use range(...)")
        return _static_loop(it, body, values)

    # -- while ------------------------------------------------------------------------------
    @staticmethod
    def while_(cond_fn, body_fn, names, values, line):
        vals = tuple(values)
        f = _frame()
        for _ in range(_MAX_STATIC_WHILE):
            cv = _probe_condition(cond_fn, vals)
            if isinstance(cv, Value):
                return _dynamic_while(cond_fn, body_fn, names, vals, line)
            if not cv:
                return vals
            vals = tuple(body_fn(*vals))
            if f.returned:
                return vals
        raise TraceError(f"the compile-time `while` loop at line {line} ran {_MAX_STATIC_WHILE} "
                         "iterations; is its condition ever false?")


RT = Runtime()


def _probe_condition(cond_fn, vals):
    """A ``while`` condition's value, traced into a scratch block first: a run-time one is
    traced again inside the loop, and the probe's ops must not run once more before it (a
    condition with side effects, an atomic compare-and-swap, would). A compile-time condition
    that emitted ops is traced again where it stands."""
    b = ctx().builder
    scratch = b.new_block()
    b.push(scratch)
    try:
        cv = cond_fn(*vals)
    finally:
        b.pop()
    if isinstance(cv, Value) or not scratch.ops:
        return cv
    return cond_fn(*vals)


def _merge_branches(cond, blocks, names, outs, line, strict=False):
    """Emit the run-time ``if`` whose branches (``blocks``) end with the values ``outs[0]`` and
    ``outs[1]`` of ``names``; return each name's value after it. A name that is unset in one
    branch, or structured differently, is Undefined after it (``strict``: an error)."""
    b = ctx().builder
    yields = ([], [])  # values each branch yields
    final = []         # per name: a value, or (structure, merged leaves)
    for i, name in enumerate(names):
        lt, le = [], []
        tt, te = flatten(outs[0][i], lt), flatten(outs[1][i], le)
        if not tt.same_shape(te) or any(isinstance(x, Undefined) for x in lt + le):
            if all(_same_static(x, y) for x, y in zip(lt, le)) and tt.same_shape(te):
                final.append(outs[0][i])
                continue
            if strict:
                raise TraceError(f"{name} differs in structure between the branches of the "
                                 f"run-time `if` at line {line}")
            final.append(Undefined(name, f"is assigned in only one branch of the run-time "
                                         f"`if` at line {line} (or with different structure); "
                                         f"assign it in both branches or before the `if`"))
            continue
        merged = []
        for x, y in zip(lt, le):
            if _same_static(x, y):
                merged.append(("static", x))
                continue
            if not (isinstance(x, Value) or _number(x)) or not (isinstance(y, Value) or _number(y)):
                raise TraceError(f"{_what(name)} is a different compile-time object in the "
                                 f"two branches of the run-time `if` at line {line}")
            t = _merge_type(x, y, name, line)
            merged.append(("dyn", len(yields[0])))
            for k, (v, blk) in enumerate(((x, blocks[0]), (y, blocks[1]))):
                b.push(blk)
                try:
                    yields[k].append(_coerce_to(v, t, name))
                finally:
                    b.pop()
        final.append((tt, merged))
    for k, blk in enumerate(blocks):
        b.push(blk)
        try:
            emit("yield", yields[k])
        finally:
            b.pop()
    op = emit("if", [cond], [v.type for v in yields[0]], regions=blocks)
    out = []
    for f in final:
        if isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], _Node):
            tree, merged = f
            leaves = [val if kind == "static" else op.results[val] for kind, val in merged]
            out.append(unflatten(tree, iter(leaves)))
        else:
            out.append(f)
    return tuple(out)


def _what(name):
    return name if " " in name else f"variable {name!r}"


def _merge_type(x, y, name, line):
    tx = x.type if isinstance(x, Value) else None
    ty = y.type if isinstance(y, Value) else None
    if tx is not None and ty is not None:
        if tx == ty:
            return tx
        if isinstance(tx, VectorType) or isinstance(ty, VectorType):
            raise TraceError(f"{_what(name)} is {type_str(tx)} in one branch and "
                             f"{type_str(ty)} in the other (line {line})")
        return promote_types(tx, ty, f"{_what(name)} after the `if` at line {line}")
    t = tx or ty
    if t is None:
        return promote_types(py_default_type(x), py_default_type(y))
    other = y if tx is not None else x
    if isinstance(other, float) and not scalar_of(t).is_float:
        return promote_types(scalar_of(t), py_default_type(other))
    return t


def _coerce_to(v, t, name):
    if isinstance(v, Value):
        if v.type == t:
            return v
        return cast(v, scalar_of(t))
    return const(v, t)


def _static_loop(iterable, body, values):
    vals = tuple(values)
    f = _frame()
    for item in iterable:
        vals = tuple(body(item, *vals))
        if f.returned:
            break
    return vals


def _loop_types(values):
    """Flatten loop inputs; returns (trees, leaves)."""
    leaves = []
    trees = [flatten(v, leaves) for v in values]
    return trees, leaves


def _classify(names, trees, leaves, outs, line):
    """Compare the leaves before and after one traced iteration.

    Returns (promotions, local_names): promotions maps leaf index -> new run-time type (the init
    must be promoted and the body traced again); local_names are names first bound inside the
    loop (not carried).
    """
    promotions = {}
    local = set()
    pos = 0
    for i, (name, tree) in enumerate(zip(names, trees)):
        n = _count_leaves(tree)
        before = leaves[pos:pos + n]
        after = []
        otree = flatten(outs[i], after)
        if any(isinstance(x, Undefined) for x in before):
            local.add(name)
            pos += n
            continue
        if not tree.same_shape(otree):
            raise TraceError(f"variable {name!r} changes its structure inside the run-time loop "
                             f"at line {line}")
        for j, (a, b) in enumerate(zip(before, after)):
            k = pos + j
            if isinstance(a, Value):
                if isinstance(b, Value):
                    if b.type != a.type:
                        if isinstance(a.type, VectorType) or isinstance(b.type, VectorType):
                            raise TraceError(f"variable {name!r} is {type_str(a.type)} before the "
                                             f"loop at line {line} and {type_str(b.type)} after "
                                             f"one iteration")
                        t = promote_types(a.type, b.type, f"loop variable {name!r}")
                        if t != a.type:
                            promotions[k] = t
                elif not _number(b):
                    raise TraceError(f"variable {name!r} becomes a {type(b).__name__} inside the "
                                     f"run-time loop at line {line}")
            elif _same_static(a, b):
                continue
            elif _number(a) and isinstance(b, Value):
                promotions[k] = b.type
            elif _number(a) and _number(b):
                promotions[k] = promote_types(py_default_type(a), py_default_type(b))
            else:
                raise TraceError(f"variable {name!r} holds a compile-time value that changes "
                                 f"inside the run-time loop at line {line}; make it a run-time "
                                 f"value before the loop")
        pos += n
    return promotions, local


def _count_leaves(tree):
    if tree.kind == "leaf":
        return 1
    return sum(_count_leaves(c) for c in tree.children)


def _iter_type(*xs):
    t = None
    for x in xs:
        if isinstance(x, Value):
            if isinstance(x.type, (VectorType, PointerType)) or not scalar_of(x.type).is_int:
                raise TraceError(f"range() bounds must be scalar integers, got {type_str(x.type)}")
            e = scalar_of(x.type)
            t = e if t is None else promote_types(t, e, "range() bounds")
    if t is None:
        t = py_default_type(0)
    for x in xs:
        if is_static(x):
            t = promote_types(t, py_default_type(x), "range() bounds")
    return t


def _run_region(blk, fn, args, kind="loop"):
    """Trace ``fn(*args)`` into the block ``blk`` of a run-time ``kind`` ("if" or "loop")."""
    c = ctx()
    f = c.frontend.frames[-1]
    c.builder.push(blk)
    c.dynamic_depth += 1
    f.regions.append(kind)
    try:
        return fn(*args)
    finally:
        f.regions.pop()
        c.dynamic_depth -= 1
        c.builder.pop()
        if f.kind == "kernel":
            f.returned = False  # its IR return ended this region's path, not the kernel's trace


def _carried_loop(names, values, line, trace_once):
    """Shared driver of run-time for/while: trace, promote changing leaves, retrace.

    ``trace_once(carried_types, rebuild_inputs)`` traces the regions and returns
    (blocks, outs, finish) where finish(yield_values) emits the op and returns its results.
    """
    trees, leaves = _loop_types(values)
    for _ in range(_MAX_RETRACE):
        carried = [k for k, x in enumerate(leaves) if isinstance(x, Value)]

        def make_inputs(args):
            sub = list(leaves)
            for k, a in zip(carried, args):
                sub[k] = a
            return [unflatten(t, iter(sub[_start(trees, i):_start(trees, i) + _count_leaves(t)]))
                    for i, t in enumerate(trees)]

        outs, finish = trace_once([leaves[k].type for k in carried], make_inputs)
        promotions, local = _classify(names, trees, leaves, outs, line)
        if promotions:
            for k, t in promotions.items():
                leaves[k] = _coerce_to(leaves[k], t, "")
            continue
        # yields: the carried leaves' new values, in carried order
        pos, yields_by_leaf = 0, {}
        for i, t in enumerate(trees):
            n = _count_leaves(t)
            if names[i] not in local:
                after = []
                flatten(outs[i], after)
                for j, v in enumerate(after):
                    yields_by_leaf[pos + j] = v
            pos += n
        results = finish([(k, yields_by_leaf[k]) for k in carried], [leaves[k] for k in carried])
        final = list(leaves)
        for k, r in zip(carried, results):
            final[k] = r
        out = []
        for i, t in enumerate(trees):
            s = _start(trees, i)
            if names[i] in local:
                out.append(Undefined(names[i], f"is first assigned inside the run-time loop at "
                                               f"line {line} and is not available after it; "
                                               f"assign it before the loop"))
            else:
                out.append(unflatten(t, iter(final[s:s + _count_leaves(t)])))
        return tuple(out)
    raise TraceError(f"the types of the variables carried by the loop at line {line} do not "
                     "settle; give them explicit types before the loop")


def _start(trees, i):
    return sum(_count_leaves(t) for t in trees[:i])


def _yield_in(blk, pairs):
    """Emit the yield of a loop body: each carried leaf's value, converted to its carried type."""
    b = ctx().builder
    b.push(blk)
    try:
        vals = [_coerce_to(v, t, "") for v, t in pairs]
        emit("yield", vals)
    finally:
        b.pop()


def _dynamic_for(spec, body, names, values, line):
    unroll = getattr(spec, "unroll", None)
    it = _iter_type(spec.start, spec.stop, spec.step)
    if is_static(spec.step) and spec.step == 0:
        raise TraceError("range() step must not be zero")
    lb, ub, st = (cast(as_value(x, it), it) for x in (spec.start, spec.stop, spec.step))
    b = ctx().builder

    def trace_once(types, make_inputs):
        blk = b.new_block()
        iv = blk.add_arg(it, "i")
        args = [blk.add_arg(t) for t in types]
        outs = _run_region(blk, body, [iv] + make_inputs(args))

        def finish(yields, inits):
            _yield_in(blk, [(v, inits[n].type) for n, (_, v) in enumerate(yields)])
            op = emit("for", [lb, ub, st] + inits, [v.type for v in inits], {"unroll": unroll},
                      regions=[blk])
            return op.results
        return outs, finish

    return _carried_loop(names, values, line, trace_once)


def _dynamic_while(cond_fn, body_fn, names, values, line):
    b = ctx().builder

    def trace_once(types, make_inputs):
        cblk = b.new_block()
        cargs = [cblk.add_arg(t) for t in types]
        cv = _run_region(cblk, cond_fn, make_inputs(cargs))
        b.push(cblk)
        try:
            if isinstance(cv, Value) and isinstance(cv.type, VectorType):
                raise TraceError("`while` on a vector condition")
            emit("condition", [to_bool(as_value(cv) if not isinstance(cv, Value) else cv,
                                       "`while` condition")])
        finally:
            b.pop()
        blk = b.new_block()
        args = [blk.add_arg(t) for t in types]
        outs = _run_region(blk, body_fn, make_inputs(args))

        def finish(yields, inits):
            _yield_in(blk, [(v, inits[n].type) for n, (_, v) in enumerate(yields)])
            op = emit("while", inits, [v.type for v in inits], regions=[cblk, blk])
            return op.results
        return outs, finish

    return _carried_loop(names, values, line, trace_once)
