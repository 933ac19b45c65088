"""opus IR: one typed, structured, target-independent program form (see ops.py for semantics)."""
from .core import Block, Function, Loc, Op, Param, Value
from .types import (PointerType, VectorType, TensorMapType, TENSOR_MAP, is_pointer, is_scalar,
                    is_vector, lanes_of, scalar_of, type_str, with_lanes)
from .ops import OPS, BINARY_OPS, CMP_PREDS, UNARY_OPS, MATH_FNS, SPECIALS, op_handlers, access_operands, atomic_operands
from .builder import Builder, ScopeError
