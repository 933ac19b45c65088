"""Launch entries for NVIDIA GPUs: argument checks and packing, then cuLaunchKernelEx.

A launch has a budget of a few microseconds, most of it taken by the driver call itself, so
each entry generates (once) a Python function specialised to its kernel's parameters, the way
Triton generates its launchers. The common case runs inline with no per-parameter calls or
dispatch: a torch tensor of the right dtype on the kernel's device gives its pointer after
three attribute reads; an int in range passes as is. Everything else (CuPy arrays, DLPack,
raw addresses, wrong types, wrong devices) takes the general path of tensor_args and
scalar_checker, which accepts it or raises an error naming the parameter.

Where the optional C extension ``opus._fastlaunch`` was built (setup.py), the entry's ``run``
is its FastLaunch object instead: the same fast path in C, with the generated function as the
fallback for everything it does not recognise (see _fastlaunch.c). OPUS_FAST_LAUNCH=0 turns it
off (tests and benchmarks run both).
"""
from __future__ import annotations

import ctypes
import numbers
import os
import sys
from threading import get_ident

from .. import dtypes as dt
from ..errors import ArgumentError

__all__ = ["GpuEntry", "EntryParams", "scalar_checker", "fast_launch_module", "check_stream"]

_DEFAULT_SMEM = 48 * 1024
_F32_MAX = 3.4028234663852886e38
# parameter kinds of the C hot path (the enum in _fastlaunch.c)
_K_PTR, _K_INT, _K_BOOL, _K_F32, _K_F64 = range(5)
_I64_MAX = 2 ** 63 - 1


FAST_LAUNCH_VERSION = 3  # FASTLAUNCH_VERSION in _fastlaunch.c
_stale_warned = []


def fast_launch_module():
    """The C hot path (opus._fastlaunch), or None where it was not built (no C compiler at
    install time), was built from other sources (warned once), or OPUS_FAST_LAUNCH=0."""
    if os.environ.get("OPUS_FAST_LAUNCH", "1") == "0":
        return None
    try:
        from .. import _fastlaunch
    except ImportError:
        return None
    if getattr(_fastlaunch, "VERSION", None) != FAST_LAUNCH_VERSION:
        if not _stale_warned:
            import warnings
            warnings.warn(f"opus._fastlaunch ({_fastlaunch.__file__}) was built from older "
                          "sources; launching from Python (about 1 us slower per launch) until "
                          "it is rebuilt: pip install -e . (or python setup.py build_ext "
                          "--inplace)", RuntimeWarning, stacklevel=2)
            _stale_warned.append(True)
        return None
    return _fastlaunch


def _is_bool(x):
    # numpy.bool_ is not a bool subclass, and checking by name avoids importing numpy
    return isinstance(x, bool) or type(x).__name__ in ("bool_", "bool")


def scalar_checker(name, dtype):
    """A function converting a Python/numpy scalar for parameter ``name`` of ``dtype``,
    refusing values that would change (no silent truncation)."""
    if dtype.is_int or dtype.is_bool:
        lo, hi = dtype.int_range()

        def check_int(x):
            if _is_bool(x):
                if dtype.is_bool:
                    return int(bool(x))
                raise ArgumentError(f"parameter {name!r} expects {dtype.name}, got a bool")
            if not isinstance(x, numbers.Integral):  # numpy's integers register as Integral
                raise ArgumentError(f"parameter {name!r} expects an integer ({dtype.name}), got "
                                    f"{type(x).__name__} {x!r}")
            x = int(x)
            if not lo <= x <= hi:
                raise ArgumentError(f"parameter {name!r} is {dtype.name}: {x} is outside "
                                    f"{lo}..{hi}")
            return x
        return check_int
    if dtype in (dt.f32, dt.f64):
        def check_float(x):
            if not isinstance(x, numbers.Real) or _is_bool(x):
                raise ArgumentError(f"parameter {name!r} expects a number ({dtype.name}), got "
                                    f"{type(x).__name__} {x!r}")
            x = float(x)
            if dtype is dt.f32 and abs(x) > _F32_MAX and abs(x) != float("inf"):
                raise ArgumentError(f"parameter {name!r} is f32: {x!r} is outside its range")
            return x
        return check_float
    raise ArgumentError(f"parameter {name!r}: {dtype.name} scalars cannot be kernel parameters yet "
                        f"(pass f32 and convert inside the kernel)")


