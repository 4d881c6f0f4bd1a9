"""The public shape ops: reshape, transpose, permute_dims, broadcast_to, expand, repeat,
concat, stack, split, chunk, unbind, squeeze, expand_dims, flatten, flip. Most results are
views of their input (Note [Views and in-place ops] in views.py).

PyTorch's names have PyTorch's meaning (`transpose(x, dim0, dim1)` swaps two dims, `split`
takes a piece size); the array API's spellings keep the array API's (`permute_dims`,
`expand_dims`, `squeeze(x, axis=)`): the name rule of the README's "PyTorch habits".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import shape_rules as S
from .dispatch import apply
from .functional import getitem
from .operands import torch_spelling
from .shapes import (
    chunk_sizes,
    expanded_shape,
    flat_sizes,
    inferred_shape,
    normalize_axes,
    normalize_axis,
    split_sizes,
)


def reshape(x: Tensor, shape: Any) -> Tensor:
    """`x` with the shape `shape` (one -1 is worked out), a view."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return apply(S.RESHAPE, x, shape=inferred_shape(shape, x.numel()))


def transpose(x: Tensor, dim0: int, dim1: int | None = None) -> Tensor:
    """PyTorch's transpose: `x` with dims `dim0` and `dim1` swapped (a view)."""
    if not all(isinstance(d, int) for d in (dim0, dim1)):
        raise TypeError(
            f"transpose(dim0, dim1) swaps two dims (PyTorch's meaning), got {dim0!r}, {dim1!r} "
            f"for a tensor of shape {x.shape}; to reorder every dim write x.permute(*dims) "
            "or js.permute_dims(x, axes)"
        )
    return _swap("transpose", x, dim0, dim1)


def swapaxes(x: Tensor, axis1: int, axis2: int) -> Tensor:
    """`x` with `axis1` and `axis2` swapped (a view); PyTorch's and NumPy's swapaxes."""
    return _swap("swapaxes", x, axis1, axis2)


def _swap(op: str, x: Tensor, axis1: int, axis2: int) -> Tensor:
    axis1 = normalize_axis(op, axis1, x.shape)
    return apply(S.SWAPAXES, x, axis1=axis1, axis2=normalize_axis(op, axis2, x.shape))


def permute_dims(x: Tensor, axes: Sequence[int]) -> Tensor:
    """The axes of `x` in the order `axes` (a view)."""
    axes = tuple(axes)
    if len(axes) != x.ndim:
        raise RuntimeError(
            "permute(): number of dimensions in the tensor input does not match the length of the "
            f"desired ordering of dimensions i.e. input.dim() = {x.ndim} is not equal to "
            f"len(dims) = {len(axes)} (a tensor of shape {x.shape}, dims {axes})"
        )
    axes = tuple(normalize_axis("permute", a, x.shape) for a in axes)
    if len(set(axes)) != len(axes):
        raise RuntimeError(
            f"permute(): duplicate dims are not allowed. (dims {axes} are not a permutation of "
            f"the dims of a tensor of shape {x.shape})"
        )
    return apply(S.PERMUTE, x, axes=axes)


def reversed_dims(x: Tensor) -> Tensor:
    """`x.T`: every dim in reverse order (a view)."""
    return apply(S.PERMUTE, x, axes=tuple(reversed(range(x.ndim))))


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    """`x` broadcast to `shape` (a view; the gradient is summed back)."""
    return apply(S.EXPAND, x, shape=tuple(shape))


def expand(x: Tensor, *sizes: Any) -> Tensor:
    """PyTorch's `expand`: `x` broadcast to `sizes`, where -1 keeps a dim (a view; the
    gradient is summed back)."""
    return apply(S.EXPAND, x, shape=expanded_shape(x.shape, flat_sizes(sizes)))


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """`x.expand(*other.shape)`."""
    return expand(x, other.shape)


def repeat(x: Tensor, *sizes: Any) -> Tensor:
    """PyTorch's `repeat`: `x` tiled `sizes` times along each dim, new leading dims first
    (NumPy's `tile`, not the array API's `repeat`); a copy, its gradient the tiles' sum."""
    reps = flat_sizes(sizes)
    if len(reps) < x.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions "
            f"of tensor: repeat{reps} of a tensor of shape {x.shape}"
        )
    if min(reps, default=0) < 0:
        shape = [r * n for r, n in zip(reps, (1,) * (len(reps) - x.ndim) + x.shape, strict=True)]
        raise RuntimeError(
            f"Trying to create tensor with negative dimension {min(shape)}: {shape} "
            f"(repeat{reps} of a tensor of shape {x.shape})"
        )
    return apply(S.REPEAT, x, reps=reps)


@torch_spelling
def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concat needs at least one tensor")
    return apply(S.CONCAT, *tensors, axis=normalize_axis("concat", axis, tensors[0].shape))


concatenate = cat = concat


@torch_spelling
def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    axis = normalize_axis("stack", axis, tensors[0].shape, inserting=True)
    return apply(S.STACK, *tensors, axis=axis)


