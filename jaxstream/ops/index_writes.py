"""PyTorch's indexed writes, out of place and in place: index_add, index_copy, index_fill,
scatter (with its deprecated `reduce=`), scatter_reduce, index_put and masked_scatter.

Each finds the places it writes as a `views.Region` of the input on the host, where the
indices are checked as PyTorch checks them (JAX alone would clamp or drop a bad one), and
runs one op of index_write_rules.py on it. The in-place forms run the out-of-place one
through `apply_inplace` (Note [In-place ops rebase history] in inplace.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor, tensor
from . import index_write_rules as W
from . import rules as R
from . import views
from .dispatch import apply
from .indexing import check_bounds, index_along, index_of, no_larger, same_ndim
from .inplace import in_place_method
from .operands import as_tensor, astype
from .shapes import normalize_axis

_SCATTER_REDUCES = {"add": "sum", "multiply": "prod"}
_REDUCES = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin",
            "max": "amax", "min": "amin"}
"""scatter_reduce's reductions; PyTorch still takes the old "max" and "min" for amax, amin."""


def _host(index: Tensor) -> np.ndarray:
    return np.asarray(index.numpy())


def _region(shape: tuple, index: tuple) -> views.Region:
    """The places of a tensor of `shape` that `index` (host arrays and slices) picks."""
    return views.Region.of(shape, ((R.INDEX, {"index": index}),))


def _same_dtype(op: str, x: Tensor, source: Tensor, what: str = "source") -> None:
    if source.dtype != x.dtype:
        raise RuntimeError(f"{op}(): self ({x.dtype}) and {what} ({source.dtype}) must have "
                           f"the same scalar type (shapes {x.shape} and {source.shape}); cast "
                           f"the {what} first, e.g. {what}.to('{x.dtype}')")


def _value_of(value: Any, x: Tensor) -> Tensor:
    """A number or tensor to write into `x`, as a tensor of `x`'s dtype beside it."""
    if isinstance(value, Tensor):
        return astype(value, x.dtype)
    return tensor(value, backend=x.backend, device=x.device, dtype=x.dtype)


def _vector_region(op: str, x: Tensor, dim: int, index: Any, error: type) -> tuple:
    """The axis, and a vector `index` on the host, checked as PyTorch checks it."""
    axis = normalize_axis(op, dim, x.shape)
    index = index_of(op, index, x, "int64")
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, but got dim: "
                         f"{index.ndim} (index of shape {index.shape}); flatten it first, "
                         f"e.g. index.reshape(-1)")
    try:
        check_bounds(op, index, x.shape[axis], axis)
    except RuntimeError as told:
        raise error(str(told)) from None
    picks = _host(index).reshape(-1)
    return axis, picks


def _along_dim(x: Tensor, axis: int, picks: np.ndarray) -> views.Region:
    return _region(x.shape, (slice(None),) * axis + (picks,))


def _source_fits(op: str, x: Tensor, source: Tensor, axis: int, region: views.Region) -> None:
    if source.shape != region.positions.shape:
        raise RuntimeError(f"{op}(): Number of indices ({region.positions.shape[axis]}) "
                           f"should be equal to source.size(dim) and source should have "
                           f"self's shape {x.shape} elsewhere (got source of shape "
                           f"{source.shape}, dim {axis}); reshape the source")


def index_add(input: Tensor, dim: int, index: Any, source: Tensor, *,  # noqa: A002
              alpha: Any = 1) -> Tensor:
    """`input` plus `alpha * source` added at the slices `index` names along `dim`;
    repeated indices add up."""
    axis, picks = _vector_region("index_add", input, dim, index, RuntimeError)
    source = as_tensor(source, input)
    _same_dtype("index_add", input, source)
    region = _along_dim(input, axis, picks)
    _source_fits("index_add", input, source, axis, region)
    return apply(W.ACCUMULATE, input, source, region=region, alpha=alpha,
                 node="IndexAddBackward0")


def index_copy(input: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:  # noqa: A002
    """`input` with the slices `index` names along `dim` replaced by `source`'s, in order
    (with a repeated index, which one lands is undefined, as in PyTorch)."""
    axis, picks = _vector_region("index_copy", input, dim, index, IndexError)
    source = as_tensor(source, input)
    _same_dtype("index_copy", input, source)
    region = _along_dim(input, axis, picks)
    _source_fits("index_copy", input, source, axis, region)
    return apply(W.INDEX_COPY, input, source, region=region)


def index_fill(input: Tensor, dim: int, index: Any, value: Any) -> Tensor:  # noqa: A002
    """`input` with the slices `index` names along `dim` set to `value` (a number, or a
    0-d tensor, which then gets the gradient of every place it fills)."""
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s) (shape {value.shape}); "
                           f"pass value.reshape(()) or a number")
    axis, picks = _vector_region("index_fill", input, dim, index, IndexError)
    region = _along_dim(input, axis, np.unique(picks))
    op = W.INDEX_FILL_TENSOR if isinstance(value, Tensor) else W.INDEX_FILL
    return apply(op, input, _value_of(value, input), region=region)


def _scatter_region(op: str, x: Tensor, dim: int, index: Any, src: Tensor | None) -> tuple:
    """The region `index` names along `dim` (one place per element of `index`), and `src`
    cut to the index's shape."""
    axis = normalize_axis(op, dim, x.shape)
    index = index_of("scatter", index, x, "int64")
    same_ndim(op, index, x, "self")
    if src is not None and src.dtype != x.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype (self "
                           f"{x.dtype}, src {src.dtype} in {op}); cast src first, e.g. "
                           f"src.to('{x.dtype}')")
    if src is not None:
        same_ndim(op, index, src, "src")
    no_larger(op, index, x, axis, src)
    check_bounds(op, index, x.shape[axis], axis)
    if src is not None and src.shape != index.shape:
        src = src[tuple(slice(0, n) for n in index.shape)]
    return _region(x.shape, index_along(_host(index), axis)), src


