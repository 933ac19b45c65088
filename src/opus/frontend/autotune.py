"""``opus.autotune``: the fastest of several configurations, per key, remembered on disk.

A tuned kernel or host function, called for a key it has not seen (the values of the ``key``
arguments, under the selected target), compiles every configuration in parallel threads,
times each on the GPU (device events: warm-up, then the median of repetitions, the ``restore``
arguments written back before each), keeps the fastest in memory and in a small JSON file
under the opus cache folder, and from then on launches it directly. Later processes read the
file. What else happens where:

- Interpreter (no GPU): no timing; the first configuration that runs is used (and not stored
  on disk). ``_timer=`` (an internal seam for tests) replaces the GPU timing: tuning then runs
  as on a GPU, compile phase, disk file and all, with ``_timer(config, launch)`` as the clock.
- A configuration that fails to compile or launch is skipped with its error kept; when all
  fail, AutotuneError lists each.
- A damaged or stale disk file is reported once (a RuntimeWarning naming it) and re-tuned.
- Thread safety: the compile phase relies on what the runtime guarantees (docs/design.md,
  Threads): specializations of one kernel trace one at a time under the kernel's lock, NVRTC
  and clang compile in parallel, the binary cache is safe across threads. One key is tuned by
  one thread at a time (a lock per tuned object).
"""
from __future__ import annotations

import contextvars
import os
import sys
import _thread
import warnings

from ..errors import ArgumentError, OpusError
from .kernel import Kernel
from .targeting import current_target, env_flag

__all__ = ["autotune", "AutotuneError", "TunedKernel", "TunedFunction"]

SCHEMA = "opus-autotune-1"


class AutotuneError(OpusError):
    """Every configuration failed to compile or launch; ``failures`` holds (config, stage,
    exception) for each."""

    def __init__(self, name, failures):
        self.failures = failures
        lines = [f"autotune {name!r}: all {len(failures)} configurations failed:"]
        for config, stage, exc in failures:
            text = str(exc).strip().splitlines() or [""]
            more = f" (+{len(text) - 4} lines)" if len(text) > 4 else ""
            body = "\n      ".join(text[:4])
            lines.append(f"  {config!r}: {stage} failed: {type(exc).__name__}: {body}{more}")
        super().__init__("\n".join(lines))


def autotune(configs, key=(), *, restore=(), _timer=None):
    """Tune a kernel or a host function that launches kernels: ``@opus.autotune(configs=[...],
    key=["n"])`` above ``@opus.kernel`` (or above a plain function).

    On a kernel, each configuration gives values of constexpr parameters, and the tuned kernel
    launches as the kernel does, ``tuned[grid, block](*args)``, where grid, block and ``smem=``
    may be callables of a dict of the arguments by name with the configuration's values
    (``lambda m: (m["n"] + m["BLOCK"] - 1) // m["BLOCK"]``). On a function, the configuration's entries
    are passed as keyword arguments, and the compile phase calls the function once per
    configuration in parallel threads (a warm-up that compiles what it launches; it must be
    safe to call from threads). docs/autotune.md describes the phases and the disk file.

    :param configs: candidate configurations, each a dict of parameter name -> value
    :type configs: list of dict
    :param key: names of the arguments whose values select a tuning entry; ints, floats,
        strings, dtypes and tuples count by value, arrays and tensors by shape and dtype
    :type key: str or sequence of str
    :param restore: names of arguments the launches write (outputs, accumulators): saved
        before tuning and written back before every timed run and before the real one, so a
        kernel accumulating into its output does not skew later timings or the result
    :type restore: str or sequence of str
    :param _timer: internal seam for tests: ``_timer(config, launch) -> float`` replaces the
        GPU clock (``launch()`` writes the ``restore`` arguments back and launches once with
        ``config``); the rest of tuning (parallel compile, disk file) runs as on a GPU, in the
        interpreter too
    :type _timer: callable or None
    :returns: the decorator; it returns a TunedKernel or a TunedFunction
    :rtype: function
    :targets: all targets (timing needs a GPU; the interpreter takes the first configuration
        that runs)
    """
    configs = _checked_configs(configs)
    key, restore = _names("key", key), _names("restore", restore)
    if _timer is not None and not callable(_timer):
        raise ArgumentError(f"opus.autotune: _timer must be callable, got {_timer!r}")

    def decorate(target):
        if isinstance(target, Kernel):
            return TunedKernel(target, configs, key, restore, _timer)
        if callable(target) and not isinstance(target, type):
            return TunedFunction(target, configs, key, restore, _timer)
        raise ArgumentError(f"opus.autotune decorates an @opus.kernel or a function, got "
                            f"{target!r}")
    return decorate


