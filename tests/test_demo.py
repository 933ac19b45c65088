"""`opus demo` in the CPU interpreter: every example matches numpy on each vendor's chips, with
that vendor's matrix instruction."""
import pytest

import opus
from opus.cli import main


@pytest.mark.parametrize("target,mma", [("sm_90a", "nv.mma.m16n8k16.bf16"),
                                        ("gfx942", "amd.mfma.f32.32x32x8.f16"),
                                        ("gfx950", "amd.mfma.f32.32x32x8.f16")])
def test_demo_in_interpreter(target, mma, capsys):
    before = opus.current_target()
    assert main(["demo", "--interpret", "--target", target]) == 0
    out = capsys.readouterr().out
    assert f"CPU interpreter as {target}" in out and "all examples match" in out
    assert f"with {mma}" in out
    assert opus.current_target() is before  # the demo's target choice does not outlive it
