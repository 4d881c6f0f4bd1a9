"""max and min under both spellings, and amax/amin.

Note [max and min, PyTorch's and the array API's]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`max` is PyTorch's name and the array API's, with different results, so the spelling of the
call picks the meaning (the name rule of the README's "PyTorch habits"):

* PyTorch's: `x.max()` is the largest value (ties share the gradient, MaxBackward1);
  `x.max(dim, keepdim=False)` (the dim positional or `dim=`) is the named tuple
  `(values, indices)` whose gradient goes to the element at the index alone
  (MaxBackward0); `x.max(other)` is the elementwise `maximum`.
* the array API's: `js.max(x, axis=..., keepdims=...)` is the values alone, over one axis,
  several or all, ties sharing the gradient (PyTorch's `amax`, also spelled `js.amax`).

A dim that is not one int (a tuple, None) has no `(values, indices)`: it is an error that
points to `amax` rather than a silent change of the result's type.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import reduction_rules as Q
from . import return_types
from .dispatch import apply
from .functional import maximum, minimum
from .opdef import OpDef
from .operands import torch_spelling
from .shapes import normalize_axes, normalize_axis

_UNSET: Any = object()


class _Extremum:
    """What `max` or `min` needs: its ops, its elementwise twin and its named tuple."""

    def __init__(self, name: str, every: OpDef, values: OpDef, along: OpDef, index: OpDef,
                 elementwise: Any, result: type) -> None:
        self.name, self.every, self.values, self.along = name, every, values, along
        self.index, self.elementwise, self.result = index, elementwise, result


_MAX = _Extremum("max", Q.MAX, Q.AMAX, Q.MAX_DIM, Q.ARGMAX, maximum, return_types.max)
_MIN = _Extremum("min", Q.MIN, Q.AMIN, Q.MIN_DIM, Q.ARGMIN, minimum, return_types.min)


def max(  # noqa: A001
    x: Tensor, dim: Any = _UNSET, keepdim: Any = _UNSET, *, axis: Any = _UNSET,
    keepdims: Any = _UNSET,
) -> Any:
    """PyTorch's `max` (`max()`, `max(dim, keepdim)` -> `(values, indices)`, `max(other)`),
    or with `axis=` the array API's (the values): Note [max and min, PyTorch's and the
    array API's]."""
    return _extremum(_MAX, x, dim, _keep(_MAX, keepdim, keepdims), axis)


def min(  # noqa: A001
    x: Tensor, dim: Any = _UNSET, keepdim: Any = _UNSET, *, axis: Any = _UNSET,
    keepdims: Any = _UNSET,
) -> Any:
    """PyTorch's `min` or, with `axis=`, the array API's: as `max`."""
    return _extremum(_MIN, x, dim, _keep(_MIN, keepdim, keepdims), axis)


@torch_spelling
def amax(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The largest values over `axis` (one, several, or all): ties share the gradient."""
    return apply(Q.AMAX, x, axis=normalize_axes("amax", axis, x.shape), keepdims=keepdims)


@torch_spelling
def amin(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The smallest values over `axis` (one, several, or all): ties share the gradient."""
    return apply(Q.AMIN, x, axis=normalize_axes("amin", axis, x.shape), keepdims=keepdims)


def _keep(which: _Extremum, keepdim: Any, keepdims: Any) -> bool:
    if keepdim is not _UNSET and keepdims is not _UNSET:
        raise TypeError(f"{which.name}() got both keepdim= and its alias keepdims=")
    chosen = keepdims if keepdim is _UNSET else keepdim
    return chosen is not _UNSET and bool(chosen)


def _extremum(which: _Extremum, x: Tensor, dim: Any, keep: bool, axis: Any) -> Any:
    if isinstance(dim, Tensor):
        return which.elementwise(x, dim)
    if axis is not _UNSET:
        if dim is not _UNSET:
            raise TypeError(f"{which.name}() got both dim= and axis=; give one")
        return apply(which.values, x, axis=normalize_axes(which.name, axis, x.shape),
                     keepdims=keep)
    if dim is _UNSET:
        return apply(which.every, x, axis=None, keepdims=keep)
    return _along(which, x, dim, keep)


def _along(which: _Extremum, x: Tensor, dim: Any, keep: bool) -> Any:
    """`(values, indices)` along one dim, the first index at ties (as PyTorch)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(
            f"{which.name}(dim) takes one int dim and returns (values, indices), got dim="
            f"{dim!r} for a tensor of shape {x.shape}; for the values over several dims write "
            f"x.a{which.name}(dim) or js.{which.name}(x, axis=...)"
        )
    axis = normalize_axis(which.name, dim, x.shape)
    if not x.ndim:
        axis = None  # a 0-d tensor's one element is its max along dim 0 (or -1)
    indices = apply(which.index, x, axis=axis, keepdims=keep)
    return which.result(apply(which.along, x, indices, axis=axis, keepdims=keep), indices)
