"""`js.nn`: modules with registered parameters, and the common layers (API.md)."""

from . import functional, init, utils
from .attention import MultiheadAttention
from .containers import ModuleDict, ModuleList, Sequential
from .convolution import AvgPool2d, Conv1d, Conv2d, MaxPool2d
from .layers import (
    GELU,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    Linear,
    ReLU,
    Sigmoid,
    SiLU,
    Tanh,
    Unflatten,
)
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import IncompatibleKeys, Module
from .normalization import BatchNorm1d, BatchNorm2d
from .parameter import Parameter

__all__ = [
    "AvgPool2d",
    "Conv1d",
    "Conv2d",
    "MaxPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "CrossEntropyLoss",
    "HuberLoss",
    "L1Loss",
    "MSELoss",
    "MultiheadAttention",
    "NLLLoss",
    "SmoothL1Loss",
    "GELU",
    "Dropout",
    "Embedding",
    "Flatten",
    "Identity",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Unflatten",
    "functional",
    "init",
    "utils",
]
