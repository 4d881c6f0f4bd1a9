"""The op table of PyTorch's indexed writes: index_copy, index_fill, scatter, masked_scatter
(a region replaced), index_add and index_put with accumulate (a region added to), and
scatter_reduce.

Every write here names its places the same way: a `views.Region` of the input (the flat
positions an index picks, found on the host, where the indices are checked too), a
per-call param. The replacing writes are `views.COPY_SLICES`'s kernel and vjps under
PyTorch's node names; the adding ones add with `backend.scatter_add` and read the
gradient back at the region; scatter_reduce's vjps are written in jaxstream ops (so they
have gradients of their own), with `rules.INDEX_ADD` to add a gradient up at the region.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import INDEX_ADD, WHERE, same
from .views import COPY_SLICES

_dregion = COPY_SLICES.grads[1]
"""The gradient at a region, in the region's shape."""


def _node(args: tuple, params: dict) -> str:
    return params["node"]


def _replacing(name: str, node: str) -> OpDef:
    """A write that replaces the region with a value broadcast to it."""
    return OpDef(name, node, COPY_SLICES.kernel, *COPY_SLICES.grads, per_call_params=True)


# fmt: off
INDEX_COPY = _replacing("index_copy", "IndexCopyBackward0")
INDEX_FILL = _replacing("index_fill", "IndexFillBackward0")
INDEX_FILL_TENSOR = _replacing("index_fill", "IndexFillBackward1")
SCATTER = _replacing("scatter", "ScatterBackward0")
SCATTER_VALUE = _replacing("scatter", "ScatterBackward1")
MASKED_SCATTER = _replacing("masked_scatter", "MaskedScatterBackward0")
# fmt: on


# ------------------------------------------------------------------ adding
def _accumulate(backend: Any, a: Any, values: Any, region: Any, alpha: Any, node: str) -> Any:
    """`a` plus `alpha * values` (broadcast to the region) added up at the region's places."""
    xp, shape = backend.xp, region.positions.shape
    values = xp.broadcast_to(values, shape)
    values = xp.astype(values if alpha == 1 else values * alpha, a.dtype)
    added = backend.scatter_add((math.prod(a.shape),), a.dtype, region.positions, values)
    return a + xp.reshape(added, a.shape)


def _daccumulated(g: Tensor, ctx: OpContext) -> Tensor:
    alpha = ctx.params["alpha"]
    picked = _dregion(g, ctx)
    return picked if alpha == 1 else picked * alpha


ACCUMULATE = OpDef("index_add", _node, _accumulate, same, _daccumulated, backend_kernel=True,
                   per_call_params=True)
"""index_add (`IndexAddBackward0`) and index_put with accumulate (`IndexPutBackward0`)."""


# ------------------------------------------------------------------ scatter_reduce
_METHODS = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "max", "amin": "min"}


def _identity(dtype: Any, reduce: str) -> Any:
    """What a place holds before the reduction when its old value is left out."""
    if reduce in ("amax", "amin"):
        sign = 1 if reduce == "amin" else -1
        if np.dtype(dtype).kind in "iu":
            info = np.iinfo(dtype)
            return info.max if sign > 0 else info.min
        return sign * np.inf
    return 1 if reduce == "prod" else 0


def _counts(region: Any, include_self: bool) -> np.ndarray:
    """How many values each place of the input averages (its old one too, if included)."""
    hits = np.bincount(region.positions.reshape(-1), minlength=region.covered.size)
    return hits + int(include_self)


def _scatter_reduce(backend: Any, a: Any, src: Any, region: Any, reduce: str,
                    include_self: bool) -> Any:
    xp = backend.xp
    old = xp.reshape(a, (-1,))
    flat = old if include_self else xp.where(
        xp.asarray(region.covered), xp.asarray(_identity(a.dtype, reduce), dtype=a.dtype), old)
    out = backend.combine_at(flat, region.positions.reshape(-1), xp.reshape(src, (-1,)),
                             _METHODS[reduce])
    if reduce == "mean":
        counts = xp.astype(xp.asarray(np.maximum(_counts(region, include_self), 1)), a.dtype)
        out = out // counts if np.dtype(a.dtype).kind in "iu" else out / counts
    return xp.reshape(out, a.shape)


def _constant(like: Tensor, values: np.ndarray) -> Tensor:
    backend = like.array_backend
    return Tensor.wrap(backend.asarray(values), backend, like.device)


