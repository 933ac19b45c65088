"""CPU part of the differential suite, on the generated C: the generated programs rendered for
sm_80 (CUDA dialect, pure C: no fp8 asm) and gfx942 (HIP dialect: buffer-resource accesses),
compiled for the host and run over the whole grid (tests/hostexec), compared bitwise with the
interpreter and with the independent reference. This is what checks, without a GPU, the
integer division and modulo fix-ups, shift guards, bounds conditions, vector tails and
conversions of *our emitted C*. OPUS_DIFF_HOST_EXAMPLES sets the number of batches per target
(default 24 of 16 programs: one host binary per target)."""
import functools

import numpy as np
import pytest
from hypothesis import given

import diff_gen
import diff_host
import opus
from diff_ref import int_binary, shift
from diff_run import NP
from diff_types import BITS, INTS, SPECIALS
from hostexec import HostProgram, Launch

# NaN and out-of-range inputs are the point: numpy's casts of them need not warn
pytestmark = pytest.mark.filterwarnings("ignore:.* encountered in cast:RuntimeWarning")

BATCH, THREADS, BLOCK = 16, 64, 32
EXAMPLES = 24


def _generated_batches():
    """The batches hypothesis draws (no shrinking: they all go into one binary)."""
    out = []

    @diff_gen.diff_settings(default_examples=EXAMPLES, shrink=False,
                            count_env="OPUS_DIFF_HOST_EXAMPLES")
    @given(diff_gen.batches(BATCH))
    def collect(batch):
        out.append(batch)
    collect()
    return out


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_generated_programs_on_the_host(target, tmp_path):
    batches = diff_host.run_on_host(_generated_batches(), target, THREADS, BLOCK, tmp_path)
    failures = [f for b in batches for f in diff_host.compare(b, target)]
    programs = sum(len(b.progs) for b in batches)
    assert programs >= len(batches) * BATCH * 0.9  # only a few refused by the target
    assert not failures, (f"{len(failures)} mismatches in {programs} programs; the first:\n"
                          + "\n\n".join(failures[:3]))


# -- integer division, modulo and shifts at every edge, deterministically ------------------------

EDGE_OPS = ("floordiv", "mod", "tdiv", "tmod", "shl", "shr")


@functools.lru_cache(None)
def int_edges(t):
    """out[6 i + j] = the j-th of EDGE_OPS on a[i], b[i] (b the shift amount, as a value)."""
    dt = getattr(opus, t)

    @opus.kernel
    def edges(a: opus.Ptr[dt], b: opus.Ptr[dt], out: opus.Ptr[dt]):
        i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        x, y = a[i], b[i]
        for j, r in enumerate((x // y, x % y, opus.tdiv(x, y), opus.tmod(x, y), x << y, x >> y)):
            out[i * 6 + j] = r
    return edges


def _edge_pairs(t):
    """Every pair of the type's special values and the amounts around its width, padded to
    whole blocks of 64."""
    w = BITS[t]
    vals = [v for v in dict.fromkeys(SPECIALS[t] + [8, 16, w - 1, w, w + 1])
            if np.array(v).astype(NP[t]) == v]
    a, b = np.array([(x, y) for x in vals for y in vals], object).T
    n = -(-len(a) // 64) * 64
    return np.resize(a, n).astype(NP[t]), np.resize(b, n).astype(NP[t])


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_integer_division_and_shift_edges_on_the_host(target, tmp_path):
    """The emitted C's floor-division and modulo fix-ups, tdiv/tmod, and shift guards and
    fill, for every integer type and every pair of edge values (shift amounts equal to the
    width, MIN // -1, division by zero), against the reference's definitions."""
    prog, runs = HostProgram(target), []
    for t in INTS:
        a, b = _edge_pairs(t)
        out = np.zeros(6 * len(a), NP[t])
        runs.append((t, a, b, out, Launch(prog.add(int_edges(t).specialize(target=target)),
                                          len(a) // 64, 64, [a, b, out])))
    prog.build(tmp_path)
    prog.run([r[-1] for r in runs])
    bad = []
    for t, a, b, out, _ in runs:
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
            want = [int_binary(op, x, y, t) for op in EDGE_OPS[:4]] + \
                   [shift(op, x, y, t, t) for op in EDGE_OPS[4:]]
            got = out[6 * i:6 * i + 6].tolist()
            bad += [f"{t} {x} {op} {y}: host {g}, reference {w}"
                    for op, g, w in zip(EDGE_OPS, got, want) if g != w]
    assert not bad, f"{len(bad)} wrong on {target}; the first:\n" + "\n".join(bad[:10])
