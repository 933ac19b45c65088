"""opus.autotune without a GPU: the timing goes through the documented seam ``_timer`` (a fake
clock per configuration), everything else as on a GPU (parallel compile for sm_90a with NVRTC,
the disk file, restores), with launches in the interpreter. Results are checked against numpy."""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import opus
from opus.frontend import autotune as at_module


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPUS_CACHE_DISABLE", raising=False)
    at_module._warned_files.clear()
    with opus.set_target("sm_90a", interpret=True):
        yield


def make_accumulate():
    @opus.kernel
    def accumulate(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32,
                   BLOCK: opus.constexpr):
        """out += x: a kernel whose timed runs would corrupt out without restore."""
        if BLOCK == 1024:
            raise ValueError("BLOCK 1024 is refused by this kernel")
        i = opus.block_id_x() * BLOCK + opus.thread_id_x()
        if i < n:
            out[i] = out[i] + x[i]
    return accumulate


accumulate = make_accumulate()


GRID = lambda m: (m["n"] + m["BLOCK"] - 1) // m["BLOCK"]  # noqa: E731
BLOCK = lambda m: m["BLOCK"]  # noqa: E731


class FakeClock:
    """Times per BLOCK; records which configurations were timed (launching each once)."""

    def __init__(self, times):
        self.times, self.timed = times, []

    def __call__(self, config, launch):
        launch()
        self.timed.append(config["BLOCK"])
        return self.times[config["BLOCK"]]


def tuned_accumulate(clock, blocks=(64, 128, 256), kernel=accumulate):
    return opus.autotune(configs=[{"BLOCK": b} for b in blocks], key="n", restore="out",
                         _timer=clock)(kernel)


def cache_files(tmp_path):
    folder = tmp_path / "cache" / "autotune"
    return sorted(folder.glob("*.json")) if folder.exists() else []


def run_once(tuned, n=1000):
    x = np.arange(n, dtype=np.float32)
    out = np.full(n, 5.0, np.float32)
    tuned[GRID, BLOCK](x, out, n)
    return x, out


def test_fastest_wins_and_output_restored(tmp_path):
    clock = FakeClock({64: 3.0, 128: 1.0, 256: 2.0})
    tuned = tuned_accumulate(clock)
    x, out = run_once(tuned)
    assert sorted(clock.timed) == [64, 128, 256]
    assert tuned.chosen == {("sm_90a", "interp", (1000,)): {"BLOCK": 128}}
    # timed launches each added x; restore undid them: exactly one x added to the 5s
    np.testing.assert_array_equal(out, 5.0 + x)
    [f] = cache_files(tmp_path)
    data = json.loads(f.read_text())
    assert data["winner"] == 1 and data["times"] == [3.0, 1.0, 2.0]
    assert data["identity"]["target"] == "sm_90a" and data["key"] == [["n", "1000"]]


def test_without_restore_timed_runs_accumulate():
    """The control for the test above: restore is what keeps out right."""
    clock = FakeClock({64: 3.0, 128: 1.0, 256: 2.0})
    tuned = opus.autotune(configs=[{"BLOCK": b} for b in (64, 128, 256)], key="n",
                          _timer=clock)(accumulate)
    x, out = run_once(tuned)
    np.testing.assert_array_equal(out, 5.0 + 4 * x)


def test_second_call_uses_the_choice_without_timing():
    clock = FakeClock({64: 1.0, 128: 2.0, 256: 3.0})
    tuned = tuned_accumulate(clock)
    run_once(tuned)
    x, out = run_once(tuned)
    assert sorted(clock.timed) == [64, 128, 256]  # timed once, by the first call
    np.testing.assert_array_equal(out, 5.0 + x)


def test_key_separation(tmp_path):
    clock = FakeClock({64: 1.0, 128: 2.0, 256: 3.0})
    tuned = tuned_accumulate(clock)
    run_once(tuned, 1000)
    clock.times = {64: 3.0, 128: 2.0, 256: 1.0}
    x, out = run_once(tuned, 300)
    run_once(tuned, 1000)  # known: no timing
    assert len(clock.timed) == 6
    assert tuned.chosen == {("sm_90a", "interp", (1000,)): {"BLOCK": 64},
                            ("sm_90a", "interp", (300,)): {"BLOCK": 256}}
    assert len(cache_files(tmp_path)) == 2
    np.testing.assert_array_equal(out, 5.0 + x)


_MODULE = '''
import sys, numpy as np, opus

@opus.kernel
def scale(x: opus.Ptr[opus.f32], n: opus.i32, BLOCK: opus.constexpr):
    i = opus.block_id_x() * BLOCK + opus.thread_id_x()
    if i < n:
        x[i] = x[i] * 2.0

def main(times):
    def clock(config, launch):
        if times is None:
            raise AssertionError("tuned again: the disk entry was not used")
        launch()
        return times[config["BLOCK"]]
    tuned = opus.autotune(configs=[{"BLOCK": 32}, {"BLOCK": 64}, {"BLOCK": 128}], key="n",
                          restore="x", _timer=clock)(scale)
    x = np.ones(500, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        tuned[lambda m: (m["n"] + m["BLOCK"] - 1) // m["BLOCK"], lambda m: m["BLOCK"]](x, 500)
    assert (x == 2.0).all(), x
    print(tuned.chosen)
'''


