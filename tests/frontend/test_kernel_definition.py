"""What a kernel is made of: its source as it was when defined, and the values of the globals
and closure variables it reads (part of its specialization: changing one retraces, on the
next launch and in .source()); mutable globals and `yield` are refused."""
import importlib
import sys

import numpy as np
import pytest

import opus
from opus import f32, i32, Ptr
from opus.frontend.launch import GuardedEntry

N = 8


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


def run(k, *arrays, n=N):
    out = np.zeros(n, np.float32)
    k[1, n](*arrays, out)
    return out


def consts(k, **cx):
    """The f32 constants in the kernel's IR."""
    return [line.split("value=")[1].rstrip("}") for line in k.ir(target="sm_90a", **cx).split("\n")
            if "f32 = const()" in line]


# -- globals are part of the specialization -------------------------------------------------------

SCALE = 2.0
OFFSET = 1.0


def add_offset(v):
    return v + OFFSET  # a helper's global counts too


@opus.kernel
def scaled(x: Ptr[f32], out: Ptr[f32]):
    t = opus.thread_id_x()
    out[t] = add_offset(x[t] * SCALE)


@pytest.fixture
def restore_globals():
    saved = SCALE, OFFSET
    yield
    globals().update(SCALE=saved[0], OFFSET=saved[1])


def test_changing_a_global_retraces_the_next_launch(launch_path, restore_globals):
    global SCALE, OFFSET
    x = np.arange(N, dtype=np.float32)
    launch = scaled[1, N]
    out = np.zeros(N, np.float32)
    launch(x, out)
    np.testing.assert_array_equal(out, x * 2 + 1)
    launch(x, out)  # the memoized launch (the C hot path with launch_path "C")
    SCALE = 3.0
    launch(x, out)
    np.testing.assert_array_equal(out, x * 3 + 1)
    OFFSET = -4.0   # a global read by the helper
    launch(x, out)
    np.testing.assert_array_equal(out, x * 3 - 4)
    SCALE = 3       # an int traces differently from 3.0: a new specialization as well
    launch(x, out)
    np.testing.assert_array_equal(out, x * 3 - 4)
    assert any(isinstance(e, GuardedEntry) for e in scaled.launch_entries.values())


def test_source_sees_the_new_value_and_old_values_reuse_their_trace(restore_globals):
    global SCALE
    first = scaled.specialize(target="sm_90a")
    assert consts(scaled) == ["2.0", "1.0"]
    SCALE = 5.0
    assert consts(scaled) == ["5.0", "1.0"]
    assert "0x1.4000000000000p+2f" in scaled.source(target="sm_90a")  # 5.0
    SCALE = 2.0
    assert scaled.specialize(target="sm_90a") is first


def test_closure_variables_are_part_of_the_specialization_too():
    factor = 2.0

    @opus.kernel
    def k(x: Ptr[f32], out: Ptr[f32]):
        t = opus.thread_id_x()
        out[t] = x[t] * factor

    x = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(run(k, x), x * 2)
    factor = 4.0
    np.testing.assert_array_equal(run(k, x), x * 4)


def helper_reading_code(v):
    return opus.max(v, np.float32(0).item())


@opus.kernel
def reads_only_code(x: Ptr[f32], out: Ptr[f32]):
    t = opus.thread_id_x()
    out[t] = helper_reading_code(x[t])


def test_modules_and_library_functions_are_not_guarded_user_functions_are():
    # opus and np (modules), opus.max and .item (library code) are not guarded; the user's
    # helper is, by identity (rebinding it must retrace)
    guards = reads_only_code.specialize(target="sm_90a").guards
    assert [(key, value) for _, key, value, _ in guards] == [
        ("helper_reading_code", helper_reading_code)]
    x = np.arange(N, dtype=np.float32) - 4
    np.testing.assert_array_equal(run(reads_only_code, x), np.maximum(x, 0))


TABLE = [1.0, 2.0]
ARRAY = np.ones(4, np.float32)


