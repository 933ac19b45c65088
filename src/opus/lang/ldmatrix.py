"""Warp-level shared-memory loads and stores with a lane layout: NVIDIA ``ldmatrix`` /
``stmatrix`` and AMD gfx950's transposing ``ds_read_b64_tr_b16/_b8``.

Each is one target instruction (a row of ``targets/nv_ldmatrix.py`` or ``targets/amd_ds_tr.py``
holding its availability, lowering, lane layout and emulation). A lane passes the element
offset of the row *it* addresses; the instruction moves the whole warp's rows at once, so every
lane of the warp must execute it. The lane layouts are in the rows' module docstrings and in
docs/layouts.md ("Transposing shared-memory loads and stores").
"""
from __future__ import annotations

from ..ir import Value, VectorType, lanes_of, scalar_of, type_str
from .context import ctx, TraceError, target_row
from .memory import _describe, _offset, _shared_pointer
from .values import emit, emit1

__all__ = ["ldmatrix", "stmatrix", "ds_read_tr"]

_NUMS = (1, 2, 4)
# where a kernel that asked for the other vendor's instruction should look
_ELSEWHERE = {
    "ldmatrix": "on AMD gfx950 the transposing LDS read is opus.ds_read_tr",
    "stmatrix": "AMD has no transposing LDS store",
    "ds_read_tr": "on NVIDIA, opus.ldmatrix(..., trans=True) is the transposing shared load",
}


def _err(msg):
    raise TraceError(msg)


def _unbounded_shared(what, smem):
    """The shared pointer of ``smem`` (an unbounded smem view or a shared pointer): these
    instructions have no bounds check, so a bounded view is refused rather than unchecked."""
    return _shared_pointer(smem, what,
                           needs="reads and writes shared memory only: it needs an smem view",
                           unbounded_because=f"{what} has no bounds check on the hardware")


def _row(family, name, what):
    """The target's row ``name``; a TraceError naming the chip and who has it otherwise."""
    return target_row(name, what, f"it is not an {ctx().target.vendor.upper()} instruction; "
                                  f"{_ELSEWHERE[family]}")


def _static_choice(what, name, value, allowed):
    if type(value) is not int or value not in allowed:
        _err(f"{what}: {name} must be one of {allowed} (compile time), got {_describe(value)}")
    return value


def _check_trans(what, trans):
    if not isinstance(trans, bool):
        _err(f"{what}: trans must be a compile-time bool, got {_describe(trans)}")
    return trans


def _check_bits(what, elem, bits):
    if elem.bits not in bits:
        sizes = " or ".join(f"{b}-bit" for b in bits)
        _err(f"{what} moves {sizes} elements: the shared memory holds {elem.name} "
             f"({elem.bits}-bit); view it with a {sizes} dtype")


def ldmatrix(smem, offset, num=4, trans=False):
    """Load ``num`` 8 x 8 matrices of 16-bit elements from shared memory into the warp's
    registers (PTX ``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``).

    Lane ``8*m + r`` (r < 8) passes the offset of row r of matrix m: 8 contiguous elements,
    16-byte aligned; the other lanes' offsets are not used. Each lane gets 2 elements per
    matrix: element ``2*m + j`` is (row lane // 4, column 2 * (lane % 4) + j) of matrix m, or
    with ``trans`` (row 2 * (lane % 4) + j, column lane // 4). Every lane of the warp must
    execute it. With ``num=4`` on a row-major 16 x 16 tile whose lane l passes row l % 16,
    column 8 * (l // 16), the result is exactly mma.sync m16n8k16's A operand
    (``opus.make_mma``'s ``coords_a``); ``num=2, trans=True`` on a row-major 16 x 8 (k x n)
    tile with lane l passing row l % 16 gives its B operand.

    :param smem: the shared memory: an unbounded smem view (opus.alloc_smem, dynamic_smem) or
        its ``.ptr``, of a 16-bit dtype (f16, bf16, i16, u16)
    :type smem: Smem or run-time shared pointer
    :param offset: element offset of the row this lane addresses
    :type offset: run-time integer value or Python int
    :param num: matrices: 1, 2 or 4
    :type num: int (compile-time)
    :param trans: load each matrix transposed
    :type trans: bool (compile-time)
    :returns: this lane's ``2 * num`` elements, of the memory's dtype
    :rtype: run-time vector
    :targets: sm_80, sm_86, sm_89, sm_90, sm_90a (NVIDIA, sm_75 or later); not on gfx942, gfx950
    """
    what = "opus.ldmatrix"
    p = _unbounded_shared(what, smem)
    _check_bits(what, p.type.elem, (16,))
    num = _static_choice(what, "num", num, _NUMS)
    tr = ".trans" if _check_trans(what, trans) else ""
    row = _row("ldmatrix", f"nv.ldmatrix.x{num}{tr}.b16", f"ldmatrix.x{num}{tr}")
    return emit1("target_op", [p, _offset(offset)], VectorType(p.type.elem, row.elems),
                 {"name": row.name})


