"""The AMD GEMM's code (ops/gemm_amd.py) without an AMD GPU (issue 12): the main loop's
instructions, MFMAs and memory instructions, MFMA density (MFMAs per instruction), registers,
LDS and scratch of the kernel compiled by our clang for gfx942 and gfx950, against the anchor:
aiter's production opus GEMM for gfx942 (a16w16 "kbuf2v") compiled with the same clang (issue
12's figures: a 96-instruction main loop holding 64 MFMAs, 82 VGPRs, 32 KiB of LDS, no
scratch).

    python benchmarks/amd_gemm.py [--out benchmarks/results] [--date D] [--name cpu-amd-gemm]

The main loop is counted as benchmarks/amd_codegen.py counts it (the smallest innermost loop
holding an MFMA: a label and the last backward branch to it). A gfx950 16x16x32 MFMA does the
work of two gfx942 16x16x16 ones, so the table also gives the density in 16x16x16 MFMAs.
"""
import argparse
import collections
import datetime
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, HERE)

import amd_codegen as ac  # noqa: E402

ANCHOR = {"name": "aiter a16w16 kbuf2v (gfx942)", "loop": 96, "mfma": 64, "vgprs": 82,
          "lds_bytes": 32768, "scratch_bytes": 0}

# (name, target, dtype, constexprs)
CASES = [
    ("gfx942 bf16 256x192, B K-major", "gfx942", "bf16", dict(BM=256, BN=192)),
    ("gfx942 bf16 256x128, B K-major", "gfx942", "bf16", dict(BM=256, BN=128)),
    ("gfx942 bf16 128x128, B K-major", "gfx942", "bf16", dict(BM=128, BN=128)),
    ("gfx942 bf16 256x128, B row-major", "gfx942", "bf16", dict(BM=256, BN=128, B_KMAJOR=False)),
    ("gfx942 f16 256x192, B K-major", "gfx942", "f16", dict(BM=256, BN=192)),
    ("gfx950 bf16 256x192, B K-major", "gfx950", "bf16", dict(BM=256, BN=192, ATOM_K=32)),
    ("gfx950 bf16 256x128, B row-major", "gfx950", "bf16",
     dict(BM=256, BN=128, B_KMAJOR=False, ATOM_K=32)),
    ("gfx942 bf16 256x192, B K-major, bias + gelu_tanh + residual", "gfx942", "bf16",
     dict(BM=256, BN=192, EPILOGUE=(True, "gelu_tanh", True))),
    ("gfx950 bf16 256x192, B K-major, bias + gelu_tanh + residual", "gfx950", "bf16",
     dict(BM=256, BN=192, ATOM_K=32, EPILOGUE=(True, "gelu_tanh", True))),
    ("gfx942 fp8 e4m3fnuz 256x192, row/column scales", "gfx942", "fp8_e4m3fnuz",
     dict(BM=256, BN=192, ATOM_K=32, VA=16, VB=16, SCALES=(2, 2))),
    ("gfx950 fp8 e4m3 (OCP) 256x192, row/column scales", "gfx950", "fp8_e4m3",
     dict(BM=256, BN=192, ATOM_K=32, VA=16, VB=16, SCALES=(2, 2))),
]


def measure_case(target, dtype, constexprs):
    """Figures of one configuration: main loop counts, resources, compile seconds."""
    from opus import dtypes as dt
    from opus.ops.gemm_amd import kernel_for
    d = dt.dtype_from_name(dtype)
    kernel = kernel_for(d, d if d.itemsize == 2 else dt.bf16)   # fp8: bf16 out
    t0 = time.perf_counter()
    spec = kernel.specialize(target, **_with_activation(constexprs))
    asm, res = spec.asm, spec.resources
    seconds = time.perf_counter() - t0
    lines, found = ac.loops(asm)
    loops = [ac._instructions(lines[a:b + 1]) for _, a, b in found]
    loop = min((ins for ins in loops if any(x.startswith("v_mfma") for x in ins)), key=len)
    ops = collections.Counter(re.match(r"(\S+)", x).group(1) for x in loop)
    mfma = sum(v for k, v in ops.items() if k.startswith("v_mfma"))
    per = 2 if any("16x16x32" in k for k in ops) else 1   # work in 16x16x16 MFMAs (bf16)
    agprs = res.get("agprs", 0)
    return {"target": target, "constexprs": constexprs, "loop": len(loop), "mfma": mfma,
            "density": mfma / len(loop), "density_16x16x16": mfma * per / len(loop),
            "buffer_loads": sum(v for k, v in ops.items() if k.startswith("buffer_load")),
            "ds_reads": sum(v for k, v in ops.items() if k.startswith("ds_read")),
            "ds_writes": sum(v for k, v in ops.items() if k.startswith("ds_write")),
            "s_waitcnt": ops["s_waitcnt"], "barriers": ops["s_barrier"],
            "vgprs": res["vgprs"] - agprs, "agprs": agprs, "sgprs": res["sgprs"],
            "lds_bytes": res["smem_bytes"], "scratch_bytes": res["scratch_bytes"],
            "compile_s": round(seconds, 2), "ops": dict(ops.most_common())}


