"""PyTorch's `torch.nn.init` (each fills a tensor in place under no_grad and returns it), and
the default initialisations of the layers, drawn from the global generator or from `key=`.

Every initialiser that draws takes `key=` (Note [Random keys] in ops/random.py): an int seed
or a JAX key makes the draw pure; without it the draw takes the next key of the global
generator, reproducible after `js.manual_seed`. PyTorch's `generator=` is refused with a
pointer to `key=`. Scales come from init_fans.py.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import numpy as np

from ..autograd.grad_mode import no_grad
from ..ops.creation import eye, zeros
from ..ops.random import gaussian, resolve_key, uniform
from ..tensor import Tensor
from ..tensor import tensor as as_tensor
from .init_fans import calculate_gain, correct_fan, fan_in_and_fan_out, refuse_generator
from .parameter import Parameter

__all__ = [
    "calculate_gain", "constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_",
    "normal_", "ones_", "orthogonal_", "sparse_", "trunc_normal_", "uniform_", "xavier_normal_",
    "xavier_uniform_", "zeros_",
]

_calculate_fan_in_and_fan_out = fan_in_and_fan_out
"""PyTorch's private name, which ported `reset_parameters` code calls."""


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None, *,
             key: Any = None) -> Tensor:
    """Fill `tensor` with samples of U(a, b)."""
    refuse_generator(generator, "uniform_")
    with no_grad():
        return tensor.uniform_(a, b, key=key)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None, *,
            key: Any = None) -> Tensor:
    """Fill `tensor` with samples of N(mean, std**2)."""
    refuse_generator(generator, "normal_")
    with no_grad():
        return tensor.normal_(mean, std, key=key)


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Any = None, *, key: Any = None) -> Tensor:
    """Fill `tensor` with N(mean, std**2) conditioned on [a, b]: the inverse CDF of a uniform
    draw between the bounds' CDFs, so every value lies in [a, b] and no draw is rejected."""
    refuse_generator(generator, "trunc_normal_")
    if a > b:
        raise RuntimeError(
            f"trunc_normal_ expects a <= b, but found a={a} > b={b} (tensor of shape "
            f"{tuple(tensor.shape)}); pass the lower bound as a"
        )
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    low, high = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
    with no_grad():
        tensor.uniform_(2 * low - 1, 2 * high - 1, key=key)
        return tensor.copy_((tensor.erfinv() * (std * math.sqrt(2.0)) + mean).clamp(a, b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill `tensor` with `val`."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with zeros."""
    with no_grad():
        return tensor.zero_()


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-d `tensor` with the identity: a Linear layer that passes its input through."""
    if tensor.ndim != 2:
        raise ValueError(
            f"eye_: Only tensors with 2 dimensions are supported (got shape "
            f"{tuple(tensor.shape)}); reshape to 2-d, or use dirac_ for a conv weight"
        )
    with no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype, backend=tensor.backend,
                                device=tensor.device))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a conv weight (3 to 5 dims) so that the convolution passes its input through:
    a one at the kernel's centre joining channel d of each group to its output channel d."""
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5):
        raise ValueError(
            f"dirac_: Only tensors with 3, 4, or 5 dimensions are supported (got shape "
            f"{shape}); use eye_ for a 2-d weight"
        )
    if shape[0] % groups != 0:
        raise ValueError(
            f"dirac_: dim 0 must be divisible by groups (shape {shape}, groups={groups}); "
            f"pass the groups of the convolution"
        )
    per_group = shape[0] // groups
    channel = np.arange(min(per_group, shape[1]))
    outputs = (np.arange(groups)[:, None] * per_group + channel).ravel()
    values = np.zeros(shape)
    values[(outputs, np.tile(channel, groups)) + tuple(s // 2 for s in shape[2:])] = 1
    with no_grad():
        return tensor.copy_(_like(values, tensor))


def _like(values: np.ndarray, t: Tensor) -> Tensor:
    """Host values as a tensor of `t`'s dtype, backend and device, to copy into `t`."""
    return as_tensor(values, dtype=t.dtype, backend=t.backend, device=t.device)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None, *,
                    key: Any = None) -> Tensor:
    """U(-bound, bound) with std gain * sqrt(2 / (fan_in + fan_out)): Glorot's scale, which
    keeps the variance of both passes about constant."""
    refuse_generator(generator, "xavier_uniform_")
    fan_in, fan_out = fan_in_and_fan_out(tensor, "xavier_uniform_")
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, key=key)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None, *,
                   key: Any = None) -> Tensor:
    """N(0, std**2) with std gain * sqrt(2 / (fan_in + fan_out)) (Glorot's scale)."""
    refuse_generator(generator, "xavier_normal_")
    fan_in, fan_out = fan_in_and_fan_out(tensor, "xavier_normal_")
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), key=key)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str,
                 caller: str) -> float | None:
    """He's std, gain / sqrt(fan); None for a tensor with no elements (nothing to fill)."""
    if 0 in tuple(tensor.shape):
        warnings.warn(f"Initializing zero-element tensors is a no-op ({caller} on a tensor of "
                      f"shape {tuple(tensor.shape)})", stacklevel=3)
        return None
    fan = correct_fan(tensor, mode, caller)
    try:
        gain = calculate_gain(nonlinearity, a)
    except ValueError as e:
        raise ValueError(f"{caller} (tensor of shape {tuple(tensor.shape)}): {e}") from None
    return gain / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None, *,
                     key: Any = None) -> Tensor:
    """U(-bound, bound) with He's std, gain / sqrt(fan): keeps the variance through rectifiers
    (`a` is leaky_relu's negative slope)."""
    refuse_generator(generator, "kaiming_uniform_")
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    if std is None:
        return tensor
    return uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, key=key)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None, *,
                    key: Any = None) -> Tensor:
    """N(0, std**2) with He's std, gain / sqrt(fan)."""
    refuse_generator(generator, "kaiming_normal_")
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    return tensor if std is None else normal_(tensor, 0.0, std, key=key)


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Any = None, *,
                key: Any = None) -> Tensor:
    """Fill `tensor`, as a matrix (size(0), numel / size(0)), with a random (semi-)orthogonal
    one times `gain`: the Q of a Gaussian draw's QR, its signs fixed by R's diagonal so that
    the result is uniform over orthogonal matrices. The QR runs on the host."""
    refuse_generator(generator, "orthogonal_")
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError(
            f"orthogonal_: Only tensors with 2 or more dimensions are supported (got shape "
            f"{shape}); give a weight of shape (out_features, in_features, ...)"
        )
    if math.prod(shape) == 0:
        return tensor
    rows = shape[0]
    drawn = zeros((rows, math.prod(shape) // rows), dtype=tensor.dtype, backend=tensor.backend,
                  device=tensor.device).normal_(key=key)
    wide = drawn.shape[0] < drawn.shape[1]
    matrix = drawn.numpy().astype(np.float64)
    q, r = np.linalg.qr(matrix.T if wide else matrix)
    q = q * np.sign(np.diag(r))
    with no_grad():
        return tensor.copy_(_like(gain * (q.T if wide else q).reshape(shape), tensor))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None, *,
            key: Any = None) -> Tensor:
    """Fill a 2-d `tensor` with N(0, std**2) and zero ceil(sparsity * rows) random rows of each
    column."""
    refuse_generator(generator, "sparse_")
    shape = tuple(tensor.shape)
    if len(shape) != 2:
        raise ValueError(
            f"sparse_: Only tensors with 2 dimensions are supported (got shape {shape}); "
            f"reshape to 2-d"
        )
    normal_key, rows_key = split_key(None if key is None else resolve_key(key), 2)
    normal_(tensor, 0.0, std, key=normal_key)
    # Each column's rows in a random order: its first ceil(sparsity * rows) are zeroed.
    order = uniform(shape, key=rows_key, backend=tensor.backend, device=tensor.device)
    dropped = order.argsort(dim=0).argsort(dim=0) < math.ceil(sparsity * shape[0])
    with no_grad():
        return tensor.masked_fill_(dropped, 0.0)


def split_key(key: Any, n: int) -> list:
    """`n` independent keys from one: a layer with several tensors draws each from its own.

    None stays None for each (every draw then takes a fresh seed of the global generator).
    """
    if key is None:
        return [None] * n
    if isinstance(key, jax.Array):
        return list(jax.random.split(key, n))
    return [int(s) for s in np.random.SeedSequence(key).generate_state(n, np.uint64)]


def kaiming_uniform(shape: tuple[int, ...], fan_in: int, *, key: Any = None,
                    **factory: Any) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): kaiming_uniform(a=sqrt(5)), torch's Linear weight.

    The same bound is torch's default for a Linear bias.
    """
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return Parameter(uniform(shape, -bound, bound, key=key, **factory))


def standard_normal(shape: tuple[int, ...], *, key: Any = None, **factory: Any) -> Tensor:
    """N(0, 1), torch's Embedding weight."""
    return Parameter(gaussian(shape, key=key, **factory))
