"""Generate docs/api.md, the API reference, from the docstrings of ``opus.__all__``.

    .venv/bin/python tools/gen_api_docs.py           # rewrite docs/api.md
    .venv/bin/python tools/gen_api_docs.py --check   # exit 1 if docs/api.md is stale

tests/test_public_api.py checks that docs/api.md is what this makes of the docstrings now, so
the reference cannot drift from the code. SECTIONS groups the names under the banners of the
reference; a new public name must be placed in one (the test says so).
"""
from __future__ import annotations

import inspect
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import opus  # noqa: E402  (after the path: the checkout's opus, not an installed one)
from opus.dtypes import DType  # noqa: E402

OUT = ROOT / "docs" / "api.md"

SECTIONS = [
    ("Types and conversions", [
        "DType", "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16",
        "f32", "f64", "fp16", "fp32", "fp64", "fp8_e4m3", "fp8_e4m3fnuz", "fp8_e5m2",
        "fp8_e5m2fnuz", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "e8m0", "int4", "uint4", "fp8", "bf8",
        "fp4", "tf32", "cast", "bitcast", "sizeof_bits", "is_packed", "num_packs"]),
    ("Quantization", ["scaled_cast", "amax", "tensor_scale", "mx_scale", "mx_quantize",
                      "mx_dequantize"]),
    ("Sub-byte arrays on the host and torch's dtypes", [
        "pack", "unpack", "pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6", "pack_int4",
        "unpack_int4", "pack_uint4", "unpack_uint4", "torch_dtype"]),
    ("Memory", ["make_gmem", "make_smem", "alloc_smem", "dynamic_smem", "load", "store", "Cache"]),
    ("Asynchronous copies", ["copy_async", "copy_async_lds", "commit_async", "wait_async",
                             "s_waitcnt"]),
    ("The tensor memory accelerator and mbarriers", [
        "TensorMap", "TmaPipeline", "alloc_mbarriers", "tma_load", "tma_store", "tma_commit",
        "tma_wait", "fence_proxy_async", "fence_mbarrier_init"]),
    ("Layouts and x/p/y partitions", [
        "make_layout", "Layout", "CachedLayout", "zipped_divide", "Swizzle", "swizzle_bytes", "Y", "P", "Tile",
        "partition",
        "unfold_x_stride", "unfold_p_coord", "p_shape", "y_shape"]),
    ("Threads and synchronisation", [
        "thread_id_x", "thread_id_y", "thread_id_z", "block_id_x", "block_id_y", "block_id_z",
        "block_size_x", "block_size_y", "block_size_z", "num_blocks_x", "num_blocks_y",
        "num_blocks_z", "grid_size_x", "grid_size_y", "grid_size_z", "lane_id", "warp_id",
        "warp_size", "sync_threads", "printf"]),
    ("Synchronization", [
        "sync_warp", "barrier_sync", "barrier_arrive", "fence", "workgroup_barrier",
        "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_setprio", "s_nop", "s_sleep", "sched_barrier",
        "sched_group_barrier", "clock", "clock64", "globaltimer", "s_memtime", "s_memrealtime"]),
    ("Atomics", [
        "atomic_add", "atomic_min", "atomic_max", "atomic_exch", "atomic_cas", "atomic_and",
        "atomic_or", "atomic_xor", "atomic_inc", "atomic_dec", "atomic_load", "atomic_store"]),
    ("Math", ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor",
              "ceil", "trunc", "rint", "fma", "max", "min", "med3", "mulhi", "popc", "select", "tdiv",
              "tmod"]),
    ("Fast division and numeric limits", ["mdiv", "finfo", "iinfo", "numeric_limits"]),
    ("Wave-uniform values", ["readfirstlane", "uniform"]),
    ("Vectors", ["make_vector", "insert", "concat", "splat", "zeros", "vector_type"]),
    ("Matrix atoms", ["make_mma", "make_tiled_mma"]),
    ("Warpgroup matrix multiply-accumulate (NVIDIA sm_90a)",
     ["make_wgmma", "wgmma_fence", "wgmma_commit", "wgmma_wait", "setmaxnreg_inc",
      "setmaxnreg_dec"]),
    ("Cross-lane operations", [
        "shfl", "shfl_up", "shfl_down", "shfl_xor", "mov_dpp", "upd_dpp", "dpp", "ballot",
        "any_lanes", "all_lanes", "warp_any", "warp_all", "active_mask", "lanemask_lt",
        "lanemask_le", "lanemask_gt", "lanemask_ge", "permute", "bpermute", "warp_reduce",
        "warp_scan"]),
    ("Warp-level shared loads and stores", ["ldmatrix", "stmatrix", "ds_read_tr"]),
    ("Kernels and launching", ["kernel", "func", "Ptr", "constexpr", "range", "static_ford",
                               "autotune"]),
    ("Targets", ["set_target", "current_target"]),
    ("Errors", ["OpusError", "TraceError", "CompileError", "ArgumentError", "OpusRuntimeError",
                "AutotuneError"]),
]

