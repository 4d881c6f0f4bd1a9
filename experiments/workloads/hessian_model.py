"""The hessian experiment's model and derivatives, written once per style of API.

``Autograd`` is the part of the API that jaxstream shares with PyTorch
(``grad``, ``backward``, ``linear``, ``tanh``, ``relu``), so one function computes
the same math for both, and for ``torch.func``, whose transforms take the same
functions; the JAX versions compose ``jax.grad`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments.harness.peers import JAX_PRECISION

INPUT_FEATURES = 16
HIDDEN_WIDTH = 64
HIDDEN_LAYERS = 6
SEED = 0
ACTIVATIONS = ("tanh", "relu")
"""Ours first, whose input Hessian is not zero; then PR #82544's, whose is zero almost
everywhere (the products that compute it run all the same)."""
VARIANTS = {
    "hessian": "A: h = d/dx sum(dy/dx)",
    "training": "B: A, then sum(h**2) backpropagated into the weights",
}
"""Ours: A's second grad records no graph, as nothing differentiates h; B's does."""
PR_FORM = "hessian_pr"
ALL_VARIANTS = {
    "hessian": VARIANTS["hessian"],
    PR_FORM: "A': A with create_graph=True on the second grad too, as PR #82544's snippet",
    "training": VARIANTS["training"],
}
"""Ours, and A in the form of PR #82544's snippet, which passes create_graph=True to both
grads."""
WORKLOADS = {
    (variant if activation == ACTIVATIONS[0] else f"{activation} {variant}"): (activation, variant)
    for activation in ACTIVATIONS
    for variant in ALL_VARIANTS
}
"""Every (activation, variant) by its key: tanh's by the variant's name alone, as before ReLU's
were added, so that a record keeps the keys the paper cites."""

Parameters = list[tuple[np.ndarray, np.ndarray]]
"""(weight (out, in), bias) per layer, as in ``torch.nn.Linear``."""


def init_parameters(seed: int = SEED) -> Parameters:
    """Weights scaled by 1/sqrt(fan_in), so that tanh stays out of saturation."""
    rng = np.random.default_rng(seed)
    widths = [INPUT_FEATURES, *([HIDDEN_WIDTH] * HIDDEN_LAYERS), 1]
    return [
        (
            rng.normal(0.0, fan_in**-0.5, (fan_out, fan_in)).astype(np.float32),
            rng.normal(0.0, 0.1, fan_out).astype(np.float32),
        )
        for fan_in, fan_out in zip(widths, widths[1:], strict=False)
    ]


def init_inputs(batch: int, seed: int = SEED + 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(batch, INPUT_FEATURES)).astype(np.float32)


@dataclass(frozen=True)
class Autograd:
    grad: Callable[..., Any]
    backward: Callable[..., Any]
    linear: Callable[..., Any]
    tanh: Callable[[Any], Any]
    relu: Callable[[Any], Any]


def mlp(ad: Autograd, x: Any, params: Sequence[tuple[Any, Any]], activation: str = "tanh") -> Any:
    act = getattr(ad, activation)
    h = x
    for w, b in params[:-1]:
        h = act(ad.linear(h, w, b))
    w, b = params[-1]
    return ad.linear(h, w, b)


def input_hessian(
    ad: Autograd, x: Any, params: Sequence[tuple[Any, Any]], create_graph: bool,
    activation: str = "tanh",
) -> Any:
    y = mlp(ad, x, params, activation)
    (g,) = ad.grad(y.sum(), x, create_graph=True)
    (h,) = ad.grad(g.sum(), x, create_graph=create_graph)
    return h


def variant_outputs(ad: Autograd, variant: str, x: Any, params: Sequence[tuple[Any, Any]],
                    activation: str = "tanh") -> list:
    """Variants A and A' return [h]; variant B the weight and bias gradients, layer by layer."""
    if variant != "training":
        return [input_hessian(ad, x, params, variant == PR_FORM, activation)]
    h = input_hessian(ad, x, params, create_graph=True, activation=activation)
    ad.backward((h**2).sum())
    return [p.grad for layer in params for p in layer]


def reaches_input(ad: Autograd, x: Any, params: Sequence[tuple[Any, Any]], activation: str) -> bool:
    """Whether grad(sum(dy/dx), x) finds a path back to x through ``activation``'s backward
    recorded under create_graph (PyTorch's relu backward has one, whose gradient is zero)."""
    y = mlp(ad, x, params, activation)
    (g,) = ad.grad(y.sum(), x, create_graph=True)
    (h,) = ad.grad(g.sum(), x, allow_unused=True)
    return h is not None


def func_input_hessian(ad: Autograd, params: Any, x: Any, activation: str = "tanh") -> Any:
    """Variant A through ``torch.func``: the forward-over-reverse product that
    ``torch.func.hessian`` (jacfwd of jacrev) takes with every basis tangent, taken with the
    one tangent, all ones, whose product is h."""
    import torch
    from torch.func import grad, jvp

    def total(x: Any) -> Any:
        return mlp(ad, x, params, activation).sum()

    return jvp(grad(total), (x,), (torch.ones_like(x),))[1]


def func_training_loss(ad: Autograd, params: Any, x: Any, activation: str = "tanh") -> Any:
    """Variant B's loss; its ``torch.func.grad`` with respect to ``params`` is the step."""
    return (func_input_hessian(ad, params, x, activation) ** 2).sum()


def unused_bias_layers(ad: Autograd, x: Any, params: Sequence[tuple[Any, Any]]) -> list[int]:
    """Layers whose bias gets None from grad(sum(dy/dx), [x, biases], allow_unused=True).

    dy/dx does not depend on the output layer's bias, so exactly that layer's
    bias gradient must come back None; hidden biases reach it through tanh'.
    """
    y = mlp(ad, x, params)
    (g,) = ad.grad(y.sum(), x, create_graph=True)
    biases = [b for _, b in params]
    grads = ad.grad(g.sum(), [x, *biases], allow_unused=True)
    return [layer for layer, grad in enumerate(grads[1:]) if grad is None]


def jax_mlp(params: Any, x: Any, activation: str = "tanh") -> Any:
    """``mlp`` in JAX, its products in float32 as every peer's (Note [Float32 products in
    every peer] in experiments/harness/peers.py)."""
    import jax
    import jax.numpy as jnp

    act = getattr(jax.nn, activation)
    h = x
    for w, b in params[:-1]:
        h = act(jnp.matmul(h, w.T, precision=JAX_PRECISION) + b)
    w, b = params[-1]
    return jnp.matmul(h, w.T, precision=JAX_PRECISION) + b


def jax_input_hessian(params: Any, x: Any, activation: str = "tanh") -> Any:
    """Variant A as a composition of ``jax.grad``."""
    import jax

    def first(x: Any) -> Any:
        return jax.grad(lambda x: jax_mlp(params, x, activation).sum())(x)

    return jax.grad(lambda x: first(x).sum())(x)


def jax_training_loss(params: Any, x: Any, activation: str = "tanh") -> Any:
    """Variant B's loss; its ``jax.grad`` with respect to ``params`` is the training step."""
    return (jax_input_hessian(params, x, activation) ** 2).sum()
