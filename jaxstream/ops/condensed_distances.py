"""PyTorch's pdist: the `p`-norm distances between the rows of an (N, M) matrix, each pair
i < j once, in the order of the upper triangle read row by row (a condensed distance
matrix, as SciPy's `pdist` gives it).

Composed of a gather of the row pairs and `vector_norm`, so it takes every order p >= 0
that `vector_norm` takes and its gradients of any order (0 at a zero distance, as
PyTorch's); the graph records those ops' nodes rather than PdistBackward0.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor, is_floating
from .operands import as_tensor
from .reductions import vector_norm


def pdist(input: Tensor, p: float = 2) -> Tensor:  # noqa: A002
    """The N * (N - 1) / 2 distances `||x[i] - x[j]||_p` for i < j."""
    x = as_tensor(input)
    if x.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x.ndim}D (an input of shape "
                           f"{list(x.shape)}; pdist takes (N, M) rows)")
    if not is_floating(x.dtype):
        raise RuntimeError(f"pdist only supports floating-point dtypes (got {x.dtype}; cast "
                           f"the input, e.g. input.float())")
    if p < 0:
        raise RuntimeError(f"pdist only supports non-negative p values (got p={p})")
    first, second = np.triu_indices(x.shape[0], 1)
    return vector_norm(x[first] - x[second], float(p), -1)
