"""Every f32 bit pattern (2^32) through the f32 -> fp4/fp6 encoders opus renders for CUDA
(codegen/subbyte.py), compiled for the host CPU, against ml_dtypes with the interpreter's rule
(clamp to the largest finite value, then ml_dtypes: nearest even; NaN gives the zero of the
opposite sign). fp4 also through the eight-lane word encoder: groups of eight consecutive
patterns, and 2^20 patterns of each chunk drawn at random (lanes of mixed sign, size and NaN).

    PYTHONPATH=src python tools/small_float_exhaustive.py [fp4_e2m1 fp6_e2m3 fp6_e3m2]

About ten minutes per type on one core. Exits 1 on a mismatch. The tests (tests/conversions/
test_fp4_encoder.py, tests/lang/test_packed_types.py) check chosen inputs on every target and
the GPU; this is the exhaustive check of the arithmetic, run by hand.
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

import ml_dtypes
import numpy as np

import opus
from opus import f32

# what the CUDA source takes from CUDA, in host C (PTX min/max: a NaN operand yields the other)
PRELUDE = r"""
#include <math.h>
#include <string.h>
static unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static float ptx_min(float a, float b) { return a != a ? b : b != b ? a : (a < b ? a : b); }
static float ptx_max(float a, float b) { return a != a ? b : b != b ? a : (a > b ? a : b); }
static unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = (unsigned long long)y << 32 | x; unsigned r = 0;
  for (int n = 0; n < 4; n++) r |= (unsigned)(v >> (8 * ((s >> (4 * n)) & 7)) & 0xFFu) << (8 * n);
  return r;
}
"""
CHUNK = 1 << 24


def helpers(t):
    """The device helpers of a kernel converting 8 f32 lanes (fp4: the word encoder) and 4 lanes
    (lane by lane) to ``t``, as host C."""
    @opus.kernel
    def conv(x: opus.Ptr[f32], y: opus.Ptr[t]):
        g, o = opus.make_gmem(x), opus.make_gmem(y)
        o.store(opus.cast(opus.concat(g.load(0, vec=4), g.load(4, vec=4)), t), 0)
        o.store(opus.cast(g.load(8, vec=4), t), 8)
    src = conv.source(target="sm_90a")
    defs = re.findall(r"^static __device__ __forceinline__ (.*)$", src, re.M)
    return "\n".join(defs).replace("fminf(", "ptx_min(").replace("fmaxf(", "ptx_max(")


def build(t, folder):
    """The shared library of t's encoders: enc (lane by lane) and, for fp4, enc8 (words)."""
    body = helpers(t)
    c = PRELUDE + body + (
        f"\nvoid enc(const unsigned* x, unsigned n, unsigned char* out) {{ for (unsigned i = 0; "
        f"i < n; i++) out[i] = opus_f32_to_{t.name}(__uint_as_float(x[i])); }}\n")
    word = "opus_f32x8_to_fp4_e2m1x8" in body
    if word:
        c += ("void enc8(const unsigned* x, unsigned n, unsigned* out) { for (unsigned i = 0; "
              "i < n; i += 8) { float f[8]; memcpy(f, x + i, 32); out[i / 8] = "
              "opus_f32x8_to_fp4_e2m1x8(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]); } }\n")
    path = os.path.join(folder, t.name)
    with open(path + ".c", "w") as f:
        f.write(c)
    subprocess.check_call(["cc", "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-o",
                           path + ".so", path + ".c", "-lm"])
    return ctypes.CDLL(path + ".so"), word


def reference(x, t):
    fin = float(ml_dtypes.finfo(t.np_dtype).max)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.clip(x, -fin, fin).astype(t.np_dtype).view(np.uint8) & np.uint8((1 << t.bits) - 1)


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def words_wrong(lib, u, want):
    """Lanes of u the word encoder gets wrong (eight consecutive lanes a word)."""
    w = np.empty(len(u) // 8, np.uint32)
    lib.enc8(_ptr(u), ctypes.c_uint(len(u)), _ptr(w))
    shifts = 4 * np.arange(8, dtype=np.uint32)
    want_w = (want.reshape(-1, 8).astype(np.uint32) << shifts).sum(axis=1, dtype=np.uint32)
    return int(np.count_nonzero(w != want_w))


def run(t, folder, rng):
    lib, word = build(t, folder)
    out = np.empty(CHUNK, np.uint8)
    bad_lanes = bad_words = 0
    t0 = time.time()
    for base in range(0, 1 << 32, CHUNK):
        u = np.arange(base, base + CHUNK, dtype=np.uint64).astype(np.uint32)
        want = reference(u.view(np.float32), t)
        lib.enc(_ptr(u), ctypes.c_uint(CHUNK), _ptr(out))
        wrong = np.flatnonzero(out != want)
        if wrong.size and not bad_lanes:
            i = int(wrong[0])
            print(f"{t.name}: f32 bits {int(u[i]):#010x} gave {out[i]}, want {want[i]}")
        bad_lanes += wrong.size
        if word:
            pick = rng.integers(0, CHUNK, 1 << 20)
            bad_words += words_wrong(lib, u, want) + words_wrong(lib, u[pick], want[pick])
    print(f"{t.name}: {bad_lanes} lanes wrong of 2^32"
          + (f", {bad_words} words wrong" if word else "") + f" ({time.time() - t0:.0f} s)")
    return bad_lanes + bad_words


def main(names):
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as folder:
        bad = sum(run(getattr(opus, n), folder, rng) for n in names)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1:] or ["fp4_e2m1", "fp6_e2m3", "fp6_e3m2"])