def _stream_handle(stream):
    """The handle of a ``stream=`` argument: the rule every entry kind follows (the interpreter
    checks it too, then ignores the stream)."""
    h = stream
    if not isinstance(h, numbers.Integral):
        for attr in ("cuda_stream", "ptr", "handle"):
            h = getattr(stream, attr, None)
            if isinstance(h, numbers.Integral):
                break
    if isinstance(h, numbers.Integral) and not _is_bool(h) and 0 <= h < 2 ** 64:
        return int(h)
    raise ArgumentError(f"stream must be an int handle (0 <= handle < 2**64), a torch.cuda.Stream "
                        f"or a CuPy stream, got {type(stream).__name__} {stream!r}")


check_stream = _stream_handle


class _NoTensor:
    """Stands in for torch.Tensor until torch is imported: no argument is ever of this type."""


# The generated code, in pieces. It is a closure factory: constants and the state of the
# previous launch live in closure cells, the fastest variables Python has.
_HEAD = """\
def make({names}):
    last_launcher, last_h, last_smem = None, 0, 0

    def run(launcher, args, smem, stream):
        nonlocal last_launcher, last_h, last_smem
"""
# a pointer argument: {i} its parameter position, {k} its position among the arguments
_PTR_FAST = """\
        a{i} = args[{k}]
        if type(a{i}) is T and a{i}.dtype is D{i} and a{i}.get_device() == DEV:
            v{i} = a{i}.data_ptr()
        else:
            v{i} = slow_pointer({i}, a{i})
"""
_ALIGN = """\
        if v{i} & {mask}:
            misaligned({i}, v{i})
"""
_SCALAR_FAST = """\
        v{i} = args[{k}]
        if type(v{i}) is not {pytype} or not {lo!r} <= v{i} <= {hi!r}:
            v{i} = slow_scalar({i}, v{i})
"""
_SCALAR_ANY = """\
        v{i} = slow_scalar({i}, args[{k}])
"""
_TAIL = """\
        if stream is None and {torch_first}:
            h = raw_stream(DEV)
        else:
            h = stream_of(stream, args)
        if smem or type(smem) is not int:
            smem = check_smem(smem)
        if get_ident() != OWNER:
            return launch_elsewhere(launcher, smem, h, ({values},))
        pack(buffer, 0, {values})
        if launcher is not last_launcher:
            config.gridDimX, config.gridDimY, config.gridDimZ = launcher.grid
            config.blockDimX, config.blockDimY, config.blockDimZ = launcher.block
            last_launcher = launcher
        if h != last_h:
            config.hStream = h or None
            last_h = h
        if smem != last_smem:
            config.sharedMemBytes = smem
            last_smem = smem
        code = cu_launch(config_ptr, handle, params, None)
        if code:
            check_launch(code, function, config_ptr, params, config)

    def adopt_torch(tensor_type, dtypes, stream_of_device):  # dtypes: one per parameter
        nonlocal T, raw_stream{dtype_names}
        T, raw_stream = tensor_type, stream_of_device
        {dtype_assign}

    return run, adopt_torch
"""


