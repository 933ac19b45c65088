"""NVIDIA warp-level matrix instructions (mma.sync): availability, PTX lowering, lane layout and
emulation, each instruction in one place.

Lane layouts are from the PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type":
with g = lane // 4 and t = lane % 4,
  A (16x16, row-major fragment), 8 elements a0..a7: row g + 8*((i//2)%2), col 2t + i%2 + 8*(i//4)
  B (16x8, "col"),               4 elements b0..b3: row (k) 2t + i%2 + 8*(i//2), col (n) g
  C/D (16x8),                    4 elements c0..c3: row g + 8*(i//2), col 2t + i%2
The coordinate functions work on Python ints and on traced values alike.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import VectorType
from .base import Instruction

__all__ = ["INSTRUCTIONS", "ATOMS", "MmaSpec"]


class MmaSpec:
    """Shape, types and per-lane element coordinates of one warp-level MMA atom."""

    def __init__(self, m, n, k, a, b, c, coords_a, coords_b, coords_c, warp=32):
        self.m, self.n, self.k = m, n, k
        self.a, self.b, self.c = a, b, c
        self.warp = warp
        self.elem_a, self.elem_b, self.elem_c = m * k // warp, n * k // warp, m * n // warp
        self.coords_a, self.coords_b, self.coords_c = coords_a, coords_b, coords_c
        self._maps = None

    def index_maps(self):
        """numpy (rows, cols) arrays of shape [warp, elems] for A, B and C (used by emulation),
        built on first use: kernels that are only compiled never need them (nor numpy)."""
        if self._maps is not None:
            return self._maps
        import numpy as np

        def maps(fn, elems):
            r = np.empty((self.warp, elems), np.int64)
            c = np.empty((self.warp, elems), np.int64)
            for lane in range(self.warp):
                for i in range(elems):
                    r[lane, i], c[lane, i] = fn(lane, i)
            return r, c
        self._maps = (maps(self.coords_a, self.elem_a), maps(self.coords_b, self.elem_b),
                      maps(self.coords_c, self.elem_c))
        return self._maps


def _a16816(lane, i):
    g, t = lane // 4, lane % 4
    return g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)


def _b16816(lane, i):
    g, t = lane // 4, lane % 4
    return 2 * t + i % 2 + 8 * (i // 2), g


def _c16816(lane, i):
    g, t = lane // 4, lane % 4
    return g + 8 * (i // 2), 2 * t + i % 2


def _mma_types(spec):
    ta, tb, tc = (VectorType(spec.a, spec.elem_a), VectorType(spec.b, spec.elem_b),
                  VectorType(spec.c, spec.elem_c))

    def result_types(operand_types, attrs):
        want = [ta, tb, tc]
        if list(operand_types) != want:
            got = ", ".join(map(repr, operand_types))
            raise TypeError(f"mma {spec.m}x{spec.n}x{spec.k} takes ({ta!r}, {tb!r}, {tc!r}), "
                            f"got ({got})")
        return [tc]
    return result_types


def _lower_mma_sync(spec, ptx_types):
    """CUDA C++ lines: pack 16-bit pairs into 32-bit registers, then one inline-asm mma.sync."""
    na, nb, nc = spec.elem_a // 2, spec.elem_b // 2, spec.elem_c

    def lower(ops, res, attrs):
        a, b, c = ops
        (d,) = res
        lines = ["{"]
        for name, src, n in (("a", a, na), ("b", b, nb)):
            for r in range(n):
                lines.append(f"  unsigned {name}{r} = (unsigned){src}.v[{2 * r}] | "
                             f"((unsigned){src}.v[{2 * r + 1}] << 16);")
        outs = ", ".join(f'"=f"({d}.v[{i}])' for i in range(nc))
        ins = ", ".join([f'"r"(a{r})' for r in range(na)] + [f'"r"(b{r})' for r in range(nb)]
                        + [f'"f"({c}.v[{i}])' for i in range(nc)])
        k = 0
        def regs(n):
            nonlocal k
            s = "{" + ", ".join(f"%{k + j}" for j in range(n)) + "}"
            k += n
            return s
        dr, ar, br, cr = regs(nc), regs(na), regs(nb), regs(nc)
        lines.append(f'  asm volatile("mma.sync.aligned.m{spec.m}n{spec.n}k{spec.k}.row.col.'
                     f'{ptx_types} {dr}, {ar}, {br}, {cr};" : {outs} : {ins});')
        lines.append("}")
        return lines
    return lower


def _emulate_mma(spec):
    def emulate(operands, attrs, warp_size):
        import numpy as np
        (ar, ac), (br, bc), (cr, cc) = spec.index_maps()
        a, b, c = operands  # [threads, elems]
        T = a.shape[0]
        if T % spec.warp:
            raise ValueError(f"mma.sync needs whole warps: {T} threads is not a multiple of "
                             f"{spec.warp}")
        W = T // spec.warp
        A = np.zeros((W, spec.m, spec.k), np.float64)
        B = np.zeros((W, spec.k, spec.n), np.float64)
        C = np.zeros((W, spec.m, spec.n), np.float64)
        w = np.arange(W)[:, None, None]
        A[w, ar[None], ac[None]] = a.astype(np.float64).reshape(W, spec.warp, -1)
        B[w, br[None], bc[None]] = b.astype(np.float64).reshape(W, spec.warp, -1)
        C[w, cr[None], cc[None]] = c.astype(np.float64).reshape(W, spec.warp, -1)
        D = (A @ B + C).astype(np.float32)
        return [D[w, cr[None], cc[None]].reshape(T, -1)]
    return emulate


def _sm80_plus(target):
    return target.vendor == "nvidia" and target.sm >= 80


INSTRUCTIONS = {}
ATOMS = {}
SPECS = {}

for _in, _ptx in ((dt.bf16, "f32.bf16.bf16.f32"), (dt.f16, "f32.f16.f16.f32")):
    _spec = MmaSpec(16, 8, 16, _in, _in, dt.f32, _a16816, _b16816, _c16816)
    _name = f"nv.mma.m16n8k16.{_in.name}.f32"
    INSTRUCTIONS[_name] = Instruction(
        _name, _sm80_plus, _mma_types(_spec), {"cuda": _lower_mma_sync(_spec, _ptx)},
        _emulate_mma(_spec), doc=f"mma.sync.aligned.m16n8k16.row.col.{_ptx}")
    INSTRUCTIONS[_name].spec = _spec
    ATOMS[(_in.name, _in.name, "f32", (16, 8, 16))] = _name
    SPECS[_name] = _spec
