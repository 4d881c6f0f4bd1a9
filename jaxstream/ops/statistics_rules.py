"""The op table of the order statistics and NaN-skipping reductions: median, nanmedian,
kthvalue, mode, cummax/cummin, nansum and aminmax.

Same conventions as `rules.py`. An op that picks one element per slice (median or
kthvalue along a dim, mode, cummax) runs in two steps, as `max(dim)` does: a kernel that is
not differentiable finds the indices, and a selection reads the values at them with
`TAKE_ALONG`'s kernel and vjp under PyTorch's node name, so that all of the gradient goes
to the element at the index, to any order. The median of all elements gives its gradient
to every element equal to it, shared evenly, as PyTorch does.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import reduction_rules as Q
from .dispatch import apply
from .opdef import OpContext, OpDef
from .reduction_rules import kept
from .rules import TAKE_ALONG, WHERE


# ------------------------------------------------------------------ kernels
def _taken(xp: Any, a: Any, index: Any, axis: int) -> Any:
    """`a`'s elements at `index` (kept dims) along `axis`, that axis dropped."""
    return xp.squeeze(xp.take_along_axis(a, index, axis=axis), axis=axis)


def _median_indices(xp: Any, a: Any, axis: int, skip_nan: bool) -> Any:
    """Where the lower median of each slice along `axis` is: the first NaN where the slice
    holds one (median), or the lower median of the others (nanmedian; index 0 if none)."""
    order = xp.argsort(a, axis=axis, stable=True)  # NaN sorts last
    nan = xp.isnan(a)
    if skip_nan:
        count = xp.sum(xp.astype(~nan, order.dtype), axis=axis, keepdims=True)
        return _taken(xp, order, xp.where(count > 0, (count - 1) // 2, 0), axis)
    middle = order[(slice(None),) * axis + ((a.shape[axis] - 1) // 2,)]
    first_nan = xp.astype(xp.argmax(nan, axis=axis), order.dtype)
    return xp.where(xp.any(nan, axis=axis), first_nan, middle)


def _kth_indices(xp: Any, a: Any, axis: int, k: int) -> Any:
    """Where the k-th smallest element (from 1, NaN largest) of each slice is."""
    order = xp.argsort(a, axis=axis, stable=True)
    return order[(slice(None),) * axis + (k - 1,)]


def _mode_indices(xp: Any, a: Any, axis: int) -> Any:
    """Where the most frequent value of each slice last occurs; the smallest such value
    where several are as frequent."""
    a = xp.moveaxis(a, axis, -1)
    counts = xp.sum(xp.astype(a[..., :, None] == a[..., None, :], xp.int32), axis=-1)
    frequent = counts == xp.max(counts, axis=-1, keepdims=True)
    value = xp.min(xp.where(frequent, a, xp.max(a, axis=-1, keepdims=True)), axis=-1,
                   keepdims=True)
    last = xp.argmax(xp.flip(a == value, axis=-1), axis=-1)
    return a.shape[-1] - 1 - last


def _scan(xp: Any, a: Any, axis: int, step: Any) -> Any:
    """The running `step` (maximum or minimum) along `axis`, in log2(n) doubling passes;
    the slice's first element pads each shift, as it is in every prefix."""
    a = xp.moveaxis(a, axis, -1)
    n, shift = a.shape[-1], 1
    while shift < n:
        pad = xp.broadcast_to(a[..., :1], a.shape[:-1] + (shift,))
        a = step(a, xp.concat([pad, a[..., :-shift]], axis=-1))
        shift *= 2
    return xp.moveaxis(a, -1, axis)


def _running_indices(xp: Any, a: Any, axis: int, largest: bool) -> Any:
    """Where the running max (min) of each prefix along `axis` last reached its value; a NaN
    is the extreme from where it stands, and each later NaN takes its place."""
    step = xp.maximum if largest else xp.minimum
    running = _scan(xp, a, axis, step)
    shape = tuple(n if d == axis else 1 for d, n in enumerate(a.shape))
    positions = xp.reshape(xp.arange(a.shape[axis]), shape)
    reached = (a == running) | xp.isnan(a)
    return _scan(xp, xp.where(reached, positions, 0), axis, xp.maximum)


def _median_all(xp: Any, a: Any, skip_nan: bool) -> Any:
    flat = xp.reshape(a, (-1,))
    return flat[_median_indices(xp, flat, 0, skip_nan)]


def _nansum(xp: Any, a: Any, axis: Any, keepdims: bool) -> Any:
    return xp.sum(xp.where(xp.isnan(a), xp.zeros_like(a), a), axis=axis, keepdims=keepdims)


# ------------------------------------------------------------------ vjps
def _devenly(g: Tensor, ctx: OpContext) -> Tensor:
    """The gradient of the median of all elements, shared by the elements equal to it (by
    the NaNs where it is NaN)."""
    x, y = ctx.inputs[0], ctx.output
    hits = apply(WHERE, y.isnan(), x.isnan(), x == y)
    return apply(WHERE, hits, g / hits.astype(g.dtype).sum(), 0.0)


def _dnansum(g: Tensor, ctx: OpContext) -> Tensor:
    return apply(WHERE, ctx.inputs[0].isnan(), 0.0, kept(g, ctx).broadcast_to(ctx.shapes[0]))


def _selection(name: str, node: str) -> OpDef:
    """`TAKE_ALONG` (the elements at a per-call index) under PyTorch's node `node`."""
    return OpDef(name, node, TAKE_ALONG.kernel, *TAKE_ALONG.grads, per_call_params=True)


# ------------------------------------------------------------------ the table
# fmt: off
MEDIAN = OpDef("median", lambda args, params: "NanmedianBackward0" if params["skip_nan"] else
               "MedianBackward0", _median_all, _devenly, save_inputs=(0,), save_output=True)
NANSUM = OpDef("nansum", "NansumBackward0", _nansum, _dnansum, save_inputs=(0,))
AMINMAX_MIN = OpDef("aminmax", "AminmaxBackward0", Q.AMIN.kernel, *Q.AMIN.grads,
                    save_inputs=(0,), save_output=True)
AMINMAX_MAX = OpDef("aminmax", "AminmaxBackward0", Q.AMAX.kernel, *Q.AMAX.grads,
                    save_inputs=(0,), save_output=True)
MEDIAN_DIM = _selection("median", "MedianBackward1")
NANMEDIAN_DIM = _selection("nanmedian", "NanmedianBackward1")
KTHVALUE = _selection("kthvalue", "KthvalueBackward0")
MODE = _selection("mode", "ModeBackward0")
CUMMAX = _selection("cummax", "CummaxBackward0")
CUMMIN = _selection("cummin", "CumminBackward0")
# fmt: on

# Not differentiable: no vjp, no node.
MEDIAN_INDICES = OpDef("median", None, _median_indices)
KTH_INDICES = OpDef("kthvalue", None, _kth_indices)
MODE_INDICES = OpDef("mode", None, _mode_indices)
RUNNING_INDICES = OpDef("cummax", None, _running_indices)
