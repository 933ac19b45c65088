"""Threads: tracing, compiling and launching from many threads at once, and set_target per thread.

Traces run under a tiny switch interval (threads swap every microsecond) so interleavings that a
shared trace stack or a shared selection would get wrong happen on every run. Results are checked
against single-threaded runs on kernel objects of their own and against what each kernel must
contain (its constants, counted by hand)."""
import asyncio
import hashlib
import inspect
import multiprocessing
import os
import re
import sys
import threading

import numpy as np
import pytest

import opus
from opus.frontend import targeting

NTHREADS = 16


@pytest.fixture
def fast_switching():
    """Threads switch every microsecond (restored after the test)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def run_threads(n, work):
    """Run work(i) in n threads started together; returns their results, re-raises the first
    error (with the thread index)."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # reported below, in the test's thread
            errors.append((i, e))
    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        i, e = errors[0]
        raise AssertionError(f"thread {i} of {n} failed ({len(errors)} failed in all): "
                             f"{type(e).__name__}: {e}") from e
    return results


# -- tracing -------------------------------------------------------------------------------------

def make_scaled(i):
    """Kernel i: out = x, then (i % 4 + 1) times v = v * 0.5 + (C + i + 1). Kernels differ in
    length, so their traces interleave at different points."""
    @opus.kernel
    def scaled(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32, C: opus.constexpr = 0):
        t = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        if t < n:
            v = x[t]
            for _ in opus.static_ford(i % 4 + 1):
                v = v * 0.5 + float(C + i + 1)
            out[t] = v
    return scaled


def check_by_hand(i, c, source, ir):
    """What kernel i with C=c must contain: its steps, each with its constant."""
    steps, add = i % 4 + 1, float(c + i + 1)
    assert source.count("* 0x1.0000000000000p-1f)") == steps, source
    assert source.count(f"+ {add.hex()}f)") == steps, source
    assert ir.count("op='mul'") == steps + 1, ir  # + the thread index's block_id * block_dim
    assert ir.count("value=0.5}") == steps, ir
    assert ir.count(f"value={add!r}}}") == steps, ir


def ir_text(kernel, c):
    """The IR of kernel with C=c, its value ids numbered from 0 in order of appearance (ids
    come from one process-wide counter, so the same trace made later has other numbers)."""
    ids = {}
    return re.sub(r"%(\d+)", lambda m: f"%{ids.setdefault(m.group(1), len(ids))}",
                  kernel.ir("sm_90a", C=c))


def traced(kernel, c):
    return kernel.source("sm_90a", C=c), ir_text(kernel, c)


def trace_all(kernel, i, rounds):
    return [traced(kernel, c) for c in rounds]


def test_16_threads_trace_different_kernels(fast_switching):
    rounds = range(8)
    reference = [trace_all(make_scaled(i), i, rounds) for i in range(NTHREADS)]
    kernels = [make_scaled(i) for i in range(NTHREADS)]
    got = run_threads(NTHREADS, lambda i: trace_all(kernels[i], i, rounds))
    for i in range(NTHREADS):
        assert got[i] == reference[i], f"kernel {i}"
        for c, (source, ir) in zip(rounds, got[i]):
            check_by_hand(i, c, source, ir)


@pytest.mark.parametrize("which", [3, 6, 9])
def test_16_threads_trace_one_kernel(fast_switching, which):
    k, ref_kernel = make_scaled(which), make_scaled(which)
    values = range(4)
    reference = {c: traced(ref_kernel, c) for c in values}
    # every thread asks for every key, starting at a different one: several threads race for
    # each specialization, and the kernel's first rewrite too
    got = run_threads(NTHREADS, lambda i: {c: (traced(k, c), k.specialize("sm_90a", C=c))
                                           for c in (values[(i + j) % 4] for j in values)})
    for i in range(NTHREADS):
        assert {c: got[i][c][0] for c in values} == reference, f"thread {i}"
        # one Specialization per key, shared by the threads (none traced twice)
        assert all(got[i][c][1] is got[0][c][1] for c in values), f"thread {i}"
    for c in values:
        check_by_hand(which, c, *reference[c])


