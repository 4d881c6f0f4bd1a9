"""What native mode refuses: backwards written by hand, which JAX's own AD would skip.

See Note [Engine mode and native mode] in `bridge.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax

from ..autograd.function import FunctionNode
from ..autograd.node import Node
from .exchange import is_tensor
from .node import JaxCall


def refuse_custom_backwards(caller: str, outputs: Any) -> None:
    """Raise if the graph of `outputs` holds a custom Function or a hook, naming its node."""
    for node in _graph(outputs):
        what = _skipped_by_jax(node)
        if what is not None:
            raise NotImplementedError(
                f"{caller} (mode='native'): the graph of its outputs holds {what} "
                f"({node.name()}), which JAX's own differentiation would skip: JAX "
                f"differentiates the traced forward ops and never calls a jaxstream backward "
                f"or hook. Use to_jax(fn, mode='engine') so that jaxstream's engine computes "
                f"the gradient, or write the op with js.jax_function (jax.custom_vjp inside "
                f"for a custom gradient)"
            )


def _skipped_by_jax(node: Node) -> str | None:
    """What JAX would skip at `node`: a custom Function's backward, a hook, or nothing."""
    is_jax_function = isinstance(getattr(node, "jax_call", None), JaxCall)
    if isinstance(node, FunctionNode) and not is_jax_function:
        return "a custom autograd.Function"
    if node.tensor_pre_hooks or node.retains_grad_hooks:
        return "a tensor hook (register_hook or retain_grad)"
    if node.pre_hooks or node.post_hooks:
        return "a node hook"
    return None


def _graph(outputs: Any) -> Iterator[Node]:
    """Every node the gradients of `outputs` would pass, each once."""
    stack = [
        t.grad_fn
        for t in jax.tree.leaves(outputs, is_leaf=is_tensor)
        if is_tensor(t) and t.grad_fn is not None
    ]
    seen = {id(node) for node in stack}
    while stack:
        node = stack.pop()
        yield node
        for fn, _ in node.next_edges:
            if fn is not None and id(fn) not in seen:
                seen.add(id(fn))
                stack.append(fn)
