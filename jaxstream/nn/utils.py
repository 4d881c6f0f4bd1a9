"""`js.nn.utils`: PyTorch's gradient clipping, in place on the parameters' `.grad`.

Both run under `no_grad` with jaxstream ops, so they work on every backend and
device, and inside `js.compile` (except `error_if_nonfinite=True`, which reads
the norm on the host to decide whether to raise, as PyTorch synchronizes to).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..autograd.grad_mode import no_grad
from ..ops.functional import clip
from ..ops.inplace import apply_inplace
from ..ops.pointwise import clamp_max
from ..ops.reductions import vector_norm
from ..ops.shape_ops import stack
from ..tensor import Tensor, tensor

_NORM_FLOOR = 1e-6
"""Added to the total norm before dividing by it, as PyTorch does."""


def _grads(parameters: Tensor | Iterable[Tensor], op: str) -> list[Tensor]:
    """The `.grad`s of `parameters` (one tensor or an iterable) that are not None."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(
                f"{op}: parameters must be Tensors, but parameter {i} is a "
                f"{type(p).__name__}; pass e.g. model.parameters()"
            )
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients so that their total `norm_type`-norm (the norm of the
    per-tensor norms; `inf` for the largest magnitude) is at most `max_norm`; returns
    the total norm from before the scaling.

    As PyTorch: every gradient is multiplied by `min(1, max_norm / (norm + 1e-6))`, even
    where that is 1; a non-finite norm scales them to nan unless `error_if_nonfinite`
    raises instead. `foreach` is accepted for PyTorch's signature and changes nothing.
    """
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not norm_type >= 1:
        raise ValueError(
            f"clip_grad_norm_: norm_type must be >= 1 or inf, got {norm_type}"
        )
    grads = _grads(parameters, "clip_grad_norm_")
    if not grads:
        return tensor(0.0)
    with no_grad():
        device = grads[0].device
        norms = [vector_norm(g, norm_type) for g in grads]
        total = vector_norm(
            stack([n if n.device == device else n.to(device) for n in norms]), norm_type
        )
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is "
                "non-finite, so it cannot be clipped. To disable this error and scale the "
                "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
            )
        scale = clamp_max(max_norm / (total + _NORM_FLOOR), 1.0)
        for g in grads:
            g.mul_(scale if g.device == device else scale.to(g.device))
    return total


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient, in place, into `[-clip_value, clip_value]` (PyTorch's;
    `foreach` is accepted and changes nothing)."""
    bound = float(clip_value)
    with no_grad():
        for g in _grads(parameters, "clip_grad_value_"):
            apply_inplace(g, lambda v: clip(v, -bound, bound), "clip_grad_value_")
