"""The public products: matmul, bmm, addmm, baddbmm and einsum (`linear` is in
`functional`, with the layer functions). Under `amp.autocast` their floating operands take
the autocast dtype. None promotes: operands of two dtypes raise PyTorch's error (Note
[Matrix products do not promote] in products.py).
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import linalg_rules as L
from .dispatch import apply
from .operands import as_tensor, autocast, operand
from .products import check_addmm, check_bmm, check_einsum, check_matmul
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


def _tensors(*xs: Any) -> tuple:
    """The operands of a product as tensors beside the first tensor among them, autocast."""
    like = next((x for x in xs if isinstance(x, Tensor)), None)
    return autocast(*(as_tensor(x, like) for x in xs))


def bmm(a: Any, b: Any) -> Tensor:
    """The product of each matrix of `a` (b, n, m) with the one of `b` (b, m, p) at its
    place in the batch: no broadcasting, as PyTorch's."""
    a, b = _tensors(a, b)
    check_bmm("bmm", a, b)
    return apply(L.BMM, a, b)


def addmm(x: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """`beta * x + alpha * (mat1 @ mat2)` for matrices, `x` broadcast to the product's shape
    (and left out, NaN and all, where beta is 0)."""
    x, mat1, mat2 = _tensors(x, mat1, mat2)
    check_addmm(x, mat1, mat2)
    return apply(L.ADDMM, x, mat1, mat2, beta=beta, alpha=alpha)


def baddbmm(x: Any, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """`beta * x + alpha * bmm(batch1, batch2)`, `x` broadcast to the product's shape (and
    left out, NaN and all, where beta is 0)."""
    x, batch1, batch2 = _tensors(x, batch1, batch2)
    check_bmm("baddbmm", batch1, batch2, x)
    return apply(L.BADDBMM, x, batch1, batch2, beta=beta, alpha=alpha)


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


