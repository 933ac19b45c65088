"""Launch entries for NVIDIA GPUs: argument checks and packing, then cuLaunchKernelEx.

Every path is derived from the entry's LaunchPlan (runtime/launch_plan.py: each parameter
declared once). A launch has a budget of a few microseconds, most of it taken by the driver
call itself, so each entry generates (once) a Python function specialised to its plan, the way
Triton generates its launchers. The common case runs inline with no per-parameter calls or
dispatch: a torch tensor of the right dtype on the kernel's device gives its pointer after
three attribute reads; a scalar passing its kind's inline test is packed as is. Everything
else (CuPy arrays, DLPack, raw addresses, wrong types, wrong devices) takes the plan's general
path, which accepts it or raises an error naming the parameter.

Where the optional C extension ``opus._fastlaunch`` was built (setup.py), the entry's ``run``
is its FastLaunch object instead: the same fast path in C, with the generated function as the
fallback for everything it does not recognise (see _fastlaunch.c); it takes the plan as the
table LaunchPlan.c_table writes. OPUS_FAST_LAUNCH=0 turns it
off (tests and benchmarks run both).
"""
from __future__ import annotations

import ctypes
import os
import sys
from threading import get_ident

from ..errors import ArgumentError
from ..runtime.launch_plan import (C_ABI_VERSION, PTR, LaunchPlan, launch_stream, pointer_param,
                                   scalar_param, tensor_map_param, by_value_param)

__all__ = ["GpuEntry", "EntryParams", "plan_of", "fast_launch_module"]

_DEFAULT_SMEM = 48 * 1024
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
    if getattr(_fastlaunch, "VERSION", None) != C_ABI_VERSION:
        if not _stale_warned:
            import warnings
            warnings.warn(f"opus._fastlaunch ({_fastlaunch.__file__}) was built from older "
                          "sources; launching from Python (about 1 us slower per launch) until "
                          "it is rebuilt: pip install -e . (or python setup.py build_ext "
                          "--inplace)", RuntimeWarning, stacklevel=2)
            _stale_warned.append(True)
        return None
    return _fastlaunch


def plan_of(kernel, spec):
    """The LaunchPlan of a specialization: its run-time parameters (pointers with the alignment
    its vector accesses need, scalars, tensor maps with what the kernel declared of them) in
    order, at their positions among the arguments."""
    run_params = [q for q in kernel.params if q.kind != "constexpr"]
    plan = []
    for p, ip in zip(spec.function.params, run_params):
        if p.type.__class__.__name__ == "PointerType":
            plan.append(pointer_param(ip.index, p.name, p.type.elem, spec.align.get(p.name, 1)))
        elif p.type.__class__.__name__ == "VectorType":  # opus.mdiv: 16 bytes by value
            plan.append(by_value_param(ip.index, p.name, 16, 16))
        elif p.type.__class__.__name__ == "TensorMapType":
            need = spec.function.attrs.get("tensor_maps", {}).get(p.name)
            plan.append(tensor_map_param(ip.index, p.name, need))
        else:
            plan.append(scalar_param(ip.index, p.name, p.type))
    return LaunchPlan(plan)


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
# a scalar argument: {test} is its kind's inline test (launch_plan.Kind.inline)
_SCALAR_INLINE = """\
        v{i} = args[{k}]
        if {test}:
            v{i} = slow_scalar({i}, v{i})
"""
_SCALAR_ANY = """\
        v{i} = slow_scalar({i}, args[{k}])
"""
_TAIL = """\
        if stream is None and {torch_first}:  # launch_stream's rule, its torch case inline
            h = raw_stream(DEV)
        else:
            h = launch_stream(stream, args)
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
    """A loaded kernel's run-time parameters (its LaunchPlan) and their general-path argument
    handling, shared by the NVIDIA entry (below) and the AMD one (hip_launch.py)."""

    max_smem = None  # shared bytes per block the device allows (None: the target's table)

    def __init__(self, name, target, static_smem, plan):
        self.name = name
        self.target = target
        self.static_smem = static_smem
        self.plan = plan

    def values(self, args):
        """Every parameter's value through the general path (checked, in parameter order)."""
        return self.plan.values(args, self.slow_pointer)

    def slow_pointer(self, i, arg):
        from ..runtime.tensor_args import device_pointer, torch_device_index
        p = self.plan.params[i]
        address = p.check_address(device_pointer(arg, param=p.name, dtype=p.dtype))
        index = torch_device_index(arg)
        if index is not None:
            if index != self.device:
                raise ArgumentError(f"parameter {p.name!r} is a tensor on cuda:{index}, but "
                                    f"kernel {self.name!r} was loaded on cuda:{self.device} (the "
                                    f"device current when it was first launched)")
            self.torch_seen()
        else:
            self.array_seen(arg)
        return address

    def torch_seen(self):
        """Hook: a torch tensor went through the general path."""

    def array_seen(self, arg):
        """Hook: another accepted pointer argument went through the general path."""

    def slow_scalar(self, i, arg):
        return self.plan.checkers[i](arg)

    def misaligned(self, i, address):
        self.plan.params[i].misaligned(address)

    def check_smem_size(self, smem):
        """``smem=`` checked by the rule every entry kind shares (targets/limits.py)."""
        from ..targets.limits import check_dynamic_smem
        return check_dynamic_smem(self.target.limits, self.target.name, self.name, smem,
                                  self.static_smem, self.max_smem)


