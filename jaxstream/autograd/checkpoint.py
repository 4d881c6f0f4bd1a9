"""Activation checkpointing: keep a region's inputs, recompute its insides in backward.

`checkpoint(fn, *args)` runs `fn` without recording a graph and records one
node instead. Its backward runs `fn` again on the saved inputs, with grad mode
on, and backpropagates through the recomputed graph from inside the outer
backward: a reentrant backward (Note [Reentrant backward] in threads.py).

- `use_reentrant=True` (PyTorch's historical variant) calls `backward()` on
  the recomputed outputs, which accumulates into detached copies of the
  inputs. It cannot tell which gradients an outer `grad()` or
  `backward(inputs=)` asks for, so it refuses to run under them.
- `use_reentrant=False` calls `grad()` on the recomputed outputs for exactly
  the inputs the outer backward needs (`ctx.needs_input_grad`), so it works
  under `grad()` and `backward(inputs=)` too.

With `preserve_rng_state=True` (the default, as PyTorch's) the forward's draws
without `key=` are recorded and the recomputation replays them, so a dropout
mask in the region is the same in both runs and the gradient is the forward's;
the replay draws nothing, so the global generator is where the forward left it
(Note [Where a draw takes its key] in randomness/sources.py). With False the
recomputation draws anew from the current source.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..randomness.sources import DrawLog, Recording, Replaying, drawing_from
from ..tensor import Tensor
from .api import backward, grad
from .exec_state import exec_state
from .function import Function, FunctionCtx
from .grad_mode import enable_grad

_INCOMPATIBLE = (
    "checkpoint with use_reentrant=True is incompatible with grad() and with passing "
    "inputs= to backward(): its backward accumulates into the leaves instead of returning "
    "the gradients asked for. Use checkpoint(..., use_reentrant=False), or call backward() "
    "without inputs=."
)


def _detached_inputs(args: tuple) -> list:
    """Fresh leaves for the recomputation; they require grad where the originals do.

    Plain aliases of the values, not `detach()`: under a JAX trace `detach()` also
    stops JAX's gradient, and JAX differentiating this backward (`jax.hessian` of a
    `to_jax` function) must see the recomputation depend on the inputs.
    """
    return [
        Tensor.wrap(a.array, a.array_backend, a.device).requires_grad_(a.requires_grad)
        if isinstance(a, Tensor) else a
        for a in args
    ]


def _differentiable(outputs: Any, grads: tuple) -> tuple[list, list]:
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    kept, kept_grads = [], []
    for out, g in zip(outputs, grads, strict=True):
        if isinstance(out, Tensor) and out.requires_grad and g is not None:
            kept.append(out)
            kept_grads.append(g)
    return kept, kept_grads


class _Checkpoint(Function):
    """The forward both variants share: run `run_function`, keep its inputs (and the log of
    its draws, unless `preserve_rng_state` is False)."""

    @staticmethod
    def forward(ctx: FunctionCtx, run_function: Callable, preserve_rng_state: bool,
                *args: Any) -> Any:
        ctx.run_function = run_function
        ctx.args = args
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        if not preserve_rng_state:
            ctx.draws = None
            return run_function(*args)
        with drawing_from(Recording()) as recording:
            out = run_function(*args)
        ctx.draws = recording.log
        return out


def _replaying(draws: DrawLog | None) -> Any:
    """The forward's draws again (Note [Where a draw takes its key]), or fresh ones."""
    if draws is None:
        return contextlib.nullcontext()
    return drawing_from(Replaying(draws, "checkpoint"))


def _recompute(ctx: FunctionCtx, grads: tuple) -> tuple[list, list, list]:
    """Runs the region again with grad on, from fresh leaves of the saved inputs.

    Returns those leaves, the differentiable outputs and their incoming gradients.
    """
    ctx.saved_tensors  # noqa: B018  (raises if the graph was freed)
    inputs = _detached_inputs(ctx.args)
    with enable_grad(), _replaying(ctx.draws):
        outputs = ctx.run_function(*inputs)
    kept, kept_grads = _differentiable(outputs, grads)
    return inputs, kept, kept_grads


class _ReentrantCheckpoint(_Checkpoint):
    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> tuple:
        if not exec_state.checkpoint_valid:
            raise RuntimeError(_INCOMPATIBLE)
        inputs, kept, kept_grads = _recompute(ctx, grads)
        if kept:
            backward(kept, kept_grads)
        return (None, None, *(a.grad if isinstance(a, Tensor) else None for a in inputs))


class _NonReentrantCheckpoint(_Checkpoint):
    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> tuple:
        needs = ctx.needs_input_grad[2:]
        inputs, kept, kept_grads = _recompute(ctx, grads)
        wanted = [a for a, need in zip(inputs, needs, strict=True) if need]
        found = iter(grad(kept, wanted, kept_grads, allow_unused=True) if kept and wanted else ())
        return (None, None, *(next(found, None) if need else None for need in needs))


def checkpoint(function: Callable, *args: Any, use_reentrant: bool = True,
               preserve_rng_state: bool = True) -> Any:
    """`function(*args)`, with its intermediate values recomputed in backward instead of kept;
    the recomputation draws what the forward drew unless `preserve_rng_state=False`."""
    variant = _ReentrantCheckpoint if use_reentrant else _NonReentrantCheckpoint
    return variant.apply(function, bool(preserve_rng_state), *args)
