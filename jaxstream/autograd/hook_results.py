"""What a hook may return in place of the gradients it was given: PyTorch's checks.

Note [Hook results]
~~~~~~~~~~~~~~~~~~~
A tensor hook (on a leaf too), a node pre-hook or a post-hook that returns a
gradient replaces the one it was given. As in PyTorch (`check_single_result`,
`check_variable_result`), the replacement must be a Tensor, not a raw array,
of the same shape, dtype, device and backend, and it may be None but may not
fill in a gradient that was None. Anything else is refused here, where the hook
is known, with the hook's name, the node, which gradient and what changed. A
change let through would surface far from the hook: a `sim:0` leaf whose hook
moved its gradient to the cpu got a cpu `.grad`, the next backward failed in
an `add`, and an optimizer step ran silently on it. Post-hooks included: their
gradients are no longer cast or summed back to fit, as a node's own are
(validate.py), since PyTorch refuses those changes in a hook too.

The checks run only on a hook's non-None result, so nodes without hooks, and
hooks that only observe, pay nothing (Note [A plain node in one frame] in
engine.py). A post-accumulate-grad hook must return None (Note [Post-accumulate
hooks] in node.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tensor import Tensor
from .node import Node, hook_name


def checked_tensor_hook_result(fn: Node, output_nr: int, hook: Callable, grad: Tensor,
                               result: Any) -> Tensor:
    """The non-None `result` of a tensor hook on `grad`, checked (Note [Hook results])."""
    where = f"hook '{hook_name(hook)}' on the gradient of output {output_nr} of {fn.name()}"
    _check_value(where, grad, result)
    return result


def checked_node_hook_result(fn: Node, kind: str, hook: Callable, old: list,
                             new: Any) -> list:
    """The non-None `new` gradients of a node `kind` ("pre hook", "post hook") that was
    given `old`, checked one by one (Note [Hook results])."""
    where = f"{kind} '{hook_name(hook)}' of {fn.name()}"
    if isinstance(new, tuple | list):
        new = list(new)
    elif isinstance(new, Tensor):
        new = [new]
    else:
        raise TypeError(
            f"{where} returned a {_type_name(new)}; return a tuple of js.Tensors or Nones, one "
            f"per gradient ({len(old)}), e.g. js.tensor(...), or None to keep them"
        )
    if len(new) != len(old):
        raise RuntimeError(f"{where} returned {len(new)} gradients, expected {len(old)}")
    for i, (original, result) in enumerate(zip(old, new, strict=True)):
        _check_value(f"{where}, gradient {i},", original, result)
    return new


def _check_value(where: str, original: Tensor | None, result: Any) -> None:
    """Raise, naming `where`, unless `result` may replace the gradient `original`."""
    if result is None:
        return
    if original is None:
        raise RuntimeError(
            f"{where} can't replace a None gradient with a non-None value; return None there"
        )
    if not isinstance(result, Tensor):
        raise TypeError(
            f"{where} returned a {_type_name(result)}; return a js.Tensor, e.g. js.tensor(...), "
            f"of the gradient's shape {tuple(original.shape)}, dtype {original.dtype} and "
            f"device {original.device}, or None to keep the gradient"
        )
    changed = _changed(original, result)
    if changed:
        raise RuntimeError(
            f"{where} has changed the {changed}; a hook must return a gradient of the shape, "
            "dtype, device and backend of the one it is given"
        )


def _changed(original: Tensor, result: Tensor) -> str:
    """What `result` changed of `original` ("dtype of value (was X got Y)"), or ''."""
    for what, was, got in (
        ("dtype", original.array.dtype, result.array.dtype),
        ("device", original.device, result.device),
        ("backend", original.array_backend.name, result.array_backend.name),
        ("size", tuple(original.shape), tuple(result.shape)),
    ):
        if was != got:
            return f"{what} of value (was {was} got {got})"
    return ""


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
