"""The tensor memory accelerator (TMA) and mbarriers (NVIDIA sm_90), in kernels.

Pieces, lowest first (semantics: ir/ops.py, "Async barriers and the tensor memory accelerator"):

* ``tmap.declare(dtype, box, swizzle=0)``: what the kernel needs of an ``opus.TensorMap``
  parameter (its element type and box, fixed at trace time: they size shared tiles and count
  bytes); launches check the map against it.
* ``opus.alloc_mbarriers(n)``: n mbarriers in shared memory; each ``bar`` has ``init(count)``,
  ``arrive()``, ``arrive_expect_tx(nbytes)``, ``expect_tx(nbytes)``, ``try_wait(parity)`` and
  ``wait(parity)``.
* ``opus.tma_load(tmap, dst, coords, bar)``, ``opus.tma_store(tmap, src, coords)``,
  ``opus.tma_commit()``, ``opus.tma_wait(n, read)``, ``opus.fence_proxy_async()``,
  ``opus.fence_mbarrier_init()``: one thread's asynchronous copies.
* ``opus.TmaPipeline(maps, stages)``: the N-stage producer/consumer ring every TMA kernel
  writes (shared tiles, a "full" and an "empty" mbarrier per stage, stage and phase from the
  tile index), so a pipelined loop over K tiles is a few lines::

      pipe = opus.TmaPipeline(a, stages=S)
      for j in range(S - 1):                             # prologue: fill S - 1 stages
          pipe.load(j, (row0, j * BK), pred=j < k_tiles)
      for k in opus.range(k_tiles):
          nxt = k + S - 1
          pipe.load(nxt, (row0, nxt * BK), pred=nxt < k_tiles)  # refill the oldest stage
          tile = pipe.wait(k)                             # tile k has landed
          ...                                             # read it (every thread)
          pipe.release(k)                                 # this thread is done with it

Coordinates, boxes and shapes are in the tensor's order (outermost first); the PTX order
(innermost first) is the renderer's business.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import PointerType, Value, scalar_of, lanes_of, TENSOR_MAP
from ..runtime.tensor_map import CopyGeometry, TensorMapNeed, box_problem
from .context import ctx, TraceError
from .memory import Smem, alloc_smem, ptr_add, _describe, _shared_pointer
from .values import emit, emit1, as_value, cast, convert_implicitly, is_static, to_bool

__all__ = ["TensorMapArg", "MBarrier", "MBarriers", "alloc_mbarriers", "tma_load", "tma_store",
           "tma_commit", "tma_wait", "fence_proxy_async", "fence_mbarrier_init", "TmaPipeline"]

_TX_LIMIT = 1 << 20  # mbarrier arrival and transaction counts stay below 2**20 (PTX ISA)
_SMEM_ALIGN = 128    # cp.async.bulk.tensor's shared-memory operand alignment


def _err(msg):
    raise TraceError(msg)


def _require(what):
    ctx().target.require_tma(what)


def _static_int(x, what):
    if isinstance(x, bool) or not isinstance(x, int):
        _err(f"{what} must be a compile-time int, got {_describe(x)}")
    return x


def _i32(x, what, lo=None, hi=None):
    """``x`` (a Python int, range-checked, or a run-time integer that widens to i32) as an i32
    value."""
    if isinstance(x, int) and not isinstance(x, bool):
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            _err(f"{what} must be {lo} to {hi}, got {x}")
        return as_value(x, dt.i32)
    if not _is_int_value(x):
        _err(f"{what} must be an integer (compile-time or run-time), got {_describe(x)}")
    return convert_implicitly(x, dt.i32, what)


def _is_int_value(x):
    return (isinstance(x, Value) and not isinstance(x.type, PointerType) and x.type != TENSOR_MAP
            and lanes_of(x.type) == 1 and scalar_of(x.type).is_int)


def _parity(p):
    """A phase parity: any integer, of which only bit 0 counts (so any width is exact)."""
    if _is_int_value(p) and scalar_of(p.type) is not dt.i32:
        p = cast(p & 1, dt.i32)
    return _i32(p, "parity")


def _when(cond, body):
    """Run ``body()`` (which only emits side effects) where ``cond`` holds: a run-time ``if``
    without results, or, for a compile-time condition, body or nothing."""
    if is_static(cond):
        if cond:
            body()
        return
    cond = to_bool(cond, "condition")
    c = ctx()
    b = c.builder
    blocks = [b.new_block(), b.new_block()]
    for blk, fill in zip(blocks, (body, lambda: None)):
        b.push(blk)
        c.dynamic_depth += 1
        try:
            fill()
            emit("yield", [])
        finally:
            c.dynamic_depth -= 1
            b.pop()
    emit("if", [cond], [], regions=blocks)


def _first_thread():
    """True in the block's first thread (thread_id (0, 0, 0))."""
    from .threads import thread_id_x, thread_id_y, thread_id_z
    return (thread_id_x() == 0) & (thread_id_y() == 0) & (thread_id_z() == 0)


