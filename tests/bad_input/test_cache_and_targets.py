"""Bad input to the compile cache and to target selection.

Damaged cache entries are misses: the kernel is compiled again (the same binary as a clean
compile) and the entry replaced by a valid one. A cache folder that cannot be written warns once
and kernels still compile. Unknown target names, in set_target or in OPUS_TARGET/OPUS_INTERPRET,
are clear errors naming what gave them, and leave the selection as it was. opus builtins called
outside a kernel trace say so."""
import hashlib
import os
import threading
import uuid
import warnings

import numpy as np
import pytest

import opus
from opus.frontend import targeting
from opus.runtime import cache as cache_mod

from expect import cache_files, no_new_cache_files, raises


def make_scale(factor=3.0):
    """A fresh kernel object each call: the same source (the same cache key) for one factor,
    and nothing compiled in memory yet."""
    @opus.kernel
    def scale(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32):
        i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        if i < n:
            out[i] = x[i] * factor
    return scale


def compile_fresh(target="sm_90a", factor=3.0):
    return make_scale(factor).specialize(target).compiled


def only_entry(root):
    (path,) = [p for p in cache_files(root) if p.endswith(".bin")]
    return path


def entry_payload(path):
    """The payload of the cache file at ``path`` if its header verifies, else None."""
    key = os.path.basename(path)[:-len(".bin")]
    return cache_mod.DiskCache(os.path.dirname(os.path.dirname(path))).get(key)


def envelope(payload: bytes) -> bytes:
    """A cache file with a valid header (magic, length, checksum) around ``payload``."""
    return cache_mod._HEADER.pack(cache_mod.MAGIC, len(payload),
                                  hashlib.sha256(payload).digest()) + payload


def flip_last(blob):
    return blob[:-1] + bytes([blob[-1] ^ 0xFF])


def with_length(blob, delta):
    magic, length, digest = cache_mod._HEADER.unpack_from(blob)
    return cache_mod._HEADER.pack(magic, length + delta, digest) + blob[cache_mod._HEADER.size:]


