"""A pytest plugin that makes this machine look like the GPU machine (docs/testing.md, "Running a
module on another machine"): an H100 found (automatic selection and ``set_target("sm_90a")``
without ``interpret=True`` pick the GPU) and no AMD compiler. A test that launches numpy arrays
without asking for the interpreter, or compiles for gfx9 without the ``requires_amd_compiler``
fixture, then fails here as it would there (the launch reaches the CUDA driver, absent here):

    PYTHONPATH=tools .venv/bin/python -m pytest -p pretend_gpu_machine <a module's tests>
"""


def pytest_configure(config):
    import opus.frontend.targeting as targeting
    import opus.runtime.amd_build as amd_build
    from opus.errors import OpusRuntimeError

    targeting._found[:] = ["sm_90a"]   # what _gpu_arch() found: the H100's arch

    def no_compiler():
        raise OpusRuntimeError("no compiler for AMD targets (pretend_gpu_machine: the GPU "
                               "machine has none)")
    amd_build._find_compiler = no_compiler
