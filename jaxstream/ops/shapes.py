"""Shape arithmetic for the op table's kernels and vjp rules.

Plain tuples in, tuples out: no tensors, no arrays, so the rules (and anyone
else) can use them without importing the op functions.
"""

from __future__ import annotations

import math
from typing import Any


def kept_shape(shape: tuple, axis: Any) -> tuple:
    """The shape a reduction of `shape` over `axis` (None: all axes) has with keepdims=True."""
    if axis is None:
        return (1,) * len(shape)
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def reduced_count(shape: tuple, axis: Any) -> int:
    """How many elements a reduction of `shape` over `axis` folds into each result."""
    return math.prod(shape) // max(1, math.prod(kept_shape(shape, axis)))


def summed_axes(shape: tuple, target: tuple) -> tuple:
    """The axes to sum (keepdims) to reduce a broadcast `shape` back to `target`."""
    lead = len(shape) - len(target)
    return tuple(range(lead)) + tuple(
        lead + i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1
    )


def inverse_permutation(axes: tuple) -> tuple:
    """The axes that undo the permutation `axes` (what `transpose`'s backward applies)."""
    inverse = [0] * len(axes)
    for i, a in enumerate(axes):
        inverse[a] = i
    return tuple(inverse)


def swapped_axes(ndim: int, axis1: int, axis2: int) -> tuple:
    """The permutation of `ndim` axes that exchanges `axis1` and `axis2`."""
    axes = list(range(ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return tuple(axes)


def split_bounds(shapes: tuple, axis: int) -> list[tuple[int, int]]:
    """The (start, stop) of each piece along `axis` when arrays of `shapes` are concatenated."""
    bounds, start = [], 0
    for shape in shapes:
        bounds.append((start, start + shape[axis]))
        start += shape[axis]
    return bounds