class EntryParams:
    """A loaded kernel's run-time parameters and their general-path argument handling, shared
    by the NVIDIA entry (below) and the AMD one (hip_launch.py)."""

    max_smem = None  # shared bytes per block the device allows (None: the target's table)

    def __init__(self, kernel, spec):
        from ..runtime.launcher import POINTER_CTYPE, scalar_ctype
        self.name = kernel.name
        self.target = spec.target
        self.static_smem = spec.static_smem
        self.params = []  # (kernel argument index, name, 'ptr' | 'scalar', dtype, alignment)
        ctypes_ = []
        run_params = [q for q in kernel.params if q.kind != "constexpr"]
        for p, ip in zip(spec.function.params, run_params):
            if p.type.__class__.__name__ == "PointerType":
                ctypes_.append(POINTER_CTYPE)
                self.params.append((ip.index, p.name, "ptr", p.type.elem, spec.align.get(p.name, 1)))
            else:
                ctypes_.append(scalar_ctype(p.type))
                self.params.append((ip.index, p.name, "scalar", p.type, None))
        self.param_ctypes = ctypes_
        self.checkers = [scalar_checker(name, d) if kind == "scalar" else None
                         for _, name, kind, d, _ in self.params]

    def values(self, args):
        """Every parameter's value through the general path (checked, in parameter order)."""
        out = []
        for i, (k, _, kind, _, align) in enumerate(self.params):
            if kind == "ptr":
                v = self.slow_pointer(i, args[k])
                if v % align:
                    self.misaligned(i, v)
            else:
                v = self.slow_scalar(i, args[k])
            out.append(v)
        return out

    def slow_pointer(self, i, arg):
        from ..runtime.tensor_args import device_pointer, torch_device_index
        _, name, _, d, _ = self.params[i]
        p = device_pointer(arg, param=name, dtype=d)
        index = torch_device_index(arg)
        if index is not None:
            if index != self.device:
                raise ArgumentError(f"parameter {name!r} is a tensor on cuda:{index}, but kernel "
                                    f"{self.name!r} was loaded on cuda:{self.device} (the device "
                                    f"current when it was first launched)")
            self.torch_seen()
        else:
            self.array_seen(arg)
        return p

    def torch_seen(self):
        """Hook: a torch tensor went through the general path."""

    def array_seen(self, arg):
        """Hook: another accepted pointer argument went through the general path."""

    def slow_scalar(self, i, arg):
        return self.checkers[i](arg)

    def misaligned(self, i, p):
        _, name, _, _, align = self.params[i]
        raise ArgumentError(f"parameter {name!r}: address {hex(p)} is not aligned to {align} "
                            f"bytes, which the kernel's {align}-byte vector accesses need")

    def stream(self, stream, args):
        """The stream handle: the one given, else torch's current one for the first torch
        tensor among the arguments, else 0 (the default stream)."""
        if stream is not None:
            return _stream_handle(stream)
        from ..runtime.tensor_args import stream_of
        return stream_of(args) or 0

    def check_smem_size(self, smem):
        """``smem=`` checked by the rule every entry kind shares (targets/limits.py)."""
        from ..targets.limits import check_dynamic_smem
        return check_dynamic_smem(self.target.limits, self.target.name, self.name, smem,
                                  self.static_smem, self.max_smem)


