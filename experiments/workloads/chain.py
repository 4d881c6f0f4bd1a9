"""The tiny-tensor chain: ``y = y * 1.0001`` repeated from a (4,) float32 tensor of ones,
then a sum; the arithmetic is negligible, so an engine's per-node bookkeeping sets its time."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

SHAPE = (4,)
FACTOR = 1.0001


def start() -> np.ndarray:
    """The chain's input, to be made a leaf of each framework."""
    return np.ones(SHAPE, np.float32)


def loss(leaf: Any, length: int, hook: Callable[[Any], object] | None = None) -> Any:
    """``length`` multiplications and a sum, on any framework's tensors; ``hook`` is
    registered on every product."""
    y = leaf
    for _ in range(length):
        y = y * FACTOR
        if hook is not None:
            y.register_hook(hook)
    return y.sum()


def parameters(lengths: Sequence[int]) -> dict[str, Any]:
    """The chain's entries of an experiment's parameters."""
    return {
        "shape": list(SHAPE),
        "dtype": "float32",
        "chain_factor": FACTOR,
        "chain_lengths": list(lengths),
    }
