"""The scales of PyTorch's initialisers: the gain of a nonlinearity and a weight's fans.

Note [Fans of a weight]
~~~~~~~~~~~~~~~~~~~~~~~
A weight is laid out (out_features, in_features, *kernel): dim 1 is what a unit
reads and dim 0 what it writes, and every element of the kernel counts once
per channel. So fan_in = size(1) * receptive field and fan_out = size(0) *
receptive field, the receptive field being the product of the sizes after the
first two (1 for a Linear weight). A tensor of fewer than 2 dims has no fans.
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor

_LINEAR_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")
"""Nonlinearities that keep the variance of their input: gain 1."""
_GAINS = {"tanh": 5.0 / 3, "relu": math.sqrt(2.0), "selu": 3.0 / 4}
_MODES = ["fan_in", "fan_out"]


def calculate_gain(nonlinearity: str, param: int | float | None = None) -> float:
    """The factor that keeps activations' variance through `nonlinearity`, PyTorch's values;
    `param` is leaky_relu's negative slope (0.01 when None)."""
    if nonlinearity in _LINEAR_GAIN:
        return 1
    if nonlinearity in _GAINS:
        return _GAINS[nonlinearity]
    if nonlinearity != "leaky_relu":
        raise ValueError(
            f"Unsupported nonlinearity {nonlinearity}: calculate_gain takes one of "
            f"{list(_LINEAR_GAIN) + list(_GAINS) + ['leaky_relu']}"
        )
    if param is None:
        slope = 0.01
    elif isinstance(param, int | float) and not isinstance(param, bool):
        slope = param
    else:
        raise ValueError(
            f"negative_slope {param} not a valid number: calculate_gain('leaky_relu', param) "
            f"takes an int or float slope, or None for 0.01"
        )
    return math.sqrt(2.0 / (1 + slope**2))


def fan_in_and_fan_out(tensor: Tensor, caller: str = "_calculate_fan_in_and_fan_out"
                       ) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight (Note [Fans of a weight])."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(
            f"{caller}: Fan in and fan out can not be computed for tensor with fewer than 2 "
            f"dimensions (got shape {shape}); give a weight of shape (out_features, "
            f"in_features, *kernel_size), or use uniform_ / normal_ with an explicit scale"
        )
    receptive_field = math.prod(shape[2:])
    return shape[1] * receptive_field, shape[0] * receptive_field


def correct_fan(tensor: Tensor, mode: str, caller: str) -> int:
    """The fan that `mode` names: fan_in keeps the forward pass's variance, fan_out the
    backward's."""
    mode = mode.lower()
    if mode not in _MODES:
        raise ValueError(
            f"{caller}: Mode {mode} not supported, please use one of {_MODES} "
            f"(tensor of shape {tuple(tensor.shape)})"
        )
    fan_in, fan_out = fan_in_and_fan_out(tensor, caller)
    return fan_in if mode == "fan_in" else fan_out


def refuse_generator(generator: Any, caller: str) -> None:
    """jaxstream draws from keys, not generator objects: say what replaces one."""
    if generator is not None:
        raise TypeError(
            f"{caller}: generator= is not supported (got {type(generator).__name__}); pass "
            f"key= (an int seed or a JAX PRNG key) for a reproducible draw, or seed the global "
            f"generator with js.manual_seed(seed)"
        )
