"""Launching: ``kernel[grid, block](*args, smem=0, stream=None)``.

The first launch of a specialization builds a launch entry (compiled, loaded, argument
checkers prepared); later launches do a dict lookup, argument checks and one driver call.

A launcher remembers, per number of positional arguments, the entry's run and the target
selection it was made under (the memo): the next such call under the same selection goes
straight to run. PyLauncher.__call__ is the rule; the C extension's LauncherBase implements
the same one (MEMO_SIZE counts, identity of the selection), and
tests/frontend/test_launch_corpus.py drives both through one script of calls.
"""
from __future__ import annotations

import functools
import numbers
import sys

from ..errors import ArgumentError, OpusError
from ..targets.limits import check_launch_shape
from .calls import guards_hold
from .targeting import current_target

__all__ = ["launcher_for", "PyLauncher", "MEMO_SIZE"]

MEMO_SIZE = 64  # calls with more positional arguments are never remembered (as in C)


def _dim3(x, what):
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        x = (int(x),)
    if not isinstance(x, (tuple, list)) or not 1 <= len(x) <= 3:
        raise ArgumentError(f"{what} must be an int or a tuple of 1 to 3 ints, got {x!r}")
    out = []
    for d in x:
        if not isinstance(d, numbers.Integral) or isinstance(d, bool) or d < 1:
            raise ArgumentError(f"{what} dimensions must be positive ints, got {x!r}")
        out.append(int(d))
    return tuple(out) + (1,) * (3 - len(out))


class _Launch:
    """What every launcher does (its state is in the subclasses' slots): check the launch
    configuration, and launch through the kernel's entries."""

    __slots__ = ()
    _opus_launch_only = True  # calls.call: kernels cannot launch kernels

    def _setup(self, kernel, cfg):
        if not isinstance(cfg, tuple) or len(cfg) != 2:
            raise ArgumentError(f"launch {kernel.name}[grid, block](...): give both, got {cfg!r}")
        self.kernel = kernel
        self.grid = _dim3(cfg[0], "grid")
        self.block = _dim3(cfg[1], "block")
        if kernel.block is not None and self.block != (kernel.block, 1, 1):
            raise ArgumentError(f"kernel {kernel.name!r} was declared with block={kernel.block}; "
                                f"launched with block={cfg[1]!r}")
        # the limits of the chip are checked per target, at the first call under each (_call)

    def _slow_call(self, *args, smem=0, stream=None, **kwargs):
        self._call(args, kwargs, smem, stream)

    def _call(self, given, kwargs, smem, stream):
        args, memoizable = self.kernel.launch_arguments(given, kwargs)
        sel = current_target()
        entry = self._entry(sel, args)
        entry.run(self, args, smem, stream)
        # Remember, per number of positional arguments that leaves every constexpr to its
        # default, the entry's run and the selection it is for: then the entry depends on the
        # selected target alone, and the next such call needs no key.
        if memoizable:
            self._remember(len(given), sel, entry.run)

    def _entry(self, sel, args):
        """The launch entry for a full argument tuple under selection ``sel``."""
        k = self.kernel
        check_shape(sel.target, k.name, self.grid, self.block)
        try:
            return k.launch_entries[k.entry_key(sel.key, args)]
        except (KeyError, TypeError):  # first launch here, or an unhashable constexpr
            return _entry_for(k, sel, args)

    def bind_entry(self, *args, **kwargs):
        """``(run, full)`` for a caller that launches this kernel many times with the same
        constexpr values under the current target selection (opus.ops' launch plans):
        ``run(self, full2, 0, None)``, where full2 is ``full`` (the call's complete argument
        tuple) with other run-time arguments in their places, launches as ``self(...)`` would
        there, without binding keywords or building the entry key per call. The entry still
        checks the run-time arguments at each launch, and the trace's guards unless every one
        reads a global of opus's own modules (a library kernel's constants and helpers, which
        opus never rebinds: top-k's 28 would cost a dict lookup each per call)."""
        args, _ = self.kernel.launch_arguments(args, kwargs)
        entry = self._entry(current_target(), args)
        if isinstance(entry, GuardedEntry) and entry.reads_only_opus():
            entry = entry.current[1]
        return entry.run, args


class PyLauncher(_Launch):
    """A kernel with its launch configuration; call it with the kernel's arguments."""

    __slots__ = ("kernel", "grid", "block", "_memo")

    def __init__(self, kernel, cfg):
        self._memo = {}  # number of positional arguments -> (selection, entry.run)
        self._setup(kernel, cfg)

    def __call__(self, *args, smem=0, stream=None, **kwargs):
        if not kwargs:
            m = self._memo.get(len(args))
            if m is not None and m[0] is current_target():
                return m[1](self, args, smem, stream)
        return self._slow_call(*args, smem=smem, stream=stream, **kwargs)

    def _remember(self, nargs, sel, run):
        if 0 <= nargs < MEMO_SIZE:
            self._memo[nargs] = (sel, run)


