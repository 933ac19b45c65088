"""x/p/y: a tile spread over threads (the original's p_dim/y_dim, from ck_tile; docs/layouts.md).

A tile's x-dims (its own dimensions) are each split into sub-dims that are either p (spread
over threads: each thread has one coordinate there) or y (held in one thread's registers). The
guide's 48x32 tile read by 64 threads, 8 contiguous elements each:

    shape = (3, 16, 4, 8)             tensor [48, 32] = [[3, 16], [4, 8]]
    dim   = ((Y, P), (P, Y))          y0 = 3 repeats, p0 = 16 rows, p1 = 4 threads per row, y1 = 8

``partition(adaptor, x_stride)`` gives the thread's layout: called with (y0, y1) it is the offset
of that register element. An adaptor is any object with ``shape()`` (flat sub-dims) and ``dim()``
(tags per x-dim); ``Tile(shape, dim)`` makes one from data.
"""
from __future__ import annotations

from .context import TraceError
from .layout import Layout, Y, packed_strides, _mul, _product, _unravel, _describe

__all__ = ["P", "Y", "Tile", "unfold_x_stride", "unfold_p_coord", "p_shape", "y_shape",
           "partition"]


class _PTag:
    """``opus.P``: the tag of a sub-dim spread over threads in an x/p/y description.

    :targets: all targets
    """
    __slots__ = ()

    def __repr__(self):
        return "opus.P"

    def __reduce__(self):
        return "P"


P = _PTag()


def _err(msg):
    raise TraceError(msg)


def _groups(dim, shape):
    """[(tags, sub-shape)] per x-dim, checked against each other."""
    if not isinstance(dim, tuple) or not dim:
        _err(f"dim must be a tuple with one tuple of opus.P/opus.Y tags per x-dim, got "
             f"{_describe(dim)}")
    shape = tuple(shape)
    groups, k = [], 0
    for i, tags in enumerate(dim):
        tags = tags if isinstance(tags, tuple) else (tags,)
        if not tags or any(t is not P and t is not Y for t in tags):
            _err(f"dim[{i}] = {tags!r}: each entry must be opus.P or opus.Y")
        groups.append((tags, shape[k:k + len(tags)]))
        k += len(tags)
    if k != len(shape):
        _err(f"dim {dim!r} has {k} sub-dims; the shape {shape!r} has {len(shape)}")
    return groups


def unfold_x_stride(dim, shape, x_stride) -> tuple:
    """A stride per sub-dim: packed row-major within its x-dim, scaled by that x-dim's stride.

    ``unfold_x_stride(((Y, P), (P, Y)), (3, 16, 4, 8), (32, 1)) == (512, 32, 8, 1)``

    :param dim: opus.P/opus.Y tags, one tuple per x-dim
    :type dim: tuple of tuples
    :param shape: the flat sub-dim extents
    :type shape: tuple of ints
    :param x_stride: one stride per x-dim
    :type x_stride: tuple of ints or run-time integers
    :returns: one stride per sub-dim
    :rtype: tuple
    :targets: all targets
    """
    groups = _groups(dim, shape)
    x_stride = tuple(x_stride)
    if len(x_stride) != len(groups):
        _err(f"x_stride {x_stride!r} needs one entry per x-dim ({len(groups)})")
    out = []
    for (tags, sub), xs in zip(groups, x_stride):
        out.extend(_mul(s, xs) for s in packed_strides(sub))
    return tuple(out)


def unfold_p_coord(dim, p_coord) -> tuple:
    """A coord per sub-dim: the p-coordinates at the P slots (in order), ``opus.Y`` at the y
    slots: ``unfold_p_coord(((Y, P), (P, Y)), (r, c)) == (Y, r, c, Y)``.

    :param dim: opus.P/opus.Y tags, one tuple per x-dim
    :type dim: tuple of tuples
    :param p_coord: the thread's coordinate on each p sub-dim, in order
    :type p_coord: tuple of ints or run-time integers
    :returns: the coord tuple for ``make_layout(shape, stride, coord)``
    :rtype: tuple
    :targets: all targets
    """
    tags = [t for group in dim for t in (group if isinstance(group, tuple) else (group,))]
    p_coord = tuple(p_coord)
    n_p = sum(t is P for t in tags)
    if len(p_coord) != n_p:
        _err(f"p_coord {p_coord!r} has {len(p_coord)} entries; dim {dim!r} has {n_p} p sub-dims")
    it = iter(p_coord)
    return tuple(next(it) if t is P else Y for t in tags)


