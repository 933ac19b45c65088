"""On-disk cache of compiled binaries, keyed by a hash of everything that shaped them.

Entry file: MAGIC | payload length (u64 LE) | sha256(payload) | payload. Readers verify all
three, so a truncated or damaged file (crash, full disk, no fsync) is a miss, never bad code.
Writers go through a temp file in the same folder and ``os.replace`` it into place, which is
atomic on POSIX: concurrent writers of one key are safe (last one wins) and readers never see
half a file. The cache is an optimisation: failing to write it warns once and carries on.
"""
from __future__ import annotations

import os
import re
import struct
import warnings

__all__ = ["cache_dir", "cache_enabled", "make_key", "DiskCache", "default_cache"]

try:  # the built-in module: hashlib would first load OpenSSL (~2 ms in a fresh process)
    from _sha2 import sha256  # Python >= 3.12
except ImportError:
    try:
        from _sha256 import sha256
    except ImportError:
        from hashlib import sha256

MAGIC = b"OPUSBIN1"
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, sha256 of payload
_KEY_RE = re.compile(r"^[0-9a-f]{16,128}$")


def cache_dir() -> str:
    """$OPUS_CACHE_DIR, else $XDG_CACHE_HOME/opus, else ~/.cache/opus."""
    explicit = os.environ.get("OPUS_CACHE_DIR")
    if explicit:
        return os.path.expanduser(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "opus")


_OFF_VALUES = ("", "0", "false", "no", "off")  # of OPUS_CACHE_DISABLE: the cache is used
_ON_VALUES = ("1", "true", "yes", "on")
_odd_values_warned = set()


def cache_enabled() -> bool:
    """False when OPUS_CACHE_DISABLE is set to 1/true/yes/on; any other non-empty value but
    0/false/no/off also disables the cache, with one warning naming it."""
    raw = os.environ.get("OPUS_CACHE_DISABLE", "")
    value = raw.strip().lower()
    if value in _OFF_VALUES:
        return True
    if value not in _ON_VALUES and raw not in _odd_values_warned:
        _odd_values_warned.add(raw)
        warnings.warn(f"opus: OPUS_CACHE_DISABLE={raw!r} is none of 1/0, true/false, yes/no, "
                      "on/off; taking it as set: the compile cache is off", RuntimeWarning,
                      stacklevel=3)
    return False


def _encode(part, out: list):
    # Type-tagged and length-prefixed so ("ab", "c") and ("a", "bc") hash differently.
    if isinstance(part, (tuple, list)):
        out.append(b"T%d:" % len(part))
        for p in part:
            _encode(p, out)
        return
    if isinstance(part, dict):
        # its own tag (not the list of its items), keys keep their types ({1: x} is not
        # {"1": x}); entries sorted by their encoding, so insertion order does not count
        entries = sorted((_encoded(k), _encoded(v)) for k, v in part.items())
        out.append(b"D%d:" % len(entries))
        for k, v in entries:
            out += (k, v)
        return
    if isinstance(part, bytes):
        tag, data = b"b", part
    elif isinstance(part, str):
        tag, data = b"s", part.encode()
    elif part is None or isinstance(part, (bool, int, float)):
        tag, data = b"r", repr(part).encode()
    else:
        raise TypeError(f"make_key: cannot hash a {type(part).__name__} canonically: {part!r}")
    out.append(b"%s%d:" % (tag, len(data)))
    out.append(data)


def _encoded(part) -> bytes:
    chunks: list = []
    _encode(part, chunks)
    return b"".join(chunks)


def make_key(*parts) -> str:
    """sha256 hex over a canonical encoding of ``parts`` (str, bytes, numbers, None, tuples,
    lists, dicts). Callers pass source, compiler version, target, options and opus version."""
    return sha256(_encoded(parts)).hexdigest()


class DiskCache:
    """Key -> bytes store under ``root`` (files at root/<key[:2]>/<key>.bin)."""

    def __init__(self, root: str | None = None):
        self.root = root if root is not None else cache_dir()
        self._warned = False

    def _path(self, key: str) -> str:
        if not _KEY_RE.match(key):
            raise ValueError(f"cache keys are lowercase hex digests (make_key), got {key!r}")
        return os.path.join(self.root, key[:2], key + ".bin")

    def get(self, key: str) -> bytes | None:
        if not cache_enabled():
            return None
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
                ident = os.fstat(f.fileno())
        except OSError:
            return None
        payload = _unpack(blob)
        if payload is None:
            _remove_if_same(path, ident)
        return payload

    def put(self, key: str, data: bytes) -> bool:
        """Store ``data``; returns False (after warning once) when the cache cannot be written."""
        if not cache_enabled():
            return False
        path = self._path(key)
        folder = os.path.dirname(path)
        tmp = None
        try:
            import tempfile  # only writers need it (~2 ms of import)
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER.pack(MAGIC, len(data), sha256(data).digest()))
                f.write(data)
            os.replace(tmp, path)
            return True
        except OSError as e:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if not self._warned:
                self._warned = True
                warnings.warn(f"opus: cannot write the compile cache in {self.root} ({e}); "
                              "kernels still compile, but are not cached (set OPUS_CACHE_DIR "
                              "or OPUS_CACHE_DISABLE=1)", RuntimeWarning, stacklevel=2)
            return False


def _unpack(blob: bytes) -> bytes | None:
    if len(blob) < _HEADER.size:
        return None
    magic, length, digest = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if magic != MAGIC or length != len(payload) or sha256(payload).digest() != digest:
        return None
    return payload


def _remove_if_same(path: str, ident: os.stat_result):
    """Drop a bad entry, unless a writer already replaced it with a fresh one."""
    try:
        now = os.stat(path)
        if (now.st_ino, now.st_dev) == (ident.st_ino, ident.st_dev):
            os.unlink(path)
    except OSError:
        pass  # someone else removed or replaced it: fine


_default = None


def default_cache() -> DiskCache:
    """The process-wide cache at cache_dir() (the directory is read when first asked for)."""
    global _default
    if _default is None or _default.root != cache_dir():
        _default = DiskCache()
    return _default
