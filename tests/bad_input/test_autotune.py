"""Bad input to opus.autotune and to @opus.kernel's occupancy and register hints: each case
checks the error's type and that its message names the problem (and, for a kernel's hints
checked against a chip, the kernel's def line); a refused call tunes nothing and writes no
cache file."""
import numpy as np
import pytest

import opus
from opus.errors import ArgumentError, OpusError

from expect import no_new_cache_files, raises


@opus.kernel
def axpy(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32, BLOCK: opus.constexpr):
    i = opus.block_id_x() * BLOCK + opus.thread_id_x()
    if i < n:
        out[i] = out[i] + x[i]


def host(x, out, n, *, block=64):
    return out


CONFIGS = [{"BLOCK": 64}, {"BLOCK": 128}]
GRID = lambda m: (m["n"] + m["BLOCK"] - 1) // m["BLOCK"]  # noqa: E731


@pytest.fixture(autouse=True)
def _interpreter(cache_root):
    with opus.set_target("sm_90a", interpret=True):
        yield


# -- opus.autotune(...) itself ---------------------------------------------------------------
@pytest.mark.parametrize("configs,needles", [
    ({"BLOCK": 64}, ("configs", "non-empty list of dicts")),
    ([], ("configs", "non-empty list")),
    (None, ("configs", "list of dicts")),
    ("BLOCK=64", ("configs", "list of dicts")),
    ([{"BLOCK": 64}, 128], ("configs[1]", "must be a dict")),
    ([("BLOCK", 64)], ("configs[0]", "must be a dict")),
    ([{1: 64}], ("configs[0]", "non-string key")),
    ([{"BLOCK": 64}, {"BLOCK": 64}], ("configs[1] repeats configs[0]",)),
])
def test_bad_configs(configs, needles):
    with raises(ArgumentError, *needles):
        opus.autotune(configs=configs, key="n")


@pytest.mark.parametrize("kw,needles", [
    ({"key": 5}, ("key", "parameter name")),
    ({"key": ["n", 3]}, ("key", "parameter name")),
    ({"key": ["n", "n"]}, ("key", "twice")),
    ({"restore": {"out": 1}}, ("restore", "parameter name")),
    ({"_timer": 1.5}, ("_timer", "callable")),
])
def test_bad_key_restore_timer(kw, needles):
    with raises(ArgumentError, *needles):
        opus.autotune(configs=CONFIGS, **kw)


@pytest.mark.parametrize("kw,needles", [
    ({"key": "m"}, ("key=", "no parameter(s) m", "x, out, n, BLOCK")),
    ({"key": ("n", "K")}, ("key=", "no parameter(s) K")),
    ({"restore": "y"}, ("restore=", "no parameter(s) y")),
    ({"restore": "n"}, ("restore", "n", "not a pointer")),
    ({"key": "BLOCK"}, ("BLOCK", "set by the configurations", "key=")),
])
def test_kernel_names(kw, needles):
    with raises(ArgumentError, *needles):
        opus.autotune(configs=CONFIGS, **kw)(axpy)


@pytest.mark.parametrize("configs,needles", [
    ([{"n": 5}], ("configs[0] sets n", "constexpr parameters: BLOCK")),
    ([{"BLOCK": 64}, {"BLOCK": 32, "WARPS": 4}], ("configs[1] sets WARPS",)),
    ([{"out": 0}], ("configs[0] sets out",)),
])
def test_kernel_config_names_a_non_constexpr(configs, needles):
    with raises(ArgumentError, *needles):
        opus.autotune(configs=configs, key="n")(axpy)


def test_function_config_names_an_unknown_keyword():
    with raises(ArgumentError, "configs[0] sets threads", "keyword parameters: block, n, out, x"):
        opus.autotune(configs=[{"threads": 64}], key="n")(host)


def test_function_key_names_a_missing_argument():
    with raises(ArgumentError, "key=", "no parameter(s) size"):
        opus.autotune(configs=[{"block": 64}], key="size")(host)


@pytest.mark.parametrize("target", [3, "axpy", opus.f32.__class__])
def test_decorates_kernels_and_functions_only(target):
    with raises(ArgumentError, "decorates an @opus.kernel or a function"):
        opus.autotune(configs=CONFIGS, key="n")(target)


# -- launching a tuned kernel, calling a tuned function ----------------------------------------
@pytest.fixture
def tuned():
    return opus.autotune(configs=CONFIGS, key="n", restore="out",
                         _timer=lambda c, launch: (launch(), 1.0)[1])(axpy)


def test_tuned_kernel_called_without_launch_configuration(tuned):
    with raises(OpusError, "launched with a configuration", "axpy[grid, block]"):
        tuned(np.zeros(4, np.float32), np.zeros(4, np.float32), 4)


def test_tuned_kernel_given_one_launch_dimension(tuned):
    with raises(ArgumentError, "give both"):
        tuned[4]


def test_tuned_parameter_passed_by_name(tuned, cache_root):
    x = np.zeros(4, np.float32)
    with no_new_cache_files(cache_root), raises(ArgumentError, "BLOCK", "chosen by opus.autotune"):
        tuned[GRID, 64](x, x.copy(), 4, BLOCK=64)


