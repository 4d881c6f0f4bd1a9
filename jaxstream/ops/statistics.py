"""PyTorch's statistics and counting reductions: median, nanmedian, kthvalue, mode,
quantile, nanquantile, nansum, nanmean, count_nonzero, cummax, cummin, aminmax and diff,
and the ops whose result's shape depends on the values: bincount, unique and
unique_consecutive.

The selections (median or kthvalue along a dim, mode, cummax) return the named tuple
`(values, indices)`, as `max(dim)` does, the gradient going to the element at the index
(statistics_rules.py). quantile sorts, reads the two neighbours of each rank and
interpolates, so its gradient goes through sort, gather and lerp. bincount and unique are
computed on the host, as `nonzero` is (nonzero.py), and refused inside a trace.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ..tensor import Tensor, tensor
from . import statistics_rules as R
from .dispatch import apply
from .indexing import gather, sort
from .nonzero import values_for_shape
from .operands import as_tensor, host_values
from .pointwise import lerp
from .rules import WHERE
from .shape_ops import concat
from .shapes import normalize_axes, normalize_axis

# PyTorch's `torch.return_types`: tuples whose fields name the parts.
_PAIRS = {name: namedtuple(name, fields, module=__name__) for name, fields in (
    ("median", "values indices"), ("nanmedian", "values indices"),
    ("kthvalue", "values indices"), ("mode", "values indices"), ("cummax", "values indices"),
    ("cummin", "values indices"), ("aminmax", "min max"),
)}
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _place(indices: Any, axis: int, reduced: bool) -> tuple:
    """The index that reads, at each place of `indices`, the element it names along `axis`
    (`reduced`: `indices` lacks that axis, which the result then lacks too)."""
    grid = np.ix_(*(np.arange(n) for n in indices.shape))
    return (*grid[:axis], indices, *grid[axis + (0 if reduced else 1):])


def _picked(op: str, x: Tensor, dim: Any, keepdim: bool, find: Any, select: Any,
            **params: Any) -> Any:
    """`(values, indices)` of the element `find` picks in each slice along `dim`."""
    if not x.ndim:  # a 0-d tensor's one element, kept or not
        x, keepdim = x.reshape((1,)), False
    axis = normalize_axis(op, dim, x.shape)
    indices = apply(find, x, axis=axis, **params)
    if keepdim:
        indices = indices.unsqueeze(axis)
    values = apply(select, x, index=_place(indices.array, axis, not keepdim))
    return _PAIRS[op](values, indices)


def median(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median of all elements (NaN if one is NaN; ties share the gradient), or with
    `dim` the named tuple `(values, indices)` of each slice's."""
    if dim is None:
        return apply(R.MEDIAN, x, skip_nan=False)
    return _picked("median", x, dim, keepdim, R.MEDIAN_INDICES, R.MEDIAN_DIM, skip_nan=False)


def nanmedian(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """`median` of the elements that are not NaN (NaN where all are)."""
    if dim is None:
        return apply(R.MEDIAN, x, skip_nan=True)
    return _picked("nanmedian", x, dim, keepdim, R.MEDIAN_INDICES, R.NANMEDIAN_DIM,
                   skip_nan=True)


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """The named tuple `(values, indices)` of the k-th smallest element (from 1; NaN the
    largest) of each slice along `dim`."""
    size = x.shape[normalize_axis("kthvalue", dim, x.shape)] if x.ndim else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim} "
                           f"(k={k}, a dim of size {size} in a tensor of shape {x.shape}); "
                           f"k counts from 1 to the size")
    return _picked("kthvalue", x, dim, keepdim, R.KTH_INDICES, R.KTHVALUE, k=int(k))


def mode(x: Tensor, dim: int = -1, keepdim: bool = False) -> Any:
    """The named tuple `(values, indices)` of the most frequent value of each slice along
    `dim` (the smallest of equally frequent ones) and where it last occurs."""
    return _picked("mode", x, dim, keepdim, R.MODE_INDICES, R.MODE)


def _running(op: str, x: Tensor, dim: int, largest: bool, select: Any) -> Any:
    if not x.ndim:  # its one element, at index 0
        normalize_axis(op, dim, (1,))
        return _PAIRS[op](apply(select, x, index=()), _on(x, np.asarray(0), _index_dtype(x)))
    axis = normalize_axis(op, dim, x.shape)
    indices = apply(R.RUNNING_INDICES, x, axis=axis, largest=largest)
    return _PAIRS[op](apply(select, x, index=_place(indices.array, axis, False)), indices)


def cummax(x: Tensor, dim: int) -> Any:
    """The named tuple `(values, indices)` of the running max along `dim` and where it was
    last reached (NaN, once met, is the max)."""
    return _running("cummax", x, dim, True, R.CUMMAX)


