"""`js.optim`: optax transformations applied to jaxstream parameters, and PyTorch's rules."""

from .algorithms import SGD, Adam, AdamW
from .optimizer import Optimizer

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
