"""Warp-level shared-memory accesses with a lane layout (ldmatrix, stmatrix, ds_read_b64_tr_*),
vendor-neutral: the row, its self-check and the one emulation.

Every such instruction is, per warp, a set of *address lanes* each naming one contiguous row of
``vec`` elements in shared memory, and a fixed permutation between those rows and the lanes'
register vectors: register element ``i`` of lane ``l`` is element ``e`` of the row that lane
``s`` addresses, ``(s, e) = source(l, i)``. A load gathers the rows and distributes them so; a
store is the inverse. The vendor files (``nv_ldmatrix.py``, ``amd_ds_tr.py``) hold the rows, the
``source`` rule of each family (transcribed from the PTX ISA / CDNA4 ISA) and the lowering.

    field       meaning                                            checked at construction
    ----------  -------------------------------------------------  ------------------------------
    name        IR key, e.g. 'nv.ldmatrix.x4.trans.b16'            a non-empty string
    family      the language function that issues it               'ldmatrix', 'stmatrix', ...
    kind        'load' (shared -> registers) or 'store'            one of the two
    bits        element size in bits (16: any 2-byte type)         8 or 16
    warp        lanes that execute it together (32, 64)            positive
    rows        address lanes: lanes 0 .. rows-1 of each warp      1 .. warp
    vec         elements of one row (a rows' bytes are contiguous  rows*vec == warp*elems
                and vec*bits/8-aligned)
    elems       register elements of each lane
    source      fn(lane, i) -> (address lane, element of its row)  a bijection onto the rows
    available   predicate target -> bool (base.Since / OnlyOn)     callable
    requires    the chips that have it, in words ('sm_90 or later') a non-empty string
    lowering    {backend: fn(row, operands, results, attrs)         backends 'cuda' / 'hip'
                 -> C lines}
    isa         the instruction as the compiler prints it          a non-empty string

IR: a ``target_op`` naming the row; operands ``p`` (a shared pointer), ``off`` (the element
offset of the row this lane addresses; ignored in lanes >= rows) and, for a store, the register
vector; a load returns the register vector (ir/ops.py, target_op).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .base import Instruction

__all__ = ["WarpAccess", "access_table"]

_BACKENDS = ("cuda", "hip")
_KINDS = ("load", "store")


@dataclass(frozen=True, eq=False)
class WarpAccess(Instruction):
    """One warp-level shared-memory access with a lane layout (fields: the module docstring)."""
    name: str
    family: str
    kind: str
    bits: int
    warp: int
    rows: int
    vec: int
    elems: int
    source: Callable
    available: Callable
    requires: str
    lowering: dict
    isa: str

    def __post_init__(self):
        self._check_fields()
        self._check_bijection()
        object.__setattr__(self, "lower", {b: _bound(fn, self) for b, fn in self.lowering.items()})
        object.__setattr__(self, "doc", self.isa)
        object.__setattr__(self, "_map", None)

    def _bad(self, msg):
        raise ValueError(f"warp access {self.name!r}: {msg}")

    def _check_fields(self):
        for field in ("name", "family", "requires", "isa"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                self._bad(f"{field} must be a non-empty string")
        if self.kind not in _KINDS:
            self._bad(f"kind must be one of {_KINDS}, got {self.kind!r}")
        if self.bits not in (8, 16):
            self._bad(f"bits must be 8 or 16, got {self.bits!r}")
        if not (isinstance(self.warp, int) and 0 < self.rows <= self.warp):
            self._bad(f"rows {self.rows!r} must be 1 .. warp ({self.warp!r})")
        if self.rows * self.vec != self.warp * self.elems:
            self._bad(f"{self.rows} rows of {self.vec} elements cannot fill {self.warp} lanes of "
                      f"{self.elems} elements")
        if not callable(self.available) or not callable(self.source):
            self._bad("available and source must be callables")
        if not self.lowering or any(b not in _BACKENDS for b in self.lowering):
            self._bad(f"lowering must map backends among {_BACKENDS}, got {sorted(self.lowering)}")

    def _check_bijection(self):
        """Every element of every addressed row is held by exactly one (lane, i)."""
        seen = {}
        for lane in range(self.warp):
            for i in range(self.elems):
                s, e = self.source(lane, i)
                if not (0 <= s < self.rows and 0 <= e < self.vec):
                    self._bad(f"element {i} of lane {lane} comes from lane {s} element {e}, "
                              f"outside the {self.rows} rows of {self.vec}")
                if (s, e) in seen:
                    self._bad(f"row of lane {s} element {e} goes to lane {seen[s, e][0]} element "
                              f"{seen[s, e][1]} and to lane {lane} element {i}")
                seen[s, e] = (lane, i)

    # -- the Instruction interface -----------------------------------------------------------
    def result_types(self, operand_types, attrs):
        """A load's register vector type; nothing for a store (lang checks the operands)."""
        from ..ir import VectorType
        if self.kind == "store":
            return []
        return [VectorType(operand_types[0].elem, self.elems)]

    def address_lanes(self, warp_size):
        """numpy bool [warp_size]: the lanes whose address the instruction reads."""
        import numpy as np
        return np.arange(warp_size) < self.rows

    def source_map(self):
        """numpy (address lane, element) arrays of shape [warp, elems], built on first use."""
        if self._map is None:
            import numpy as np
            s = np.empty((self.warp, self.elems), np.int64)
            e = np.empty((self.warp, self.elems), np.int64)
            for lane in range(self.warp):
                for i in range(self.elems):
                    s[lane, i], e[lane, i] = self.source(lane, i)
            object.__setattr__(self, "_map", (s, e))
        return self._map

    def emulate(self, operands, attrs, warp_size):
        """The interpreter's semantics, per whole warp. Load: operands ``[rows]`` ([threads, vec],
        row data each lane read at its address; zeros in lanes >= rows) -> ``[registers]``
        ([threads, elems]). Store: ``[registers]`` -> ``[rows]`` (what each address lane
        writes)."""
        import numpy as np
        (x,) = operands
        T = x.shape[0]
        if T % self.warp:
            raise ValueError(f"{self.name} needs whole warps: {T} threads is not a multiple of "
                             f"{self.warp}")
        W = T // self.warp
        s, e = self.source_map()
        w = np.arange(W)[:, None, None]
        if self.kind == "load":
            rows = np.asarray(x).reshape(W, self.warp, self.vec)
            return [rows[w, s[None], e[None]].reshape(T, self.elems)]
        regs = np.asarray(x).reshape(W, self.warp, self.elems)
        rows = np.zeros((W, self.warp, self.vec), regs.dtype)
        rows[w, s[None], e[None]] = regs
        return [rows.reshape(T, self.vec)]

    def __repr__(self):
        return f"<WarpAccess {self.name}: {self.isa}>"


def _bound(fn, row):
    def lower(operands, results, attrs):
        return fn(row, operands, results, attrs)
    return lower


def access_table(rows) -> dict:
    """{name: row} for a Target's ``instructions``."""
    table = {}
    for row in rows:
        if row.name in table:
            raise ValueError(f"two warp accesses are named {row.name!r}")
        table[row.name] = row
    return table