def cummin(x: Tensor, dim: int) -> Any:
    """`cummax` for the running min."""
    return _running("cummin", x, dim, False, R.CUMMIN)


def _checked_q(op: str, x: Tensor, q: Any, interpolation: str) -> Tensor:
    """`q` as a tensor of `x`'s dtype, or PyTorch's refusal."""
    if x.dtype.kind != "f":
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype (got "
                           f"{x.dtype}, shape {x.shape}); cast it first, e.g. x.double()")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    q = q.astype(x.dtype) if isinstance(q, Tensor) else _on(x, np.asarray(q, dtype=x.dtype))
    if q.ndim > 1:
        raise RuntimeError(f"{op}() q must be a scalar or 1D tensor (got shape {q.shape})")
    values = host_values(q)
    if values is not None and not np.all((values >= 0) & (values <= 1)):
        wrong = values[~((values >= 0) & (values <= 1))].flat[0]
        raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {wrong}")
    return q


def _quantile(op: str, x: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str,
              skip_nan: bool) -> Tensor:
    """Sort each slice, read the neighbours of each rank q * (count - 1) and interpolate."""
    qs = _checked_q(op, x, q, interpolation)
    axis = None if dim is None else normalize_axis(op, dim, x.shape) if x.ndim else 0
    slices = x.reshape((-1,)) if axis is None or not x.ndim else x.movedim(axis, -1)
    values = sort(slices, -1).values
    nan = slices.isnan()
    count = (~nan).astype(x.dtype).sum(-1, keepdim=True) if skip_nan else values.shape[-1]
    ranks = (qs.reshape((-1,)) * (count - 1)).clamp(min=0.0)
    ranks = ranks.broadcast_to(values.shape[:-1] + ranks.shape[-1:])
    if interpolation in ("lower", "higher", "nearest"):
        ranks = {"lower": ranks.floor, "higher": ranks.ceil, "nearest": ranks.round}[
            interpolation]()
    below, above = ranks.floor(), ranks.ceil()
    weights = ranks - below if interpolation != "midpoint" else 0.5
    index_dtype = _index_dtype(x)
    result = lerp(gather(values, -1, below.astype(index_dtype)),
                  gather(values, -1, above.astype(index_dtype)), weights)
    empty = (count == 0) if skip_nan else nan.any(-1, keepdim=True)
    result = apply(WHERE, empty, float("nan"), result).movedim(-1, 0)
    if keepdim:
        result = result.reshape(result.shape[:1] + (
            (1,) * x.ndim if axis is None else x.shape[:axis] + (1,) + x.shape[axis + 1:]))
    return result.squeeze(0) if not qs.ndim else result


