"""`autograd.Function`: user-defined ops with a hand-written backward.

Note [ctx is not the node]
~~~~~~~~~~~~~~~~~~~~~~~~~~
`Function.apply` records a `FunctionNode`, the engine's node (slots only), and
hands forward and backward a separate `FunctionCtx`, as PyTorch keeps its C++
node apart from the Python ctx. ctx is the user's namespace: an attribute set
on it (`ctx.k`, but also `ctx.name`, `ctx.stream`, `ctx.next_functions`) lives
in ctx's own `__dict__`, and nothing the engine reads can be shadowed or
rerouted by it. ctx's methods write what the engine needs (tensors to save,
non-differentiable outputs, materialize_grads) into the node, which ctx reaches
through a weak reference: the node owns its ctx, so a graph holds no cycle and
is freed as soon as it is dropped. The node shows its ctx's attributes
(`grad_fn.k`, `grad_fn.saved_tensors`, `grad_fn.jax_call`) through
`__getattr__`, which Python calls only for names the node lacks, and
`grad_fn.needs_input_grad` is ctx's tuple, as on a PyTorch grad_fn.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..ops.creation import zeros
from ..tensor import Tensor, gradient_edge, is_floating
from . import anomaly
from .grad_mode import no_grad
from .grad_mode import state as grad_state
from .node import InputMetadata, Node, SavedTensor, freed_error


class FunctionNode(Node):
    """The backward node of one `Function.apply` call (Note [ctx is not the node])."""

    __slots__ = (
        "function",
        "ctx",
        "to_save",
        "saved",
        "non_differentiable",
        "materialize_grads",
        "forward_needs",
        "tensor_args",
    )

    def __init__(self, function: type[Function], args: tuple) -> None:
        super().__init__(())
        self.function = function
        self.tensor_args = tuple(isinstance(a, Tensor) for a in args)
        self.forward_needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        self.to_save: tuple | None = ()
        self.saved: list | None = None
        self.non_differentiable: set[int] = set()
        self.materialize_grads = True
        self.ctx = FunctionCtx(self)

    def __getattr__(self, name: str) -> Any:
        # Reached only for names the node lacks: its ctx's own attributes.
        if name == "ctx" or name.startswith("__"):
            raise AttributeError(name)
        try:
            return getattr(self.ctx, name)
        except AttributeError:
            raise AttributeError(
                f"{self.name()} has no attribute {name!r}, and neither has its ctx"
            ) from None

    @property  # type: ignore[override]  (a tuple here, as on a PyTorch grad_fn)
    def needs_input_grad(self) -> tuple:
        return self.ctx.needs_input_grad

    def name(self) -> str:
        return f"{self.function.__name__}Backward"

    @property
    def saved_tensors(self) -> tuple:
        if self.saved is None:
            if self.to_save is None:
                raise freed_error(self)
            return tuple(self.to_save)
        return tuple(s.unpack(self) if isinstance(s, SavedTensor) else s for s in self.saved)

    def apply(self, grads: list) -> list:
        if self.saved is None and self.to_save is None:
            raise freed_error(self)
        if self.materialize_grads:
            grads = [
                g if g is not None else _zeros_like_meta(meta)
                for g, meta in zip(grads, self.input_metadata, strict=True)
            ]
        trimmed = Node.needs_input_grad(self)
        needs = tuple(f and t for f, t in zip(self.forward_needs, trimmed, strict=True))
        self.ctx.needs_input_grad = needs
        result = self.function.backward(self.ctx, *grads)
        return self._checked(result if isinstance(result, tuple) else (result,), needs)

    def _checked(self, result: tuple, needs: tuple) -> list:
        """One gradient per forward argument, None where not needed; errors name the node."""
        n_args = len(self.next_edges)
        if len(result) != n_args:
            if len(result) > n_args and all(r is None for r in result[n_args:]):
                result = result[:n_args]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of gradients "
                    f"(expected {n_args}, got {len(result)})"
                )
        out = []
        for i, (g, is_tensor) in enumerate(zip(result, self.tensor_args, strict=True)):
            if g is not None and not is_tensor:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {i}, but the corresponding forward input was not a Tensor"
                )
            out.append(g if needs[i] else None)
        return out

    def release_variables(self) -> None:
        if self.saved:
            self.saved = None
            self.to_save = None

    def record_outputs(self, args: tuple, outputs: tuple) -> tuple:
        """Give the forward's outputs this node as grad_fn; save what forward asked to save."""
        self.next_edges = tuple(
            gradient_edge(a) if n else (None, 0)
            for a, n in zip(args, self.forward_needs, strict=True)
        )
        if anomaly.state.enabled:
            anomaly.stamp_creation(self)
        self.topological_nr = max(
            (fn.topological_nr + 1 for fn, _ in self.next_edges if fn is not None), default=0
        )
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        wrapped = []
        output_index: dict[int, int] = {}
        for returned in outputs:
            if not isinstance(returned, Tensor):
                wrapped.append(returned)
                continue
            out = returned.detach() if id(returned) in inputs_by_id else returned
            if (
                id(out) in self.non_differentiable
                or id(returned) in self.non_differentiable
                or not is_floating(out.dtype)
            ):
                out.detach_()
            else:
                out.set_history(self, len(self.input_metadata))
                output_index[id(returned)] = out.output_nr
                output_index[id(out)] = out.output_nr
            meta = InputMetadata(out)
            if self.stream is None:
                self.stream = meta.stream
            self.input_metadata.append(meta)
            wrapped.append(out)
        self.saved = [
            None if t is None
            else SavedTensor(t, output_index[id(t)]) if id(t) in output_index
            else SavedTensor(t)
            for t in self.to_save
        ]
        self.to_save = ()
        return tuple(wrapped)


class FunctionCtx:
    """What forward and backward see as `ctx`: the user's own namespace, not the node.

    See Note [ctx is not the node].
    """

    __slots__ = ("__node", "__dict__", "__weakref__")

    def __init__(self, node: FunctionNode) -> None:
        self.__node = weakref.ref(node)
        self.needs_input_grad: tuple = node.forward_needs

    def _node(self) -> FunctionNode:
        node = self.__node()
        if node is None:
            raise RuntimeError(
                "this ctx's backward node is gone: the outputs of its Function.apply were "
                "freed, and with them what it saved. Keep an output alive to use its ctx."
            )
        return node

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save tensors (or None), got {type(t).__name__}"
                )
        self._node().to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        return self._node().saved_tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._node().non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self._node().materialize_grads = bool(value)


def _zeros_like_meta(meta: InputMetadata) -> Tensor:
    return zeros(
        meta.shape, dtype=meta.dtype, backend=meta.array_backend.name, device=meta.device
    )


class Function:
    """Subclass with `@staticmethod forward(ctx, *args)` and `backward(ctx, *grads)`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} is an autograd.Function: call {type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement forward(ctx, *args)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        node = FunctionNode(cls, args)
        with no_grad():
            outputs = cls.forward(node.ctx, *args)
        is_tuple = isinstance(outputs, tuple)
        outputs = outputs if is_tuple else (outputs,)
        if grad_state.grad_enabled and any(node.forward_needs):
            outputs = node.record_outputs(args, outputs)
        return outputs if is_tuple else outputs[0]