def make_broken():
    """A kernel that traces a while (other threads' traces interleave) before its error."""
    @opus.kernel
    def broken(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32):
        t = opus.thread_id_x()
        if t < n:
            v = x[t]
            for _ in opus.static_ford(4):
                v = v * 0.5 + 1.0
            out[t] = v + undefined_name  # noqa: F821
    return broken


def test_errors_from_racing_threads_name_the_kernel_line(fast_switching):
    broken = make_broken()  # never rewritten yet: the threads race for its first rewrite
    lines, first = inspect.getsourcelines(broken.fn)
    line = first + next(n for n, text in enumerate(lines) if "undefined_name" in text)
    where = f"{os.path.basename(__file__)}:{line}"

    def fail(i):
        with pytest.raises(opus.TraceError) as info:
            broken.source("sm_90a")
        return str(info.value)
    for msg in run_threads(NTHREADS, fail):
        assert where in msg and "undefined_name" in msg, msg


# -- set_target per thread -----------------------------------------------------------------------

def key(sel):
    return None if sel is None else sel.key


def automatic():
    return targeting._automatic()


def test_set_target_in_one_thread_is_not_seen_in_another():
    steps = threading.Barrier(2)
    seen = {}

    def first():
        opus.set_target("gfx942")
        steps.wait()  # the second thread looks now
        steps.wait()  # and has selected its own
        seen["first"] = key(opus.current_target())

    def second():
        steps.wait()
        seen["second before"] = opus.current_target()
        opus.set_target("sm_80", interpret=True)
        steps.wait()
        seen["second after"] = key(opus.current_target())
    main_before = opus.current_target()
    run_threads(2, lambda i: (first, second)[i]())
    assert seen == {"first": ("gfx942", "interp"), "second before": automatic(),
                    "second after": ("sm_80", "interp")}
    assert opus.current_target() is main_before


def test_context_manager_restores_per_thread():
    steps = threading.Barrier(2)
    names = ("sm_80", "sm_86")

    def work(i):
        """Select gfx942, then names[i] in a with; thread 0 leaves its with first."""
        seen = []
        opus.set_target("gfx942")
        with opus.set_target(names[i], interpret=True):
            steps.wait()  # both inside
            seen.append(key(opus.current_target()))
            if i == 1:
                steps.wait()  # thread 0 has left its with
                seen.append(key(opus.current_target()))  # still this thread's own
        if i == 0:
            seen.append(key(opus.current_target()))  # its gfx942 again, not thread 1's
            steps.wait()
        steps.wait()  # both have left
        seen.append(key(opus.current_target()))
        return seen
    got = run_threads(2, work)
    assert got[0] == [("sm_80", "interp"), ("gfx942", "interp"), ("gfx942", "interp")]
    assert got[1] == [("sm_86", "interp"), ("sm_86", "interp"), ("gfx942", "interp")]


def test_set_target_none_clears_only_the_callers_selection():
    steps = threading.Barrier(2)

    def work(i):
        opus.set_target(("gfx942", "sm_80")[i], interpret=True)
        steps.wait()
        if i == 0:
            opus.set_target(None)
        steps.wait()
        return opus.current_target()
    got = run_threads(2, work)
    assert got[0] is automatic()
    assert key(got[1]) == ("sm_80", "interp")


def test_threads_start_from_the_automatic_selection():
    with opus.set_target("gfx942"):
        got = run_threads(1, lambda i: opus.current_target())
        assert key(opus.current_target()) == ("gfx942", "interp")
    assert got[0] is automatic()