def quantile(x: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The q-th quantiles of all elements or of each slice along `dim` (NaN where the slice
    holds a NaN); a 1-d `q` puts its quantiles first."""
    return _quantile("quantile", x, q, dim, keepdim, interpolation, False)


def nanquantile(x: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """`quantile` of the elements that are not NaN (NaN where all are)."""
    return _quantile("nanquantile", x, q, dim, keepdim, interpolation, True)


def nansum(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The sum with NaNs counted as zeros (and given no gradient)."""
    if dtype is not None:
        x = x.astype(dtype)
    if x.dtype.kind != "f":
        return x.sum(dim=dim, keepdim=keepdim)
    return apply(R.NANSUM, x, axis=normalize_axes("nansum", dim, x.shape), keepdims=keepdim)


def nanmean(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The mean of the elements that are not NaN (NaN where all are)."""
    if dtype is not None:
        x = x.astype(dtype)
    if x.dtype.kind != "f":
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{x.dtype} (shape {x.shape}); cast it first, e.g. x.float()")
    count = (~x.isnan()).astype(x.dtype).sum(dim=dim, keepdim=keepdim)
    return nansum(x, dim, keepdim) / count


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    """How many elements are not zero, in all or over `dim` (an int or a tuple)."""
    counted = (x != 0).sum(dim=dim) if dim is not None else (x != 0).sum()
    return counted.astype(_index_dtype(x))


def aminmax(x: Tensor, *, dim: int | None = None, keepdim: bool = False) -> Any:
    """The named tuple `(min, max)` over all elements or along `dim`; ties share each
    gradient, as amin's and amax's."""
    axis = None if dim is None else normalize_axis("aminmax", dim, x.shape) if x.ndim else None
    return _PAIRS["aminmax"](apply(R.AMINMAX_MIN, x, axis=axis, keepdims=keepdim),
                             apply(R.AMINMAX_MAX, x, axis=axis, keepdims=keepdim))


def diff(x: Tensor, n: int = 1, dim: int = -1, prepend: Any = None,
         append: Any = None) -> Tensor:
    """The n-th forward difference along `dim` (`!=` of neighbours for booleans), after
    joining `prepend` and `append` to `x` along it."""
    if not x.ndim:
        raise RuntimeError("diff expects input to be at least one-dimensional (got a 0-d "
                           "tensor); reshape it first, e.g. x.reshape(1)")
    axis = normalize_axis("diff", dim, x.shape)
    parts = [as_tensor(p, x) for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat(parts, axis)
    before = (slice(None),) * axis
    for _ in range(n):
        later, earlier = x[(*before, slice(1, None))], x[(*before, slice(None, -1))]
        x = later != earlier if x.dtype == np.bool_ else later - earlier
    return x


def _on(x: Tensor, values: np.ndarray, dtype: Any = None) -> Tensor:
    """Host `values` on `x`'s backend and device, as `dtype` where given."""
    return tensor(values if dtype is None else values.astype(dtype), backend=x.backend,
                  device=x.device)


def _index_dtype(x: Tensor) -> Any:
    """The backend's default integer dtype (int64, or int32 on JAX without x64)."""
    return x.array_backend.xp.asarray(0).dtype


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Tensor:
    """How often each of 0..max(x) occurs in the 1-d non-negative integer `x` (at least
    `minlength` bins), or the sum of the `weights` at each; not differentiable."""
    x, values = values_for_shape("bincount", x)
    if x.ndim != 1 or values.dtype.kind not in "iub" or (values.size and values.min() < 0):
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs (got "
                           f"shape {x.shape}, dtype {x.dtype}); cast or flatten it first")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength}")
    if weights is None:
        return _on(x, np.bincount(values, minlength=minlength), _index_dtype(x))
    weights, w = values_for_shape("bincount", as_tensor(weights, x))
    if weights.shape != x.shape:
        raise RuntimeError(f"bincount: weights should be 1-d and have the same length as "
                           f"input (input {x.shape}, weights {weights.shape})")
    dtype = np.float32 if w.dtype == np.float32 else _float_of(x)
    return _on(x, np.bincount(values, w, minlength=minlength), dtype)


def _float_of(x: Tensor) -> Any:
    """float64, or float32 where the backend has no 64-bit floats (JAX without x64)."""
    return np.float64 if x.array_backend.holds_64bit_dtypes() else np.float32


def _unique_parts(x: Tensor, slices: np.ndarray, inverse: np.ndarray, counts: np.ndarray,
                  with_inverse: bool, with_counts: bool) -> Any:
    """The kept slices, and the inverse and counts where asked for, as PyTorch returns them."""
    out = [_on(x, slices)]
    if with_inverse:
        out.append(_on(x, inverse, _index_dtype(x)))
    if with_counts:
        out.append(_on(x, counts, _index_dtype(x)))
    return out[0] if len(out) == 1 else tuple(out)


def unique(x: Any, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct elements (or slices along `dim`) of `x` in ascending order, with where
    each element came from (`return_inverse`) and how often each occurs
    (`return_counts`); every NaN is distinct. Not differentiable."""
    x, values = values_for_shape("unique", x)
    axis = None if dim is None else normalize_axis("unique", dim, x.shape)
    found, inverse, counts = np.unique(values, return_inverse=True, return_counts=True,
                                       axis=axis, equal_nan=False)
    inverse = inverse.reshape(values.shape if axis is None else (-1,))
    return _unique_parts(x, found, inverse, counts, return_inverse, return_counts)


def unique_consecutive(x: Any, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> Any:
    """`x` with each run of equal elements (or slices along `dim`) cut to one, with where
    each element came from (`return_inverse`) and each run's length (`return_counts`)."""
    x, values = values_for_shape("unique_consecutive", x)
    axis = None if dim is None else normalize_axis("unique_consecutive", dim, x.shape)
    rows = values.reshape(-1, 1) if axis is None else np.moveaxis(values, axis, 0).reshape(
        values.shape[axis], -1)
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), len(rows)))
    kept = values.reshape(-1)[starts] if axis is None else np.take(
        values, np.flatnonzero(starts), axis=axis)
    inverse = inverse.reshape(values.shape) if axis is None else inverse
    return _unique_parts(x, kept, inverse, counts, return_inverse, return_counts)


METHODS: dict[str, Any] = {
    "median": median,
    "nanmedian": nanmedian,
    "kthvalue": kthvalue,
    "mode": mode,
    "quantile": quantile,
    "nanquantile": nanquantile,
    "nansum": nansum,
    "nanmean": nanmean,
    "count_nonzero": count_nonzero,
    "cummax": cummax,
    "cummin": cummin,
    "aminmax": aminmax,
    "diff": diff,
    "bincount": bincount,
    "unique": unique,
    "unique_consecutive": unique_consecutive,
}
