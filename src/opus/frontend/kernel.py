"""``@opus.kernel``: parameters, specialization, tracing, and the launch path.

``kernel[grid, block](*args, smem=0, stream=None)`` looks up the compiled specialization for
the constexpr arguments and the current target in a dict (the hot path: no tracing, codegen or
hashing), then packs the arguments and launches. A miss traces the rewritten kernel into IR,
renders it for the target and compiles it (through the disk cache).
"""
from __future__ import annotations

import _thread  # not threading: that import costs ~1 ms of opus's import time
import gc
import inspect
import linecache
import operator
import sys
import traceback

from ..dtypes import DType
from ..errors import ArgumentError, OpusError
from ..ir import Block, Builder, Function, Param, PointerType, TENSOR_MAP
from ..lang.context import PtxBodyRefusal, TraceContext, TraceError, tracing
from ..lang.values import Val
from ..lang.tma import TensorMapArg
from ..lang.mdiv import mdiv, PARAM_TYPE as MDIV_PARAM_TYPE, _Traced as _MdivParam
from ..runtime.tensor_map import TensorMap
from ..targets import get_target
from ..targets.base import UnsupportedOnTarget
from ..ir.builder import ScopeError
from .annotations import ParamSpec, PtrSpec, _Constexpr
from .calls import (Frame, TraceState, guards_hold, negative_zero, plain_code_info,
                    register_rewritten)
from .control import RT
from .rewrite import RewriteError, capture_source, param_line, rewrite_function
from .targeting import current_target

__all__ = ["kernel", "Kernel", "Specialization"]


def _param_error(fn, source, name, message):
    """A TraceError at the line declaring parameter ``name`` of the kernel ``fn``."""
    from ..ir import Loc
    line = param_line(fn, source, name)
    return TraceError(message, Loc(source.filename, line), source.line(line), fn.__name__)


def _annotations(fn, source):
    """Parameter annotations, evaluating string ones (``from __future__ import annotations``)
    in the function's globals and closure."""
    raw = dict(getattr(fn, "__annotations__", {}))
    local = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                local[name] = cell.cell_contents
            except ValueError:
                pass
    out = {}
    for k, a in raw.items():
        if isinstance(a, str):
            try:
                a = eval(a, fn.__globals__, local)
            except Exception as e:
                raise _param_error(
                    fn, source, k, f"cannot evaluate the annotation of {k!r} ({a!r}): {e} (under "
                    f"`from __future__ import annotations`, a local name used only in "
                    f"annotations is invisible: use a global or drop the import)") from None
        out[k] = a
    return out


