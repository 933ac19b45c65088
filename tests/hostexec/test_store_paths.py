"""Paths of codegen/cemit.py's ``render_store`` and ``render_load`` that the differential
programs do not generate, run on the host against hand values and numpy (issue 17.4: the
survivors of their mutants):

* a bounded vector store whose 64-bit offset, or 32-bit offset plus 64-bit scalar offset
  (soffset), lies past 2^32 elements: the whole-vector test must compare in 64 bits (a 32-bit
  compare of the offset taken modulo 2^32 would find it in range and store). The pointer is
  moved 2^32 elements back, so such a store would land in the array and show;
* an unbounded store with a scalar offset, whose element offset the emitter adds up first
  (CUDA, and HIP, whose unbounded global stores are the base emitter's);
* bounded vector loads and stores with a cache hint (PTX ld/st.global.cs: CUDA only, HIP's
  bounded global accesses are buffer instructions with the hint in their aux bits) at the
  bound: the lanes the bound splits are accessed one element at a time, each at its own
  address and with its own width (the host shim checks the alignment PTX requires);
* loads with a scalar offset and a negative element offset, bounded (out of range whatever
  their sum) and not, and a 64-bit scalar offset past 2^32 elements (never through
  readfirstlane, which takes 32 bits).
"""
import functools

import numpy as np
import pytest

import opus
from opus import f32, i8, i32, i64
from hostexec import HostExecError, HostProgram, Launch

STREAMING = opus.Cache.STREAMING


def _build(target, kernels, tmp_path):
    """One host program holding ``kernels`` (name -> kernel) for ``target``."""
    prog = HostProgram(target)
    ks = {name: prog.add(k.specialize(target=target)) for name, k in kernels.items()}
    prog.build(tmp_path)
    return prog, ks


# -- bounded stores past 2^32 elements ---------------------------------------------------------

@opus.kernel
def shifted_stores(x: opus.Ptr[f32], y: opus.Ptr[f32], z: opus.Ptr[f32], back: i64, base: i64,
                   soff: i64, n: i32):
    t = opus.thread_id_x()
    v = opus.load(x, t * 4, vec=4)
    opus.store(y - back, v, base + t * 4, vec=4, bound=n)            # a 64-bit offset
    opus.store(z - back, v, t * 4, vec=4, bound=n, soffset=soff)     # 32-bit + 64-bit soffset


def test_bounded_stores_past_2_to_the_32_elements_write_nothing(tmp_path):
    """ir/ops.py: element off (+ soffset) + i of a bounded store is written only if it is
    below the bound. Far: the pointers are 2^32 elements before y and z and the offsets
    2^32 + 4t, so every element lies past the bound 8 and nothing is written, although the
    address is y's (z's) own 4t: an offset taken modulo 2^32 (4t <= 8 - 4) would store there.
    Near, without the shift: offsets 4 + 4t and the bound 11, the second vector written per
    element up to the bound."""
    prog, ks = _build("sm_90a", {"k": shifted_stores}, tmp_path)
    x1 = np.arange(1, 9, dtype=np.float32) * 1.5
    x2 = x1.copy()
    far_y, far_z = np.full(12, -1, np.float32), np.full(12, -1, np.float32)
    near_y, near_z = np.full(12, -1, np.float32), np.full(12, -1, np.float32)
    prog.run([Launch(ks["k"], 1, 2, [x1, far_y, far_z, 2 ** 32, 2 ** 32, 2 ** 32, 8]),
              Launch(ks["k"], 1, 2, [x2, near_y, near_z, 0, 4, 4, 11])])
    np.testing.assert_array_equal(far_y, np.full(12, -1, np.float32))
    np.testing.assert_array_equal(far_z, np.full(12, -1, np.float32))
    near = np.concatenate([np.full(4, -1, np.float32), x2[:7], [-1]]).astype(np.float32)
    np.testing.assert_array_equal(near_y, near)
    np.testing.assert_array_equal(near_z, near)


# -- an unbounded store with a scalar offset ---------------------------------------------------

@opus.kernel
def soffset_store(x: opus.Ptr[f32], y: opus.Ptr[f32], s: i32):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, t * 4, vec=4), t * 4, vec=4, soffset=s)   # y[4t + s ..]


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_unbounded_store_with_a_scalar_offset(target, tmp_path):
    """y[4t + s + i] = x[4t + i] for s = 4: the scalar offset moves every lane's vector."""
    prog, ks = _build(target, {"k": soffset_store}, tmp_path)
    x = np.arange(10, 18, dtype=np.float32)
    y = np.full(12, -1, np.float32)
    prog.run([Launch(ks["k"], 1, 2, [x, y, 4])])
    np.testing.assert_array_equal(y, np.concatenate([np.full(4, -1, np.float32), x]))


