"""Layout-driven memory kernels against torch (issue 10): a copy written with a layout and
16-byte accesses, a TMA copy (boxes of 64 x 64 into 128-byte-swizzled shared stages, 5 in
flight, TMA stores back; sm_90 only), a cp.async copy (16-byte .cg copies into a ring of 4
shared stages), and a 64x64-tile transpose through shared memory, swizzled and plain, on 1 GiB
of bf16, side by side with torch's d2d copy in the same run.

    PYTHONPATH=src python benchmarks/layouts.py [--out layouts.json] [--gib 1.0]

Each kernel is checked against torch on fresh random inputs with a NaN-poisoned output before
it is timed (CUDA events, warm-up, median of --reps, fresh inputs outside the timed region,
two passes in alternating order). Bytes = one read and one write of the array.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import opus  # noqa: E402
from opus import bf16, i32  # noqa: E402

ITEMS = 4  # 16-byte chunks per thread in the copy


@opus.kernel(block=256)
def layout_copy(x: opus.Ptr[bf16], out: opus.Ptr[bf16], n: i32):
    # each thread: ITEMS chunks of 8 bf16, 2 KiB apart (a warp's accesses are contiguous)
    base = (opus.block_id_x() * (256 * ITEMS) + opus.thread_id_x()) * 8
    u = opus.make_layout((ITEMS, 8), (256 * 8, 1)) + base
    g, o = opus.make_gmem(x, n), opus.make_gmem(out, n)
    o.store(g.load(u, vec=8), u, vec=8)


@opus.kernel(block=256)
def transpose64(x: opus.Ptr[bf16], out: opus.Ptr[bf16], rows: i32, cols: i32,
                SWZ: opus.constexpr = True):
    """out (cols x rows) = x (rows x cols) transposed, one 64x64 tile per block; rows and cols
    are multiples of 64. Loads: 16 bytes per thread along x's rows, written to shared memory as
    4-byte pairs. Stores: each thread gathers 8 elements of one tile column (8 rows) from shared
    memory and writes them as 16 bytes of out's row. The swizzle XORs each row's 4-byte word
    index with the row (Swizzle(5, 1, 5)), so both phases are free of bank conflicts."""
    tile = opus.alloc_smem(bf16, 64 * 64)
    s = opus.make_layout((64, 64), swizzle=opus.Swizzle(5, 1, 5) if SWZ else None)
    t = opus.thread_id_x()
    r0, c0 = opus.block_id_y() * 64, opus.block_id_x() * 64
    g, o = opus.make_gmem(x), opus.make_gmem(out)
    for p in range(2):
        r, c = t // 8 + 32 * p, t % 8 * 8
        v = g.load((r0 + r) * cols + c0 + c, vec=8)
        for q in range(4):
            tile.store(v[2 * q: 2 * q + 2], s(r, c + 2 * q), vec=2)
    opus.sync_threads()
    w, lane = t // 32, t % 32
    for p in range(2):
        j, ic = 8 * w + lane % 8, lane // 8 + 4 * p      # out row j (a tile column), rows 8*ic..
        v = opus.make_vector(*[tile[s(8 * ic + k, j)] for k in range(8)])
        o.store(v, (c0 + j) * rows + r0 + 8 * ic, vec=8)


# -- async copies: TMA (sm_90) and cp.async (sm_80+), a few stages in flight --------------------
TMA_BOX = (64, 64)    # 8 KiB of bf16; rows of 128 bytes: the 128-byte swizzle's span
TMA_STAGES = 5        # 40 KiB: within the 48 KiB of static shared memory
TMA_TILES_PER_BLOCK = 2
# the copy sees the array as rows of 64 elements (128 bytes), so each box is 8 KiB of contiguous
# memory; on the H100 (2026-11-24 sweep) boxes of 64 x 64 out of 16384 x 32768 rows (128-byte
# pieces 64 KiB apart) reached 0.89x torch's copy, contiguous ones 0.98x; 2 tiles per block
# beat 8 to 32 (more blocks in flight, shorter tails)
TMA_ROW = 64


@opus.kernel(block=32)
def tma_copy(a: opus.TensorMap, o: opus.TensorMap, tiles: i32, tiles_c: i32,
             PER_BLOCK: opus.constexpr = TMA_TILES_PER_BLOCK, S: opus.constexpr = TMA_STAGES):
    """out = x by boxes of TMA_BOX: block b copies tiles b*PER_BLOCK .. (row-major over the
    tensor's tiles, tiles_c per row), each a TMA load into a 128-byte-swizzled shared stage
    (S in flight) and a TMA store from it; one thread issues everything. A stage is refilled
    once the store that read it has finished reading (tma_wait(1, read=True))."""
    a.declare(bf16, TMA_BOX, swizzle=128)
    o.declare(bf16, TMA_BOX, swizzle=128)
    pipe = opus.TmaPipeline(a, stages=S, consumers=1)
    first = opus.block_id_x() * PER_BLOCK
    count = opus.min(tiles - first, PER_BLOCK)

    def at(g):
        return ((g // tiles_c) * TMA_BOX[0], (g % tiles_c) * TMA_BOX[1])

    for j in range(S - 1):
        pipe.load(j, at(first + j), pred=j < count)
    if opus.thread_id_x() == 0:
        for k in opus.range(count):
            tile = pipe.wait(k)
            opus.tma_store(o, tile, at(first + k))
            opus.tma_commit()
            opus.tma_wait(1, read=True)      # the store of tile k - 1 has read its stage
            if k > 0:
                pipe.release(k - 1)
            nxt = k + S - 1
            pipe.load(nxt, at(first + nxt), pred=nxt < count)
        opus.tma_wait(0)


CP_ITEMS = 2      # 16-byte chunks per thread per stage
CP_STAGES = 4
CP_TILES_PER_BLOCK = 16
CP_TILE = 256 * CP_ITEMS * 8  # elements per stage of a block


@opus.kernel(block=256)
def cp_async_copy(x: opus.Ptr[bf16], out: opus.Ptr[bf16], n: i32,
                  PER_BLOCK: opus.constexpr = CP_TILES_PER_BLOCK, S: opus.constexpr = CP_STAGES):
    """out = x through shared memory with cp.async (16 bytes, .cg): block b copies tiles
    b*PER_BLOCK .. of CP_TILE elements, S - 1 tiles in flight ahead of the one being stored;
    each thread stores the chunks it copied itself (its wait makes them visible to it, no
    barrier). n is a multiple of CP_TILE."""
    stage = opus.alloc_smem(bf16, S * CP_TILE, align=128)
    t = opus.thread_id_x()
    first = opus.block_id_x() * PER_BLOCK
    count = opus.min(n // CP_TILE - first, PER_BLOCK)
    g, o = opus.make_gmem(x), opus.make_gmem(out)
    chunks = opus.make_layout((CP_ITEMS, 8), (256 * 8, 1)) + t * 8   # this thread's chunks

    def issue(k):
        opus.copy_async(stage, chunks + (k % S) * CP_TILE, g, chunks + (first + k) * CP_TILE,
                        vec=8, cache="cg", pred=k < count)
        opus.commit_async()

    for j in range(S - 1):
        issue(j)
    for k in opus.range(count):
        issue(k + S - 1)                      # into the stage this thread read last iteration
        opus.wait_async(S - 1)                # tile k has landed (for this thread)
        o.store(stage.load(chunks + (k % S) * CP_TILE, vec=8), chunks + (first + k) * CP_TILE,
                vec=8)
    opus.wait_async(0)


def run(gib=1.0, reps=30):
    import torch
    n = int(gib * (1 << 30)) // 2
    rows, cols = 16384, n // 16384
    assert rows * cols == n and cols % 64 == 0
    x = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    o = torch.empty(n, device="cuda", dtype=torch.bfloat16)

    def fresh():
        x.normal_()

    def poison():
        o.fill_(float("nan"))

    copy_grid = (n + 256 * ITEMS * 8 - 1) // (256 * ITEMS * 8)
    tgrid = (cols // 64, rows // 64)
    assert rows % TMA_BOX[0] == 0 and cols % TMA_BOX[1] == 0 and n % CP_TILE == 0
    tiles_c = TMA_ROW // TMA_BOX[1]
    tma_tiles = n // TMA_ROW // TMA_BOX[0] * tiles_c
    tma_grid = -(-tma_tiles // TMA_TILES_PER_BLOCK)
    cp_grid = -(-(n // CP_TILE) // CP_TILES_PER_BLOCK)
    kernels = {
        "torch_copy": lambda: o.copy_(x),
        "opus_layout_copy": lambda: layout_copy[copy_grid, 256](x, o, n),
        "opus_cp_async_copy": lambda: cp_async_copy[cp_grid, 256](x, o, n),
        "torch_transpose": lambda: o.view(cols, rows).copy_(x.view(rows, cols).t()),
        "opus_transpose_swizzled": lambda: transpose64[tgrid, 256](x, o, rows, cols, SWZ=True),
        "opus_transpose_plain": lambda: transpose64[tgrid, 256](x, o, rows, cols, SWZ=False),
    }
    if torch.cuda.get_device_capability() >= (9, 0):  # TMA: sm_90
        tx = opus.TensorMap(x.view(-1, TMA_ROW), TMA_BOX, swizzle=128)
        to = opus.TensorMap(o.view(-1, TMA_ROW), TMA_BOX, swizzle=128)
        kernels["opus_tma_copy"] = lambda: tma_copy[tma_grid, 32](tx, to, tma_tiles, tiles_c)
    want_copy = lambda: x
    want_t = lambda: x.view(rows, cols).t().contiguous().view(-1)
    checks = {}
    for name, fn in kernels.items():
        fresh(); poison(); fn(); torch.cuda.synchronize()
        ref = want_t() if "transpose" in name else want_copy()
        checks[name] = bool(torch.equal(o, ref))
    out = {"gib": gib, "n": n, "rows": rows, "cols": cols, "checks": checks}
    for p in range(2):
        for name, fn in kernels.items():
            ms = common.cuda_event_ms(fn, reps=reps, warmup=5, before=fresh)
            nbytes = 2 * n * 2
            key = name if p == 0 else name + "_repeat"
            out[key] = {"ms": ms, "bytes": nbytes, "gbps": nbytes / (ms["median"] * 1e-3) / 1e9,
                        "correct": checks[name]}
            print(f"[layouts] {key:28s} {ms['median']:.3f} ms {out[key]['gbps']:.0f} GB/s "
                  f"{checks[name]}", file=sys.stderr)
        kernels = dict(reversed(list(kernels.items())))
    med = lambda k: (out[k]["gbps"] + out[k + "_repeat"]["gbps"]) / 2
    out["ratio"] = {
        "layout_copy_vs_torch_copy": med("opus_layout_copy") / med("torch_copy"),
        "cp_async_copy_vs_torch_copy": med("opus_cp_async_copy") / med("torch_copy"),
        **({"tma_copy_vs_torch_copy": med("opus_tma_copy") / med("torch_copy")}
           if "opus_tma_copy" in kernels else {}),
        "transpose_swizzled_vs_torch_copy": med("opus_transpose_swizzled") / med("torch_copy"),
        "transpose_swizzled_vs_layout_copy": med("opus_transpose_swizzled") / med("opus_layout_copy"),
        "transpose_plain_vs_torch_copy": med("opus_transpose_plain") / med("torch_copy"),
        "torch_transpose_vs_torch_copy": med("torch_transpose") / med("torch_copy"),
        "note": "mean of the two passes' median GB/s",
    }
    return out


GOALS = [("layout copy / torch copy_", "layout_copy_vs_torch_copy", 0.95),
         ("TMA copy / torch copy_", "tma_copy_vs_torch_copy", 0.95),
         ("cp.async copy / torch copy_", "cp_async_copy_vs_torch_copy", 0.95),
         ("swizzled transpose / torch copy_", "transpose_swizzled_vs_torch_copy", 0.90),
         ("swizzled transpose / layout copy", "transpose_swizzled_vs_layout_copy", 0.90)]


def markdown(res, note=""):
    """The report: environment, goals, every kernel's bandwidth."""
    r = res["layouts"]
    lines = common.report_head("opus layout kernels", res, note)
    lines += ["| goal | measured | target | result |", "| --- | --- | --- | --- |"]
    for label, key, goal in GOALS:
        if key not in r["ratio"]:  # the TMA copy on a chip without TMA
            continue
        v = r["ratio"][key]
        lines.append(f"| {label} | {v:.3f} x | >= {goal} x | {'PASS' if v >= goal else '**MISS**'} |")
    lines += ["", f"{r['gib']} GiB bf16 ({r['rows']} x {r['cols']} for the transposes); bytes = "
              "one read + one write; median of CUDA-event times, two passes", ""]
    lines += common.kernel_rows(r)
    return "\n".join(lines) + "\n"


def main():
    common.report_main(__doc__, "layouts", run, markdown)


if __name__ == "__main__":
    main()
