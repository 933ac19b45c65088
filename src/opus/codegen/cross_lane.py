"""Rendering of the cross-lane ops (shuffle, dpp, vote, permute, warp_redux; ir/ops.py).

The ops move 32-bit scalars (i32, u32, f32); this mixin turns them into unsigned words and
back, and the dialect's ``code_for_cross_lane`` table spells the instruction on the words:
    'shuffle'    fn(emitter, word, src, mask or None, attrs) -> C unsigned
    'dpp'        fn(emitter, old word, word, attrs) -> C unsigned
    'vote'       fn(emitter, pred, mask or None, mode) -> C lane mask or bool
    'permute'    fn(emitter, word, addr) -> C unsigned
    'warp_redux' fn(emitter, x, mask or None, op, dtype) -> C value of x's type
A dialect without an entry has no such instruction (tracing refuses it there: reaching the
renderer is an internal error).
"""
from __future__ import annotations

from ..ir import scalar_of

__all__ = ["CrossLaneRendering"]


class CrossLaneRendering:
    """The render_ methods of the cross-lane ops (mixed into codegen.cemit.CEmitter)."""

    code_for_cross_lane: dict = {}

    def _cross_lane(self, kind):
        spell = self.code_for_cross_lane.get(kind)
        if spell is None:
            from .cemit import CodegenError
            raise CodegenError(f"internal: {kind} reached the {self.backend} renderer for "
                               f"{self.target.name} (tracing refuses it there)")
        return spell

    def word_of(self, v):
        """The bits of 32-bit scalar ``v`` as a C unsigned."""
        e = scalar_of(v.type).name
        n = self.name(v)
        return self.f32_to_bits(n) if e == "f32" else f"(unsigned)({n})"

    def from_word(self, word, t):
        e = scalar_of(t).name
        return self.bits_to_f32(word) if e == "f32" else f"({self.scalar_ctype(scalar_of(t))})({word})"

    def _mask_operand(self, op):
        return self.name(op.operands[-1]) if op.attrs.get("mask") else None

    def render_shuffle(self, op, indent):
        x, src = op.operands[:2]
        word = self._cross_lane("shuffle")(self, self.word_of(x), self.name(src),
                                           self._mask_operand(op), op.attrs)
        self.assign_lanes(op.results[0], [self.from_word(word, x.type)], indent)

    def render_dpp(self, op, indent):
        old, x = op.operands
        word = self._cross_lane("dpp")(self, self.word_of(old), self.word_of(x), op.attrs)
        self.assign_lanes(op.results[0], [self.from_word(word, x.type)], indent)

    def render_vote(self, op, indent):
        expr = self._cross_lane("vote")(self, self.name(op.operands[0]), self._mask_operand(op),
                                        op.attrs["mode"])
        self.assign_lanes(op.results[0], [expr], indent)

    def render_permute(self, op, indent):
        x, addr = op.operands
        word = self._cross_lane("permute")(self, self.word_of(x), self.name(addr))
        self.assign_lanes(op.results[0], [self.from_word(word, x.type)], indent)

    def render_warp_redux(self, op, indent):
        x = op.operands[0]
        expr = self._cross_lane("warp_redux")(self, self.name(x), self._mask_operand(op),
                                              op.attrs["op"], scalar_of(x.type))
        self.assign_lanes(op.results[0], [expr], indent)
