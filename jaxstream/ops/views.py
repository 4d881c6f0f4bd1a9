"""Views: tensors that share their base's values, and in-place ops written through them.

Note [Views and in-place ops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The result of an op whose OpDef has `view=True` (basic indexing, reshape,
transpose, ...) and of `detach()` is a view: `t._view` (a `ViewInfo`, aliasing.py)
names its base, always a tensor that is not itself a view (a view of a view
has the root as base), and the `(op, params)` steps that take the base's value
to the view's. The base and its views share one version counter; the base
holds its live views weakly (`base._views`), a differentiable view holds its
base strongly (its history goes through the base) and a detached one weakly (a
`loss.detach()` kept for logging must not keep the graph alive).

Arrays are never written in place (they may be shared with other code), so an
in-place op on a view is functionalized, as PyTorch's functionalization does:

1. the op runs out of place on the view's value (Note [In-place ops rebase
   history] in inplace.py), giving the view's new value;
2. the base's new value is its old one with the view's region replaced by it:
   `COPY_SLICES`, one array-API kernel for every view op, driven by the
   view's `Region` (the flat positions of the view's elements in the base,
   found once by running the view's steps on `arange` on the host);
3. the base is rebound to that value, which bumps the shared counter, so a
   backward that saved the base or any view of it fails as in PyTorch;
4. every live view of the base re-derives its array by replaying its steps
   on the new base, eagerly, through `dispatch.apply`: under grad mode this
   also gives it a new grad_fn that reads the base's new history.

The backward of `CopySlices` (PyTorch's name) sends the base's gradient with
the region zeroed to the base's old history, and the region of the gradient to
the in-place op's history. A `detach()` view is not differentiable: a write
through it changes the base's values and version, never its history.
`t[index] = v` with an advanced index is `index_put` on `t` itself
(`IndexPutBackward0`), the same kernel with the index's region.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..aliasing import ViewInfo
from ..autograd.grad_mode import state as grad_state
from ..backends import backend_of, get_backend
from ..tensor import Tensor
from . import rules as R
from .boolean_masks import refuse_traced_masks
from .dispatch import apply
from .opdef import OpContext, OpDef


class Region:
    """Where a view's elements sit in its base: flat positions, on the host.

    `positions` has the view's shape; `covered` marks the base's elements in
    the view and `source` says which element of the flattened view each covered
    one takes (for a repeated position, the last one, as NumPy's assignment). `overlaps`:
    some position is repeated (a view made by `expand`).
    """

    __slots__ = ("positions", "covered", "source", "overlaps")

    def __init__(self, positions: np.ndarray, base_size: int) -> None:
        flat = positions.reshape(-1)
        self.positions = positions
        self.covered = np.zeros(base_size, dtype=bool)
        self.covered[flat] = True
        self.overlaps = flat.size > np.count_nonzero(self.covered)
        self.source = np.zeros(base_size, dtype=np.intp)
        self.source[flat] = np.arange(flat.size)

    @classmethod
    def of(cls, shape: tuple, steps: tuple) -> Region:
        """The region that `steps` (`(op, params)` pairs) cut out of a base of `shape`."""
        host = get_backend("numpy")
        size = int(np.prod(shape, dtype=np.int64))
        positions = np.arange(size).reshape(shape)
        for op, params in steps:
            positions = op.kernel(host if op.backend_kernel else host.xp, positions, **params)
        return cls(np.asarray(positions), size)


def _copy_slices(xp: Any, base: Any, value: Any, region: Region) -> Any:
    """`base` with `region` replaced by `value` (broadcast to the region's shape)."""
    if not region.positions.size:
        return base
    values = xp.reshape(xp.broadcast_to(value, region.positions.shape), (-1,))
    picked = xp.take(values, xp.asarray(region.source))
    flat = xp.where(xp.asarray(region.covered), picked, xp.reshape(base, (-1,)))
    return xp.reshape(flat, base.shape)


def _dbase(g: Tensor, ctx: OpContext) -> Tensor:
    """The base's gradient outside the region (the region was overwritten)."""
    region, backend = ctx.params["region"], g.array_backend
    keep = backend.asarray(~region.covered.reshape(g.shape))
    return apply(R.WHERE, Tensor.wrap(keep, backend, g.device), g, 0.0)


def _dvalue(g: Tensor, ctx: OpContext) -> Tensor:
    """The region of the gradient, in the region's shape."""
    return g.reshape(-1)[ctx.params["region"].positions]


COPY_SLICES = OpDef("copy_slices", "CopySlices", _copy_slices, _dbase, _dvalue,
                    per_call_params=True)
INDEX_PUT = OpDef("index_put", "IndexPutBackward0", _copy_slices, _dbase, _dvalue,
                  per_call_params=True)


def _host_index(index: Any) -> Any:
    """An index with every array in it moved to the host (a `Region` is found there)."""
    if isinstance(index, tuple):
        return tuple(_host_index(i) for i in index)
    if isinstance(index, Tensor):
        return index.array_backend.to_host(index.array)
    if isinstance(index, list):
        return np.asarray(index)
    backend = backend_of(index)
    return index if backend is None else backend.to_host(index)


def index_put(t: Tensor, index: Any, value: Tensor) -> Tensor:
    """`t` with `t[index]` replaced by `value`, out of place (any index, arrays included)."""
    refuse_traced_masks("index_put (t[mask] = value)", t.shape, index)
    region = Region.of(t.shape, ((R.INDEX, {"index": _host_index(index)}),))
    check_fits(value, region.positions.shape)
    return apply(INDEX_PUT, t, value, region=region)


def check_fits(value: Any, shape: tuple) -> None:
    """A value stored into a tensor or an indexed region must broadcast to its shape."""
    own = tuple(np.shape(value.array if isinstance(value, Tensor) else value))
    try:
        fits = np.broadcast_shapes(own, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(
            f"The expanded size of the tensor must match the existing size: a value of shape "
            f"{own} cannot be stored in a tensor (or indexed region) of shape {shape}; "
            "reshape the value or change the index."
        )


def alias(t: Tensor, history: bool = True) -> Tensor:
    """`t`'s value as a tensor with a version counter of its own (what an op may save),
    with `t`'s history or none."""
    a = Tensor.wrap(t.array, t.array_backend, t.device)
    if history and t.grad_fn is not None:
        a.set_history(t.grad_fn, t.output_nr)
    return a


def assign(t: Tensor, value: Tensor) -> None:
    """Make `value` (array and history) the new value of `t`, of its base and of their views."""
    info = t._view
    base = None if info is None else info.base
    if base is None:
        t.rebind(value.array)
        adopt_history(t, value)
        _refresh_views(t)
        return
    if info.region is None:
        info.region = Region.of(base.shape, info.steps)
    if info.region.overlaps:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location. Please clone() the tensor before performing the operation. "
            f"(a view of shape {t.shape} of a base of shape {base.shape}, as `expand` makes)"
        )
    differentiable = info.differentiable
    new_base = apply(
        COPY_SLICES, alias(base, differentiable), alias(value, differentiable), region=info.region
    )
    base.rebind(new_base.array)
    adopt_history(base, new_base)
    _refresh_views(base)
    if not differentiable:
        adopt_history(t, value)


def adopt_history(t: Tensor, value: Tensor) -> None:
    """Give `t` the history of its new value; its retains_grad hook follows."""
    if value.grad_fn is None:
        return
    old_fn, old_nr = t.grad_fn, t.output_nr
    t.set_history(value.grad_fn, value.output_nr)
    t.move_retains_grad_hook(old_fn, old_nr)


def _refresh_views(base: Tensor) -> None:
    """Re-derive every live view of `base` from its new value (and, under grad mode, its
    differentiable views' history from the base's)."""
    views = base._views
    if not views:
        return
    for view in list(views):
        info: ViewInfo = view._view
        fresh = base
        for op, params in info.steps:
            fresh = apply(op, fresh, **params)
        view.array = fresh.array
        if info.differentiable:
            adopt_history(view, fresh)


def check_writable(t: Tensor) -> None:
    """PyTorch's leaf rule: under grad mode a leaf that requires grad, or a view of one,
    cannot be changed in place (the gradient would be of a value that is gone)."""
    if not grad_state.grad_enabled:
        return
    info = t._view
    base = info.base if info is not None and info.differentiable else None
    if base is not None and base.is_leaf and base.requires_grad:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            f"operation. (view of shape {t.shape}, base of shape {base.shape}, dtype "
            f"{t.dtype}); wrap the update in `with js.no_grad():`, or clone() the leaf first."
        )
    if t.is_leaf and t.requires_grad:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation. "
            f"(shape {t.shape}, dtype {t.dtype}); wrap the update in `with js.no_grad():` "
            "or use an out-of-place op."
        )
