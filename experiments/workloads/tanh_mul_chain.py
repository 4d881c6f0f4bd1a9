"""A chain of tanh and multiply on 1,024 floats: ``y = tanh(y)``, then ``y = y * 1.0001``,
in turn, from a float32 vector of halves, and a sum for the backward. Each kernel is one pass
over 4 KiB, so what a framework adds to each op sets the pace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SIZE = 1024
FACTOR = 1.0001


def start() -> np.ndarray:
    """The chain's input, to be made a leaf or an array of each framework."""
    return np.full(SIZE, 0.5, np.float32)


def tape_chain(y: Any, length: int) -> Any:
    """``length`` ops (``length`` even) on a tensor of a define-by-run framework, written as
    its users write them."""
    for _ in range(length // 2):
        y = y.tanh()
        y = y * FACTOR
    return y


def op_chain(y: Any, length: int, tanh: Callable[[Any], Any],
             multiply: Callable[[Any, float], Any]) -> Any:
    """The same ops on an array, each one call of ``tanh`` or ``multiply``."""
    for _ in range(length // 2):
        y = tanh(y)
        y = multiply(y, FACTOR)
    return y


def parameters(length: int) -> dict[str, Any]:
    """The chain's entries of an experiment's parameters."""
    return {"size": SIZE, "dtype": "float32", "factor": FACTOR, "start": 0.5, "ops": length}
