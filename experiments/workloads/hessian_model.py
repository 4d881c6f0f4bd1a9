"""The hessian experiment's model and derivatives, written once per style of API.

``Autograd`` is the part of the API that jaxstream shares with PyTorch
(``grad``, ``backward``, ``linear``, ``tanh``), so one function computes the
same math for both; the JAX versions compose ``jax.grad`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

INPUT_FEATURES = 16
HIDDEN_WIDTH = 64
HIDDEN_LAYERS = 6
SEED = 0
VARIANTS = {
    "hessian": "A: h = d/dx sum(dy/dx)",
    "training": "B: A, then sum(h**2) backpropagated into the weights",
}

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


def mlp(ad: Autograd, x: Any, params: Sequence[tuple[Any, Any]]) -> Any:
    h = x
    for w, b in params[:-1]:
        h = ad.tanh(ad.linear(h, w, b))
    w, b = params[-1]
    return ad.linear(h, w, b)


def input_hessian(
    ad: Autograd, x: Any, params: Sequence[tuple[Any, Any]], create_graph: bool
) -> Any:
    y = mlp(ad, x, params)
    (g,) = ad.grad(y.sum(), x, create_graph=True)
    (h,) = ad.grad(g.sum(), x, create_graph=create_graph)
    return h


def variant_outputs(ad: Autograd, variant: str, x: Any, params: Sequence[tuple[Any, Any]]) -> list:
    """Variant A returns [h]; variant B the weight and bias gradients, layer by layer."""
    if variant == "hessian":
        return [input_hessian(ad, x, params, create_graph=False)]
    h = input_hessian(ad, x, params, create_graph=True)
    ad.backward((h**2).sum())
    return [p.grad for layer in params for p in layer]


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


def jax_mlp(params: Any, x: Any) -> Any:
    import jax.numpy as jnp

    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w.T + b)
    w, b = params[-1]
    return h @ w.T + b


def jax_input_hessian(params: Any, x: Any) -> Any:
    """Variant A as a composition of ``jax.grad``."""
    import jax

    def first(x: Any) -> Any:
        return jax.grad(lambda x: jax_mlp(params, x).sum())(x)

    return jax.grad(lambda x: first(x).sum())(x)


def jax_training_loss(params: Any, x: Any) -> Any:
    """Variant B's loss; its ``jax.grad`` with respect to ``params`` is the training step."""
    return (jax_input_hessian(params, x) ** 2).sum()
