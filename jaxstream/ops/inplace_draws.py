"""PyTorch's in-place draws beyond `normal_`, `uniform_` and `bernoulli_` (sampling.py):
`random_`, `exponential_`, `geometric_`, `log_normal_` and `cauchy_`.

Each fills the tensor with a draw of its shape, from `key=` or else the current draw source
(Note [Random keys] in random.py), under PyTorch's node (`RandomBackward0`, ...), whose
gradient is zero (Note [Draws have zero gradients] in sampling.py). The draws are made from
the uniform and normal draws by the inverse of each distribution function, so their values
are not torch's for the same seed; their distributions are. Where torch warns that `random_`
asks a float dtype for integers beyond its exact range, nothing is said here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from .dtype_names import cpp_type, scalar_type
from .pointwise import floating_only
from .random import gaussian, randint, uniform
from .sampling import drawn_into

_ABSENT = object()


def _uniform_like(t: Tensor, key: Any) -> Tensor:
    """Uniform draws in [0, 1) of `t`'s shape and place, in its dtype if floating."""
    return uniform(t.shape, key=key, dtype=t.dtype if is_floating(t.dtype) else None,
                   backend=t.backend, device=t.device)


def _continuous(name: str, t: Tensor, type_name: str) -> None:
    if not is_floating(t.dtype):
        raise RuntimeError(
            f"{name} distribution is a continuous probability distribution. dtype must be a "
            f"floating point but you specified {type_name} (a tensor of shape {t.shape}); "
            f"cast it first, e.g. t.double()"
        )


def _positive(op: str, name: str, value: float) -> None:
    if not value > 0:
        raise RuntimeError(f"{op} expects {name} > 0.0, but found {name}={value:g}")


def _top(dtype: Any) -> int:
    """The largest integer `random_` draws into `dtype` by default: every integer below it is
    exact in a float dtype, as PyTorch's `2^digits`."""
    if dtype == np.bool_:
        return 1
    if is_floating(dtype):
        return 2 ** (np.finfo(dtype).nmant + 1)
    return int(np.iinfo(dtype).max)


def _check_range(t: Tensor, low: int, high: int) -> None:
    """PyTorch's checks of `random_`'s `[low, high)`: ordered, and in an integer dtype's range."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    if is_floating(t.dtype):
        return
    bottom = 0 if t.dtype == np.bool_ else int(np.iinfo(t.dtype).min)
    for bound, value, ok in (("from", low, low >= bottom), ("to - 1", high - 1,
                                                            high - 1 <= _top(t.dtype))):
        if not ok:
            raise RuntimeError(f"{bound} is out of bounds for {cpp_type(t.dtype)} ({bound} = "
                               f"{value}, a tensor of dtype {t.dtype}); give bounds that fit it")


def random_(t: Tensor, *bounds: Any, to: Any = _ABSENT, key: Any = None) -> Tensor:
    """Fill `t` with integers drawn uniformly: `random_()` from [0, 2^digits] of a float dtype
    (an integer dtype's largest value), `random_(to)` from [0, to), `random_(from, to)` from
    [from, to) (`to=None`: up to that largest value)."""
    if to is not _ABSENT:
        bounds = (*bounds, to)
    if len(bounds) > 2:
        raise TypeError(f"random_() takes at most 2 bounds (from, to), got {len(bounds)}")
    overload = 2 - len(bounds)  # PyTorch's node: RandomBackward0 (from, to), 1 (to), 2 ()
    low, high = (0, *bounds) if len(bounds) == 1 else bounds or (0, None)
    high = _top(t.dtype) + 1 if high is None else int(high)
    _check_range(t, int(low), high)
    integral = not is_floating(t.dtype) and t.dtype != np.bool_
    drawn = randint(int(low), high, t.shape, key=key, dtype=t.dtype if integral else None,
                    backend=t.backend, device=t.device)
    return drawn_into(t, drawn.astype(t.dtype), f"RandomBackward{overload}", "random_")


def exponential_(t: Tensor, lambd: float = 1.0, *, key: Any = None) -> Tensor:
    """Fill `t` with draws of the exponential distribution of rate `lambd`."""
    _continuous("Exponential", t, scalar_type(t.dtype))
    _positive("exponential_", "lambda", lambd)
    drawn = -(-_uniform_like(t, key)).log1p() / lambd
    return drawn_into(t, drawn, "ExponentialBackward0", "exponential_")


def geometric_(t: Tensor, p: float, *, key: Any = None) -> Tensor:
    """Fill `t` with draws of the geometric distribution: the number of Bernoulli(p) trials
    up to the first success (1, 2, ...); integer tensors too."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    trials = ((-_uniform_like(t, key)).log1p() / math.log1p(-p)).floor() + 1
    return drawn_into(t, trials.astype(t.dtype), "GeometricBackward0", "geometric_")


def log_normal_(t: Tensor, mean: float = 1.0, std: float = 2.0, *, key: Any = None) -> Tensor:
    """Fill `t` with `exp` of draws of N(mean, std**2)."""
    floating_only("log_normal_", "log_normal_cpu", t)
    _positive("log_normal_", "std", std)
    drawn = gaussian(t.shape, mean, std, key=key, dtype=t.dtype, backend=t.backend,
                     device=t.device, caller="log_normal_").exp()
    return drawn_into(t, drawn, "LogNormalBackward0", "log_normal_")


def cauchy_(t: Tensor, median: float = 0.0, sigma: float = 1.0, *, key: Any = None) -> Tensor:
    """Fill `t` with draws of the Cauchy distribution of `median` and scale `sigma`."""
    _continuous("Cauchy", t, cpp_type(t.dtype))
    _positive("cauchy_", "sigma", sigma)
    drawn = ((_uniform_like(t, key) - 0.5) * math.pi).tan() * sigma + median
    return drawn_into(t, drawn, "CauchyBackward0", "cauchy_")


METHODS = {
    "random_": random_,
    "exponential_": exponential_,
    "geometric_": geometric_,
    "log_normal_": log_normal_,
    "cauchy_": cauchy_,
}
