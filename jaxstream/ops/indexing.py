"""Indexing ops with PyTorch's names, arguments and results: gather, scatter_add,
index_select, sort, argsort and topk (`sort` and `topk` give `(values, indices)` named
tuples, as `max(dim)` does).

PyTorch checks every index against the size it indexes and raises; JAX would clamp it
silently, so the indices are checked on the host here, where their values are known
(not while JAX traces them).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..tensor import Tensor
from . import indexing_rules as I
from . import inplace, return_types
from . import rules as R
from .creation import zeros_like
from .dispatch import apply
from .operands import as_tensor
from .shapes import normalize_axis


def index_of(op: str, index: Any, like: Tensor, allowed: str = "int32/int64") -> Tensor:
    """`index` as an integer tensor beside `like`, or PyTorch's dtype error."""
    index = as_tensor(index, like)
    if index.array_backend is not like.array_backend or index.device != like.device:
        raise RuntimeError(
            f"{op}(): expected the index on the input's backend and device ({like.backend}, "
            f"{like.device}), got {index.backend}, {index.device}; move it first, e.g. "
            f"index.to({str(like.device)!r}, backend={like.backend!r})"
        )
    if index.dtype.kind not in "iu":
        raise RuntimeError(
            f"{op}(): Expected dtype {allowed} for index (got {index.dtype}, shape "
            f"{index.shape}); cast it first, e.g. index.long()"
        )
    return index


def check_bounds(op: str, index: Tensor, size: int, axis: int, error: type = RuntimeError
                  ) -> None:
    """PyTorch's error for an index outside [0, size), where the values are known."""
    if isinstance(index.array, jax.core.Tracer) or not index.numel():
        return
    values = np.asarray(index.numpy())
    wrong = values[(values < 0) | (values >= size)]
    if wrong.size:
        told = ("index out of range in self" if error is IndexError else
                f"index {wrong.flat[0]} is out of bounds for dimension {axis} with size {size}")
        raise error(f"{told} ({op} of an index of shape {index.shape} into a dim of size "
                    f"{size}: indices must lie in [0, {size}))")


def index_along(indices: Any, axis: int) -> tuple:
    """The index that picks, at each place of `indices`, the element `indices` names along
    `axis` (NumPy's take_along_axis, as a tuple of arrays)."""
    grid = np.ix_(*(np.arange(n) for n in indices.shape))
    return (*grid[:axis], indices, *grid[axis + 1:])


def no_larger(op: str, index: Tensor, x: Tensor, axis: int, src: Tensor | None = None) -> None:
    """PyTorch's check that `index` fits `x` in every dim but `axis` (and `src` in all)."""
    fits_x = all(i <= n for d, (i, n) in enumerate(zip(index.shape, x.shape, strict=True))
                 if d != axis)
    fits_src = src is None or all(i <= n for i, n in zip(index.shape, src.shape, strict=True))
    if fits_x and fits_src:
        return
    if src is None:
        d = next(d for d, (i, n) in enumerate(zip(index.shape, x.shape, strict=True))
                 if d != axis and i > n)
        raise RuntimeError(f"Size does not match at dimension {d} expected index "
                           f"{list(index.shape)} to be no larger than self {list(x.shape)} "
                           f"apart from dimension {axis} ({op})")
    raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                       f"{list(x.shape)} apart from dimension {axis} and to be no larger size "
                       f"than src {list(src.shape)} ({op})")


def same_ndim(op: str, index: Tensor, x: Tensor, what: str) -> None:
    if index.ndim != x.ndim:
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {what} "
                           f"tensor ({op}: index of shape {index.shape}, {what} of shape "
                           f"{x.shape})")


