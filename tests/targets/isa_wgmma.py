"""wgmma's register fragments and shared-memory matrix descriptors, transcribed by hand from the
PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution, section 9.7.15.5.1). Nothing here is
computed from opus' code (src/opus/targets/nv_wgmma.py); each table is written in the
document's own terms, so a slip in opus disagrees with it.

* Register fragments (9.7.15.5.1.1, Figures 148-153): the figures draw, for the 128 threads of
  the warpgroup, which element of A (in registers) or D each thread's register element holds.
  In the figures' terms: %warp_id_in_warpgroup = thread / 32, groupID = %laneid >> 2,
  threadID_in_group = %laneid % 4. Each warp owns rows 16 * warp .. 16 * warp + 15 of D and
  of A; within them D's elements come in pairs along a row, four pairs per 8 columns (d0 d1
  row groupID, d2 d3 row groupID + 8, then the next 8 columns); A's are each warp's
  mma.m16n8k* A fragment (Figures 148, 150, 152 match 9.7.14.5's Figures 79, 72 and the 8-bit
  m16n8k32 figure).
* The Matrix Descriptor Format (9.7.15.5.1.2.2): bit fields of the 64-bit descriptor.
* The Canonical Layouts (9.7.15.5.1.2.1.3), in CuTe notation (shape:stride, coordinates
  unravel colexicographically, the first sub-mode fastest), in units of elements with
  T = 128 / element bits, then Swizzle<B, 4, 3> on the byte address; and the document's
  worked examples (Figures 166-170: the exact layout of a tile and its LBO / SBO encodings).
"""
from __future__ import annotations

PTX = "PTX ISA, section 9.7.15.5.1"


# -- register fragments ----------------------------------------------------------------------------

def _warp(t):
    return t // 32


def _gid(t):
    return (t % 32) >> 2


def _tig(t):
    return (t % 32) % 4


def d_fragment(t, i):
    """Figures 149/151/153 (D of m64nNk16 / k8 / k32, all .dtype): d_i of thread t."""
    row = _warp(t) * 16 + _gid(t) + (8 if i % 4 >= 2 else 0)
    col = _tig(t) * 2 + (i & 1) + 8 * (i >> 2)
    return row, col


def a_fragment_16bit(t, i):
    """Figure 148 (A of m64nNk16, .f16/.bf16, a0..a7): rows groupID for a0, a1, a4, a5, else
    groupID + 8; columns threadID_in_group * 2 + (i & 1), + 8 for i >= 4."""
    row = _warp(t) * 16 + _gid(t) + (0 if i in (0, 1, 4, 5) else 8)
    col = _tig(t) * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def a_fragment_tf32(t, i):
    """Figure 150 (A of m64nNk8, .tf32, a0..a3): row groupID for a0, a2, else + 8; column
    threadID_in_group for a0, a1, else + 4."""
    row = _warp(t) * 16 + _gid(t) + (0 if i in (0, 2) else 8)
    col = _tig(t) + (0 if i in (0, 1) else 4)
    return row, col


def a_fragment_8bit(t, i):
    """Figure 152 (A of m64nNk32, .s8/.u8/.e4m3/.e5m2, a0..a15): row groupID for a0..a3 and
    a8..a11, else + 8; column threadID_in_group * 4 + (i & 3), + 16 for i >= 8."""
    row = _warp(t) * 16 + _gid(t) + (0 if i < 4 or 8 <= i < 12 else 8)
    col = _tig(t) * 4 + (i & 3) + (16 if i >= 8 else 0)
    return row, col


# literal entries read off the figures: (thread, element) -> (row, col)
D_SPOTS = {(0, 0): (0, 0), (0, 1): (0, 1), (1, 0): (0, 2), (3, 1): (0, 7), (4, 0): (1, 0),
           (0, 2): (8, 0), (0, 3): (8, 1), (0, 4): (0, 8), (0, 5): (0, 9), (31, 3): (15, 7),
           (32, 0): (16, 0), (64, 2): (40, 0), (127, 7): (63, 15)}
A16_SPOTS = {(0, 0): (0, 0), (0, 1): (0, 1), (0, 2): (8, 0), (0, 4): (0, 8), (0, 7): (8, 9),
             (1, 0): (0, 2), (4, 0): (1, 0), (32, 0): (16, 0), (127, 7): (63, 15)}
ATF32_SPOTS = {(0, 0): (0, 0), (0, 1): (8, 0), (0, 2): (0, 4), (0, 3): (8, 4), (1, 0): (0, 1),
               (4, 0): (1, 0), (96, 0): (48, 0), (127, 3): (63, 7)}
A8_SPOTS = {(0, 0): (0, 0), (0, 3): (0, 3), (0, 4): (8, 0), (0, 8): (0, 16), (0, 12): (8, 16),
            (1, 0): (0, 4), (4, 0): (1, 0), (32, 0): (16, 0), (127, 15): (63, 31)}

