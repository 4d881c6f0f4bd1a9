"""PyTorch's top-level functions that jaxstream had only as methods, or composes from its
ops: `clone`, `detach`, `permute`, `numel`, `swapaxes`, `swapdims`, `broadcast_to`,
`broadcast_tensors`, `broadcast_shapes`, `atleast_1d/2d/3d`, `hstack`, `vstack`, `dstack`,
`column_stack`, `row_stack`, `hsplit`, `vsplit`, `dsplit`, `split_with_sizes`, `meshgrid`,
`rsub`, `positive`, `msort`, `diagflat`, `dist` and `renorm`; and the Tensor methods among
them (`x.where(condition, y)`, `swapdims`, `positive`, `msort`, `diagflat`, `dist`,
`renorm`).

Each has torch's top-level signature (its schema's parameter names, `input` for `self`),
values, dtypes and errors. The composed ones record the nodes of the ops they compose
(`renorm` a `MulBackward0`, `dist` a `LinalgVectorNormBackward0`, `rsub` a `SubBackward0`),
not torch's single node; the gradients are torch's. `split_with_sizes` raises split's
ValueError where torch raises a RuntimeError of the same words.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from . import arithmetic_names as A
from . import functional as F
from . import reductions as Q
from . import shape_ops as S
from . import tensor_utility_shapes as TS
from .dtype_names import scalar_type
from .indexing import sort
from .return_types import Size
from .shapes import broadcast_shapes as broadcast_pair
from .shapes import normalize_axis
from .structure import diag
from .tensor_utilities import check_memory_format


def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:  # noqa: A002  (torch's names)
    """A copy of `input`; tensors here have one layout, so `memory_format` may only name it."""
    check_memory_format("clone", memory_format)
    return F.clone(input)


def detach(input: Tensor) -> Tensor:  # noqa: A002
    return input.detach()


def permute(input: Tensor, dims: Sequence[int]) -> Tensor:  # noqa: A002
    return S.permute_dims(input, dims)


def numel(input: Tensor) -> int:  # noqa: A002
    return input.numel()


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:  # noqa: A002
    return S.swapaxes(input, axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    return S.swapaxes(input, dim0, dim1)


def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:  # noqa: A002
    return S.broadcast_to(input, size)


def broadcast_shapes(*shapes: int | Sequence[int]) -> Size:
    """The shape that tensors of `shapes` (each an int or a sequence) broadcast to."""
    result: tuple = ()
    for shape in shapes:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        result = broadcast_pair("broadcast_shapes", result, shape)
    return Size(result)


def broadcast_tensors(*tensors: Tensor) -> tuple:
    """Each tensor broadcast to the shape of all of them (views), in a tuple."""
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(S.broadcast_to(t, shape) for t in tensors)


def _padded_shape(shape: tuple, ndim: int) -> tuple:
    """numpy's `atleast_3d` puts a vector in the middle and a matrix's new dim last."""
    if ndim == 3 and len(shape) in (1, 2):
        return (1,) * (2 - len(shape)) + shape + (1,)
    return (1,) * (ndim - len(shape)) + shape


def _at_least(ndim: int, tensors: tuple) -> Tensor | tuple:
    """One tensor, or a tuple of them for several (or one list), of at least `ndim` dims: a
    tensor that has them as it is, the others reshaped (views)."""
    many = len(tensors) != 1 or isinstance(tensors[0], list | tuple)
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    results = tuple(t if t.ndim >= ndim else S.reshape(t, _padded_shape(t.shape, ndim))
                    for t in tensors)
    return results if many else results[0]


def atleast_1d(*tensors: Any) -> Tensor | tuple:
    return _at_least(1, tensors)


def atleast_2d(*tensors: Any) -> Tensor | tuple:
    return _at_least(2, tensors)


def atleast_3d(*tensors: Any) -> Tensor | tuple:
    return _at_least(3, tensors)


def _listed(op: str, tensors: Sequence[Tensor]) -> list:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList; give it at least one tensor")
    return tensors


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors (at least 1-d) joined along dim 1, or dim 0 where they are vectors."""
    tensors = _at_least(1, (_listed("hstack", tensors),))
    return S.concat(tensors, 0 if tensors[0].ndim == 1 else 1)


def _stacked(op: str, tensors: Sequence[Tensor], ndim: int) -> Tensor:
    """The tensors, made at least `ndim`-d, joined along dim 0 (vstack: ndim 2) or dim 2
    (dstack: ndim 3)."""
    return S.concat(_at_least(ndim, (_listed(op, tensors),)), 0 if ndim == 2 else 2)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors (vectors as rows) joined along dim 0."""
    return _stacked("vstack", tensors, 2)


def row_stack(tensors: Sequence[Tensor]) -> Tensor:
    """`vstack`'s other name."""
    return _stacked("row_stack", tensors, 2)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors (made at least 3-d as `atleast_3d` does) joined along dim 2."""
    return _stacked("dstack", tensors, 3)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors joined along dim 1, each scalar or vector first made a column."""
    columns = [S.reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t
               for t in _listed("column_stack", tensors)]
    return S.concat(columns, 1)