class GpuEntry(EntryParams):
    """Compiled, loaded kernel plus its generated launch function ``run``."""

    def __init__(self, kernel, spec):
        from ..runtime import cuda_driver as drv
        super().__init__(kernel, spec)
        built = spec.compiled
        drv.ensure_context()
        self.module = drv.load_module(built.binary, nvrtc_version=built.compiler_version)
        self.function = self.module.get_function(spec.symbol)
        self.device = self.function.device
        props = drv.device_properties(self.device)
        self.max_smem = props.max_shared_memory_per_block_optin
        self.smem_limit_set = _DEFAULT_SMEM - self.static_smem
        self.run = self._generate()

    # -- the generated fast path ------------------------------------------------------------
    def _generate(self):
        from ..runtime.launcher import LaunchConfig, ParamBlock, check_launch, launch_ex
        block = ParamBlock(self.param_ctypes)
        config = LaunchConfig()
        self._keepalive = (block, config)
        env = {
            "T": _NoTensor, "raw_stream": None, "DEV": self.device, "OWNER": get_ident(),
            "get_ident": get_ident, "slow_pointer": self.slow_pointer,
            "slow_scalar": self.slow_scalar, "misaligned": self.misaligned,
            "stream_of": self.stream, "check_smem": self.check_smem,
            "launch_elsewhere": self.launch_elsewhere,
            "pack": block.pack, "buffer": block.buffer, "params": block.params,
            "config": config, "config_ptr": ctypes.c_void_p(ctypes.addressof(config)),
            "handle": ctypes.c_void_p(self.function.handle), "function": self.function,
            "cu_launch": launch_ex(), "check_launch": check_launch,
        }
        body, dtypes, first_ptr = [], [], None
        for i, (k, name, kind, d, align) in enumerate(self.params):
            if kind == "ptr":
                first_ptr = i if first_ptr is None else first_ptr
                env[f"D{i}"] = None  # the torch dtype, set by adopt_torch
                dtypes.append(f"D{i}")
                body.append(_PTR_FAST.format(i=i, k=k))
                if align > 1:
                    body.append(_ALIGN.format(i=i, mask=align - 1))
            elif d.is_int:
                lo, hi = d.int_range()
                body.append(_SCALAR_FAST.format(i=i, k=k, pytype="int", lo=lo, hi=hi))
            elif d is dt.f32:
                body.append(_SCALAR_FAST.format(i=i, k=k, pytype="float", lo=-_F32_MAX,
                                                hi=_F32_MAX))
            else:
                body.append(_SCALAR_ANY.format(i=i, k=k))
        # torch's current stream when the first pointer is a torch tensor (as stream_of finds)
        torch_first = f"type(a{first_ptr}) is T" if first_ptr is not None else "False"
        values = ", ".join(f"v{i}" for i in range(len(self.params))) or "*()"
        tail = _TAIL.format(
            torch_first=torch_first, values=values,
            dtype_names="".join(", " + d for d in dtypes),
            dtype_assign="; ".join(f"{d} = dtypes[{d[1:]}]" for d in dtypes) or "pass")
        text = _HEAD.format(names=", ".join(env)) + "".join(body) + tail
        scope = {}
        exec(compile(text, f"<opus launch {self.name}>", "exec"), scope)
        run, self._adopt = scope["make"](**env)
        self.python_run = run
        self.fast = self._fast_path(run, block)
        self._torch_adopted = self._cupy_adopted = False
        if "torch" in sys.modules:
            self._adopt_torch()
        return self.fast or run

    def _fast_path(self, run, block):
        """The C hot path for this entry (None without the extension), falling back to run."""
        fl = fast_launch_module()
        if fl is None:
            return None
        from ..runtime.launcher import launch_ex
        specs = []
        for (k, _, kind, d, align), off, ct in zip(self.params, block.offsets, self.param_ctypes):
            if kind == "ptr":
                specs.append((_K_PTR, k, off, 8, 0, 0, align))
            elif d.is_bool:
                specs.append((_K_BOOL, k, off, 1, 0, 1, 1))
            elif d.is_int:
                lo, hi = d.int_range()  # u64 above i64's range: the Python path takes it
                specs.append((_K_INT, k, off, ctypes.sizeof(ct), lo, min(hi, _I64_MAX), 1))
            elif d in (dt.f32, dt.f64):
                specs.append((_K_F32 if d is dt.f32 else _K_F64, k, off, 0, 0, 0, 1))
            else:
                return None
        nargs = max((p[0] for p in self.params), default=-1) + 1
        return fl.new(ctypes.cast(launch_ex(), ctypes.c_void_p).value, self.function.handle,
                      tuple(specs), block.size, nargs, run, get_ident(), self.device,
                      self.smem_limit_set)

    def _per_param(self, of_dtype):
        """A tuple with of_dtype(d) for each pointer parameter, None for scalars."""
        return tuple(of_dtype(d) if kind == "ptr" else None for _, _, kind, d, _ in self.params)

    def _adopt_torch(self):
        """Point the fast path at torch's Tensor type and dtypes (torch is imported by now)."""
        from ..runtime import tensor_args
        tensor_args.init_torch()
        tensor, stream = sys.modules["torch"].Tensor, tensor_args.torch_raw_stream()
        dtypes = self._per_param(tensor_args.torch_dtype)
        self._adopt(tensor, dtypes, stream)
        if self.fast is not None:  # nn.Parameter too: weights are passed as they are
            self.fast.adopt_torch(tensor, sys.modules["torch"].nn.Parameter, dtypes, stream)
        self._torch_adopted = True

    def array_seen(self, arg):
        t = type(arg)  # CuPy's ndarray: the C hot path reads its dtype, pointer and device
        if (self.fast is not None and not self._cupy_adopted and t.__name__ == "ndarray"
                and t.__module__.startswith("cupy")):
            self.fast.adopt_cupy(t, self._per_param(lambda d: d.np_dtype))
            self._cupy_adopted = True

    # -- the general path ---------------------------------------------------------------------
    def torch_seen(self):
        if not self._torch_adopted:
            self._adopt_torch()  # torch arrived after this entry was made

    def check_smem(self, smem):
        smem = self.check_smem_size(smem)
        if smem > self.smem_limit_set:
            self.function.set_max_dynamic_smem(smem)  # opt in above the 48 KB default
            self.smem_limit_set = smem
            if self.fast is not None:
                self.fast.smem_max = smem
        return smem

    def launch_elsewhere(self, launcher, smem, stream, values):
        """A launch from a thread other than the entry's creator: own buffers, no sharing."""
        from ..runtime.launcher import launch_once
        launch_once(self.function, self.param_ctypes, values, launcher.grid, launcher.block, smem,
                    stream)
