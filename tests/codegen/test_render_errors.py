"""Codegen's one error choke point (CEmitter.emit_op): any error raised while rendering an op
names the op's kernel file:line, the kernel and the Python line, as trace errors do; and the
dispatch tables of the renderers and the interpreter cover the op catalogue."""
import os
import sys

import pytest

import opus
from opus.codegen import CodegenError
from opus.codegen.cemit import CEmitter
from opus.codegen.cuda import CudaEmitter
from opus.codegen.hip import HipEmitter
from opus.interp.engine import Program
from opus.ir import OPS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import raises  # noqa: E402

ARCHS = ["sm_90a", "gfx950"]


@opus.kernel
def double_below(x: opus.Ptr[opus.f32], n: opus.i32):
    i = opus.thread_id_x()
    if i < n:
        x[i] = x[i] * 2.0  # ERR: mul-in-if


@opus.kernel
def copy_after_barrier(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.f32]):
    t = opus.thread_id_x()
    opus.sync_threads()  # ERR: barrier
    y[t] = x[t]


@pytest.mark.parametrize("arch", ARCHS)
def test_internal_error_in_one_op_names_its_line(arch, monkeypatch):
    """A bug in one op's rendering (here: a KeyError), nested in an `if`, names that op's line
    (not the `if`'s), the kernel, the op kind and the Python text."""
    def broken(self, op, indent):
        raise KeyError("no spelling")
    monkeypatch.setattr(CEmitter, "render_binary", broken)
    with raises(CodegenError, "kernel 'double_below'", "internal error rendering op 'binary'",
                "KeyError", "x[i] = x[i] * 2.0", at="mul-in-if") as info:
        double_below.source(target=arch)
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize("arch,emitter", [("sm_90a", CudaEmitter), ("gfx950", HipEmitter)])
def test_codegen_error_without_line_gets_the_ops_line(arch, emitter, monkeypatch):
    """A CodegenError a dialect raises (they know no lines) is located at the op's line."""
    def refuse(self, op, indent):
        raise CodegenError("this backend cannot spell a barrier")
    monkeypatch.setattr(emitter, "render_barrier", refuse)
    with raises(CodegenError, "copy_after_barrier", "cannot spell a barrier",
                "opus.sync_threads()", at="barrier"):
        copy_after_barrier.source(target=arch)


_TERMINATORS = {kind for kind, spec in OPS.items() if spec.terminator and kind != "return"}


@pytest.mark.parametrize("backend,prefix", [(CudaEmitter, "render_"), (HipEmitter, "render_"),
                                            (Program, "exec_")])
def test_dispatch_tables_cover_the_op_catalogue(backend, prefix):
    """Every op kind has one method per backend, named <prefix><kind>; no method of that
    prefix names a kind the catalogue lacks (a renamed op cannot leave a stale method).
    yield and condition end regions and are read by their region's owner."""
    methods = {name[len(prefix):] for name in dir(backend) if name.startswith(prefix)}
    assert methods == set(OPS) - _TERMINATORS


def test_printf_reason_is_each_targets_own(monkeypatch):
    """The base Target names no vendor's reason: each target says why it lacks printf."""
    from opus.targets import get_target, UnsupportedOnTarget
    with pytest.raises(UnsupportedOnTarget, match="printf is not available on gfx942: .*hostcall"):
        get_target("gfx942").require_printf()
    nvidia = get_target("sm_90a")
    nvidia.require_printf()
    monkeypatch.setattr(type(nvidia), "printf_missing", "this chip keeps no printf buffer")
    with pytest.raises(UnsupportedOnTarget) as info:
        nvidia.require_printf()
    assert str(info.value) == "printf is not available on sm_90a: this chip keeps no printf buffer"