# Families documented from one template: shown as one table and the template's fields once.
MATH_FAMILY = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil",
               "trunc", "rint"]

_FIELD = re.compile(r"^:(param|type|returns|rtype|targets|ivar)(?: (\w+))?:\s*(.*)$")


def _md(text: str) -> str:
    """reST inline literals (``x``) as Markdown code spans."""
    return text.replace("``", "`")


def parse(doc: str):
    """(body, fields) of a docstring: the prose before the first field, and each field as
    (kind, name, text) with continuation lines joined."""
    lines = inspect.cleandoc(doc).splitlines()
    body, fields = [], []
    for line in lines:
        m = _FIELD.match(line.strip())
        if m:
            fields.append([m.group(1), m.group(2), m.group(3)])
        elif fields and line.strip():
            fields[-1][2] += " " + line.strip()
        elif not fields:
            body.append(line)
    return "\n".join(body).strip(), [tuple(f) for f in fields]


def render_fields(fields) -> list[str]:
    """Parameters, returns and targets as Markdown lists."""
    types = {name: text for kind, name, text in fields if kind == "type"}
    out = []
    params = [(name, text) for kind, name, text in fields if kind == "param"]
    if params:
        out.append("**Parameters**")
        out.append("")
        out += [f"- `{name}` ({_md(types[name])}): {_md(text)}" if name in types
                else f"- `{name}`: {_md(text)}" for name, text in params]
        out.append("")
    rtype = next((text for kind, _, text in fields if kind == "rtype"), None)
    for kind, _, text in fields:
        if kind == "returns":
            out.append(f"**Returns** {_md(text)}" + (f" (`{rtype}`)" if rtype else ""))
            out.append("")
        elif kind == "ivar":
            pass
    ivars = [(name, text) for kind, name, text in fields if kind == "ivar"]
    if ivars:
        out.append("**Attributes**")
        out.append("")
        out += [f"- `{name}`: {_md(text)}" for name, text in ivars]
        out.append("")
    for kind, _, text in fields:
        if kind == "targets":
            out.append(f"**Targets** {_md(text)}")
            out.append("")
    return out


def signature(name: str, obj) -> str:
    """How the name is written in a call: ``opus.load(p, off=0, ...)``, ``opus.Ptr[dtype]``."""
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return f"opus.{name}"
    if callable(obj) and not isinstance(obj, DType):
        sig = inspect.signature(obj)
        bare = sig.replace(parameters=[p.replace(annotation=p.empty)
                                       for p in sig.parameters.values()],
                           return_annotation=sig.empty)
        return f"opus.{name}{bare}".replace("'", '"')
    if hasattr(type(obj), "__getitem__"):
        params = [p for p in inspect.signature(type(obj).__getitem__).parameters if p != "self"]
        return f"opus.{name}[{', '.join(params)}]"
    return f"opus.{name}"


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def _entry(title: str, doc: str) -> list[str]:
    body, fields = parse(doc)
    out = [f"### `{title}`", ""]
    if body:
        out += [_md(body), ""]
    return out + render_fields(fields)


def _axis_families(names):
    """Runs of x/y/z names (thread_id_x, thread_id_y, thread_id_z) as one entry each."""
    i = 0
    while i < len(names):
        n = names[i]
        if n.endswith("_x") and names[i + 1:i + 3] == [n[:-1] + "y", n[:-1] + "z"]:
            yield names[i:i + 3]
            i += 3
        else:
            yield [n]
            i += 1


def _dtype_table(names) -> list[str]:
    """The dtypes as one table (their docstrings' first line and targets), then what calling
    one does (the same for all: shown once, from f32's docstring)."""
    out = ["| type | bits and format | targets |", "|---|---|---|"]
    for name in names:
        d = getattr(opus, name)
        body, fields = parse(d.__doc__)
        head = body.splitlines()[0]
        if not head.startswith(f"opus.{name}: "):
            continue  # an alias (fp16 is f16): its row is the one of its first name
        what = head[len(f"opus.{name}: "):].rstrip(".")
        targets = next(text for kind, _, text in fields if kind == "targets")
        out.append(f"| `opus.{name}` | {_md(what)} | {_md(targets)} |")
    out.append("")
    _, fields = parse(opus.f32.__doc__)
    out += ["### `opus.<dtype>(value, **kw)`", "",
            "Each dtype annotates kernel parameters (`n: opus.i32`, `x: opus.Ptr[opus.f16]`) and, "
            "called in a kernel, converts: `opus.f32(x)` is `opus.cast(x, opus.f32)`. "
            "`help(opus.<dtype>)` shows its own docstring.", ""]
    out += [line.replace("f32", "the type") for line in render_fields(
        [f for f in fields if f[0] != "targets"])]
    return out


