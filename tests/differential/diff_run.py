"""Turning a batch of programs into a kernel, inputs, runs (interpreter, GPU, reference) and a
comparison that names the first mismatching program, thread and inputs."""
from __future__ import annotations

import atexit
import importlib.util
import itertools
import json
import math
import os
import re
import shutil
import tempfile
import traceback

import ml_dtypes
import numpy as np

import opus
from diff_gen import SLOTS, ExprProg, MemProg, itemsize, params, render
from diff_ref import Thread, Tolerated, binary, convert, evaluate
from diff_types import BITS, SPECIALS, is_float, is_signed, wrap

TARGET = "sm_90a"
NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16,
      "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
ULPS = {"f16": 1, "bf16": 1, "f32": 4, "f64": 4}  # tolerance of transcendental results
SENTINEL = 0xA5  # fill byte of outputs: memory programs must leave masked elements alone

_tmp = None
_serial = itertools.count()
# programs and kernels checked, failing programs, batches retried one by one, threads whose
# result is TOLERATED
STATS = {"programs": 0, "kernels": 0, "failures": 0, "split": 0, "tolerated": 0}


# -- kernels ---------------------------------------------------------------------------------

def load_kernel(source):
    """Import generated source from a real file (opus reads kernel source with inspect)."""
    global _tmp
    if _tmp is None:
        _tmp = tempfile.mkdtemp(prefix="opus_diff_")
        atexit.register(_clean_up)
    name = f"opus_diff_{next(_serial)}"
    path = f"{_tmp}/{name}.py"
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.diff_kernel, path


def _clean_up():
    """Remove the generated sources unless a failure report names one of them."""
    if not STATS["failures"]:
        shutil.rmtree(_tmp, ignore_errors=True)


# -- inputs ----------------------------------------------------------------------------------

def aligned(n, t):
    """n elements of type t filled with SENTINEL bytes, 64-byte aligned (vector accesses need
    their alignment)."""
    nb = n * itemsize(t)
    buf = np.full(nb + 64, SENTINEL, np.uint8)
    off = -buf.ctypes.data % 64
    return buf[off:off + nb].view(NP[t])


MANT = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}
NARROWER = {"f32": ("f16", "bf16"), "f64": ("f32", "f16", "bf16")}


def _float_ties(rng, t, n):
    """Within an ulp of halfway between neighbours of a narrower format (conversion ties)."""
    u = UINT[BITS[t]]
    out = rng.integers(0, 1 << BITS[t], n, dtype=np.uint64).astype(u)
    narrow = NARROWER.get(t, ())
    which = rng.integers(0, max(1, len(narrow)), n)
    for i, nt in enumerate(narrow):
        mags = rng.standard_normal(n) * 10.0 ** rng.integers(-2, 4, n)
        base = mags.astype(NP[nt]).astype(NP[t]).view(u)
        tie = base + u(1 << (MANT[t] - MANT[nt] - 1)) + rng.integers(-1, 2, n).astype(u)
        out = np.where(which == i, tie, out)
    return out


def _int_ties(rng, t, n):
    """2**e + 2**(e - p) + (-1, 0 or 1): near rounding ties of a p-bit float significand."""
    precisions = [p for p in (8, 11, 24, 53) if p < BITS[t] - 1]
    if not precisions:
        return rng.integers(0, 1 << BITS[t], n, dtype=np.uint64).astype(UINT[BITS[t]])
    vals = []
    for _ in range(n):
        p = int(rng.choice(precisions))
        e = int(rng.integers(p, BITS[t] - 1))
        v = (1 << e) + (1 << (e - p)) + int(rng.integers(-1, 2))
        vals.append(wrap(-v if is_signed(t) and rng.integers(2) else v, t))
    return np.array(vals, object).astype(NP[t]).view(UINT[BITS[t]])


