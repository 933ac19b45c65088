"""Asynchronous copies from global to shared memory, and the waits that complete them.

Two hardware forms, one per vendor (docs/layouts.md, section 4):

* NVIDIA ``cp.async`` (``copy_async``): each thread copies 4, 8 or 16 bytes from any global
  address to any shared address; a bounded source zero-fills what lies past its bound.
* AMD ``buffer_load ... lds`` (``copy_async_lds``): the LDS destination is not per thread but one
  wave-uniform base; lane l's bytes land in slot l after it. The API takes that base, so a
  kernel cannot ask for a placement the hardware does not make.

Copies join the thread's open *group*; ``commit_async`` closes it and ``wait_async(n)`` waits until
at most the newest ``n`` committed groups are in flight (NVIDIA ``cp.async.wait_group n``; AMD
``s_waitcnt vmcnt`` counting the groups' copy instructions). A barrier does not complete a copy:
wait, then ``opus.sync_threads()`` where other threads read what this one copied.
"""
from __future__ import annotations

from ..ir import Value
from .context import ctx, TraceError
from .layout import is_layout, _add
from .memory import (Gmem, Smem, _describe, _offset, _note_alignment, _layout_offsets,
                     _issue_preds, _predicated, _is_pointer, _shared_pointer)
from .values import emit, is_static

__all__ = ["copy_async", "copy_async_lds", "commit_async", "wait_async", "s_waitcnt"]

_CACHES = ("ca", "cg")
_VMCNT_MAX = 63     # gfx9's vmcnt field (6 bits)
_LGKMCNT_MAX = 15   # gfx9's lgkmcnt field (4 bits)
_EXPCNT_MAX = 7     # gfx9's expcnt field (3 bits)


def _err(msg):
    raise TraceError(msg)


# -- operands -----------------------------------------------------------------------------------

def _shared_dst(dst, what):
    """The shared pointer of ``dst`` (an unbounded smem view or a shared pointer)."""
    return _shared_pointer(
        dst, what, needs="needs a shared-memory destination", role="destination",
        unbounded_because="make_smem(..., size); an async copy writes all of its bytes, which "
                          "no bound can cut, and the source's bound zero-fills instead",
        global_hint="global memory cannot be the destination: async copies go from global to "
                    "shared memory")


def _global_src(src, what):
    """``src`` as a gmem view (a global pointer is an unbounded one)."""
    if isinstance(src, Gmem):
        return src
    if _is_pointer(src, "global"):
        return Gmem(src)
    hint = ("; shared memory cannot be the source: async copies read global memory"
            if isinstance(src, Smem) or _is_pointer(src) else "")
    _err(f"{what} needs a global-memory source (an opus.Ptr parameter or a view from "
         f"opus.make_gmem), got {_describe(src)}{hint}")


def _same_dtype(dst_ptr, src, what):
    d, s = dst_ptr.type.elem, src.dtype
    if d != s:
        _err(f"{what} copies elements of one type: the destination holds {d.name}, the source "
             f"{s.name} (view the shared memory as {s.name}: opus.alloc_smem({s.name}, ...))")
    if d.bits % 8:
        _err(f"{what} of {d.name}: sub-byte types have no async copies")


def _positive_vec(vec, what):
    if isinstance(vec, bool) or not isinstance(vec, int) or vec < 1:
        _err(f"{what}: vec must be a positive compile-time int (elements per copy), got "
             f"{_describe(vec)}")


def _bounded_src(src, off, n, pred):
    """(pointer, offset, bound or None) of the source of one copy of ``n`` elements: a false
    ``pred`` bounds it to nothing (the copy zero-fills), as load_if does."""
    if pred is None:
        return src.ptr, off, src.size
    if is_static(pred):
        return (src.ptr, off, src.size) if pred else (src.ptr, off, 0)
    ptr, o, bound = _predicated(src, pred, off, n)
    return ptr, o, bound


def _operands(dst_ptr, dst_off, ptr, off, bound):
    ops = [dst_ptr, _offset(dst_off, "dst_off"), ptr, _offset(off, "src_off")]
    if bound is not None:
        ops.append(_offset(bound, "bound"))
    return ops