def test_asyncio_tasks_inherit_and_keep_their_own_selection():
    async def child(name):
        if name:
            opus.set_target(name, interpret=True)
        await asyncio.sleep(0)  # the other tasks run (and select) now
        await asyncio.sleep(0)
        return key(opus.current_target())

    async def main():
        opus.set_target("gfx942")
        got = await asyncio.gather(child(None), child("sm_80"), child("sm_86"))
        return got, key(opus.current_target())
    before = opus.current_target()
    got, after = asyncio.run(main())
    assert got == [("gfx942", "interp"), ("sm_80", "interp"), ("sm_86", "interp")]
    assert after == ("gfx942", "interp")
    assert opus.current_target() is before  # asyncio.run ran in a copy of this context


def test_set_target_none_as_a_context_manager_restores():
    with opus.set_target("gfx942"):
        with opus.set_target(None):
            assert opus.current_target() is automatic()
        assert key(opus.current_target()) == ("gfx942", "interp")


# -- launching under per-thread targets ------------------------------------------------------------

@opus.kernel
def fill_warp_size(out: opus.Ptr[opus.i32], n: opus.i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        out[i] = opus.warp_size()


def test_one_launcher_in_two_threads_launches_each_threads_target(launch_path, fast_switching):
    # warp size 32 on sm_90a, 64 on gfx942: a memo entry used for the other thread's target
    # shows as the wrong fill
    steps = threading.Barrier(2)
    launcher = fill_warp_size[1, 64]

    def work(i):
        name, want = (("sm_90a", 32), ("gfx942", 64))[i]
        opus.set_target(name, interpret=True)
        wrong = 0
        for _ in range(20):
            steps.wait()
            out = np.zeros(64, np.int32)
            launcher(out, 64)
            wrong += int((out != want).sum())
        return wrong
    assert run_threads(2, work) == [0, 0]


@pytest.mark.gpu
def test_one_launcher_on_the_gpu_in_one_thread_and_interpreted_in_another(launch_path):
    # the GPU thread fills 32 (an NVIDIA warp) on the device; the other thread, as gfx942 in
    # the interpreter, 64 into numpy: the GPU entry served to it, or the reverse, shows
    torch = pytest.importorskip("torch")
    steps = threading.Barrier(2)
    launcher = fill_warp_size[1, 64]

    def work(i):
        wrong = 0
        if i == 0:
            opus.set_target(targeting._gpu_arch(), interpret=False)
        else:
            opus.set_target("gfx942")
        for _ in range(50):
            steps.wait()
            if i == 0:
                out = torch.zeros(64, dtype=torch.int32, device="cuda")
                launcher(out, 64)
                wrong += int((out.cpu().numpy() != 32).sum())
            else:
                out = np.zeros(64, np.int32)
                launcher(out, 64)
                wrong += int((out != 64).sum())
        return wrong
    assert run_threads(2, work) == [0, 0]


def test_c_memo_is_used_only_under_its_own_selection():
    fl = pytest.importorskip("opus._fastlaunch", reason="C extension not built")
    from opus.frontend.gpu_launch import fast_launch_module
    if fast_launch_module() is None:
        pytest.skip("the C hot path is not in use")
    fl.watch_selection(targeting._selected, targeting._auto)  # as launch.py does

    class Recorder(fl.LauncherBase):
        def __init__(self):
            self.slow, self.runs = [], []

        def _slow_call(self, *args, **kwargs):
            self.slow.append(threading.get_ident())

        def run(self, launcher, args, smem, stream):
            self.runs.append(threading.get_ident())
    la = Recorder()
    with opus.set_target("gfx942") as sel:
        la._remember(1, sel, la.run)
        la(0)
    other = run_threads(1, lambda i: (la(0), threading.get_ident())[1])[0]  # automatic
    same = run_threads(1, lambda i: (opus.set_target("gfx942"), la(0),
                                     threading.get_ident())[2])[0]
    assert la.runs == [threading.get_ident(), same] and la.slow == [other]


# -- compiling from many threads and processes ------------------------------------------------------


def cache_entries(root):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files
                  if f.endswith(".bin"))


