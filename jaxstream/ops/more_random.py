"""More of PyTorch's random functions: randperm, multinomial, poisson, binomial and
randint_like.

Each draws as `js.randint` and `js.normal` do: from the keyword-only `key=` (pure: the same
key, the same draw), else from the current draw source (Note [Random keys] in random.py);
the factories take `dtype=`, `backend=`, `device=` (and `requires_grad=`). The draws are not
torch's for the same seed; their distributions are:

* randperm is the order that sorts n random integers (ties, of probability n^2 / 2^63, or
  n^2 / 2^32 on JAX without x64, broken by position), a uniform permutation;
* multinomial without replacement takes the k largest of p_i / E_i for E_i ~ Exp(1), as
  PyTorch does (the categories in the order of successive draws, each without the ones
  drawn before); with replacement it inverts each row's cumulative distribution at uniform
  draws (searching.py);
* poisson and binomial are the backend's own samplers; their results carry a node whose
  gradient is zero (poisson, Note [Draws have zero gradients] in sampling.py) or raises
  (binomial), as PyTorch's do. PyTorch's `generator=` is refused: pass `key=`.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..devices import Device
from ..dtypes import python_dtype
from ..tensor import Tensor, is_floating
from .creation import factory_backend, made, value_dtype
from .dispatch import apply
from .dtype_names import cpp_type, scalar_type
from .functional import minimum
from .indexing import argsort, topk
from .math_rules import not_implemented_vjp
from .opdef import OpDef
from .operands import as_tensor, host_values
from .pointwise import kernel_lacks
from .random import draw_key, randint, uniform
from .sampling import DRAWN
from .searching import searchsorted
from .shapes import broadcast_shapes

__all__ = ["binomial", "multinomial", "poisson", "randint_like", "randperm"]

_no_gradient = not_implemented_vjp(RuntimeError, "binomial")
BINOMIAL = OpDef("binomial", "torch::autograd::NotImplemented",
                 lambda xp, count, prob, drawn: drawn, _no_gradient, _no_gradient, None)
"""binomial's node: the draw, recorded where the count or the probability requires grad, as
PyTorch records it; a backward through it raises PyTorch's error."""


def _no_generator(generator: Any, caller: str) -> None:
    if generator is not None:
        raise TypeError(f"{caller}: generator= is not supported (got "
                        f"{type(generator).__name__}); pass key= (an int seed or a JAX PRNG "
                        f"key) for a reproducible draw, or seed the global generator with "
                        f"js.manual_seed(seed)")