def _issue_pairs(dst_off, src_off, vec, elem, what):
    """[(dst offset, src offset, elements)] of the copies: one per call for scalar offsets;
    with two layouts one per vectorized issue (split into copies of at most 16 bytes), the
    destination's and the source's issues paired in order."""
    if is_layout(dst_off) != is_layout(src_off):
        _err(f"{what}: give both offsets as layouts (one copy per issue) or both as scalars")
    if not is_layout(src_off):
        nbytes = vec * elem.itemsize
        if nbytes <= 16:
            return [(dst_off, src_off, vec)]
        if nbytes % 16:
            _err(f"{what}: vec={vec} of {elem.name} is {nbytes} bytes, not a multiple of 16 "
                 f"(one copy moves at most 16 bytes)")
        per = 16 // elem.itemsize
        return [(_add(dst_off, i), _add(src_off, i), per) for i in range(0, vec, per)]
    dsts = _layout_offsets(dst_off, vec, elem)
    srcs = _layout_offsets(src_off, vec, elem)
    if [n for _, n in dsts] != [n for _, n in srcs]:
        _err(f"{what}: the destination layout gives {len(dsts)} copies of "
             f"{sorted({n for _, n in dsts})} elements, the source layout {len(srcs)} of "
             f"{sorted({n for _, n in srcs})}: their y (register) shapes must match")
    return [(d, s, n) for (d, _), (s, n) in zip(dsts, srcs)]


def _preds(pred, src_off, vec, elem, count):
    if pred is None:
        return [None] * count
    if is_layout(src_off):
        per = _issue_preds(pred, src_off, vec, elem)
        return per
    if callable(pred) and not isinstance(pred, Value):
        _err("a predicate function takes a layout's issue indices: with scalar offsets give "
             "pred as a bool")
    return [pred] * count


# -- NVIDIA: cp.async -----------------------------------------------------------------------------

def copy_async(dst, dst_off, src, src_off, vec=1, cache="ca", pred=None):
    """Start copying ``vec`` elements from global ``src[src_off]`` to shared ``dst[dst_off]``
    without waiting (NVIDIA ``cp.async``); the bytes land when a ``wait_async`` covers the copy.

    A bounded source (``make_gmem(ptr, n)``) copies its in-range leading elements and fills the
    rest of the copy with zeros (a copy starting before the view is all zeros); a false
    ``pred`` fills it all with zeros. Given two layouts instead of offsets, one copy per
    vectorized issue of the layouts (their y shapes must match), as ``view.load(layout)``.
    Example (double buffering): ``opus.copy_async(tile, t * 4, g, i, vec=4);
    opus.commit_async(); ...; opus.wait_async(1)``.

    :param dst: the destination: a shared-memory view (unbounded) or shared pointer
    :type dst: Smem or run-time shared pointer
    :param dst_off: destination offset in elements (aligned to the copy), or a Layout
    :type dst_off: run-time integer value or Python int or Layout
    :param src: the source: a gmem view (bounded: zero-fill past the bound) or an ``opus.Ptr``
    :type src: Gmem or run-time global pointer
    :param src_off: source offset in elements (aligned to the copy), or a Layout
    :type src_off: run-time integer value or Python int or Layout
    :param vec: elements per copy; vec * itemsize is 4, 8 or 16 bytes (a multiple of 16
        splits into 16-byte copies)
    :type vec: int (compile-time)
    :param cache: 'ca' (cache in L1 and L2) or 'cg' (L2 only; 16-byte copies only)
    :type cache: str (compile-time)
    :param pred: where false, the copy writes zeros (a bool, or with layouts a function of an
        issue's indices)
    :type pred: run-time bool or bool or callable or None
    :targets: sm_80, sm_86, sm_89, sm_90, sm_90a (cp.async, sm_80 or later); not on gfx942,
        gfx950 (AMD: opus.copy_async_lds)
    """
    what = "copy_async"
    c = ctx()
    if cache not in _CACHES:
        _err(f"{what}: cache must be 'ca' or 'cg' (the PTX cache operators), got {cache!r}")
    _positive_vec(vec, what)
    dst_ptr, src = _shared_dst(dst, what), _global_src(src, what)
    _same_dtype(dst_ptr, src, what)
    elem = src.dtype
    c.target.require_cp_async(min(vec * elem.itemsize, 16), cache)
    pairs = _issue_pairs(dst_off, src_off, vec, elem, what)
    for (d_off, s_off, n), pr in zip(pairs, _preds(pred, src_off, vec, elem, len(pairs))):
        nbytes = n * elem.itemsize
        c.target.require_cp_async(nbytes, cache)
        ptr, off, bound = _bounded_src(src, s_off, n, pr)
        _note_alignment(src.ptr, nbytes)
        emit("cp_async", _operands(dst_ptr, d_off, ptr, off, bound), [],
             {"nbytes": nbytes, "cache": cache})
        _trace_state(c).copied()


# -- AMD: buffer_load ... lds ---------------------------------------------------------------------

def lds_slot_bytes(nbytes: int) -> int:
    """Bytes of LDS one lane's buffer_load ... lds of ``nbytes`` occupies: sub-dword loads are
    written as a dword, 12-byte ones as 16 bytes."""
    return 4 if nbytes <= 4 else 16