CORRUPTIONS = {
    "truncated": lambda b: b[:len(b) // 2],
    "header only": lambda b: b[:cache_mod._HEADER.size],
    "shorter than a header": lambda b: b[:5],
    "empty": lambda b: b"",
    "wrong magic": lambda b: b"OPUSBIN0" + b[8:],
    "bad checksum": flip_last,
    "length says more": lambda b: with_length(b, 1),
    "length says less": lambda b: with_length(b, -1),
    "junk appended": lambda b: b + b"junk",
    "valid envelope, empty build entry": lambda b: envelope(b""),
    "valid envelope, log past the end": lambda b: envelope(b"\x0d\0\0\0\0\0\0\0\xff\xff\xff\x7f"),
}


# -- damaged entries: recompiled and replaced ------------------------------------------------------

@pytest.mark.parametrize("damage", list(CORRUPTIONS))
def test_damaged_nvidia_entry_is_recompiled_and_replaced(cache_root, damage):
    first = compile_fresh()
    path = only_entry(cache_root)
    good = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(CORRUPTIONS[damage](good))
    again = compile_fresh()
    assert not again.cached and again.binary == first.binary  # compiled, not read from the file
    from opus.runtime.build import _unpack
    assert _unpack(entry_payload(path))[0] == first.binary  # the entry is valid again
    assert compile_fresh().cached  # and is used from now on


def amd_compiler_or_skip():
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:  # CI has the ziglang clang; a GPU machine may have none
        pytest.skip(str(e))


@pytest.mark.parametrize("damage", ["truncated", "bad checksum"])
def test_damaged_amd_entry_is_recompiled_and_replaced(cache_root, damage):
    amd_compiler_or_skip()
    first = compile_fresh("gfx942")
    path = only_entry(cache_root)
    good = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(CORRUPTIONS[damage](good))
    again = compile_fresh("gfx942")
    assert not again.cached and again.binary == first.binary
    assert entry_payload(path) == first.binary  # the entry is valid again


def test_entry_path_taken_by_a_folder_warns_once_and_compiles(cache_root):
    first = compile_fresh()
    path = only_entry(cache_root)
    os.unlink(path)
    os.makedirs(os.path.join(path, "in-the-way"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again, other = compile_fresh(), compile_fresh(factor=5.0)
    assert again.binary == first.binary and other.binary[:4] == b"\x7fELF"
    assert [str(w.message).count("cannot write the compile cache") for w in seen] == [1]
    assert os.listdir(path) == ["in-the-way"]  # untouched, and no temp file left beside it
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".part")]


def test_a_stale_temp_file_is_ignored(cache_root):
    first = compile_fresh()
    folder = os.path.dirname(only_entry(cache_root))
    with open(os.path.join(folder, ".tmp-crashed.part"), "wb") as f:
        f.write(b"half a write")
    again = compile_fresh()
    assert again.cached and again.binary == first.binary


# -- cache folders that cannot be made or written ---------------------------------------------------

def _unwritable_roots(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"not a folder")
    tag = uuid.uuid4().hex  # one DiskCache (one warning) per folder and test
    return {
        "a regular file": str(a_file),
        "below a regular file": str(a_file / "opus"),
        "in /proc": f"/proc/opus-cache-{tag}",
        "below /dev/null": f"/dev/null/opus-{tag}",
    }


@pytest.mark.parametrize("where", ["a regular file", "below a regular file", "in /proc",
                                   "below /dev/null"])
def test_unwritable_cache_dir_warns_once_and_compiles(tmp_path, monkeypatch, where):
    root = _unwritable_roots(tmp_path)[where]
    monkeypatch.setenv("OPUS_CACHE_DIR", root)
    monkeypatch.delenv("OPUS_CACHE_DISABLE", raising=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        built = [compile_fresh(factor=f) for f in (3.0, 5.0, 7.0)]
    assert all(b.binary[:4] == b"\x7fELF" and not b.cached for b in built)
    messages = [str(w.message) for w in seen]
    assert len(messages) == 1, messages
    assert "cannot write the compile cache" in messages[0] and root in messages[0]
    assert "OPUS_CACHE_DIR" in messages[0]  # says how to fix it
    if where == "a regular file":
        assert (tmp_path / "a-file").read_bytes() == b"not a folder"


# -- OPUS_CACHE_DISABLE ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_cache_disable_values_read_and_write_nothing(cache_root, monkeypatch, value):
    first = compile_fresh()  # a valid entry exists
    monkeypatch.setenv("OPUS_CACHE_DISABLE", value)
    with no_new_cache_files(cache_root):
        again = compile_fresh()
        other = compile_fresh(factor=9.0)
    assert not again.cached and again.binary == first.binary  # compiled, not read
    assert other.binary[:4] == b"\x7fELF"


@pytest.mark.parametrize("value", ["0", "false", "No", "off"])
def test_cache_enable_values_write_the_entry(cache_root, monkeypatch, value):
    monkeypatch.setenv("OPUS_CACHE_DISABLE", value)
    compile_fresh()
    assert len([p for p in cache_files(cache_root) if p.endswith(".bin")]) == 1
    assert compile_fresh().cached


@pytest.mark.parametrize("value", ["maybe", "disable please"])
def test_cache_disable_junk_warns_once_naming_the_variable(cache_root, monkeypatch, value):
    value = f"{value} {uuid.uuid4().hex[:6]}"  # warned once per value and process
    monkeypatch.setenv("OPUS_CACHE_DISABLE", value)
    with warnings.catch_warnings(record=True) as seen, no_new_cache_files(cache_root):
        warnings.simplefilter("always")
        compile_fresh()
        compile_fresh(factor=11.0)
    messages = [str(w.message) for w in seen]
    assert len(messages) == 1, messages
    assert "OPUS_CACHE_DISABLE" in messages[0] and repr(value) in messages[0]
    assert "cache is off" in messages[0]


# -- set_target ------------------------------------------------------------------------------------

@pytest.fixture
def selection_kept():
    """The test's set_target failures leave the caller's selection as it was."""
    before = opus.current_target()
    yield
    assert opus.current_target() is before


@pytest.mark.parametrize("name, needles", [
    ("sm_100", ["'sm_100'", "unknown target", "sm_90a", "gfx942"]),
    ("gfx90a", ["'gfx90a'", "unknown target", "gfx950"]),
    ("SM_90A", ["'SM_90A'", "lowercase", "did you mean 'sm_90a'"]),
    ("Gfx942", ["'Gfx942'", "did you mean 'gfx942'"]),
    ("", ["''", "set_target(None)"]),
    ("None", ["'None'", "set_target(None)"]),
    ("auto", ["'auto'", "set_target(None)"]),
])
def test_set_target_unknown_name(cache_root, selection_kept, name, needles):
    with no_new_cache_files(cache_root), raises(ValueError, "opus.set_target", *needles):
        opus.set_target(name)


@pytest.mark.parametrize("name", [42, 9.0, b"sm_90a", ("sm_90a",)])
def test_set_target_name_not_a_string(selection_kept, name):
    with raises(TypeError, "opus.set_target", "string", type(name).__name__):
        opus.set_target(name)


@pytest.mark.parametrize("interpret", ["yes", "false"])
def test_set_target_interpret_not_a_bool(selection_kept, interpret):
    with raises(TypeError, "interpret", repr(interpret)):
        opus.set_target("sm_90a", interpret=interpret)


def test_set_target_none_with_interpret(selection_kept):
    with raises(TypeError, "set_target(None)", "interpret"):
        opus.set_target(None, interpret=True)


def test_set_target_gpu_that_is_not_there(selection_kept):
    absent = next(n for n in ("gfx950", "sm_80") if n != targeting._gpu_arch())
    with raises(RuntimeError, f"no {absent} GPU found", "interpret=True"):
        opus.set_target(absent, interpret=False)


def test_set_target_failure_inside_a_with_keeps_the_outer_selection():
    with opus.set_target("gfx942"):
        with raises(ValueError, "'sm_100'"):
            with opus.set_target("sm_100"):
                pass
        assert opus.current_target().key == ("gfx942", "interp")


# -- OPUS_TARGET / OPUS_INTERPRET ------------------------------------------------------------------

@pytest.fixture
def fresh_automatic(monkeypatch):
    """The automatic selection found anew under the test's environment (it is found once per
    process), with no explicit selection in this thread; the process's one is put back after."""
    saved = list(targeting._auto)
    targeting._auto.clear()  # in place: the C launcher holds this very list
    with opus.set_target(None):
        yield monkeypatch
    targeting._auto[:] = saved


def launch_scale():
    x = np.ones(4, np.float32)
    make_scale()[1, 4](x, np.zeros(4, np.float32), 4)


@pytest.mark.parametrize("value, needles", [
    ("sm_100", ["'sm_100'"]),
    ("gfx90a", ["'gfx90a'"]),
    ("SM_90A", ["'SM_90A'", "did you mean 'sm_90a'"]),
    ("42", ["'42'"]),
])
def test_opus_target_unknown(fresh_automatic, cache_root, value, needles):
    env = fresh_automatic
    env.setenv("OPUS_INTERPRET", "1")
    env.setenv("OPUS_TARGET", value)
    with no_new_cache_files(cache_root):
        with raises(ValueError, "environment variable OPUS_TARGET", "unknown target", *needles):
            opus.current_target()
        with raises(ValueError, "OPUS_TARGET", *needles):
            launch_scale()
    env.setenv("OPUS_TARGET", "gfx942")  # fixed: found now, nothing kept from the failure
    assert opus.current_target().key == ("gfx942", "interp")


def test_opus_target_unknown_without_opus_interpret(fresh_automatic):
    fresh_automatic.delenv("OPUS_INTERPRET", raising=False)
    fresh_automatic.setenv("OPUS_TARGET", "sm_100")
    with raises(ValueError, "environment variable OPUS_TARGET", "'sm_100'"):
        opus.current_target()


@pytest.mark.parametrize("value", ["maybe", "2", "interpret"])
def test_opus_interpret_junk(fresh_automatic, cache_root, value):
    fresh_automatic.setenv("OPUS_INTERPRET", value)
    with no_new_cache_files(cache_root):
        with raises(ValueError, "environment variable OPUS_INTERPRET", repr(value), "true/false"):
            launch_scale()
    fresh_automatic.setenv("OPUS_INTERPRET", "yes")
    assert opus.current_target().mode == "interp"


def test_opus_interpret_false_does_not_force_the_interpreter(fresh_automatic):
    fresh_automatic.setenv("OPUS_INTERPRET", "false")
    fresh_automatic.delenv("OPUS_TARGET", raising=False)
    want = "gpu" if targeting._gpu_arch() else "interp"  # the hardware decides, not the variable
    assert opus.current_target().mode == want


# -- builtins outside a kernel ---------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: opus.thread_id_x(),
    lambda: opus.block_id_x(),
    lambda: opus.block_size_x(),
    lambda: opus.warp_size(),
], ids=["thread_id_x", "block_id_x", "block_size_x", "warp_size"])
def test_builtin_outside_a_kernel(cache_root, call):
    with no_new_cache_files(cache_root), raises(opus.OpusError, "only be called inside a kernel",
                                                "@opus.kernel"):
        call()