# ------------------------------------------------------------------ randperm
def randperm(n: int, *, key: Any = None, dtype: Any = None, backend: str | None = None,
             device: str | Device | None = None, requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1 (int64 unless `dtype=` says)."""
    n = operator.index(n)
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    be = factory_backend(backend, device)
    dtype = value_dtype(be, 0, dtype)
    if dtype == np.bool_:
        raise NotImplementedError("\"randperm\" not implemented for 'Bool' (give an integer or "
                                  "floating dtype)")
    if dtype.kind in "iu" and n - 1 > np.iinfo(dtype).max:
        raise RuntimeError(f"value cannot be converted to type {cpp_type(dtype)} without "
                           f"overflow (randperm({n}) of dtype {dtype})")
    wide = be.holds_64bit_dtypes()
    keys = randint(0, 2**63 - 1 if wide else 2**31 - 1, (n,), key=key, backend=be.name,
                   device=device)
    order = argsort(keys, stable=True)
    return made(lambda: be.xp.astype(order.array, dtype), be, device, requires_grad)


# ------------------------------------------------------------------ multinomial
def _check_distribution(p: Tensor, num_samples: int, replacement: bool) -> None:
    """PyTorch's checks of multinomial's probabilities (their values where they are known)."""
    if p.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim (got shape {p.shape})")
    if not is_floating(p.dtype):
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{scalar_type(p.dtype)}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    values = host_values(p)
    if values is None:
        return
    if not np.all(np.isfinite(values) & (values >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(values.sum(-1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def multinomial(input: Any, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Any = None, key: Any = None) -> Tensor:
    """`num_samples` category indices for each row of `input` (non-negative weights, not
    necessarily summing to 1), each drawn with probability proportional to its weight;
    without `replacement` no category repeats within a row. int64 (int32 on JAX without
    x64), of shape (num_samples,) or (rows, num_samples)."""
    _no_generator(generator, "multinomial")
    p = as_tensor(input).detach()
    _check_distribution(p, num_samples, replacement)
    like = {"backend": p.backend, "device": p.device}
    index = python_dtype("i", p.array_backend)
    if not replacement:
        waits = -uniform(p.shape, key=key, dtype=p.dtype, **like).log()  # Exp(1), never 0
        return topk(p / waits, num_samples).indices.astype(index)
    cumulative = p.cumsum(-1)
    total = cumulative[..., -1:]
    u = uniform(p.shape[:-1] + (num_samples,), key=key, dtype=p.dtype, **like)
    picks = searchsorted(cumulative, u * total, right=True)
    last = searchsorted(cumulative, total)  # the last category of positive weight
    return minimum(picks, last).astype(index)


# ------------------------------------------------------------------ poisson, binomial
def poisson(input: Any, generator: Any = None, *, key: Any = None) -> Tensor:  # noqa: A002
    """A Poisson sample of each rate of `input` (a floating tensor of non-negative rates), in
    its dtype; the gradient of the rates is zero, as PyTorch's."""
    _no_generator(generator, "poisson")
    rates = as_tensor(input)
    if not is_floating(rates.dtype):
        raise kernel_lacks("poisson_cpu", rates, "poisson draws from floating rates: cast "
                                                 "them first, e.g. t.float()")
    values = host_values(rates)
    if values is not None and not np.all(values >= 0):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    be = rates.array_backend
    chosen = draw_key(be, key, "poisson")
    drawn = made(lambda: be.random_poisson(rates.array, chosen), be, rates.device, False)
    return apply(DRAWN, rates, drawn, node="PoissonBackward0")


def binomial(count: Any, prob: Any, generator: Any = None, *, key: Any = None) -> Tensor:
    """A binomial sample for each number of trials in `count` and success probability in
    `prob` (floating tensors of one dtype, broadcast together), in that dtype. As PyTorch's,
    a negative count draws 0, a fractional one its whole part, a probability is clipped to
    [0, 1]; the draw is not differentiable (a backward through it raises)."""
    _no_generator(generator, "binomial")
    count = as_tensor(count)
    prob = as_tensor(prob, count)
    for name, t in (("count", count), ("prob", prob)):
        if not is_floating(t.dtype):
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: "
                             f"{scalar_type(t.dtype)}")
    if prob.dtype != count.dtype:
        raise RuntimeError(f"Found dtype {scalar_type(prob.dtype)} but expected "
                           f"{scalar_type(count.dtype)} (binomial's prob and count); cast one "
                           f"first, e.g. prob.to('{count.dtype}')")
    shape = broadcast_shapes("binomial", count.shape, prob.shape)
    trials = count.detach().broadcast_to(shape).clip(min=0).floor()
    chance = prob.detach().broadcast_to(shape).clip(0, 1)
    be = count.array_backend
    chosen = draw_key(be, key, "binomial")
    drawn = made(lambda: be.random_binomial(trials.array, chance.array, chosen), be,
                 count.device, False)
    return apply(BINOMIAL, count, prob, drawn)


def randint_like(input: Any, low: int = 0, high: int | None = None, *,  # noqa: A002
                 key: Any = None, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from [low, high) in `input`'s shape, dtype (unless `dtype=`
    says), backend and device; `randint_like(x, high)` draws from [0, high)."""
    x = as_tensor(input)
    if high is None:
        low, high = 0, low
    low, high = operator.index(low), operator.index(high)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    dtype = x.dtype if dtype is None else x.array_backend.dtype(dtype)
    drawn = randint(low, high, x.shape, key=key, backend=x.backend, device=x.device)
    be = x.array_backend
    return made(lambda: be.xp.astype(drawn.array, dtype), be, x.device, requires_grad)


METHODS: dict[str, Any] = {"multinomial": multinomial}