def scatter(input: Tensor, dim: int, index: Any, src: Any = None, *,  # noqa: A002
            value: Any = None, reduce: str | None = None) -> Tensor:
    """`input` with each element of `src` (or the number `value`) written at the place
    `index` names along `dim`: `out[index[i][j]][j] = src[i][j]` for dim 0. PyTorch's
    deprecated `reduce="add"|"multiply"` adds or multiplies instead (no gradient)."""
    if reduce is not None and reduce not in _SCATTER_REDUCES:
        raise RuntimeError(f"reduce argument must be either add or multiply. (scatter got "
                           f"reduce={reduce!r}; scatter_reduce has sum, prod, mean, amax, amin)")
    if not isinstance(src, Tensor):
        value, src = (src if value is None else value), None
    else:
        src = as_tensor(src, input)
    region, src = _scatter_region("scatter", input, dim, index, src)
    if reduce is not None:
        values = src if src is not None else _value_of(value, input).broadcast_to(
            region.positions.shape)
        return apply(W.SCATTER_REDUCING, input, values, region=region,
                     reduce=_SCATTER_REDUCES[reduce], include_self=True)
    if src is None:
        return apply(W.SCATTER_VALUE, input, _value_of(value, input), region=region)
    return apply(W.SCATTER, input, src, region=region)


def scatter_reduce(input: Tensor, dim: int, index: Any, src: Tensor, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> Tensor:
    """`input` with the elements of `src` reduced into the places `index` names along `dim`
    by `reduce` ("sum", "prod", "mean", "amax" or "amin"), with each place's old value
    unless `include_self=False`. amax/amin share a gradient evenly among ties."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce} (scatter_reduce of a tensor of shape {input.shape})")
    region, src = _scatter_region("scatter_reduce", input, dim, index, as_tensor(src, input))
    return apply(W.SCATTER_REDUCE, input, src, region=region, reduce=_REDUCES[reduce],
                 include_self=bool(include_self))


def _put_index(x: Tensor, indices: Any) -> tuple:
    """`index_put`'s tuple of index tensors as a host index (None picks a whole dim)."""
    if isinstance(indices, Tensor) or not isinstance(indices, tuple | list):
        raise TypeError(f"index_put(): indices must be a tuple of tensors (got "
                        f"{type(indices).__name__}); pass (index,)")
    return tuple(slice(None) if i is None else _host(as_tensor(i, x)) for i in indices)


def index_put(input: Tensor, indices: Any, values: Any,  # noqa: A002
              accumulate: bool = False) -> Tensor:
    """`input` with `input[indices]` replaced by `values` (broadcast to it), or added to
    with `accumulate=True` (then repeated indices add up)."""
    values = as_tensor(values, input)
    if values.dtype != input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{input.dtype} for the destination and {values.dtype} for the "
                           f"source (shapes {input.shape} and {values.shape}); cast the "
                           f"values first")
    index = _put_index(input, indices)
    try:
        region = _region(input.shape, index)
    except IndexError as error:
        raise IndexError(f"index_put(): {error} (a tensor of shape {input.shape}); indices "
                         f"must lie in [-size, size) of the dim they index") from error
    views.check_fits(values, region.positions.shape)
    if not accumulate:
        return apply(views.INDEX_PUT, input, values, region=region)
    return apply(W.ACCUMULATE, input, values, region=region, alpha=1, node="IndexPutBackward0")


def masked_scatter(input: Tensor, mask: Any, source: Tensor) -> Tensor:  # noqa: A002
    """`input` with its places where `mask` (broadcast to it) is True taken from `source`'s
    elements in order (row-major), as many as the mask has."""
    mask, source = as_tensor(mask, input), as_tensor(source, input)
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {mask.dtype} (shape {mask.shape}); pass mask.bool()")
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got {input.dtype} and {source.dtype}; cast the source first")
    views.check_fits(mask, input.shape)
    positions = np.flatnonzero(np.broadcast_to(_host(mask), input.shape))
    if source.numel() < positions.size:
        raise RuntimeError(f"Number of elements of source < number of ones in mask (source of "
                           f"shape {source.shape}, {positions.size} ones); give a larger source")
    region = views.Region(positions, int(np.prod(input.shape, dtype=np.int64)))
    picked = source.reshape(-1)[:positions.size]
    return apply(W.MASKED_SCATTER, input, picked, region=region)


index_add_ = in_place_method(index_add, "index_add_")
index_copy_ = in_place_method(index_copy, "index_copy_")
index_fill_ = in_place_method(index_fill, "index_fill_")
scatter_ = in_place_method(scatter, "scatter_")
scatter_reduce_ = in_place_method(scatter_reduce, "scatter_reduce_")
index_put_ = in_place_method(index_put, "index_put_")
masked_scatter_ = in_place_method(masked_scatter, "masked_scatter_")

METHODS: dict[str, Any] = {
    "index_add": index_add,
    "index_add_": index_add_,
    "index_copy": index_copy,
    "index_copy_": index_copy_,
    "index_fill": index_fill,
    "index_fill_": index_fill_,
    "scatter": scatter,
    "scatter_": scatter_,
    "scatter_reduce": scatter_reduce,
    "scatter_reduce_": scatter_reduce_,
    "index_put": index_put,
    "index_put_": index_put_,
    "masked_scatter": masked_scatter,
    "masked_scatter_": masked_scatter_,
}