def _with_activation(constexprs):
    """The constexprs with EPILOGUE's activation named in CASES (a string, for the JSON) made
    the opus.ops function."""
    if "EPILOGUE" not in constexprs:
        return constexprs
    import opus.ops
    bias, act, res = constexprs["EPILOGUE"]
    return dict(constexprs, EPILOGUE=(bias, act and getattr(opus.ops, act), res))


def report(rows, meta):
    a = ANCHOR
    head = ["| kernel | loop | MFMAs | density | (16x16x16) | buffer loads | ds reads / writes "
            "| waitcnt | VGPRs + AGPRs | LDS KiB | scratch |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| {a['name']} (anchor) | {a['loop']} | {a['mfma']} | {a['mfma'] / a['loop']:.3f} | "
            f"{a['mfma'] / a['loop']:.3f} | | | | {a['vgprs']} | {a['lds_bytes'] // 1024} | 0 |"]
    for name, m in rows.items():
        head.append(f"| {name} | {m['loop']} | {m['mfma']} | {m['density']:.3f} | "
                    f"{m['density_16x16x16']:.3f} | {m['buffer_loads']} | {m['ds_reads']} / "
                    f"{m['ds_writes']} | {m['s_waitcnt']} | {m['vgprs']} + {m['agprs']} | "
                    f"{m['lds_bytes'] / 1024:g} | {m['scratch_bytes']} |")
    return "\n".join([
        f"# opus AMD GEMM code (ops/gemm_amd.py), {meta['date']}, CPU only (no AMD GPU)", "",
        f"{meta['clang']}; opus `{meta['commit']}`. Main loop: the smallest loop holding MFMAs "
        "(benchmarks/amd_codegen.py's counting); it runs two 32-deep K tiles. Density: MFMAs "
        "per main-loop instruction; (16x16x16): counting a gfx950 16x16x32 MFMA as two. "
        "Regenerate with `python benchmarks/amd_gemm.py`.", "", *head, "", "Notes:", "", *NOTES,
        ""])


NOTES = [
    "- Anchor: issue 12's figures for aiter's production opus GEMM (a16w16 'kbuf2v', gfx942) "
    "compiled with our clang; its source is not in this repository, so it is quoted, not "
    "rebuilt.",
    "- The default tile for a K-major B (weights, `w.t()`) is 256 x 192: per wave 128 x 96 "
    "of C (8 x 6 atoms, 192 f32 accumulators, which the compiler keeps partly in AGPRs), per "
    "32-deep tile 96 MFMAs against 7 + 7 global/LDS-write and 14 LDS-read 16-byte "
    "instructions. 256 x 128 puts 64 MFMAs against 24 memory instructions and stays below "
    "the anchor's density; 256 x 256 (256 accumulators) spills under this clang.",
    "- Row-major B is transposed on its way into LDS with 2-byte stores (ds_write_b16): its "
    "loop is longer. gfx950's ds_read_b64_tr_b16 (opus.ds_read_tr) would read it transposed "
    "instead; not done yet.",
    "- The epilogue rows fuse bias, gelu_tanh and residual (opus.ops.gemm(..., bias=, "
    "activation=, residual=)): the same main loop, no scratch; the epilogue works from the "
    "accumulators one 32-row strip at a time (no LDS) and adds 6 bias and 48 residual "
    "8-byte loads per tile.",
    "- The fp8 rows (opus.ops.scaled_gemm): 64 k per 64-byte LDS row, two "
    "v_mfma_f32_16x16x32_fp8_fp8 per 64-deep slice per atom (each twice the K of a bf16 "
    "16x16x16: the (16x16x16) column counts them as two), the same memory instructions as "
    "bf16 per tile; no scratch.",
    "- The register figures are the whole kernel's (its peeled last tiles and epilogue "
    "included), with @opus.kernel(min_blocks=1) letting the compiler use a wave's 512: one "
    "wave per SIMD (one 256-thread block per CU), where the anchor's 82 VGPRs leave room for "
    "several. Density is met by a larger wave tile, not by occupancy; which runs faster is "
    "for an AMD GPU to say (none here).",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--name", default="cpu-amd-gemm")
    args = ap.parse_args()
    os.environ.setdefault("OPUS_CACHE_DISABLE", "1")
    rows = {name: measure_case(t, d, c) for name, t, d, c in CASES}
    meta = {"date": args.date, "clang": ac._clang(), "commit": ac._commit(), "anchor": ANCHOR}
    base = os.path.join(args.out, f"{args.date}-{args.name}")
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "kernels": rows}, f, indent=1)
    text = report(rows, meta)
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
