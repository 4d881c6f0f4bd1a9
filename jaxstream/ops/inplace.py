"""In-place ops (`add_`, `t += u`, `t[i] = v`, ...) as a rebinding of the tensor.

Note [In-place ops rebase history]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`t.add_(u)` runs the out-of-place op on an alias of t's current value (same
array, same grad_fn) and then rebinds t to the result: t's buffer becomes the
new array, its `_version` is bumped, and its grad_fn becomes the new node,
whose edge leads to the old history. Arrays are never written in place, so
nothing shared with other code changes, and the node that saved t's old
value keeps it. Saved tensors still compare versions, so a backward that
would read a value modified in place fails as PyTorch's does. Tensor hooks
stay with the node they were registered on (they see the gradient of the
old value); the retains_grad hook moves to the new grad_fn. When t is a view,
or has views, the new value is written through to its base and every view of
it (Note [Views and in-place ops] in views.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, tensor
from . import functional as F
from . import views
from .dispatch import apply
from .opdef import OpDef, is_basic_index
from .operands import astype
from .promotion import check_can_cast
from .rules import zeroed

# The filled value does not depend on the old one: its gradient is zero.
FILL = OpDef("fill_", "FillBackward2", lambda xp, a, value: xp.full_like(a, value), zeroed)


def apply_inplace(t: Tensor, fn: Callable[[Tensor], Tensor], op: str = "in-place op") -> Tensor:
    """Run the out-of-place `fn` on `t`'s value, then rebind `t` to the result (Note above);
    the result is cast back to `t`'s dtype where PyTorch's `can_cast` allows."""
    views.check_writable(t)
    # The alias has a version counter of its own: what the op saves of it stays valid.
    # A leaf that requires grad gets here only under no_grad, where nothing is recorded.
    result = fn(views.alias(t))
    if result.shape != t.shape:
        raise RuntimeError(
            f"in-place result has shape {result.shape}, which cannot be stored in a tensor "
            f"of shape {t.shape}"
        )
    if result.dtype != t.dtype:
        check_can_cast(op, result.dtype, t.dtype, t.shape)
        result = astype(result, t.dtype)
    views.assign(t, result)
    return t


# `add_`, `sub_` and `div_` run the named ops through Tensor's methods: the module of
# PyTorch's names (`arithmetic_names`) imports this one.
def in_place_method(fn: Callable[..., Tensor], name: str,
                    recorded: bool = True) -> Callable[..., Tensor]:
    """PyTorch's in-place method `name`: `fn` of the tensor's value, rebound in place (Note
    [In-place ops rebase history]). Unless `recorded`, it runs without grad, as PyTorch's
    logical ops change even a leaf that requires grad and record nothing."""

    def method(t: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        with nullcontext() if recorded else no_grad():
            return apply_inplace(t, lambda v: fn(v, *args, **kwargs), name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"`{name[:-1]}` in place (the result must fit the tensor's dtype)."
    return method


def add_(t: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """`t += alpha * other`."""
    return apply_inplace(t, lambda v: v.add(other, alpha=alpha), "add_")


def sub_(t: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
    """`t -= alpha * other`."""
    return apply_inplace(t, lambda v: v.sub(other, alpha=alpha), "sub_")


def mul_(t: Tensor, other: Any) -> Tensor:
    return apply_inplace(t, lambda v: v * other, "mul_")


def div_(t: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """`t /= other`, or the quotient rounded as `div`'s `rounding_mode` says."""
    return apply_inplace(t, lambda v: v.div(other, rounding_mode=rounding_mode), "div_")


def zero_(t: Tensor) -> Tensor:
    return apply_inplace(t, F.zero_grad_to_history)


def fill_(t: Tensor, value: Any) -> Tensor:
    return apply_inplace(t, lambda v: apply(FILL, v, value=value))


def copy_(t: Tensor, src: Any) -> Tensor:
    views.check_fits(src, t.shape)
    return apply_inplace(t, lambda v: F.copy_into(v, src))


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """`t[index] = value`: a copy into the view `t[index]` for a basic index (the base's
    node is `CopySlices`), else `index_put` on `t` (`IndexPutBackward0`), as PyTorch."""
    if is_basic_index(index):
        copy_(F.getitem(t, index), value)
        return
    if isinstance(value, Tensor):
        value = astype(value, t.dtype)
    else:
        value = tensor(value, backend=t.backend, dtype=t.dtype)
    apply_inplace(t, lambda v: views.index_put(v, index, value))


METHODS = {
    "add_": add_,
    "sub_": sub_,
    "mul_": mul_,
    "div_": div_,
    "zero_": zero_,
    "fill_": fill_,
    "copy_": copy_,
    "__iadd__": add_,
    "__isub__": sub_,
    "__imul__": mul_,
    "__itruediv__": div_,
    "__setitem__": setitem,
}