def column(rng, t, n):
    """n input values of type t: specials, random bit patterns, ordinary values, near ties."""
    u = UINT[BITS[t]]
    pick = rng.integers(0, 4, n)
    spec = np.array([_to_np(x, t) for x in SPECIALS[t]], NP[t]).view(u)
    out = np.where(pick == 0, spec[rng.integers(0, len(spec), n)],
                   rng.integers(0, 1 << BITS[t], n, dtype=np.uint64).astype(u))
    if is_float(t):
        ordinary = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 5, n)).astype(NP[t])
        ties = _float_ties(rng, t, n)
    else:
        ordinary = rng.integers(-40, 70, n).astype(NP[t])
        ties = _int_ties(rng, t, n)
    out = np.where(pick == 2, ordinary.view(u), out)
    return np.where(pick == 3, ties, out).view(NP[t])


def _to_np(x, t):
    return np.array(x, np.float64).astype(NP[t]) if is_float(t) else np.array(x).astype(NP[t])


def make_args(progs, nthreads, seed):
    """Arguments by parameter name: input columns, sentinel-filled outputs, random bounds."""
    rng = np.random.default_rng(seed)
    args = {}
    for name, _, t in params(progs):
        if name.startswith("x_"):
            a = aligned(nthreads * SLOTS, t)
            a[:] = column(rng, t, nthreads * SLOTS)
            args[name] = a
    for k, p in enumerate(progs):
        if isinstance(p, ExprProg):
            args[f"o{k}"] = aligned(nthreads, p.out_type)
            continue
        nsrc = (nthreads + 2) * p.vec
        src = aligned(nsrc, p.dtype)
        src[:] = column(rng, p.dtype, nsrc)
        nout = nthreads * p.out_vec
        args[f"m{k}"], args[f"o{k}"] = src, aligned(nout, p.out_type)
        if p.bound:
            n = _bound(rng, nsrc)
            args[f"n{k}"] = n if p.bound == "size" else n * itemsize(p.dtype) + int(
                rng.integers(0, itemsize(p.dtype)))
        args[f"k{k}"] = _bound(rng, nout)
    return args


