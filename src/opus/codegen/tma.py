"""Rendering of the mbarrier and TMA ops (ir/ops.py), mixed into the C emitter.

The spellings are the dialect's table ``code_for_tma`` (PTX inline asm in codegen/cuda.py); a
dialect without one (HIP) never meets these ops, because tracing refuses them on its targets,
and says so as an internal error if it does. Shared-memory operands are 32-bit shared-window
addresses (``opus_smem_addr``); coordinates go innermost first, as PTX takes them (the IR keeps
the tensor's order, outermost first).
"""
from __future__ import annotations

from ..ir import TensorMapType

__all__ = ["TmaRendering", "PTX_TMA", "ptx_tma"]

# The PTX text of each mbarrier, TMA, fence and bulk-group instruction (PTX ISA 8.0, sm_90), in
# one place: the CUDA dialect fills the {fields} with asm operand references (%0, ...) and wraps
# the line in asm volatile (codegen/cuda.py ``_TMA``); the PTX body fills them with its
# registers (codegen/ptx.py). Shared operands are 32-bit shared-window addresses, the tensor map
# the generic address of the __grid_constant__ parameter, {coords} a brace list innermost first.
PTX_TMA = {
    "mbarrier_init": "mbarrier.init.shared::cta.b64 [{bar}], {count};",
    "mbarrier_arrive": "mbarrier.arrive.shared::cta.b64 {state}, [{bar}];",
    "mbarrier_arrive_expect_tx": "mbarrier.arrive.expect_tx.shared::cta.b64 {state}, [{bar}], {bytes};",
    "mbarrier_expect_tx": "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{bar}], {bytes};",
    "mbarrier_test_wait": "mbarrier.test_wait.parity.shared::cta.b64 {pred}, [{bar}], {parity};",
    "mbarrier_try_wait": "mbarrier.try_wait.parity.shared::cta.b64 {pred}, [{bar}], {parity};",
    "fence_proxy_async": "fence.proxy.async.shared::cta;",
    "fence_mbarrier_init": "fence.mbarrier_init.release.cluster;",
    "tma_load": ("cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx"
                 "::bytes [{dst}], [{tmap}, {coords}], [{bar}];"),
    "tma_store": "cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group [{tmap}, {coords}], [{src}];",
    "bulk_commit_group": "cp.async.bulk.commit_group;",
    "bulk_wait_group_read": "cp.async.bulk.wait_group.read {n};",
    "bulk_wait_group": "cp.async.bulk.wait_group {n};",
}


def ptx_tma(key, **fields) -> str:
    """The PTX line of instruction ``key`` with its fields filled."""
    return PTX_TMA[key].format(**fields)


class TmaRendering:
    """render_<kind> of the mbarrier and TMA ops; spellings in ``code_for_tma``."""

    # name -> C text with {placeholders} (see codegen/cuda.py); empty: the dialect has none
    code_for_tma: dict = {}
    tensor_map_ctype = None    # the C parameter type of a tensor map (CUDA: __grid_constant__)
    tensor_map_struct = None   # its struct definition

    def tma_code(self, key, **fields):
        text = self.code_for_tma.get(key)
        if text is None:
            from .cemit import CodegenError
            raise CodegenError(f"internal: {key} reached the {self.backend} renderer for "
                               f"{self.target.name} (Target.tma_missing: tracing refuses it)")
        return text.format(**fields)

    def tensor_map_param_type(self, t: TensorMapType) -> str:
        if self.tensor_map_ctype is None:
            self.tma_code("tensor map parameter")
        self.helpers.setdefault("opus_tensor_map", self.tensor_map_struct)
        return self.tensor_map_ctype

    def smem_addr(self, v) -> str:
        """The 32-bit shared-window address of shared pointer ``v``."""
        return f"{self.helper('opus_smem_addr', self.tma_code('smem_addr'))}({self.name(v)})"

    def _tma_line(self, indent, key, **fields):
        self.line(indent, self.tma_code(key, **fields))

    def render_mbarrier_init(self, op, indent):
        bar, count = op.operands
        self._tma_line(indent, "mbarrier_init", bar=self.smem_addr(bar), count=self.name(count))

    def render_mbarrier_arrive(self, op, indent):
        bar = self.smem_addr(op.operands[0])
        if op.attrs["expect_tx"]:
            self._tma_line(indent, "mbarrier_arrive_expect_tx", bar=bar,
                           bytes=self.name(op.operands[1]))
        else:
            self._tma_line(indent, "mbarrier_arrive", bar=bar)

    def render_mbarrier_expect_tx(self, op, indent):
        bar, nbytes = op.operands
        self._tma_line(indent, "mbarrier_expect_tx", bar=self.smem_addr(bar),
                       bytes=self.name(nbytes))

    def render_mbarrier_try_wait(self, op, indent):
        bar, parity = op.operands
        fn = self.helper("opus_mbar_test_wait", self.tma_code("mbarrier_test_wait_fn"))
        self.assign_lanes(op.results[0], [f"{fn}({self.smem_addr(bar)}, {self.name(parity)})"],
                          indent)

    def render_mbarrier_wait(self, op, indent):
        bar, parity = op.operands
        self.helper("opus_mbar_try_wait", self.tma_code("mbarrier_try_wait_fn"))
        fn = self.helper("opus_mbar_wait", self.tma_code("mbarrier_wait_fn"))
        self.line(indent, f"{fn}({self.smem_addr(bar)}, {self.name(parity)});")

    def render_fence(self, op, indent):
        self._tma_line(indent, f"fence_{op.attrs['kind']}")

    def _coord_operands(self, coords, first):
        """(the asm's coordinate list, its "r" operands): innermost first, as PTX takes them,
        numbered from asm operand ``first``."""
        names = [self.name(c) for c in reversed(coords)]
        return (", ".join(f"%{first + i}" for i in range(len(names))),
                ", ".join(f'"r"({n})' for n in names))

    def render_tma_load(self, op, indent):
        tmap, dst, bar = op.operands[:3]
        slots, coords = self._coord_operands(op.operands[3:], 3)
        self._tma_line(indent, "tma_load", rank=len(op.operands) - 3, dst=self.smem_addr(dst),
                       tmap=self.name(tmap), bar=self.smem_addr(bar), slots=slots, coords=coords)

    def render_tma_store(self, op, indent):
        tmap, src = op.operands[:2]
        slots, coords = self._coord_operands(op.operands[2:], 2)
        self._tma_line(indent, "tma_store", rank=len(op.operands) - 2, src=self.smem_addr(src),
                       tmap=self.name(tmap), slots=slots, coords=coords)

    def render_bulk_commit_group(self, op, indent):
        self._tma_line(indent, "bulk_commit_group")

    def render_bulk_wait_group(self, op, indent):
        self._tma_line(indent, "bulk_wait_group_read" if op.attrs["read"] else "bulk_wait_group",
                       n=op.attrs["n"])
