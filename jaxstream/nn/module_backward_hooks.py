"""A Module's full backward hooks: identity nodes around one call's inputs and outputs.

Note [Full backward hooks]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A module's backward is no single node: its forward records many, and the
gradients of its inputs and outputs reach the engine at different nodes and
times. So a call with full backward (pre-)hooks passes its positional Tensor
inputs through one identity `BackwardHookFunction` before `forward`, and its
output Tensors (the output, or the Tensors of an output tuple) through another
after the forward hooks, as PyTorch does. The forward sees the inputs' aliases
and the caller gets the output's aliases; each identity is one node whose
gradients are all the module's gradients of that side at once:

- the output node's pre-hook receives the gradients of the outputs. It runs
  the backward pre-hooks `hook(module, grad_output)`, each of which may return
  replacements, and keeps the result as this call's `grad_output`;
- the input node's post-hook receives the gradients of the inputs, after the
  whole module's backward. It runs the full backward hooks
  `hook(module, grad_input, grad_output)`, each of which may return a
  replacement `grad_input`, which is what flows on to the inputs.

`grad_input` has one entry per positional argument and `grad_output` one per
output value, None where the value is not a Tensor, or is one that does not
require grad (PyTorch passes zeros for such an input), or is an output that
gets no gradient; an input that requires grad but that the outputs do not
depend on gets zeros, as in PyTorch. Each backward through the call fires each
hook once. Where no input requires grad, there is no input node: the full
backward hooks run at the output node with `grad_input` all None (with
PyTorch's warning), and may only return None. Where none of a side's Tensors
requires grad, or grad mode is off, that side is not wrapped. Where a gradient
reaches the input node without having passed the output node (a loss computed
from what the forward saw of an input), the full backward hooks are not called,
as in PyTorch. What a hook returns is checked as a node hook's result (Note
[Hook results] in autograd/hook_results.py), naming the module and the hook.
Under `js.to_jax(mode="engine")` the engine runs the backward, hooks included;
`mode="native"` refuses the identity nodes, as it refuses any custom backward
that JAX's differentiation would skip.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..autograd.function import Function, FunctionCtx
from ..autograd.grad_mode import state as grad_state
from ..autograd.hook_results import checked_node_hook_result
from ..autograd.node import Node, hook_name
from ..tensor import Tensor

if TYPE_CHECKING:
    from .module_hooks import ModuleHooks


class BackwardHookFunction(Function):
    """The identity on Tensors: one node that sees all of one side's gradients at once."""

    @staticmethod
    def forward(ctx: FunctionCtx, *tensors: Tensor) -> tuple:
        ctx.mark_non_differentiable(*(t for t in tensors if not t.requires_grad))
        return tensors

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Tensor | None) -> tuple:
        return grads


class BackwardHooks:
    """The full backward (pre-)hooks of one call of `module` (Note [Full backward hooks])."""

    def __init__(self, module: Any, hooks: ModuleHooks) -> None:
        self.module = module
        self.hooks = hooks
        self.n_inputs = 0
        self.input_positions: list[int] | None = None
        self.output_positions: list[int] = []
        self.n_outputs = 0
        self.grad_output: tuple | None = None
        self.nodes: dict[str, Node] = {}

    def wrap_inputs(self, args: tuple) -> tuple:
        """`args` with their Tensors through an identity node whose post-hook runs the hooks."""
        self.n_inputs = len(args)
        wrapped = _through_identity(args)
        if wrapped is None:
            return args
        new_args, self.nodes["input"], self.input_positions = wrapped
        self.nodes["input"].register_hook(self._on_input_gradients)
        return new_args

    def wrap_output(self, output: Any) -> Any:
        """`output` (a Tensor or a tuple) with its Tensors through an identity node whose
        pre-hook runs the backward pre-hooks."""
        is_tuple = isinstance(output, tuple)
        values = output if is_tuple else (output,)
        self.n_outputs = len(values)
        wrapped = _through_identity(values)
        if wrapped is None:
            return output
        new_values, self.nodes["output"], self.output_positions = wrapped
        self.nodes["output"].register_prehook(self._on_output_gradients)
        return new_values if is_tuple else new_values[0]

    def _on_output_gradients(self, grads: tuple) -> list:
        grad_output = _packed(grads, self.output_positions, self.n_outputs)
        for record in list(self.hooks.backward_pre.values()):
            result = record.fn(self.module, grad_output)
            if result is not None:
                grad_output = self._checked("output", "full backward pre-hook", record.fn,
                                            grad_output, result)
        self.grad_output = grad_output
        if self.input_positions is None:
            self._run_without_input_gradients()
        return [grad_output[i] for i in self.output_positions]

    def _run_without_input_gradients(self) -> None:
        if self.hooks.backward:
            warnings.warn(
                f"the full backward hooks of {type(self.module).__name__} fire at the "
                f"gradients of its outputs, with grad_input all None: no input of this call "
                f"requires grad",
                stacklevel=2,
            )
        grad_input = (None,) * self.n_inputs
        for record in list(self.hooks.backward.values()):
            result = record.fn(self.module, grad_input, self.grad_output)
            if result is not None and not (
                isinstance(result, tuple) and all(g is None for g in result)
            ):
                raise RuntimeError(
                    f"full backward hook '{hook_name(record.fn)}' of "
                    f"{type(self.module).__name__}: no input of this call requires grad, so "
                    f"the hook must return None or None for every gradient of grad_input"
                )
        self.grad_output = None

    def _on_input_gradients(self, grads: tuple, _grad_outputs: tuple) -> list | None:
        if self.grad_output is None:
            return None  # the gradient did not come through the output (Note above)
        grad_input = _packed(grads, self.input_positions, self.n_inputs)
        for record in list(self.hooks.backward.values()):
            result = record.fn(self.module, grad_input, self.grad_output)
            if result is not None:
                grad_input = self._checked("input", "full backward hook", record.fn,
                                           grad_input, result)
        self.grad_output = None
        return [grad_input[i] for i in self.input_positions]

    def _checked(self, side: str, kind: str, hook: Callable, old: tuple, new: Any) -> tuple:
        """A hook's replacement gradients, checked as a node hook's (Note [Hook results])."""
        where = f"{type(self.module).__name__}'s {kind}"
        return tuple(checked_node_hook_result(self.nodes[side], where, hook, list(old), new))


def _through_identity(values: tuple) -> tuple[tuple, Node, list[int]] | None:
    """`values` with their Tensors replaced by the outputs of one identity node, the node,
    and the Tensors' positions; None where no Tensor of them requires grad."""
    positions = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    if not grad_state.grad_enabled or not any(values[i].requires_grad for i in positions):
        return None
    outputs = BackwardHookFunction.apply(*(values[i] for i in positions))
    node = next(t.grad_fn for t in outputs if t.grad_fn is not None)
    new_values = list(values)
    for i, out in zip(positions, outputs, strict=True):
        new_values[i] = out
    return tuple(new_values), node, positions


def _packed(grads: tuple, positions: list[int], n: int) -> tuple:
    """One gradient per value: the Tensors' at their positions, None elsewhere."""
    packed: list = [None] * n
    for i, g in zip(positions, grads, strict=True):
        packed[i] = g
    return tuple(packed)
