"""Worker for the multi-process compile test in test_threads.py (a module of its own so spawn
can import it): compiles one kernel through the real compile path into a shared cache."""
import hashlib
import os

import opus


@opus.kernel
def saxpy_shared(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.f32], a: opus.f32, n: opus.i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        y[i] = a * x[i] + y[i]


def compile_into(cache_dir, barrier, results):
    """Compile saxpy_shared for sm_90a with OPUS_CACHE_DIR=cache_dir once every worker is ready;
    put (pid, came from the cache, sha256 of the CUBIN) or (pid, the error) on ``results``."""
    os.environ["OPUS_CACHE_DIR"] = cache_dir
    os.environ.pop("OPUS_CACHE_DISABLE", None)
    barrier.wait()
    try:
        built = saxpy_shared.specialize("sm_90a").compiled
        results.put((os.getpid(), built.cached, hashlib.sha256(built.binary).hexdigest()))
    except Exception as e:  # reported to the test, which names it
        results.put((os.getpid(), f"{type(e).__name__}: {e}"))


@opus.kernel
def negate_other(x: opus.Ptr[opus.f32], n: opus.i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        x[i] = -x[i]


def compile_cached(cache_dir, another_first):
    """In a fresh process: compile saxpy_shared for sm_90a (after another kernel when
    ``another_first``) with OPUS_CACHE_DIR=cache_dir; whether it came from the cache."""
    os.environ["OPUS_CACHE_DIR"] = cache_dir
    os.environ.pop("OPUS_CACHE_DISABLE", None)
    if another_first:
        negate_other.specialize("sm_90a").compiled
    return saxpy_shared.specialize("sm_90a").compiled.cached
