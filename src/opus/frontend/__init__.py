"""Frontend: the kernel decorator, the AST rewrite, tracing and launching."""
from .annotations import Ptr, constexpr
from .kernel import kernel, Kernel
from .calls import func
from .control import OpusRange as range, static_ford
from .targeting import set_target, current_target
