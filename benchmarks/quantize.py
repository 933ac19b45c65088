"""Quantization kernels against torch (issue 15): bf16 -> fp8 e4m3 with a per-tensor scale
(opus.scaled_cast), bf16 -> MXFP8 and bf16 -> MXFP4 (OCP MX: one e8m0 scale per 32 elements,
opus.mx_quantize), on 1 GiB of bf16, side by side with torch's d2d copy of the same input and
``(x * inv).to(torch.float8_e4m3fn)`` / ``x.to(torch.float8_e4m3fn)`` in the same run.

    PYTHONPATH=src python benchmarks/quantize.py [--out quantize.json] [--gib 1.0]
    PYTHONPATH=src python benchmarks/quantize.py --report quantize.json   # writes quantize.md

Each kernel is checked before it is timed (fp8: bit for bit against torch's conversion of
x * inv; MX: against the interpreter's semantics written out in numpy on a slice, and the
dequantized values within the format's step of x), then timed with CUDA events (warm-up, median
of --reps, fresh random inputs outside the timed region, two passes in alternating order).
Bytes moved: the bf16 read plus every byte written (elements and scales); the copy moves 2 x 2n.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import opus  # noqa: E402
from opus import bf16, f32, i32  # noqa: E402

ITEMS = 4  # 16-byte loads (8 bf16) per thread; a warp's loads are 512 contiguous bytes
CHUNK = 256 * 8 * ITEMS  # elements per block


@opus.kernel(block=256)
def quant_fp8(x: opus.Ptr[bf16], inv: opus.Ptr[f32], q: opus.Ptr[opus.fp8_e4m3], n: i32):
    """q = fp8(clamp(x * inv)): per thread ITEMS chunks of 8 (16-byte loads, 8-byte stores),
    chunk i of the block's threads contiguous (coalesced)."""
    g, o = opus.make_gmem(x), opus.make_gmem(q)
    s = inv[0]
    for i in range(ITEMS):
        off = opus.block_id_x() * CHUNK + (i * 256 + opus.thread_id_x()) * 8
        o.store(opus.scaled_cast(g.load(off, vec=8), opus.fp8_e4m3, s), off)


