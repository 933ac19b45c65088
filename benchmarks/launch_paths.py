"""Cost of the pieces a Python launch path can be made of, measured alone on the GPU machine.

    PYTHONPATH=src python benchmarks/launch_paths.py [--out paths.json]

Why: the hot-launch goal (<= 4 us per ``k[grid, block](...)``) is close to the cost of one
ctypes cuLaunchKernel call, so the launch path is chosen from measurements of its parts:
ctypes call styles of cuLaunchKernel / cuLaunchKernelEx, argument packing, and the torch
accessors the path needs (data_ptr, get_device, dtype, current raw stream).
Each figure is host microseconds per call, median of 5 loops of --count calls after a warm-up.
"""
import argparse
import ctypes
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def measure(count, repeats):
    import torch
    from opus.runtime import cuda_driver as drv
    from opus.runtime.launcher import LaunchConfig

    n = 1024
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    o = torch.empty(n, device="cuda")
    k = common.make_opus_vector_add()
    k[1, 256](x, y, o, n)
    torch.cuda.synchronize()
    entry = next(iter(k.launch_entries.values()))
    fh = entry.function.handle
    lib = drv._load()
    # a second handle on the same entry points, without argtypes
    raw = ctypes.CDLL("libcuda.so.1")
    cu_plain = raw.cuLaunchKernel
    cu_plain.restype = ctypes.c_int
    cu_ex = raw.cuLaunchKernelEx
    cu_ex.restype = ctypes.c_int
    cu_ex_typed = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
    cu_ex_typed.argtypes = [ctypes.c_void_p] * 4
    cu_ex_typed.restype = ctypes.c_int

    # parameter block: 3 pointers + i32, packed in one buffer; kernelParams points into it
    buf = ctypes.create_string_buffer(32)
    base = ctypes.addressof(buf)
    params = (ctypes.c_void_p * 4)(base, base + 8, base + 16, base + 24)
    struct.pack_into("QQQi", buf, 0, x.data_ptr(), y.data_ptr(), o.data_ptr(), n)
    pk = struct.Struct("QQQi").pack_into
    xp, yp, op = x.data_ptr(), y.data_ptr(), o.data_ptr()
    slots = [ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_int32()]
    sparams = (ctypes.c_void_p * 4)(*[ctypes.addressof(s) for s in slots])
    for s, v in zip(slots, (x.data_ptr(), y.data_ptr(), o.data_ptr(), n)):
        s.value = v
    cfg = LaunchConfig(1, 1, 1, 256, 1, 1, 0, None, None, 0)
    cfg_ref, fh_obj = ctypes.byref(cfg), ctypes.c_void_p(fh)
    params_obj = ctypes.c_void_p(ctypes.addressof(params))
    cfg_ptr = ctypes.c_void_p(ctypes.addressof(cfg))
    u = ctypes.c_uint
    g_objs = (u(1), u(1), u(1), u(256), u(1), u(1), u(0))
    stream0 = ctypes.c_void_p(0)
    raw_stream = torch._C._cuda_getCurrentRawStream
    T = type(x)
    f32t = torch.float32
    typed = lib.cuLaunchKernel

    from threading import get_ident

    def kwcall(*args, smem=0, stream=None, **kw):
        return None

    def unpack4(args):
        a, b, c, d = args
        return type(a) is T and type(b) is T and type(c) is T and type(d) is int

    def set_slots():
        for s, v in zip(slots, (x.data_ptr(), y.data_ptr(), o.data_ptr(), n)):
            s.value = v

    pieces = {
        "cuLaunchKernel argtypes, 11 ints": lambda: typed(fh, 1, 1, 1, 256, 1, 1, 0, 0, params, None),
        "cuLaunchKernel no argtypes, prewrapped": lambda: cu_plain(fh_obj, *g_objs, stream0, params_obj, None),
        "cuLaunchKernelEx no argtypes, prewrapped": lambda: cu_ex(cfg_ref, fh_obj, params_obj, None),
        "cuLaunchKernelEx argtypes c_void_p x4": lambda: cu_ex_typed(cfg_ptr, fh_obj, params_obj, None),
        "struct pack_into 4 values": lambda: pk(buf, 0, xp, yp, op, n),
        "4 x slot.value =": set_slots,
        "cfg.hStream = int": lambda: setattr(cfg, "hStream", 0),
        "x.data_ptr()": lambda: x.data_ptr(),
        "x.get_device()": lambda: x.get_device(),
        "x.is_cuda": lambda: x.is_cuda,
        "x.dtype is f32": lambda: x.dtype is f32t,
        "type(x) is Tensor": lambda: type(x) is T,
        "raw_stream(0)": lambda: raw_stream(0),
        "threading.get_ident()": get_ident,
        "kwargs call f(*a, smem=0, stream=None)": lambda: kwcall(x, y, o, n),
        "tuple unpack + 4 type checks": lambda: unpack4((x, y, o, n)),
        "empty lambda": lambda: None,
    }
    # Two shapes of the same generated launch code: module globals vs closure cells.
    styles = _styles(dict(T=T, D=f32t, DEV=0, OWNER=get_ident(), get_ident=get_ident,
                          raw_stream=raw_stream, pack=pk, buffer=buf, cfg=cfg,
                          cu=cu_ex_typed, cfg_ptr=cfg_ptr, fh=fh_obj, params=params_obj))
    args4 = (x, y, o, n)
    pre = k[1, 256]
    full_args = (x, y, o, n, 4)
    pieces["opus k[1, 256](x, y, o, n)"] = lambda: k[1, 256](x, y, o, n)
    pieces["opus entry.run (C hot path where built)"] = lambda: entry.run(pre, full_args, 0, None)
    pieces["opus entry.python_run (generated)"] = lambda: entry.python_run(pre, full_args, 0,
                                                                          None)
    pieces["generated run, globals"] = lambda: styles["globals"](args4)
    pieces["generated run, closure cells"] = lambda: styles["closure"](args4)
    out = {}
    sync = torch.cuda.synchronize
    for name, fn in pieces.items():
        out[name] = common.host_loop_us(fn, count=count, warmup=2000, repeats=repeats,
                                        sync=sync)["median"]
        print(f"{name:45s} {out[name]:6.3f} us", file=sys.stderr)
    # the launches really ran the kernel
    o.zero_()
    cu_ex(cfg_ref, fh_obj, params_obj, None)
    sync()
    out["check_launch_ex_correct"] = bool(torch.equal(o, x + y))
    return out


