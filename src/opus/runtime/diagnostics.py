"""Compiler diagnostics on generated source, located at the kernel's Python lines.

Rendered kernels carry ``#line <n> "<file.py>"`` markers (codegen/cemit.py) so the device
compiler attributes each generated line to the Python line it comes from. Without the markers
the text is what ``kernel.source()`` shows; a compiler log on that text names generated lines,
and ``located_report`` adds to each of them the Python file:line and the generated line itself.
"""
from __future__ import annotations

import re

__all__ = ["strip_line_markers", "line_origins", "located_report", "log_without_markers"]

_MARKER = re.compile(r'^[ \t]*#line[ \t]+(\d+)(?:[ \t]+"((?:[^"\\]|\\.)*)")?[ \t]*$')
_ESCAPE = re.compile(r"\\([0-7]{1,3}|.)")


def _unescape(body: str) -> str:
    """A C string literal's body (as cemit writes file names) back to text."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)) if m.group(1)[0] in "01234567"
                       else m.group(1), body)


def strip_line_markers(source: str) -> str:
    """``source`` without its ``#line`` markers."""
    if "#line" not in source:
        return source
    kept = [l for l in source.split("\n") if not _MARKER.match(l)]
    return "\n".join(kept)


def log_without_markers(source: str, log: str, compile_text) -> str:
    """The log to report for a failed compile of ``source`` (whose log is ``log``). A log on
    marked text names Python lines only (and clang shows Python text as if it were C), so the
    text without markers is compiled once more, only on this failure path:
    ``compile_text(text)`` gives its log, or None when it compiles."""
    plain = strip_line_markers(source)
    if plain != source:
        plain_log = compile_text(plain)
        if plain_log is not None:
            return plain_log
    return log


def line_origins(source: str) -> list:
    """For each line of ``strip_line_markers(source)``: the (file, line) the compiler
    attributes it to in ``source``, or None before the first marker."""
    out, file, next_no = [], None, None
    for text in source.split("\n"):
        m = _MARKER.match(text)
        if m:
            next_no = int(m.group(1))
            if m.group(2) is not None:
                file = _unescape(m.group(2))
            continue
        out.append(None if next_no is None else (file, next_no))
        if next_no is not None:
            next_no += 1
    return out


def located_report(header: str, source: str, log: str, where: str, name: str,
                   context: int = 2, most: int = 10) -> str:
    """``header``, the compiler ``log`` (of the marker-free text) whose lines naming a generated
    line start with that line's Python ``file:line``, then the first ``most`` generated lines
    it names with ``context`` lines around them. ``where``: a regex whose group 1 is the
    generated line number in the log's locations; ``name``: how the report calls the text."""
    lines = strip_line_markers(source).split("\n")
    origins = line_origins(source)
    loc_re = re.compile(where)

    def origin(n):
        o = origins[n - 1] if 1 <= n <= len(origins) else None
        return None if o is None else f"{o[0]}:{o[1]}"

    parts, named = [header], []
    for text in log.splitlines():
        m = loc_re.search(text)
        n = int(m.group(1)) if m else 0
        if 1 <= n <= len(lines):
            if n not in named:
                named.append(n)
            if origin(n):
                text = f"{origin(n)}: {text}"
        parts.append(text)
    width = len(str(len(lines)))
    for n in sorted(named[:most]):  # the first few errors are the useful ones
        parts.append(f"\n{name}, line {n}" + (f" (from {origin(n)}):" if origin(n) else ":"))
        for k in range(max(1, n - context), min(len(lines), n + context) + 1):
            parts.append(f"{'>' if k == n else ' '} {k:>{width}} | {lines[k - 1]}")
    return "\n".join(parts)