def test_choice_reused_by_a_fresh_process(tmp_path):
    (tmp_path / "tuned_mod.py").write_text(_MODULE)
    env = dict(os.environ, OPUS_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]))

    def child(times):
        r = subprocess.run([sys.executable, "-c", f"import tuned_mod; tuned_mod.main({times!r})"],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout
    first = child({32: 5.0, 64: 0.5, 128: 1.0})
    assert "{'BLOCK': 64}" in first
    second = child(None)  # its clock fails if called
    assert "{'BLOCK': 64}" in second
    assert len(cache_files(tmp_path)) == 1


@pytest.mark.parametrize("content,why", [
    ("{not json", "is not JSON"),
    ("[1, 2, 3]", "not an opus autotune entry"),
    ('{"schema": "opus-autotune-1"}', "stale"),
    ("", "is not JSON"),
])
def test_corrupt_cache_file_is_reported_and_retuned(tmp_path, content, why):
    clock = FakeClock({64: 3.0, 128: 1.0, 256: 2.0})
    run_once(tuned_accumulate(clock))
    [f] = cache_files(tmp_path)
    f.write_text(content)
    clock2 = FakeClock({64: 1.0, 128: 3.0, 256: 2.0})
    fresh = tuned_accumulate(clock2)  # a new process would start like this: nothing in memory
    with pytest.warns(RuntimeWarning) as record:
        x, out = run_once(fresh)
    msgs = [str(w.message) for w in record]
    assert len(msgs) == 1 and str(f) in msgs[0] and why.lower() in msgs[0].lower(), msgs
    assert len(clock2.timed) == 3
    assert fresh.chosen[("sm_90a", "interp", (1000,))] == {"BLOCK": 64}
    assert json.loads(f.read_text())["winner"] == 0  # replaced by the new choice
    np.testing.assert_array_equal(out, 5.0 + x)


def test_tampered_winner_is_stale(tmp_path):
    clock = FakeClock({64: 3.0, 128: 1.0, 256: 2.0})
    run_once(tuned_accumulate(clock))
    [f] = cache_files(tmp_path)
    for winner in (7, "1", True):
        data = json.loads(f.read_text())
        data["winner"] = winner
        f.write_text(json.dumps(data))
        at_module._warned_files.clear()
        with pytest.warns(RuntimeWarning, match="names no configuration"):
            run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})))
    data = json.loads(f.read_text())
    data["winner"], data["config"] = 0, [["BLOCK", "128"]]
    f.write_text(json.dumps(data))
    at_module._warned_files.clear()
    with pytest.warns(RuntimeWarning, match="stale"):
        run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})))


def test_damaged_file_reported_once_per_process(tmp_path):
    run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})))
    [f] = cache_files(tmp_path)
    f.write_text("garbage")
    with pytest.warns(RuntimeWarning):
        run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})))
    f.write_text("garbage")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})))


def test_changed_configs_do_not_reuse_the_entry(tmp_path):
    run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})))
    clock = FakeClock({64: 3.0, 128: 1.0, 32: 0.5})
    tuned = tuned_accumulate(clock, blocks=(64, 128, 32))
    run_once(tuned)
    assert len(clock.timed) == 3 and len(cache_files(tmp_path)) == 2
    assert tuned.chosen[("sm_90a", "interp", (1000,))] == {"BLOCK": 32}


def test_failing_configs_are_skipped(tmp_path):
    # 1024 fails to compile (the kernel raises while tracing); 2048 compiles but cannot launch
    # (more threads per block than sm_90a allows)
    clock = FakeClock({64: 3.0, 128: 2.0, 1024: 0.1, 2048: 0.1})
    tuned = tuned_accumulate(clock, blocks=(1024, 2048, 64, 128))
    x, out = run_once(tuned)
    assert tuned.chosen[("sm_90a", "interp", (1000,))] == {"BLOCK": 128}
    assert sorted(clock.timed) == [64, 128]
    np.testing.assert_array_equal(out, 5.0 + x)
    errors = json.loads(cache_files(tmp_path)[0].read_text())["errors"]
    assert errors["0"].startswith("compile:") and "BLOCK 1024 is refused" in errors["0"]
    assert errors["1"].startswith("launch:") and "2048" in errors["1"]