def _checked_configs(configs):
    if not isinstance(configs, (list, tuple)) or not configs:
        raise ArgumentError(f"opus.autotune: configs must be a non-empty list of dicts, got "
                            f"{configs!r}")
    seen = {}
    for i, c in enumerate(configs):
        if not isinstance(c, dict):
            raise ArgumentError(f"opus.autotune: configs[{i}] must be a dict of parameter "
                                f"name -> value, got {c!r}")
        bad = [k for k in c if not isinstance(k, str)]
        if bad:
            raise ArgumentError(f"opus.autotune: configs[{i}] has non-string key(s) {bad!r}")
        text = repr(_config_text(c))
        if text in seen:
            raise ArgumentError(f"opus.autotune: configs[{i}] repeats configs[{seen[text]}] "
                                f"({c!r})")
        seen[text] = i
    return tuple(dict(c) for c in configs)


def _names(what, names):
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ArgumentError(f"opus.autotune: {what} must be a parameter name or a sequence of "
                            f"them, got {names!r}")
    if len(set(names)) != len(names):
        raise ArgumentError(f"opus.autotune: {what} names a parameter twice: {list(names)!r}")
    return tuple(names)


def _config_text(config) -> list:
    """A configuration as JSON-safe text, independent of its dict order."""
    return [[k, repr(config[k])] for k in sorted(config)]


