"""The digits MLP: its data, its initial weights and its loss in JAX.

The data are scikit-learn's digits (8x8 images, 10 classes), standardised, where
scikit-learn is installed (the ``examples`` extra); elsewhere seeded normal features
and random labels of the same shapes stand in, which cost the same to train on.
The model is 64 -> 64 -> 10 with ReLU, as ``Sequential(Linear, ReLU, Linear)``; its
weights are one state dict with PyTorch's keys, so that every peer starts from the
same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from experiments.harness.peers import JAX_PRECISION

FEATURES = 64
HIDDEN = 64
CLASSES = 10
LEARNING_RATE = 1e-3
SEED = 0
SYNTHETIC_SAMPLES = 1_797
"""As many samples as the digits data set has."""

StateDict = dict[str, np.ndarray]


class Data(NamedTuple):
    features: np.ndarray
    """(samples, FEATURES) float32, standardised per feature."""
    labels: np.ndarray
    """(samples,) int64 class indices."""
    source: str


def load(seed: int = SEED) -> Data:
    """The digits data set, or its seeded stand-in where scikit-learn is missing."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        rng = np.random.default_rng(seed)
        features = rng.standard_normal((SYNTHETIC_SAMPLES, FEATURES)).astype(np.float32)
        labels = rng.integers(0, CLASSES, SYNTHETIC_SAMPLES)
        return Data(features, labels, "synthetic (scikit-learn is not installed)")
    digits = load_digits()
    features = digits.data.astype(np.float32)
    features = (features - features.mean(axis=0)) / (features.std(axis=0) + 1e-6)
    return Data(features, digits.target.astype(np.int64), "scikit-learn digits")


def batches(data: Data, batch: int, seed: int = SEED) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Endless minibatches, each drawn without replacement by a seeded generator."""
    rng = np.random.default_rng(seed)
    while True:
        rows = rng.choice(len(data.labels), batch, replace=False)
        yield data.features[rows], data.labels[rows]


def init_state(seed: int = SEED, widths: tuple[int, ...] = (FEATURES, HIDDEN, CLASSES)
               ) -> StateDict:
    """PyTorch's default ``Linear`` initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), of a
    ``Sequential`` of Linear layers of ``widths`` with an activation between each two (its
    Linear layers are entries 0, 2, 4, ...)."""
    rng = np.random.default_rng(seed)
    state: StateDict = {}
    for layer, (fan_in, fan_out) in enumerate(zip(widths, widths[1:], strict=False)):
        bound = fan_in**-0.5
        weight = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        state[f"{2 * layer}.weight"] = weight
        state[f"{2 * layer}.bias"] = rng.uniform(-bound, bound, fan_out).astype(np.float32)
    return state


def jax_loss(params: dict[str, Any], features: Any, labels: Any) -> Any:
    """The mean cross-entropy of the MLP's logits, in JAX, over a state dict of arrays; its
    products in float32 (Note [Float32 products in every peer] in experiments/harness/peers.py)."""
    import jax
    import jax.numpy as jnp
    import optax

    def linear(x: Any, index: int) -> Any:
        weight, bias = params[f"{index}.weight"], params[f"{index}.bias"]
        return jnp.matmul(x, weight.T, precision=JAX_PRECISION) + bias

    logits = linear(jax.nn.relu(linear(features, 0)), 2)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
