"""`autograd.Function`: user-defined ops with a hand-written backward.

The node that `apply` records doubles as the `ctx` that forward and backward
see (as in PyTorch), so attributes set on ctx in forward are there in backward.
"""

from __future__ import annotations

from typing import Any

from ..ops.creation import zeros
from ..tensor import Tensor, gradient_edge, is_floating
from . import anomaly
from .grad_mode import no_grad
from .grad_mode import state as grad_state
from .node import InputMetadata, Node, SavedTensor, freed_error


class FunctionCtx(Node):
    """The context of one `Function.apply` call, and its backward node."""

    _function: type[Function]

    def __init__(self) -> None:
        super().__init__(())
        self.needs_input_grad: tuple = ()
        self.to_save: tuple = ()
        self.non_differentiable: set[int] = set()
        self.materialize_grads = True
        self._saved: list | None = None
        self._forward_needs: tuple = ()
        self._tensor_args: tuple = ()

    def name(self) -> str:
        return f"{self._function.__name__}Backward"

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save tensors (or None), got {type(t).__name__}"
                )
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            if self.to_save is None:
                raise freed_error(self)
            return tuple(self.to_save)
        return tuple(s.unpack(self) if isinstance(s, SavedTensor) else s for s in self._saved)

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self.non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def apply(self, grads: list) -> list:
        if self._saved is None and self.to_save is None:
            raise freed_error(self)
        if self.materialize_grads:
            grads = [
                g if g is not None else _zeros_like_meta(meta)
                for g, meta in zip(grads, self.input_metadata, strict=True)
            ]
        trimmed = Node.needs_input_grad(self)
        self.needs_input_grad = tuple(
            f and t for f, t in zip(self._forward_needs, trimmed, strict=True)
        )
        result = self._function.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
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
        for i, (g, is_tensor) in enumerate(zip(result, self._tensor_args, strict=True)):
            if g is not None and not is_tensor:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {i}, but the corresponding forward input was not a Tensor"
                )
            out.append(g if self.needs_input_grad[i] else None)
        return out

    def release_variables(self) -> None:
        if self._saved:
            self._saved = None
            self.to_save = None


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
        ctx = FunctionCtx()
        ctx._function = cls
        tensor_args = tuple(isinstance(a, Tensor) for a in args)
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx._forward_needs = needs
        ctx._tensor_args = tensor_args
        ctx.needs_input_grad = needs
        with no_grad():
            outputs = cls.forward(ctx, *args)
        is_tuple = isinstance(outputs, tuple)
        outputs = outputs if is_tuple else (outputs,)
        if not (grad_state.grad_enabled and any(needs)):
            return outputs if is_tuple else outputs[0]
        ctx.next_edges = tuple(
            gradient_edge(a) if n else (None, 0) for a, n in zip(args, needs, strict=True)
        )
        if anomaly.state.enabled:
            anomaly.stamp_creation(ctx)
        ctx.topological_nr = max(
            (fn.topological_nr + 1 for fn, _ in ctx.next_edges if fn is not None), default=0
        )
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        wrapped = []
        output_index: dict[int, int] = {}
        for out in outputs:
            if not isinstance(out, Tensor):
                wrapped.append(out)
                continue
            if id(out) in inputs_by_id:
                out = out.detach()
            if (
                id(out) in ctx.non_differentiable
                or id(outputs[len(wrapped)]) in ctx.non_differentiable
                or not is_floating(out.dtype)
            ):
                out.detach_()
            else:
                out.set_history(ctx, len(ctx.input_metadata))
                output_index[id(outputs[len(wrapped)])] = out.output_nr
                output_index[id(out)] = out.output_nr
            meta = InputMetadata.of(out)
            if ctx.stream is None:
                ctx.stream = meta.stream
            ctx.input_metadata.append(meta)
            wrapped.append(out)
        ctx._saved = [
            None if t is None
            else SavedTensor(t, output_index[id(t)]) if id(t) in output_index
            else SavedTensor(t)
            for t in ctx.to_save
        ]
        ctx.to_save = ()
        result = tuple(wrapped)
        return result if is_tuple else result[0]
