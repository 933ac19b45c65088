"""Run a traced specialization's rendered CUDA (sm_80, sm_90a) or HIP (gfx942, gfx950) source
on the host CPU: the source, with the dialect's shim header (shim/), is compiled by the host
C++ compiler into one program holding any number of kernels, which runs a list of launches
over whole grids (every thread of a block a fiber; shim/host.h) and hands back the arrays.

    prog = HostProgram("gfx942")
    k = prog.add(kernel.specialize(target="gfx942", VEC=4))
    prog.build(tmp_path)
    prog.run([Launch(k, grid, block, [x, y, n])])   # x, y: numpy arrays, updated in place

What the shims give each device construct, and what is refused as not host-executable, is in
README.md.
"""
from __future__ import annotations

import os
import re
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .cxx import host_cxx

__all__ = ["HostExecError", "HostKernel", "HostProgram", "Launch", "NotHostExecutable",
           "host_cxx", "run_kernel", "prepare_source"]

SHIM = Path(__file__).resolve().parent / "shim"
# -O1 (fast to compile, and optimizes enough to expose UB); no fma contraction and no
# type-based aliasing assumptions, as the device compilers are told
FLAGS = ["-std=c++17", "-O1", "-fno-strict-aliasing", "-ffp-contract=off", "-Wno-attributes"]
# OPUS_HOSTEXEC_UBSAN=1: also stop at the first undefined behaviour the host sees
UBSAN = ["-fsanitize=undefined", "-fno-sanitize-recover=all"]
_MAGIC = 0x48434E55414C504F  # "OPLAUNCH"
_DIALECT = {"nvidia": "cuda", "amd": "hip"}


class NotHostExecutable(Exception):
    """The source uses a device construct the host shim has no meaning for (README.md)."""


class HostExecError(AssertionError):
    """The host program failed: it did not compile, it crashed, its lanes diverged at a
    barrier, or a kernel wrote outside an array argument."""


# -- the source, made host C++ -------------------------------------------------------------------

# asm("text" : outputs : inputs), the inputs part optional (activemask.b32 has none)
_ASM = re.compile(r'\basm\s*(?:volatile\s*)?\(\s*"([^"]*)"\s*:((?:[^:()]|\([^()]*\))*)'
                  r'(?::((?:[^()]|\([^()]*\))*))?\)')
_OPERAND = re.compile(r'"=?\w+"\s*\(\s*([^()]*?)\s*\)')


def _shimmed(pattern):
    """Names a shim header defines: PTX functions (``void cvt_...(``) or ``#define``d builtins."""
    text = "".join(p.read_text() for p in sorted(SHIM.glob("*.h")))
    return set(re.findall(pattern, text))


def _asm_call(m, shims, isa="PTX", namespace="opus_ptx", header="cuda.h"):
    """``asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f))`` -> ``opus_ptx::cvt_rn_f16_f32(h, f)``
    (and ``__asm__("v_min_f32 %0, %1, %2" : ...)`` -> ``opus_gcn::v_min_f32(r, a, b)``)."""
    text, outs, ins = m.group(1), _OPERAND.findall(m.group(2)), _OPERAND.findall(m.group(3) or "")
    opcode, _, operands = text.strip().rstrip(";").partition(" ")
    name = opcode.replace(".", "_")
    # a vector operand {%0, %1} counts as its registers, an address [%2] as its register
    refs = [r.strip(" {}[]") for r in operands.split(",")] if operands.strip() else []
    if name not in shims:
        raise NotHostExecutable(f"inline {isa} {opcode!r} has no host shim (tests/hostexec/shim/{header})")
    if refs != [f"%{i}" for i in range(len(outs) + len(ins))]:
        raise NotHostExecutable(f"inline {isa} {text!r}: operands not in the order %0, %1, ...")
    return f"{namespace}::{name}({', '.join(outs + ins)})"


# HIP's inline GCN instructions (v_*); its empty compiler barriers stay as they are
_GCN_ASM = re.compile(r'\b__asm__\s*(?:volatile\s*)?\(\s*"(v_[^"]*)"\s*:([^:]*):((?:[^()]|\([^()]*\))*)\)')


