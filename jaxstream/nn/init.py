"""PyTorch's default initialisations, drawn from the global generator or from `key=`."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from ..ops.random import gaussian, uniform
from ..tensor import Tensor
from .parameter import Parameter


def split_key(key: Any, n: int) -> list:
    """`n` independent keys from one: a layer with several tensors draws each from its own.

    None stays None for each (every draw then takes a fresh seed of the global generator).
    """
    if key is None:
        return [None] * n
    if isinstance(key, jax.Array):
        return list(jax.random.split(key, n))
    return [int(s) for s in np.random.SeedSequence(key).generate_state(n, np.uint64)]


def kaiming_uniform(shape: tuple[int, ...], fan_in: int, *, key: Any = None,
                    **factory: Any) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): kaiming_uniform(a=sqrt(5)), torch's Linear weight.

    The same bound is torch's default for a Linear bias.
    """
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Parameter(uniform(shape, -bound, bound, key=key, **factory))


def standard_normal(shape: tuple[int, ...], *, key: Any = None, **factory: Any) -> Tensor:
    """N(0, 1), torch's Embedding weight."""
    return Parameter(gaussian(shape, key=key, **factory))
