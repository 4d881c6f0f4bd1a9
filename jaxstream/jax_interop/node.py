"""One `jax_function` call as an autograd node: its forward, its backward, `backward_trace`.

Note [How a jax_function node runs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The forward runs `jax.vjp` of the function under `jax.jit`, compiled once per
input signature, per pattern of which inputs need a gradient and per autocast
state. Inputs that need no gradient are closed over, so the VJP has no
cotangent for them. The residuals of the VJP returned by the forward (the
saved activations) become saved tensors of the node, so the engine frees them
after a backward that does not retain the graph; the backward rebuilds the VJP
and runs it under a second `jax.jit`, compiled once per pattern of which
gradients the engine asks for (`ctx.needs_input_grad`), and XLA drops the
cotangents nobody asked for.

Under `create_graph=True` the backward is itself a `jax_function`: it recomputes
`jax.vjp` from the saved inputs, so its node is differentiable in turn and
gradients of any order flow through.

Both programs are traced when they are first needed, but the autocast state
the backward is traced under is fixed at forward time by
`js.config.backward_pass_autocast` (see `jaxstream/config.py`).

On an accelerator each program is one kernel on the stream of its tensors
(`stream_for`), reading the tensors and making the results: on a GPU the
inputs enter XLA by DLPack, which orders XLA's stream after CuPy's current one,
and the results leave the same way, so the program is ordered like a kernel
of that stream; its watchers are told so (`_launched`): on `sim` the sanitizer checks it and
an open virtual clock charges it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from .. import amp, config, device_events
from ..autograd.function import Function
from ..autograd.grad_mode import state as grad_state
from ..backends import Backend, get_backend
from ..devices import Device
from ..streams import stream_for
from ..tensor import Tensor, tensor
from .backward import BackwardKey, gradient_sharding, run_backward
from .checks import check_constant, check_tensor, jax_function_statics
from .exchange import as_jax_array, is_tensor, tensor_from_jax
from .signature import CallSignature, OutputSignature
from .statics import without_statics

if TYPE_CHECKING:
    # The op's class; in this module `JaxFunction` is the node class, named for the nodes.
    from .function import JaxFunction as JaxFunctionOp


class JaxCall:
    """One call of a `JaxFunction`: its tensors, closed-over constants and signature.

    The node keeps it (as `ctx.jax_call`) for the backward; the VJP's residuals
    are saved tensors of the node, so the engine frees them after a backward
    that does not retain the graph, as it does any saved activation.
    """

    function: JaxFunctionOp
    backend: Backend
    device: Device | None
    tensors: tuple
    n_tensors: int
    diff_positions: tuple[int, ...]
    consts: list
    signature: CallSignature
    outputs: OutputSignature
    shardings: tuple
    cotangent_shardings: tuple
    backward_autocast: np.dtype | None
    vjp_tree: Any

    @classmethod
    def prepare(cls, function: JaxFunctionOp, args: tuple, kwargs: dict) -> JaxCall:
        """The call of `function` on `args` and `kwargs`, its arguments checked and sorted."""
        statics = jax_function_statics(function, args)
        tree = (without_statics(args, statics), kwargs)
        leaves, in_tree = jax.tree.flatten(tree, is_leaf=is_tensor)
        call = cls()
        call.function = function
        kinds = call._sort_leaves(tree, leaves)
        call.backend = call._common_backend()
        # An accelerator's results go back to it; host results stay untagged (cpu, sharded).
        call.device = next((t.device for t in call.tensors if t.device.is_accelerator), None)
        call.signature = CallSignature(in_tree, statics, kinds, amp.current_dtype())
        return call

    def _sort_leaves(self, tree: Any, leaves: Sequence) -> tuple[str, ...]:
        """Each leaf's kind: differentiated ("diff") or closed over ("const"), checked first."""
        name = self.function.name
        grad_on = grad_state.grad_enabled
        kinds, self.consts, tensors, diff_positions = [], [], [], []
        for index, leaf in enumerate(leaves):
            if not is_tensor(leaf):
                check_constant(name, leaf, tree, index)
                kinds.append("const")
                self.consts.append(as_jax_array(leaf))
                continue
            check_tensor(name, leaf, tree, index)
            if grad_on and leaf.requires_grad:
                diff_positions.append(len(tensors))
                kinds.append("diff")
            else:
                kinds.append("const")
                self.consts.append(as_jax_array(leaf.array))
            tensors.append(leaf)
        self.tensors = tuple(tensors)
        self.n_tensors = len(tensors)
        self.diff_positions = tuple(diff_positions)
        return tuple(kinds)

    def _common_backend(self) -> Backend:
        """The backend of every tensor argument, where the outputs go back (JAX if none)."""
        backends = {t.array_backend for t in self.tensors}
        if len(backends) > 1:
            raise ValueError(
                f"jax_function '{self.function.name}': the tensor arguments belong to several "
                f"backends ({', '.join(sorted(b.name for b in backends))}); convert them to one "
                f"first, e.g. t.to(backend='jax')"
            )
        return backends.pop() if backends else get_backend("jax")

    def wrap(self, array: jax.Array) -> Tensor:
        """A JAX result as a tensor of the caller's backend."""
        return tensor_from_jax(array, self.backend, self.device)

    def record(self) -> Any:
        """The outputs, computed by a `JaxFunction` node; the call keeps no tensors after it."""
        flat = self.function.node.apply(self, *self.tensors)
        self.tensors = ()
        return jax.tree.unflatten(self.outputs.tree, list(flat))

    def forward(self, ctx: Any, tensors: Sequence) -> tuple:
        """The node's forward: run the compiled VJP, save its residuals on the node."""
        diff = [as_jax_array(tensors[i].array) for i in self.diff_positions]
        out, vjp_fn = self.function.forward_program(self.signature)(diff, self.consts)
        leaves, tree = jax.tree.flatten(out)
        residuals, self.vjp_tree = jax.tree.flatten(vjp_fn)
        self.outputs = OutputSignature.of(leaves, tree)
        self.shardings = tuple(gradient_sharding(a) for a in diff)
        self.cotangent_shardings = tuple(
            gradient_sharding(a) for a, d in zip(leaves, self.outputs.differentiable, strict=True)
            if d
        )
        forward_state = amp.AutocastState(self.signature.autocast)
        self.backward_autocast = config.backward_autocast_state(forward_state).dtype
        ctx.jax_call = self
        ctx.save_for_backward(
            *(tensors[i] for i in self.diff_positions), *(tensor(r) for r in residuals)
        )
        wrapped = tuple(self.wrap(a) for a in leaves)
        self._launched(tensors, wrapped)
        ctx.mark_non_differentiable(
            *(t for t, d in zip(wrapped, self.outputs.differentiable, strict=True) if not d)
        )
        return wrapped

    def _launched(self, reads: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """The program ran as one kernel on the stream of its device (see the module's Note)."""
        dev = self.device
        if dev is None:
            return
        with dev.kind.guard(dev.index):  # Note [The watchers' bus]
            device_events.program_launched(
                stream_for(dev, self.backend), self.function.name,
                [t.array for t in reads], [t.array for t in outputs],
            )

    def backward_key(self, needs_input_grad: Sequence[bool]) -> BackwardKey:
        """What the backward computes when the engine asks for `needs_input_grad`."""
        wanted = tuple(bool(needs_input_grad[i]) for i in self.diff_positions)
        return BackwardKey(self.outputs, wanted, self.shardings, self.backward_autocast)

    def stored_vjp(self, ctx: Any) -> Callable:
        """The forward's VJP, rebuilt from the residuals saved on the node."""
        saved = ctx.saved_tensors
        residuals = [t.array for t in saved[len(self.diff_positions) :]]
        return jax.tree.unflatten(self.vjp_tree, residuals)

    def backward(self, ctx: Any, grads: Sequence) -> tuple:
        """The node's backward: the wanted gradients, differentiable under grad mode."""
        key = self.backward_key(ctx.needs_input_grad[1:])
        result: list = [None] * self.n_tensors
        if not any(key.wanted):
            return tuple(result)
        cts = [g for g, d in zip(grads, self.outputs.differentiable, strict=True) if d]
        if grad_state.grad_enabled:
            computed = self._differentiable_backward(ctx, key, cts)
        else:
            program = self.function.backward_program()
            arrays = program(key, self.stored_vjp(ctx), self._cotangents(cts))
            computed = [self.wrap(a) for a in arrays]
            self._launched(cts, computed)
        wanted = [i for i, w in zip(self.diff_positions, key.wanted, strict=True) if w]
        for position, grad in zip(wanted, computed, strict=True):
            result[position] = grad
        return tuple(result)

    def _cotangents(self, cts: Sequence) -> list:
        """The output gradients as JAX arrays, each spread as its output was: the engine makes
        them on one device (its cpu's, for an output spread over several host devices), and
        the VJP's program takes them beside residuals that are spread."""
        arrays = [as_jax_array(g.array) for g in cts]
        return [
            a if sharding is None or a.sharding == sharding else jax.device_put(a, sharding)
            for a, sharding in zip(arrays, self.cotangent_shardings, strict=True)
        ]

    def _differentiable_backward(self, ctx: Any, key: BackwardKey, cts: Sequence) -> list:
        diff = list(ctx.saved_tensors[: len(self.diff_positions)])
        vjp = self.function.vjp_function(self.signature, key)
        if key.autocast is None:
            region = amp.autocast(enabled=False)
        else:
            region = amp.autocast(key.autocast)
        with region:
            return list(vjp(diff, self.consts, list(cts)))


class JaxFunction(Function):
    """The node of a `jax_function` call (see Note [How a jax_function node runs]).

    Named like the op, so that its nodes read `JaxFunctionBackward`; a call of
    `jax_function(..., name="Foo")` records a subclass from `node_class`.
    """

    @staticmethod
    def forward(ctx: Any, call: JaxCall, *tensors: Tensor) -> tuple:
        return call.forward(ctx, tensors)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple:
        return (None, *ctx.jax_call.backward(ctx, grads))


@functools.cache
def node_class(name: str) -> type[JaxFunction]:
    """The node class of `jax_function(..., name=name)`, so that its nodes read `<name>Backward`.

    One class per name, as a custom Function's nodes read `<ClassName>Backward`.
    """
    return type(name, (JaxFunction,), {"__doc__": f"The node of a jax_function named {name!r}."})


def backward_trace(grad_fn: Any, needs_input_grad: Sequence[bool] | None = None) -> Any:
    """The program a `jax_function` node's backward runs, traced for inspection.

    `needs_input_grad` has one flag per tensor argument (default: every one that
    required grad). The result is a `jax.stages.Traced`: `.jaxpr` shows the dtypes
    of the backward's matmuls, `.lower().as_text()` what XLA compiles (only the
    wanted cotangents).
    """
    call = getattr(grad_fn, "jax_call", None)
    if not isinstance(call, JaxCall):
        name = grad_fn.name() if hasattr(grad_fn, "name") else type(grad_fn).__name__
        raise TypeError(f"backward_trace: {name} is not the node of a jax_function call")
    if needs_input_grad is None:
        needs_input_grad = [i in call.diff_positions for i in range(call.n_tensors)]
    if len(needs_input_grad) != call.n_tensors:
        raise ValueError(
            f"backward_trace: the node has {call.n_tensors} tensor inputs, got "
            f"{len(needs_input_grad)} needs_input_grad flags"
        )
    key = call.backward_key(needs_input_grad)
    cts = [
        jax.ShapeDtypeStruct(shape, dtype)
        for (shape, dtype), diff in zip(key.outputs.avals, key.outputs.differentiable, strict=True)
        if diff
    ]
    return jax.jit(run_backward, static_argnums=0).trace(key, call.stored_vjp(grad_fn), cts)