def test_all_failing_raises_naming_each(tmp_path):
    tuned = tuned_accumulate(FakeClock({}), blocks=(1024, 2048))
    x = np.zeros(10, np.float32)
    with pytest.raises(opus.AutotuneError) as info:
        tuned[GRID, BLOCK](x, x.copy(), 10)
    msg = str(info.value)
    assert "all 2 configurations failed" in msg
    assert "{'BLOCK': 1024}: compile failed" in msg and "BLOCK 1024 is refused" in msg
    assert "{'BLOCK': 2048}: launch failed" in msg
    assert [c for c, _, _ in info.value.failures] == [{"BLOCK": 1024}, {"BLOCK": 2048}]
    assert cache_files(tmp_path) == []


def test_compile_phase_runs_candidates_concurrently(monkeypatch):
    """Each candidate's compile (opus.runtime.build.build) is held for 0.4 s: run one after
    the other, no two intervals would overlap."""
    from opus.runtime import build as build_module
    real, intervals, lock = build_module.build, [], threading.Lock()

    def slow_build(source, target):
        start = time.monotonic()
        time.sleep(0.4)
        result = real(source, target)
        with lock:
            intervals.append((start, time.monotonic(), threading.get_ident()))
        return result
    monkeypatch.setattr(build_module, "build", slow_build)
    tuned = tuned_accumulate(FakeClock({32: 1.0, 64: 3.0, 128: 1.5, 256: 2.0}),
                             blocks=(32, 64, 128, 256), kernel=make_accumulate())
    started = time.monotonic()
    run_once(tuned)
    assert len(intervals) >= 4
    first_end = min(end for _, end, _ in intervals)
    overlapping = [s for s, _, _ in intervals if s < first_end]
    assert len(overlapping) >= 2, intervals
    assert len({t for _, _, t in intervals}) >= 2
    assert time.monotonic() - started < 4 * 0.4 + 10  # sanity: it finished


def test_interpreter_without_clock_takes_the_first_that_runs(tmp_path):
    tuned = opus.autotune(configs=[{"BLOCK": 1024}, {"BLOCK": 128}, {"BLOCK": 64}], key="n",
                          restore="out")(accumulate)
    x, out = run_once(tuned)
    assert tuned.chosen == {("sm_90a", "interp", (1000,)): {"BLOCK": 128}}
    np.testing.assert_array_equal(out, 5.0 + x)
    assert cache_files(tmp_path) == []  # untimed choices are not stored


def test_cache_disabled_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("OPUS_CACHE_DISABLE", "1")
    clock = FakeClock({64: 3.0, 128: 1.0, 256: 2.0})
    run_once(tuned_accumulate(clock))
    assert cache_files(tmp_path) == [] and len(clock.timed) == 3


class _Terminal:
    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_bar_on_a_terminal_only(monkeypatch, capfd):
    run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})), 100)
    assert capfd.readouterr().err == ""  # not a terminal: silent
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})), 200)
    assert "[opus.autotune accumulate] compiling" in term.text and "3/3" in term.text
    assert "timing" in term.text and term.text.endswith("\n")
    term.text = ""
    monkeypatch.setenv("OPUS_AUTOTUNE_QUIET", "1")
    run_once(tuned_accumulate(FakeClock({64: 3.0, 128: 1.0, 256: 2.0})), 300)
    assert term.text == ""


def test_tuned_host_function(tmp_path):
    """A function that launches kernels: configuration entries arrive as keyword arguments;
    the key reads an array's shape and dtype."""
    calls = []

    @opus.autotune(configs=[{"block": 64}, {"block": 128}], key=("x",), restore=("out",),
                   _timer=lambda config, launch: (launch(), {64: 2.0, 128: 1.0}[config["block"]])[1])
    def add_into(x, out, *, block):
        calls.append(block)
        n = x.shape[0]
        accumulate[(n + block - 1) // block, block](x, out, n, block)
        return out

    x = np.arange(700, dtype=np.float32)
    out = np.zeros(700, np.float32)
    assert add_into(x, out) is out
    np.testing.assert_array_equal(out, x)
    # compile phase: one warm-up call each; timing: one each; then the real call
    assert sorted(calls[:2]) == [64, 128] and sorted(calls[2:4]) == [64, 128] and calls[4] == 128
    assert add_into.chosen == {("sm_90a", "interp", (("array", (700,), "float32"),)):
                               {"block": 128}}
    assert len(cache_files(tmp_path)) == 1


def test_host_function_warmups_run_in_threads_with_the_callers_target():
    seen = []

    @opus.autotune(configs=[{"v": 1}, {"v": 2}], key="n",
                   _timer=lambda config, launch: float(config["v"]))
    def f(n, *, v):
        seen.append((threading.current_thread().name, opus.current_target().mode))
        return n * v

    with opus.set_target("gfx942", interpret=True):
        assert f(10) == 10
    warmups = seen[:2]
    assert all(name.startswith("opus-autotune") for name, _ in warmups)
    assert all(mode == "interp" for _, mode in seen)
