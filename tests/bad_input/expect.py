"""Assertions shared by the bad-input suite: an error of the right type, whose message names
the problem and the user's line, and nothing written or cached wrongly.

A test marks the offending source line with a tag comment (``# ERR: <tag>``) and asks for it:

    with raises(opus.TraceError, "narrow", "opus.cast", at="store-narrow"):
        k.source(target="sm_90a")

``at=`` checks that the message contains ``<this file>:<line of the tag>``; without it the
message must still name what is wrong (every needle, case-insensitive).
"""
from __future__ import annotations

import contextlib
import inspect
import os
import re

import pytest

__all__ = ["raises", "line_of", "cache_files", "no_new_cache_files", "unchanged"]


def line_of(tag: str, file: str | None = None) -> int:
    """The line number of the line holding ``# ERR: <tag>`` in ``file`` (default: the caller's
    file). Exactly one such line must exist."""
    if file is None:
        file = inspect.stack()[1].filename
    pat = re.compile(r"#\s*ERR:\s*" + re.escape(tag) + r"\s*$")
    with open(file) as f:
        hits = [i for i, text in enumerate(f, 1) if pat.search(text.rstrip())]
    assert len(hits) == 1, f"tag {tag!r}: {len(hits)} lines in {file} (need exactly one)"
    return hits[0]


@contextlib.contextmanager
def raises(exc_type, *needles, at: str | None = None, file: str | None = None):
    """Expect ``exc_type`` whose message contains every needle (case-insensitive), and with
    ``at=tag`` the location ``<file>:<line of the tag>`` of the caller's file."""
    if at is not None and file is None:
        file = inspect.stack()[2].filename  # the test calling raises(), through contextmanager
    with pytest.raises(exc_type) as info:
        yield info
    msg = str(info.value)
    low = msg.lower()
    for n in needles:
        assert n.lower() in low, f"message does not name {n!r}:\n{msg}"
    if at is not None:
        where = f"{os.path.basename(file)}:{line_of(at, file)}"
        assert where in msg, f"message does not point at {where}:\n{msg}"


def cache_files(root) -> set:
    """Every file under the cache directory ``root``."""
    out = set()
    for d, _, files in os.walk(root):
        out.update(os.path.join(d, f) for f in files)
    return out


@contextlib.contextmanager
def no_new_cache_files(root):
    """The block leaves no new file under the cache directory ``root``."""
    before = cache_files(root)
    yield
    added = cache_files(root) - before
    assert not added, f"files written to the cache by a failing call: {sorted(added)}"


@contextlib.contextmanager
def unchanged(*arrays):
    """The block leaves the numpy arrays ``arrays`` as they were (a failed launch writes
    nothing)."""
    import numpy as np
    copies = [np.array(a, copy=True) for a in arrays]
    yield
    for i, (a, c) in enumerate(zip(arrays, copies)):
        assert np.array_equal(a.view(np.uint8), c.view(np.uint8)), f"array {i} was written"
