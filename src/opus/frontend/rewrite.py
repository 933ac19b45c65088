"""AST rewrite of a kernel function, so that Python control flow can become IR control flow.

Tracing alone cannot see rebinding (``acc = acc + x`` inside a loop), so, like CuTe DSL and
AutoGraph, we rewrite the kernel's syntax tree once:

* ``for t in it: body`` becomes a nested function ``body(item, *names) -> names`` handed to
  ``rt.for_``; ``names`` are the variables the body assigns (or mutates, like ``acc[i] = v``).
  The runtime decides: all-static ``range`` bounds or a plain iterable unroll in Python; any
  run-time bound, or ``opus.range``, emits an IR ``for`` with those names as carried values.
* ``if c: a else: b`` becomes two branch functions handed to ``rt.if_`` (a static condition
  runs one branch; a run-time one emits an IR ``if``).
* ``while c: body`` becomes a condition function and a body function handed to ``rt.while_``.
* ``and``/``or``/``not``, chained comparisons and ``x if c else y`` go through ``rt`` so they
  work on run-time values (static values keep Python's short-circuit behaviour).
* A loop whose body has ``break``/``continue``, and an ``if`` that has them, stay Python
  statements behind ``rt.static_iter``/``rt.static_cond``: they must be compile-time.
* ``return`` inside a rewritten construct becomes ``rt.kernel_return()`` (an IR ``return`` when
  the surrounding control flow is run-time) plus a return of the carried names.

Line numbers are preserved so that errors and IR locations point at the user's source.
"""
from __future__ import annotations

import ast
import inspect
import itertools
import linecache
import textwrap
import types

from ..errors import OpusError

__all__ = ["rewrite_kernel", "RewriteError", "RT_NAME"]

RT_NAME = "__opus_rt"
_counter = itertools.count()


class RewriteError(OpusError):
    pass


# -- name analysis ------------------------------------------------------------------------------