def copy_async_lds(dst, wave_off, src, src_off, vec=1, pred=None):
    """Start a wave's copy from global memory straight into LDS (AMD ``buffer_load ... lds``):
    each lane reads ``vec`` elements at ``src[src_off]`` and lane l of the wave writes them at
    ``dst[wave_off] + l * slot`` — one slot per lane from a base the whole wave shares (the
    hardware's M0), not at an address of the thread's choosing. A slot is 4 bytes for copies
    of up to 4 bytes and 16 bytes for 12 and 16; a slot's bytes past the copy get unspecified
    values. The bytes land when a ``wait_async`` (or ``s_waitcnt(vmcnt=)``) covers the copy.

    Out-of-range source reads give zeros, as the buffer unit checks them: a negative
    ``src_off``, and with a bounded view each dword of the copy (the whole copy under 4 bytes)
    not wholly inside the bound. Given a Layout as ``src_off``, one copy per vectorized issue;
    issue k's slots start at ``wave_off + k * warp_size * slot`` (in elements).
    Example: ``opus.copy_async_lds(tile, opus.warp_id() * 64, g, i, vec=1)`` (f32: 256 bytes
    per wave).

    :param dst: the LDS destination: a shared-memory view (unbounded) or shared pointer
    :type dst: Smem or run-time shared pointer
    :param wave_off: the wave's base in elements of dst: the same in every lane of a wave
        (the interpreter checks it); lane l writes l slots after it
    :type wave_off: run-time integer value or Python int
    :param src: the source: a gmem view (bounded: the buffer range check) or an ``opus.Ptr``
    :type src: Gmem or run-time global pointer
    :param src_off: this lane's source offset in elements, or a Layout
    :type src_off: run-time integer value or Python int or Layout
    :param vec: elements per lane; vec * itemsize is 1, 2 or 4 bytes (gfx950: also 12, 16)
    :type vec: int (compile-time)
    :param pred: where false, the lane's slot gets zeros
    :type pred: run-time bool or bool or callable or None
    :targets: gfx942 (1, 2 or 4 bytes per lane), gfx950 (also 12 or 16); not on sm_80, sm_86,
        sm_89, sm_90, sm_90a (NVIDIA: opus.copy_async)
    """
    what = "copy_async_lds"
    c = ctx()
    _positive_vec(vec, what)
    dst_ptr, src = _shared_dst(dst, what), _global_src(src, what)
    _same_dtype(dst_ptr, src, what)
    elem = src.dtype
    c.target.require_lds_load(vec * elem.itemsize if vec * elem.itemsize <= 16 else 16)
    if is_layout(wave_off):
        _err(f"{what}: the LDS destination is one wave-uniform base, so wave_off is a scalar "
             f"offset, not a layout (issue k's slots follow issue k-1's)")
    if is_layout(src_off):
        copies = _layout_offsets(src_off, vec, elem)
    else:
        copies = [(src_off, vec)]
    preds = _preds(pred, src_off, vec, elem, len(copies))
    done = 0  # elements of LDS the wave's earlier copies of this call fill
    for (s_off, n), pr in zip(copies, preds):
        nbytes = n * elem.itemsize
        c.target.require_lds_load(nbytes)
        slot = lds_slot_bytes(nbytes)
        ptr, off, bound = _bounded_src(src, s_off, n, pr)
        _note_alignment(src.ptr, 4 if nbytes == 12 else nbytes)
        emit("lds_load", _operands(dst_ptr, _add(wave_off, done), ptr, off, bound), [],
             {"nbytes": nbytes})
        _trace_state(c).copied()
        done += c.target.warp_size * slot // elem.itemsize


# -- groups and waits ------------------------------------------------------------------------------

class _AsyncTrace:
    """What a trace knows of its copy groups, for AMD's wait_async: there the wait counts copy
    instructions (vmcnt), so each group must have one static count of copies, all traced in the
    region of its commit (a copy under a run-time branch or loop of its own would make the
    count a run-time value)."""

    def __init__(self):
        self.open = []       # (block, loc) of each copy since the last commit
        self.groups = []     # (copies, loc of the commit, loc of a copy outside its region)
        self.waited = None   # loc of the first wait_async that counted groups

    def copied(self):
        c = ctx()
        self.open.append((c.builder.block, c.builder.loc_fn()))

    def commit(self):
        c = ctx()
        block = c.builder.block
        stray = next((loc for b, loc in self.open if b is not block), None)
        self.groups.append((len(self.open), c.builder.loc_fn(), stray))
        self.open = []
        if self.waited is not None:
            self.copies_per_group()

    def copies_per_group(self) -> int:
        """The one count of copies every group has (a TraceError where there is none)."""
        if not self.groups:
            _err("wait_async on AMD counts the copies of committed groups (s_waitcnt vmcnt), but "
                 "no group was committed before it: call opus.commit_async() after the copies, "
                 "or wait with opus.s_waitcnt(vmcnt=...)")
        for count, loc, stray in self.groups:
            if stray is not None:
                _err(f"wait_async on AMD needs each group's count of copies at trace time; the "
                     f"copy at {_at(stray)} is in another run-time branch or loop than its "
                     f"commit_async at {_at(loc)}: commit in the same region, or wait with "
                     f"opus.s_waitcnt(vmcnt=...)")
        counts = {count for count, _, _ in self.groups}
        if len(counts) > 1:
            seen = ", ".join(f"{count} at {_at(loc)}" for count, loc, _ in self.groups[:4])
            _err(f"wait_async on AMD counts copies (s_waitcnt vmcnt), so every group needs the "
                 f"same number of copies; the groups committed have {seen}: make them equal "
                 f"(commit empty groups alike) or wait with opus.s_waitcnt(vmcnt=...)")
        return counts.pop()