def _dyn_smem(line):
    """The dynamic shared-memory declaration as a pointer to the launch's buffer."""
    return "  unsigned char* opus_dyn_smem = ::opus_host.dyn_smem;"


def prepare_source(source, vendor):
    """The rendered ``source`` as host C++ for the dialect's shim, kernel not yet renamed.
    Raises NotHostExecutable naming the first construct without a shim."""
    if vendor == "nvidia":
        shims = _shimmed(r"static inline void (\w+)\(")
        source = _ASM.sub(lambda m: _asm_call(m, shims), source)
        left = re.search(r'\b(?:asm|__asm__)\b[^"]*"([^"]*)', source)
        if left:
            raise NotHostExecutable(f"inline asm {left.group(1)!r} in a form the runner does not rewrite")
    else:
        gcn = _shimmed(r"static inline void (v_\w+)\(")
        source = _GCN_ASM.sub(lambda m: _asm_call(m, gcn, "GCN", "opus_gcn", "hip.h"), source)
        used = set(re.findall(r"__builtin_amdgcn_\w+", source))
        missing = sorted(used - _shimmed(r"#define (__builtin_amdgcn_\w+)"))
        if missing:
            raise NotHostExecutable(f"{', '.join(missing)} has no host shim (tests/hostexec/shim/)")
        source = source.replace("__attribute__((shared))", "static")
        # 16-bit element vectors (the MFMA operands, shim/mfma.h): their raw bits as ushorts
        source = re.sub(r"\b(?:_Float16|__bf16|short) (\w+) __attribute__\(\(ext_vector_type\((\d+)\)\)\)",
                        lambda m: f"unsigned short {m.group(1)} __attribute__((vector_size({m.group(2)} * 2)))",
                        source)
        source = re.sub(r"__attribute__\(\(ext_vector_type\((\d+)\)\)\)",
                        lambda m: f"__attribute__((vector_size({m.group(1)} * 4)))", source)
    source = re.sub(r"^\s*extern .*\bopus_dyn_smem\[\];$", _dyn_smem, source, flags=re.M)
    return source.replace('extern "C" ', "")


def _needs_fibers(source):
    """Whether the kernel may wait for other lanes: it has a barrier, or calls a builtin or a
    PTX instruction that an extension shim header (any but cuda.h and hip.h: cross-lane
    instructions such as MFMA or shfl.sync) defines.
    Other kernels run each lane to its end as a plain call, which is much cheaper."""
    if re.search(r"__syncthreads|__builtin_amdgcn_s_barrier|opus_host_warp_rendezvous", source):
        return True
    extension = set()
    for p in SHIM.glob("*.h"):
        if p.name not in ("host.h", "main.h", "floats.h", "cuda.h", "hip.h"):
            text = p.read_text()   # its builtins, and the PTX instructions it shims
            extension |= set(re.findall(r"#define (\w+)", text))
            extension |= set(re.findall(r"static inline void (\w+)\(", text))
    return any(re.search(rf"\b{name}\b", source) for name in extension)


def _signature_params(source, symbol):
    """The C types of the kernel's parameters, from its rendered signature."""
    m = re.search(rf"\b{re.escape(symbol)}\(([^)]*)\)\s*\{{", source)
    if m is None:
        raise HostExecError(f"no definition of {symbol} in the rendered source")
    params = [p.strip() for p in m.group(1).split(",") if p.strip()]
    return [re.match(r"(.*?)\s*\b\w+$", p).group(1) for p in params]


# -- kernels, launches, the program ---------------------------------------------------------------

@dataclass
class HostKernel:
    """One specialization in a HostProgram: its index there, IR parameters, fixed block size."""
    index: int
    name: str
    params: list            # ir Params (name, type) of the run-time arguments, in order
    block_size: object      # the kernel's fixed block size or None
    ctypes: list = field(default_factory=list)
    fibers: bool = True     # lanes run as fibers (the kernel may wait at a barrier)


