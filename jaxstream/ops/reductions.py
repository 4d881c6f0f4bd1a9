"""The public reductions: sum, mean, prod, var/std (and std_mean/var_mean), vector_norm, the
running cumsum, cumprod and logcumsumexp, argmax, and `sum_to`, the reduction of
broadcasting gradients (max and min are in extrema.py).

Each accepts PyTorch's `dim=`/`keepdim=` as well as `axis=`/`keepdims=`, and has PyTorch's
defaults under either spelling: `var`/`std` are unbiased unless `correction=` (the array
API's spelling) or `unbiased=` says otherwise.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ..tensor import Tensor, is_floating
from . import reduction_rules as Q
from .dispatch import apply
from .dtype_names import scalar_type
from .opdef import OpDef
from .operands import astype, floating, torch_spelling
from .shapes import normalize_axes, normalize_axis, reduced_count


def _reduce(op: OpDef, x: Tensor, axis: Any, keepdims: bool, **params: Any) -> Tensor:
    return apply(op, x, axis=normalize_axes(op.name, axis, x.shape), keepdims=keepdims, **params)


def _as(x: Tensor, dtype: Any) -> Tensor:
    """`x` cast to `dtype` before a reduction, as PyTorch's `dtype=` does (the gradient
    comes back in `x`'s dtype)."""
    return x if dtype is None else astype(x, dtype)


@torch_spelling
def sum(  # noqa: A001
    x: Tensor, axis: Any = None, keepdims: bool = False, *, dtype: Any = None
) -> Tensor:
    return _reduce(Q.SUM, _as(x, dtype), axis, keepdims)


@torch_spelling
def mean(x: Tensor, axis: Any = None, keepdims: bool = False, *, dtype: Any = None) -> Tensor:
    return _reduce(Q.MEAN, floating(_as(x, dtype)), axis, keepdims)


@torch_spelling
def prod(x: Tensor, axis: Any = None, keepdims: bool = False, *, dtype: Any = None) -> Tensor:
    """The product; its gradient is right where elements are 0 (PyTorch's rule)."""
    return _reduce(Q.PROD, _as(x, dtype), axis, keepdims)


@torch_spelling
def var(
    x: Tensor, axis: Any = None, unbiased: bool | None = None, keepdims: bool = False, *,
    correction: float | None = None,
) -> Tensor:
    """The variance over `axis`, dividing by the element count less `correction`: PyTorch's
    default, 1 (unbiased), under every spelling unless `correction=` or `unbiased=` says
    otherwise (the array API's default is `correction=0`, written out). Positional
    arguments are PyTorch's: `var(dim, unbiased, keepdim)`, or `var(unbiased)`."""
    return _spread(Q.VAR, x, keepdims, *_spread_args("var", axis, unbiased, correction))


@torch_spelling
def std(
    x: Tensor, axis: Any = None, unbiased: bool | None = None, keepdims: bool = False, *,
    correction: float | None = None,
) -> Tensor:
    """The standard deviation, `sqrt(var(...))`, unbiased by default as `var`."""
    return _spread(Q.STD, x, keepdims, *_spread_args("std", axis, unbiased, correction))


def _spread_args(name: str, axis: Any, unbiased: Any, correction: Any) -> tuple[Any, float]:
    """The axes and the correction PyTorch's arguments ask for: 1 unless told, and a bool
    in the dim's place is `unbiased` (PyTorch's `var(unbiased)` overload)."""
    if isinstance(axis, bool) and unbiased is None:
        axis, unbiased = None, axis
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}(): give correction= or unbiased=, not both")
    if correction is not None:
        return axis, correction
    return axis, 1 if unbiased is None else int(bool(unbiased))


