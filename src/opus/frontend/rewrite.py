"""AST rewrite of a kernel or helper function: Python control flow becomes IR control flow.

Tracing alone cannot see rebinding (``acc = acc + x`` inside a loop), so, like CuTe DSL and
AutoGraph, we rewrite the function's syntax tree once:

* ``for t in it: body`` becomes a nested function ``body(item, *names) -> names`` handed to
  ``rt.for_``; ``names`` are the variables the body assigns (or mutates, like ``acc[i] = v``).
  The runtime decides: all-static ``range`` bounds or a plain iterable unroll in Python; any
  run-time bound, or ``opus.range``, emits an IR ``for`` with those names as carried values.
* ``if c: a else: b`` becomes two branch functions handed to ``rt.if_`` (a static condition
  runs one branch; a run-time one emits an IR ``if``).
* ``while c: body`` becomes a condition function and a body function handed to ``rt.while_``.
* ``and``/``or``/``not``, chained comparisons and ``x if c else y`` go through ``rt`` so they
  work on run-time values (static values keep Python's short-circuit behaviour).
* Every call ``f(a, k=b)`` becomes ``rt.call(f, a, k=b)``: a plain Python function of the
  user's is rewritten the same way (once per code object) and traced as a helper, with the
  same control flow as the kernel (calls.py).
* A loop whose body has ``break``/``continue``, and an ``if`` that has them, stay Python
  statements behind ``rt.static_iter``/``rt.static_cond``: they must be compile-time.
* ``return`` inside a rewritten construct becomes ``rt.do_return(value)`` (an IR ``return``
  when a kernel's surrounding control flow is run-time) plus a return of the carried names.
  In a helper, ``if c: ...; return a`` followed by more statements takes those statements as
  its ``else`` (the same meaning), so a run-time condition sees a return on both paths.

The source comes from a snapshot of the file's lines taken when the kernel was defined (or the
helper first traced), so editing the file later changes nothing. Line numbers are the file's,
so that errors and IR locations point at the user's source; syntax that kernels cannot have
is a RewriteError (a TraceError) naming the file and line.
"""
from __future__ import annotations

import _thread
import ast
import inspect
import itertools
import linecache
import textwrap
import types
from collections import namedtuple  # not typing.NamedTuple: typing costs `import opus` ~1 ms

from ..ir import Loc
from ..lang.context import TraceError

__all__ = ["rewrite_function", "capture_source", "SourceSnapshot", "Rewritten", "CodeInfo",
           "RewriteError", "RT_NAME", "param_line"]

RT_NAME = "__opus_rt"
_counter = itertools.count()
# CPython 3.11 counts the depth of AST conversions per interpreter, not per thread: two threads
# parsing or compiling syntax trees at once can fail with "AST constructor recursion depth
# mismatch". Rewrites are rare, so they take turns.
_ast_lock = _thread.allocate_lock()


class SourceSnapshot(namedtuple("SourceSnapshot", "filename first_line lines")):
    """A function's file name, first line (its first decorator's) and the file's lines, as they
    were when the snapshot was taken."""
    __slots__ = ()

    def line(self, n):
        return self.lines[n - 1] if 0 < n <= len(self.lines) else ""


# file name -> its lines when a kernel (or @opus.func) in it was last defined
_defined_lines = {}


def capture_source(fn, at_definition=True) -> SourceSnapshot:
    """The source lines of ``fn``'s file. linecache hands out the list it caches, and replaces
    (never edits) that list when the file changes, so keeping it is a snapshot. At a
    definition the file is read as it is now; a helper traced later takes the lines read when a
    kernel of its file was defined, if one was (the text its code came from, even if the file
    was edited since), else the file now."""
    code = fn.__code__
    name = code.co_filename
    lines = None if at_definition else _defined_lines.get(name)
    if lines is None:
        linecache.checkcache(name)  # a file edited since it was cached (reload) is read again
        lines = linecache.getlines(name, fn.__globals__)
        if at_definition and lines:
            _defined_lines[name] = lines
    return SourceSnapshot(name, code.co_firstlineno, lines)


class RewriteError(TraceError):
    """Syntax a kernel (or a helper it calls) cannot have, at the user's file and line."""

    def __init__(self, message, source: SourceSnapshot, line, kernel=None):
        self.source_line = source.line(line)
        super().__init__(message, Loc(source.filename, line), self.source_line, kernel)