def _key_value(name, v):
    """What an argument of the key contributes: scalars, strings and dtypes by value, arrays
    and tensors by shape and dtype, tuples element by element."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, tuple):
        return tuple(_key_value(name, x) for x in v)
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return ("array", tuple(int(n) for n in v.shape), str(v.dtype))
    if type(v).__name__ in ("DType", "dtype") or type(v).__module__.startswith(("torch", "numpy")):
        return repr(v)
    raise ArgumentError(f"autotune key argument {name!r}: cannot key on a {type(v).__name__} "
                        f"({v!r}); key on ints, floats, strings, dtypes, tuples or arrays")


class _Progress:
    """One line on stderr, rewritten in place: only on a terminal, and not with
    OPUS_AUTOTUNE_QUIET=1."""

    def __init__(self, name, total):
        self.name, self.total = name, total
        quiet = env_flag("OPUS_AUTOTUNE_QUIET")  # read first: a bad value is an error anywhere
        self.on = not quiet and _stderr_is_terminal()

    def show(self, stage, done):
        if self.on:
            filled = 20 * done // self.total
            sys.stderr.write(f"\r[opus.autotune {self.name}] {stage:9} [{'#' * filled}"
                             f"{'.' * (20 - filled)}] {done}/{self.total}")
            sys.stderr.flush()

    def close(self):
        if self.on:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _stderr_is_terminal():
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


_warned_files = set()  # cache files reported as damaged or stale in this process


class _Tuner:
    """What tuned kernels and functions share: configurations, choices per (selection, key),
    the compile and timing phases, the disk file."""

    def __init__(self, name, params, tunable, configs, key, restore, timer):
        self.name, self.configs, self.key, self.restore = name, configs, key, restore
        self._timer = timer
        self._chosen = {}  # (selection key, key values) -> index into configs
        self._lock = _thread.RLock()
        for what, names in (("key", key), ("restore", restore)):
            missing = [n for n in names if n not in params]
            if missing:
                raise ArgumentError(f"opus.autotune({what}=...): {self.name!r} has no "
                                    f"parameter(s) {', '.join(missing)} (it has "
                                    f"{', '.join(params) or 'none'})")
        for i, c in enumerate(configs):
            bad = [k for k in c if k not in tunable]
            if bad:
                raise ArgumentError(f"opus.autotune: configs[{i}] sets {', '.join(bad)}, which "
                                    f"{self.name!r} cannot take from a configuration "
                                    f"({self._tunable_hint()})")
        self.tuned = frozenset(k for c in configs for k in c)
        clash = [n for n in key + restore if n in self.tuned]
        if clash:
            raise ArgumentError(f"opus.autotune: {', '.join(clash)} is set by the "
                                f"configurations, so it cannot be in key= or restore=")

    @property
    def chosen(self) -> dict:
        """This process's choices: {(target name, mode, key values): configuration}."""
        return {(s[0], s[1], kv): dict(self.configs[i]) for (s, kv), i in self._chosen.items()}

    # -- choosing ------------------------------------------------------------------------------
    def _run_tuned(self, bound, run, prepare, stream):
        """run(i) with the chosen configuration i for these arguments (``bound``: name ->
        value), tuning first when this key is new: prepare(i) compiles configuration i,
        stream() is the stream the launches go to (for the clock)."""
        sel = current_target()
        kv = tuple(_key_value(n, bound[n]) for n in self.key)
        i = self._chosen.get((sel.key, kv))
        if i is None:
            with self._lock:
                i = self._chosen.get((sel.key, kv))
                if i is None:
                    if sel.mode == "interp" and self._timer is None:
                        return self._first_that_runs(sel, kv, bound, run)
                    i = self._load(sel, kv)
                    if i is None:
                        i, times, failures = self._tune(sel, bound, run, prepare, stream)
                        self._store(sel, kv, i, times, failures)
                    self._chosen[(sel.key, kv)] = i
        return run(i)

    def _snapshots(self, bound):
        from ..runtime.timing import Snapshot
        return [Snapshot(n, bound[n]) for n in self.restore]

    def _first_that_runs(self, sel, kv, bound, run):
        """The interpreter: no clock, so the first configuration that runs is the choice."""
        snaps, failures = self._snapshots(bound), []
        try:
            for i, config in enumerate(self.configs):
                try:
                    result = run(i)
                except Exception as e:
                    failures.append((config, "launch", e))
                    for s in snaps:
                        s.restore()
                    continue
                self._chosen[(sel.key, kv)] = i
                return result
        finally:
            for s in snaps:
                s.release()
        raise AutotuneError(self.name, failures)

    def _tune(self, sel, bound, run, prepare, stream):
        progress = _Progress(self.name, len(self.configs))
        snaps = self._snapshots(bound)
        failures, times = {}, {}
        try:
            compiled = self._compile_all(prepare, failures, progress)
            for s in snaps:  # the warm-up calls of a host function may have written them
                s.restore()
            for done, i in enumerate(compiled, 1):
                try:
                    times[i] = self._time(sel, i, run, snaps, stream)
                except Exception as e:
                    failures[i] = ("launch", e)
                progress.show("timing", done)
            for s in snaps:
                s.restore()
        finally:
            progress.close()
            for s in snaps:
                s.release()
        if not times:
            raise AutotuneError(self.name, [(self.configs[i], *failures[i])
                                            for i in sorted(failures)])
        return min(times, key=lambda i: (times[i], i)), times, failures

    def _compile_all(self, prepare, failures, progress) -> list:
        """prepare(i) for every configuration in a thread pool (each in a copy of the caller's
        context: its target selection); the indices that succeeded, in order."""
        from concurrent.futures import ThreadPoolExecutor, as_completed
        workers = min(len(self.configs), max(2, os.cpu_count() or 2), 16)
        progress.show("compiling", 0)
        with ThreadPoolExecutor(workers, thread_name_prefix="opus-autotune") as pool:
            futures = {pool.submit(contextvars.copy_context().run, prepare, i): i
                       for i in range(len(self.configs))}
            for done, f in enumerate(as_completed(futures), 1):
                e = f.exception()
                if e is not None:
                    failures[futures[f]] = ("compile", e)
                progress.show("compiling", done)
        return [i for i in range(len(self.configs)) if i not in failures]

    def _time(self, sel, i, run, snaps, stream) -> float:
        def reset():
            for s in snaps:
                s.restore()
        if self._timer is not None:
            def launch():
                reset()
                return run(i)
            return float(self._timer(dict(self.configs[i]), launch))
        from ..runtime.timing import bench
        return bench(sel.target.vendor, lambda: run(i), reset, stream())

    # -- the disk file -------------------------------------------------------------------------
    def _identity(self, sel) -> dict:
        from .. import __version__
        return {"name": self.name, "source_sha256": self._source_hash(), "target":
                sel.target.name, "mode": sel.mode, "opus": __version__,
                "configs": [_config_text(c) for c in self.configs]}

    def _path(self, sel, kv):
        import json
        from ..runtime.cache import cache_dir, cache_enabled, make_key
        if not cache_enabled():
            return None, None
        ident = self._identity(sel)
        keyed = [[n, repr(v)] for n, v in zip(self.key, kv)]
        digest = make_key(json.dumps(ident, sort_keys=True), json.dumps(keyed))[:32]
        safe = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in self.name)[:60]
        path = os.path.join(cache_dir(), "autotune", f"{safe}-{digest}.json")
        return path, {"schema": SCHEMA, "identity": ident, "key": keyed}

    def _load(self, sel, kv):
        """The index stored for this key, or None (no file, or one that is damaged or stale:
        reported once per file)."""
        import json
        path, expect = self._path(sel, kv)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            return self._bad_file(path, f"cannot be read ({e})")
        try:
            data = json.loads(text)
        except ValueError as e:
            return self._bad_file(path, f"is not JSON ({e})")
        problem = _entry_problem(data, expect, self.configs)
        if problem:
            return self._bad_file(path, problem)
        return data["winner"]

    def _bad_file(self, path, why):
        if path not in _warned_files:
            _warned_files.add(path)
            warnings.warn(f"opus.autotune {self.name!r}: the cache file {path} {why}; tuning "
                          f"again and replacing it", RuntimeWarning, stacklevel=5)
        return None

    def _store(self, sel, kv, winner, times, failures):
        path, entry = self._path(sel, kv)
        if path is None:
            return
        entry.update(winner=winner, config=_config_text(self.configs[winner]),
                     times=[times.get(i) for i in range(len(self.configs))],
                     errors={str(i): f"{stage}: {type(e).__name__}: {str(e)[:300]}"
                             for i, (stage, e) in failures.items()})
        tmp = None
        try:
            import json
            import tempfile
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-",
                                       suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, indent=1)
            os.replace(tmp, path)
        except OSError as e:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            warnings.warn(f"opus.autotune {self.name!r}: cannot write {path} ({e}); the choice "
                          f"is kept for this process only", RuntimeWarning, stacklevel=5)


