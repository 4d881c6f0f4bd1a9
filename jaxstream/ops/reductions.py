"""The public reductions: sum, mean, max/min, prod, var/std, vector_norm, cumsum, argmax,
and `sum_to`, the reduction of broadcasting gradients.

Each accepts PyTorch's `dim=`/`keepdim=` as well as `axis=`/`keepdims=`.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..tensor import Tensor
from . import reduction_rules as Q
from .dispatch import apply
from .opdef import OpDef
from .operands import floating, torch_spelling
from .shapes import normalize_axes, normalize_axis, reduced_count


def _reduce(op: OpDef, x: Tensor, axis: Any, keepdims: bool, **params: Any) -> Tensor:
    return apply(op, x, axis=normalize_axes(op.name, axis, x.shape), keepdims=keepdims, **params)


@torch_spelling
def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    return _reduce(Q.SUM, x, axis, keepdims)


@torch_spelling
def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _reduce(Q.MEAN, floating(x), axis, keepdims)


@torch_spelling
def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum values (like torch.amax): ties share the gradient evenly."""
    return _reduce(Q.AMAX, x, axis, keepdims)


@torch_spelling
def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum values (like torch.amin): ties share the gradient evenly."""
    return _reduce(Q.AMIN, x, axis, keepdims)


@torch_spelling
def prod(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The product; its gradient is right where elements are 0 (PyTorch's rule)."""
    return _reduce(Q.PROD, x, axis, keepdims)


@torch_spelling
def var(x: Tensor, axis: Any = None, correction: float = 0, keepdims: bool = False) -> Tensor:
    """The variance, dividing by the element count less `correction` (1: unbiased)."""
    return _spread(Q.VAR, x, axis, keepdims, correction)


@torch_spelling
def std(x: Tensor, axis: Any = None, correction: float = 0, keepdims: bool = False) -> Tensor:
    """The standard deviation, `sqrt(var(x, axis, correction))`."""
    return _spread(Q.STD, x, axis, keepdims, correction)


def _spread(op: OpDef, x: Tensor, axis: Any, keepdims: bool, correction: float) -> Tensor:
    """var or std, with PyTorch's warning where `correction` leaves no degrees of freedom
    (the result is inf or NaN there)."""
    axis = normalize_axes(op.name, axis, x.shape)
    if reduced_count(x.shape, axis) - correction <= 0:
        warnings.warn(
            f"{op.name}(): degrees of freedom is <= 0. Correction should be strictly less than "
            f"the reduction factor (input numel divided by output numel): correction="
            f"{correction} for a tensor of shape {x.shape} reduced over axis {axis}",
            UserWarning, stacklevel=4,
        )
    return apply(op, floating(x), axis=axis, keepdims=keepdims, correction=correction)


@torch_spelling
def vector_norm(x: Tensor, ord: float = 2, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """The `ord`-norm (ord >= 1 or inf) of the elements over `axis` (all axes by default)."""
    if not ord >= 1:
        raise ValueError(f"vector_norm: ord must be >= 1 or inf, got {ord!r}")
    return _reduce(Q.VECTOR_NORM, floating(x), axis, keepdims, ord=ord)


@torch_spelling
def cumsum(x: Tensor, axis: int | None = None) -> Tensor:
    """Running sums along `axis` (which may be left out for a 1-d tensor)."""
    if axis is None and x.ndim > 1:
        raise ValueError(f"cumsum: give an axis for a tensor of shape {x.shape}")
    return apply(Q.CUMSUM, x, axis=normalize_axis("cumsum", axis or 0, x.shape))


def _arg_extremum(op: OpDef, x: Tensor, axis: int | None, keepdims: bool) -> Tensor:
    if axis is not None:
        axis = normalize_axis(op.name, axis, x.shape)
    return apply(op, x, axis=axis, keepdims=keepdims)


@torch_spelling
def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the (first) maximum over `axis`, or of the flattened tensor (not differentiable)."""
    return _arg_extremum(Q.ARGMAX, x, axis, keepdims)


@torch_spelling
def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the (first) minimum over `axis`, or of the flattened tensor (not differentiable)."""
    return _arg_extremum(Q.ARGMIN, x, axis, keepdims)


def sum_to(x: Tensor, shape: tuple) -> Tensor:
    """Sum a broadcast `x` back to `shape` (the reduction of broadcasting gradients)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return apply(Q.SUM_TO, x, shape=tuple(shape))


def isnan_any(x: Tensor) -> Tensor:
    """Whether any element is NaN (a 0-d boolean tensor; what anomaly mode checks)."""
    return apply(Q.ISNAN_ANY, x)