def stmatrix(smem, offset, value, trans=False):
    """Store ``num`` 8 x 8 matrices of 16-bit elements from the warp's registers to shared
    memory (PTX ``stmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``): ldmatrix's layout
    the other way. ``num`` is the value's length / 2.

    Lane ``8*m + r`` passes the offset of row r of matrix m (8 contiguous elements, 16-byte
    aligned); each lane's element ``2*m + j`` goes to (row lane // 4, column 2 * (lane % 4) + j)
    of matrix m, or with ``trans`` (row 2 * (lane % 4) + j, column lane // 4). Every lane of
    the warp must execute it.

    :param smem: the shared memory: an unbounded smem view or its ``.ptr``, of a 16-bit dtype
    :type smem: Smem or run-time shared pointer
    :param offset: element offset of the row this lane addresses
    :type offset: run-time integer value or Python int
    :param value: this lane's 2, 4 or 8 elements, of the memory's dtype
    :type value: run-time vector
    :param trans: store each matrix transposed
    :type trans: bool (compile-time)
    :targets: sm_90, sm_90a (sm_90 or later); not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    what = "opus.stmatrix"
    p = _unbounded_shared(what, smem)
    elem = p.type.elem
    _check_bits(what, elem, (16,))
    if not (isinstance(value, Value) and isinstance(value.type, VectorType)
            and scalar_of(value.type) == elem and lanes_of(value.type) // 2 in _NUMS
            and lanes_of(value.type) % 2 == 0):
        got = type_str(value.type) if isinstance(value, Value) else _describe(value)
        _err(f"{what}: value must be a vector of 2, 4 or 8 {elem.name} (the memory's dtype; "
             f"2 per matrix), got {got}")
    num = lanes_of(value.type) // 2
    tr = ".trans" if _check_trans(what, trans) else ""
    row = _row("stmatrix", f"nv.stmatrix.x{num}{tr}.b16", f"stmatrix.x{num}{tr}")
    emit("target_op", [p, _offset(offset), value], [], {"name": row.name})


def ds_read_tr(smem, offset):
    """AMD gfx950's transposing LDS read ``ds_read_b64_tr_b16`` (16-bit elements) or
    ``ds_read_b64_tr_b8`` (8-bit): each lane reads 64 bits (N = 4 or 8 elements, 8-byte
    aligned) at its offset, and each block of 16 lanes exchanges them: with lane
    l = 16*b + N*q + e, element r of the result is element e of what lane 16*b + (16/N)*r + q
    read. Lanes that read N consecutive M values of a column-major A (or N of a row-major B)
    so receive N consecutive K values each: two 16-bit reads give a 16x16x32 MFMA's A operand.
    Every lane of the wave must execute it.

    :param smem: the shared memory: an unbounded smem view or its ``.ptr``, of a 16-bit or
        8-bit dtype
    :type smem: Smem or run-time shared pointer
    :param offset: element offset of the 64 bits this lane reads
    :type offset: run-time integer value or Python int
    :returns: this lane's N elements (4 for 16-bit, 8 for 8-bit), of the memory's dtype
    :rtype: run-time vector
    :targets: gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a, gfx942
    """
    what = "opus.ds_read_tr"
    p = _unbounded_shared(what, smem)
    elem = p.type.elem
    _check_bits(what, elem, (16, 8))
    row = _row("ds_read_tr", f"amd.ds_read_b64_tr_b{elem.bits}", f"ds_read_b64_tr_b{elem.bits}")
    return emit1("target_op", [p, _offset(offset)], VectorType(elem, row.elems), {"name": row.name})