@dataclass
class Launch:
    """kernel[grid, block](*args, smem=smem): ``args`` are the run-time arguments in order
    (numpy arrays for pointers, Python or numpy scalars); arrays are updated in place."""
    kernel: HostKernel
    grid: object
    block: object
    args: list
    smem: int = 0


def _dims(d, what):
    d = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(d) <= 3 or any(not isinstance(x, int) or x < 1 for x in d):
        raise ValueError(f"{what} must be a positive int or a tuple of 1 to 3 of them, not {d!r}")
    return d + (1,) * (3 - len(d))


class HostProgram:
    """Kernels for one target compiled into one host program; ``run`` executes launches."""

    def __init__(self, target):
        from opus.targets import get_target
        self.target = get_target(target) if isinstance(target, str) else target
        self.vendor = self.target.vendor
        self.kernels, self._parts, self.exe = [], [], None

    def add(self, spec) -> HostKernel:
        """Add a Specialization (``kernel.specialize(target=..., **constexprs)``) for this
        program's target. Raises NotHostExecutable for what the shims cannot run."""
        if spec.target.name != self.target.name:
            raise ValueError(f"a specialization for {spec.target.name} added to a program for "
                             f"{self.target.name}")
        from opus.runtime.diagnostics import strip_line_markers
        source = prepare_source(strip_line_markers(spec.source), self.vendor)
        k = HostKernel(len(self.kernels), spec.function.name, list(spec.function.params),
                       spec.function.attrs.get("block_size"))
        k.ctypes = _signature_params(source, spec.symbol)
        k.fibers = _needs_fibers(source)
        args = ", ".join(f"*({t}*)a[{i}]" for i, t in enumerate(k.ctypes))
        self._parts.append(f"namespace opus_k{k.index} {{\n{source}}}\n"
                           f"static void opus_launch_{k.index}(void** a) "
                           f"{{ opus_k{k.index}::{spec.symbol}({args}); }}\n")
        self.kernels.append(k)
        self.exe = None
        return k

    def cxx_source(self) -> str:
        header = "cuda.h" if self.vendor == "nvidia" else "hip.h"
        table = ", ".join(f"opus_launch_{k.index}" for k in self.kernels)
        names = ", ".join(f'"{k.name}"' for k in self.kernels)
        fibers = ", ".join("true" if k.fibers else "false" for k in self.kernels)
        return (f'#include "{header}"\n' + "".join(self._parts)
                + f"static void (*const opus_host_kernels[])(void**) = {{{table}}};\n"
                + f"static const char* const opus_host_kernel_names[] = {{{names}}};\n"
                + f"static const bool opus_host_kernel_fibers[] = {{{fibers}}};\n"
                + '#include "main.h"\n')

    def build(self, workdir):
        """Compile the program in ``workdir`` (a temporary folder)."""
        if not self.kernels:
            raise ValueError("no kernels added")
        workdir = Path(workdir)
        cpp, exe = workdir / "opus_host.cpp", workdir / "opus_host"
        cpp.write_text(self.cxx_source())
        defs = [f"-DOPUS_HOST_WARP={self.target.warp_size}"]
        if self.vendor == "amd":
            defs.append(f"-DOPUS_HOST_GFX={self.target.name[3:]}")
        flags = FLAGS + (UBSAN if os.environ.get("OPUS_HOSTEXEC_UBSAN") == "1" else [])
        r = subprocess.run(host_cxx() + flags + defs + ["-I", str(SHIM), "-o", str(exe), str(cpp)],
                           capture_output=True, text=True)
        if r.returncode:
            raise HostExecError(f"the host compiler rejected {cpp}:\n{r.stderr[-6000:]}")
        self.exe = exe
        return exe

    def run(self, launches, timeout=600):
        """Run the launches in order in one process; write each array argument back into its
        numpy array. Returns the program's standard output (device printf). Arrays are copied
        in when run() is called, so one array may appear in one launch of a run only (launches
        that pass data on: one run() each)."""
        _arrays_used_once(launches)
        packed = [_pack_launch(l) for l in launches]
        if self.exe is None:
            raise ValueError("build() the program first")
        work = self.exe.parent
        lfile, rfile = work / "launches.bin", work / "results.bin"
        lfile.write_bytes(struct.pack("<QQ", _MAGIC, len(launches)) + b"".join(packed))
        rfile.unlink(missing_ok=True)
        r = subprocess.run([str(self.exe), str(lfile), str(rfile)], capture_output=True,
                           timeout=timeout)
        done = _unpack_results(rfile.read_bytes() if rfile.exists() else b"", launches)
        if r.returncode:
            what = f"signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
            l = launches[min(done, len(launches) - 1)]
            raise HostExecError(f"the host program stopped ({what}) in launch {done} "
                                f"(kernel {l.kernel.name}):\n{r.stderr.decode(errors='replace')[-3000:]}")
        return r.stdout.decode(errors="replace")