def _mx_kernel(elem, lanes):
    @opus.kernel(block=256)
    def quant_mx(x: opus.Ptr[bf16], q: opus.Ptr[elem], sc: opus.Ptr[opus.e8m0], n: i32):
        """One MX block of 32 per ``lanes`` lanes (32 / lanes elements each, loaded 16 bytes at
        a time, the lanes' pieces contiguous over the warp): the block's amax by xor-shuffles,
        its e8m0 scale, the elements scaled by the inverse power of two; the block's first lane
        writes the scale."""
        per = 32 // lanes
        g, o = opus.make_gmem(x), opus.make_gmem(q)
        t = opus.thread_id_x()
        for i in range(ITEMS * lanes // 4):
            off = opus.block_id_x() * CHUNK + (i * 256 + t) * per
            v = opus.concat(*[g.load(off + 8 * j, vec=8) for j in range(per // 8)])
            if lanes == 1:  # the whole block in this lane: the library's MX step as it is
                q, s = opus.mx_quantize(v, elem)
            else:
                a = opus.amax(v)
                for d in range(lanes.bit_length() - 1):
                    a = opus.max(a, opus.shfl_xor(a, 1 << d))
                s = opus.mx_scale(a, elem)
                q = opus.scaled_cast(v, elem, 1.0 / opus.cast(s, f32))
            o.store(q, off)
            if t % lanes == 0:
                sc[off // 32] = s
    return quant_mx


quant_mxfp8 = _mx_kernel(opus.fp8_e4m3, 4)
quant_mxfp4 = _mx_kernel(opus.fp4_e2m1, 1)  # fp4 converts in software on sm_90: a block per lane
# measured on the H100 (1 GiB) with the lane-by-lane fp4 encoder: one lane per block 0.83x copy,
# two 0.75x, four 0.66x (issue-bound: ~28 instructions per element; codegen/subbyte.py's
# eight-lane word encoder takes the kernel to 12.4)


def _check_mx(x, q, sc, elem, torch):
    """The first 2^16 elements against numpy (OCP MX v1.0 6.3, as tests/conversions)."""
    import ml_dtypes
    import numpy as np
    k = 1 << 16
    xs = x[:k].float().cpu().numpy().reshape(-1, 32).astype(np.float64)
    amax = np.abs(xs).max(axis=1)
    emax = {"fp8_e4m3": 8, "fp4_e2m1": 2}[elem.name]
    code = np.clip(np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - emax + 127, 0),
                   0, 254).astype(np.uint8)
    scaled = (xs / np.exp2(code.astype(np.float64) - 127)[:, None]).astype(np.float32).ravel()
    fin = float(ml_dtypes.finfo(elem.np_dtype).max)
    want = np.clip(scaled, -fin, fin).astype(elem.np_dtype).view(np.uint8)
    got_s = sc[: k // 32].view(torch.uint8).cpu().numpy()
    qb = q[: k * elem.bits // 8].view(torch.uint8).cpu().numpy()
    got = opus.unpack(qb, elem).view(np.uint8) if elem.bits < 8 else qb.view(np.uint8)
    return bool(np.array_equal(got_s, code) and np.array_equal(got, want))


def run(gib=1.0, reps=30):
    import torch
    n = int(gib * (1 << 30)) // 2
    assert n % CHUNK == 0
    x = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    o = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    q8 = torch.empty(n, device="cuda", dtype=torch.float8_e4m3fn)
    q4 = torch.empty(n // 2, device="cuda", dtype=torch.uint8)  # fp4: the packed bytes
    sc = torch.empty(n // 32, device="cuda", dtype=torch.float8_e8m0fnu)
    inv = torch.empty(1, device="cuda", dtype=torch.float32)
    grid = n // CHUNK

    def fresh():
        x.normal_()
        inv.fill_(448.0 / 6.0)  # N(0,1) values reach ~6: a realistic per-tensor scale

    kernels = {
        "torch_copy": (lambda: o.copy_(x), 4 * n),
        "torch_to_fp8": (lambda: x.to(torch.float8_e4m3fn), 3 * n),
        "torch_scaled_to_fp8": (lambda: (x * inv).clamp(-448, 448).to(torch.float8_e4m3fn), 3 * n),
        "opus_fp8_per_tensor": (lambda: quant_fp8[grid, 256](x, inv, q8, n), 3 * n),
        "opus_mxfp8": (lambda: quant_mxfp8[grid, 256](x, q8, sc, n), 3 * n + n // 32),
        "opus_mxfp4": (lambda: quant_mxfp4[grid, 256](x, q4, sc, n), 2 * n + n // 2 + n // 32),
    }
    checks = {}
    fresh()
    kernels["opus_fp8_per_tensor"][0](); torch.cuda.synchronize()
    want = (x.float() * inv).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
    checks["opus_fp8_per_tensor"] = bool(torch.equal(q8.view(torch.uint8), want))
    kernels["opus_mxfp8"][0](); torch.cuda.synchronize()
    checks["opus_mxfp8"] = _check_mx(x, q8, sc, opus.fp8_e4m3, torch)
    kernels["opus_mxfp4"][0](); torch.cuda.synchronize()
    checks["opus_mxfp4"] = _check_mx(x, q4, sc, opus.fp4_e2m1, torch)
    for k in ("torch_copy", "torch_to_fp8", "torch_scaled_to_fp8"):
        checks[k] = True
    out = {"gib": gib, "n": n, "checks": checks}
    names = list(kernels)
    for p in range(2):
        for name in names:
            fn, nbytes = kernels[name]
            ms = common.cuda_event_ms(fn, reps=reps, warmup=5, before=fresh)
            key = name if p == 0 else name + "_repeat"
            out[key] = {"ms": ms, "bytes": nbytes, "gbps": nbytes / (ms["median"] * 1e-3) / 1e9,
                        "correct": checks[name]}
            print(f"[quantize] {key:28s} {ms['median']:.3f} ms {out[key]['gbps']:.0f} GB/s "
                  f"{checks[name]}", file=sys.stderr)
        names.reverse()
    gbps = lambda k: (out[k]["gbps"] + out[k + "_repeat"]["gbps"]) / 2
    ms = lambda k: (out[k]["ms"]["median"] + out[k + "_repeat"]["ms"]["median"]) / 2
    out["ratio"] = {
        **{f"{k}_vs_torch_copy": gbps(k) / gbps("torch_copy")
           for k in ("opus_fp8_per_tensor", "opus_mxfp8", "opus_mxfp4")},
        "opus_fp8_per_tensor_speedup_vs_torch_to_fp8": ms("torch_to_fp8") / ms("opus_fp8_per_tensor"),
        "opus_fp8_per_tensor_speedup_vs_torch_scaled_to_fp8":
            ms("torch_scaled_to_fp8") / ms("opus_fp8_per_tensor"),
        "note": "bandwidth: mean of the two passes' median GB/s of the bytes each moves; "
                "speedups: ratio of median times",
    }
    return out


def markdown(r, note=""):
    q = r["quantize"]
    lines = common.report_head("opus quantization kernels", r, note)
    lines += ["| goal | measured | target | |", "| --- | --- | --- | --- |"]
    for key, goal in [("opus_fp8_per_tensor_vs_torch_copy", 0.9), ("opus_mxfp8_vs_torch_copy", 0.9),
                      ("opus_mxfp4_vs_torch_copy", 0.9),
                      ("opus_fp8_per_tensor_speedup_vs_torch_to_fp8", 1.0)]:
        v = q["ratio"][key]
        ok = v > goal if "speedup" in key else v >= goal
        lines.append(f"| {key} | {v:.3f} x | {'>' if 'speedup' in key else '>='} {goal} x | "
                     f"{'PASS' if ok else '**MISS**'} |")
    lines += ["", f"{q['gib']} GiB of bf16; bytes = the bf16 read + every byte written; median of "
              "CUDA-event times, two passes", ""]
    lines += common.kernel_rows(q)
    return "\n".join(lines) + "\n"


def main():
    common.report_main(__doc__, "quantize", run, markdown, width=52)


if __name__ == "__main__":
    main()