def test_mutable_globals_are_refused_at_the_line_reading_them():
    @opus.kernel
    def k(x: Ptr[f32]):
        x[0] = TABLE[1]

    with pytest.raises(opus.TraceError, match=r"global 'TABLE', a mutable list.*tuple") as e:
        k.source(target="sm_90a")
    assert "test_kernel_definition.py" in str(e.value) and "x[0] = TABLE[1]" in str(e.value)

    @opus.kernel
    def k2(x: Ptr[f32]):
        x[0] = opus.f32(ARRAY[0])

    with pytest.raises(opus.TraceError, match=r"global 'ARRAY', a mutable ndarray"):
        k2.source(target="sm_90a")


# -- the source is read when the kernel is defined ------------------------------------------------

MODULE = '''
import opus
from opus import f32, Ptr


@opus.kernel
def k(out: Ptr[f32]):
    out[opus.thread_id_x()] = helper({value})


def helper(v):
    if v > 0.0:
        v = v + {add}
    return v
'''


def test_the_source_is_read_at_definition_not_at_the_first_launch(tmp_path, monkeypatch):
    path = tmp_path / "edited_kernel_mod.py"
    path.write_text(MODULE.format(value="1.0", add="10.0"))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("edited_kernel_mod")
    try:
        # edited after the import, before the kernel (and its helper) are first traced
        path.write_text(MODULE.format(value="2.0 + 0.5", add="100.0"))
        import linecache
        linecache.checkcache(str(path))  # as a printed traceback would: linecache sees the edit
        out = np.zeros(4, np.float32)
        mod.k[1, 4](out)
        np.testing.assert_array_equal(out, 11.0)  # the text that was imported runs
        # the generated code's comments quote the traced text, not the edited file
        src = mod.k.source(target="sm_90a")
        assert "helper(1.0)" in src and "2.0 + 0.5" not in src
        mod = importlib.reload(mod)  # a reload defines the kernel anew, from the new text
        mod.k[1, 4](out)
        np.testing.assert_array_equal(out, 102.5)
    finally:
        sys.modules.pop("edited_kernel_mod", None)


# -- yield --------------------------------------------------------------------------------------

def test_yield_in_a_kernel_is_refused_at_its_line():
    @opus.kernel
    def k(x: Ptr[f32], n: i32):
        x[0] = 1.0
        yield n

    with pytest.raises(opus.TraceError, match="yield") as e:
        k.source(target="sm_90a")
    assert "test_kernel_definition.py" in str(e.value) and "yield n" in str(e.value)


@pytest.mark.gpu
def test_changing_a_global_retraces_on_the_gpu(launch_path, restore_globals):
    global SCALE
    torch = pytest.importorskip("torch")
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.zeros(N, dtype=torch.float32, device="cuda")
    with opus.set_target(opus.current_target().target.name, interpret=False):
        launch = scaled[1, N]
        launch(x, out)
        launch(x, out)  # memoized
        torch.cuda.synchronize()
        assert out.tolist() == [v * 2 + 1 for v in range(N)]
        SCALE = 3.0
        launch(x, out)
        torch.cuda.synchronize()
        assert out.tolist() == [v * 3 + 1 for v in range(N)]


# -- rebinding a dtype or a helper function retraces (they are guarded by identity) -------------

ACC = opus.f32


def _act_relu(v):
    return opus.max(v, 0.0)


def _act_neg(v):
    return -v


ACT = _act_relu


@opus.kernel
def _rebound(out: opus.Ptr[opus.f32], x: opus.Ptr[opus.f32]):
    i = opus.thread_id_x()
    out[i] = opus.f32(ACT(opus.cast(x[i], ACC)))


def test_rebinding_a_global_dtype_or_helper_retraces():
    global ACC, ACT
    import numpy as np
    x = np.array([-1.5, 2.25, 1.0 / 3.0, -4.0], np.float32)
    out = np.zeros(4, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        try:
            _rebound[1, 4](out, x)
            np.testing.assert_array_equal(out, np.maximum(x, 0))
            ACT = _act_neg
            _rebound[1, 4](out, x)
            np.testing.assert_array_equal(out, -x)
            ACC = opus.f16  # rounds through f16: 1/3 is no longer exact
            _rebound[1, 4](out, x)
            np.testing.assert_array_equal(out, -x.astype(np.float16).astype(np.float32))
            assert "opus_f2h" in _rebound.source(target="sm_90a") or "f16" in _rebound.ir(target="sm_90a")
        finally:
            ACC, ACT = opus.f32, _act_relu