def gather(x: Tensor, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:
    """The elements of `x` that `index` names along `dim`, in `index`'s shape:
    `out[i][j] = x[index[i][j]][j]` for dim 0. `index` has `x`'s number of dims and is no
    larger than `x` in the others. (`sparse_grad` is accepted; the gradient is dense.)"""
    axis = normalize_axis("gather", dim, x.shape)
    index = index_of("gather", index, x)
    same_ndim("gather", index, x, "input")
    no_larger("gather", index, x, axis)
    check_bounds("gather", index, x.shape[axis], axis)
    return apply(R.TAKE_ALONG, x, index=index_along(index.array, axis))


def scatter_add(x: Tensor, dim: int, index: Any, src: Tensor) -> Tensor:
    """`x` plus each element of `src` at the place `index` names along `dim`:
    `out[index[i][j]][j] += src[i][j]` for dim 0, repeated places adding up. `index` has
    `x`'s number of dims, is no larger than `src`, and no larger than `x` but along `dim`."""
    axis = normalize_axis("scatter_add", dim, x.shape)
    index, src = index_of("scatter", index, x, "int64"), as_tensor(src, x)
    same_ndim("scatter_add", index, x, "self")
    if src.dtype != x.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype (self "
                           f"{x.dtype}, src {src.dtype}); cast src first, e.g. "
                           f"src.to('{x.dtype}')")
    same_ndim("scatter_add", index, src, "src")
    no_larger("scatter_add", index, x, axis, src)
    check_bounds("scatter_add", index, x.shape[axis], axis)
    extent = tuple(slice(0, n) for n in index.shape)
    return apply(I.SCATTER_ADD, x, src, index=index_along(index.array, axis), extent=extent)


def scatter_add_(x: Tensor, dim: int, index: Any, src: Tensor) -> Tensor:
    """`scatter_add` in place."""
    return inplace.apply_inplace(x, lambda t: scatter_add(t, dim, index, src), "scatter_add_")


def index_select(x: Tensor, dim: int, index: Any) -> Tensor:
    """The slices of `x` along `dim` at `index` (a vector, or one index), in its order;
    repeated indices repeat the slice (and add up its gradient)."""
    axis = normalize_axis("index_select", dim, x.shape)
    index = index_of("index_select", index, x, "int32 or int64")
    if index.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector (got shape "
                         f"{index.shape}); flatten it first, e.g. index.reshape(-1)")
    check_bounds("index_select", index, x.shape[axis] if x.ndim else 1, axis, IndexError)
    if not x.ndim:
        return apply(I.INDEX_SELECT, x, index=())
    picks = index.array.reshape((-1,))
    return apply(I.INDEX_SELECT, x, index=(slice(None),) * axis + (picks,))


def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """Where each element of the sorted `x` along `dim` came from; ties keep their order
    (PyTorch guarantees it only with `stable=True`) and NaN counts as the largest."""
    axis = normalize_axis("argsort", dim, x.shape)
    if not x.ndim:
        return zeros_like(x, dtype=_index_dtype(x))
    return apply(I.ARGSORT, x, axis=axis, descending=bool(descending), stable=True)


def _index_dtype(x: Tensor) -> Any:
    """The backend's default integer dtype: what its argsort gives."""
    return x.array_backend.xp.asarray(0).dtype


def sort(x: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
    """The named tuple `(values, indices)` of `x` sorted along `dim`; the gradient of the
    values goes back to where each came from."""
    indices = argsort(x, dim, descending, stable)
    if not x.ndim:
        return return_types.sort(apply(R.CLONE, x), indices)
    axis = normalize_axis("sort", dim, x.shape)
    return return_types.sort(apply(I.SORT, x, index=index_along(indices.array, axis)), indices)


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
    """The named tuple `(values, indices)` of the `k` largest (or smallest) elements along
    `dim`, largest first (or smallest first; always in order, which `sorted=False` allows)."""
    axis = normalize_axis("topk", dim, x.shape)
    size = x.shape[axis] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"selected index k out of range (topk of k={k} along dim {dim} of "
                           f"size {size}, tensor of shape {x.shape})")
    if not x.ndim:
        return return_types.topk(apply(R.CLONE, x), argsort(x))
    indices = apply(I.TOP_INDICES, x, k=int(k), axis=axis, largest=bool(largest))
    return return_types.topk(apply(I.TOPK, x, index=index_along(indices.array, axis)), indices)


METHODS: dict[str, Any] = {
    "gather": gather,
    "scatter_add": scatter_add,
    "scatter_add_": scatter_add_,
    "index_select": index_select,
    "argsort": argsort,
    "sort": sort,
    "topk": topk,
}
