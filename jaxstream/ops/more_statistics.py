"""More statistics with PyTorch's names, arguments and checks: cov, corrcoef, trapezoid (and
its older name trapz), cumulative_trapezoid, histc and histogram.

Each composes existing ops as PyTorch's own implementation does (cov's weighted mean and
product, corrcoef's scaling and clip, the trapezoid rule's sums), so values, dtypes and
gradients are PyTorch's. The histograms are not differentiable, as in PyTorch (its
`histogram` records a node whose backward raises; here the counts carry no graph); their
bins are found by a search of the bin edges (searching.py) and counted by `scatter_add`, so
that they run inside `js.compile` too, where the checks that read values are skipped.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from . import return_types
from .creation import arange, zeros
from .dispatch import apply
from .dtype_names import scalar_type
from .extrema import amax, amin
from .functional import where
from .indexing import scatter_add
from .inplace import FILL
from .operands import as_tensor, astype, host_values
from .pointwise import kernel_lacks
from .searching import searchsorted
from .shapes import normalize_axis

__all__ = ["corrcoef", "cov", "cumulative_trapezoid", "histc", "histogram", "trapezoid", "trapz"]


# ------------------------------------------------------------------ cov, corrcoef
def _weights(x: Tensor, fweights: Any, aweights: Any) -> tuple[Tensor | None, Tensor | None]:
    """cov's product of frequency and importance weights (None without either), and the
    importance weights, checked as PyTorch checks them."""
    observations = x.shape[1]
    w = None
    for name, given, kinds, kind_name in (("fweights", fweights, "iu", "integral"),
                                          ("aweights", aweights, "f", "floating point")):
        if given is None:
            continue
        t = as_tensor(given, x)
        if t.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                               f"{name} with {t.ndim} dimensions")
        if t.dtype.kind not in kinds:
            raise RuntimeError(f"cov(): expected {name} to have {kind_name} dtype but got "
                               f"{name} with {scalar_type(t.dtype)} dtype")
        if t.numel() != observations:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                               f"observations in the input but got {t.numel()} != "
                               f"{observations}")
        values = host_values(t)
        if values is not None and values.size and values.min() < 0:
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = t if w is None else w * t
    return w, None if aweights is None else as_tensor(aweights, x)


def cov(input: Any, *, correction: int = 1, fweights: Any = None,  # noqa: A002
        aweights: Any = None) -> Tensor:
    """The covariance matrix of the variables in the rows of `input` (a vector is one
    variable), observations in its columns, weighted by `fweights` (counts) and `aweights`
    (importance), with `correction` (1: Bessel's) subtracted from the weight total."""
    x = as_tensor(input)
    if x.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {x.ndim} dimensions")
    if x.dtype == np.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = x.reshape((1, -1)) if x.ndim < 2 else x
    w, aw = _weights(x, fweights, aweights)
    total = x.shape[1] if w is None else w.sum()
    weighted_sum = total if isinstance(total, int) else host_values(total)
    if weighted_sum is not None and weighted_sum == 0 and w is not None:
        raise RuntimeError("cov(): weights sum to zero, can't be normalized")
    mean = (x if w is None else x * w).sum(1) / total
    if w is not None and aw is not None and correction != 0:
        norm = total - correction * (w * aw).sum() / total
    else:
        norm = total - correction
    known = norm if isinstance(norm, int) else host_values(norm)
    if known is not None and known <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
    norm = (0 if norm <= 0 else norm) if isinstance(norm, int) else where(norm <= 0, 0, norm)
    centered = x - mean.unsqueeze(1)
    weighted = centered if w is None else centered * w
    return (centered @ weighted.swapaxes(0, 1) / norm).squeeze()


def corrcoef(input: Any) -> Tensor:  # noqa: A002
    """The Pearson correlation coefficients of the variables in the rows of `input`: `cov`
    scaled by the standard deviations, clipped to [-1, 1]."""
    x = as_tensor(input)
    if x.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but "
                           f"got an input with {x.ndim} dimensions")
    c = cov(x)
    if not c.ndim:
        return c / c
    deviation = c.diagonal().sqrt()
    return (c / deviation.reshape((-1, 1)) / deviation.reshape((1, -1))).clip(-1, 1)


