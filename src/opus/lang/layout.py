"""Layouts: coordinates -> element offsets, as static algebra on Python values (docs/layouts.md).

A layout is plain data: a shape, strides, optional fixed coordinates and a linear shift, whose
entries are Python ints (compile time) or run-time integer values. Calling it computes

    offset = linear + sum_i coord_i * stride_i

folding every static part in Python, so IR appears only for run-time terms, and a fully static
layout called with static coordinates gives a Python int. Layouts never hold IR of their own:
a run-time stride is a value the kernel already has.

    u = opus.make_layout((128, 64))            # packed row-major: strides (64, 1)
    u(4, 8)                                     # 264, a Python int
    v = opus.make_layout((M, K), (lda, 1))      # run-time extent and stride
    v(i, k)                                     # i * lda + k: one multiply, one add
    w = opus.make_layout(((3, 16), (4, 8)), coord=(opus.Y, p0, p1, opus.Y))
    w(1, 0)                                     # the y (register) coordinates only

A shape may be nested one level: each top-level mode (an x-dim) split into sub-modes. A call
takes either one coordinate per leaf, or one per top-level mode, each unravelled row-major over
its sub-modes (``w2(21, 19)`` on ``((3, 16), (4, 8))`` is ``w2(1, 5, 2, 3)``).
"""
from __future__ import annotations

from ..ir import Value, scalar_of
from .context import TraceError
from .values import binary

__all__ = ["Y", "Layout", "CachedLayout", "Swizzle", "swizzle_bytes", "make_layout", "zipped_divide",
           "is_layout", "packed_strides"]


class _YSlot:
    """``opus.Y``: a register (y) coordinate left open in a layout's ``coord``, supplied when the
    layout is called; also the tag of a y sub-dim in an x/p/y description (``opus.P`` is the
    other tag).

    :targets: all targets
    """
    __slots__ = ()

    def __repr__(self):
        return "opus.Y"

    def __reduce__(self):
        return "Y"


Y = _YSlot()


def _err(msg):
    raise TraceError(msg)


def _is_int_value(x) -> bool:
    return isinstance(x, Value) and scalar_of(x.type).is_int and getattr(x.type, "lanes", 1) == 1


def _describe(x) -> str:
    if isinstance(x, Value):
        return repr(x)
    return f"{x!r} ({type(x).__name__})"


def _check_extent(x, what):
    if type(x) is int:
        if x <= 0:
            _err(f"{what} must be a positive extent, got {x}")
        return x
    if _is_int_value(x):
        return x
    _err(f"{what} must be a Python int or a run-time integer value, got {_describe(x)}")


def _check_index(x, what):
    if type(x) is int or _is_int_value(x):
        return x
    _err(f"{what} must be a Python int or a run-time integer value, got {_describe(x)}")


# -- folding arithmetic: Python ints stay Python ints -------------------------------------------

def _mul(a, b):
    if type(a) is int and type(b) is int:
        return a * b
    if (type(a) is int and a == 0) or (type(b) is int and b == 0):
        return 0
    if type(a) is int and a == 1:
        return b
    if type(b) is int and b == 1:
        return a
    return a * b


def _add(a, b):
    if type(a) is int and type(b) is int:
        return a + b
    if type(a) is int and a == 0:
        return b
    if type(b) is int and b == 0:
        return a
    return a + b


def _sum(terms):
    """Sum with the static part kept apart and added last (one add for all of it)."""
    static, dynamic = 0, None
    for t in terms:
        if type(t) is int:
            static += t
        else:
            dynamic = t if dynamic is None else dynamic + t
    return static if dynamic is None else _add(dynamic, static)


def _product(xs):
    p = 1
    for x in xs:
        p = _mul(p, x)
    return p


def packed_strides(shape) -> tuple:
    """Row-major strides of a flat shape: stride_i = prod(shape[i+1:])."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc = _mul(acc, s)
    return tuple(reversed(out))


def _unravel(x, shape):
    """Row-major coordinates of the index ``x`` over ``shape`` (static x: folds). Indices are
    non-negative, so run-time ones divide with C's truncation (no floor fix-up to emit)."""
    coords = []
    for s in reversed(shape[1:]):
        if type(x) is int and type(s) is int:
            x, r = divmod(x, s)
        else:
            x, r = binary("tdiv", x, s), binary("tmod", x, s)
        coords.append(r)
    coords.append(x)
    return tuple(reversed(coords))