# A's fragment table by the bits of A's register element (tf32's are f32 containers)
A_FRAGMENTS = {16: (a_fragment_16bit, A16_SPOTS), 32: (a_fragment_tf32, ATF32_SPOTS),
               8: (a_fragment_8bit, A8_SPOTS)}


# -- the matrix descriptor -------------------------------------------------------------------------

# (first bit, width, field) of the Matrix Descriptor Format table
DESCRIPTOR_FIELDS = ((0, 14, "start address, encoded"), (16, 14, "leading dimension byte "
                     "offset, encoded"), (32, 14, "stride dimension byte offset, encoded"),
                     (49, 3, "matrix base offset"), (62, 2, "swizzle mode"))
# the swizzle mode field: 0 no swizzle, 1 128-byte, 2 64-byte, 3 32-byte
SWIZZLE_MODE_VALUE = {0: 0, 128: 1, 64: 2, 32: 3}


def matrix_descriptor_encode(x):
    """matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4."""
    return (x & 0x3FFFF) >> 4


# The Canonical Layouts table: (major, swizzle bytes) -> (shape, stride) in CuTe notation over
# names T, m, k, LBO, SBO; Swizzle<B, 4, 3> with B = log2(swizzle / 16) on the byte address.
CANONICAL = {
    ("MN", 0): ("((T,1,m),(8,k))", "((1,T,SBO),(1T,LBO))"),
    ("MN", 32): ("((T,2,m),(8,k))", "((1,T,LBO),(2T,SBO))"),
    ("MN", 64): ("((T,4,m),(8,k))", "((1,T,LBO),(4T,SBO))"),
    ("MN", 128): ("((T,8,m),(8,k))", "((1,T,LBO),(8T,SBO))"),
    ("K", 0): ("((8,m),(T,2k))", "((1T,SBO),(1,LBO))"),
    ("K", 32): ("((8,m),(T,2k))", "((2T,SBO),(1,T))"),
    ("K", 64): ("((8,m),(T,2k))", "((4T,SBO),(1,T))"),
    ("K", 128): ("((8,m),(T,2k))", "((8T,SBO),(1,T))"),
}
SWIZZLE_BITS = {0: 0, 32: 1, 64: 2, 128: 3}  # Swizzle<B, 4, 3>

# The worked examples (Figures 166-170): element bits, major, swizzle, the exact layout (in
# elements), and the document's encodings of LBO and SBO (None: "NA", encoded 1 "assumed").
EXAMPLES = (
    ("Figure 166: K major, no swizzling, tf32", 32, "K", 0,
     ((8, 2), (4, 4)), ((4, 32), (1, 64)), 16, 8),
    ("Figure 167: K major, 32B swizzling, tf32", 32, "K", 32,
     ((8, 2), (4, 4)), ((8, 64), (1, 4)), None, 16),
    ("Figure 168: MN major, no swizzling, bf16", 16, "MN", 0,
     ((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128)), 16, 8),
    ("Figure 169: MN major, 32B swizzling, bf16", 16, "MN", 32,
     ((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256)), 16, 32),
    ("Figure 170: MN major, 64B swizzling, bf16", 16, "MN", 64,
     ((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512)), 32, 64),
)


def cute_offset(shape, stride, coord):
    """CuTe's layout function: the 1-D ``coord`` of a (possibly nested) mode unravels
    colexicographically over its sub-modes; offset = sum of sub-coordinates * strides."""
    if isinstance(shape, tuple):
        out = 0
        for s, d in zip(shape, stride):
            size = cute_size(s)
            out += cute_offset(s, d, coord % size)
            coord //= size
        return out
    return coord * stride


def cute_size(shape):
    if isinstance(shape, tuple):
        n = 1
        for s in shape:
            n *= cute_size(s)
        return n
    return shape


def cute_swizzle(b, m, s, x):
    """CuTe's Swizzle<B, M, S>: the B bits of x from bit M + S XORed into the B bits from M."""
    mask = ((1 << b) - 1) << (m + s)
    return x ^ ((x & mask) >> s)


def parse_cute(text, names):
    """A CuTe shape/stride text ('((T,1,m),(8,k))', '((1,T,SBO),(1T,LBO))') with ``names``
    substituted ('2T' is 2 * T) as nested tuples of ints."""
    import re

    def term(tok):
        mo = re.fullmatch(r"(\d*)([A-Za-z]*)", tok)
        factor = int(mo.group(1)) if mo.group(1) else 1
        return factor * (names[mo.group(2)] if mo.group(2) else 1)

    def parse(s, i):
        if s[i] == "(":
            items, i = [], i + 1
            while s[i] != ")":
                x, i = parse(s, i)
                items.append(x)
                if s[i] == ",":
                    i += 1
            return tuple(items), i + 1
        j = i
        while s[j] not in ",)":
            j += 1
        return term(s[i:j]), j
    return parse(text, 0)[0]
