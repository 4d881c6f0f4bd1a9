"""In-place ops: `add_`, `mul_`, `zero_`, `copy_`, as a rebinding of the tensor.

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
old value); the retains_grad hook moves to the new grad_fn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..autograd.grad_mode import state as grad_state
from ..tensor import Tensor
from . import functional as F


def apply_inplace(t: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """Run the out-of-place `fn` on `t`'s value, then rebind `t` to the result (Note above)."""
    if t.is_leaf and t.requires_grad and grad_state.grad_enabled:
        raise RuntimeError(
            f"a leaf tensor that requires grad (shape {t.shape}) is being used in an "
            "in-place operation; wrap the update in `with js.no_grad():` or use an "
            "out-of-place op."
        )
    # The alias has a version counter of its own: what the op saves of it stays valid.
    before = Tensor.wrap(t.array, t.array_backend, t.device)
    if t.grad_fn is not None:
        # A leaf that requires grad gets here only under no_grad, where nothing is recorded.
        before.set_history(t.grad_fn, t.output_nr)
    result = fn(before)
    if result.shape != t.shape:
        raise RuntimeError(
            f"in-place result has shape {result.shape}, which cannot be stored in a tensor "
            f"of shape {t.shape}"
        )
    if result.dtype != t.dtype:
        result = F.astype(result, t.dtype)
    t.rebind(result.array)
    if result.grad_fn is not None:
        old_fn, old_nr = t.grad_fn, t.output_nr
        t.set_history(result.grad_fn, result.output_nr)
        t.move_retains_grad_hook(old_fn, old_nr)
    return t


def add_(t: Tensor, other: Any) -> Tensor:
    return apply_inplace(t, lambda v: v + other)


def mul_(t: Tensor, other: Any) -> Tensor:
    return apply_inplace(t, lambda v: v * other)


def zero_(t: Tensor) -> Tensor:
    return apply_inplace(t, F.zero_grad_to_history)


def copy_(t: Tensor, src: Any) -> Tensor:
    return apply_inplace(t, lambda v: F.copy_into(v, src))


METHODS = {
    "add_": add_,
    "mul_": mul_,
    "zero_": zero_,
    "copy_": copy_,
}