class CodeInfo(namedtuple("CodeInfo", "name kind source top")):
    """What a code object of a rewritten function is: the user function it belongs to (``name``;
    ``kind`` "kernel" or "helper"), that function's ``source`` (a SourceSnapshot), and whether
    it is that function's own code (``top``: a new call of it) rather than a generated branch or
    loop body."""
    __slots__ = ()


class Rewritten(namedtuple("Rewritten", "factory infos")):
    """A rewritten function: ``factory`` is the code of ``__opus_factory(__opus_rt)``, which
    returns the function (made with the globals it should read); ``infos`` describes every
    code object inside it."""
    __slots__ = ()


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

def _at(new, node):
    """``new`` placed on the first line of ``node`` only. Spanning the lines of a whole loop or
    call, as ast.copy_location would make it, Python reports a call in it at the last line."""
    new.lineno = new.end_lineno = node.lineno
    new.col_offset = new.end_col_offset = getattr(node, "col_offset", 0)
    return new


def _rt(attr, node):
    return _at(ast.Attribute(_at(ast.Name(RT_NAME, ast.Load()), node), attr, ast.Load()), node)


def _call(attr, args, node):
    return _at(ast.Call(_rt(attr, node), args, []), node)


def _names_tuple(names, ctx):
    return ast.Tuple([ast.Name(n, ctx()) for n in names], ctx())


def _str_tuple(names):
    return ast.Tuple([ast.Constant(n) for n in names], ast.Load())


def _loc(node):
    return ast.Constant(node.lineno)  # the file's line: the tree's lines are made absolute first


# Calls left as they are: these builtins look at the calling frame.
_FRAME_SENSITIVE = frozenset({"super", "locals", "globals", "vars", "dir", "eval", "exec"})

_WHERE = "in kernel code (a kernel and the Python functions it calls)"


def _terminates(stmts):
    """Does every path through ``stmts`` end in a return (or raise)?"""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and _terminates(last.body) and _terminates(last.orelse)


def _fold_early_returns(stmts):
    """``if c: ...; return a`` then more statements: those statements become the if's else (or
    the then-part, when the else is what returns), which means the same in Python and gives a
    helper's run-time ``if`` a return on both paths."""
    for i, s in enumerate(stmts[:-1]):
        if isinstance(s, ast.If):
            rest = stmts[i + 1:]
            if _terminates(s.body) and not _terminates(s.orelse):
                s.orelse = s.orelse + rest
                return stmts[:i + 1]
            if s.orelse and _terminates(s.orelse) and not _terminates(s.body):
                s.body = s.body + rest
                return stmts[:i + 1]
    return stmts


