"""One contract for the interpreter and the compilers: a kernel that runs in the interpreter as
target T builds for T (OPUS_INTERPRET_COMPILE, on for the whole suite), and the cases that
diverged before agree now: the fp8 flavour a chip has no instructions for, e8m0 on AMD (both in
the bit arithmetic CUDA uses, checked here on the host against the interpreter bit for bit)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import opus
from opus.codegen import CodegenError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "codegen"))
import test_cuda_casts as C  # noqa: E402  (inputs, references and interpreter runs)
from hostexec.cxx import host_cxx  # noqa: E402


# -- the contract-check mode ---------------------------------------------------------------------

@opus.kernel
def barrier_copy(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.f32]):
    t = opus.thread_id_x()
    opus.sync_threads()
    y[t] = x[t]


def _fresh_launch(arch):
    barrier_copy.launch_entries.clear()
    barrier_copy._specs.clear()
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with opus.set_target(arch, interpret=True):
        barrier_copy[1, 64](x, y)
    assert (x == y).all()
    return barrier_copy.specialize(target=arch)


@pytest.mark.parametrize("arch", ["sm_80", "gfx942"])
def test_interpreter_launch_compiles_for_its_target(arch, monkeypatch, request):
    if arch.startswith("gfx"):   # without clang the launch warns and does not compile
        request.getfixturevalue("requires_amd_compiler")
    monkeypatch.setenv("OPUS_INTERPRET_COMPILE", "1")
    assert _fresh_launch(arch)._compiled is not None
    monkeypatch.setenv("OPUS_INTERPRET_COMPILE", "0")
    assert _fresh_launch(arch)._compiled is None


@pytest.mark.parametrize("arch,emitter", [("sm_90a", "opus.codegen.cuda.CudaEmitter"),
                                          ("gfx950", "opus.codegen.hip.HipEmitter")])
def test_a_renderer_divergence_fails_the_interpreter_launch(arch, emitter, monkeypatch, request):
    """Were a renderer unable to spell what tracing allowed, the interpreter run fails too."""
    if arch.startswith("gfx"):   # without clang the launch warns and renders nothing
        request.getfixturevalue("requires_amd_compiler")
    def refuse(self, op, indent):
        raise CodegenError("this backend cannot spell a barrier")
    module, cls = emitter.rsplit(".", 1)
    monkeypatch.setattr(getattr(__import__(module, fromlist=[cls]), cls), "render_barrier", refuse)
    monkeypatch.setenv("OPUS_INTERPRET_COMPILE", "1")
    with pytest.raises(CodegenError, match="cannot spell a barrier"):
        _fresh_launch(arch)
    monkeypatch.setenv("OPUS_INTERPRET_COMPILE", "0")
    _fresh_launch(arch)


# -- the AMD software conversions, run on the host -------------------------------------------------

# (arch, storage type) pairs the chip converts in software: the other fp8 flavour, and e8m0
SOFTWARE = [("gfx942", opus.fp8_e4m3), ("gfx942", opus.fp8_e5m2), ("gfx950", opus.fp8_e4m3fnuz),
            ("gfx950", opus.fp8_e5m2fnuz), ("gfx942", opus.e8m0), ("gfx950", opus.e8m0)]

_MAIN = r"""
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  int n = atoi(argv[1]);
  IN* a = (IN*)malloc(sizeof(IN) * n); OUT* b = (OUT*)malloc(sizeof(OUT) * n);
  if (fread(a, sizeof(IN), n, stdin) != (size_t)n) return 1;
  for (int i = 0; i < n; i++) b[i] = FN(a[i]);
  fwrite(b, sizeof(OUT), n, stdout);
  return 0;
}
"""


def _hip_helpers(source):
    """The device helper functions of a HIP kernel, as host C++ (they use clang/GCC builtins
    only: __builtin_bit_cast, __builtin_fabsf, __builtin_rintf)."""
    prefix = "static __attribute__((device)) __attribute__((always_inline)) inline "
    return "\n".join("static inline " + line[len(prefix):] for line in source.splitlines()
                     if line.startswith(prefix))


def _run_helper(kernel, arch, fn, in_ctype, out_ctype, src, out_dtype, tmp_path):
    source = kernel.source(target=arch)
    assert fn in source and "__builtin_amdgcn" not in _hip_helpers(source)  # no instruction
    path = tmp_path / "h.cpp"
    path.write_text(_hip_helpers(source) + f"\n#define IN {in_ctype}\n#define OUT {out_ctype}\n"
                    f"#define FN {fn}\n" + _MAIN)
    exe = tmp_path / "h"
    subprocess.run(host_cxx() + ["-O1", "-std=c++20", "-o", str(exe), str(path)], check=True)
    out = subprocess.run([str(exe), str(len(src))], input=src.tobytes(), capture_output=True,
                         check=True)
    return np.frombuffer(out.stdout, out_dtype)


ENCODE = [(a, t, sat, rnd) for a, t in SOFTWARE for sat in (False, True)
          for rnd in (("rn", "rz") if t is opus.e8m0 else ("rn",))]


@pytest.mark.parametrize("arch,t,sat,rnd", ENCODE,
                         ids=[f"{a}-{t.name}-{'sat' if s else 'nosat'}-{r}" for a, t, s, r in ENCODE])
def test_amd_software_encoder_matches_interp(arch, t, sat, rnd, tmp_path):
    x = C.dense_f32()
    fn = f"opus_f32_to_{t.name}{'_' + rnd if t is opus.e8m0 else ''}{'_sat' if sat else ''}"
    got = _run_helper(C.encoder(t, sat, rnd), arch, fn, "float", "unsigned char", x, np.uint8,
                      tmp_path)
    np.testing.assert_array_equal(got, C.interp_encode(t, sat, rnd, x))


@pytest.mark.parametrize("arch,t", SOFTWARE, ids=[f"{a}-{t.name}" for a, t in SOFTWARE])
def test_amd_software_decoder_matches_interp(arch, t, tmp_path):
    got = _run_helper(C.decoder(t), arch, f"opus_{t.name}_to_f32", "unsigned char", "float",
                      C.ALL_CODES, np.float32, tmp_path)
    assert C.same_floats(got, C.interp_decode(t))


@pytest.mark.parametrize("arch,t", SOFTWARE, ids=[f"{a}-{t.name}" for a, t in SOFTWARE])
def test_amd_software_conversions_build_for_the_chip(arch, t, requires_amd_compiler):
    for k in (C.encoder(t, False), C.encoder(t, True), C.decoder(t), C.decoder(t, opus.f16, 4)):
        assert k.specialize(target=arch).compiled.binary


# -- on the GPU: the same refusals as the interpreter, from the same checks ---------------------

def _gpu_arch():
    return opus.current_target().target.name


@pytest.mark.gpu
def test_gpu_refuses_what_the_interpreter_refuses():
    from opus.errors import ArgumentError
    from opus.runtime.device_array import DeviceArray
    x, y = DeviceArray.from_numpy(np.zeros(128, np.float32)), DeviceArray.zeros(128, np.float32)
    arch = _gpu_arch()
    cases = [(dict(cfg=(1, (1, 1, 128))), "block.z = 128"),
             (dict(cfg=(1, 64), stream="abc"), "stream must be an int handle"),
             (dict(cfg=(1, 64), smem=-1), "smem must be a non-negative int"),
             (dict(cfg=(1, 64), smem=1 << 20), "1048576 dynamic")]
    for case, needle in cases:
        kw = dict(case)
        cfg = kw.pop("cfg")
        with opus.set_target(arch, interpret=False), pytest.raises(ArgumentError, match=needle):
            barrier_copy[cfg](x, y, **kw)
        with opus.set_target(arch, interpret=True), pytest.raises(ArgumentError, match=needle):
            barrier_copy[cfg](np.zeros(128, np.float32), np.zeros(128, np.float32), **kw)


@pytest.mark.gpu
def test_gpu_launches_up_to_the_dynamic_smem_limit():
    """The table's opt-in maximum is the device's: a launch at it runs (the entry opts in)."""
    from opus.runtime import cuda_driver
    from opus.runtime.device_array import DeviceArray
    from opus.targets import get_target

    @opus.kernel
    def dyn_copy(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.f32]):
        s = opus.dynamic_smem(opus.f32)
        t = opus.thread_id_x()
        s[t] = x[t]
        opus.sync_threads()
        y[t] = s[t]
    arch = _gpu_arch()
    most = get_target(arch).limits.smem_per_block
    x = np.arange(64, dtype=np.float32)
    dx, dy = DeviceArray.from_numpy(x), DeviceArray.zeros(64, np.float32)
    with opus.set_target(arch, interpret=False):
        dyn_copy[1, 64](dx, dy, smem=most)
    cuda_driver.synchronize()
    np.testing.assert_array_equal(dy.to_numpy(), x)
