"""Snapshot of the generated code of every kernel the test suite specializes, for refactors
that must not change it (issue 16: "compare rendered sources before and after").

    OPUS_RENDER_SNAPSHOT=/tmp/before.json .venv/bin/python -m pytest -q -p tools.render_snapshot
    ... change the code ...
    OPUS_RENDER_SNAPSHOT=/tmp/after.json  .venv/bin/python -m pytest -q -p tools.render_snapshot
    .venv/bin/python tools/render_snapshot.py /tmp/before.json /tmp/after.json

As a pytest plugin it records every (kernel, constexpr values) the session specializes and, at
the end, renders each for sm_80, sm_90a, gfx942 and gfx950 (a target that refuses the kernel
records its error message instead). Sources are compared without the #line markers and the
Python-line comments, so a test file whose lines moved compares equal.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys

TARGETS = ("sm_80", "sm_90a", "gfx942", "gfx950")
_PY_COMMENT = re.compile(r"^\s*// \S+\.py:\d+\b")
_seen = {}  # (kernel file, kernel name, repr of constexprs) -> (kernel, cvals)


def _code_only(source: str) -> str:
    from opus.runtime.diagnostics import strip_line_markers
    return "\n".join(l for l in strip_line_markers(source).split("\n")
                     if not _PY_COMMENT.match(l))


def pytest_configure(config):
    if not os.environ.get("OPUS_RENDER_SNAPSHOT"):
        return
    from opus.frontend.kernel import Kernel
    original = Kernel.specialization

    def recording(self, target, cvals):
        key = (os.path.basename(self.fn.__code__.co_filename), self.name, repr(cvals))
        _seen.setdefault(key, (self, cvals))
        return original(self, target, cvals)
    Kernel.specialization = recording


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("OPUS_RENDER_SNAPSHOT")
    if not path:
        return
    from opus.targets import get_target
    out = {}
    for (file, name, cvals_repr), (kernel, cvals) in sorted(_seen.items(), key=lambda kv: kv[0]):
        for t in TARGETS:
            key = f"{file}:{name}|{t}|{cvals_repr}"
            try:
                spec = kernel.specialization(get_target(t), cvals)
                out[key] = hashlib.sha256(_code_only(spec.source).encode()).hexdigest()[:16]
            except Exception as e:  # refused on this target: its message is the behaviour
                out[key] = _normal(f"error {type(e).__name__}: {str(e).splitlines()[0]}")[:200]
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"\nrender snapshot: {len(_seen)} specializations x {len(TARGETS)} targets -> {path}")


_DIRS = re.compile(r"(?:/[^/\s:'\"]+)+/")  # folders of a path (temp folders differ per run)


_IDS = re.compile(r"%\d+|0x[0-9a-f]{6,}")  # SSA value numbers and object addresses


def _normal(value):
    """An error message without what differs from run to run (folders, ids, addresses)."""
    if isinstance(value, str) and value.startswith("error"):
        return _IDS.sub("#", _DIRS.sub("", value))
    return value


def _same(a, b):
    """Equal renderings; error messages equal up to the shorter one's length (snapshots cut
    messages at 200 characters, older ones before dropping folders)."""
    if isinstance(a, str) and a.startswith("error") and isinstance(b, str):
        n = min(len(a), len(b))
        return a[:n] == b[:n]
    return a == b


def compare(before_path, after_path) -> int:
    before, after = ({k: _normal(v) for k, v in json.load(open(p)).items()}
                     for p in (before_path, after_path))
    changed = sorted(k for k in before.keys() & after.keys() if not _same(before[k], after[k]))
    only_before = sorted(before.keys() - after.keys())
    only_after = sorted(after.keys() - before.keys())
    for title, keys in (("changed", changed), ("only before", only_before),
                        ("only after", only_after)):
        print(f"{title}: {len(keys)}")
        for k in keys[:50]:
            print(f"  {k}: {before.get(k)} -> {after.get(k)}")
    print(f"compared {len(before.keys() & after.keys())} renderings")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(compare(*sys.argv[1:3]))