# -- structure ---------------------------------------------------------------------------------

def _modes(shape, what):
    """The top-level modes of a shape as tuples of leaves (an int leaf is a 1-leaf mode)."""
    if not isinstance(shape, tuple) or not shape:
        _err(f"{what} must be a non-empty tuple, got {_describe(shape)}")
    modes = []
    for i, m in enumerate(shape):
        if isinstance(m, tuple):
            if not m or any(isinstance(x, tuple) for x in m):
                _err(f"{what}[{i}] = {m!r}: a mode is an extent or a flat, non-empty tuple of "
                     f"extents (one level of nesting)")
            modes.append(m)
        else:
            modes.append((m,))
    return modes


def _same_structure(shape, other, what):
    """``other``'s leaves, checked to have ``shape``'s nesting."""
    if not isinstance(other, tuple) or len(other) != len(shape):
        _err(f"{what} {_describe(other)} must have the shape's structure {shape!r}")
    leaves = []
    for i, (s, o) in enumerate(zip(shape, other)):
        if isinstance(s, tuple):
            if not isinstance(o, tuple) or len(o) != len(s):
                _err(f"{what}[{i}] = {o!r} must match the shape's mode {s!r}")
            leaves.extend(o)
        else:
            if isinstance(o, tuple):
                _err(f"{what}[{i}] = {o!r} must be one value, as the shape's mode {s!r}")
            leaves.append(o)
    return leaves


class Swizzle:
    """An XOR swizzle of element offsets (CuTe's ``Swizzle<B, M, S>``): the ``bits`` bits of
    the offset starting at bit ``base + shift`` are XORed into the ``bits`` bits starting at
    ``base``. Runs of ``2**base`` consecutive elements stay together (vector accesses up to that
    width stay contiguous); rows of a shared tile land in different banks.

    ``Swizzle(3, 3, 3)`` on f16 elements is the 128-byte pattern TMA and wgmma read
    (``swizzle_bytes(128, f16)`` gives it): 16-byte chunks (8 halves) of each 128-byte row are
    permuted by the row index modulo 8.

    :param bits: how many bits are XORed (the pattern repeats every 2**bits rows)
    :type bits: int
    :param base: the lowest bit that changes (2**base elements move together)
    :type base: int
    :param shift: the distance from the bits that change to the bits that select the change
    :type shift: int
    :targets: all targets
    """
    __slots__ = ("bits", "base", "shift")

    def __init__(self, bits: int, base: int, shift: int):
        for name, v in (("bits", bits), ("base", base), ("shift", shift)):
            if type(v) is not int or v < 0:
                _err(f"Swizzle {name} must be a non-negative int, got {v!r}")
        if shift < bits:
            _err(f"Swizzle(bits={bits}, base={base}, shift={shift}): shift must be >= bits, or "
                 f"the bits it reads overlap the bits it changes")
        self.bits, self.base, self.shift = bits, base, shift

    def __call__(self, offset):
        if self.bits == 0:
            return offset
        mask = ((1 << self.bits) - 1) << (self.base + self.shift)
        return offset ^ ((offset & mask) >> self.shift)  # folds for an int, emits for a value

    @property
    def period(self) -> int:
        """Elements after which the pattern repeats: shifts by a multiple of it commute with it."""
        return 1 << (self.base + self.shift + self.bits)

    def __eq__(self, other):
        return isinstance(other, Swizzle) and (self.bits, self.base, self.shift) == (
            other.bits, other.base, other.shift)

    def __hash__(self):
        return hash((self.bits, self.base, self.shift))

    def __repr__(self):
        return f"Swizzle({self.bits}, {self.base}, {self.shift})"