def _is_generator(fdef):
    """Does the function ``fdef`` itself (not a function nested in it) contain yield?"""
    todo = list(fdef.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return False


class _Rewriter(ast.NodeTransformer):
    def __init__(self, source, kind):
        self.source = source
        # The user function we are in ("kernel" or "helper"), innermost last.
        self.kinds = [kind]
        # For each generated function we are inside: the names it returns; None for the body
        # of a user function itself.
        self.ret_stack = [None]

    def error(self, node, message):
        return RewriteError(message, self.source, node.lineno)

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

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and (f.id in _FRAME_SENSITIVE or f.id.startswith("__opus")):
            return node
        return _at(ast.Call(_rt("call", node), [f] + node.args, node.keywords), node)

    # statements ------------------------------------------------------------------------------
    def _visit_body(self, stmts):
        if self.kinds[-1] == "helper":
            stmts = _fold_early_returns(stmts)
        out = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        return out

    def visit_FunctionDef(self, node):
        if node.name.startswith("__opus") or _is_generator(node):
            return node  # ours; or a generator: plain Python, for compile-time iteration
        # a helper function defined in the kernel: rewritten here, as its own scope
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [d if d is None else self.visit(d) for d in node.args.kw_defaults]
        self.kinds.append("helper")
        self.ret_stack.append(None)
        node.body = self._visit_body(node.body)
        self.ret_stack.pop()
        self.kinds.pop()
        return node

    def visit_Return(self, node):
        if self.kinds[-1] == "kernel" and node.value is not None:
            raise self.error(node, "a kernel cannot return a value; store results through a "
                                   "pointer parameter (a helper function called from the "
                                   "kernel can return values)")
        if node.value is not None:
            node.value = self.visit(node.value)
        names = self.ret_stack[-1]
        if names is None:
            return node  # the function's own body: a plain return
        value = node.value if node.value is not None else ast.Constant(None)
        stmt = ast.Expr(_call("do_return", [value, _loc(node)], node))
        ret = ast.Return(_names_tuple(names, ast.Load))
        return [_at(stmt, node), _at(ret, node)]

    def _after_return_check(self, node, has_ret):
        """After a construct that may have returned statically, stop tracing this function."""
        if not has_ret:
            return []
        names = self.ret_stack[-1]
        if names is not None:
            value = _names_tuple(names, ast.Load)
        elif self.kinds[-1] == "kernel":
            value = None
        else:
            value = _call("result", [], node)
        ret = ast.Return(value)
        test = _call("returned", [], node)
        return [_at(ast.If(test, [_at(ret, node)], []), node)]

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
            return _at(ast.Assign([tgt], value), node)
        return _at(ast.Expr(value), node)

    def visit_For(self, node):
        if node.orelse:
            raise self.error(node, f"for/else is not supported {_WHERE}")
        f = _finds(node.body)
        if f.brk:
            # break/continue: keep a Python loop; its iterable must be compile-time.
            node.iter = _call("static_iter", [self._iterable(node.iter), _loc(node)], node)
            node.body = self._visit_body(node.body)
            return node
        k = next(_counter)
        tnames = _target_names(node.target)
        names = assigned_names(node.body, exclude=tnames)
        item = f"__opus_item{k}"
        unpack = _at(ast.Assign([node.target], ast.Name(item, ast.Load())), node)
        fn = self._make_fn(f"__opus_for{k}", [item] + names, [unpack] + node.body, names, node)
        it = self._iterable(node.iter)
        call = _call("for_", [it, ast.Name(fn.name, ast.Load()), _str_tuple(names),
                              self._current(names, node), _loc(node)], node)
        return [fn, self._assign_back(names, call, node)] + self._after_return_check(node, f.ret)

    def _iterable(self, it):
        """A ``for`` loop's iterable; the builtin ``range(...)`` becomes ``rt.range_spec``."""
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            if it.keywords or any(isinstance(a, ast.Starred) for a in it.args):
                raise self.error(it, "range() in a kernel's `for` takes 1 to 3 plain arguments")
            return _call("range_spec", [self.visit(a) for a in it.args], it)
        return self.visit(it)

    def visit_While(self, node):
        if node.orelse:
            raise self.error(node, f"while/else is not supported {_WHERE}")
        f = _finds(node.body)
        if f.brk:
            node.test = _call("static_cond", [self.visit(node.test), _loc(node)], node)
            node.body = self._visit_body(node.body)
            return node
        k = next(_counter)
        names = assigned_names(node.body)
        cond = self._make_fn(f"__opus_wcond{k}", names, [], [], node)
        cond.body = [_at(ast.Return(self.visit(node.test)), node)]
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

    def visit_AnnAssign(self, node):
        """``x: T = v`` -> ``x = rt.declare(v, T)``: the annotation is evaluated when tracing
        and a dtype or vector type (opus.f32x4) types the value (lang.vectors.declare); a bare
        ``x: T`` declares nothing."""
        self.generic_visit(node)
        if node.value is None or not isinstance(node.target, ast.Name):
            return node
        value = _call("declare", [node.value, node.annotation], node)
        return _at(ast.Assign([node.target], value), node)

    def visit_With(self, node):
        for item in node.items:
            item.context_expr = self.visit(item.context_expr)
        node.body = self._visit_body(node.body)
        return node

    def visit_Delete(self, node):
        for t in node.targets:
            if isinstance(t, ast.Name):
                raise self.error(node, f"`del {t.id}` is not supported {_WHERE} (variables are "
                                       "carried through control flow); rebind it instead")
        self.generic_visit(node)
        return node


# Syntax that kernel code cannot have: node type -> why (an error at its line).
_REFUSED = {
    "NamedExpr": "assignment expressions (:=) are not supported {where}; assign the value on its "
                 "own line",
    "Yield": "yield is not supported {where}: it would make the kernel a generator, which traces "
             "nothing",
    "YieldFrom": "yield is not supported {where}",
    "Await": "await is not supported {where}",
    "AsyncFunctionDef": "async def is not supported {where}",
    "AsyncFor": "async for is not supported {where}",
    "AsyncWith": "async with is not supported {where}",
    "ClassDef": "class definitions are not supported {where}; define the class outside the kernel",
    "Try": "try/except is not supported {where}: errors are raised while the kernel is traced, "
           "and the GPU has no exceptions",
    "TryStar": "try/except* is not supported {where}",
    "Match": "match statements are not supported {where}; use if/elif",
    "Global": "global statements are not supported {where}: a kernel cannot assign variables "
              "outside itself",
    "Nonlocal": "nonlocal statements are not supported {where}: a kernel cannot assign "
                "variables outside itself",
}


def _refuse(why):
    def visit(self, node):
        raise self.error(node, why)
    return visit


for _name, _why in _REFUSED.items():
    setattr(_Rewriter, f"visit_{_name}", _refuse(_why.format(where=_WHERE)))


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


def _parse_definition(fn, source):
    """Module AST holding only ``fn``'s definition, with the file's line numbers."""
    start = source.first_line - 1  # the first decorator's line
    tree = _parse_definition_fast(fn, source.lines, start)
    if tree is None:
        try:
            if not 0 <= start < len(source.lines):
                raise OSError("its source lines are not available")
            block = inspect.getblock(source.lines[start:])
            tree = ast.parse(textwrap.dedent("".join(block)))
        except (OSError, SyntaxError, IndentationError) as e:
            raise TraceError(f"cannot read the source of {fn.__name__!r} ({source.filename}): "
                             f"{e}. Kernels and their helpers must be defined in a file (not in "
                             "exec'd strings or the plain REPL).") from None
    ast.increment_lineno(tree, source.first_line - 1)
    return tree


def _parse_definition_fast(fn, lines, start):
    """The common case without inspect's tokenizer, which costs milliseconds in a fresh
    process: the definition is the decorators and ``def`` line at one indentation, then the
    lines indented deeper. Anything unusual (a header spread over lines that end at that same
    indentation, a string literal at column 0 inside the body) fails the parse or the name
    check, and the caller falls back to inspect."""
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
    ok = (len(tree.body) == 1 and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef))
          and tree.body[0].name == fn.__name__)
    return tree if ok else None


