"""Searching sorted values and sets, with PyTorch's names and results: searchsorted,
bucketize, isin, unravel_index, cartesian_prod and combinations.

Note [Searching by a fixed binary search]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`searchsorted` runs PyTorch's own binary search, for every value at once: a fixed
`n.bit_length()` halvings of [lo, hi) over a boundary row of length n, each a gather and a
comparison, so the kernel's shape is known when it compiles and its cost is
O(values * log n). The test is PyTorch's, `!(boundary >= value)` to go right (and
`!(boundary > value)` with `right=True`), so NaN lands where PyTorch puts it: a NaN value
after every boundary, and NaN boundaries (sorted last) before every value. `isin` sorts
the test elements and searches them the same way. None of these is differentiable: their
results are indices and truth values, as in PyTorch.
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Any

import numpy as np

from ..dtypes import python_dtype
from ..tensor import Tensor, tensor
from . import shape_ops as S
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import floor_divide, remainder
from .opdef import OpDef
from .operands import as_tensor, astype, host_values
from .promotion import result_type

__all__ = ["bucketize", "cartesian_prod", "combinations", "isin", "searchsorted", "unravel_index"]


# ------------------------------------------------------------------ kernels
def lower_bound(xp: Any, boundaries: Any, values: Any, right: bool, dtype: Any) -> Any:
    """Where each value goes in its row of `boundaries` (Note [Searching by a fixed binary
    search]): the rows are the last axis, one for all values (1-d) or one per row of
    `values`."""
    n = boundaries.shape[-1]
    lo = xp.zeros(values.shape, dtype=dtype)
    hi = xp.full(values.shape, n, dtype=dtype)
    for _ in range(n.bit_length()):
        mid = (lo + hi) // 2
        at = xp.minimum(mid, n - 1)
        seen = (boundaries[at] if boundaries.ndim == 1 else
                xp.take_along_axis(boundaries, at, axis=-1))
        onward = xp.logical_not(seen > values if right else seen >= values)
        active = lo < hi
        lo, hi = (xp.where(active & onward, mid + 1, lo),
                  xp.where(active & xp.logical_not(onward), mid, hi))
    return lo


def _isin(xp: Any, elements: Any, test: Any, invert: bool) -> Any:
    """Whether each element equals one of `test`'s: a search of the sorted test elements."""
    ordered = xp.sort(xp.reshape(test, (-1,)))
    if not ordered.shape[0]:
        found = xp.zeros(elements.shape, dtype=xp.bool)
    else:
        at = lower_bound(xp, ordered, elements, False, xp.int32 if ordered.shape[0] < 2**31
                         else xp.int64)
        found = ordered[xp.minimum(at, ordered.shape[0] - 1)] == elements
    return xp.logical_not(found) if invert else found


SEARCH = OpDef("searchsorted", None, lower_bound)
ISIN = OpDef("isin", None, _isin)


# ------------------------------------------------------------------ searchsorted
def _side(right: bool, side: str | None) -> bool:
    """Whether the search is for the right edge, from `right=` and `side=` as PyTorch reads
    them."""
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got "
                           f"{side}")
    if right and side == "left":
        raise RuntimeError(f"torch.searchsorted(): side and right can't be set to opposites, "
                           f"got side of {side} while right was {right}")
    return side == "right"


def _sorted_by(boundaries: Tensor, sorter: Any) -> Tensor:
    """`boundaries` taken in the order `sorter` gives, checked as PyTorch checks it."""
    sorter = as_tensor(sorter, boundaries)
    if sorter.dtype.kind not in "iu":
        raise RuntimeError(f"torch.searchsorted(): sorter must be a tensor of long dtype but "
                           f"got dtype {scalar_type(sorter.dtype)}")
    if sorter.shape != boundaries.shape:
        raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same "
                           f"size, but got boundary tensor {list(boundaries.shape)}and got "
                           f"sorter tensor {list(sorter.shape)}")
    values = host_values(sorter)
    if values is not None and values.size and (values.min() < 0
                                               or values.max() >= boundaries.shape[-1]):
        raise RuntimeError("torch.searchsorted(): sorter index out of range")
    return boundaries.take_along_dim(sorter, -1)