def swizzle_bytes(mode: int, dtype) -> Swizzle:
    """The swizzle of TMA's and wgmma's shared-memory modes (32, 64 or 128 bytes) on elements of
    ``dtype``: 16-byte chunks XORed by the row of ``mode`` bytes (CUDA's
    CU_TENSOR_MAP_SWIZZLE_32B/64B/128B; PTX ISA, "Shared memory matrix layout").

    :param mode: the swizzle width in bytes: 32, 64 or 128
    :type mode: int
    :param dtype: the element type
    :type dtype: DType
    :returns: the Swizzle on element offsets
    :rtype: Swizzle
    :targets: all targets
    """
    bits = {32: 1, 64: 2, 128: 3}.get(mode)
    if bits is None:
        _err(f"swizzle mode must be 32, 64 or 128 bytes, got {mode!r}")
    size = getattr(dtype, "bits", 0) // 8
    if size not in (1, 2, 4, 8):
        _err(f"swizzle_bytes needs an element type of 1, 2, 4 or 8 bytes, got {dtype!r}")
    base = 4 - size.bit_length() + 1  # 16-byte chunks: 2**base elements each
    return Swizzle(bits, base, 3)


class SwizzledSum:
    """``swizzle(sum(terms) + c)`` for run-time integer ``terms`` and any static ``c``, with the
    run-time part's swizzle computed once however many constants ``c`` it is called with
    (docs/layouts.md, "Swizzled offsets"). Each rule is exact for every value the terms can
    take (the bits they may have are proved from the ops that made them: ``known_bits``):

    * A multiple of the swizzle's period commutes with it: the static part's multiple of the
      period, and the terms proved to be multiples of it (a stage or tile shift), are added
      after the swizzle.
    * The low rest ``c_lo`` of ``c``: where no bit of it can be set in the other terms' sum
      ``base``, ``base + c_lo`` is ``base | c_lo``, and the swizzle, being XOR-linear, gives
      ``swizzle(base) ^ swizzle(c_lo)``. Of that constant, the bits ``swizzle(base)`` cannot
      have are added (an address's immediate offset); the others are XORed, once per value.
    * Where a carry may reach the swizzle's bits the offset is ``swizzle(base + c_lo)``.
    """
    __slots__ = ("sw", "base", "outer", "_base_bits", "_swizzled", "_done")

    def __init__(self, sw, terms):
        from .known_bits import may_bits, lowest_bit
        period_bit = sw.base + sw.shift + sw.bits
        inner, outer = [], []
        for t in terms:
            (outer if lowest_bit(may_bits(t)) >= period_bit else inner).append(t)
        self.sw, self.base, self.outer = sw, _sum_or_none(inner), _sum_or_none(outer)
        self._base_bits = 0 if self.base is None else may_bits(self.base)
        self._swizzled = None       # swizzle(base), made at first use
        self._done = {}             # c_lo -> (run-time value or None, static int)

    def __call__(self, c: int):
        low = c % self.sw.period
        if low not in self._done:
            self._done[low] = self._low(low)
        value, static = self._done[low]
        static += c - low
        return static if value is None else _add(value, static)

    def _low(self, low):
        """swizzle(sum(terms) + low) as (run-time value or None, static int to add)."""
        if self.base is None:
            return self.outer, self.sw(low)
        if low & self._base_bits:   # a carry may reach the swizzle's bits: the general form
            return self._plus_outer(self.sw(_add(self.base, low))), 0
        k = self.sw(low)
        maybe = self._swizzled_bits()
        if self._swizzled is None:
            self._swizzled = self._plus_outer(self.sw(self.base))
        # XORs below the period commute with adding the outer multiples of it
        return (self._swizzled ^ (k & maybe) if k & maybe else self._swizzled), k & ~maybe

    def _plus_outer(self, value):
        return value if self.outer is None else value + self.outer

    def _swizzled_bits(self):
        """The bits ``swizzle(base)`` may have: base's, and those its XOR moves them to."""
        mask = ((1 << self.sw.bits) - 1) << (self.sw.base + self.sw.shift)
        return self._base_bits | ((self._base_bits & mask) >> self.sw.shift)


def _sum_or_none(values):
    """The sum of run-time ``values`` in order, or None for none."""
    out = None
    for v in values:
        out = v if out is None else out + v
    return out


