"""The async-copy kernels of benchmarks/layouts.py (a TMA copy through swizzled shared stages,
a cp.async copy through a ring of stages) checked in the interpreter against the input they
copy, with partial last blocks and the pipelines' stage reuse exercised; their GPU runs are
the benchmark's (which checks each output before timing it) and test_gpu_async_copy_bench."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks"))
import layouts as L  # noqa: E402


def _bf16(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("per_block,stages", [(3, 2), (5, 4)])
def test_tma_copy_interpreter(per_block, stages):
    rows, cols = 3 * L.TMA_BOX[0], 2 * L.TMA_BOX[1]           # 6 tiles: a partial last block
    x = _bf16(rows * cols).reshape(rows, cols)
    out = np.full_like(x, np.nan)
    tiles, tiles_c = 6, 2
    blocks = -(-tiles // per_block)
    with opus.set_target("sm_90a", interpret=True):
        L.tma_copy[blocks, 32](opus.TensorMap(x, L.TMA_BOX, swizzle=128),
                               opus.TensorMap(out, L.TMA_BOX, swizzle=128), tiles, tiles_c,
                               PER_BLOCK=per_block, S=stages)
    np.testing.assert_array_equal(out.view(np.uint16), x.view(np.uint16))


@pytest.mark.parametrize("per_block,stages", [(3, 2), (2, 4)])
def test_cp_async_copy_interpreter(per_block, stages):
    n = 5 * L.CP_TILE                                          # 5 tiles: a partial last block
    x = _bf16(n, seed=1)
    out = np.full_like(x, np.nan)
    with opus.set_target("sm_90a", interpret=True), opus.interp.checking():
        L.cp_async_copy[-(-5 // per_block), 256](x, out, n, PER_BLOCK=per_block, S=stages)
    np.testing.assert_array_equal(out.view(np.uint16), x.view(np.uint16))


@pytest.mark.gpu
def test_gpu_async_copy_bench_kernels():
    res = L.run(gib=1 / 64, reps=2)
    assert all(res["checks"].values()), res["checks"]


# -- benchmarks/ncu_transpose.py: finding ncu, reading its CSV ------------------------------------
import ncu_transpose as N  # noqa: E402


def test_ncu_missing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setattr(N.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(N.os.path, "isfile", lambda p: False)
    with pytest.raises(SystemExit, match="ncu was not found .* --ncu /path/to/ncu"):
        N.find_ncu()


def test_ncu_found_where_given(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert N.find_ncu(str(fake)) == str(fake)


def test_ncu_raw_csv_rows():
    """ncu --csv --page raw: a header, a units row, one row per profiled launch (the two
    transposes), after ncu's own log lines."""
    out = ('==PROF== Connected to process 1\n'
           '"ID","Kernel Name","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"\n'
           '"","",""\n'
           '"0","transpose64_opus","0"\n'
           '"1","transpose64_opus","1,048,576"\n')
    rows = N._csv_rows(out)
    assert [r["ID"] for r in rows] == ["0", "1"]
    key = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
    assert [N._number(r[key]) for r in rows] == [0.0, 1048576.0]


@pytest.mark.gpu
def test_gpu_ncu_transpose_counts(tmp_path):
    """Under ncu (where installed): the swizzled tile has no bank conflicts, the plain one has."""
    import subprocess
    out = tmp_path / "ncu.json"
    r = subprocess.run([sys.executable, N.__file__, "--rows", "1024", "--cols", "1024",
                        "--out", str(out)], capture_output=True, text=True)
    if "not found" in r.stderr or "ERR_NVGPUCTRPERM" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    import json
    m = json.loads(out.read_text())["metrics"]
    for op in ("ld", "st"):
        k = f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum"
        assert m["swizzled"][k] == 0 and m["plain"][k] > 0, (k, m)