def test_16_threads_compile_different_kernels_with_nvrtc(cache_root, monkeypatch):
    kernels = [make_scaled(i) for i in range(NTHREADS)]
    built = run_threads(NTHREADS, lambda i: kernels[i].specialize("sm_90a").compiled)
    assert all(b.binary[:4] == b"\x7fELF" and not b.cached for b in built)
    assert len(cache_entries(cache_root)) == NTHREADS
    monkeypatch.setenv("OPUS_CACHE_DISABLE", "1")  # the reference: compiled alone, uncached
    for i in range(NTHREADS):
        alone = make_scaled(i).specialize("sm_90a").compiled
        assert built[i].binary == alone.binary, f"kernel {i}"


def amd_compiler_or_skip():
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:  # CI has the ziglang clang; a GPU machine may have none
        pytest.skip(str(e))


def test_16_threads_compile_different_kernels_with_clang(cache_root, monkeypatch):
    from opus.runtime.amd_build import resources_amd
    amd_compiler_or_skip()
    kernels = [make_scaled(i) for i in range(NTHREADS)]
    built = run_threads(NTHREADS, lambda i: kernels[i].specialize("gfx942").compiled)
    assert len(cache_entries(cache_root)) == NTHREADS
    monkeypatch.setenv("OPUS_CACHE_DISABLE", "1")
    for i in (0, 5, 10, 15):  # a few references compiled alone (clang is slower than NVRTC)
        assert built[i].binary == make_scaled(i).specialize("gfx942").compiled.binary
    for b in built:
        assert b.binary[:4] == b"\x7fELF" and not b.cached
        (kernel_resources,) = resources_amd(b.binary).values()
        assert kernel_resources["wave"] == 64


def test_16_threads_compile_one_specialization_once(cache_root, monkeypatch):
    from opus.runtime import nvrtc
    compiles = []
    real = nvrtc.compile_cuda

    def counted(*args, **kwargs):
        compiles.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(nvrtc, "compile_cuda", counted)
    k = make_scaled(2)
    built = run_threads(NTHREADS, lambda i: k.specialize("sm_90a", C=7).compiled)
    assert len(compiles) == 1 and len({id(b) for b in built}) == 1
    assert len(cache_entries(cache_root)) == 1


def test_8_processes_compile_one_kernel_into_one_cache(tmp_path):
    from opus.runtime.build import _unpack
    from opus.runtime.cache import DiskCache
    from thread_worker import compile_into
    root = str(tmp_path / "shared-cache")
    mp = multiprocessing.get_context("spawn")
    barrier, results = mp.Barrier(8), mp.Queue()
    procs = [mp.Process(target=compile_into, args=(root, barrier, results)) for _ in range(8)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * 8
    failed = [r for r in got if len(r) != 3]
    assert not failed, failed
    digests = {r[2] for r in got}
    assert len(digests) == 1  # every process has the same CUBIN
    entries = cache_entries(root)
    assert len(entries) == 1, entries
    folder = os.path.dirname(entries[0])
    assert os.listdir(folder) == [os.path.basename(entries[0])]  # no temp file left behind
    payload = DiskCache(root).get(os.path.basename(entries[0])[:-4])
    assert payload is not None  # magic, length and checksum verify
    binary, _, _ = _unpack(payload)
    assert hashlib.sha256(binary).hexdigest() in digests and binary[:4] == b"\x7fELF"


def test_a_processes_first_compile_is_cached_under_the_key_later_ones_use(tmp_path):
    # the compiler's identity (part of every key) must not change when NVRTC is first opened
    from thread_worker import compile_cached
    root = str(tmp_path / "cache")
    mp = multiprocessing.get_context("spawn")
    with mp.Pool(1, maxtasksperchild=1) as pool:  # a fresh process per task
        first = pool.apply(compile_cached, (root, False))   # its first compile
        later = pool.apply(compile_cached, (root, True))    # after another kernel's
        again_first = pool.apply(compile_cached, (root, False))
    assert (first, later, again_first) == (False, True, True)
