"""PyTorch's samplers: `normal` of tensors of means or deviations, `bernoulli` of a tensor
of probabilities, and the in-place draws `normal_`, `uniform_` and `bernoulli_`.

Note [Draws have zero gradients]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch does not reparameterize a sample: `torch.normal(mean, std)` with a mean that requires
grad gives a result that requires grad, under a `NormalBackward*` node whose gradients are
zeros, and `bernoulli` of probabilities likewise (`BernoulliBackward0`). The in-place draws
make a value that does not depend on the old one (`NormalBackward0`, as `fill_`'s). So each
sampler here draws its noise with the shape-first draws of random.py (from `key=`, else the
current draw source: Note [Random keys]) and passes it, as a constant input, to one op whose
vjps are zeros: the node has PyTorch's name and the graph PyTorch's shape. A user who wants
the reparameterized gradient writes `mean + std * js.randn_like(mean)`, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .inplace import apply_inplace
from .opdef import OpDef
from .operands import as_tensor, host_values
from .pointwise import floating_only
from .random import bernoulli_mask, gaussian, uniform
from .rules import zeroed
from .shapes import broadcast_shapes

NORMAL = OpDef(
    "normal", lambda args, params: f"NormalBackward{params['overload']}",
    lambda xp, mean, std, noise, overload: xp.astype(mean + std * noise, noise.dtype),
    zeroed, zeroed, None,
)
"""`mean + std * noise` in the noise's dtype (the tensor argument's, as PyTorch picks it)."""
BERNOULLI = OpDef(
    "bernoulli", "BernoulliBackward0",
    lambda xp, p, u: xp.astype(u < p, p.dtype), zeroed, None,
)
DRAWN = OpDef("drawn", lambda args, params: params["node"],
              lambda xp, old, drawn, node: drawn, zeroed, None)
"""An in-place draw: the drawn value, whatever the old one was."""
_OVERLOADS = {(True, False): 1, (False, True): 2, (True, True): 3}
"""PyTorch's node of each `normal` overload: by whether the mean, the std is a tensor."""


def _check_std(std: Any) -> None:
    """PyTorch's refusal of a negative (or NaN) standard deviation, where values are known."""
    if isinstance(std, Tensor):
        values = host_values(std)
        if values is not None and not np.all(values >= 0):
            raise RuntimeError(
                f"normal expects all elements of std >= 0.0 (a std of shape {std.shape} "
                f"holds {values[~(values >= 0)].flat[0]})"
            )
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, key: Any = None, dtype: Any = None,
           backend: str | None = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """PyTorch's `normal`: a sample of N(mean, std**2) for each element of the tensor `mean`
    and/or `std` (broadcast together; the tensor's dtype, backend and device), or `size`
    samples where both are numbers (then `dtype=`, `backend=`, `device=` and
    `requires_grad=` apply, as for `randn`). Gradients are zero (Note [Draws have zero
    gradients]); `key=` makes the draw pure (Note [Random keys])."""
    overload = _OVERLOADS.get((isinstance(mean, Tensor), isinstance(std, Tensor)))
    _check_std(std)
    if overload is None:
        if size is None:
            raise TypeError(
                f"normal(mean={mean!r}, std={std!r}): with two numbers give the size too, "
                f"normal(mean, std, size) (e.g. normal(0.0, 1.0, (2, 3))), or make the mean "
                f"or the std a tensor"
            )
        return gaussian(size, mean, std, key=key, dtype=dtype, backend=backend, device=device,
                        requires_grad=requires_grad)
    given = {"size": size, "dtype": dtype, "backend": backend, "device": device}
    extra = [name for name, value in given.items() if value is not None]
    if extra or requires_grad:
        raise TypeError(
            f"normal: {', '.join(extra) or 'requires_grad'} goes with two numbers only; a "
            f"tensor of means or of deviations gives the result its shape, dtype and place"
        )
    lead = mean if overload != 2 else std
    floating_only("normal", "normal_kernel_cpu", lead)
    mean, std = as_tensor(mean, lead), as_tensor(std, lead)
    noise = gaussian(broadcast_shapes("normal", mean.shape, std.shape), key=key, dtype=lead.dtype,
                     backend=lead.backend, device=lead.device)
    return apply(NORMAL, mean, std, noise, overload=overload)


def bernoulli(input: Tensor, p: float | None = None, *, key: Any = None) -> Tensor:  # noqa: A002
    """PyTorch's `bernoulli`: 1 or 0 for each element of `input`, 1 with the probability the
    element holds (or with `p` for each, where given), in `input`'s dtype. The gradient of
    the probabilities is zero (Note [Draws have zero gradients])."""
    input = as_tensor(input)  # noqa: A001
    if p is not None:
        return bernoulli_mask(input.shape, p, key=key, backend=input.backend,
                              device=input.device).astype(input.dtype)
    floating_only("bernoulli", "bernoulli_tensor_cpu_p_", input)
    values = host_values(input)
    if values is not None and not np.all((values >= 0) & (values <= 1)):
        raise RuntimeError(
            f"bernoulli: expected every probability in [0, 1], got a tensor of shape "
            f"{input.shape} holding {values[~((values >= 0) & (values <= 1))].flat[0]}"
        )
    u = uniform(input.shape, key=key, dtype="float64" if input.dtype == np.float64 else
                "float32", backend=input.backend, device=input.device)
    return apply(BERNOULLI, input, u)


def drawn_into(t: Tensor, drawn: Tensor, node: str, op: str) -> Tensor:
    return apply_inplace(t, lambda old: apply(DRAWN, old, drawn, node=node), op)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *, key: Any = None) -> Tensor:
    """Fill `t` in place with samples of N(mean, std**2)."""
    floating_only("normal_", "normal_kernel_cpu", t)
    _check_std(std)
    drawn = gaussian(t.shape, mean, std, key=key, dtype=t.dtype, backend=t.backend,
                     device=t.device, caller="normal_")
    return drawn_into(t, drawn, "NormalBackward0", "normal_")


def uniform_(t: Tensor, from_: float = 0.0, to: float = 1.0, *, key: Any = None) -> Tensor:
    """Fill `t` in place with samples of the uniform distribution on [from_, to)."""
    floating_only("uniform_", "check_uniform_bounds", t)
    if not from_ <= to:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}"
        )
    drawn = uniform(t.shape, from_, to, key=key, dtype=t.dtype, backend=t.backend,
                    device=t.device)
    return drawn_into(t, drawn, "UniformBackward0", "uniform_")


def bernoulli_(t: Tensor, p: Any = 0.5, *, key: Any = None) -> Tensor:
    """Fill `t` in place with 1 or 0, 1 with probability `p`: a number, or a tensor of
    probabilities broadcast to `t`'s shape."""
    if isinstance(p, Tensor):
        drawn, node = bernoulli(p.broadcast_to(t.shape), key=key), "BernoulliBackward1"
    else:
        drawn, node = bernoulli(t.detach(), p, key=key), "BernoulliBackward2"
    return drawn_into(t, drawn.detach().astype(t.dtype), node, "bernoulli_")


METHODS = {
    "bernoulli": bernoulli,
    "normal_": normal_,
    "uniform_": uniform_,
    "bernoulli_": bernoulli_,
}