def _spread(v: Tensor, ctx: OpContext) -> Tensor:
    """`v` (in the region's shape) added up at the region's places, in the input's shape."""
    region = ctx.params["region"]
    added = apply(INDEX_ADD, v, index=region.positions, shape=(region.covered.size,))
    return added.reshape(ctx.shapes[0])


def _ties(ctx: OpContext) -> tuple[Tensor, Tensor, Tensor]:
    """For amax/amin: whether the input's and each src's value won, and how many won each
    place (the gradient is shared evenly among them). The input's value counts as a winner
    where it equals the result even when `include_self=False` left it out, as PyTorch's."""
    a, src, out = ctx.inputs[0], ctx.inputs[1], ctx.output
    self_won, src_won = a == out, _dregion(out, ctx) == src
    winners = _spread(src_won.astype(a.dtype), ctx) + self_won.astype(a.dtype)
    return self_won, src_won, winners


def _others(v: Tensor, zeros: Tensor, out: Tensor, nonzero: Tensor) -> Tensor:
    """The product of the other factors of a place, for a factor `v` of it: `out / v`, or
    where `v` is 0 the product of the nonzero ones if it is the place's only zero."""
    lone = apply(WHERE, zeros == 1, nonzero, 0.0)
    return apply(WHERE, v == 0, lone, out / apply(WHERE, v == 0, 1.0, v))


def _products(ctx: OpContext) -> tuple[Tensor, Tensor]:
    """For prod: the product of the other factors of each input element (exact where some
    factor is zero, as PyTorch's), and of each src element, in src's shape."""
    a, src, out = ctx.inputs[0], ctx.inputs[1], ctx.output
    zeros = _spread((src == 0).astype(a.dtype), ctx)
    if ctx.params["include_self"]:
        zeros = zeros + (a == 0).astype(a.dtype)
    nonzero = apply(SCATTER_REDUCE, apply(WHERE, a == 0, 1.0, a),
                    apply(WHERE, src == 0, 1.0, src), **ctx.params)
    return (_others(a, zeros, out, nonzero),
            _others(src, _dregion(zeros, ctx), _dregion(out, ctx), _dregion(nonzero, ctx)))


def _dself(g: Tensor, ctx: OpContext) -> Tensor:
    reduce, region = ctx.params["reduce"], ctx.params["region"]
    covered = _constant(g, region.covered.reshape(g.shape))
    if reduce in ("amax", "amin"):
        self_won, _, winners = _ties(ctx)
        g = apply(WHERE, self_won, g / winners, 0.0)
    if not ctx.params["include_self"]:
        return apply(WHERE, covered, 0.0, g)
    if reduce == "mean":
        return g / _constant(g, np.maximum(_counts(region, True), 1).reshape(g.shape))
    if reduce == "prod":
        return apply(WHERE, covered, g * _products(ctx)[0], g)
    return g


def _dsrc(g: Tensor, ctx: OpContext) -> Tensor:
    reduce, region = ctx.params["reduce"], ctx.params["region"]
    if reduce in ("amax", "amin"):
        _, src_won, winners = _ties(ctx)
        return apply(WHERE, src_won, _dregion(g / winners, ctx), 0.0)
    if reduce == "mean":
        counts = _counts(region, ctx.params["include_self"])
        return _dregion(g / _constant(g, np.maximum(counts, 1).reshape(g.shape)), ctx)
    if reduce == "prod":
        return _dregion(g, ctx) * _products(ctx)[1]
    return _dregion(g, ctx)


SCATTER_REDUCE = OpDef("scatter_reduce", "ScatterReduceBackward0", _scatter_reduce, _dself, _dsrc,
                       save_inputs=(0, 1), save_output=True, per_call_params=True,
                       backend_kernel=True)


def _not_implemented(g: Tensor, ctx: OpContext) -> Tensor:
    raise RuntimeError(f"derivative for aten::scatter is not implemented (a gradient of shape "
                       f"{g.shape} reached scatter with reduce=); use scatter_reduce, which "
                       f"has one")


SCATTER_REDUCING = OpDef("scatter", "torch::autograd::NotImplemented", _scatter_reduce,
                         _not_implemented, _not_implemented, per_call_params=True,
                         backend_kernel=True)
"""PyTorch's deprecated `scatter(..., reduce=)`: recorded, but a backward through it raises."""