def _arrays_used_once(launches):
    seen = {}
    for i, l in enumerate(launches):
        for a in l.args:
            if isinstance(a, np.ndarray):
                base = a if a.base is None else a.base
                if seen.setdefault(id(base), i) != i:
                    raise ValueError(f"launches {seen[id(base)]} and {i} share an array: one run() "
                                     "each, so that the second sees the first's results")


def _pack_launch(l: Launch) -> bytes:
    k = l.kernel
    grid, block = _dims(l.grid, "grid"), _dims(l.block, "block")
    if k.block_size and _dims(k.block_size, "block") != block:
        raise ValueError(f"kernel {k.name} is fixed to block {k.block_size}, launched with {block}")
    if len(l.args) != len(k.params):
        raise ValueError(f"kernel {k.name} takes {len(k.params)} run-time arguments "
                         f"({', '.join(p.name for p in k.params)}), got {len(l.args)}")
    out = [struct.pack("<Q3Q3QQQ", k.index, *grid, *block, l.smem, len(l.args))]
    for p, a in zip(k.params, l.args):
        elem = getattr(p.type, "elem", None)
        if elem is not None:  # a pointer: the array's bytes
            if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
                raise ValueError(f"argument {p.name}: a C-contiguous numpy array, not {type(a).__name__}")
            if a.dtype.itemsize != elem.itemsize:
                raise ValueError(f"argument {p.name}: {a.dtype} elements for a Ptr[{elem.name}]")
            data = a.tobytes()
            kind = 1
        else:
            data, kind = np.array(a).astype(p.type.np_dtype).tobytes(), 0
        out.append(struct.pack("<QQ", kind, len(data)) + data + b"\0" * (-len(data) % 8))
    return b"".join(out)


def _unpack_results(data, launches):
    """Write the results back into the launches' arrays; returns how many launches finished.
    Raises HostExecError for a launch that wrote outside an array."""
    pos, done = 0, 0

    def take():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        b = data[pos + 8:pos + 8 + n]
        pos += 8 + n + (-n % 8)
        return b

    for l in launches:
        if pos >= len(data):
            break
        (status,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        message = take().decode()
        for p, a in zip(l.kernel.params, l.args):
            if getattr(p.type, "elem", None) is not None:
                a.view(np.uint8).reshape(-1)[:] = np.frombuffer(take(), np.uint8)
        if status:
            names = {str(i): p.name for i, p in enumerate(l.kernel.params)}
            message = re.sub(r"argument (\d+)", lambda m: f"argument {names[m.group(1)]}", message)
            raise HostExecError(message)
        done += 1
    return done


def run_kernel(kernel, grid, block, *args, target, workdir, smem=0, **constexprs):
    """kernel[grid, block](*args) on the host as ``target`` (args: the run-time arguments);
    arrays are updated in place. Returns the program's standard output."""
    prog = HostProgram(target)
    k = prog.add(kernel.specialize(target=target, **constexprs))
    prog.build(workdir)
    return prog.run([Launch(k, grid, block, list(args), smem)])