# -- cache-hinted accesses at the bound --------------------------------------------------------

@functools.cache
def streaming_copy(T, VEC):
    @opus.kernel
    def copy(x: opus.Ptr[T], y: opus.Ptr[T], z: opus.Ptr[T], n: i32):
        t = opus.thread_id_x()
        opus.store(y, opus.load(x, t * VEC, vec=VEC, bound=n, cache=STREAMING), t * VEC, vec=VEC)
        opus.store(z, opus.load(x, t * VEC, vec=VEC), t * VEC, vec=VEC, bound=n, cache=STREAMING)
    return copy


@pytest.mark.parametrize("T, VEC, n", [(f32, 4, 6), (i8, 16, 25)], ids=["f32x4", "i8x16"])
def test_streaming_accesses_split_by_the_bound_move_each_element(T, VEC, n, tmp_path):
    """A bounded load (into y: elements past the bound read 0) and a bounded store (into z:
    elements past the bound stay) with Cache.STREAMING, two vectors, the second split by the
    bound n: its elements below n are moved one by one, each from (to) its own address in a
    one-element access (PTX ld/st.global.cs.<width>, aligned to the element)."""
    prog, ks = _build("sm_90a", {"k": streaming_copy(T, VEC)}, tmp_path)
    x = (np.arange(2 * VEC) * 3 + 5).astype(T.np_dtype)
    y = np.full(2 * VEC, -1, T.np_dtype)
    z = np.full(2 * VEC, -1, T.np_dtype)
    prog.run([Launch(ks["k"], 1, 2, [x, y, z, n])])
    np.testing.assert_array_equal(y, np.where(np.arange(2 * VEC) < n, x, 0))
    np.testing.assert_array_equal(z, np.where(np.arange(2 * VEC) < n, x, -1))


@opus.kernel
def streaming_misaligned(x: opus.Ptr[f32], y: opus.Ptr[f32], o: i32):
    opus.store(y, opus.load(x, o, vec=4, cache=STREAMING), 0, vec=4)


def test_a_misaligned_streaming_vector_load_fails_the_launch(tmp_path):
    """The shim of ld.global.cs.v4.u32 (shim/cuda.h) checks the 16-byte alignment PTX requires,
    as the GPU does (it faults): what makes a per-element access of a vector's width show."""
    prog, ks = _build("sm_90a", {"k": streaming_misaligned}, tmp_path)
    x, y = np.arange(8, dtype=np.float32), np.zeros(4, np.float32)
    prog.run([Launch(ks["k"], 1, 1, [x, y, 4])])
    np.testing.assert_array_equal(y, x[4:])
    with pytest.raises(HostExecError, match="misaligned ld.global.cs.v4.u32"):
        prog.run([Launch(ks["k"], 1, 1, [x.copy(), np.zeros(4, np.float32), 1])])


# -- scalar offsets with negative element offsets, and 64-bit ones ------------------------------

@opus.kernel
def soffset_loads(x: opus.Ptr[f32], y: opus.Ptr[f32], z: opus.Ptr[f32], w: opus.Ptr[f32],
                  back: i64, s64: i64, s: i32, n: i32):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, t * 4 - 8, vec=4, soffset=s), t * 4, vec=4)      # x[4t - 8 + s ..]
    opus.store(z, opus.load(x, t * 4 - 8, vec=4, bound=n, soffset=s), t * 4, vec=4)
    opus.store(w, opus.load(x - back, t * 4, vec=4, soffset=s64), t * 4, vec=4)  # x[4t ..]


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_scalar_offsets_with_negative_element_offsets_and_past_32_bits(target, tmp_path):
    """ir/ops.py: an unbounded access reads element off + soffset whatever their signs; with a
    bound, a negative off (or soffset) is out of range even where off + soffset is not (lanes
    0 and 1: zeros); a 64-bit soffset of 2^32 undoes a pointer moved 2^32 elements back."""
    prog, ks = _build(target, {"k": soffset_loads}, tmp_path)
    x = np.arange(1, 33, dtype=np.float32)
    y, z, w = (np.full(16, -1, np.float32) for _ in range(3))
    prog.run([Launch(ks["k"], 1, 4, [x, y, z, w, 1 << 32, 1 << 32, 8, 32])])
    np.testing.assert_array_equal(y, x[:16])
    np.testing.assert_array_equal(z, np.concatenate([np.zeros(8, np.float32), x[8:16]]))
    np.testing.assert_array_equal(w, x[:16])
