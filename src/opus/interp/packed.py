"""Memory of the sub-byte types (fp4, fp6, int4, uint4) in the interpreter: ir/ops.py packs them
without gaps, element i at bits [i*b, (i+1)*b) of the little-endian byte stream. A packed
buffer's ``arr`` is its bytes (uint8); register values stay one code per byte (the ml_dtypes
arrays), so only loads, stores, pointer steps and bitcasts see the packing.
"""
from __future__ import annotations

import numpy as np

from .errors import MemoryFault, where

__all__ = ["read_codes", "write_codes", "check_packed_offsets", "element_bytes",
           "pack_lanes", "unpack_lanes", "pack_of", "check_pointer_step"]


def _pieces(eidx, bits):
    """(byte index, shift) of the first byte of each element, and for fields that cross into a
    second byte (fp6) the byte index of that one (None for 4-bit types: never)."""
    bit = eidx.astype(np.int64) * bits
    return bit >> 3, (bit & 7).astype(np.uint16), ((bit >> 3) + 1 if bits == 6 else None)


def read_codes(buf, eidx):
    """The codes (uint8, shape of eidx) of elements ``eidx`` (all inside the buffer)."""
    arr = buf.arr
    byte, sh, nxt = _pieces(eidx, buf.ebits)
    word = arr[byte].astype(np.uint16)
    if nxt is not None:
        hi = arr[np.minimum(nxt, arr.shape[0] - 1)].astype(np.uint16)
        word = word | (np.where(nxt < arr.shape[0], hi, 0) << 8).astype(np.uint16)
    return ((word >> sh) & ((1 << buf.ebits) - 1)).astype(np.uint8)


def write_codes(buf, eidx, codes):
    """Store codes at elements ``eidx`` (flat, all inside the buffer), leaving the other bits
    of their bytes as they were; duplicate elements: the last one wins, as in numpy."""
    arr = buf.arr
    eidx, codes = eidx.reshape(-1), np.asarray(codes).view(np.uint8).reshape(-1)
    if eidx.size == 0:
        return
    _, last = np.unique(eidx[::-1], return_index=True)  # one write per element: the last
    keep = eidx.size - 1 - last
    eidx, codes = eidx[keep], codes[keep].astype(np.uint16)
    mask = np.uint16((1 << buf.ebits) - 1)
    byte, sh, nxt = _pieces(eidx, buf.ebits)
    field = (codes & mask) << sh
    np.bitwise_and.at(arr, byte, (~(mask << sh) & 0xFF).astype(np.uint8))
    np.bitwise_or.at(arr, byte, (field & 0xFF).astype(np.uint8))
    if nxt is not None:
        cross = (sh + buf.ebits) > 8
        if cross.any():
            b2, f2 = nxt[cross], (field[cross] >> 8).astype(np.uint8)
            m2 = ((mask << sh[cross]) >> 8).astype(np.uint8)
            np.bitwise_and.at(arr, b2, ~m2)
            np.bitwise_or.at(arr, b2, f2)


def element_bytes(buf, eidx):
    """The byte(s) of each element (flat int64 arrays: byte index, element position) for the
    shared-memory checks."""
    byte, sh, _ = _pieces(eidx.reshape(-1), buf.ebits)
    last = (eidx.reshape(-1).astype(np.int64) * buf.ebits + buf.ebits - 1) >> 3
    both = last != byte
    return np.concatenate([byte, last[both]]), np.concatenate(
        [np.arange(byte.size), np.flatnonzero(both)])


def pack_of(bits) -> int:
    """Elements of ``bits`` bits in their smallest whole number of bytes (DType.pack_elems)."""
    return 2 if bits == 4 else 4


def check_packed_offsets(state, op, kind, buf, idx, lanes, vec):
    """An access of packed elements starts a byte and is aligned as ir/ops.py says: the
    element offset a multiple of ``pack`` and the address of its bytes aligned to the largest
    power of two dividing their count. ``idx`` [T] first elements, ``lanes`` the lanes that
    access (None: all)."""
    bits = buf.ebits
    pack = pack_of(bits)
    nbytes = vec * bits // 8
    align = nbytes & -nbytes
    first = np.asarray(idx, np.int64)
    bad = (first % pack) != 0
    byte_addr = buf.addr + (first * bits >> 3)
    bad = bad | ((byte_addr % align) != 0)
    if lanes is not None:
        bad = bad & lanes
    if bad.any():
        k = int(np.argmax(bad))
        i = int(np.broadcast_to(first, bad.shape)[k])
        rule = (f"element offset {i} does not start a byte ({buf.ebits}-bit elements come "
                f"{pack} to {pack * bits // 8} byte{'s' if pack > 2 else ''})" if i % pack else
                f"its {nbytes}-byte access is not {align}-byte aligned")
        raise MemoryFault(f"{where(op.loc)}: misaligned {vec}-element {kind} of "
                          f"{buf.name}[{i}] by {state.who(k)}: {rule}")


def check_pointer_step(state, op, off, pack, elem_name):
    """A pointer into packed memory moves by whole bytes: ``off`` [T] a multiple of ``pack``."""
    bad = (np.asarray(off, np.int64) % pack) != 0
    if state.mask is not None and bad.shape == state.mask.shape:
        bad = bad & state.mask
    if bad.any():
        k = int(np.argmax(bad))
        raise MemoryFault(f"{where(op.loc)}: pointer step of {int(np.asarray(off).reshape(-1)[k])} "
                          f"{elem_name} elements by {state.who(k if bad.size > 1 else 0)} does "
                          f"not land on a byte: {elem_name} is packed {pack} to whole bytes, so "
                          f"pointer steps are multiples of {pack}")


def pack_lanes(x, bits):
    """Register vectors [T, n] of codes (any 1-byte dtype) as their packed bytes [T, n*bits/8]."""
    from ..host_types import codes_to_bytes
    return codes_to_bytes(x.view(np.uint8) & np.uint8((1 << bits) - 1), bits)


def unpack_lanes(data, bits, nd):
    """Packed bytes [T, m] as register vectors [T, m*8/bits] of dtype ``nd`` (codes)."""
    from ..host_types import bytes_to_codes
    return np.ascontiguousarray(bytes_to_codes(data, bits)).view(nd)