# ------------------------------------------------------------------ the trapezoid rule
def _spacing(op: str, y: Tensor, x: Any, axis: int) -> Tensor:
    """The differences of the sample points `x`, shaped to broadcast against `y`'s slices."""
    x = as_tensor(x, y)
    if x.ndim == 1:
        if x.shape[0] != y.shape[axis]:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        x = x.reshape(tuple(-1 if d == axis else 1 for d in range(y.ndim)))
    elif x.ndim < y.ndim:
        x = x.reshape((1,) * (y.ndim - x.ndim) + x.shape)
    before = (slice(None),) * axis
    return x[(*before, slice(1, None))] - x[(*before, slice(None, -1))]


def _trapezoid_args(op: str, y: Any, x: Any, dx: Any, dim: int) -> tuple[Tensor, int]:
    y = as_tensor(y)
    if x is not None and dx is not None:
        raise TypeError(f"{op}() received an invalid combination of arguments: give the "
                        f"sample points x or the spacing dx, not both")
    if y.dtype == np.bool_:
        raise RuntimeError(f"{op}: received a bool input for `y`, but bool is not supported")
    if not y.ndim:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return y, normalize_axis(op, dim, y.shape)


def trapezoid(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoid rule's integral of `y` along `dim`, at the sample points `x` (a vector
    along `dim`, or a tensor broadcasting with `y`) or at a spacing `dx` (default 1)."""
    y, axis = _trapezoid_args("trapezoid", y, x, dx, dim)
    if not y.shape[axis]:
        return zeros(y.shape[:axis] + y.shape[axis + 1:], dtype=y.dtype, backend=y.backend,
                     device=y.device)
    before = (slice(None),) * axis
    if x is None:
        ends = y[(*before, 0)] + y[(*before, -1)]
        return (y.sum(axis) - ends * 0.5) * (1 if dx is None else dx)
    pairs = y[(*before, slice(None, -1))] + y[(*before, slice(1, None))]
    return (pairs * _spacing("trapezoid", y, x, axis)).sum(axis) / 2.0


def trapz(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """`trapezoid`'s older name."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoid rule's integral of `y` along `dim`: one value fewer than `y`
    has along it."""
    y, axis = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    before = (slice(None),) * axis
    pairs = y[(*before, slice(None, -1))] + y[(*before, slice(1, None))]
    if x is None:
        return ((1 if dx is None else dx) / 2.0 * pairs).cumsum(axis)
    return (pairs * _spacing("cumulative_trapezoid", y, x, axis)).cumsum(axis) / 2.0


# ------------------------------------------------------------------ histograms
def _counted(x: Tensor, bins: int, position: Tensor, inside: Tensor, weight: Tensor | None
             ) -> Tensor:
    """The total weight (1 each, without `weight`) of the elements `inside` in each of
    `bins` bins, each element in the bin `position` names."""
    ones = apply(FILL, x, value=1) if weight is None else weight
    amounts = where(inside, ones, 0).reshape(-1)
    hist = zeros(bins, dtype=x.dtype, backend=x.backend, device=x.device)
    return scatter_add(hist, 0, where(inside, position, 0).reshape(-1), amounts)


def _histogrammable(op: str, kernel: str, x: Any) -> Tensor:
    x = as_tensor(x).detach()
    if not is_floating(x.dtype):
        raise kernel_lacks(kernel, x, f"{op} counts floating values: cast them first, e.g. "
                                      f"t.float()")
    return x


def _bin_count(bins: int) -> None:
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                           f"dimension 0")


def _range_of(x: Tensor, low: float, high: float, widen: float, from_data: bool
              ) -> tuple[Tensor, Tensor]:
    """The histogram's range: [low, high], or the data's (`from_data`, unless x is empty),
    widened by `widen` on each side where it is one point; 0-d tensors in x's dtype."""
    lo, hi = astype(as_tensor(low, x), x.dtype), astype(as_tensor(high, x), x.dtype)
    if from_data and x.numel():
        lo, hi = amin(x), amax(x)
    point = lo == hi
    return where(point, lo - widen, lo), where(point, hi + widen, hi)