def _math_family(names) -> list[str]:
    """The elementwise math functions (one template in lang/math.py) as one table."""
    out = ["### `opus.<f>(x)`: elementwise functions", "",
           "| function | computes | targets |", "|---|---|---|"]
    for name in names:
        body, fields = parse(getattr(opus, name).__doc__)
        what = body.splitlines()[0].removeprefix("Elementwise ").split(": ``opus.")[0]
        targets = next(text for kind, _, text in fields if kind == "targets")
        out.append(f"| `opus.{name}(x)` | {what} | {_md(targets)} |")
    body, fields = parse(getattr(opus, names[0]).__doc__)
    out += ["", _md(body.split("\n\n", 1)[1]), "",
            "A Python number folds at trace time (Python's math)."]
    out += [""] + [line.replace(f"{names[0]} of", "f of") for line in render_fields(
        [f for f in fields if f[0] != "targets"])]
    return out


def _archs():
    from opus.targets import get_target
    from opus.targets.amd import AMD_ARCHS
    from opus.targets.nvidia import NVIDIA_ARCHS
    return [get_target(a) for a in NVIDIA_ARCHS + AMD_ARCHS]


def _has_atom(target, key) -> bool:
    """Whether opus.make_mma finds this (a, b, c, shape) on ``target`` (the question tracing
    asks, so the table says what kernels get)."""
    from opus.dtypes import dtype_from_name
    from opus.targets.base import UnsupportedOnTarget
    a, b, c, shape, *scaled = key  # a block-scaled row's key ends in 'scaled'
    try:
        target.mma_instruction(*map(dtype_from_name, (a, b, c)), shape, scaled=bool(scaled))
    except UnsupportedOnTarget:
        return False
    return True


def _atom_table() -> list[str]:
    """Which (A, B, C types, m x n x k) atoms opus.make_mma finds on each target."""
    targets = _archs()
    all_keys = {k for t in targets for k in t.mma_atoms}
    keys = sorted((k for k in all_keys if len(k) == 4), key=lambda k: (k[3], k[0], k[1], k[2]))
    out = ["Atoms per target (from the targets' instruction tables):", "",
           "| A x B -> C | m x n x k | " + " | ".join(t.name for t in targets) + " |",
           "|---|---|" + "---|" * len(targets)]
    for k in keys:
        cells = ["yes" if _has_atom(t, k) else "" for t in targets]
        out.append(f"| {k[0]} x {k[1]} -> {k[2]} | {'x'.join(map(str, k[3]))} | "
                   + " | ".join(cells) + " |")
    # block-scaled rows (make_mma(..., scaled=True)): one line per accumulator and shape
    for c, shape in sorted({(k[2], k[3]) for k in all_keys if len(k) == 5}, key=lambda x: x[1]):
        group = sorted(k for k in all_keys if len(k) == 5 and (k[2], k[3]) == (c, shape))
        formats = sorted({k[0] for k in group} | {k[1] for k in group})
        cells = ["yes" if all(_has_atom(t, k) for k in group) else "" for t in targets]
        out.append(f"| scaled=True: any pairing of {', '.join(formats)} -> {c} | "
                   f"{'x'.join(map(str, shape))} | " + " | ".join(cells) + " |")
    return out + [""]


def render() -> str:
    """The whole of docs/api.md."""
    placed = [n for _, names in SECTIONS for n in names]
    missing = sorted(set(opus.__all__) - set(placed))
    if missing:
        raise SystemExit(f"tools/gen_api_docs.py: place {missing} in a section of SECTIONS")
    out = ["# API reference", "",
           "<!-- Generated by tools/gen_api_docs.py from the docstrings of opus.__all__; do not "
           "edit by hand. tests/test_public_api.py checks it is current. -->", "",
           "Every public name of `opus`, from its docstring. Run-time values are the traced "
           "values of a kernel (scalars or register vectors); compile-time values are Python "
           "values. **Targets** says which chips have it: sm_80, sm_86, sm_89, sm_90, sm_90a "
           "(NVIDIA) and gfx942, gfx950 (AMD); docs/language.md explains the rules.", ""]
    out += [f"- [{title}](#{_anchor(title)})" for title, _ in SECTIONS] + [""]
    for title, names in SECTIONS:
        out += [f"## {title}", ""]
        dtypes = [n for n in names if isinstance(getattr(opus, n), DType)]
        if dtypes:
            out += _dtype_table(dtypes)
        math = [n for n in names if n in MATH_FAMILY]
        if math:
            out += _math_family(math)
        rest = [n for n in names if n not in dtypes and n not in math]
        for family in _axis_families(rest):
            obj = getattr(opus, family[0])
            title_ = ", ".join(signature(n, getattr(opus, n)) for n in family)
            doc = obj.__doc__
            out += _entry(title_, doc)
            if family == ["make_mma"]:
                out += _atom_table()
            if len(family) == 3:  # the x entry stands for all three
                out.insert(len(out) - len(render_fields(parse(doc)[1])),
                           f"`{family[1]}`, `{family[2]}`: the same along y and z.\n")
    return "\n".join(out).rstrip() + "\n"


def main(argv) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text() != text:
            print("docs/api.md is stale: run .venv/bin/python tools/gen_api_docs.py")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
