"""Build hook for the optional C hot path of kernel launches (src/opus/_fastlaunch.c).

Everything else is in pyproject.toml. ``optional=True``: without a C compiler or Python's
headers the install goes on, and opus launches through its Python path alone (about 1 us
slower per launch; ``opus.frontend.gpu_launch.fast_launch_module()`` is None then).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "opus._fastlaunch", ["src/opus/_fastlaunch.c"], optional=True,
    extra_compile_args=["-O2", "-Wall", "-Werror=implicit-function-declaration"])])
