"""Cache hints (opus.Cache) on NVIDIA: each hint's PTX qualifier reaches the SASS (NVRTC, no
GPU needed), on bounded and unbounded views, every access width; the interpreter's results do
not change with a hint (hints are not semantics, ir/ops.py)."""
import re

import numpy as np
import pytest

import opus
from opus import f16, f32, i32

# hint -> the SASS modifier of LDG/STG (ptxas's spelling of the PTX qualifier)
LOAD_SASS = {"STREAMING": ".EF", "LAST_USE": ".LU", "READ_ONLY": ".CONSTANT", "EVICT_FIRST": ".EF",
             "EVICT_LAST": ".EL", "NO_ALLOCATE": ".NA"}
STORE_SASS = {"STREAMING": ".EF", "EVICT_FIRST": ".EF", "EVICT_LAST": ".EL", "NO_ALLOCATE": ".NA"}


def _copy(T, VEC, hint_load, hint_store, bounded):
    @opus.kernel
    def copy(x: opus.Ptr[T], y: opus.Ptr[T], n: i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
        gx = opus.make_gmem(x, n) if bounded else opus.make_gmem(x)
        gy = opus.make_gmem(y, n) if bounded else opus.make_gmem(y)
        v = gx.load(i, vec=VEC, cache=hint_load)
        gy.store(v, i, cache=hint_store)
    return copy


def _ldg_stg(sass):
    return [l for l in sass.splitlines() if "LDG" in l or "STG" in l]


@pytest.mark.parametrize("hint", sorted(LOAD_SASS))
@pytest.mark.parametrize("bounded", [False, True])
def test_load_hint_in_sass(hint, bounded):
    k = _copy(f32, 4, getattr(opus.Cache, hint), None, bounded)
    sass = k.specialize(target="sm_90a").sass
    mod = re.escape(LOAD_SASS[hint])
    assert any(re.search(rf"LDG\.E\S*{mod}", l) and "128" in l for l in _ldg_stg(sass)), _ldg_stg(sass)
    # the store took no hint
    assert not any(re.search(r"STG\.E\.(EF|EL|NA|LU)", l) for l in _ldg_stg(sass))


@pytest.mark.parametrize("hint", sorted(STORE_SASS))
@pytest.mark.parametrize("T,VEC", [(f32, 4), (f16, 4), (f16, 1), (opus.u8, 2)])
def test_store_hint_in_sass(hint, T, VEC):
    k = _copy(T, VEC, None, getattr(opus.Cache, hint), True)
    sass = k.specialize(target="sm_80").sass
    mod = re.escape(STORE_SASS[hint])
    assert any(re.search(rf"STG\.E\S*{mod}", l) for l in _ldg_stg(sass)), _ldg_stg(sass)


def test_no_hint_plain_accesses():
    sass = _copy(f32, 4, None, None, True).specialize(target="sm_90a").sass
    assert all(not re.search(r"\.(EF|EL|NA|LU|CONSTANT)\b", l) for l in _ldg_stg(sass))


@opus.kernel
def two_hints(x: opus.Ptr[f32], y: opus.Ptr[f32], z: opus.Ptr[f32]):
    i = opus.thread_id_x()
    a = opus.make_gmem(x).load(i, cache=opus.Cache.STREAMING)
    b = opus.make_gmem(y).load(i, cache=opus.Cache.LAST_USE)
    z[i] = a + b


def test_two_hints_of_one_type_are_two_helpers():
    """Each hinted access is a helper named for its kind, hint and C type: .cs and .lu loads of a
    float in one kernel (names of equal length) keep their own qualifiers."""
    lines = _ldg_stg(two_hints.specialize(target="sm_90a").sass)
    assert sum(".EF" in l for l in lines) == 1 and sum(".LU" in l for l in lines) == 1, lines


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_hints_do_not_change_results(target):
    """The interpreter runs hinted and plain copies alike (a tail past the bound included)."""
    x = np.arange(1, 101, dtype=np.float32)
    plain = np.full(104, -1, np.float32)
    hinted = plain.copy()
    with opus.set_target(target, interpret=True):   # numpy arrays: the interpreter, GPU or not
        _copy(f32, 4, None, None, True)[2, 13](x, plain, 99)
        _copy(f32, 4, opus.Cache.STREAMING, opus.Cache.STREAMING, True)[2, 13](x, hinted, 99)
    want = np.full(104, -1, np.float32)
    want[:99] = x[:99]  # the rest: out of bounds, stores dropped
    np.testing.assert_array_equal(plain, want)
    np.testing.assert_array_equal(hinted, want)



# -- on the GPU: every hint copies exactly, tails included --------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("hint", sorted(LOAD_SASS) + ["NORMAL"])
@pytest.mark.parametrize("T,VEC", [(f32, 4), (f16, 8), (opus.u8, 2)])
@pytest.mark.parametrize("bounded", [False, True])
def test_gpu_hinted_copy(hint, T, VEC, bounded):
    from opus.runtime.device_array import DeviceArray
    from opus.runtime import cuda_driver
    store_hint = getattr(opus.Cache, hint) if hint in STORE_SASS else None
    k = _copy(T, VEC, getattr(opus.Cache, hint), store_hint, bounded)
    n = 256 * VEC * 3 - (VEC - 1 if bounded else 0)  # a ragged tail where bounded
    x = (np.arange(256 * VEC * 3) % 251 + 1).astype(T.np_dtype)
    d_x, d_y = DeviceArray.from_numpy(x), DeviceArray.zeros(len(x), T.np_dtype)
    with opus.set_target(opus.current_target().target.name, interpret=False):
        k[3, 256](d_x, d_y, n)
    cuda_driver.synchronize()
    want = np.zeros(len(x), T.np_dtype)
    want[:n] = x[:n]
    np.testing.assert_array_equal(d_y.to_numpy(), want)
