"""A fresh process's first kernel must not pay for modules it does not use.

The fresh-process cache hit (import, define, trace, render, load from the disk cache, launch) is
a benchmark goal (benchmarks/compile_time.py, ~5 ms on an H200). It regressed to 13.5 ms once
when typing, dataclasses, sysconfig and the matrix-atom tables crept onto the import and first
trace paths, each costing a millisecond or more; this test names them so it cannot happen again
unnoticed.
"""
import json
import subprocess
import sys
import textwrap

# Modules a plain kernel's import + trace + render must not load, and why each costs.
HEAVY = {
    "typing": "~1 ms (typing.NamedTuple: use collections.namedtuple or a tuple subclass)",
    "dataclasses": "~1 ms (with inspect/copy: write a plain class with __slots__)",
    "sysconfig": "~1-2 ms (only for files outside opus: see frontend/calls.py)",
    "numpy": "~30 ms (the interpreter's and the references' business, not tracing's)",
    "opus.targets.matrix": "matrix-atom rows check themselves when built: loaded on first lookup",
    "opus.targets.nv_mma": "same",
    "opus.targets.amd": "AMD's tables are not needed for an NVIDIA target",
    "opus.interp": "the interpreter is loaded only to interpret",
}
# ...and what the import alone must not load (tracing brings these in when it needs them).
NOT_AT_IMPORT = ("opus.codegen", "opus.runtime.nvrtc", "opus.runtime.cache", "ctypes")

_PROBE = textwrap.dedent('''
    import json, sys
    import opus
    from opus import f32
    at_import = sorted(sys.modules)

    def twice(v):  # a user helper: calls of user functions take the helper path
        return v + v

    @opus.kernel
    def vector_add(x: opus.Ptr[f32], y: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32,
                   VEC: opus.constexpr = 4):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
        gx, gy, go = opus.make_gmem(x, n), opus.make_gmem(y, n), opus.make_gmem(out, n)
        go.store(twice(gx.load(i, vec=VEC)) + gy.load(i, vec=VEC), i)

    spec = vector_add.specialize("sm_90a")
    assert "opus_f32x4" in spec.source  # rendered: the 16-byte accesses
    print(json.dumps({"import": at_import, "traced": sorted(sys.modules)}))
''')


def _modules_of_fresh_process(tmp_path):
    script = tmp_path / "probe.py"  # a user file (not under opus): its calls are checked as such
    script.write_text(_PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_first_trace_loads_no_heavy_module(tmp_path):
    mods = _modules_of_fresh_process(tmp_path)
    loaded = {m: why for m, why in HEAVY.items() if m in mods["traced"]}
    assert not loaded, f"import + first trace loaded: {loaded}"
    early = [m for m in NOT_AT_IMPORT if m in mods["import"]]
    assert not early, f"`import opus` loaded {early}"
