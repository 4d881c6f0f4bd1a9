"""The public shape ops: reshape, transpose, broadcast_to, concat, stack, split, squeeze,
expand_dims, flatten, flip. Most results are views of their input (Note [Views and
in-place ops] in views.py).
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
from .shapes import normalize_axes, normalize_axis, split_sizes


def reshape(x: Tensor, shape: Any) -> Tensor:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return apply(S.RESHAPE, x, shape=shape)


def transpose(x: Tensor, axes: Any = None) -> Tensor:
    """Permute axes (NumPy semantics: no axes reverses them)."""
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(a % x.ndim for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of a {x.ndim}-d tensor")
    return apply(S.PERMUTE, x, axes=axes)


def swapaxes(x: Tensor, axis1: int, axis2: int) -> Tensor:
    return apply(S.SWAPAXES, x, axis1=axis1 % x.ndim, axis2=axis2 % x.ndim)


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    return apply(S.EXPAND, x, shape=tuple(shape))


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


@torch_spelling
def split(x: Tensor, sizes_or_sections: int | Sequence[int], axis: int = 0) -> tuple:
    """Pieces of `x` along `axis`: an int is a number of equal sections (the array API's
    meaning), a list the pieces' sizes (PyTorch's split_with_sizes). Pieces are views."""
    axis = normalize_axis("split", axis, x.shape)
    lead = (slice(None),) * axis
    stops = np.cumsum(split_sizes(sizes_or_sections, x.shape[axis])).tolist()
    return tuple(getitem(x, (*lead, slice(*bounds))) for bounds in itertools.pairwise([0, *stops]))


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """Drop axes of length 1: the given ones (which must have length 1), or all of them."""
    if axis is not None:
        axis = normalize_axes("squeeze", axis, x.shape)
        for a in (axis,) if isinstance(axis, int) else axis or ():
            if x.shape[a] != 1:
                raise ValueError(
                    f"squeeze: axis {a} of a tensor of shape {x.shape} has length "
                    f"{x.shape[a]}, not 1"
                )
    return apply(S.SQUEEZE, x, axis=axis)


def expand_dims(x: Tensor, axis: int) -> Tensor:
    """A new axis of length 1 at `axis` (a view)."""
    axis = normalize_axis("expand_dims", axis, x.shape, inserting=True)
    return apply(S.EXPAND_DIMS, x, axis=axis)


unsqueeze = expand_dims


def flatten(x: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """Axes `start_axis` to `end_axis` (inclusive) merged into one (a view)."""
    if x.ndim == 0:
        return reshape(x, (1,))
    start = normalize_axis("flatten", start_axis, x.shape)
    end = normalize_axis("flatten", end_axis, x.shape)
    if start > end:
        raise ValueError(
            f"flatten: start_axis {start_axis} comes after end_axis {end_axis} "
            f"(tensor of shape {x.shape})"
        )
    merged = math.prod(x.shape[start : end + 1])
    return reshape(x, (*x.shape[:start], merged, *x.shape[end + 1 :]))


def permute_dims(x: Tensor, axes: Sequence[int]) -> Tensor:
    """The axes of `x` in the order `axes` (a view)."""
    return transpose(x, axes)


@torch_spelling
def flip(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """`x` reversed along `axis` (all axes by default); a copy, as in PyTorch."""
    return apply(S.FLIP, x, axis=normalize_axes("flip", axis, x.shape))