def _block_threads():
    from .threads import block_size_x, block_size_y, block_size_z
    return block_size_x() * block_size_y() * block_size_z()


# -- tensor map parameters -------------------------------------------------------------------

class TensorMapArg(CopyGeometry):
    """An ``opus.TensorMap`` kernel parameter, as the kernel sees it: opaque, used by
    ``opus.tma_load`` / ``opus.tma_store`` / ``opus.TmaPipeline`` once ``declare`` has said
    what the kernel needs of it (then ``copy_shape``, ``copy_bytes``, ``layout()``)."""

    __slots__ = ("value", "name")

    def __init__(self, value, name):
        self.value, self.name = value, name

    def declare(self, dtype, box, swizzle=0, element_strides=None):
        """State the map's element type, box (elements per dimension, outermost first),
        swizzle (bytes) and element strides this kernel is written for; launches refuse a map
        that differs. Returns the parameter itself. Declaring twice must say the same."""
        if not isinstance(dtype, DType):
            _err(f"{self.name}.declare: dtype must be an opus dtype, got {_describe(dtype)}")
        dtype = ctx().target.require_dtype(dtype, "TMA tiles")
        box = _static_tuple(box, f"{self.name}.declare: box")
        es = (1,) * len(box) if element_strides is None else _static_tuple(
            element_strides, f"{self.name}.declare: element_strides")
        if len(es) != len(box):
            _err(f"{self.name}.declare: element_strides has {len(es)} entries, box {len(box)}")
        why = box_problem(dtype, box, swizzle, es)
        if why is not None:
            _err(f"{self.name}.declare: {why}")
        need = TensorMapNeed(dtype, box, swizzle, es)
        known = ctx().tensor_maps.setdefault(self.value, need)
        if known != need:
            _err(f"{self.name}.declare{(dtype.name, box, swizzle, es)} contradicts its earlier "
                 f"declaration {(known.dtype.name, known.box, known.swizzle, known.element_strides)}")
        return self

    def need(self) -> TensorMapNeed:
        known = ctx().tensor_maps.get(self.value)
        if known is None:
            _err(f"TensorMap parameter {self.name!r} is used before the kernel declared what it "
                 f"holds: call {self.name}.declare(dtype, box) first (e.g. "
                 f"{self.name}.declare(opus.f16, (64, 64)))")
        return known

    @property
    def dtype(self) -> DType:
        return self.need().dtype

    @property
    def box(self) -> tuple:
        return self.need().box

    def layout(self):
        """The layout of one landed box in shared memory (row-major over ``copy_shape``, with
        the map's swizzle), for reading it with a view: ``tile.load(tmap.layout()(i, j))``."""
        from .layout import make_layout, swizzle_bytes
        n = self.need()
        sw = swizzle_bytes(n.swizzle, n.dtype) if n.swizzle else None
        return make_layout(self.copy_shape, swizzle=sw)

    def __repr__(self):
        return f"<TensorMap parameter {self.name}>"