def _split_along(op: str, input: Tensor, indices_or_sections: Any, dim: int,  # noqa: A002
                 least: int) -> tuple:
    """`tensor_split` along `dim`, where a number of sections must divide the length."""
    if input.ndim < least:
        raise RuntimeError(f"{op} requires a tensor with at least {least} dimension, but got a "
                           f"tensor with {input.ndim} dimensions! (shape {input.shape})")
    if isinstance(indices_or_sections, int) and (
            not indices_or_sections or input.shape[dim] % indices_or_sections):
        raise RuntimeError(
            f"{op} attempted to split along dimension {dim}, but the size of the dimension "
            f"{input.shape[dim]} is not divisible by the split_size {indices_or_sections}! "
            f"(shape {input.shape}); give split indices, or js.tensor_split for unequal pieces"
        )
    return TS.tensor_split(input, indices_or_sections, dim)


def hsplit(input: Tensor, indices_or_sections: Any) -> tuple:  # noqa: A002
    """Split along dim 1 (dim 0 of a vector)."""
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> tuple:  # noqa: A002
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple:  # noqa: A002
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple:  # noqa: A002
    return S.split(input, list(split_sizes), dim)


def _grid_inputs(tensors: tuple, indexing: str | None) -> tuple[list, str]:
    """meshgrid's tensors (varargs or one list) and indexing, checked as torch checks them."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=3)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f"{indexing}")
    tensors = _listed("meshgrid", tensors)
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(f"meshgrid expects all tensors to have the same dtype (got "
                           f"{[str(t.dtype) for t in tensors]})")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got "
                               f"a tensor of shape {t.shape}")
    return tensors, indexing


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple:
    """Grids of the coordinates the 0-d or 1-d `tensors` give (views): output i varies with
    tensor i along dim i ("ij"), or with the first two dims swapped ("xy")."""
    tensors, indexing = _grid_inputs(tensors, indexing)
    along = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        along[:2] = [1, 0]
    shape = [0] * len(tensors)
    for t, dim in zip(tensors, along, strict=True):
        shape[dim] = t.numel()
    return tuple(S.broadcast_to(S.reshape(t, [-1 if d == dim else 1 for d in range(len(shape))]),
                                shape) for t, dim in zip(tensors, along, strict=True))


def rsub(input: Any, other: Any, alpha: Any = 1) -> Tensor:  # noqa: A002
    """`other - alpha * input`."""
    return A.sub(other, input, alpha=alpha)


def positive(input: Tensor) -> Tensor:  # noqa: A002
    """`input` itself (`+input`); refused for a bool tensor, as PyTorch does."""
    if input.dtype == np.bool_:
        raise RuntimeError(f"The `+` operator, on a bool tensor is not supported. (shape "
                           f"{input.shape})")
    return input


def msort(input: Tensor) -> Tensor:  # noqa: A002
    """`input` sorted along dim 0."""
    return sort(input, 0).values


def diagflat(input: Tensor, offset: int = 0) -> Tensor:  # noqa: A002
    """The square matrix with the flattened `input` on its `offset`-th diagonal."""
    return diag(S.reshape(input, (-1,)), offset)


def dist(input: Tensor, other: Any, p: float = 2) -> Tensor:  # noqa: A002
    """The `p`-norm of `input - other` (broadcast, promoted); of floating values only."""
    difference = input - other
    if not is_floating(difference.dtype):
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. "
                           f"Got {scalar_type(difference.dtype)} instead. (dist of shapes "
                           f"{input.shape} and {difference.shape}); cast first, e.g. x.float()")
    return Q.vector_norm(difference, p)


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:  # noqa: A002
    """Each slice of `input` along `dim` whose `p`-norm exceeds `maxnorm` scaled to the norm
    `maxnorm` (PyTorch's `maxnorm / (norm + 1e-7)`); the others as they are."""
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                           f"dimensions (shape {input.shape})")
    if not p > 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported (p = {p})")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if not is_floating(input.dtype):
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {scalar_type(input.dtype)} (renorm of a tensor of shape "
                           f"{input.shape}); cast it first, e.g. x.float()")
    dim = normalize_axis("renorm", dim, input.shape)
    norm = Q.vector_norm(input, p, tuple(d for d in range(input.ndim) if d != dim), True)
    return input * F.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)


def _where(input: Tensor, condition: Any, other: Any) -> Tensor:  # noqa: A002
    """PyTorch's method `x.where(condition, y)`: `js.where(condition, x, y)`."""
    return F.where(condition, input, other)


METHODS = {
    "where": _where,
    "swapdims": swapdims,
    "positive": positive,
    "msort": msort,
    "diagflat": diagflat,
    "dist": dist,
    "renorm": renorm,
}