def _at(loc) -> str:
    return f"line {loc.line}" if loc is not None else "an unknown line"


def _trace_state(c) -> _AsyncTrace:
    state = getattr(c, "async_copies", None)
    if state is None:
        state = c.async_copies = _AsyncTrace()
    return state


def _count(n, what, most=None):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or (most is not None and n > most):
        limit = f" up to {most}" if most is not None else ""
        _err(f"{what} must be a compile-time int >= 0{limit} (an immediate of the wait), got "
             f"{_describe(n)}")
    return n


def commit_async():
    """Close this thread's open group of async copies (NVIDIA ``cp.async.commit_group``; on AMD
    only a mark for ``wait_async``'s count).

    :targets: all targets
    """
    c = ctx()
    _trace_state(c).commit()
    emit("async_commit")


def wait_async(n=0):
    """Wait until at most the newest ``n`` committed groups of this thread's async copies are in
    flight: the others' bytes are then in shared memory for this thread (other threads read them
    after an ``opus.sync_threads()``). Copies not yet committed are not waited for.

    NVIDIA: ``cp.async.wait_group n``. AMD: ``s_waitcnt vmcnt(n * copies per group)`` (at most
    63; other vector memory instructions issued after the copies only make it wait longer), so
    every group must have the same count of copies, known while tracing.

    :param n: groups that may stay in flight (0: all complete)
    :type n: int (compile-time)
    :targets: all targets
    """
    c = ctx()
    n = _count(n, "wait_async(n): n")
    vmcnt = None
    if c.target.async_waits_count_copies:  # AMD: s_waitcnt vmcnt counts instructions
        state = _trace_state(c)
        state.waited = state.waited or c.builder.loc_fn()
        vmcnt = min(n * state.copies_per_group(), _VMCNT_MAX)
    emit("async_wait", [], [], {"groups": n, "vmcnt": vmcnt, "lgkmcnt": None})


def s_waitcnt(vmcnt=None, lgkmcnt=None, expcnt=None):
    """AMD ``s_waitcnt``: wait until at most ``vmcnt`` vector memory instructions (loads, stores,
    copies to LDS) and ``lgkmcnt`` LDS / scalar memory / message instructions of this wave are
    outstanding. None leaves a counter alone. For async copies ``vmcnt=n`` completes all but the
    newest n copy instructions (the interpreter counts only copies: other loads it completes at
    once, which on the GPU only makes the wait longer).

    :param vmcnt: vector memory instructions that may stay outstanding, 0 to 63
    :type vmcnt: int (compile-time) or None
    :param lgkmcnt: LDS, scalar memory and message instructions that may stay outstanding, 0
        to 15
    :type lgkmcnt: int (compile-time) or None
    :param expcnt: export / GDS instructions that may stay outstanding, 0 to 7 (the original's
        third argument)
    :type expcnt: int (compile-time) or None
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (NVIDIA:
        opus.wait_async)
    """
    c = ctx()
    c.target.require_s_waitcnt()
    if vmcnt is None and lgkmcnt is None and expcnt is None:
        _err("s_waitcnt needs vmcnt= or lgkmcnt= (or expcnt=): with none it waits for nothing")
    if vmcnt is not None:
        _count(vmcnt, "s_waitcnt vmcnt", _VMCNT_MAX)
    if lgkmcnt is not None:
        _count(lgkmcnt, "s_waitcnt lgkmcnt", _LGKMCNT_MAX)
    attrs = {"groups": None, "vmcnt": vmcnt, "lgkmcnt": lgkmcnt}
    if expcnt is not None:
        attrs["expcnt"] = _count(expcnt, "s_waitcnt expcnt", _EXPCNT_MAX)
    emit("async_wait", [], [], attrs)