def _spread(op: OpDef, x: Tensor, keepdims: bool, axis: Any, correction: float) -> Tensor:
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
    """`sum(|x| ** ord) ** (1 / ord)` over `axis` (all axes by default), for any real `ord` as
    PyTorch's: 0 counts the nonzero elements, inf and -inf are the largest and the least |x|.
    A negative order or inf has no identity, so an empty reduced dim is an error."""
    if not isinstance(ord, numbers.Real):
        raise TypeError(
            f"vector_norm: ord must be a real number (0, a fraction, negative, inf or -inf), "
            f"got {ord!r} for a tensor of shape {x.shape}; the Frobenius norm of all the "
            f"elements is the default, ord=2"
        )
    axis = normalize_axes(Q.VECTOR_NORM.name, axis, x.shape)
    if (ord < 0 or ord == math.inf) and 0 in _reduced_sizes(x.shape, axis):
        raise RuntimeError(
            f"vector_norm: cannot compute the {ord} norm of a tensor of shape {x.shape} over "
            f"axis {axis}, an empty dim: the operation has no identity. Reduce over non-empty "
            f"dims, or take an ord in [0, inf)"
        )
    return apply(Q.VECTOR_NORM, floating(x), axis=axis, keepdims=keepdims, ord=ord)


def _reduced_sizes(shape: tuple, axis: Any) -> tuple:
    """The sizes of the dims a reduction over `axis` (None: all axes, already counted from
    0) folds."""
    if axis is None:
        return shape
    return tuple(shape[a] for a in (axis if isinstance(axis, tuple) else (axis,)))


def _scan_axis(op: OpDef, x: Tensor, axis: int | None) -> int:
    """The axis of a running op, which may be left out for a tensor of at most one dim."""
    if axis is None and x.ndim > 1:
        raise ValueError(f"{op.name}: give an axis (dim=) for a tensor of shape {x.shape}")
    return normalize_axis(op.name, axis or 0, x.shape)


@torch_spelling
def cumsum(x: Tensor, axis: int | None = None, *, dtype: Any = None) -> Tensor:
    """Running sums along `axis` (which may be left out for a 1-d tensor)."""
    return apply(Q.CUMSUM, _as(x, dtype), axis=_scan_axis(Q.CUMSUM, x, axis))


@torch_spelling
def std_mean(
    x: Tensor, axis: Any = None, unbiased: bool | None = None, keepdims: bool = False, *,
    correction: float | None = None,
) -> tuple[Tensor, Tensor]:
    """`(std, mean)` over `axis`: PyTorch's `std_mean`, with `std`'s arguments and defaults."""
    axis, correction = _spread_args("std_mean", axis, unbiased, correction)
    return _spread(Q.STD, x, keepdims, axis, correction), mean(x, axis, keepdims)


@torch_spelling
def var_mean(
    x: Tensor, axis: Any = None, unbiased: bool | None = None, keepdims: bool = False, *,
    correction: float | None = None,
) -> tuple[Tensor, Tensor]:
    """`(var, mean)` over `axis`: PyTorch's `var_mean`, with `var`'s arguments and defaults."""
    axis, correction = _spread_args("var_mean", axis, unbiased, correction)
    return _spread(Q.VAR, x, keepdims, axis, correction), mean(x, axis, keepdims)


@torch_spelling
def cumprod(x: Tensor, axis: int | None = None, *, dtype: Any = None) -> Tensor:
    """Running products along `axis`; the gradient is right where elements are 0 (Note
    [cumprod's gradient at zeros] in reduction_rules.py). Integers and bools give the
    default integer dtype, as `sum` does."""
    return apply(Q.CUMPROD, _as(x, dtype), axis=_scan_axis(Q.CUMPROD, x, axis))


@torch_spelling
def logcumsumexp(x: Tensor, axis: int | None = None) -> Tensor:
    """`log(cumsum(exp(x)))` along `axis`, stable at any magnitude; floating tensors only,
    as in PyTorch."""
    if not is_floating(x.dtype):
        raise NotImplementedError(
            f"\"logcumsumexp_out_cpu\" not implemented for '{scalar_type(x.dtype)}' (a tensor "
            f"of shape {x.shape}); cast it first, e.g. t.float()"
        )
    return apply(Q.LOGCUMSUMEXP, x, axis=_scan_axis(Q.LOGCUMSUMEXP, x, axis))


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


