"""Calling a node's hooks around its backward, and checking what they return.

Note [Hook order]
~~~~~~~~~~~~~~~~~
For each node: tensor pre-hooks (registered on the tensors whose gradient is
this node's input), then the retains_grad hooks (always last among tensor
hooks; they move to a tensor's new grad_fn after an in-place op), then node
pre-hooks, then the node, then node post-hooks. A node that is only captured by
`grad(inputs=...)` and not needed runs its tensor pre-hooks (so hooks on the
tensors passed as `inputs=` fire) but not its node pre-hooks. A leaf's
post-accumulate-grad hooks run last, inside its AccumulateGrad, once `.grad`
holds the sum (Note [Post-accumulate hooks] in node.py).

Every hook is called through the installed instrumentation (Note
[Instrumentation]), so a profiler sees each one. What a hook returns is checked
by hook_results.py (Note [Hook results]).
"""

from __future__ import annotations

from typing import Any

from .. import instrumentation
from .hook_results import checked_node_hook_result, checked_tensor_hook_result
from .node import Node


def call_tensor_pre_hooks(graph_task: Any, fn: Node, inputs: list) -> list:
    """Tensor hooks, then retains_grad hooks, on the gradients flowing into `fn`."""
    observer = instrumentation.current()
    hooks = fn.tensor_pre_hooks
    if hooks:
        for output_nr, hook in list(hooks.values()):
            grad = inputs[output_nr]
            if grad is None:
                continue
            result = observer.call_hook("tensor_pre", graph_task, fn, hook, grad)
            if result is not None:
                inputs[output_nr] = checked_tensor_hook_result(fn, output_nr, hook, grad, result)
    retains = fn.retains_grad_hooks
    if retains:
        for output_nr, hook in list(retains.items()):
            observer.call_hook("retains_grad", graph_task, fn, hook, inputs[output_nr])
    return inputs


def call_pre_hooks(graph_task: Any, fn: Node, inputs: list) -> list:
    observer = instrumentation.current()
    for hook in list(fn.pre_hooks.values()):
        result = observer.call_hook("pre", graph_task, fn, hook, tuple(inputs))
        if result is not None:
            inputs = checked_node_hook_result(fn, "pre hook", hook, inputs, result)
    return inputs


def call_post_hooks(graph_task: Any, fn: Node, outputs: list, inputs: list) -> list:
    observer = instrumentation.current()
    for hook in list(fn.post_hooks.values()):
        result = observer.call_hook("post", graph_task, fn, hook, tuple(outputs), tuple(inputs))
        if result is not None:
            outputs = checked_node_hook_result(fn, "post hook", hook, outputs, result)
    return outputs
