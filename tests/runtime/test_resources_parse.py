import pytest

from opus.runtime.inspect import resources_from_log

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'first' for 'sm_90a'
ptxas info    : Function properties for first
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]
ptxas info    : Function properties for _Z6helperv
ptxas         .     99 bytes stack frame, 99 bytes spill stores, 99 bytes spill loads
ptxas info    : Compiling entry function 'second' for 'sm_90a'
ptxas info    : Function properties for second
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 368 bytes cmem[0]
"""


def test_parses_each_kernel():
    first = resources_from_log(LOG, kernel="first")
    assert first == {"registers": 255, "shared_bytes": 4096, "spill_stores": 8,
                     "spill_loads": 4, "stack_frame": 16, "barriers": 1, "const_bytes": 380}
    second = resources_from_log(LOG, kernel="second")
    assert second["registers"] == 12 and second["spill_stores"] == 0
    assert second["shared_bytes"] == 0


def test_ambiguous_or_missing():
    with pytest.raises(ValueError):
        resources_from_log(LOG)
    assert resources_from_log(LOG, kernel="third") == {}
    assert resources_from_log("no ptxas here") == {}
