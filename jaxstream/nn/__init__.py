"""`js.nn`: modules with registered parameters, and the common layers (API.md)."""

from . import functional, init
from .layers import (
    GELU,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    Tanh,
)
from .module import IncompatibleKeys, Module
from .parameter import Parameter

__all__ = [
    "GELU",
    "Dropout",
    "Embedding",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "Module",
    "Parameter",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "functional",
    "init",
]
