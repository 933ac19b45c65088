"""The kernel language: run-time values, math, memory, threads and matrix atoms."""
from .. import dtypes as _dt
from .values import Val, cast, bitcast
from . import values as _values

_dt._cast_hook = lambda value, to, **kw: cast(value, to, **kw)


def _all_targets():
    from ..targets import get_target
    from ..targets.nvidia import NVIDIA_ARCHS
    try:
        from ..targets.amd import AMD_ARCHS
    except ImportError:
        AMD_ARCHS = ()
    return [get_target(a) for a in NVIDIA_ARCHS + AMD_ARCHS]


def _dtype_targets(d) -> str:
    """The ':targets:' text of a dtype's docstring, read from the target table: which targets
    hold values of it, what a flavoured name means on each, which convert it in hardware."""
    targets = _all_targets()
    have = [t.name for t in targets if t.has_dtype(d)]
    if not have:
        return f"no target: {targets[0].unavailable_dtypes[d.name]}"
    missing = [t.name for t in targets if t.name not in have]
    text = f"{', '.join(have)}; not on {', '.join(missing)}" if missing else "all targets"
    if d.flavour is not None:
        means = {}
        for t in targets:
            means.setdefault(t.resolve_dtype(d).name, []).append(t.name)
        return text + "; it means " + " and ".join(f"{c} on {', '.join(a)}"
                                                   for c, a in means.items())
    if d.storage_only:
        hw = [t.name for t in targets if d.name in t.hw_fp8]
        return text + (f"; converted in hardware on {', '.join(hw)}, elsewhere in exact bit "
                       "arithmetic" if hw else "; converted in exact bit arithmetic")
    return text


_dt._targets_hook = _dtype_targets