@functools.cache
def _c_launcher_class(fl):
    """CLauncher over the extension module ``fl`` (made once, when first needed)."""
    from . import targeting
    fl.watch_selection(targeting._selected, targeting._auto)  # read per thread in C

    class CLauncher(fl.LauncherBase, _Launch):
        """PyLauncher with its __call__ in C (opus._fastlaunch.LauncherBase): the memo hit
        costs no Python frame; everything else comes back to _slow_call."""

        __slots__ = ("kernel", "grid", "block")

        def __init__(self, kernel, cfg):
            self._setup(kernel, cfg)

    return CLauncher


def launcher_for(kernel, cfg):
    """``kernel[grid, block]``: a CLauncher where the C extension is in use, else a PyLauncher
    (decided per launcher, so OPUS_FAST_LAUNCH=0 takes effect for new ones)."""
    from .gpu_launch import fast_launch_module
    fl = fast_launch_module()
    return (_c_launcher_class(fl) if fl is not None else PyLauncher)(kernel, cfg)


_shapes_ok = set()  # (target name, grid, block) already checked


def check_shape(target, kernel_name, grid, block):
    """Refuse a grid/block the target cannot launch (targets/limits.py); every entry kind, the
    interpreter's too, goes through here first."""
    key = (target.name, grid, block)
    if key not in _shapes_ok:
        check_launch_shape(target.limits, target.name, kernel_name, grid, block)
        if len(_shapes_ok) < 4096:
            _shapes_ok.add(key)


def _entry_for(k, sel, args):
    cvals = k.const_key(args)  # raises a clear error for unhashable constexpr values
    key = k.entry_key(sel.key, args)
    entry = k.launch_entries.get(key)
    if entry is None:
        spec = k.specialization(sel.target, cvals)
        with spec.lock:  # threads launching it first at once: one entry (one module load)
            entry = k.launch_entries.get(key)
            if entry is None:
                entry = _make_entry(k, sel, spec)
                if spec.guards:  # its trace read globals: each launch checks them
                    entry = GuardedEntry(k, sel, spec, entry)
                k.launch_entries[key] = entry
    return entry


def _make_entry(k, sel, spec):
    if sel.mode == "gpu" and sel.target.vendor == "amd":
        from .hip_launch import HipEntry
        return HipEntry.load(k, spec)
    if sel.mode == "gpu":
        from .gpu_launch import GpuEntry
        return GpuEntry.load(k, spec)
    from .interp_launch import InterpEntry
    return InterpEntry(k, spec)


def _opus_globals(holder):
    """Whether ``holder`` is the globals dict of a module of the opus package."""
    name = holder.get("__name__") if type(holder) is dict else None
    if not isinstance(name, str) or name.partition(".")[0] != "opus":
        return False
    module = sys.modules.get(name)
    return module is not None and module.__dict__ is holder


class GuardedEntry:
    """The launch entry of a kernel whose trace read module globals or closure variables
    (calls.py): each launch checks that they hold what the trace saw (a dict lookup and an
    identity test each) and, when one changed, moves to the specialization for the new values
    (traced then, or made before)."""

    __slots__ = ("kernel", "sel", "cvals", "current", "entries")

    def __init__(self, kernel, sel, spec, entry):
        self.kernel, self.sel, self.cvals = kernel, sel, spec.cvals
        self.current = (spec.guards, entry)  # one attribute: threads see a matching pair
        self.entries = {spec: entry}

    def run(self, launcher, args, smem, stream):
        guards, entry = self.current
        for holder, key, value, _ in guards:  # globals unchanged: one dict lookup each
            if key is None or holder.get(key) is not value:
                if not guards_hold(guards):  # closure cells, equal values, real changes
                    entry = self._refresh()
                break
        return entry.run(launcher, args, smem, stream)

    def reads_only_opus(self):
        """Whether every guard is a global of one of opus's own modules (no closure cell)."""
        return all(key is not None and _opus_globals(holder)
                   for holder, key, _, _ in self.current[0])

    def _refresh(self):
        spec = self.kernel.specialization(self.sel.target, self.cvals)
        with spec.lock:
            entry = self.entries.get(spec)
            if entry is None:
                entry = _make_entry(self.kernel, self.sel, spec)
                if len(self.entries) >= 8:
                    self.entries.clear()
                self.entries[spec] = entry
        self.current = (spec.guards, entry)
        return entry
