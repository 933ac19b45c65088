"""CPU part of the differential suite, on the generated C: the generated programs rendered for
sm_80 (CUDA dialect, pure C: no fp8 asm) and gfx942 (HIP dialect: buffer-resource accesses),
compiled for the host and run over the whole grid (tests/hostexec), compared bitwise with the
interpreter and with the independent reference. This is what checks, without a GPU, the
integer division and modulo fix-ups, shift guards, bounds conditions, vector tails and
conversions of *our emitted C*. OPUS_DIFF_HOST_EXAMPLES sets the number of batches per target
(default 24 of 16 programs: one host binary per target)."""
import pytest
from hypothesis import given

import diff_gen
import diff_host

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