class Layout:
    """Coordinates -> element offset. Build with ``opus.make_layout``; see the module docstring.

    Immutable: ``u + off`` is a new layout shifted by ``off`` elements (``u += off`` rebinds).

    :param shape: extents, nested one level at most
    :type shape: tuple of ints or run-time integers
    :param stride: strides with the shape's structure (None: packed row-major)
    :type stride: tuple or None
    :param coord: one fixed coordinate or ``opus.Y`` per leaf, or None
    :type coord: tuple or None
    :param linear: added to every offset
    :type linear: int or run-time integer
    :param swizzle: applied to every offset (the linear shift included), or None
    :type swizzle: Swizzle or None
    :param y_order: the order of the open (y) slots in calls, ``y_shape()`` and bulk accesses,
        as a permutation of their positions (None: left to right). A matrix atom's registers
        follow the instruction's order, which need not be the slots' (mma.sync's A).
    :type y_order: tuple of ints or None
    :targets: all targets
    """
    __slots__ = ("_shape", "_modes", "_leaves", "_strides", "_coord", "_linear", "_swizzle",
                 "_open")

    def __init__(self, shape, stride=None, coord=None, linear=0, swizzle=None, y_order=None):
        modes = _modes(shape, "shape")
        leaves = tuple(_check_extent(x, f"shape entry {x!r}") for m in modes for x in m)
        if stride is None:
            strides = packed_strides(leaves)
        else:
            strides = tuple(_check_index(x, "stride entry")
                            for x in _same_structure(shape, stride, "stride"))
        if coord is not None:
            coord = tuple(coord)
            if len(coord) != len(leaves):
                _err(f"coord has {len(coord)} entries; the shape {shape!r} has {len(leaves)} "
                     f"leaves (one coordinate or opus.Y per leaf)")
            coord = tuple(c if c is Y else _check_index(c, "coord entry") for c in coord)
        self._shape, self._modes, self._leaves = shape, tuple(modes), leaves
        self._strides, self._coord = strides, coord
        self._linear = _check_index(linear, "linear offset")
        if swizzle is not None and not isinstance(swizzle, Swizzle):
            _err(f"swizzle must be an opus.Swizzle, got {_describe(swizzle)}")
        self._swizzle = swizzle
        slots = tuple(range(len(leaves))) if coord is None else tuple(
            i for i, c in enumerate(coord) if c is Y)
        if y_order is not None:
            y_order = tuple(y_order)
            if sorted(y_order) != list(range(len(slots))):
                _err(f"y_order {y_order!r} must be a permutation of 0..{len(slots) - 1} (one "
                     f"entry per open slot)")
            slots = tuple(slots[k] for k in y_order)
        self._open = slots  # leaf index of each y coordinate, in call order

    # -- queries ---------------------------------------------------------------------------
    def shape(self, i=None):
        """The shape as given (nested where it was), or mode ``i``'s."""
        return self._shape if i is None else self._shape[i]

    def stride(self, i=None):
        """The strides with the shape's nesting (packed ones computed), or mode ``i``'s."""
        out, k = [], 0
        for s in self._shape:
            n = len(s) if isinstance(s, tuple) else 1
            part = self._strides[k:k + n]
            out.append(part if isinstance(s, tuple) else part[0])
            k += n
        return tuple(out) if i is None else out[i]

    @property
    def rank(self) -> int:
        """Number of top-level modes."""
        return len(self._modes)

    @property
    def coord(self):
        """The fixed coordinates per leaf (``opus.Y`` at open slots), or None."""
        return self._coord

    @property
    def linear(self):
        return self._linear

    @property
    def swizzle(self):
        """The layout's Swizzle, or None."""
        return self._swizzle

    def size(self):
        """Number of coordinates: the product of the shape (a Python int when static)."""
        return _product(self._leaves)

    def cosize(self) -> int:
        """One past the largest offset over the whole shape (static layouts with non-negative
        strides): the elements a buffer must hold."""
        if not all(type(x) is int for x in self._leaves + self._strides) or type(self._linear) is not int:
            _err("cosize() needs a static shape, strides and linear offset")
        if any(s < 0 for s in self._strides):
            _err("cosize() needs non-negative strides")
        return self._linear + sum((n - 1) * s for n, s in zip(self._leaves, self._strides)) + 1

    def y_shape(self) -> tuple:
        """Extents of the open (y) slots: the register coordinates a call takes, in call order.
        Without ``coord`` every leaf is open."""
        return tuple(self._leaves[i] for i in self._open)

    def y_strides(self) -> tuple:
        """Strides of the open (y) slots, in the order of ``y_shape()``."""
        return tuple(self._strides[i] for i in self._open)

    # -- offsets ---------------------------------------------------------------------------
    def __call__(self, *coords):
        if len(coords) == 1 and isinstance(coords[0], tuple):
            coords = coords[0]
        terms, static = self._parts(coords)
        if self._swizzle is None:
            base = _sum_or_none(terms)
            return static if base is None else _add(base, static)
        return SwizzledSum(self._swizzle, terms)(static)

    def _parts(self, coords):
        """The unswizzled offset at ``coords`` as ([run-time terms], static int part)."""
        full = self._full_coords(coords)
        terms = [self._linear] + [_mul(c, s) for c, s in zip(full, self._strides)]
        return [t for t in terms if type(t) is not int], sum(t for t in terms if type(t) is int)

    def _full_coords(self, coords):
        """One coordinate per leaf, from the call's arguments."""
        if self._coord is not None or self._open != tuple(range(len(self._leaves))):
            if len(coords) != len(self._open):
                _err(f"this layout has {len(self._open)} open (opus.Y) coordinates; the call "
                     f"gave {len(coords)}")
            full = list(self._coord or [None] * len(self._leaves))
            for i, c in zip(self._open, coords):
                full[i] = self._checked(c, i)
            return full
        if len(coords) == len(self._leaves):
            return [self._checked(c, i) for i, c in enumerate(coords)]
        if len(coords) == len(self._modes):
            full, k = [], 0
            for c, m in zip(coords, self._modes):
                if isinstance(c, tuple):
                    if len(c) != len(m):
                        _err(f"coordinate {c!r} must have {len(m)} entries, as the mode {m!r}")
                    parts = c
                else:
                    _check_index(c, "coordinate")
                    if type(c) is int and all(type(x) is int for x in m) and not 0 <= c < _product(m):
                        _err(f"coordinate {c} is outside the mode {m!r} (0 .. {_product(m) - 1})")
                    parts = _unravel(c, m) if len(m) > 1 else (c,)
                full.extend(self._checked(p, k + j) for j, p in enumerate(parts))
                k += len(m)
            return full
        _err(f"the layout of shape {self._shape!r} takes {len(self._leaves)} coordinates (one "
             f"per leaf) or {len(self._modes)} (one per mode); the call gave {len(coords)}")

    def _checked(self, c, leaf):
        _check_index(c, "coordinate")
        n = self._leaves[leaf]
        if type(c) is int and type(n) is int and not 0 <= c < n:
            _err(f"coordinate {c} of leaf {leaf} is outside its extent {n} (0 .. {n - 1})")
        return c

    # -- new layouts -------------------------------------------------------------------------
    def __add__(self, off):
        """The same layout shifted by ``off`` elements."""
        return self._with(linear=_add(self._linear, _check_index(off, "offset")))

    def __radd__(self, off):
        return self.__add__(off)

    def _with(self, **changes):
        new = object.__new__(Layout)
        for k in Layout.__slots__:
            object.__setattr__(new, k, getattr(self, k))
        for k, v in changes.items():
            object.__setattr__(new, "_" + k, v)
        return new

    def swizzled(self, swizzle):
        """This layout with its offsets XOR-swizzled by ``swizzle`` (an ``opus.Swizzle``; None
        removes one): e.g. a register layout (``wg.layout_c``) written into a swizzled shared
        tile that a TMA store reads (``wg.layout_c((64, 1)).swizzled(opus.swizzle_bytes(128,
        opus.bf16))``). The swizzle applies to whole offsets, shifts included.

        :param swizzle: the swizzle, or None
        :type swizzle: Swizzle or None
        :returns: the swizzled layout
        :rtype: Layout
        """
        if swizzle is not None and not isinstance(swizzle, Swizzle):
            _err(f"Layout.swizzled takes an opus.Swizzle (opus.swizzle_bytes(...)) or None, got "
                 f"{_describe(swizzle)}")
        return self._with(swizzle=swizzle)

    def __getitem__(self, index):
        """Slice by top-level mode: ``u[i, :]`` fixes mode 0 at ``i`` (its term moves into the
        linear offset) and keeps mode 1; ``:`` keeps a mode whole."""
        if self._coord is not None or self._open != tuple(range(len(self._leaves))):
            _err("slicing a layout with fixed coordinates (coord=) or a y_order is not "
                 "supported: slice before partitioning")
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(self._modes):
            _err(f"a slice of a rank-{self.rank} layout needs {self.rank} entries, got {len(index)}")
        shape, strides, terms, k = [], [], [self._linear], 0
        for i, (ix, m) in enumerate(zip(index, self._modes)):
            st = self._strides[k:k + len(m)]
            if isinstance(ix, slice):
                if ix != slice(None):
                    _err(f"slice entry {i}: only ':' (the whole mode) or one coordinate")
                shape.append(self._shape[i])
                strides.append(st if isinstance(self._shape[i], tuple) else st[0])
            else:
                parts = _unravel(ix, m) if len(m) > 1 else (ix,)
                for j, p in enumerate(parts):
                    terms.append(_mul(self._checked(p, k + j), st[j]))
            k += len(m)
        if not shape:
            _err("a slice must keep at least one mode (call the layout for one offset)")
        return Layout(tuple(shape), tuple(strides), None, _sum(terms), self._swizzle)

    def __repr__(self):
        parts = [f"shape={self._shape!r}", f"stride={self.stride()!r}"]
        if self._coord is not None:
            parts.append(f"coord={self._coord!r}")
        if not (type(self._linear) is int and self._linear == 0):
            parts.append(f"linear={self._linear!r}")
        if self._swizzle is not None:
            parts.append(f"swizzle={self._swizzle!r}")
        return f"Layout({', '.join(parts)})"

    # carried through run-time loops and branches leaf by leaf (run-time entries)
    def __opus_flatten__(self):
        return [self._linear], lambda leaves: self._with(linear=leaves[0])

    def cached(self, vec=1):
        """This layout's per-issue offsets for accesses of ``vec`` elements, computed here, once
        (the original's ``layout_cached``): a ``CachedLayout`` that loads and stores use in place
        of the layout. Worth it where an offset costs instructions that a loop would repeat: a
        swizzled layout with run-time p-coordinates shifted per iteration (the XORs move out of
        the loop; the loop adds the shift). With static y-strides and no swizzle there is
        nothing to save (the per-issue deltas are immediates already).

        :param vec: the elements per access the cached offsets serve (the access's ``vec``)
        :type vec: int
        :returns: the cached form
        :rtype: CachedLayout
        :targets: all targets
        """
        return CachedLayout(self, vec)


