"""The demo and test kernels, run in the interpreter and on the GPU with the same inputs.

EXAMPLES run through their own runners; their launches' outputs are recorded where the runner
copies them back (examples._device's host function). The kernels of tests/interp/kernels.py
get inputs here (CASES); those whose result is not defined on hardware are in SKIP.
"""
from __future__ import annotations

import functools
import importlib.util
import os

import ml_dtypes
import numpy as np
import pytest

import opus
from diff_run import TARGET
from opus import examples as ex
from opus.frontend import Kernel

BF16 = ml_dtypes.bfloat16
_KERNELS_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "interp", "kernels.py")

# Results computed in a different order on the GPU (matrix instructions accumulate in their own
# order and precision): compared within this relative tolerance (to the output's norm).
NOT_BITWISE = {"mma_gemm": 1e-5, "mma_tile": 1e-5}

SKIP = {
    "race": "a shared-memory data race: the GPU result depends on timing",
    "uninit": "reads shared memory nothing wrote: undefined on the GPU",
    "oob_write": "an unbounded out-of-bounds store: undefined on the GPU",
    "divergent_barrier": "a barrier reached by part of the block: undefined on the GPU",
    "barrier_after_exit": "a barrier after some threads returned: undefined in CUDA",
    "show": "printf output is not a result",
}


@functools.lru_cache(maxsize=None)
def load_test_kernels():
    """The kernels tests/interp/kernels.py defines, by name (vadd_vec's as vadd_vec_<dtype>);
    kernels it imports (from opus.examples) are covered where they are defined."""
    spec = importlib.util.spec_from_file_location("opus_diff_interp_kernels", _KERNELS_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    found = {}
    for name, v in vars(mod).items():
        if isinstance(v, Kernel):
            found[name] = v
        elif isinstance(v, dict) and all(isinstance(k, Kernel) for k in v.values()):
            found.update({f"{name}_{key}": k for key, k in v.items()})
    return {n: k for n, k in found.items() if k.fn.__module__ == spec.name}


# -- inputs for tests/interp/kernels.py: name -> rng -> (grid, block, args, output indices) ----

def _floats(rng, n, dtype=np.float32):
    """Ordinary values with signed zeros, infinities and NaNs mixed in."""
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-2, 3, n)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30, 0.5, 65520.0])
    x = np.where(rng.integers(0, 5, n) == 0, specials[rng.integers(0, len(specials), n)], x)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def _ints(rng, n):
    edges = np.array([0, 1, -1, 31, 32, 33, 2 ** 31 - 1, -2 ** 31], np.int64)
    x = rng.integers(-2 ** 31, 2 ** 31, n)
    return np.where(rng.integers(0, 3, n) == 0, edges[rng.integers(0, len(edges), n)],
                    x).astype(np.int32)


def _vadd(rng):
    n = 1003
    return (n + 127) // 128, 128, [_floats(rng, n), _floats(rng, n), np.zeros(n, np.float32), n], [2]


def _vadd_vec(dtype):
    def case(rng):
        n = 1003
        vec = 16 // np.dtype(dtype).itemsize
        args = [_floats(rng, n, dtype), _floats(rng, n, dtype), np.zeros(n, dtype), n, vec]
        return (n + vec * 32 - 1) // (vec * 32), 32, args, [2]
    return case


def _reduce(rng):
    n = 5000
    return 1, 256, [rng.standard_normal(n).astype(np.float32), np.zeros(1, np.float32), n], [1]


def _int_ops(rng):
    n = 300
    return (n + 63) // 64, 64, [_ints(rng, n), _ints(rng, n), np.zeros(10 * n, np.int32), n], [2]


def _casts(rng):
    n = 1000
    x = _floats(rng, n) * np.float32(1e3)
    outs = [np.zeros(n, BF16), np.zeros(n, np.float16), np.zeros(n, np.int8), np.zeros(n, np.int32)]
    return (n + 127) // 128, 128, [x, *outs, n], [1, 2, 3, 4]


