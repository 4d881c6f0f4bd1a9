"""`grad` and `backward`: argument checking, then one call into the engine."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..ops.creation import ones_like, zeros_like
from ..ops.dispatch import apply
from ..ops.opdef import OpDef
from ..tensor import Tensor, gradient_edge, mismatch
from .engine import get_default_engine

_SEEDS = "a Tensor, None or a sequence of Tensors and Nones (one per output)"


def _ones(xp: Any, a: Any) -> Any:
    return xp.full(a.shape, 1, dtype=a.dtype)


# Note [The seed of a scalar output]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `loss.backward()` seeds the loss's node with ones of the loss's shape, dtype and device,
# as `ones_like` makes them. Made by `ones_like`, a factory, that costs JAX an eager
# `jnp.full` (about 60 us on the cpu, a fifth of a small model's backward) and NumPy the
# factory's placement logic; made as an op of the loss (not differentiable: no node), it
# is one compiled call on JAX and one NumPy call. An op reads its arguments as far as the
# stream sanitizer knows, where the seed reads nothing of the loss, so on an accelerator
# the seed is still made by `ones_like`.
_SEED = OpDef("ones_like", None, _ones)


def _seed(out: Tensor) -> Tensor:
    """Ones like `out`: the gradient of an output backpropagated without one (Note [The
    seed of a scalar output])."""
    return ones_like(out) if out.device.is_accelerator else apply(_SEED, out)


def _is_sequence(value: Any) -> bool:
    """A list or tuple, say; not a string, and not an array (which PyTorch would iterate)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _tensors(value: Any, name: str) -> tuple:
    """`outputs`/`inputs` as a tuple: a Tensor, or a sequence (its entries checked later)."""
    if isinstance(value, Tensor):
        return (value,)
    if not _is_sequence(value):
        raise TypeError(
            f"{name}: expected a Tensor or a sequence of Tensors, got {type(value).__name__}"
        )
    return tuple(value)


def _seeds(value: Any, name: str) -> tuple:
    """`grad_outputs` (or `gradient`, `grad_tensors`) as a tuple, () for None, in PyTorch's
    forms: a Tensor, None, or a sequence of Tensors and Nones."""
    if value is None:
        return ()
    if isinstance(value, Tensor):
        return (value,)
    if not _is_sequence(value):
        raise TypeError(
            f"{name}: expected {_SEEDS}, got {type(value).__name__}; make an array a tensor "
            "with js.tensor(...), of the output's shape, dtype and device"
        )
    for i, g in enumerate(value):
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(
                f"{name}[{i}] is a {type(g).__name__}; expected a Tensor or None: make it one "
                f"with js.tensor(...), of the shape, dtype and device of output {i}"
            )
    return tuple(value)


def _make_grads(outputs: tuple, grad_outputs: tuple, name: str) -> list:
    """Default and check the seed gradient of each output (`name` is the caller's argument)."""
    if grad_outputs and len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"{name} has {len(grad_outputs)} entries but there are {len(outputs)} outputs"
        )
    grads = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"output {i} is a {type(out).__name__}, expected a Tensor")
        g = grad_outputs[i] if grad_outputs else None
        if g is None:
            if out.numel() != 1:
                raise RuntimeError(
                    f"grad can be implicitly created only for scalar outputs (one element), but "
                    f"output {i} has shape {out.shape}; pass grad_outputs (or gradient=) of "
                    "that shape"
                )
            g = _seed(out)
        else:
            if g.shape != out.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                    f"output[{i}] has a shape of {out.shape}."
                )
            problem = mismatch(g, out, shape=False)
            if problem:
                raise RuntimeError(f"grad_output[{i}] does not match output[{i}]: {problem}")
        grads.append(g)
    return grads


def _root_edges(outputs: tuple) -> list:
    edges = []
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn "
                f"(shape {out.shape}); the output must come from a tensor with "
                "requires_grad=True, computed with grad mode on"
            )
        edges.append(gradient_edge(out))
    return edges


def _input_edges(inputs: tuple, what: str) -> list:
    edges = []
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}[{i}] is a {type(t).__name__}, expected a Tensor")
        if not t.requires_grad:
            raise RuntimeError(
                f"One of the differentiated Tensors does not require grad ({what}[{i}], shape "
                f"{t.shape})"
            )
        edges.append(gradient_edge(t))
    return edges


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
    materialize_grads: bool = False,
) -> tuple:
    """The sum of gradients of `outputs` with respect to each of `inputs` (nothing accumulates)."""
    outputs = _tensors(outputs, "outputs")
    inputs = _tensors(inputs, "inputs")
    if not inputs:
        raise ValueError("grad requires non-empty inputs.")
    grads = _make_grads(outputs, _seeds(grad_outputs, "grad_outputs"), "grad_outputs")
    roots = _root_edges(outputs)
    input_edges = _input_edges(inputs, "inputs")
    if retain_graph is None:
        retain_graph = create_graph
    result = get_default_engine().execute(
        roots, grads, retain_graph, create_graph, False, input_edges
    )
    out = []
    for i, g in enumerate(result):
        if g is None:
            if materialize_grads:
                g = zeros_like(inputs[i])
            elif not allow_unused:
                raise RuntimeError(
                    f"One of the differentiated Tensors (inputs[{i}], shape {inputs[i].shape}) "
                    "appears to not have been used in the graph. Set allow_unused=True if this "
                    "is the desired behavior."
                )
        out.append(g)
    return tuple(out)


_warned_create_graph_cycle = False


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Sequence[Tensor] | Tensor | None = None,
) -> None:
    """Accumulate the gradients of `tensors` into the `.grad` of the leaves (or of `inputs`)."""
    _backward(tensors, grad_tensors, "grad_tensors", retain_graph, create_graph, inputs)


def _backward(
    tensors: Any,
    seeds: Any,
    seeds_name: str,
    retain_graph: bool | None,
    create_graph: bool,
    inputs: Any,
) -> None:
    """`backward`, its seeds named `seeds_name` in errors (`gradient` for `Tensor.backward`)."""
    global _warned_create_graph_cycle
    outputs = _tensors(tensors, "tensors")
    if inputs is not None:
        inputs = _tensors(inputs, "inputs")
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    grads = _make_grads(outputs, _seeds(seeds, seeds_name), seeds_name)
    roots = _root_edges(outputs)
    input_edges = []
    if inputs:
        input_edges = _input_edges(inputs, "inputs")
        for t in inputs:
            if not t.is_leaf:
                t.retain_grad()
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph and not _warned_create_graph_cycle:
        _warned_create_graph_cycle = True
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between "
            "the parameter and its gradient, which can keep memory alive. Prefer grad() when "
            "creating the graph, or reset the .grad of your parameters to None after use.",
            UserWarning,
            stacklevel=3,
        )
    get_default_engine().execute(roots, grads, retain_graph, create_graph, True, input_edges)


def _tensor_backward(
    self: Tensor,
    gradient: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Accumulate the gradient of this tensor into the leaves' `.grad` (see `backward`)."""
    _backward(self, gradient, "gradient", retain_graph, create_graph, inputs)


# Tensor sits below the engine and never names it: the method is registered here.
Tensor.backward = _tensor_backward