def issue_starts(layout, vec):
    """[(y-coordinates of the issue's first element)] of ``layout`` accessed ``vec`` elements at
    a time along its last y (register) sub-dim, in row-major order."""
    ys = layout.y_shape()
    if not ys:
        return [()]
    if not all(type(n) is int for n in ys):
        _err(f"a layout-driven access needs static y (register) extents, got {ys!r}")
    if isinstance(vec, bool) or not isinstance(vec, int) or vec < 1:
        _err(f"vec must be a positive compile-time int, got {_describe(vec)}")
    if ys[-1] % vec:
        _err(f"vec={vec} does not divide the layout's last y extent {ys[-1]} (y shape {ys!r})")
    stride = layout.y_strides()[-1]
    if vec > 1 and not (type(stride) is int and stride == 1):
        _err(f"vec={vec}: the layout's last y sub-dim must be contiguous (stride 1) for vector "
             f"accesses; its stride is {stride if type(stride) is int else 'a run-time value'}")
    import itertools
    space = ys[:-1] + (ys[-1] // vec,)
    return [idx[:-1] + (idx[-1] * vec,) for idx in itertools.product(*map(range, space))]


def issue_offsets(layout, vec):
    """The element offset of each issue (``issue_starts``) of ``layout``. The thread's part
    (p-coordinates and shift) is computed once and each issue adds its y-part, a Python int
    when the y strides are static (the access's immediate offset). Swizzled, the thread's part
    is swizzled once and each issue's constant applied after it (``SwizzledSum``: exact, and
    where a carry may reach the swizzle's bits that issue's offset is swizzled whole); runs of
    2**base elements stay put."""
    starts = issue_starts(layout, vec)
    sw = layout.swizzle
    ystrides = layout.y_strides()
    if sw is not None and vec > 1 << sw.base:
        _err(f"vec={vec} crosses the swizzle's runs of {1 << sw.base} contiguous elements "
             f"({sw!r}): use vec <= {1 << sw.base}")
    if sw is not None and not all(type(st) is int for st in ystrides):
        return [layout(*ys) for ys in starts]     # a run-time y-stride: each issue's own base
    terms, static = layout._parts((0,) * len(ystrides))
    ys_part = [_sum([_mul(y, st) for y, st in zip(ys, ystrides)]) for ys in starts]
    if sw is not None:      # the thread's part swizzled once, each issue's constant after it
        at = SwizzledSum(sw, terms)
        return [at(static + y) for y in ys_part]
    base = _sum_or_none(terms)
    base = static if base is None else _add(base, static)
    return [_add(base, y) for y in ys_part]


class CachedLayout:
    """A layout's per-issue offsets, computed once where it is made (``Layout.cached(vec)``,
    ``make_layout(..., cached=vec)``; the original's ``layout_cached``). Loads and stores take
    it as they take a layout (with its ``vec``); the offsets are values defined where it was
    made, so a loop reuses them instead of recomputing them.

    ``c + off`` adds ``off`` to every cached offset (one run-time shift is carried through
    loops, not one per issue). For a swizzled layout the shift comes after the swizzle: it is
    the plain layout's shift only for multiples of the swizzle's period (a pipeline stage, a
    whole tile), so a static shift that is not one is an error. ``c(i, ...)`` is the offset of
    the issue at index ``(i, ...)`` of the vectorized issue space.

    :param layout: the layout whose issues it caches
    :type layout: Layout
    :param vec: the elements per access (the loads' and stores' ``vec``)
    :type vec: int
    :targets: all targets
    """
    __slots__ = ("layout", "vec", "_offsets", "_shift")

    def __init__(self, layout, vec=1):
        if not isinstance(layout, Layout):
            _err(f"cached needs a Layout, got {_describe(layout)}")
        self.layout, self.vec = layout, vec
        self._offsets = tuple(issue_offsets(layout, vec))
        self._shift = 0

    def offsets(self) -> tuple:
        """The offset of every issue, in issue order (shift included)."""
        return tuple(_add(o, self._shift) for o in self._offsets)

    def y_shape(self) -> tuple:
        return self.layout.y_shape()

    def y_strides(self) -> tuple:
        return self.layout.y_strides()

    @property
    def swizzle(self):
        return self.layout.swizzle

    def issue_shape(self) -> tuple:
        """The vectorized issue space: the y-shape with its last extent divided by ``vec``."""
        ys = self.layout.y_shape()
        return ys[:-1] + (ys[-1] // self.vec,) if ys else ()

    def __call__(self, *index):
        shape = self.issue_shape()
        if len(index) != len(shape) or not all(type(i) is int for i in index):
            _err(f"a cached layout is called with {len(shape)} static issue indices (issue space "
                 f"{shape!r}), got {index!r}")
        flat = 0
        for i, n in zip(index, shape):
            if not 0 <= i < n:
                _err(f"issue index {index!r} is outside the issue space {shape!r}")
            flat = flat * n + i
        return _add(self._offsets[flat], self._shift)

    def __add__(self, off):
        off = _check_index(off, "offset")
        sw = self.layout.swizzle
        if sw is not None and type(off) is int and off % sw.period:
            _err(f"a cached swizzled layout shifts after the swizzle: {off} is not a multiple of "
                 f"the swizzle's period {sw.period} (shift the layout before caching it)")
        return self._shifted(_add(self._shift, off))

    def __radd__(self, off):
        return self.__add__(off)

    def _shifted(self, shift):
        new = object.__new__(CachedLayout)
        new.layout, new.vec, new._offsets, new._shift = self.layout, self.vec, self._offsets, shift
        return new

    def __repr__(self):
        return f"CachedLayout({self.layout!r}, vec={self.vec}, shift={self._shift!r})"

    # only the shift is carried through loops and branches: the offsets are fixed values
    def __opus_flatten__(self):
        return [self._shift], lambda leaves: self._shifted(leaves[0])


def is_layout(x) -> bool:
    return isinstance(x, (Layout, CachedLayout))


def make_layout(*args, stride=None, coord=None, swizzle=None, cached=None):
    """A layout: coordinates -> element offset (``offset = sum coord_i * stride_i``), with
    static parts folded at trace time (docs/layouts.md).

    Forms: ``make_layout((128, 64))`` or ``make_layout(128, 64)`` (packed row-major strides
    (64, 1)); ``make_layout(shape, stride)``; ``make_layout(shape, stride, coord)``. Entries are
    Python ints (compile time) or run-time integer values; a shape may nest one level
    (``((3, 16), (4, 8))``: two x-dims split into sub-dims). ``coord`` fixes some leaves (a
    thread's p-coordinates) and leaves ``opus.Y`` at the others, which a call then supplies.

    Example: ``u = opus.make_layout((M, K), (lda, 1)); a = g.load(u(i, k))``.

    :param args: the shape (a tuple, or extents as separate ints), then optionally stride and
        coord
    :type args: tuple, or ints
    :param stride: strides with the shape's structure (default: packed row-major)
    :type stride: tuple or None
    :param coord: one entry per leaf: a fixed coordinate or ``opus.Y``
    :type coord: tuple or None
    :param swizzle: an XOR swizzle of the offsets (shared-memory tiles without bank conflicts)
    :type swizzle: Swizzle or None
    :param cached: an access width ``vec``: return the cached form (``Layout.cached(vec)``: the
        per-issue offsets computed here, once; for swizzled layouts used in loops)
    :type cached: int or None
    :returns: the layout: call it with coordinates for an offset; ``u + off`` shifts it;
        ``u[i, :]`` slices it; ``u.shape()``, ``u.stride()``, ``u.size()``, ``u.y_shape()``
    :rtype: Layout or CachedLayout
    :targets: all targets (static algebra: it emits only run-time index arithmetic)
    """
    if not args:
        _err("make_layout needs a shape")
    if isinstance(args[0], tuple):
        if len(args) > 3:
            _err(f"make_layout(shape, stride, coord) takes at most 3 arguments, got {len(args)}")
        shape = args[0]
        if len(args) >= 2:
            if stride is not None:
                _err("stride given twice (positionally and as stride=)")
            stride = args[1]
        if len(args) == 3:
            if coord is not None:
                _err("coord given twice (positionally and as coord=)")
            coord = args[2]
    else:
        if any(isinstance(a, tuple) for a in args):
            _err("make_layout(s0, s1, ...) takes extents; for (shape, stride) pass tuples")
        shape = tuple(args)
    layout = Layout(shape, stride, coord, 0, swizzle)
    return layout if cached is None else layout.cached(cached)


def zipped_divide(layout, tile) -> Layout:
    """Tile a layout: a rank-2 layout ``((t0, t1, ...), (n0, n1, ...))`` whose first mode is the
    position inside a tile and second the tile's index (row-major), as CuTe's zipped_divide.
    Each tile extent must divide the mode it tiles (static extents).

    ``zipped_divide(make_layout((128, 64)), (32, 16))((r, c), (ti, tj))`` is the offset of
    element (r, c) of tile (ti, tj) = ``(32 * ti + r) * 64 + 16 * tj + c``.

    :param layout: a flat layout without fixed coordinates
    :type layout: Layout
    :param tile: one extent per mode, each dividing it
    :type tile: tuple of ints
    :returns: the tiled layout ((tile extents), (tile counts))
    :rtype: Layout
    :targets: all targets
    """
    if not isinstance(layout, Layout):
        _err(f"zipped_divide needs a Layout, got {_describe(layout)}")
    if layout.coord is not None or any(len(m) != 1 for m in layout._modes):
        _err("zipped_divide needs a flat layout without fixed coordinates")
    if layout.swizzle is not None:
        _err("zipped_divide of a swizzled layout: tile the plain layout, then swizzle")
    tile = tuple(tile) if isinstance(tile, (tuple, list)) else (tile,)
    if len(tile) != layout.rank:
        _err(f"the tile {tile!r} needs one extent per mode of the rank-{layout.rank} layout")
    inner, outer, s_in, s_out = [], [], [], []
    for t, n, s in zip(tile, layout._leaves, layout._strides):
        if type(t) is not int or t <= 0:
            _err(f"tile extent {t!r} must be a positive Python int")
        if type(n) is int and n % t:
            _err(f"tile extent {t} does not divide the layout's extent {n}")
        inner.append(t)
        outer.append(n // t)
        s_in.append(s)
        s_out.append(_mul(s, t))
    return Layout((tuple(inner), tuple(outer)), (tuple(s_in), tuple(s_out)), None, layout.linear)