def _dyn_for(rng):
    n = 300
    return (n + 127) // 128, 128, [rng.integers(-3, 40, n).astype(np.int32),
                                   np.zeros(n, np.int32), n], [1]


def _collatz(rng):
    n = 200
    return (n + 63) // 64, 64, [rng.integers(1, 5000, n).astype(np.int32),
                                np.zeros(n, np.int32), n], [1]


def _early_return(rng):
    n = 100
    return 1, 128, [rng.integers(-50, 50, n).astype(np.int32), np.full(n + 28, 99, np.int32), n], [1]


def _mma_tile(rng):
    a = rng.standard_normal(16 * 16).astype(BF16)
    b = rng.standard_normal(16 * 8).astype(BF16)
    c = rng.standard_normal(16 * 8).astype(np.float32)
    return 1, 32, [a, b, c, np.zeros(16 * 8, np.float32)], [3]


def _float_ops(rng):
    n = 1000
    args = [_floats(rng, n), _floats(rng, n), _floats(rng, n), np.zeros(4 * n, np.float32), n]
    return (n + 127) // 128, 128, args, [3]


CASES = {"vadd": _vadd, "vadd_vec_f32": _vadd_vec(np.float32),
         "vadd_vec_f16": _vadd_vec(np.float16), "vadd_vec_bf16": _vadd_vec(BF16),
         "reduce": _reduce, "int_ops": _int_ops, "casts": _casts, "dyn_for": _dyn_for,
         "collatz": _collatz, "early_return": _early_return, "mma_tile": _mma_tile,
         "float_ops": _float_ops}


# -- running -------------------------------------------------------------------------------------

def run_case(kernel, case, seed, on_gpu):
    """Outputs of one launch of a test kernel (interpreter or GPU), as numpy arrays."""
    grid, block, args, outs = case(np.random.default_rng(seed))
    if on_gpu:
        from opus.runtime.device_array import DeviceArray
        args = [DeviceArray.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
    with opus.set_target(TARGET, interpret=not on_gpu):
        kernel[grid, block](*args)
    return [args[i].to_numpy() if on_gpu else args[i] for i in outs]


def run_example(name, on_gpu):
    """The outputs an EXAMPLES runner copied back from its launches, and its own verdict."""
    record = []
    device = ex._device

    def recording(arrays, gpu):
        dev, host = device(arrays, gpu)

        def copy_back(a):
            out = np.array(host(a), copy=True)
            record.append(out)
            return out
        return dev, copy_back

    with pytest.MonkeyPatch.context() as mp, opus.set_target(TARGET, interpret=not on_gpu):
        mp.setattr(ex, "_device", recording)
        verdict = ex.run_example(name, on_gpu)
    return record, verdict


def differences(name, got, want):
    """A description of how two runs' outputs differ, or None when they agree."""
    if len(got) != len(want) or not got:
        return f"{name}: {len(got)} outputs against {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{name}: output {i} is {g.dtype}{g.shape} against {w.dtype}{w.shape}"
        if name in NOT_BITWISE:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            err = np.linalg.norm(g64 - w64) / max(np.linalg.norm(w64), 1e-30)
            if not err <= NOT_BITWISE[name]:
                return f"{name}: output {i} relative difference {err:.2e}"
            continue
        gb, wb = g.view(np.uint8).reshape(g.size, -1), w.view(np.uint8).reshape(w.size, -1)
        same = (gb == wb).all(axis=1)
        if np.issubdtype(g.dtype, np.floating) or g.dtype == BF16:
            same |= np.isnan(g.astype(np.float64)).ravel() & np.isnan(w.astype(np.float64)).ravel()
        if not same.all():
            j = int(np.flatnonzero(~same)[0])
            return (f"{name}: output {i} differs at {np.count_nonzero(~same)} elements, first at "
                    f"{j}: interpreter {g.ravel()[j]!r}, GPU {w.ravel()[j]!r}")
    return None