def split(
    x: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0, *, axis: Any = None
) -> tuple:
    """PyTorch's split: pieces of `x` along `dim`, views, in a tuple. An int is the size
    of every piece (the last may be smaller), a list the pieces' sizes."""
    if axis is not None:
        raise TypeError(
            f"split(x, {split_size_or_sections!r}, axis={axis}): split is PyTorch's, where an int "
            "is a piece size (not NumPy's number of sections) and the axis is dim=; for n equal "
            "sections write js.chunk(x, n, dim)"
        )
    dim = normalize_axis("split", dim, x.shape)
    return _pieces(x, dim, split_sizes(split_size_or_sections, x.shape[dim]))


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """PyTorch's chunk: `x` split along `dim` into pieces of ceil(length / chunks) (so
    possibly fewer than `chunks`), views, in a tuple."""
    dim = normalize_axis("chunk", dim, x.shape)
    return _pieces(x, dim, chunk_sizes(chunks, x.shape[dim]))


def unbind(x: Tensor, dim: int = 0) -> tuple:
    """PyTorch's unbind: the slices of `x` along `dim` (views), in a tuple."""
    dim = normalize_axis("unbind", dim, x.shape)
    lead = (slice(None),) * dim
    return tuple(getitem(x, (*lead, i)) for i in range(x.shape[dim]))


def _pieces(x: Tensor, dim: int, sizes: list[int]) -> tuple:
    lead = (slice(None),) * dim
    stops = np.cumsum(sizes).tolist()
    return tuple(getitem(x, (*lead, slice(*bounds))) for bounds in itertools.pairwise([0, *stops]))


def squeeze(x: Tensor, dim: int | Sequence[int] | None = None, *, axis: Any = None) -> Tensor:
    """Drop dims of length 1 (a view): PyTorch's `squeeze(dim)` leaves a given dim that is not
    of length 1 as it is; the array API's `squeeze(x, axis=)` raises there."""
    if axis is not None:
        return _squeeze_strictly(x, axis)
    return apply(S.SQUEEZE, x, axis=normalize_axes("squeeze", dim, x.shape))


def _squeeze_strictly(x: Tensor, axis: Any) -> Tensor:
    axis = normalize_axes("squeeze", axis, x.shape)
    for a in () if axis is None else (axis,) if isinstance(axis, int) else axis:
        if x.shape[a] != 1:
            raise ValueError(
                f"squeeze: axis {a} of a tensor of shape {x.shape} has length {x.shape[a]}, "
                "not 1 (the array API's squeeze(x, axis=); PyTorch's squeeze(x, dim) leaves it)"
            )
    return apply(S.SQUEEZE, x, axis=axis)


def expand_dims(x: Tensor, axis: int) -> Tensor:
    """A new axis of length 1 at `axis` (a view)."""
    axis = normalize_axis("expand_dims", axis, x.shape, inserting=True)
    return apply(S.EXPAND_DIMS, x, axis=axis)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """PyTorch's unsqueeze: a new dim of length 1 at `dim` (a view)."""
    dim = normalize_axis("unsqueeze", dim, x.shape, inserting=True)
    return apply(S.EXPAND_DIMS, x, axis=dim)


def flatten(
    x: Tensor, start_dim: int = 0, end_dim: int = -1, *, start_axis: int | None = None,
    end_axis: int | None = None,
) -> Tensor:
    """Dims `start_dim` to `end_dim` (inclusive) merged into one (a view); `start_axis` and
    `end_axis` are aliases."""
    start_dim = start_dim if start_axis is None else start_axis
    end_dim = end_dim if end_axis is None else end_axis
    if x.ndim == 0:
        return reshape(x, (1,))
    start = normalize_axis("flatten", start_dim, x.shape)
    end = normalize_axis("flatten", end_dim, x.shape)
    if start > end:
        raise RuntimeError(
            f"flatten() has invalid args: start_dim cannot come after end_dim (start_dim "
            f"{start_dim}, end_dim {end_dim}, tensor of shape {x.shape})"
        )
    merged = math.prod(x.shape[start : end + 1])
    return reshape(x, (*x.shape[:start], merged, *x.shape[end + 1 :]))


def flip(x: Tensor, dims: int | Sequence[int] | None = None, *, axis: Any = None) -> Tensor:
    """`x` reversed along `dims` (or the array API's `axis=`; every dim when neither is
    given); a copy, as in PyTorch."""
    dims = dims if axis is None else axis
    return apply(S.FLIP, x, axis=normalize_axes("flip", dims, x.shape))


def view_as_dtype(x: Tensor, dtype: Any) -> Tensor:
    """PyTorch's `view(dtype)`: `x`'s bytes read as `dtype` (the last dim scales by the
    ratio of the item sizes); not differentiable, and a copy here, not a view."""
    dtype = x.array_backend.dtype(dtype)
    if dtype == x.dtype:
        return reshape(x, x.shape)
    return apply(S.BITCAST, x, dtype=dtype)
