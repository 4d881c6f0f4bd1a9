"""The public products: matmul and einsum (`linear` is in `functional`, with the layer
functions). Under `amp.autocast` their floating operands take the autocast dtype.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import linalg_rules as L
from .dispatch import apply
from .operands import autocast, operand
from .shapes import parse_einsum


def matmul(a: Any, b: Any) -> Tensor:
    like = a if isinstance(a, Tensor) else b
    a, b = autocast(operand(a, like), operand(b, like))
    if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands must be tensors with at least one dimension")
    return apply(L.MATMUL, a, b)


def einsum(subscripts: str, *operands: Tensor) -> Tensor:
    """Einstein summation (explicit or implicit output, no ellipsis), differentiable to any
    order: each operand's gradient is an einsum of the output's with the others."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    inputs, output = parse_einsum(subscripts, [tuple(t.shape) for t in operands])
    return apply(L.EINSUM, *operands, subscripts=",".join(inputs) + "->" + output)