def _bound(rng, n):
    """A bound that cuts a vector mostly, sometimes none or all."""
    return int(rng.choice([n, n - 1, n - 3, n // 2 + 1, 0, int(rng.integers(0, n + 1))]))


def arg_list(progs, args):
    return [args[name] for name, _, _ in params(progs)]


# -- runs ------------------------------------------------------------------------------------

def run_interp(kernel, progs, args, nthreads, block, target=TARGET):
    out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    with opus.set_target(target, interpret=True):
        kernel[nthreads // block, block](*arg_list(progs, out))
    return out


def run_gpu(kernel, progs, args, nthreads, block):
    from opus.runtime.device_array import DeviceArray
    dev = {k: (DeviceArray.from_numpy(v) if isinstance(v, np.ndarray) else v)
           for k, v in args.items()}
    with opus.set_target(TARGET, interpret=False):
        kernel[nthreads // block, block](*arg_list(progs, dev))
    return {k: (v.to_numpy() if isinstance(v, DeviceArray) else v) for k, v in dev.items()}


def run_reference(progs, args, nthreads, block):
    """Expected outputs; ``skip/o<k>`` marks threads whose result is TOLERATED."""
    out = dict(args)
    threads = [_thread(args, i) for i in range(nthreads)]
    for k, p in enumerate(progs):
        if isinstance(p, ExprProg):
            vals = [_evaluate(p.root, th) for th in threads]
            out[f"skip/o{k}"] = np.array([v is None for v in vals])
            STATS["tolerated"] += int(out[f"skip/o{k}"].sum())
            out[f"o{k}"] = _to_array([0 if v is None else v for v in vals], p.out_type)
        else:
            out[f"o{k}"] = _mem_reference(p, k, args, nthreads, block)
    return out


def _evaluate(root, th):
    try:
        return evaluate(root, th)
    except Tolerated:
        return None


def _thread(args, i):
    """Thread i's inputs (values and bit patterns by type and slot)."""
    values, bits = {}, {}
    for name, a in args.items():
        if name.startswith("x_"):
            t, row = name[2:], a[i * SLOTS:(i + 1) * SLOTS]
            values[t] = row.astype(np.float64).tolist() if is_float(t) else row.tolist()
            bits[t] = row.view(UINT[BITS[t]]).tolist()
    return Thread(values, bits)


def _to_array(vals, t):
    """Reference values (bools as u8) as an array of type t."""
    if is_float(t):
        return np.array(vals, np.float64).astype(NP[t])
    return np.array([int(v) for v in vals], object).astype(NP[t])


def _mem_reference(p, k, args, nthreads, block):
    """Lane by lane: bounded load, conversion, shared-memory exchange, bounded store."""
    src = args[f"m{k}"]
    n = args.get(f"n{k}", len(src))
    if p.bound == "nbytes":
        n //= itemsize(p.dtype)
    idx = (np.arange(nthreads)[:, None] + p.shift) * p.vec + np.arange(p.vec)
    ok = (idx >= 0) & (idx < n)
    lanes = np.where(ok, src[np.clip(idx, 0, len(src) - 1)], np.zeros((), src.dtype))
    if p.lanes_op or p.conv:
        vals = (lanes.astype(np.float64) if is_float(p.dtype) else lanes).ravel().tolist()
        if p.lanes_op:
            vals = [binary(p.lanes_op, v, 3, p.dtype) for v in vals]
        if p.conv:
            vals = [convert(v, p.dtype, p.conv) for v in vals]
        lanes = _to_array(vals, p.out_type).reshape(lanes.shape)
    if p.smem:
        chunks = block * p.vec // p.wvec
        blocks = lanes.reshape(nthreads // block, block * p.vec)
        local = np.arange(nthreads) % block
        c = (local * p.vec // p.wvec + p.rot) % chunks
        cols = c[:, None] * p.wvec + np.arange(p.wvec)
        lanes = blocks[np.arange(nthreads)[:, None] // block, cols]
    out = args[f"o{k}"].copy()
    oidx = np.arange(nthreads)[:, None] * p.out_vec + np.arange(p.out_vec)
    keep = oidx < args[f"k{k}"]
    out[oidx[keep]] = lanes[keep]
    return out


# -- comparison ------------------------------------------------------------------------------

def _ordered(x, t):
    """Float bit patterns as Python ints that order like the values (-0 and +0 both 0)."""
    sign = 1 << (BITS[t] - 1)
    return [-(b & (sign - 1)) if b & sign else b for b in x.view(UINT[BITS[t]]).tolist()]


def ulp_distance(a, b, t):
    """Distance in representable values (NaN to NaN 0, NaN to a number infinite)."""
    na, nb = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
    d = np.array([abs(x - y) for x, y in zip(_ordered(a, t), _ordered(b, t))], np.float64)
    return np.where(na & nb, 0.0, np.where(na | nb, math.inf, d))


def mismatches(p, got, want):
    """Indices of elements of one output that differ beyond what the program allows."""
    t = p.out_type
    if isinstance(p, ExprProg) and p.approx:
        return np.nonzero(ulp_distance(got, want, t) > ULPS[t])[0]
    u = UINT[BITS[t]]
    same = got.view(u) == want.view(u)
    if is_float(t) and not (isinstance(p, MemProg) and p.conv is p.lanes_op is None):
        # (copies keep NaN bits; arithmetic and conversions may not)
        same |= np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    return np.nonzero(~same)[0]


def _show(x, t):
    if is_float(t):
        b = int(np.array(x, NP[t]).view(UINT[BITS[t]]))
        return f"{float(x)!r} (0x{b:0{BITS[t] // 4}x})"
    return repr(int(x))


def _leaves(n):
    if n.op == "in":
        yield (n.type, n.attr)
    for a in n.args:
        yield from _leaves(a)


def _expr_inputs(p, args, thread, got, want, names):
    """The failing thread's inputs, and which side the reference agrees with."""
    out = []
    for t, slot in sorted(set(_leaves(p.root))):
        out.append(f"    a_{t}_{slot} = {_show(args[f'x_{t}'][thread * SLOTS + slot], t)}")
    ref = _evaluate(p.root, _thread(args, thread))
    if ref is None:
        return out + ["  (the reference tolerates this case: diff_ref.TOLERATED)"]
    r = _to_array([ref], p.out_type)
    agree = [n for n, x in zip(names, (got, want)) if not len(mismatches(p, x[thread:thread + 1], r))]
    return out + [f"  the reference gives {_show(r[0], p.out_type)}, agreeing with "
                  f"{' and '.join(agree) or 'neither'}"]


def _mem_inputs(p, k, args, thread):
    lo, hi = max(0, (thread + p.shift - 1) * p.vec), (thread + p.shift + 2) * p.vec
    bounds = {n: args[n] for n in (f"n{k}", f"k{k}") if n in args}
    return [f"    bounds {bounds}; m{k}[{lo}:{hi}] = "
            f"{[_show(v, p.dtype) for v in args[f'm{k}'][lo:hi]]}"]


def describe(k, p, lines, args, got, want, bad, names):
    """A failure report: the program's source, its inputs in the first failing thread and
    both results."""
    i = int(bad[0])
    thread = i if isinstance(p, ExprProg) else i // p.out_vec
    out = [f"program {k}: {names[0]} and {names[1]} differ in {len(bad)} elements, first at "
           f"{i} (thread {thread}):", *lines]
    t = p.out_type
    out.append(f"  {names[0]} {_show(got[i], t)}, {names[1]} {_show(want[i], t)}")
    if isinstance(p, ExprProg):
        out += _expr_inputs(p, args, thread, got, want, names)
    else:
        out += _mem_inputs(p, k, args, thread)
    return "\n".join(out)


# -- one batch ---------------------------------------------------------------------------------

def check(progs, seed, nthreads, block, against):
    """Run the batch in the interpreter and ``against`` ('reference' or 'gpu'); return a report
    for each program whose results differ. A batch that raises (trace, codegen, compile) is
    retried program by program, so that one bad program does not hide the others."""
    try:
        failures = _check(progs, seed, nthreads, block, against)
    except Exception as e:  # noqa: BLE001 - reported with the program that caused it
        if len(progs) > 1:
            STATS["split"] += 1
            return [f for p in progs for f in check([p], seed, nthreads, block, against)]
        error = "".join(traceback.format_exception(e, limit=-2))[-3000:]
        failures = [f"the program raised:\n{error}" + "\n".join(render(progs, block)[1][0])]
        STATS["programs"] += 1
    STATS["failures"] += len(failures)
    return failures


def _check(progs, seed, nthreads, block, against):
    source, spans = render(progs, block)
    kernel, path = load_kernel(source)
    args = make_args(progs, nthreads, seed)
    got = run_interp(kernel, progs, args, nthreads, block)
    if against == "gpu":
        want, names = run_gpu(kernel, progs, args, nthreads, block), ("interpreter", "GPU")
    else:
        want, names = run_reference(progs, args, nthreads, block), ("interpreter", "reference")
    failures = []
    for k, p in enumerate(progs):
        bad = mismatches(p, got[f"o{k}"], want[f"o{k}"])
        if f"skip/o{k}" in want:
            bad = bad[~want[f"skip/o{k}"][bad]]
        if len(bad):
            failures.append(describe(k, p, spans[k], args, got[f"o{k}"], want[f"o{k}"], bad,
                                     names) + f"\n  (kernel source: {path})")
    STATS["programs"] += len(progs)
    STATS["kernels"] += 1
    return failures


def counts_since(start):
    """STATS accumulated since the snapshot ``start`` (one test's share)."""
    return {k: v - start[k] for k, v in STATS.items()}


def verdicts(failures):
    """How many failures the reference blames on each side (memory programs and programs that
    raised have no reference verdict)."""
    out = {}
    for f in failures:
        m = re.search(r"agreeing with (\w+)", f)
        key = f"reference agrees with {m.group(1)}" if m else "no reference verdict"
        out[key] = out.get(key, 0) + 1
    return out


def write_report(what, counts, failures):
    """Counts and the first failures as JSON, where OPUS_DIFF_REPORT names a file."""
    path = os.environ.get("OPUS_DIFF_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({"against": what, **counts, "verdicts": verdicts(failures),
                       "first_failures": failures[:20]}, f, indent=1)