def _static_tuple(x, what):
    if isinstance(x, int) and not isinstance(x, bool):
        x = (x,)
    if not isinstance(x, tuple) or any(isinstance(v, bool) or not isinstance(v, int) for v in x):
        _err(f"{what} must be a tuple of compile-time ints, got {_describe(x)}")
    return x


def _tensor_map(t, what):
    if not isinstance(t, TensorMapArg):
        _err(f"{what} needs an opus.TensorMap kernel parameter, got {_describe(t)}")
    return t


# -- mbarriers -----------------------------------------------------------------------------------

class MBarrier:
    """One mbarrier in shared memory (from ``opus.alloc_mbarriers``): phases complete when the
    expected arrivals and the expected transaction bytes are in (ir/ops.py)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr

    def init(self, count):
        """Start phase 0 expecting ``count`` arrivals per phase (one thread does it, then
        ``opus.fence_mbarrier_init()`` and ``opus.sync_threads()`` before others use it)."""
        _require("mbarrier init")
        emit("mbarrier_init", [self.ptr, _i32(count, "mbarrier count", 1, _TX_LIMIT - 1)])

    def arrive(self):
        """This thread arrives (one of the phase's expected arrivals)."""
        _require("mbarrier arrive")
        emit("mbarrier_arrive", [self.ptr], [], {"expect_tx": False})

    def arrive_expect_tx(self, nbytes):
        """Expect ``nbytes`` more transaction bytes in this phase, then arrive (the producer's
        step before issuing TMA loads that complete on this barrier)."""
        _require("mbarrier arrive.expect_tx")
        n = _i32(nbytes, "expect_tx bytes", 0, _TX_LIMIT - 1)
        emit("mbarrier_arrive", [self.ptr, n], [], {"expect_tx": True})

    def expect_tx(self, nbytes):
        """Expect ``nbytes`` more transaction bytes in this phase, without arriving."""
        _require("mbarrier expect_tx")
        emit("mbarrier_expect_tx", [self.ptr, _i32(nbytes, "expect_tx bytes", 0, _TX_LIMIT - 1)])

    def try_wait(self, parity):
        """Whether the phase of parity ``parity & 1`` has completed (does not block)."""
        _require("mbarrier try_wait")
        return emit1("mbarrier_try_wait", [self.ptr, _parity(parity)], dt.bool_)

    def wait(self, parity):
        """Block until the phase of parity ``parity & 1`` has completed. A barrier's phases
        alternate parity, starting at 0: the k-th use of a barrier waits for parity k & 1."""
        _require("mbarrier wait")
        emit("mbarrier_wait", [self.ptr, _parity(parity)])

    def __opus_flatten__(self):
        return [self.ptr], lambda leaves: MBarrier(*leaves)


class MBarriers:
    """``n`` mbarriers in shared memory: ``bars[i]`` (a compile-time or run-time index) is one."""

    __slots__ = ("ptr", "n")

    def __init__(self, ptr, n):
        self.ptr, self.n = ptr, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if isinstance(i, int) and not isinstance(i, bool) and not 0 <= i < self.n:
            _err(f"mbarrier index {i} is outside 0..{self.n - 1}")
        return MBarrier(ptr_add(self.ptr, i))

    def __opus_flatten__(self):
        return [self.ptr], lambda leaves: MBarriers(leaves[0], self.n)


def alloc_mbarriers(n=1):
    """``n`` mbarriers in shared memory (8 bytes each), uninitialised: one thread calls
    ``bars[i].init(count)``, then ``opus.fence_mbarrier_init()`` and ``opus.sync_threads()``.

    :param n: how many
    :type n: int (compile-time)
    :returns: the barriers: ``bars[i]`` has ``init``, ``arrive``, ``arrive_expect_tx``,
        ``expect_tx``, ``try_wait`` and ``wait``
    :rtype: MBarriers
    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("opus.alloc_mbarriers")
    n = _static_int(n, "alloc_mbarriers count")
    if n < 1:
        _err(f"alloc_mbarriers needs at least one barrier, got {n}")
    return MBarriers(alloc_smem(dt.u64, n, align=8).ptr, n)


def _barrier(bar, what):
    if not isinstance(bar, MBarrier):
        hint = "; index the array: bars[i]" if isinstance(bar, MBarriers) else ""
        _err(f"{what} needs one mbarrier (from opus.alloc_mbarriers), got {_describe(bar)}{hint}")
    return bar.ptr


# -- copies ----------------------------------------------------------------------------------------

def _shared_tile(x, dtype, what):
    """The shared pointer of a TMA copy's shared side, checked for the map's element type and,
    where it is visible at trace time, the 128-byte alignment."""
    p = _shared_pointer(x, what, global_hint="TMA copies between a tensor map's tensor and "
                                               "shared memory")
    if p.type.elem is not dtype:
        _err(f"{what}: the shared tile holds {p.type.elem.name} but the tensor map was declared "
             f"with {dtype.name} elements")
    if p.owner is not None and p.owner.kind == "smem_alloc" and p.owner.attrs["align"] < _SMEM_ALIGN:
        _err(f"{what}: TMA needs its shared tile 128-byte aligned; allocate it with "
             f"opus.alloc_smem(..., align=128) (or more for swizzled tiles)")
    return p


def _coords(coords, rank, what, dtype=None):
    if isinstance(coords, (int, Value)) and not isinstance(coords, bool):
        coords = (coords,)
    if not isinstance(coords, (tuple, list)) or len(coords) != rank:
        _err(f"{what} takes {rank} coordinate(s) (one per dimension of the map, outermost first), "
             f"got {_describe(coords)}")
    inner = coords[-1]
    if dtype is not None and type(inner) is int and (inner * dtype.itemsize) % 16:
        from ..targets.nvidia import tma_box_start_problem
        _err(tma_box_start_problem(what, inner, dtype))
    return [_i32(c, f"{what} coordinate") for c in coords]




def tma_load(tmap, dst, coords, bar):
    """Copy the box of ``tmap`` at ``coords`` into the shared tile ``dst``, asynchronously:
    its bytes complete on ``bar`` (whose phase must expect them: ``bar.arrive_expect_tx``), and
    every thread may read ``dst`` after its ``bar.wait(parity)``. Box elements outside the
    tensor land as zeros. Each thread that executes it issues one copy: call it from one thread.

    :param tmap: the map (an ``opus.TensorMap`` parameter, declared)
    :type tmap: TensorMapArg
    :param dst: the shared tile: ``tmap.copy_bytes`` bytes, 128-byte aligned
    :type dst: Smem or run-time shared pointer
    :param coords: the box's first element, one coordinate per dimension, outermost first; the
        innermost times the element size must be a multiple of 16 bytes (negative ones too)
    :type coords: tuple of run-time integers or ints
    :param bar: the mbarrier the copy completes on
    :type bar: MBarrier
    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("TMA loads (cp.async.bulk.tensor)")
    need = _tensor_map(tmap, "tma_load").need()
    p = _shared_tile(dst, need.dtype, "tma_load")
    b = _barrier(bar, "tma_load")
    emit("tma_load", [tmap.value, p, b] + _coords(coords, len(need.box), "tma_load", need.dtype))


def tma_store(tmap, src, coords):
    """Copy the shared tile ``src`` into the box of ``tmap`` at ``coords``, asynchronously
    (elements outside the tensor are not written). Before it: every thread's
    ``opus.fence_proxy_async()`` after writing ``src``, then ``opus.sync_threads()``; after it,
    ``opus.tma_commit()`` and ``opus.tma_wait(...)`` before ``src`` is written again or the
    kernel ends. Each thread that executes it issues one copy: call it from one thread.

    :param tmap: the map (an ``opus.TensorMap`` parameter, declared)
    :type tmap: TensorMapArg
    :param src: the shared tile, 128-byte aligned, in the layout a tma_load would give
    :type src: Smem or run-time shared pointer
    :param coords: the box's first element, one coordinate per dimension, outermost first
    :type coords: tuple of run-time integers or ints
    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("TMA stores (cp.async.bulk.tensor)")
    need = _tensor_map(tmap, "tma_store").need()
    p = _shared_tile(src, need.dtype, "tma_store")
    cs = _coords(coords, len(need.box), "tma_store", need.dtype)
    from ..targets.nvidia import tma_store_start_problem
    why = tma_store_start_problem([c for c in cs if type(c) is int])
    if why is not None:
        _err(why)
    emit("tma_store", [tmap.value, p] + cs)


def tma_commit():
    """Close this thread's group of TMA stores issued since the last commit
    (cp.async.bulk.commit_group); ``opus.tma_wait`` counts such groups.

    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("cp.async.bulk.commit_group")
    emit("bulk_commit_group")


def tma_wait(n=0, read=False):
    """Wait until at most ``n`` of this thread's committed TMA store groups are pending
    (cp.async.bulk.wait_group): with ``read=True`` until their shared sources have been read
    (the tiles may be written again), else until their global writes are done.

    :param n: groups that may stay pending
    :type n: int (compile-time)
    :param read: wait only for the reads of the shared sources
    :type read: bool
    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("cp.async.bulk.wait_group")
    n = _static_int(n, "tma_wait n")
    if not 0 <= n <= 63:
        _err(f"tma_wait n must be 0 to 63, got {n}")
    if not isinstance(read, bool):
        _err(f"tma_wait read must be a compile-time bool, got {_describe(read)}")
    emit("bulk_wait_group", [], [], {"n": n, "read": read})


def fence_proxy_async():
    """Make this thread's shared-memory writes so far visible to TMA reads issued after it
    (fence.proxy.async.shared::cta): every thread that wrote a tile calls it before the
    ``opus.sync_threads()`` that precedes the ``opus.tma_store`` of the tile.

    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("fence.proxy.async")
    emit("fence", [], [], {"kind": "proxy_async"})


def fence_mbarrier_init():
    """Make this thread's mbarrier inits visible to TMA completions
    (fence.mbarrier_init.release.cluster); follow it with ``opus.sync_threads()``.

    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """
    _require("fence.mbarrier_init")
    emit("fence", [], [], {"kind": "mbarrier_init"})


# -- the pipeline ----------------------------------------------------------------------------------

def _align_for(swizzle):
    """Alignment of a tile whose swizzle pattern (address bits 4.. XORed with bits 7..) must
    match the tile's own offsets: the pattern repeats every 2**(7 + bits) bytes."""
    return {0: _SMEM_ALIGN, 32: 256, 64: 512, 128: 1024}[swizzle]


class TmaPipeline:
    """An N-stage TMA ring for a loop over tiles: ``stages`` shared tiles per map, and per stage
    a "full" mbarrier (the copies landed) and an "empty" one (its consumers are done). Tile ``k``
    lives in stage ``k % stages`` and waits on phase ``k // stages``, so a loop needs only its
    tile index: ``load(k, coords)`` (the producer: the block's first thread waits until the
    stage is empty, expects the bytes and issues the copies), ``wait(k)`` (a consumer: returns
    the landed tile(s)), ``release(k)`` (a consumer is done with tile k). Making one allocates
    and initialises everything (it ends with a block barrier), so every thread of the block must
    make it, at the same place. The module docstring of opus.lang.tma has the whole loop.

    :param maps: the map, or a tuple of maps loaded together per stage (A and B of a GEMM), each
        an ``opus.TensorMap`` parameter that has been declared
    :type maps: TensorMapArg or tuple of TensorMapArg
    :param stages: how many tiles are in flight at most (>= 1)
    :type stages: int (compile-time)
    :param consumers: arrivals that release a stage: how many threads call ``release`` per tile
        (None: every thread of the block)
    :type consumers: int or run-time integer or None
    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950
    """

    def __init__(self, maps, stages, consumers=None):
        _require("TmaPipeline")
        self.single = not isinstance(maps, (tuple, list))
        self.maps = [_tensor_map(m, "TmaPipeline") for m in ([maps] if self.single else maps)]
        if not self.maps:
            _err("TmaPipeline needs at least one tensor map")
        self.stages = _static_int(stages, "TmaPipeline stages")
        if self.stages < 1:
            _err(f"TmaPipeline needs at least one stage, got {self.stages}")
        self.stage_bytes = sum(m.copy_bytes for m in self.maps)
        if self.stage_bytes >= _TX_LIMIT:
            _err(f"one stage moves {self.stage_bytes} bytes; an mbarrier counts less than 2**20")
        self.bases, self.strides = [], []
        for m in self.maps:
            align = _align_for(m.need().swizzle)
            stride = -(-m.copy_bytes // align) * align // m.dtype.itemsize  # keeps each aligned
            self.bases.append(alloc_smem(m.dtype, stride * self.stages, align=align).ptr)
            self.strides.append(stride)
        self.full = alloc_mbarriers(self.stages)
        self.empty = alloc_mbarriers(self.stages)
        count = _block_threads() if consumers is None else consumers

        def init():
            for s in range(self.stages):
                self.full[s].init(1)
                self.empty[s].init(count)
            fence_mbarrier_init()
        self.producer = _first_thread()
        _when(self.producer, init)
        from .threads import sync_threads
        sync_threads()

    def _stage(self, k):
        """(stage index, phase parity) of tile k (k >= 0: computed unsigned, so a power-of-two
        stage count is a mask and a shift)."""
        if isinstance(k, int) and not isinstance(k, bool):
            if k < 0:
                _err(f"TmaPipeline tile index must be >= 0, got {k}")
            return k % self.stages, (k // self.stages) % 2
        if not (_is_int_value(k) and scalar_of(k.type) is dt.u32):
            k = _i32(k, "TmaPipeline tile index")
        ku = cast(k, dt.u32)
        return (cast(ku % self.stages, dt.i32), cast((ku // self.stages) & 1, dt.i32))

    def _views(self, s):
        views = [Smem(ptr_add(b, s * st)) for b, st in zip(self.bases, self.strides)]
        return views[0] if self.single else tuple(views)

    def tiles(self, k):
        """The shared tile(s) of tile ``k``'s stage (one view per map), landed or not."""
        return self._views(self._stage(k)[0])

    def load(self, k, coords, pred=True):
        """Producer: copy tile ``k`` (at ``coords``: one tuple per map, or one tuple for a single
        map) into its stage, issued by the block's first thread once the stage's previous tile
        was released. ``pred`` false skips it (a tile past the end).

        :param k: the tile index (0, 1, 2, ... in the order of the loop)
        :param coords: the box coordinates per map, outermost first
        :param pred: whether to load it (a compile-time or run-time bool)
        """
        per_map = [coords] if self.single else list(coords)
        if len(per_map) != len(self.maps):
            _err(f"TmaPipeline.load takes one coordinate tuple per map ({len(self.maps)}), got "
                 f"{len(per_map)}")
        s, parity = self._stage(k)
        tiles = self._views(s)
        tiles = [tiles] if self.single else list(tiles)

        def issue():
            self.empty[s].wait(parity ^ 1)  # tile k - stages released (at once for k < stages)
            self.full[s].arrive_expect_tx(self.stage_bytes)
            for m, tile, c in zip(self.maps, tiles, per_map):
                tma_load(m, tile, c, self.full[s])
        cond = self.producer
        if not is_static(pred):
            cond = cond & to_bool(pred, "TmaPipeline.load pred")
        elif not pred:
            return
        _when(cond, issue)

    def wait(self, k):
        """Consumer: wait until tile ``k`` has landed; returns its shared tile (a tuple of them
        for several maps), laid out as ``tmap.layout()`` says."""
        s, parity = self._stage(k)
        self.full[s].wait(parity)
        return self._views(s)

    def release(self, k):
        """Consumer: this thread is done reading tile ``k`` (its stage may be refilled)."""
        s, _ = self._stage(k)
        self.empty[s].arrive()