def _strip_signature(fdef):
    """Annotations and defaults come from the live function, not from the rewrite."""
    fdef.decorator_list = []
    fdef.returns = None
    a = fdef.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    a.defaults = []
    a.kw_defaults = [None] * len(a.kwonlyargs)


def rewrite_function(fn, source: SourceSnapshot, kind: str) -> Rewritten:
    """Rewrite ``fn`` (``kind`` "kernel" or "helper") from ``source``. The rewritten function
    has no free variables: the names it read from enclosing functions are read as globals, from
    the namespace it is made with (calls.py gives that namespace the closure's cells)."""
    with _ast_lock:
        return _rewrite(fn, source, kind)


def _rewrite(fn, source, kind):
    tree = _parse_definition(fn, source)
    fdef = tree.body[0]
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise RewriteError(_REFUSED["AsyncFunctionDef"].format(where=_WHERE), source, fdef.lineno)
    _strip_signature(fdef)
    if kind == "kernel":
        star = fdef.args.vararg or fdef.args.kwarg
        if star is not None:
            raise RewriteError(f"kernel {fn.__name__!r}: *args/**kwargs parameters are not "
                               "supported; give each parameter a name and an annotation",
                               source, star.lineno)
    fdef.body = _Rewriter(source, kind)._visit_body(fdef.body)
    factory_args = ast.arguments(posonlyargs=[], args=[ast.arg(RT_NAME)], vararg=None,
                                 kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    factory = _funcdef("__opus_factory", factory_args,
                       [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))])
    mod = ast.Module([factory], type_ignores=[])
    ast.copy_location(factory, fdef)
    ast.fix_missing_locations(mod)
    code = compile(mod, source.filename, "exec")
    fcode = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    infos = {}
    for c in _code_objects(fcode) - {fcode}:
        top = c.co_name == fdef.name and c.co_firstlineno == fdef.lineno
        user_def = not c.co_name.startswith(("__opus", "<"))
        infos[c] = CodeInfo(fn.__name__ if top else c.co_name, kind if top else "helper",
                            source, user_def)
    return Rewritten(fcode, infos)


def param_line(fn, source: SourceSnapshot, name: str) -> int:
    """The file line declaring parameter ``name`` of ``fn`` (its def line if not found): for
    errors about a parameter, found by parsing only then."""
    try:
        with _ast_lock:
            fdef = _parse_definition(fn, source).body[0]
    except TraceError:
        return source.first_line
    a = fdef.args
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None and arg.arg == name:
            return arg.lineno
    return fdef.lineno