def test_make_gmem_outside_a_kernel():
    with raises(opus.TraceError, "make_gmem", "global pointer", "ndarray"):
        opus.make_gmem(np.zeros(4, np.float32), 4)


def test_exp_of_an_array_outside_a_kernel():
    with raises(opus.TraceError, "opus.exp", "number or run-time value"):
        opus.exp(np.zeros(2))


def test_kernel_called_without_a_launch_configuration(cache_root):
    k = make_scale()
    with no_new_cache_files(cache_root), raises(opus.OpusError, "scale[grid, block]"):
        k(np.zeros(4, np.float32), np.zeros(4, np.float32), 4)


def test_builtin_in_a_thread_while_another_thread_traces():
    # the trace in progress belongs to its thread: elsewhere a builtin is still outside a kernel
    inside, release = threading.Event(), threading.Event()

    def pause():
        inside.set()
        assert release.wait(30)
        return 1.0

    @opus.kernel
    def waits(out: opus.Ptr[opus.f32]):
        out[opus.thread_id_x()] = pause()
    result = {}
    tracer = threading.Thread(target=lambda: result.update(source=waits.source("sm_90a")))
    tracer.start()
    try:
        assert inside.wait(30)
        with raises(opus.OpusError, "only be called inside a kernel"):
            opus.thread_id_x()
    finally:
        release.set()
        tracer.join()
    assert "0x1.0000000000000p+0f" in result["source"]  # its trace went on unharmed
