"""jaxstream: a define-by-run autograd engine with PyTorch's engine semantics,
over NumPy, JAX and CuPy arrays exchanged zero-copy through DLPack."""

from . import amp, autograd
from .autograd import (
    backward,
    enable_grad,
    grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .devices import Device, device
from .ops.functional import (
    concatenate,
    cos,
    exp,
    linear,
    log,
    matmul,
    mean,
    ones,
    ones_like,
    randn,
    relu,
    sigmoid,
    sin,
    softplus,
    sqrt,
    stack,
    sum,
    tanh,
    where,
    zeros,
    zeros_like,
)
from .ops.functional import abs, max  # noqa: A004
from .tensor import Tensor, from_dlpack, tensor

__version__ = "0.1.0"

__all__ = [
    "Device",
    "Tensor",
    "abs",
    "amp",
    "autograd",
    "backward",
    "concatenate",
    "cos",
    "device",
    "enable_grad",
    "exp",
    "from_dlpack",
    "grad",
    "is_grad_enabled",
    "linear",
    "log",
    "matmul",
    "max",
    "mean",
    "no_grad",
    "ones",
    "ones_like",
    "randn",
    "relu",
    "set_grad_enabled",
    "sigmoid",
    "sin",
    "softplus",
    "sqrt",
    "stack",
    "sum",
    "tanh",
    "tensor",
    "where",
    "zeros",
    "zeros_like",
]
