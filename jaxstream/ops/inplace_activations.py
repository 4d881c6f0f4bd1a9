"""The in-place spellings of `torch.nn.functional`'s activations: `relu_`, `leaky_relu_`,
`elu_`, `selu_`, `celu_`, `hardtanh_` and `threshold_`.

Each is its function with `inplace=True`: the input is rebound to the result (Note [In-place
ops rebase history] in inplace.py) and returned, with the function's values, gradients and
errors.
"""

from __future__ import annotations

from ..tensor import Tensor
from . import activations as A
from .functional import leaky_relu, relu
from .inplace import apply_inplace


def relu_(input: Tensor) -> Tensor:  # noqa: A002  (PyTorch's names)
    return apply_inplace(input, relu, "relu_")


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:  # noqa: A002
    return apply_inplace(input, lambda t: leaky_relu(t, negative_slope), "leaky_relu_")


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return A.elu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:  # noqa: A002
    return A.selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return A.celu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:  # noqa: A002
    return A.hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    return A.threshold(input, threshold, value, inplace=True)