_BODY = """\
    a0, a1, a2, v3 = args
    if type(a0) is T and a0.dtype is D and a0.get_device() == DEV:
        v0 = a0.data_ptr()
    if type(a1) is T and a1.dtype is D and a1.get_device() == DEV:
        v1 = a1.data_ptr()
    if type(a2) is T and a2.dtype is D and a2.get_device() == DEV:
        v2 = a2.data_ptr()
    if type(v3) is not int or not -2147483648 <= v3 <= 2147483647:
        raise ValueError
    h = raw_stream(DEV) if type(a0) is T else 0
    if get_ident() != OWNER:
        raise RuntimeError
    pack(buffer, 0, v0, v1, v2, v3)
"""


def _styles(env):
    g = dict(env, last=[None, 0, 0])
    exec("def run(args):\n" + _BODY + """\
    if h != last[1]:
        cfg.hStream = h or None
        last[1] = h
    return cu(cfg_ptr, fh, params, None)
""", g)
    names = ", ".join(env)
    scope = {}
    exec(f"def make({names}):\n    last_h = 0\n    def run(args):\n        nonlocal last_h\n"
         + "".join("    " + line + "\n" for line in _BODY.splitlines()) + """\
        if h != last_h:
            cfg.hStream = h or None
            last_h = h
        return cu(cfg_ptr, fh, params, None)
    return run
""", scope)
    return {"globals": g["run"], "closure": scope["make"](**env)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    res = {"environment": common.environment(), "launch_paths_us": measure(a.count, a.repeats)}
    if a.out:
        common.write_json(res, a.out)


if __name__ == "__main__":
    main()
