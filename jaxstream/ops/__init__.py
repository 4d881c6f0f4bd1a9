"""Differentiable ops: the dispatch door, the rule table, the public op functions.

Importing this package attaches Tensor's operators and op methods
(`tensor_methods.py`).
"""

from . import functional, tensor_methods

__all__ = ["functional", "tensor_methods"]
