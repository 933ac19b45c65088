"""Worker for the multi-process cache test (a module of its own so spawn can import it)."""
import hashlib

from opus.runtime.cache import DiskCache


def payload(writer: int, round_: int) -> bytes:
    # Large enough that a torn write would be visible; self-describing so readers can verify.
    body = (b"%d-%d|" % (writer, round_)) * 20000
    return hashlib.sha256(body).digest() + body


def valid(data: bytes) -> bool:
    return hashlib.sha256(data[32:]).digest() == data[:32]


def hammer(args) -> int:
    """put/get the same key 50 times; returns the number of corrupt values seen (must be 0)."""
    root, key, writer = args
    cache = DiskCache(root)
    bad = 0
    for i in range(50):
        cache.put(key, payload(writer, i))
        got = cache.get(key)
        if got is None or not valid(got):
            bad += 1
    return bad
