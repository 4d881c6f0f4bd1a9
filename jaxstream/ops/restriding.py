"""PyTorch's in-place view ops: `t_`, `transpose_`, `swapaxes_`, `swapdims_`, `squeeze_` and
`unsqueeze_`. The tensor itself takes the new shape, keeping its values.

Note [In-place view ops]
~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch's `x.t_()` changes x's sizes and strides, not its storage: x's version is bumped and
its grad_fn becomes a node of the in-place op's own name (`TBackward1`, `TransposeBackward1`,
`SqueezeBackward3`, 4 or 5, `UnsqueezeBackward1`) whose edge leads to x's old history.
Here the out-of-place view op (`t`, `transpose`, ...) runs first under no_grad, for its
checks, its errors and the `(op, params)` step it takes; the step is then taken again under
the in-place node, and the tensor is rebound to the result. `apply_inplace` is not used: the
shape changes (Note [In-place ops rebase history] in inplace.py).

* A view keeps its base: it becomes the view that the step makes of it (its steps followed
  by the new one). The base's values are untouched; the shared version is bumped.
* A base keeps its views' values: each of them is led back first, by the step's inverse (a
  swap of two dims is its own; a squeeze or unsqueeze is undone by a reshape to the old
  shape), so that replaying its steps on the new value reads the same elements, as a PyTorch
  view keeps reading the same memory (Note [Views and in-place ops] in views.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import shape_ops as S
from . import shape_rules as SR
from . import tensor_utilities as TU
from . import top_level_names as TN
from . import views
from .dispatch import apply
from .opdef import OpDef
from .tensor_utility_rules import T
from .views import adopt_history


def _recorded_as(op: OpDef, node_name: Any) -> OpDef:
    """`op` (a view op) under the node name of PyTorch's in-place form."""
    return OpDef(f"{op.name}_", node_name, op.kernel, *op.grads, view=True)


def _squeeze_name(args: tuple, params: dict) -> str:
    axis = params["axis"]
    return "SqueezeBackward3" if axis is None else f"SqueezeBackward{4 + isinstance(axis, tuple)}"


IN_PLACE = {
    T: _recorded_as(T, "TBackward1"),
    SR.SWAPAXES: _recorded_as(SR.SWAPAXES, "TransposeBackward1"),
    SR.SQUEEZE: _recorded_as(SR.SQUEEZE, _squeeze_name),
    SR.EXPAND_DIMS: _recorded_as(SR.EXPAND_DIMS, "UnsqueezeBackward1"),
}
"""The in-place node of each view op an in-place view op takes."""
_SELF_INVERSE = (T, SR.SWAPAXES)


def _lead_views_back(t: Tensor, step: tuple) -> None:
    """Start every view of `t` with `step`, which takes `t`'s new value to its old one."""
    for view in list(t._views or ()):
        view._view.steps = (step, *view._view.steps)
        view._view.region = None


def restride_(t: Tensor, view_op: Callable[..., Tensor], *args: Any, **kwargs: Any) -> Tensor:
    """`t` rebound to `view_op(t, *args, **kwargs)`, a view op's result of another shape
    (Note [In-place view ops])."""
    views.check_writable(t)
    with no_grad():
        op, params = view_op(t, *args, **kwargs)._view.steps[-1]
    info = t._view
    if info is not None and info.base is not None:
        result = apply(IN_PLACE[op], t, **params)
        t._view = result._view
    else:
        result = apply(IN_PLACE[op], views.alias(t), **params)
        inverse = (op, params) if op in _SELF_INVERSE else (SR.RESHAPE, {"shape": t.shape})
        _lead_views_back(t, inverse)
    t.rebind(result.array)
    adopt_history(t, result)
    return t


def _in_place_view(name: str, view_op: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def method(t: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return restride_(t, view_op, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"`{name[:-1]}` in place: the tensor takes the new shape (a view stays one)."
    return method


_VIEW_OPS = {"t": TU.t, "transpose": S.transpose, "swapaxes": TN.swapaxes,
             "swapdims": TN.swapdims, "squeeze": S.squeeze, "unsqueeze": S.unsqueeze}
METHODS = {f"{name}_": _in_place_view(f"{name}_", fn) for name, fn in _VIEW_OPS.items()}
