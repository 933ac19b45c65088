import multiprocessing
import os
import subprocess
import warnings

import pytest

from opus.runtime import cache as cache_mod
from opus.runtime.cache import DiskCache, cache_dir, make_key
from cache_worker import hammer, payload, valid


@pytest.fixture
def cache(tmp_path):
    return DiskCache(str(tmp_path / "cache"))


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "x"))
    assert cache_dir() == str(tmp_path / "x")
    monkeypatch.delenv("OPUS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == str(tmp_path / "xdg" / "opus")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "opus")


def test_make_key_is_canonical():
    k = make_key("src", (13, 0), "sm_90a", ("-O3",), "0.1.0")
    assert k == make_key("src", (13, 0), "sm_90a", ("-O3",), "0.1.0")
    assert len(k) == 64 and int(k, 16) >= 0
    assert make_key("ab", "c") != make_key("a", "bc")
    assert make_key(1) != make_key("1") != make_key(1.0)
    assert make_key((1, 2)) == make_key([1, 2])
    assert make_key(b"x") != make_key("x")
    assert make_key({"b": 1, "a": 2}) == make_key({"a": 2, "b": 1})
    with pytest.raises(TypeError):
        make_key(object())


def test_hit_and_miss(cache):
    key = make_key("k")
    assert cache.get(key) is None
    assert cache.put(key, b"cubin bytes")
    assert cache.get(key) == b"cubin bytes"
    cache.put(key, b"newer")
    assert cache.get(key) == b"newer"
    assert cache.get(make_key("other")) is None
    cache.put(make_key("empty"), b"")
    assert cache.get(make_key("empty")) == b""


def test_put_leaves_no_temp_files(cache):
    key = make_key("k")
    cache.put(key, b"x" * 1000)
    folder = os.path.dirname(cache._path(key))
    assert os.listdir(folder) == [key + ".bin"]


def test_bad_keys_rejected(cache):
    with pytest.raises(ValueError):
        cache.get("../../etc/passwd")


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_damaged_entry_is_a_miss_and_rebuilt(cache, damage):
    key = make_key("k", damage)
    data = os.urandom(5000)
    cache.put(key, data)
    path = cache._path(key)
    raw = open(path, "rb").read()
    if damage == "truncate":
        raw = raw[:-100]
    elif damage == "flip":
        raw = raw[:-10] + bytes([raw[-10] ^ 0x40]) + raw[-9:]
    elif damage == "empty":
        raw = b""
    else:
        raw = b"not a cache entry at all" * 10
    with open(path, "wb") as f:
        f.write(raw)
    assert cache.get(key) is None
    assert not os.path.exists(path)  # bad entry removed
    cache.put(key, data)  # "recompile"
    assert cache.get(key) == data


def test_disable(cache, monkeypatch):
    key = make_key("k")
    cache.put(key, b"x")
    monkeypatch.setenv("OPUS_CACHE_DISABLE", "1")
    assert cache.get(key) is None
    assert cache.put(key, b"y") is False
    monkeypatch.setenv("OPUS_CACHE_DISABLE", "0")
    assert cache.get(key) == b"x"


def test_unwritable_dir_warns_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")  # a file where the cache folder should be: fails even for root
    cache = DiskCache(str(blocker / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        assert cache.put(make_key("a"), b"x") is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.put(make_key("b"), b"x") is False  # second failure: silent
    assert cache.get(make_key("a")) is None


def _make_read_only(folder):
    """Make ``folder`` unwritable for this user; returns the undo, or None if no way works.
    chmod does not stop root: as root, a read-only tmpfs mounted on it, else the immutable
    attribute (chattr +i, which root's writes also obey)."""
    if os.geteuid() != 0:
        os.chmod(folder, 0o500)
        return lambda: os.chmod(folder, 0o700)
    ways = [(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", folder], ["umount", folder]),
            (["chattr", "+i", folder], ["chattr", "-i", folder])]
    for do, undo in ways:
        try:
            if subprocess.run(do, capture_output=True).returncode == 0:
                return lambda undo=undo: subprocess.run(undo, capture_output=True, check=True)
        except OSError:  # the tool is missing
            pass
    return None


@pytest.fixture
def read_only_dir(tmp_path):
    """An existing folder that this process cannot write in, root included (checked)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    undo = _make_read_only(str(folder))
    if undo is None:
        pytest.skip("no way to make a read-only folder here (root without mount or chattr)")
    try:
        with pytest.raises(OSError):
            (folder / "probe").write_bytes(b"")
        yield folder
    finally:
        undo()


def test_read_only_dir_warns(read_only_dir):
    cache = DiskCache(str(read_only_dir))
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        assert cache.put(make_key("a"), b"x") is False
    assert cache.get(make_key("a")) is None
    assert os.listdir(read_only_dir) == []


def test_kernels_compile_under_a_read_only_cache_dir(read_only_dir, monkeypatch):
    import opus

    @opus.kernel
    def fill(x: opus.Ptr[opus.f32]):
        x[opus.thread_id_x()] = 2.5  # a kernel of its own: no other test cached it

    monkeypatch.setenv("OPUS_CACHE_DIR", str(read_only_dir))
    monkeypatch.delenv("OPUS_CACHE_DISABLE", raising=False)
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        assert fill.specialize(target="sm_90a").compiled.binary[:4] == b"\x7fELF"
    assert os.listdir(read_only_dir) == []


def test_default_cache_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "d1"))
    assert cache_mod.default_cache().root == str(tmp_path / "d1")
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "d2"))
    assert cache_mod.default_cache().root == str(tmp_path / "d2")


def test_concurrent_writers_and_readers(tmp_path):
    root = str(tmp_path / "shared")
    key = make_key("contended")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        bad = pool.map(hammer, [(root, key, w) for w in range(4)])
    assert bad == [0, 0, 0, 0]
    final = DiskCache(root).get(key)
    assert final is not None and valid(final)
    assert final in {payload(w, 49) for w in range(4)}
    folder = os.path.dirname(DiskCache(root)._path(key))
    assert os.listdir(folder) == [key + ".bin"]
