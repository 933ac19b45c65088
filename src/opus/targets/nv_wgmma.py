"""NVIDIA warpgroup matrix instructions (wgmma, sm_90a only): the rows, the accumulator and A
register fragments over the 128 threads of a warpgroup, the shared-memory matrix descriptor
(encoding, the canonical layouts it can express, fitting one to a layout) and the CUDA lowering.

PTX ISA 9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions":

    wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype.btype  d, a-desc|a, b-desc, scale-d, ...
      f16 x f16 -> f32 or f16, bf16 x bf16 -> f32        K = 16   N = 8, 16, ..., 256
      tf32 x tf32 -> f32 (f32 containers)                 K = 8    N = 8, 16, ..., 256
      e4m3/e5m2 x e4m3/e5m2 -> f32 or f16, all pairings   K = 32   N = 8, 16, ..., 256
      s8/u8 x s8/u8 -> s32, all pairings                  K = 32   N = 8, 16, 24, 32, 48, ..., 256
    A from shared memory (a descriptor) or from registers; B from shared memory (a descriptor).
    The 'a' features: sm_90a only (PTX Target ISA notes; ptxas refuses them for sm_90).

One row per instruction: ``WgmmaAtom`` (name 'nv.wgmma.m64n128k16.f32.f16.f16.ss' / '.rs').

Register fragments (9.7.15.5.1.1, the figures "WGMMA .m64nNk* register fragment layout"): thread
t of the warpgroup is warp w = t // 32, groupID g = (t % 32) // 4, threadID_in_group q = t % 4.
  D (64 x N), element i:  row 16w + 8*((i // 2) % 2) + g,   col 8*(i // 4) + 2q + i % 2
  A (64 x K), element i:  row 16w + 8*((i // p) % 2) + g,   col 4p*(i // (2p)) + p*q + i % p
    where p = 4 / sizeof(A's register element) elements per 32-bit register (1 tf32, 2 16-bit,
    4 8-bit): each warp's 16 rows hold mma.sync m16n8k*'s A fragment.

Shared-memory operands (9.7.15.5.1.2): A is (M = 64) x K, B is N x K ("B transposed", as every
operand is (rows, K)); each is made of core matrices of 8 rows x 16 bytes. ``canonical_offsets``
is the table "Canonical Layouts" (in elements, T = 16 / element bytes, W = swizzle bytes / 16):
  K-major, no swizzle:   ((8,m),(T,2k)):((T,SBO),(1,LBO))
  K-major, W*16 bytes:   ((8,m),(T,2k)):((W*T,SBO),(1,T))
  MN-major, no swizzle:  ((T,1,m),(8,k)):((1,T,SBO),(T,LBO))
  MN-major, W*16 bytes:  ((T,W,m),(8,k)):((1,T,LBO),(W*T,SBO))
then Swizzle<log2 W, 4, 3> on the byte address (bits 4.. XOR bits 7..), on absolute shared
addresses, the pattern starting at a 1024/512/256-byte boundary (base offset 0). MN-major
("transposed", imm-trans 1) exists for .f16/.bf16 only.

Numerics (9.7.15.5 "wgmma.mma_async"): products exact, accumulation "with at least single
precision" (f16 D: half) in an unspecified order; the emulation is exact and rounds once to
D's type, so the GPU agrees within the accumulation's roundings (fp8 on sm_90 accumulates with
fewer mantissa bits than f32: compare fp8 results with a tolerance of ~2^-13 relative to the
sum of |products|). tf32 reads f32 containers and ignores their low 13 mantissa bits (truncates
toward zero; NaN stays NaN). Integers are exact; s32 wraps modulo 2^32 (no .satfinite).
``scale-d`` false computes D = A @ B (C is not read); imm-scale-a/b -1 negate A/B.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import dtypes as dt
from ..ir import VectorType
from .base import Instruction, OnlyOn
from .matrix import OperandLayout, ShapeMNK, register_type
from .nv_mma import tf32_operand_values

__all__ = ["WgmmaAtom", "WgmmaControl", "ROWS", "INSTRUCTIONS", "WARPGROUP", "legal_n", "k_of",
           "accumulator_layout", "a_register_layout", "encode_descriptor", "decode_descriptor",
           "canonical_offsets", "swizzle_address", "operand_addresses", "fit_descriptor",
           "DescriptorError", "SWIZZLE_FIELD", "wgmma_name", "wgmma_text", "REQUIRES"]

WARPGROUP = 128
REQUIRES = "sm_90a (wgmma is an arch-specific feature of compute capability 9.0: compile for sm_90a)"
_AVAILABLE = OnlyOn("sm_90a")

# PTX type names
_PTX = {"f32": "f32", "f16": "f16", "bf16": "bf16", "tf32": "tf32", "fp8_e4m3": "e4m3",
        "fp8_e5m2": "e5m2", "i8": "s8", "u8": "u8", "i32": "s32"}


def _tf32():
    return getattr(dt, "tf32", None)


def k_of(a: dt.DType) -> int:
    """K of the instruction for A/B elements of type ``a``: 32 bytes of them."""
    return 8 if a.name == "tf32" else 32 // a.itemsize


def legal_n(a: dt.DType) -> tuple:
    """The N a wgmma with A/B of type ``a`` has (PTX 9.7.15.5.1.1, the tables' N column)."""
    if a.name in ("i8", "u8"):
        return (8, 16, 24, 32) + tuple(range(48, 257, 16))
    return tuple(range(8, 257, 8))


def _reg_bytes(a: dt.DType) -> int:
    return register_type(a).itemsize


def _warpgroup_p(t):
    """The p-coordinates of warpgroup thread t: (warp, groupID, threadID_in_group)."""
    return t // 32, t % 32 // 4, t % 4


def accumulator_layout(n: int) -> OperandLayout:
    """D (64 x n) over the warpgroup: rows (warp, half, groupID), cols (n / 8 blocks,
    threadID_in_group, pair); registers in the order (block, half, pair)."""
    return OperandLayout((4, 2, 8, n // 8, 4, 2), (("p", "y", "p"), ("y", "p", "y")),
                         _warpgroup_p, y_order=(1, 0, 2))


def a_register_layout(a: dt.DType) -> OperandLayout:
    """A (64 x K) in registers: rows (warp, half, groupID), k (2 halves of K, threadID_in_group,
    element in the 32-bit register); registers in the order (k half, row half, element)."""
    p = 4 // _reg_bytes(a)
    return OperandLayout((4, 2, 8, 2, 4, p), (("p", "y", "p"), ("y", "p", "y")),
                         _warpgroup_p, y_order=(1, 0, 2))


# -- the shared-memory matrix descriptor (PTX 9.7.15.5.1.2.2 "Matrix Descriptor Format") ------

# bits 62-63: 0 no swizzle, 1 128-byte, 2 64-byte, 3 32-byte
SWIZZLE_FIELD = {0: 0, 128: 1, 64: 2, 32: 3}
_SWIZZLE_OF_FIELD = {v: k for k, v in SWIZZLE_FIELD.items()}


class DescriptorError(ValueError):
    """A layout the matrix descriptor cannot express (the message says why)."""


def _encode14(x):
    """matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4."""
    return (x & 0x3FFFF) >> 4


def encode_descriptor(start, lbo, sbo, swizzle=0, base_offset=0) -> int:
    """The 64-bit descriptor: start address (bits 0-13), leading (16-29) and stride (32-45)
    dimension byte offsets, each encoded as (x & 0x3FFFF) >> 4; base offset (49-51); swizzle
    mode (62-63) of ``swizzle`` bytes (0, 32, 64 or 128)."""
    return (_encode14(start) | _encode14(lbo) << 16 | _encode14(sbo) << 32
            | (base_offset & 7) << 49 | SWIZZLE_FIELD[swizzle] << 62)


def decode_descriptor(desc: int) -> dict:
    """The fields of a 64-bit descriptor, in bytes (start, lbo, sbo), the base offset and the
    swizzle in bytes (0 for none)."""
    return {"start": (desc & 0x3FFF) << 4, "lbo": (desc >> 16 & 0x3FFF) << 4,
            "sbo": (desc >> 32 & 0x3FFF) << 4, "base_offset": desc >> 49 & 7,
            "swizzle": _SWIZZLE_OF_FIELD[desc >> 62 & 3]}


def canonical_offsets(rows, k, itemsize, major, swizzle, lbo, sbo):
    """numpy int64 [rows, k]: the element offset (unswizzled) at which the hardware reads
    operand element (row, k), per the canonical layouts (module docstring); ``lbo``/``sbo`` in
    elements."""
    import numpy as np
    T = 16 // itemsize
    W = max(swizzle // 16, 1)
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(k, dtype=np.int64)[None, :]
    if major == "K":
        if swizzle == 0:
            return (r % 8) * T + (r // 8) * sbo + (c % T) + (c // T) * lbo
        return (r % 8) * (W * T) + (r // 8) * sbo + c
    if swizzle == 0:
        return (r % T) + (r // T) * sbo + (c % 8) * T + (c // 8) * lbo
    return (r % T) + (r // T % W) * T + (r // (W * T)) * lbo + (c % 8) * (W * T) + (c // 8) * sbo


def swizzle_address(addr, swizzle):
    """The swizzle of ``swizzle`` bytes on byte addresses: the log2(swizzle / 16) bits from bit
    7 XORed into the bits from bit 4 (16-byte chunks permuted within each 8 x swizzle bytes)."""
    if swizzle == 0:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[swizzle]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def operand_addresses(desc, rows, k, itemsize, major):
    """numpy int64 [rows, k]: the shared byte address the hardware reads for each element of a
    (rows x k) operand described by the 64-bit ``desc`` (K-major, or MN-major with imm-trans)."""
    f = decode_descriptor(desc)
    if f["base_offset"]:
        raise DescriptorError("a descriptor with a non-zero base offset is not modeled (opus "
                              "places swizzle patterns at their boundary)")
    off = canonical_offsets(rows, k, itemsize, major, f["swizzle"], f["lbo"] // itemsize,
                            f["sbo"] // itemsize)
    return swizzle_address(f["start"] + off * itemsize, f["swizzle"])


def fit_descriptor(offsets, itemsize, swizzle, transposable=True):
    """(major, lbo_bytes, sbo_bytes) of the descriptor whose canonical layout reads element
    (r, c) at ``offsets[r, c] - offsets[0, 0]`` elements (a numpy int [rows, k] grid of a
    layout's unswizzled offsets), or DescriptorError saying why none does."""
    import numpy as np
    off = np.asarray(offsets, np.int64)
    off = off - off[0, 0]
    rows, k = off.shape
    T, W = 16 // itemsize, max(swizzle // 16, 1)
    if k > 1 and off[0, 1] == 1:
        major = "K"
    elif rows > 1 and off[1, 0] == 1:
        major = "MN"
        if not transposable:
            raise DescriptorError(
                "the operand is M/N-major (its rows are contiguous): wgmma reads tf32, fp8 and "
                "int8 operands K-major only (imm-trans exists for f16/bf16): store the tile "
                "with K contiguous")
    else:
        raise DescriptorError(
            "neither K nor M/N is contiguous (stride 1): wgmma reads 16-byte core-matrix rows "
            "along K (K-major) or, for f16/bf16, along M/N")
    unused = 16 // itemsize  # fields the hardware does not read: encoded 1 ("assumed 1")

    def at(r, c, default=unused):
        return int(off[r, c]) if r < rows and c < k else default
    if major == "K":
        lbo = at(0, T) if swizzle == 0 else unused
        sbo = at(8, 0)
    elif swizzle == 0:
        lbo, sbo = at(0, 8), at(T, 0)
    else:
        lbo, sbo = at(W * T, 0), at(0, 8)
    want = canonical_offsets(rows, k, itemsize, major, swizzle, lbo, sbo)
    bad = np.argwhere(want != off)
    if len(bad):
        r, c = map(int, bad[0])
        mode = f"{swizzle}-byte swizzle" if swizzle else "no swizzle"
        pitch = (f"rows of {W * 16} bytes (the swizzle width)" if swizzle and major == "K"
                 else "8 x 16-byte core matrices")
        raise DescriptorError(
            f"element ({r}, {c}) is at offset {int(off[r, c])}, where a {major}-major "
            f"descriptor with {mode} reads offset {int(want[r, c])}: wgmma reads {pitch}, "
            f"groups of 8 rows one stride apart (a {major}-major {mode} tile is "
            f"{_canonical_text(major, swizzle)} in elements, T = {T})")
    for name, v in (("leading", lbo), ("stride", sbo)):
        b = v * itemsize
        if b < 0 or b % 16 or b >= 1 << 18:
            raise DescriptorError(
                f"the {name} dimension byte offset would be {b} bytes: the descriptor holds a "
                f"non-negative multiple of 16 below 262144")
    return major, lbo * itemsize, sbo * itemsize


def _canonical_text(major, swizzle):
    if major == "K":
        return ("((8,m),(T,2)):((T,SBO),(1,LBO))" if swizzle == 0 else
                f"((8,m),(T,2)):(({swizzle // 16}T,SBO),(1,T))")
    return ("((T,m),(8,2)):((1,SBO),(T,LBO))" if swizzle == 0 else
            f"((T,{swizzle // 16},m),(8,2)):((1,T,LBO),({swizzle // 16}T,SBO))")


# -- the rows ------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class WgmmaAtom(ShapeMNK, Instruction):
    """One wgmma.mma_async instruction (fields: the module docstring's table of forms).

    IR (a ``target_op`` naming the row): operands A (smem: pointer, element offset; regs: the
    register vector), B (pointer, element offset), C (vector), scale-d (bool); attrs desc_a /
    desc_b (the static descriptor bits: LBO, SBO, swizzle; start address added at run time),
    trans_a / trans_b (MN-major), neg_a / neg_b. Results: D and an i32 token (the issue's
    sequence number in the interpreter, 0 in generated code) that ``wgmma_wait`` checks."""
    name: str
    shape: tuple
    a: dt.DType
    b: dt.DType
    c: dt.DType
    a_from: str
    available: Callable
    isa: str
    kind = "wgmma"
    requires = REQUIRES

    def __post_init__(self):
        m, n, k = self.shape
        if m != 64 or k != k_of(self.a) or n not in legal_n(self.a) or self.a_from not in ("smem", "regs"):
            raise ValueError(f"wgmma row {self.name!r}: no such instruction {self.shape} "
                             f"{self.a.name} from {self.a_from}")
        object.__setattr__(self, "lower", {"cuda": lambda ops, res, attrs: _lower_wgmma(self, ops, res, attrs)})
        object.__setattr__(self, "doc", self.isa)

    @property
    def reg_a(self) -> dt.DType:
        """The register type of A's elements (f32 for tf32)."""
        return register_type(self.a)

    @property
    def reg_b(self) -> dt.DType:
        return register_type(self.b)

    @property
    def elem_a(self) -> int:
        return self.m * self.k // WARPGROUP

    @property
    def elem_c(self) -> int:
        return self.m * self.n // WARPGROUP

    @property
    def transposable(self) -> bool:
        """MN-major shared operands (imm-trans) exist for 16-bit types only."""
        return self.a.itemsize == 2 and self.a.name != "tf32"

    def layout_c(self) -> OperandLayout:
        return accumulator_layout(self.n)

    def layout_a(self) -> OperandLayout:
        return a_register_layout(self.a)

    def result_types(self, operand_types, attrs):
        return [VectorType(self.c, self.elem_c), dt.i32]

    def compute(self, A, B, C, scale_d, neg_a=False, neg_b=False):
        """D = (+-A) @ (+-B) (+ C where scale_d), numpy [groups, 64, K] @ [groups, K, N]:
        exact in int64 / float64 after the hardware's input rounding, rounded once to C's
        type (module docstring)."""
        import numpy as np
        integer = self.c.name == "i32"
        wide = np.int64 if integer else np.float64
        A, B = A.astype(wide), B.astype(wide)
        if self.a.name == "tf32":  # the same reading of f32 containers as mma.sync's
            A, B = tf32_operand_values(A), tf32_operand_values(B)
        if neg_a:
            A = -A
        if neg_b:
            B = -B
        D = np.matmul(A, B)
        D = np.where(np.asarray(scale_d, bool).reshape(-1, 1, 1), D + C.astype(wide), D)
        if integer:
            return (D & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        return D.astype(self.c.np_dtype)

    def __repr__(self):
        return f"<WgmmaAtom {self.name}: {self.isa}>"


def wgmma_name(n, k, a, b, c, a_from) -> str:
    return f"nv.wgmma.m64n{n}k{k}.{c.name}.{a.name}.{b.name}.{'ss' if a_from == 'smem' else 'rs'}"


def _row(n, a, b, c, a_from) -> WgmmaAtom:
    k = k_of(a)
    return WgmmaAtom(
        name=wgmma_name(n, k, a, b, c, a_from), shape=(64, n, k), a=a, b=b, c=c, a_from=a_from,
        available=_AVAILABLE,
        isa=f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{_PTX[c.name]}.{_PTX[a.name]}.{_PTX[b.name]}")


def _type_rows():
    """(A, B, C) of every wgmma (module docstring)."""
    f8 = (dt.fp8_e4m3, dt.fp8_e5m2)
    out = [(dt.f16, dt.f16, dt.f32), (dt.f16, dt.f16, dt.f16), (dt.bf16, dt.bf16, dt.f32)]
    if _tf32() is not None:
        out.append((_tf32(), _tf32(), dt.f32))
    out += [(x, y, c) for c in (dt.f32, dt.f16) for x in f8 for y in f8]
    out += [(x, y, dt.i32) for x in (dt.i8, dt.u8) for y in (dt.i8, dt.u8)]
    return out


# -- fence, commit, wait, setmaxnreg -------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class WgmmaControl(Instruction):
    """wgmma.fence / commit_group / wait_group and setmaxnreg: one row each.

    fence: operands any register vectors to pin (results: the same values, which the compiler
    cannot move across it); wait: operands the accumulators to return, then their tokens
    (results: the accumulators); attrs n (wait) or count (setmaxnreg); fence and wait also
    'shapes', ((elements, dtype name), ...) of the values (the lowering sees C names only)."""
    name: str
    op: str  # 'fence', 'commit', 'wait', 'setmaxnreg.inc', 'setmaxnreg.dec'
    available: Callable
    isa: str
    kind = "wgmma"
    requires = REQUIRES

    def __post_init__(self):
        object.__setattr__(self, "lower", {"cuda": lambda ops, res, attrs: _lower_control(self, ops, res, attrs)})
        object.__setattr__(self, "doc", self.isa)

    def result_types(self, operand_types, attrs):
        if self.op == "fence":
            return list(operand_types)
        if self.op == "wait":
            return list(operand_types[:len(operand_types) // 2])
        return []


CONTROL = (
    WgmmaControl("nv.wgmma.fence", "fence", _AVAILABLE, "wgmma.fence.sync.aligned"),
    WgmmaControl("nv.wgmma.commit_group", "commit", _AVAILABLE, "wgmma.commit_group.sync.aligned"),
    WgmmaControl("nv.wgmma.wait_group", "wait", _AVAILABLE, "wgmma.wait_group.sync.aligned"),
    WgmmaControl("nv.setmaxnreg.inc", "setmaxnreg.inc", _AVAILABLE, "setmaxnreg.inc.sync.aligned.u32"),
    WgmmaControl("nv.setmaxnreg.dec", "setmaxnreg.dec", _AVAILABLE, "setmaxnreg.dec.sync.aligned.u32"),
)


# -- CUDA lowering -------------------------------------------------------------------------------

_ELEM_CAST = {1: "(unsigned)(unsigned char)", 2: "(unsigned)(unsigned short)"}


def _lane(v, i):
    """C name of lane ``i`` of vector ``v``: a struct's element, or the lane's own variable
    where codegen split the vector into scalars (its name then has a ``lane`` method)."""
    return v.lane(i) if hasattr(v, "lane") else f"{v}.v[{i}]"


def _copy(dst, src, n):
    """The C statement(s) ``dst = src`` for vectors of ``n`` lanes."""
    if hasattr(dst, "lane") or hasattr(src, "lane"):
        return " ".join(f"{_lane(dst, i)} = {_lane(src, i)};" for i in range(n))
    return f"{dst} = {src};"


def _pack_words(src, n, dtype):
    """C expressions of the 32-bit words holding the ``n`` elements of vector ``src`` (the first
    element in the low bits; f32 by its bits)."""
    size = dtype.itemsize
    if size == 4:
        return [f"__float_as_uint({_lane(src, i)})" if dtype.kind == "float" else
                f"(unsigned){_lane(src, i)}" for i in range(n)]
    per = 4 // size
    return [" | ".join(f"({_ELEM_CAST[size]}{_lane(src, w * per + j)} << {8 * size * j})"
                       for j in range(per)) for w in range(n // per)]


def _unpack_words(dst, words, n, dtype):
    """C statements storing the 32-bit ``words`` back into the ``n`` elements (narrower than
    32 bits) of ``dst``."""
    size = dtype.itemsize
    per = 4 // size
    ct = "unsigned char" if size == 1 else "unsigned short"
    return [f"{_lane(dst, w * per + j)} = ({ct})({words[w]} >> {8 * size * j});"
            for w in range(n // per) for j in range(per)]


def _pinned_lines(name, src, n, dtype):
    """The C lines that pass vector ``src`` through an asm statement: (lines before it, its
    operands "+f"/"+r", lines after it). 32-bit lanes are the operands themselves (no copies:
    a 128-lane accumulator copied in and out of scalars around every asm costs NVVM time);
    narrower lanes go as 32-bit words named ``name``0.., packed before and unpacked after."""
    if dtype.itemsize == 4:
        kind = "f" if dtype.kind == "float" else "r"
        return [], [f'"+{kind}"({_lane(src, i)})' for i in range(n)], []
    decl, ops, back, ct = _pinned(name, src, n, dtype)
    return [f"  {ct} {', '.join(decl)};"], ops, back


def _pinned(name, src, n, dtype):
    """(declarations, asm operands "+r", write-back statements) of vector ``src`` (lanes
    narrower than 32 bits) passed through an asm statement as 32-bit registers named
    ``name``0..."""
    words = _pack_words(src, n, dtype)
    regs = [f"{name}{w}" for w in range(len(words))]
    return ([f"{r} = {e}" for r, e in zip(regs, words)], [f'"+r"({r})' for r in regs],
            _unpack_words(src, regs, n, dtype), "unsigned")


def _desc_expr(p, off, attrs_desc):
    """C expression of a descriptor: the static fields OR the start address of p + off."""
    return (f"(0x{attrs_desc:016x}ull | (unsigned long long)(((unsigned)__cvta_generic_to_shared("
            f"{p} + {off}) & 0x3FFFFu) >> 4))")


def _immediates(atom, attrs):
    """The immediates after scale-d, by type family (PTX: f16/bf16 scale-a, scale-b, trans-a
    (smem A only), trans-b; tf32/fp8 scale-a, scale-b; integers none)."""
    if atom.c.name == "i32":
        return []
    imm = ["-1" if attrs.get("neg_a") else "1", "-1" if attrs.get("neg_b") else "1"]
    if atom.transposable:
        if atom.a_from == "smem":
            imm.append("1" if attrs.get("trans_a") else "0")
        imm.append("1" if attrs.get("trans_b") else "0")
    return imm


def wgmma_text(atom, d, a, b, scale_d, attrs) -> str:
    """The PTX line of one wgmma.mma_async: ``d`` the accumulators' brace list, ``a`` A's
    descriptor (or brace list of registers), ``b`` B's descriptor, ``scale_d`` the predicate
    (false: D = A*B); the immediates from attrs. The CUDA lowering fills it with asm operand
    references, the PTX body (codegen/ptx.py) with its registers."""
    return f"{atom.isa} {', '.join([d, a, b, scale_d] + _immediates(atom, attrs))};"


def _lower_wgmma(atom, ops, res, attrs):
    d, tok = res
    if atom.a_from == "smem":
        pa, oa, pb, ob, c, scale = ops
        a_regs = None
    else:
        a_regs, pb, ob, c, scale = ops
    lines = ["{", f"  {_copy(d, c, atom.elem_c)}"]
    decl_d, ops_d, back_d = _pinned_lines("opus_d", d, atom.elem_c, atom.c)
    lines += decl_d
    inputs, k = [], len(ops_d)
    if a_regs is None:
        lines.append(f"  unsigned long long opus_da = {_desc_expr(pa, oa, attrs['desc_a'])};")
        inputs.append('"l"(opus_da)')
        a_text = f"%{k}"
        k += 1
    else:
        words = _pack_words(a_regs, atom.elem_a, atom.reg_a)
        lines.append(f"  unsigned {', '.join(f'opus_a{w} = {e}' for w, e in enumerate(words))};")
        inputs += [f'"r"(opus_a{w})' for w in range(len(words))]
        a_text = "{" + ", ".join(f"%{k + w}" for w in range(len(words))) + "}"
        k += len(words)
    lines.append(f"  unsigned long long opus_db = {_desc_expr(pb, ob, attrs['desc_b'])};")
    inputs += ['"l"(opus_db)', f'"r"((unsigned)({scale}))']
    b_text, s_text = f"%{k}", f"%{k + 1}"
    d_text = "{" + ", ".join(f"%{i}" for i in range(len(ops_d))) + "}"
    lines.append(f'  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, {s_text}, 0;\\n'
                 f'{wgmma_text(atom, d_text, a_text, b_text, "p", attrs)}\\n}}\\n" : '
                 f'{", ".join(ops_d)} : {", ".join(inputs)} : "memory");')
    lines += ["  " + s for s in back_d]
    lines += [f"  {tok} = 0;", "}"]
    return lines


def _lower_control(row, ops, res, attrs):
    if row.op == "commit":
        return [f'asm volatile("{row.isa};" ::: "memory");']
    if row.op.startswith("setmaxnreg"):
        return [f'asm volatile("{row.isa} {attrs["count"]};" ::: "memory");']
    values = list(ops) if row.op == "fence" else list(ops[:len(ops) // 2])
    text = f"{row.isa} {attrs['n']};" if row.op == "wait" else f"{row.isa};"
    if not values:
        return [f'asm volatile("{text}" ::: "memory");']
    lines, operands, back = ["{"], [], []
    for j, (src, dst, (n, dname)) in enumerate(zip(values, res, attrs["shapes"])):
        lines.append(f"  {_copy(dst, src, n)}")
        dtype = dt.dtype_from_name(dname)
        decl, asm_ops, wb = _pinned_lines(f"opus_v{j}_", dst, n, dtype)
        lines += decl
        operands += asm_ops
        back += wb
    lines.append(f'  asm volatile("{text}" : {", ".join(operands)} :: "memory");')
    lines += ["  " + s for s in back] + ["}"]
    return lines


ROWS = tuple(_row(n, a, b, c, src) for a, b, c in _type_rows() for n in legal_n(a)
             for src in ("smem", "regs"))
INSTRUCTIONS = {r.name: r for r in ROWS + CONTROL}
