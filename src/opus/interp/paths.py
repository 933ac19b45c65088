"""Divergent paths of a block that wait for each other (warp-specialized code).

The interpreter runs a block's threads in lockstep: at a run-time ``if`` the threads of the
then-path run it, then those of the else-path run theirs. That order cannot run code whose
paths wait for each other: a producer warpgroup that waits on an mbarrier its consumers arrive
on, while the consumers (on the else-path) wait for the producer's copies. In a kernel with
mbarrier waits, the two sides of a divergent ``if`` therefore run as *paths*: coroutines (one
Python thread each, but only one runs at a time, handing over explicitly, so runs are
deterministic) that switch where a wait cannot complete yet:

* A path whose wait cannot complete lets the next path (round robin, in program order) run
  until that one finishes or waits itself; it resumes once its wait can complete.
* A ``try_wait`` that sees an incomplete phase first lets the other paths run, then looks
  again (a spin on try_wait lets them progress).
* When no path can go on, the wait is the error it always was, naming the other paths' waits.

Memory effects interleave only at these waits, which is one order the GPU may take.
"""
from __future__ import annotations

import threading

__all__ = ["Paths", "PathAborted"]


_ITS_PATHS = "its paths to end"  # what a path that forked waits for (not named in errors)


class PathAborted(BaseException):
    """Unwinds a path's thread once another path raised the run's error (not an error itself:
    BaseException, so ``except Exception`` in the interpreter lets it through)."""


class _Path:
    __slots__ = ("name", "ready", "why", "never", "done", "result", "thread")

    def __init__(self, name):
        self.name = name
        self.ready = None   # while waiting: a function telling whether the wait can complete
        self.why = None     # while waiting: what it waits for (for the deadlock message)
        self.never = None   # while waiting: the error if it never can go on
        self.done = False
        self.result = None
        self.thread = None


class Paths:
    """The paths of one launch's current block: who holds the baton, and the handing over."""

    def __init__(self):
        self.cv = threading.Condition()
        self.root = _Path("the block")
        self.paths = [self.root]
        self.current = self.root
        self.error = None  # a path's error, handed to the root, which raises it
        self.dead = False  # the run failed: every path but the root unwinds

    # -- handing over ------------------------------------------------------------------------
    def _next(self, me):
        """The first path after ``me`` (round robin) that can run, or None."""
        n = len(self.paths)
        i = self.paths.index(me)
        for k in range(1, n + 1):
            p = self.paths[(i + k) % n]
            if not p.done and (p.ready is None or p.ready()):
                return p
        return None

    def _give(self, other):
        with self.cv:
            self.current = other
            self.cv.notify_all()

    def _hand_to(self, me, other):
        """Give the baton to ``other``; return once it is back with ``me``."""
        self._give(other)
        with self.cv:
            while self.current is not me and not self.dead:
                self.cv.wait()
        if me is not self.root:
            if self.dead:
                raise PathAborted()
        elif self.error is not None:
            err, self.error = self.error, None
            self._fail(err)

    def _fail(self, err):
        """The root ends the run with ``err``; the other paths' threads unwind."""
        with self.cv:
            self.dead = True
            self.cv.notify_all()
        raise err

    def _abort(self, me, err):
        """The run failed with ``err`` on path ``me``: the root raises it."""
        if me is self.root:
            self._fail(err)
        self.error = err
        self._give(self.root)
        raise PathAborted()

    def _blocked(self, me):
        return "; ".join(f"{p.name} waits for {p.why}" for p in self.paths
                         if p is not me and not p.done and p.why not in (None, _ITS_PATHS))

    def _stuck(self, p):
        """Path p's error, naming what the other paths wait for."""
        err, blocked = p.never(), self._blocked(p)
        if blocked and err.args:
            err.args = (f"{err.args[0]}; no other path of the block can go on: {blocked}",)
        return err

    def wait(self, me, ready, why, error):
        """Path ``me`` waits until ``ready()``; ``error()`` is the exception when no path can
        run (``why``: what it waits for, named in other paths' errors)."""
        if ready():
            return
        me.ready, me.why, me.never = ready, why, error
        other = self._next(me)
        if other is None or other is me:
            err = self._stuck(me)
            me.ready = me.why = me.never = None
            self._abort(me, err)
        self._hand_to(me, other)
        me.ready = me.why = me.never = None

    def let_others_run(self, me):
        """Hand the baton round once (a try_wait that failed); True if another path ran."""
        other = self._next(me)
        if other is None or other is me:
            return False
        self._hand_to(me, other)
        return True

    # -- forking -----------------------------------------------------------------------------
    def fork(self, me, jobs):
        """Run ``jobs`` ((name, function) each) as new paths after ``me``, which waits for them
        all; returns their results in order."""
        kids = [_Path(name) for name, _ in jobs]
        at = self.paths.index(me) + 1
        self.paths[at:at] = kids
        for kid, (_, fn) in zip(kids, jobs):
            kid.thread = threading.Thread(target=self._body, args=(kid, fn), daemon=True,
                                          name=f"opus interp path {kid.name}")
            kid.thread.start()
        try:
            self.wait(me, lambda: all(k.done for k in kids), _ITS_PATHS,
                      lambda: AssertionError("a fork whose paths all ended cannot wait"))
        finally:
            for k in kids:
                if k in self.paths:
                    self.paths.remove(k)
        return [k.result for k in kids]

    def _body(self, me, fn):
        with self.cv:
            while self.current is not me and not self.dead:
                self.cv.wait()
        if self.dead:
            return
        try:
            me.result = fn(me)
        except PathAborted:
            return
        except BaseException as e:  # noqa: BLE001 - handed to the root, which raises it
            me.done = True
            try:
                self._abort(me, e)
            except PathAborted:
                return
        me.done = True
        other = self._next(me)
        if other is None:  # the rest all wait and none can complete (a parent waiting on its
            stuck = next(p for p in self.paths  # paths would be ready: it is not among them)
                         if not p.done and p.why not in (None, _ITS_PATHS))
            self.error = self._stuck(stuck)
            other = self.root
        self._give(other)