def _finite_range(op: str, lo: Tensor, hi: Tensor) -> tuple[Any, Any]:
    """PyTorch's check that a histogram's range is finite, where its values are known; the
    range's values (None inside a trace)."""
    low, high = host_values(lo), host_values(hi)
    if low is not None and not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"{op}: range of [{low}, {high}] is not finite")
    return low, high


def histc(input: Any, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """The counts of `input`'s elements in `bins` equal bins over [min, max] (the data's
    range where min equals max), elements outside left out; in `input`'s dtype."""
    x = _histogrammable("histc", "histogram_cpu", input)
    _bin_count(bins)
    lo, hi = _range_of(x, min, max, 1.0, from_data=min == max)
    low, high = _finite_range("torch.histc", lo, hi)
    if low is not None and not low < high:
        raise RuntimeError("torch.histc: max must be larger than min")
    inside = (x >= lo) & (x <= hi)
    scaled = (where(inside, x, lo) - lo) * bins / (hi - lo)
    position = scaled.astype(np.int64 if x.array_backend.holds_64bit_dtypes() else np.int32)
    return _counted(x, bins, position.clip(max=bins - 1), inside, None)


def _edges(x: Tensor, bins: Any, range: Any) -> Tensor:  # noqa: A002
    """histogram's bin edges: `bins` itself, or `bins` + 1 points evenly spaced over the
    range, as PyTorch's linspace places them (from both ends towards the middle)."""
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but "
                               f"got {bins.ndim} dimensions in the bins tensor for dimension 0")
        if bins.dtype != x.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                               f"the same dtype, but got input {x.dtype} and bins for "
                               f"dimension 0 {bins.dtype}")
        return bins.detach()
    _bin_count(bins)
    low, high = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
    if low > high:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {low} "
                           f"max {high} for dimension 0")
    lo, hi = _range_of(x, low, high, 0.5, from_data=range is None)
    _finite_range("torch.histogramdd", lo, hi)
    step = (hi - lo) / bins
    index = arange(bins + 1, backend=x.backend, device=x.device).astype(x.dtype)
    return where(index < (bins + 1) // 2, lo + step * index, hi - step * (bins - index))


def histogram(input: Any, bins: Any, *, range: Any = None, weight: Any = None,  # noqa: A002
              density: bool = False) -> return_types.histogram:
    """The histogram of `input`'s elements in `bins` bins over `range` (the data's by
    default), or between the edges the 1-d tensor `bins` gives: the named tuple `(hist,
    bin_edges)`, the weights summed with `weight`, a density (integrating to 1) with
    `density`."""
    x = _histogrammable("histogram", "histogramdd", input)
    edges = _edges(x, bins, range)
    count = edges.shape[0] - 1
    if weight is not None:
        weight = as_tensor(weight, x).detach()
        if weight.shape != x.shape:
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should "
                               f"have the same shape as the input tensor excluding its "
                               f"innermost dimension, but got input with shape {x.shape} and "
                               f"weight with shape {weight.shape}")
    inside = (x >= edges[0]) & (x <= edges[-1])
    position = (searchsorted(edges, x, right=True) - 1).clip(0, max(count - 1, 0))
    hist = _counted(x, max(count, 0), position, inside, weight)
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return return_types.histogram(hist, edges)


METHODS: dict[str, Any] = {"cov": cov, "corrcoef": corrcoef, "histc": histc,
                           "histogram": histogram}