class GpuEntry(EntryParams):
    """A loaded kernel plus its launch function ``run``: the C hot path where built, else the
    generated Python one. ``cu_launch`` is cuLaunchKernelEx (a stand-in in tests)."""

    @classmethod
    def load(cls, kernel, spec):
        """Load a compiled specialization on the current device and make its entry."""
        from ..runtime import cuda_driver as drv
        built = spec.compiled
        drv.ensure_context()
        module = drv.load_module(built.binary, nvrtc_version=built.compiler_version)
        function = module.get_function(spec.symbol)
        props = drv.device_properties(function.device)
        entry = cls(kernel.name, spec.target, spec.static_smem, plan_of(kernel, spec), function,
                    props.max_shared_memory_per_block_optin)
        entry.module = module  # the function lives as long as its module
        return entry

    def __init__(self, name, target, static_smem, plan, function, max_smem, cu_launch=None):
        from ..runtime.launcher import launch_ex
        super().__init__(name, target, static_smem, plan)
        self.function = function
        self.device = function.device
        self.max_smem = max_smem
        self.smem_limit_set = _DEFAULT_SMEM - self.static_smem
        self.cu_launch = cu_launch or launch_ex()
        self.run = self._generate()

    # -- the generated fast path ------------------------------------------------------------
    def _generate(self):
        from ..runtime.launcher import LaunchConfig, ParamBlock, check_launch
        block = ParamBlock.for_plan(self.plan)
        config = LaunchConfig()
        self._keepalive = (block, config)
        env = {
            "T": _NoTensor, "raw_stream": None, "DEV": self.device, "OWNER": get_ident(),
            "get_ident": get_ident, "slow_pointer": self.slow_pointer,
            "slow_scalar": self.slow_scalar, "misaligned": self.misaligned,
            "launch_stream": launch_stream, "check_smem": self.check_smem,
            "launch_elsewhere": self.launch_elsewhere,
            "pack": block.pack, "buffer": block.buffer, "params": block.params,
            "config": config, "config_ptr": ctypes.c_void_p(ctypes.addressof(config)),
            "handle": ctypes.c_void_p(self.function.handle), "function": self.function,
            "cu_launch": self.cu_launch, "check_launch": check_launch,
        }
        body, dtypes = [], []
        for i, p in enumerate(self.plan.params):
            if p.kind is PTR:
                env[f"D{i}"] = None  # the torch dtype, set by adopt_torch
                dtypes.append(f"D{i}")
                body.append(_PTR_FAST.format(i=i, k=p.arg))
                if p.align > 1:
                    body.append(_ALIGN.format(i=i, mask=p.align - 1))
            elif p.kind.inline is not None:
                test = p.kind.inline.format(v=f"v{i}", lo=p.lo, hi=p.hi, size=p.size)
                body.append(_SCALAR_INLINE.format(i=i, k=p.arg, test=test))
            else:
                body.append(_SCALAR_ANY.format(i=i, k=p.arg))
        first = self.plan.first_pointer
        torch_first = f"type(a{first}) is T" if first is not None else "False"
        values = ", ".join(f"v{i}" for i in range(len(self.plan.params))) or "*()"
        tail = _TAIL.format(
            torch_first=torch_first, values=values,
            dtype_names="".join(", " + d for d in dtypes),
            dtype_assign="; ".join(f"{d} = dtypes[{d[1:]}]" for d in dtypes) or "pass")
        text = _HEAD.format(names=", ".join(env)) + "".join(body) + tail
        scope = {}
        exec(compile(text, f"<opus launch {self.name}>", "exec"), scope)
        run, self._adopt = scope["make"](**env)
        self.python_run = run
        self.fast = self._fast_path(run)
        self._torch_adopted = self._cupy_adopted = False
        if "torch" in sys.modules:
            self._adopt_torch()
        return self.fast or run

    def _fast_path(self, run):
        """The C hot path for this entry (None without the extension, or for a plan with a
        kind it lacks), falling back to run."""
        fl = fast_launch_module()
        table = self.plan.c_table(fl.KINDS) if fl is not None else None
        if table is None:
            return None
        return fl.new(ctypes.cast(self.cu_launch, ctypes.c_void_p).value, self.function.handle,
                      table, self.plan.size, self.plan.nargs, run, get_ident(), self.device,
                      self.smem_limit_set)

    def _per_param(self, of_dtype):
        """A tuple with of_dtype(d) for each pointer parameter, None for the others."""
        return tuple(of_dtype(p.dtype) if p.kind is PTR else None for p in self.plan.params)
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
        launch_once(self.function, self.plan, values, launcher.grid, launcher.block, smem, stream,
                    self.cu_launch)