def _searched(boundaries: Tensor, values: Tensor, right: bool, out_int32: bool) -> Tensor:
    dtype = np.dtype(np.int32) if out_int32 else python_dtype("i", boundaries.array_backend)
    common = result_type(boundaries, values)
    return apply(SEARCH, astype(boundaries.detach(), common), astype(values.detach(), common),
                 right=right, dtype=dtype)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None, sorter: Any = None) -> Tensor:
    """The index where each value of `input` would go in `sorted_sequence` to keep it sorted
    (the first such index, or the last with `right=True` / `side="right"`): along the last
    dim, whose leading dims match `input`'s unless `sorted_sequence` is 1-d. int64 (int32
    with `out_int32`, or on JAX without x64); `sorter` orders an unsorted sequence."""
    boundaries = as_tensor(sorted_sequence)
    values = as_tensor(input, boundaries)
    right = _side(right, side)
    if not boundaries.ndim:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if boundaries.ndim > 1 and boundaries.shape[:-1] != values.shape[:-1]:
        raise RuntimeError(
            f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            f"dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(boundaries.shape)} and input value tensor "
            f"{list(values.shape)}")
    if sorter is not None:
        boundaries = _sorted_by(boundaries, sorter)
    return _searched(boundaries, values, right, out_int32)


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Tensor:
    """The bucket of each element of `input` among the sorted 1-d `boundaries`: the index i
    with boundaries[i-1] < x <= boundaries[i] (with `right`, boundaries[i-1] <= x <
    boundaries[i])."""
    boundaries = as_tensor(boundaries)
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got "
                           f"dim({boundaries.ndim})")
    return _searched(boundaries, as_tensor(input, boundaries), right, out_int32)


# ------------------------------------------------------------------ sets
def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each of `elements` is one of `test_elements` (a bool tensor of `elements`'s
    shape; NaN is in no set), the two compared in their promoted dtype. `assume_unique` is
    a hint PyTorch may use for speed: the answer is the same without it."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got "
                        f"({type(elements).__name__}, {type(test_elements).__name__}): one of "
                        f"elements and test_elements must be a tensor")
    like = elements if isinstance(elements, Tensor) else test_elements
    elements, test = as_tensor(elements, like), as_tensor(test_elements, like)
    common = result_type(elements, test)
    return apply(ISIN, astype(elements.detach(), common), astype(test.detach(), common),
                 invert=bool(invert))


# ------------------------------------------------------------------ indices
def _checked_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, tuple | list):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got "
                        f"{type(shape)}")
    for size in shape:
        if not isinstance(size, numbers.Integral):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got "
                            f"{type(size)}")
    if any(size < 0 for size in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    return tuple(int(size) for size in shape)


def unravel_index(indices: Any, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates in an array of `shape` of each flat (row-major) index: one int64
    tensor per dim, of `indices`' shape. As PyTorch's, an index outside the array wraps
    around it (-1 is the last element)."""
    indices = as_tensor(indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype} "
                        f"(a tensor of shape {indices.shape}); cast it first, e.g. t.long()")
    shape = _checked_shape(shape)
    if not shape:
        return ()
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    long = python_dtype("i", indices.array_backend)
    like = {"backend": indices.backend, "device": indices.device, "dtype": long}
    flat = astype(indices.detach(), long).unsqueeze(-1)
    coordinates = remainder(floor_divide(flat, tensor(strides, **like)), tensor(shape, **like))
    return S.unbind(coordinates, -1)


def _vectors(op: str, tensors: tuple) -> list[Tensor]:
    """`tensors` as 1-d tensors of one dtype, or PyTorch's error."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError(f"{op}: meshgrid expects a non-empty TensorList")
    tensors = [as_tensor(t, tensors[0] if isinstance(tensors[0], Tensor) else None)
               for t in tensors]
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(f"meshgrid expects all tensors to have the same dtype (got "
                           f"{', '.join(str(t.dtype) for t in tensors)}); cast them first")
    return tensors


def cartesian_prod(*tensors: Any) -> Tensor:
    """Every combination of one element from each 1-d tensor, one per row, the last tensor
    varying fastest (itertools.product's order); one tensor comes back as it is."""
    tensors = _vectors("cartesian_prod", tensors)
    if len(tensors) == 1:
        return tensors[0]
    sizes = tuple(t.shape[0] for t in tensors)
    columns = [
        t.reshape(tuple(-1 if j == i else 1 for j in range(len(sizes))))
        .broadcast_to(sizes).reshape(-1)
        for i, t in enumerate(tensors)
    ]
    return S.stack(columns, 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """The length-`r` combinations of the 1-d `input`'s elements, one per row, in
    itertools.combinations' order (combinations_with_replacement's with
    `with_replacement`); `r=0` gives an empty 1-d tensor."""
    x = as_tensor(input)
    if x.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(x.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return x[:0]
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = np.array(list(pick(range(x.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return S.stack([x[rows[:, i]] for i in range(r)], 1)