def test_tuned_parameter_passed_by_position(tuned, cache_root):
    x = np.zeros(4, np.float32)
    with no_new_cache_files(cache_root), raises(ArgumentError, "BLOCK", "chosen by opus.autotune"):
        tuned[GRID, 64](x, x.copy(), 4, 64)


@pytest.mark.parametrize("n", [[4], {"n": 4}, object()])
def test_key_argument_of_an_unkeyable_type(n, cache_root):
    f = opus.autotune(configs=[{"block": 64}], key="n", _timer=lambda c, launch: 1.0)(host)
    with no_new_cache_files(cache_root), raises(ArgumentError, "key argument 'n'", "cannot key"):
        f(np.zeros(4, np.float32), np.zeros(4, np.float32), n)


def test_restore_argument_that_cannot_be_saved(cache_root):
    f = opus.autotune(configs=[{"block": 64}], key="n", restore="out",
                      _timer=lambda c, launch: 1.0)(host)
    with no_new_cache_files(cache_root), raises(OpusError, "restore='out'", "cannot save"):
        f(np.zeros(4, np.float32), [0.0] * 4, 4)


def test_tuned_function_missing_key_argument(cache_root):
    f = opus.autotune(configs=[{"block": 64}], key="n", _timer=lambda c, launch: 1.0)(host)
    with no_new_cache_files(cache_root), raises(ArgumentError, "missing argument(s) n"):
        f(np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_tuned_function_given_the_tuned_keyword(cache_root):
    f = opus.autotune(configs=[{"block": 64}], key="n", _timer=lambda c, launch: 1.0)(host)
    with no_new_cache_files(cache_root), raises(ArgumentError, "block", "chosen by opus.autotune"):
        f(np.zeros(4, np.float32), np.zeros(4, np.float32), 4, block=32)


def test_tuned_function_given_an_unknown_argument(cache_root):
    f = opus.autotune(configs=[{"block": 64}], key="n", _timer=lambda c, launch: 1.0)(host)
    with no_new_cache_files(cache_root), raises(ArgumentError, "host", "unexpected keyword"):
        f(np.zeros(4, np.float32), np.zeros(4, np.float32), 4, size=3)


def test_quiet_flag_with_a_bad_value(monkeypatch, cache_root):
    monkeypatch.setenv("OPUS_AUTOTUNE_QUIET", "maybe")
    f = opus.autotune(configs=[{"block": 64}], key="n", _timer=lambda c, launch: 1.0)(host)
    with no_new_cache_files(cache_root), raises(ValueError, "OPUS_AUTOTUNE_QUIET", "maybe"):
        f(np.zeros(4, np.float32), np.zeros(4, np.float32), 4)


# -- @opus.kernel's occupancy and register hints -----------------------------------------------
@pytest.mark.parametrize("hints,needles", [
    ({"block": 0}, ("block=", "1..1024", "0")),
    ({"block": 2048}, ("block=", "1..1024")),
    ({"block": 256.0}, ("block=", "an int")),
    ({"block": 256, "min_blocks": 0}, ("min_blocks=", ">= 1")),
    ({"block": 256, "min_blocks": "2"}, ("min_blocks=", "an int", "'2'")),
    ({"block": 256, "min_blocks": True}, ("min_blocks=", "an int")),
    ({"maxnreg": -1}, ("maxnreg=", ">= 1")),
    ({"maxnreg": 64.5}, ("maxnreg=", "an int")),
    ({"min_blocks": 2}, ("min_blocks needs a fixed block size", "block=")),
    ({"block": 256, "min_blocks": 2, "maxnreg": 64}, ("min_blocks and maxnreg", "__maxnreg__")),
])
def test_bad_hints_at_definition(hints, needles):
    with raises(OpusError, *needles):
        hinted(**hints)


def hinted(**hints):
    @opus.kernel(**hints)
    def k(x: opus.Ptr[opus.f32]):  # ERR: def
        x[0] = 1.0
    return k


@pytest.mark.parametrize("hints,target,needles", [
    ({"block": 256, "maxnreg": 300}, "sm_90a", ("maxnreg=300", "sm_90a", "24..255")),
    ({"block": 256, "maxnreg": 8}, "sm_90a", ("maxnreg=8", "24..255")),
    ({"block": 256, "maxnreg": 8}, "gfx942", ("maxnreg=8", "gfx942", "16..512")),
    ({"block": 256, "min_blocks": 9}, "sm_90a", ("min_blocks=9", "2048 threads")),
    ({"block": 256, "min_blocks": 9}, "sm_86", ("min_blocks=9", "1536 threads")),
    ({"block": 64, "min_blocks": 33}, "sm_90a", ("min_blocks=33", "at most 32 blocks")),
    ({"block": 1024, "min_blocks": 3}, "gfx950", ("min_blocks=3", "48 waves per CU",
                                                  "at most 8 per SIMD")),
    ({"maxnreg": 600}, "gfx942", ("maxnreg=600", "16..512")),
])
def test_hints_a_chip_cannot_meet(hints, target, needles, cache_root):
    k = hinted(**hints)
    with no_new_cache_files(cache_root), raises(opus.TraceError, *needles, at="def"):
        k.source(target=target)
