"""gfx950's fp4 conversion instructions (v_cvt_scalef32_pk_fp4_f32, v_cvt_scalef32_pk_f32_fp4, at
scale 1.0: targets/amd.py _GFX950_FP4): vector casts f32 <-> fp4 take one instruction per two
values, and the generated HIP, executed on the host with the instructions modelled from AMD's
definition (tests/hostexec/shim/hip.h), gives what the interpreter as gfx950 gives and what the
language's rule says (ml_dtypes' float4_e2m1fn after clamping to +-6; NaN: the zero of the
opposite sign): every fp4 code decoded, the special values and 2^20 random values encoded."""
import collections
import functools
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32, fp4_e2m1, u8

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "amd"))
from test_amd_target import asm_of, instrs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
N_RANDOM = 1 << 20


@functools.lru_cache(None)
def round_trip():
    """Each thread: 32 f32 -> fp4x32 (stored as 16 bytes) -> back to f32; and 32 bytes of codes
    (64 fp4) decoded."""
    @opus.kernel(block=64)
    def k(x: opus.Ptr[f32], q: opus.Ptr[u8], y: opus.Ptr[f32], codes: opus.Ptr[u8],
          dec: opus.Ptr[f32], n: opus.i32):
        t = opus.block_id_x() * 64 + opus.thread_id_x()
        gx, gy = opus.make_gmem(x, n), opus.make_gmem(y, n)
        gq = opus.make_gmem(q, n // 2)
        v = opus.concat(*[gx.load(t * 32 + 4 * j, vec=4) for j in range(8)])
        f = opus.cast(v, fp4_e2m1)
        gq.store(opus.bitcast(f, opus.u8x16), t * 16)
        back = opus.cast(f, f32)
        for j in range(8):
            gy.store(back[4 * j:4 * j + 4], t * 32 + 4 * j)
        gc, gd = opus.make_gmem(codes, n // 2), opus.make_gmem(dec, n)
        c = opus.bitcast(gc.load(t * 16, vec=16), opus.fp4x32)
        d = opus.cast(c, f32)
        for j in range(8):
            gd.store(d[4 * j:4 * j + 4], t * 32 + 4 * j)
    return k


def specials():
    """Ties, the grid, subnormal steps, overflow edges, infinities, NaNs, signed zeros."""
    grid = np.float32([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    mids = (grid[:-1] + grid[1:]) / 2                       # ties to even
    near = np.concatenate([np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(9))])
    edge = np.float32([6, 6.5, 7, np.nextafter(np.float32(7), np.float32(0)), 8, 1e30, 3.4e38,
                       np.inf, 0.25, np.nextafter(np.float32(0.25), np.float32(1)), 1e-45, 1e-40,
                       np.nan])
    neg_nan = np.frombuffer(np.uint32([0xFFC00000]).tobytes(), np.float32)
    v = np.concatenate([grid, mids, near, edge])
    return np.concatenate([v, -v, neg_nan]).astype(np.float32)


def inputs():
    rng = np.random.default_rng(15)
    sp = specials()
    # random magnitudes around fp4's range (2^-4 .. 2^4), both signs, and random bit patterns
    r1 = (rng.standard_normal(N_RANDOM // 2) * np.exp2(rng.uniform(-4, 4, N_RANDOM // 2)))
    r2 = rng.integers(0, 2 ** 32, N_RANDOM // 2, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([sp, r1.astype(np.float32), r2])
    return np.concatenate([x, np.zeros((-len(x)) % (64 * 32), np.float32)])


def reference_codes(x):
    """The language's rule from ml_dtypes: clamp to +-6 (NaN stays NaN), round to nearest even;
    NaN gives the zero of the opposite sign."""
    c = np.clip(x, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    sign = (x.view(np.uint32) >> 31).astype(np.uint8)
    return np.where(np.isnan(x), (sign ^ 1) << 3, c).astype(np.uint8)


def unpack_codes(q):
    return np.stack([q & 0xF, q >> 4], axis=1).ravel()


def run(where, x, codes, tmp_path):
    n = len(x)
    q = np.zeros(n // 2, np.uint8)
    y = np.zeros(n, np.float32)
    dec = np.zeros(n, np.float32)
    grid = n // (64 * 32)
    if where == "interp":
        with opus.set_target("gfx950", interpret=True):
            round_trip()[grid, 64](x, q, y, codes, dec, n)
    else:
        from hostexec import run_kernel
        run_kernel(round_trip(), grid, 64, x, q, y, codes, dec, n, target="gfx950",
                   workdir=tmp_path)
    return q, y, dec


@pytest.mark.parametrize("where", ["interp", "host"])
def test_fp4_conversions_against_the_rule(where, tmp_path):
    x = inputs()
    codes = np.arange(256, dtype=np.uint8)  # every byte: every pair of fp4 codes
    codes = np.resize(codes, len(x) // 2)
    q, y, dec = run(where, x, codes, tmp_path)
    want = reference_codes(x)
    got = unpack_codes(q)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (where, x[bad[:5]], got[bad[:5]], want[bad[:5]])
    value = unpack_codes(codes).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    np.testing.assert_array_equal(dec.view(np.uint32), value.view(np.uint32))  # -0 too
    back = want.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    np.testing.assert_array_equal(y.view(np.uint32), back.view(np.uint32))


def _mx_fp4():
    @opus.kernel(block=64)
    def k(x: opus.Ptr[f32], q: opus.Ptr[fp4_e2m1], s: opus.Ptr[opus.e8m0], y: opus.Ptr[f32]):
        t = opus.thread_id_x()
        gx, gy = opus.make_gmem(x, 1 << 20), opus.make_gmem(y, 1 << 20)
        v = opus.concat(*[gx.load(t * 32 + 4 * j, vec=4) for j in range(8)])
        qv, sc = opus.mx_quantize(v, fp4_e2m1)
        opus.make_gmem(q, 1 << 20).store(qv, t * 32)
        s[t] = sc
        d = opus.mx_dequantize(qv, sc)
        z = opus.scaled_cast(v, fp4_e2m1, 0.5)
        opus.make_gmem(q, 1 << 20).store(z, t * 32 + 64 * 32)
        for j in range(8):
            gy.store(d[4 * j:4 * j + 4], t * 32 + 4 * j)
    return k


def _cvt_counts(arch):
    c = collections.Counter(l.split()[0] for l in instrs(asm_of(_mx_fp4(), arch)))
    return c["v_cvt_scalef32_pk_fp4_f32"], c["v_cvt_scalef32_pk_f32_fp4"]


def test_amdgcn_one_instruction_per_two_values():
    """mx_quantize and scaled_cast (32 values each) encode with 16 v_cvt_scalef32_pk_fp4_f32
    apiece; mx_dequantize decodes with 16 v_cvt_scalef32_pk_f32_fp4. gfx942 has neither."""
    assert _cvt_counts("gfx950") == (32, 16)
    assert _cvt_counts("gfx942") == (0, 0)