def _parse_params(fn, source):
    sig = inspect.signature(fn)
    ann = _annotations(fn, source)
    params = []
    for i, (name, p) in enumerate(sig.parameters.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise _param_error(fn, source, name, f"kernel {fn.__name__!r}: *args/**kwargs "
                               f"parameters are not supported; give each parameter a name and "
                               f"an annotation")
        a = ann.get(name, inspect.Parameter.empty)
        default = p.default if p.default is not p.empty else None
        has_default = p.default is not p.empty
        if isinstance(a, PtrSpec):
            params.append(ParamSpec(name, "ptr", a.dtype, None, i))
        elif isinstance(a, DType):
            params.append(ParamSpec(name, "scalar", a, default if has_default else None, i))
        elif a is TensorMap:
            params.append(ParamSpec(name, "tmap", None, None, i))
        elif a is mdiv:
            params.append(ParamSpec(name, "mdiv", None, None, i))
        elif isinstance(a, _Constexpr):
            params.append(ParamSpec(name, "constexpr", None, default, i))
            params[-1].default = p.default  # may be p.empty: required
        else:
            raise _param_error(
                fn, source, name,
                f"kernel {fn.__name__!r}: parameter {name!r} needs an annotation: opus.Ptr[dtype] "
                f"for a pointer, a dtype such as opus.i32 for a scalar, opus.TensorMap for a TMA "
                f"tensor map, opus.mdiv for a prepared divisor, or opus.constexpr for a compile-time value (got {a!r})")
    return params


def _default(p):
    """The value bind() fills in for a parameter left out, or inspect.Parameter.empty."""
    if p.kind == "constexpr":
        return p.default
    if p.kind == "scalar" and p.default is not None:
        return p.default
    return inspect.Parameter.empty


def _default_tails(params):
    """{number of positional arguments given: the defaults completing them}, for every count
    from which all remaining parameters have defaults."""
    tails, tail = {}, ()
    for n in range(len(params), 0, -1):
        d = _default(params[n - 1])
        if d is inspect.Parameter.empty:
            break
        tail = (d,) + tail
        tails[n - 1] = tail
    return tails


_NEVER_NEGATIVE_ZERO = frozenset((int, bool, str, DType, type(None)))


def type_signature(value):
    """The types in a constexpr value, nested like it: part of every key with constexpr values,
    because equal values of other types (2, 2.0, True; np.int32(2)) may trace differently, and
    so may 0.0 and -0.0, and namedtuples equal as tuples."""
    t = type(value)
    if t is tuple:
        return tuple(map(type_signature, value))
    if t in _NEVER_NEGATIVE_ZERO:  # the common cases first: this is on the launch path
        return t
    if isinstance(value, tuple):  # a namedtuple: its fields' types count too
        return t, tuple(map(type_signature, value))
    return (t, "-0") if negative_zero(value) else t


class Kernel:
    """A decorated kernel. Index it with a launch configuration to launch it."""

    _opus_launch_only = True  # calls.call: not callable from kernel code

    def __init__(self, fn, block=None, min_blocks=None, maxnreg=None, body="cuda"):
        _check_body(body)
        _check_hint("block", block, 1, 1024)
        _check_hint("min_blocks", min_blocks, 1, None)
        _check_hint("maxnreg", maxnreg, 1, None)
        from ..targets.occupancy import combination_problem
        problem = combination_problem(block, min_blocks, maxnreg)
        if problem:
            raise OpusError(f"@opus.kernel: {problem}")
        self.fn = fn
        self.name = fn.__name__
        self.block = block
        self.min_blocks, self.maxnreg = min_blocks, maxnreg
        self.body = body  # "cuda" or "ptx" (docs/ptx_body.md): how the kernel is rendered
        # The source as it is now: a file edited later does not change the kernel.
        self._source = capture_source(fn)
        self.params = _parse_params(fn, self._source)
        self.nparams = len(self.params)
        self.const_idx = tuple(p.index for p in self.params if p.kind == "constexpr")
        # the launch path's key part for constexpr values: one C call instead of a genexpr
        self.const_values = operator.itemgetter(*self.const_idx) if self.const_idx else None
        self._defaults = tuple(_default(p) for p in self.params)
        self._bind_plans = {}  # (number of positional args, keyword names) -> how to bind
        self._default_tails = _default_tails(self.params)
        # argument counts that give no constexpr (all left to their defaults): see launch.py
        self._constexpr_free_counts = frozenset(
            n for n in range(self.nparams + 1)
            if all(i >= n for i in self.const_idx)
            and all(p.kind == "constexpr" for p in self.params[n:]))
        self._rewritten = None
        # Held while tracing a new specialization, so threads specializing one kernel at once
        # rewrite it once and share one Specialization per key (no duplicate work or objects).
        self._lock = _thread.RLock()
        self._specs = {}     # (target, constexpr values, their types) -> Specialization
        self._earlier = {}   # same key -> specializations made under other values of globals
        self.launch_entries = {}  # entry_key(...) -> launch entry (frontend/launch.py)
        self._launchers = {}  # launch configuration -> launcher (launch.py)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self):
        return f"<opus.kernel {self.name}>"

    def __call__(self, *args, **kw):
        raise OpusError(f"kernel {self.name!r} must be launched with a configuration: "
                        f"{self.name}[grid, block](...)")

    def __getitem__(self, cfg):
        # Launchers are cached per configuration: k[grid, block] in a hot loop builds nothing.
        try:
            return self._launchers[cfg]
        except (KeyError, TypeError):
            from .launch import launcher_for
            la = launcher_for(self, cfg)
            try:
                if len(self._launchers) < 4096:
                    self._launchers[cfg] = la
            except TypeError:
                pass  # unhashable configuration (lists): not cached
            return la

    # -- arguments ------------------------------------------------------------------------------
    def bind(self, args, kwargs):
        """Full positional argument tuple from a call's args/kwargs (defaults filled in)."""
        if not kwargs:
            tail = self._default_tails.get(len(args))
            if tail is not None:
                return args + tail
        shape = (len(args), tuple(kwargs))
        plan = self._bind_plans.get(shape)
        if plan is None:
            plan = self._bind_plan(*shape)
            if len(self._bind_plans) < 256:
                self._bind_plans[shape] = plan
        pick, defaults = plan
        return pick(args + tuple(kwargs.values()) + defaults)

    def _bind_plan(self, nargs, names):
        """How to bind a call with ``nargs`` positional arguments and keywords ``names`` (in the
        call's order): one itemgetter over (positional, keyword values, needed defaults)."""
        if nargs > self.nparams:
            raise ArgumentError(f"kernel {self.name!r} takes {self.nparams} arguments, got {nargs}")
        later = [p.name for p in self.params[nargs:]]
        bad = sorted(set(names) - set(later))
        if bad:
            raise ArgumentError(f"kernel {self.name!r}: unexpected or repeated argument(s) "
                                f"{', '.join(bad)}")
        sources, defaults = list(range(nargs)), []
        for p, d in zip(self.params[nargs:], self._defaults[nargs:]):
            if p.name in names:
                sources.append(nargs + names.index(p.name))
            elif d is not inspect.Parameter.empty:
                sources.append(nargs + len(names) + len(defaults))
                defaults.append(d)
            else:
                raise ArgumentError(f"kernel {self.name!r}: missing argument for parameter {p.name!r}")
        get = operator.itemgetter(*sources)
        pick = get if len(sources) > 1 else (lambda values: (get(values),))
        return pick, tuple(defaults)

    def const_key(self, args):
        key = tuple(args[i] for i in self.const_idx)
        try:
            hash(key)
        except TypeError:
            bad = [self.params[i].name for i in self.const_idx if not _hashable(args[i])]
            raise ArgumentError(f"kernel {self.name!r}: constexpr parameter(s) {', '.join(bad)} "
                                f"must be hashable (ints, floats, tuples, dtypes, ...)") from None
        return key

    # -- what launching needs (frontend/launch.py) ----------------------------------------------
    def launch_arguments(self, given, kwargs):
        """A launch's full argument tuple, and whether the call leaves every constexpr to its
        default (no keywords): then its entry depends on the selected target alone, and
        launchers may remember it per number of positional arguments."""
        memoizable = not kwargs and len(given) in self._constexpr_free_counts
        if kwargs or len(given) != self.nparams:
            return self.bind(given, kwargs), memoizable
        return given, memoizable

    def entry_key(self, selection_key, args):
        """The key of launch_entries for a full argument tuple under a target selection: the
        selection's key, with the constexpr values and their types when there are any."""
        if not self.const_idx:
            return selection_key
        v = self.const_values(args)
        return selection_key, v, type_signature(v)

    def _constexprs_from(self, kwargs):
        """Constexpr values for inspection calls: given by name, or their defaults."""
        vals = []
        for i in self.const_idx:
            p = self.params[i]
            if p.name in kwargs:
                vals.append(kwargs.pop(p.name))
            elif p.default is not inspect.Parameter.empty:
                vals.append(p.default)
            else:
                raise ArgumentError(f"kernel {self.name!r}: give constexpr {p.name}=... to inspect it")
        if kwargs:
            raise ArgumentError(f"kernel {self.name!r}: unknown constexpr(s) {', '.join(sorted(kwargs))}")
        return tuple(vals)

    # -- specialization ---------------------------------------------------------------------------
    def specialize(self, target=None, **constexprs) -> "Specialization":
        """The traced (and lazily compiled) kernel for these constexpr values and target."""
        t = get_target(target) if isinstance(target, str) else (target or current_target().target)
        return self.specialization(t, self._constexprs_from(dict(constexprs)))

    def specialization(self, target, cvals):
        """The Specialization for ``target`` and the constexpr values ``cvals`` (in parameter
        order), retraced when a global its trace read has changed."""
        key = (target.name, cvals, type_signature(cvals))
        s = self._specs.get(key)
        if s is None or (s.guards and not guards_hold(s.guards)):
            with self._lock:
                s = self._specs.get(key)
                if s is None or (s.guards and not guards_hold(s.guards)):
                    s = self._specs[key] = self._respecialize(key, target, cvals, s)
        return s

    def _respecialize(self, key, target, cvals, stale):
        """The globals a trace read are part of its key: when one of them changed (``stale``
        no longer holds), an earlier specialization made under today's values, or a new one."""
        earlier = self._earlier.setdefault(key, [])
        for s in earlier:
            if guards_hold(s.guards):
                earlier.remove(s)
                break
        else:
            s = Specialization(self, target, cvals)
        if stale is not None:
            earlier.insert(0, stale)
            del earlier[8:]
        return s

    # -- inspection shortcuts -------------------------------------------------------------------
    def source(self, target=None, **constexprs) -> str:
        """The rendered C++; the compiler gets it with #line markers (``specialize().source``)."""
        from ..runtime.diagnostics import strip_line_markers
        return strip_line_markers(self.specialize(target, **constexprs).source)

    def ir(self, target=None, **constexprs) -> str:
        return str(self.specialize(target, **constexprs).function)

    def ptx(self, target=None, **constexprs) -> str:
        return self.specialize(target, **constexprs).ptx

    def sass(self, target=None, **constexprs) -> str:
        return self.specialize(target, **constexprs).sass

    def resources(self, target=None, **constexprs) -> dict:
        return self.specialize(target, **constexprs).resources

    def asm(self, target=None, **constexprs) -> str:
        return self.specialize(target, **constexprs).asm

    # -- tracing --------------------------------------------------------------------------------
    def trace(self, target, cvals) -> tuple[Function, TraceContext]:
        with self._lock:  # one rewrite for every thread (_located reads its code objects)
            if self._rewritten is None:
                self._rewritten = self._rewrite()
        state = TraceState(RT, self._rewritten.infos)
        pyfn = state.bind(self.fn, self._rewritten)
        body = Block(value_class=Val)
        builder = Builder(body, Val)
        c = TraceContext(builder, target, self.name, state.code_info)
        c.frontend = state
        state.frames.append(Frame("kernel"))
        builder.loc_fn = c.loc
        c.body = self.body
        self._check_launch_hints(target)
        params, call_args = [], []
        cit = iter(cvals)
        for p in self.params:
            if p.kind == "constexpr":
                call_args.append(next(cit))
                continue
            if p.kind == "mdiv":  # 16 bytes by value: magic, shift, divisor (lang/mdiv.py)
                v = body.add_arg(MDIV_PARAM_TYPE, p.name)
                params.append(Param(p.name, v.type, v))
                call_args.append(_MdivParam.of_param(v))
                continue
            if p.kind == "tmap":
                v = body.add_arg(self._tensor_map_type(target, p), p.name)
                params.append(Param(p.name, v.type, v))
                call_args.append(TensorMapArg(v, p.name))
                continue
            d = self._param_dtype(target, p)
            t = PointerType(d) if p.kind == "ptr" else d
            v = body.add_arg(t, p.name)
            params.append(Param(p.name, t, v))
            call_args.append(v)
        with tracing(c):
            try:
                pyfn(*call_args)
            except TraceError as e:
                raise self._located(e, e.raw_message, state) from None
            except (ScopeError, UnsupportedOnTarget) as e:
                raise self._located(e, str(e), state) from None
            except OpusError:
                raise
            except Exception as e:
                raise self._located(e, f"{type(e).__name__}: {e}", state) from e
        attrs = {"block_size": self.block, "min_blocks": self.min_blocks,
                 "maxnreg": self.maxnreg, "target": target.name, "body": self.body,
                 "dyn_smem": c.uses_dyn_smem,
                 "dyn_smem_align": c.dyn_smem_align,
                 "smem_bytes": c.smem_bytes,
                 "align": {p.name: c.align_req.get(p.value, 1) for p in params},
                 "tensor_maps": {p.name: c.tensor_maps.get(p.value) for p in params
                                 if p.type == TENSOR_MAP}}
        return Function(self.name, params, body, attrs), c

    def _check_launch_hints(self, target):
        """Occupancy and register hints the chip cannot meet: a TraceError at the def line."""
        from ..ir import Loc
        from ..targets.occupancy import launch_hints
        from ..targets.ptx_body import body_refusal
        why = body_refusal(self.body, target)
        try:
            if why is not None:
                raise UnsupportedOnTarget(why)
            launch_hints(target, self.block, self.min_blocks, self.maxnreg)
        except UnsupportedOnTarget as e:
            line = param_line(self.fn, self._source, "")  # the def line
            raise TraceError(f"@opus.kernel: {e}", Loc(self._source.filename, line),
                             self._source.line(line), self.name) from None

    def _rewrite(self):
        try:
            r = rewrite_function(self.fn, self._source, "kernel")
        except RewriteError as e:
            raise TraceError(e.raw_message, e.loc, e.source_line, self.name) from None
        register_rewritten(r)
        return r

    def _param_dtype(self, target, p):
        """Parameter p's element type on ``target``; one the target lacks is a TraceError at
        the kernel's def line."""
        try:
            return target.require_dtype(p.dtype, "pointers" if p.kind == "ptr" else "values")
        except UnsupportedOnTarget as e:
            raise _param_error(self.fn, self._source, p.name,
                               f"parameter {p.name!r}: {e}") from None

    def _tensor_map_type(self, target, p):
        """The IR type of TensorMap parameter p; a target without TMA is a TraceError at the
        kernel's def line."""
        try:
            target.require_tma(f"parameter {p.name!r}: opus.TensorMap")
        except UnsupportedOnTarget as e:
            raise _param_error(self.fn, self._source, p.name, str(e)) from None
        return TENSOR_MAP

    def _located(self, exc, message, state):
        """A TraceError at the innermost line of kernel code (the kernel's or a helper's) in
        ``exc``'s traceback, noting the calls that led there."""
        from ..ir import Loc
        calls = []  # per call of a rewritten function, outermost first: [CodeInfo, line]
        for fs, lineno in traceback.walk_tb(exc.__traceback__):
            info = state.code_info.get(fs.f_code)
            if info is None and calls:  # a function of the user's called as it is: its line
                info = plain_code_info(fs.f_code)
            if info is None:
                continue
            if info.top or not calls:
                calls.append([info, lineno])
            else:
                calls[-1][1] = lineno  # a branch or loop body of the same call
        callee = "a helper"
        # a PTX-body refusal stays one (opus.ops.gemm takes the C++ body on it)
        kind = PtxBodyRefusal if isinstance(exc, PtxBodyRefusal) else TraceError
        if isinstance(exc, RewriteError):  # a helper that cannot be rewritten: its own line
            loc, src = exc.loc, exc.source_line
        elif calls:
            info, line = calls.pop()
            loc, src = Loc(info.source.filename, line), info.source.line(line)
            callee = f"{info.kind} {info.name!r}"
        elif getattr(exc, "loc", None) is not None:
            loc, src = exc.loc, linecache.getline(exc.loc.file, exc.loc.line)
        else:
            return kind(message, kernel=self.name)
        notes = []
        for info, n in reversed(calls):  # the call chain, innermost call first
            notes.append(f"  in {callee}, called from {info.source.filename}:{n} ({info.kind} "
                         f"{info.name!r}): {info.source.line(n).strip()}")
            callee = f"{info.kind} {info.name!r}"
        return kind(message, Loc(loc.file, loc.line), src, self.name, notes)


def _check_body(body):
    """@opus.kernel's body: "cuda" (C++) or "ptx" (a PTX body in a C++ shell)."""
    from ..targets.ptx_body import BODIES
    if not isinstance(body, str) or body not in BODIES:
        raise OpusError(f"@opus.kernel(body=...) must be one of {', '.join(map(repr, BODIES))}, "
                        f"got {body!r}")


def _check_hint(name, value, lo, hi):
    """@opus.kernel's block/min_blocks/maxnreg: None or an int in lo..hi (hi None: no bound
    here; the target's range is checked when tracing for it)."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (
            hi is not None and value > hi):
        want = f"an int in {lo}..{hi}" if hi is not None else f"an int >= {lo}"
        raise OpusError(f"@opus.kernel({name}=...) must be {want}, got {value!r}")


def _hashable(x):
    try:
        hash(x)
        return True
    except TypeError:
        return False


class _gc_paused:
    """Python's cyclic garbage collector off inside (and back on after, where it was on): a
    trace allocates thousands of IR objects and none becomes garbage, so the full collections
    they trigger would only walk the process's heap (tens of ms where torch is loaded)."""

    def __enter__(self):
        self.was_on = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was_on:
            gc.enable()


class Specialization:
    """One kernel for one target and set of constexpr values: its IR, source and binaries."""

    def __init__(self, kernel, target, cvals):
        self.kernel = kernel
        self.target = target
        self.cvals = cvals
        with _gc_paused():
            self.function, ctx = kernel.trace(target, cvals)
        # the globals (and closure variables) the trace read, which must hold for it to be used
        self.guards = tuple(ctx.frontend.guards.values())
        self.align = self.function.attrs["align"]
        self.static_smem = self.function.attrs["smem_bytes"]
        self._source = None
        self._compiled = None
        # Held while compiling and while making a launch entry (launch.py), so threads asking
        # for one specialization's binary at once compile it once.
        self.lock = _thread.RLock()

    @property
    def source(self) -> str:
        if self._source is None:
            from ..codegen import render
            with _gc_paused():
                self._source = render(self.function, self.target)
        return self._source

    @property
    def symbol(self) -> str:
        """The kernel's C symbol in the compiled binary (what the runtime looks up)."""
        from ..codegen import kernel_symbol
        return kernel_symbol(self.function.name)

    @property
    def compiled(self):
        """(binary, log, compiler version) — compiled through the disk cache."""
        if self._compiled is None:
            with self.lock:
                if self._compiled is None:
                    from ..runtime.build import build
                    self._compiled = build(self.source, self.target)
        return self._compiled

    @property
    def ptx(self) -> str:
        if self.target.vendor != "nvidia":
            raise OpusError(f"PTX exists only for NVIDIA targets, not {self.target.name}")
        from ..runtime.build import build_ptx
        return build_ptx(self.source, self.target)

    @property
    def sass(self) -> str:
        if self.target.vendor != "nvidia":
            raise OpusError(f"SASS exists only for NVIDIA targets; use .asm for {self.target.name}")
        from ..runtime.inspect import sass
        return sass(self.compiled.binary)

    @property
    def resources(self) -> dict:
        from ..runtime.build import resources
        return resources(self.compiled, self.symbol, self.target)

    @property
    def asm(self) -> str:
        """AMDGCN assembly (AMD targets)."""
        if self.target.vendor != "amd":
            raise OpusError(f".asm is for AMD targets; use .sass or .ptx for {self.target.name}")
        from ..runtime.amd_build import assemble_amd
        return assemble_amd(self.source, self.target)


def kernel(fn=None, *, block=None, min_blocks=None, maxnreg=None, body="cuda"):
    """Decorate a Python function as an opus kernel: ``@opus.kernel`` or
    ``@opus.kernel(block=256, min_blocks=2)``. Parameters are annotated ``opus.Ptr[dtype]`` (global memory),
    a scalar dtype (a run-time value) or ``opus.constexpr`` (a compile-time Python value: one
    compiled kernel per distinct value).

    Launch with ``k[grid, block](*args, smem=0, stream=None)`` (grid and block: an int or a
    tuple of up to 3); inspect with ``k.source()``, ``k.ir()``, ``k.ptx()``, ``k.sass()``,
    ``k.asm()``, ``k.resources()`` (each takes ``target=`` and the constexpr values).

    :param fn: the function (given by the decorator)
    :type fn: function
    :param block: fixes the block size: launches must use it, and the compiler is told it (CUDA
        ``__launch_bounds__``, AMD ``amdgpu_flat_work_group_size``)
    :type block: int or None
    :param min_blocks: occupancy hint: at least this many blocks of ``block`` threads resident
        per SM/CU (needs ``block``). CUDA ``__launch_bounds__(block, min_blocks)``; AMD
        ``amdgpu_waves_per_eu(ceil(min_blocks * waves per block / 4))``. Either way the
        compiler caps the registers so that they fit; a count the chip cannot hold is a
        TraceError.
    :type min_blocks: int or None
    :param maxnreg: register hint: at most this many registers per thread. CUDA
        ``__maxnreg__`` (24..255; it replaces ``__launch_bounds__``, which NVRTC refuses
        beside it, so it cannot be combined with ``min_blocks``); AMD VGPRs per lane,
        architectural and accumulation together (16..512: ``amdgpu_num_vgpr(maxnreg // 2)``)
    :type maxnreg: int or None
    :param body: how an NVIDIA kernel is rendered: ``"cuda"`` (CUDA C++, the default) or
        ``"ptx"`` (PTX written from the IR inside one C++ shell, so that NVRTC's optimizer has
        nothing to do: docs/ptx_body.md). A PTX body renders the ops its table lists (targets/ptx_body.py);
        any other op is a TraceError at its line. AMD targets refuse ``"ptx"``.
    :type body: str
    :returns: the kernel (or, without ``fn``, the decorator that makes it)
    :rtype: Kernel
    :targets: all targets
    """
    if fn is None:
        return lambda f: Kernel(f, block, min_blocks, maxnreg, body)
    return Kernel(fn, block, min_blocks, maxnreg, body)
