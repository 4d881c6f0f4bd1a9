"""PyTorch's functionals that draw: gumbel_softmax, rrelu (and rrelu_), alpha_dropout and
feature_alpha_dropout, with `torch.nn.functional`'s signatures and defaults (rrelu and the
alpha dropouts default to `training=False`, as PyTorch's).

Each draws its noise with the shape-first draws of random.py: from the keyword-only `key=`
(pure: the same key, the same draw), else from the current draw source (Note [Random keys]
in random.py). The noise is a constant of the graph; the rest is composed of differentiable
ops, so gradients flow to the input as in PyTorch (the straight-through estimator of a hard
gumbel_softmax, the drawn slopes of rrelu, the kept elements' scale of alpha dropout). The
draws are not PyTorch's own: the same seed gives other values than torch's generator.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from .activations import SELU_ALPHA, SELU_SCALE
from .dtype_names import scalar_type
from .functional import leaky_relu, log, where
from .inplace import apply_inplace
from .neural import softmax
from .operands import as_tensor
from .pointwise import floating_only
from .random import bernoulli_mask, uniform
from .shapes import normalize_axis

SATURATION = SELU_SCALE * SELU_ALPHA
"""-SATURATION is the value SELU tends to for very negative inputs: what alpha dropout sets
a dropped element to before its affine correction (PyTorch's 1.7580993408473766)."""


def _like(x: Tensor) -> dict[str, Any]:
    return {"dtype": x.dtype, "backend": x.backend, "device": x.device}


def _gumbel_noise(logits: Tensor, key: Any) -> Tensor:
    """Samples of Gumbel(0, 1), `-log(E)` for E ~ Exp(1) as PyTorch draws them, E being
    `-log(u)` of a uniform u in [tiny, 1): finite, and never 0."""
    tiny = float(np.finfo(np.dtype(str(logits.dtype))).tiny)
    u = uniform(logits.shape, tiny, 1.0, key=key, **_like(logits))
    return -log(-log(u))


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1, *, key: Any = None) -> Tensor:
    """`softmax((logits + g) / tau)` along `dim` for Gumbel noise g; with `hard`, the one-hot
    of its largest entry in value and the soft sample's gradient (straight through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    logits = as_tensor(logits)
    if not is_floating(logits.dtype):
        raise RuntimeError(f"Exponential distribution is a continuous probability "
                           f"distribution. dtype must be a floating point but you specified "
                           f"{scalar_type(logits.dtype)} (gumbel_softmax of logits of shape "
                           f"{list(logits.shape)}: cast them, e.g. logits.float())")
    soft = softmax((logits + _gumbel_noise(logits, key)) / tau, dim)
    if not hard:
        return soft
    axis = normalize_axis("gumbel_softmax", dim, soft.shape)
    positions = np.arange(soft.shape[axis]).reshape(
        [-1 if a == axis else 1 for a in range(soft.ndim)])
    one_hot = (soft.argmax(axis, keepdim=True) == as_tensor(positions, soft)).astype(soft.dtype)
    return one_hot - soft.detach() + soft


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, inplace: bool = False, *, key: Any = None) -> Tensor:
    """`x` above 0, `a * x` at or below it: in training each `a` drawn uniformly from
    [lower, upper], outside it their mean `(lower + upper) / 2` (leaky_relu)."""
    x = as_tensor(input)
    if lower > upper:
        raise RuntimeError(f"Lower bound should be less than or equal to the upper bound "
                           f"(rrelu with lower={lower}, upper={upper}); swap them")
    floating_only("rrelu", "rrelu_with_noise_out_cpu", x)

    def activate(t: Tensor) -> Tensor:
        if not training:
            return leaky_relu(t, (lower + upper) / 2)
        slopes = uniform(t.shape, lower, upper, key=key, **_like(t))
        return where(t > 0, t, t * slopes)

    return apply_inplace(x, activate, "rrelu_") if inplace else activate(x)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
           training: bool = False, *, key: Any = None) -> Tensor:
    """rrelu in place: the input is rebound to the result."""
    return rrelu(input, lower, upper, training, True, key=key)


def _alpha_dropout(op: str, x: Any, p: float, training: bool, inplace: bool, key: Any,
                   per_channel: bool) -> Tensor:
    """Alpha dropout (Klambauer et al.): each dropped element (or, `per_channel`, channel of
    (N, C, *)) set to -SATURATION, then all scaled by `a` and shifted by `b` so that a
    standard normal input keeps mean 0 and variance 1; PyTorch's order of checks."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = as_tensor(x)
    if p == 0.0 or not training or x.numel() == 0:
        return x
    if not is_floating(x.dtype):
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{scalar_type(x.dtype)} ({op} of a tensor of shape "
                           f"{list(x.shape)}: cast it first, e.g. input.float())")
    if per_channel and x.ndim < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input (got "
                           f"{op} of a tensor of shape {list(x.shape)}); pass (N, C, *)")
    mask_shape = x.shape[:2] + (1,) * (x.ndim - 2) if per_channel else x.shape

    def drop(t: Tensor) -> Tensor:
        if p == 1.0:
            return t * 0.0
        keep = bernoulli_mask(mask_shape, 1.0 - p, key=key, backend=t.backend,
                              device=t.device).astype(t.dtype)
        a = 1.0 / math.sqrt((SATURATION * SATURATION * p + 1) * (1 - p))
        return t * (keep * a) + (keep * (SATURATION * a) + SATURATION * a * (p - 1))

    return apply_inplace(x, drop, f"{op}_") if inplace else drop(x)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,  # noqa: A002
                  inplace: bool = False, *, key: Any = None) -> Tensor:
    """SELU's self-normalizing dropout of each element; the identity outside training."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, key, False)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False, *, key: Any = None) -> Tensor:
    """Alpha dropout of whole channels of (N, C, *); the identity outside training."""
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, key, True)