def _pick(dim, shape, tag):
    return tuple(s for tags, sub in _groups(dim, shape) for t, s in zip(tags, sub) if t is tag)


def p_shape(dim, shape) -> tuple:
    """Extents of the p sub-dims, in order (the thread grid the tile is spread over).

    :param dim: opus.P/opus.Y tags, one tuple per x-dim
    :type dim: tuple of tuples
    :param shape: the flat sub-dim extents
    :type shape: tuple of ints
    :returns: the p extents
    :rtype: tuple
    :targets: all targets
    """
    return _pick(dim, shape, P)


def y_shape(dim, shape) -> tuple:
    """Extents of the y sub-dims, in order (each thread's registers).

    :param dim: opus.P/opus.Y tags, one tuple per x-dim
    :type dim: tuple of tuples
    :param shape: the flat sub-dim extents
    :type shape: tuple of ints
    :returns: the y extents
    :rtype: tuple
    :targets: all targets
    """
    return _pick(dim, shape, Y)


class Tile:
    """An adaptor from data: ``Tile((3, 16, 4, 8), ((Y, P), (P, Y)))``.

    :param shape: the flat sub-dim extents
    :type shape: tuple of ints
    :param dim: opus.P/opus.Y tags, one tuple per x-dim
    :type dim: tuple of tuples
    :targets: all targets
    """
    __slots__ = ("_shape", "_dim")

    def __init__(self, shape, dim):
        _groups(dim, shape)
        self._shape, self._dim = tuple(shape), dim

    def shape(self):
        return self._shape

    def dim(self):
        return self._dim

    def __repr__(self):
        return f"Tile({self._shape!r}, {self._dim!r})"


def _adaptor_parts(adaptor):
    try:
        shape, dim = adaptor.shape(), adaptor.dim()
    except AttributeError:
        _err(f"an adaptor needs shape() and dim() methods, got {_describe(adaptor)}")
    _groups(dim, shape)
    return tuple(shape), dim


def default_p_coord(ps) -> tuple:
    """The calling thread's p-coordinates: its lane unravelled row-major over ``ps`` when the
    p-space has one point per lane of a warp, else its linear index in the block."""
    from .threads import lane_id, thread_id_x, thread_id_y, thread_id_z, block_size_x, \
        block_size_y, warp_size
    n = _product(ps)
    if n == warp_size():
        linear = lane_id()
    else:
        linear = thread_id_x() + block_size_x() * (thread_id_y() + block_size_y() * thread_id_z())
    return _unravel(linear, ps)


def partition(adaptor, x_stride=None, p_coord=None) -> Layout:
    """The calling thread's layout of a tile spread over threads: call it with the y (register)
    coordinates for an element offset.

    :param adaptor: an object with ``shape()`` (flat sub-dims) and ``dim()`` (opus.P/opus.Y tags
        per x-dim), e.g. ``opus.Tile(shape, dim)`` or a matrix atom's operand
    :type adaptor: Tile or any object with shape() and dim()
    :param x_stride: one stride per x-dim (default: the tile packed row-major)
    :type x_stride: tuple of ints or run-time integers, or None
    :param p_coord: the thread's p-coordinates (default: its lane, or its index in the block,
        unravelled row-major over the p-shape)
    :type p_coord: tuple of ints or run-time integers, or None
    :returns: a Layout with the tile's sub-dims as leaves and the p-slots fixed
    :targets: all targets
    """
    shape, dim = _adaptor_parts(adaptor)
    if x_stride is None:
        x_shape = tuple(_product(sub) for _, sub in _groups(dim, shape))
        x_stride = packed_strides(x_shape)
    stride = unfold_x_stride(dim, shape, x_stride)
    if p_coord is None:
        p_coord = default_p_coord(p_shape(dim, shape))
    coord = unfold_p_coord(dim, p_coord)
    return Layout(shape, stride, coord)