class _Assigned(ast.NodeVisitor):
    """Names a statement list binds, and names it mutates in place (``x[i] = v``, ``x.a = v``).

    Nested function/lambda/comprehension scopes are not entered: their bindings are their own.
    """

    def __init__(self):
        self.names = []

    def _add(self, name):
        if name not in self.names and not name.startswith("__opus"):
            self.names.append(name)

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._add(node.id)

    def _mutated_base(self, node):
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        if isinstance(node, ast.Name):
            self._add(node.id)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, ast.Store):
            self._mutated_base(node)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Store):
            self._mutated_base(node)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if not node.name.startswith("__opus"):
            self._add(node.name)
        # generated helper functions: look inside, their assignments are ours too
        if node.name.startswith("__opus"):
            for s in node.body:
                self.visit(s)

    def visit_Lambda(self, node):
        pass

    def visit_ListComp(self, node):
        pass

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    def visit_Import(self, node):
        for a in node.names:
            self._add((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import


def assigned_names(stmts, exclude=()):
    v = _Assigned()
    for s in stmts:
        v.visit(s)
    return [n for n in v.names if n not in exclude]


def _target_names(target):
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


class _Finds(ast.NodeVisitor):
    """Does a statement list contain break/continue (for this loop level) or return?"""

    def __init__(self):
        self.brk = False
        self.ret = False
        self._depth = 0

    def visit_Break(self, node):
        if self._depth == 0:
            self.brk = True

    visit_Continue = visit_Break

    def visit_Return(self, node):
        self.ret = True

    def _loop(self, node):
        self._depth += 1
        for s in node.body:
            self.visit(s)
        self._depth -= 1
        for s in node.orelse:
            self.visit(s)

    visit_For = visit_While = _loop

    def visit_FunctionDef(self, node):
        pass

    visit_Lambda = visit_AsyncFunctionDef = visit_FunctionDef


def _finds(stmts):
    f = _Finds()
    for s in stmts:
        f.visit(s)
    return f


# -- the transformer ------------------------------------------------------------------------------

def _rt(attr, node):
    return ast.copy_location(ast.Attribute(ast.Name(RT_NAME, ast.Load()), attr, ast.Load()), node)


def _call(attr, args, node):
    return ast.copy_location(ast.Call(_rt(attr, node), args, []), node)


def _names_tuple(names, ctx):
    return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())


def _str_tuple(names):
    return ast.Tuple([ast.Constant(n) for n in names], ast.Load())


def _loc(node):
    return ast.Constant(node.lineno)


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        # For each generated function we are inside: the names it returns (None = the kernel).
        self.ret_stack = [None]

    # expressions ---------------------------------------------------------------------------
    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "bool_and" if isinstance(node.op, ast.And) else "bool_or"
        thunks = [ast.Lambda(_no_args(), v) for v in node.values]
        return _call(fn, thunks, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _call("bool_not", [node.operand], node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        # a < b < c  ->  bool_and(lambda: a < b, lambda: b < c)  (b evaluated twice: we bind it)
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(ast.Lambda(_no_args(), ast.Compare(left, [op], [right])))
            left = right
        return _call("bool_and", parts, node)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return _call("if_exp", [node.test, ast.Lambda(_no_args(), node.body),
                                ast.Lambda(_no_args(), node.orelse)], node)

    # statements ------------------------------------------------------------------------------
    def _visit_body(self, stmts):
        out = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        return out

    def visit_FunctionDef(self, node):
        if node.name.startswith("__opus"):
            return node
        # a nested helper function the user wrote: rewrite its body too, as its own scope
        self.ret_stack.append("user")
        node.body = self._visit_body(node.body)
        self.ret_stack.pop()
        return node

    def visit_Return(self, node):
        names = self.ret_stack[-1]
        if names is None or names == "user":
            if names is None and node.value is not None:
                raise RewriteError(f"line {node.lineno}: a kernel cannot return a value")
            return node
        stmt = ast.Expr(_call("kernel_return", [_loc(node)], node))
        ret = ast.Return(_names_tuple(names, ast.Load))
        return [ast.copy_location(stmt, node), ast.copy_location(ret, node)]

    def _after_return_check(self, node, has_ret):
        """After a construct that may have returned statically, stop tracing this function."""
        if not has_ret:
            return []
        names = self.ret_stack[-1]
        if names == "user":
            return []
        value = None if names is None else _names_tuple(names, ast.Load)
        ret = ast.Return(value)
        test = _call("returned", [], node)
        return [ast.copy_location(ast.If(test, [ast.copy_location(ret, node)], []), node)]

    def _make_fn(self, name, params, body_stmts, ret_names, node):
        self.ret_stack.append(ret_names)
        body = self._visit_body(body_stmts)
        self.ret_stack.pop()
        body.append(ast.Return(_names_tuple(ret_names, ast.Load)))
        args = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                             kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        return ast.copy_location(_funcdef(name, args, body), node)

    def _assign_back(self, names, value, node):
        if names:
            tgt = _names_tuple(names, ast.Store)
            return ast.copy_location(ast.Assign([tgt], value), node)
        return ast.copy_location(ast.Expr(value), node)

    def visit_For(self, node):
        if node.orelse:
            raise RewriteError(f"line {node.lineno}: for/else is not supported in kernels")
        f = _finds(node.body)
        if f.brk:
            # break/continue: keep a Python loop; its iterable must be compile-time.
            node.iter = _call("static_iter", [self.visit(node.iter), _loc(node)], node)
            node.body = self._visit_body(node.body)
            return node
        k = next(_counter)
        tnames = _target_names(node.target)
        names = assigned_names(node.body, exclude=tnames)
        item = f"__opus_item{k}"
        unpack = ast.copy_location(ast.Assign([node.target], ast.Name(item, ast.Load())), node)
        fn = self._make_fn(f"__opus_for{k}", [item] + names, [unpack] + node.body, names, node)
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            it = _call("range_spec", [self.visit(a) for a in it.args], it)
        else:
            it = self.visit(it)
        call = _call("for_", [it, ast.Name(fn.name, ast.Load()), _str_tuple(names),
                              self._current(names, node), _loc(node)], node)
        return [fn, self._assign_back(names, call, node)] + self._after_return_check(node, f.ret)

    def visit_While(self, node):
        if node.orelse:
            raise RewriteError(f"line {node.lineno}: while/else is not supported in kernels")
        f = _finds(node.body)
        if f.brk:
            node.test = _call("static_cond", [self.visit(node.test), _loc(node)], node)
            node.body = self._visit_body(node.body)
            return node
        k = next(_counter)
        names = assigned_names(node.body)
        cond = self._make_fn(f"__opus_wcond{k}", names, [], [], node)
        cond.body = [ast.copy_location(ast.Return(self.visit(node.test)), node)]
        body = self._make_fn(f"__opus_wbody{k}", names, node.body, names, node)
        call = _call("while_", [ast.Name(cond.name, ast.Load()), ast.Name(body.name, ast.Load()),
                                _str_tuple(names), self._current(names, node), _loc(node)], node)
        return [cond, body, self._assign_back(names, call, node)] + \
            self._after_return_check(node, f.ret)

    def visit_If(self, node):
        f = _finds(node.body + node.orelse)
        if f.brk:
            node.test = _call("static_cond", [self.visit(node.test), _loc(node)], node)
            node.body = self._visit_body(node.body)
            node.orelse = self._visit_body(node.orelse)
            return node
        k = next(_counter)
        names = assigned_names(node.body + node.orelse)
        then = self._make_fn(f"__opus_then{k}", names, node.body, names, node)
        other = self._make_fn(f"__opus_else{k}", names, node.orelse, names, node)
        call = _call("if_", [self.visit(node.test), ast.Name(then.name, ast.Load()),
                             ast.Name(other.name, ast.Load()), _str_tuple(names),
                             self._current(names, node), _loc(node)], node)
        return [then, other, self._assign_back(names, call, node)] + \
            self._after_return_check(node, f.ret)

    def _current(self, names, node):
        """Expression giving each name's value now, or rt.UNDEF if it is unbound."""
        return _call("current", [ast.Call(ast.Name("locals", ast.Load()), [], []),
                                 _str_tuple(names)], node)

    def visit_With(self, node):
        node.body = self._visit_body(node.body)
        return node

    def visit_Try(self, node):
        raise RewriteError(f"line {node.lineno}: try/except is not supported in kernels")

    def visit_Global(self, node):
        raise RewriteError(f"line {node.lineno}: global/nonlocal are not supported in kernels")

    visit_Nonlocal = visit_Global


def _funcdef(name, args, body):
    fn = ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None)
    if hasattr(ast.FunctionDef, "type_params") or "type_params" in ast.FunctionDef._fields:
        fn.type_params = []
    return fn


def _no_args():
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                         kwarg=None, defaults=[])


# -- entry point ------------------------------------------------------------------------------

def _code_objects(code):
    out = {code}
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _code_objects(c)
    return out


def _parse_definition(fn):
    """(module AST holding only ``fn``'s definition, file name, first line of the definition)."""
    tree = _parse_definition_fast(fn)
    if tree is not None:
        return tree, fn.__code__.co_filename, fn.__code__.co_firstlineno
    try:
        src = inspect.getsource(fn)
        filename = inspect.getsourcefile(fn) or "<kernel>"
        _, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise RewriteError(f"cannot read the source of kernel {fn.__name__!r}: {e}. "
                           "Kernels must be defined in a file (not exec'd strings or the REPL).")
    return ast.parse(textwrap.dedent(src)), filename, first_line


def _parse_definition_fast(fn):
    """The common case without inspect.getsource, whose tokenizer costs milliseconds in a fresh
    process: the definition is the decorators and ``def`` line at one indentation, then the
    lines indented deeper. Anything unusual (a header spread over lines that end at that same
    indentation, a string literal at column 0 inside the body) fails the parse or the name
    check, and the caller falls back to inspect."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    start = code.co_firstlineno - 1  # the first decorator's line
    if not 0 <= start < len(lines):
        return None
    head = lines[start]
    prefix = head[:len(head) - len(head.lstrip())]
    block, seen_def = [], False
    for line in lines[start:]:
        text = line.strip()
        if text and not text.startswith("#"):
            if not line.startswith(prefix):
                break
            deeper = line[len(prefix):len(prefix) + 1] in (" ", "\t")
            if not deeper:
                if seen_def:
                    break
                seen_def = text.startswith(("def ", "async def "))
        block.append(line[len(prefix):] if line.startswith(prefix) else "\n")
    try:
        tree = ast.parse("".join(block))
    except SyntaxError:
        return None
    ok = (len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
          and tree.body[0].name == fn.__name__)
    return tree if ok else None


def rewrite_kernel(fn):
    """Return (factory, code_objects): ``factory(rt, *freevar_values)`` builds the rewritten
    kernel function; ``code_objects`` are all its code objects (used to find kernel frames)."""
    tree, filename, first_line = _parse_definition(fn)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise RewriteError(f"{fn.__name__!r} is not a plain function definition")
    fdef.decorator_list = []
    fdef.returns = None
    for a in fdef.args.args + fdef.args.kwonlyargs:
        a.annotation = None  # annotations and defaults come from the live function
    fdef.args.defaults = []
    fdef.args.kw_defaults = [None] * len(fdef.args.kwonlyargs)
    if fdef.args.vararg or fdef.args.kwarg:
        raise RewriteError(f"kernel {fn.__name__!r}: *args/**kwargs parameters are not supported")
    fdef.body = _Rewriter()._visit_body(fdef.body)
    freevars = fn.__code__.co_freevars
    factory_args = ast.arguments(posonlyargs=[], args=[ast.arg(RT_NAME)] + [ast.arg(v) for v in freevars],
                                 vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    factory = _funcdef("__opus_factory", factory_args,
                       [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))])
    mod = ast.Module([factory], type_ignores=[])
    ast.fix_missing_locations(mod)
    ast.increment_lineno(mod, first_line - 1)
    code = compile(mod, filename, "exec")
    fcode = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    factory_fn = types.FunctionType(fcode, fn.__globals__, "__opus_factory")
    kcodes = _code_objects(fcode) - {fcode}
    return factory_fn, kcodes
