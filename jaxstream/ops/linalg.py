"""The public products: matmul and einsum (`linear` is in `functional`, with the layer
functions). Under `amp.autocast` their floating operands take the autocast dtype. Neither
promotes: operands of two dtypes raise PyTorch's error (Note [Matrix products do not
promote] in products.py).
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import linalg_rules as L
from .dispatch import apply
from .operands import autocast, operand
from .products import check_einsum, check_matmul
from .shapes import parse_einsum


def matmul(a: Any, b: Any) -> Tensor:
    """The matrix product with NumPy's and PyTorch's broadcasting of ranks."""
    like = a if isinstance(a, Tensor) else b
    a, b = autocast(operand(a, like), operand(b, like))
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"matmul: expected tensors or arrays, got {type(a).__name__} and "
                        f"{type(b).__name__}")
    check_matmul(a, b)
    return apply(L.MATMUL, a, b)


def einsum(subscripts: str, *operands: Any) -> Tensor:
    """Einstein summation (explicit or implicit output, no ellipsis), differentiable to any
    order: each operand's gradient is an einsum of the output's with the others. Arrays
    among the operands join the first tensor's backend and device."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    like = next((t for t in operands if isinstance(t, Tensor)), None)
    operands = tuple(operand(t, like) for t in operands)
    inputs, output = parse_einsum(subscripts, [tuple(t.shape) for t in operands])
    check_einsum(operands)
    return apply(L.EINSUM, *operands, subscripts=",".join(inputs) + "->" + output)