def _entry_problem(data, expect, configs) -> str | None:
    """Why a cache file's contents cannot be used (None if they can)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return f"is not an opus autotune entry (schema {SCHEMA})"
    for field in ("identity", "key"):
        if data.get(field) != expect[field]:
            return f"is stale (its {field} differs from this kernel's)"
    w = data.get("winner")
    if type(w) is not int or not 0 <= w < len(configs):
        return f"names no configuration (winner {w!r})"
    if data.get("config") != _config_text(configs[w]):
        return "is stale (its winning configuration is not configs[winner])"
    return None


def _file_hash(fn) -> str:
    """sha256 of the text of the file defining ``fn`` (its code when there is no file): a
    change anywhere in it, helpers included, makes earlier choices stale."""
    import hashlib
    import linecache
    lines = linecache.getlines(fn.__code__.co_filename)
    data = "".join(lines).encode() if lines else fn.__code__.co_code
    return hashlib.sha256(data).hexdigest()


class TunedKernel(_Tuner):
    """An @opus.kernel under opus.autotune: ``tuned[grid, block](*args, smem=0, stream=None)``
    where grid, block and smem may be callables of the arguments (by name, with the chosen
    configuration's values)."""

    _opus_launch_only = True

    def __init__(self, kernel, configs, key, restore, timer):
        self.kernel = kernel
        params = [p.name for p in kernel.params]
        constexprs = {p.name for p in kernel.params if p.kind == "constexpr"}
        self._tunable_hint = lambda: (f"constexpr parameters: {', '.join(sorted(constexprs))}"
                                      if constexprs else "it has no constexpr parameters")
        super().__init__(kernel.name, params, constexprs, configs, key, restore, timer)
        bad = [n for n in restore if next(p for p in kernel.params if p.name == n).kind != "ptr"]
        if bad:
            raise ArgumentError(f"opus.autotune(restore=...): {', '.join(bad)} of kernel "
                                f"{kernel.name!r} is not a pointer (opus.Ptr) parameter; restore "
                                f"names the buffers the kernel writes")

    def __repr__(self):
        return f"<opus.autotune {self.name}: {len(self.configs)} configs, key={list(self.key)}>"

    def _source_hash(self):
        return _file_hash(self.kernel.fn)

    def __getitem__(self, cfg):
        if not isinstance(cfg, tuple) or len(cfg) != 2:
            raise ArgumentError(f"launch {self.name}[grid, block](...): give both, got {cfg!r}")
        return _TunedLaunch(self, *cfg)

    def __call__(self, *args, **kw):
        raise OpusError(f"kernel {self.name!r} must be launched with a configuration: "
                        f"{self.name}[grid, block](...)")


class _TunedLaunch:
    __slots__ = ("tuned", "grid", "block")
    _opus_launch_only = True

    def __init__(self, tuned, grid, block):
        self.tuned, self.grid, self.block = tuned, grid, block

    def __call__(self, *args, smem=0, stream=None, **kw):
        t, k = self.tuned, self.tuned.kernel
        given = set(kw) | {p.name for p in k.params[:len(args)]}
        clash = sorted(given & t.tuned)
        if clash:
            raise ArgumentError(f"kernel {t.name!r}: {', '.join(clash)} is chosen by "
                                f"opus.autotune; do not pass it")
        names = [p.name for p in k.params]

        def meta(i):
            return dict(zip(names, k.bind(args, {**kw, **t.configs[i]})))

        def shape(value, i):
            return value(meta(i)) if callable(value) else value

        def run(i):
            launcher = k[shape(self.grid, i), shape(self.block, i)]
            return launcher(*args, smem=shape(smem, i), stream=stream, **kw, **t.configs[i])

        def prepare(i):
            full = k.bind(args, {**kw, **t.configs[i]})
            return k.specialization(current_target().target, k.const_key(full)).compiled

        from ..runtime.launch_plan import launch_stream
        bound = meta(0)
        return t._run_tuned(bound, run, prepare, lambda: launch_stream(stream, args))


class TunedFunction(_Tuner):
    """A host function under opus.autotune: called as the function, with the chosen
    configuration's entries added as keyword arguments."""

    def __init__(self, fn, configs, key, restore, timer):
        import inspect
        self.fn = fn
        self.signature = inspect.signature(fn)
        ps = self.signature.parameters
        params = [n for n, p in ps.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        takes_any = any(p.kind == p.VAR_KEYWORD for p in ps.values())
        keywords = {n for n, p in ps.items() if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                            p.KEYWORD_ONLY)}
        tunable = _Anything() if takes_any else keywords
        self._tunable_hint = lambda: f"keyword parameters: {', '.join(sorted(keywords)) or 'none'}"
        super().__init__(getattr(fn, "__qualname__", fn.__name__), params, tunable, configs,
                         key, restore, timer)
        self.__wrapped__, self.__doc__ = fn, fn.__doc__

    def __repr__(self):
        return f"<opus.autotune {self.name}: {len(self.configs)} configs, key={list(self.key)}>"

    def _source_hash(self):
        return _file_hash(self.fn)

    def __call__(self, *args, **kw):
        clash = sorted(set(kw) & self.tuned)
        if clash:
            raise ArgumentError(f"{self.name}: {', '.join(clash)} is chosen by opus.autotune; "
                                f"do not pass it")
        try:
            b = self.signature.bind_partial(*args, **kw)
        except TypeError as e:
            raise ArgumentError(f"{self.name}: {e}") from None
        b.apply_defaults()
        missing = [n for n in self.key + self.restore if n not in b.arguments]
        if missing:
            raise ArgumentError(f"{self.name}: missing argument(s) {', '.join(missing)} (named "
                                f"in opus.autotune's key= or restore=)")

        def run(i):
            return self.fn(*args, **kw, **self.configs[i])

        def stream():
            from ..runtime.tensor_args import stream_of
            return stream_of(list(b.arguments.values())) or 0
        return self._run_tuned(b.arguments, run, run, stream)


class _Anything:
    """Every name (a function taking **kwargs accepts any configuration entry)."""

    def __contains__(self, name):
        return True
