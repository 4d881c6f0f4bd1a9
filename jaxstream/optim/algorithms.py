"""SGD, Adam and AdamW: PyTorch's update rules written as optax transformations.

Each rule is a chain built from hyperparameters with `optax.inject_hyperparams`,
so that they live in the state and `param_groups[0]` can change them:
- SGD: `g += weight_decay * p` (L2 in the gradient), then the momentum buffer
  `b = momentum * b + g` (it starts at the first gradient, as optax's `trace`
  from zeros does), `g = g + momentum * b` with nesterov else `g = b`, then
  `p -= lr * g`. With momentum 0 the buffer is kept but equals `g`.
- Adam: L2 in the gradient, then bias-corrected moments, `p -= lr * m / (sqrt(v) + eps)`.
- AdamW: the Adam step with the decay decoupled, `p -= lr * (adam + weight_decay * p)`,
  which is PyTorch's `p *= 1 - lr * weight_decay` followed by the Adam step.
"""

from __future__ import annotations

from collections.abc import Iterable

import optax

from ..tensor import Tensor
from .optimizer import Optimizer


def _check(name: str, value: float, *, upper: float | None = None) -> None:
    """PyTorch's argument checks: `Invalid learning rate: -0.1` and the like."""
    if not 0.0 <= value or (upper is not None and not value < upper):
        raise ValueError(f"Invalid {name}: {value}")


def _sgd(lr: float, momentum: float, weight_decay: float,
         nesterov: bool) -> optax.GradientTransformation:
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        optax.trace(decay=momentum, nesterov=nesterov),
        optax.scale(-lr),
    )


def _adam(lr: float, beta1: float, beta2: float, eps: float,
          weight_decay: float) -> optax.GradientTransformation:
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        optax.scale_by_adam(b1=beta1, b2=beta2, eps=eps),
        optax.scale(-lr),
    )


def _adamw(lr: float, beta1: float, beta2: float, eps: float,
           weight_decay: float) -> optax.GradientTransformation:
    return optax.chain(
        optax.scale_by_adam(b1=beta1, b2=beta2, eps=eps),
        optax.add_decayed_weights(weight_decay),
        optax.scale(-lr),
    )


class SGD(Optimizer):
    """Stochastic gradient descent with PyTorch's momentum, nesterov and weight decay."""

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        hyperparams = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay}
        factory = optax.inject_hyperparams(_sgd, static_args="nesterov")
        super().__init__(params, factory(**hyperparams, nesterov=nesterov))
        self._show_as_given(hyperparams)


class _AdamFamily(Optimizer):
    """Adam's arguments and checks, shared by Adam and AdamW (`rule` is the optax chain)."""

    rule = staticmethod(_adam)

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        for index, beta in enumerate(betas):
            _check(f"beta parameter at index {index}", beta, upper=1.0)
        _check("weight_decay value", weight_decay)
        hyperparams = {"lr": lr, "beta1": betas[0], "beta2": betas[1], "eps": eps,
                       "weight_decay": weight_decay}
        super().__init__(params, optax.inject_hyperparams(self.rule)(**hyperparams))
        self._show_as_given(hyperparams)


class Adam(_AdamFamily):
    """Adam with PyTorch's rule: weight decay is L2 added to the gradient."""


class AdamW(_AdamFamily):
    """Adam with decoupled weight decay (default 1e-2), PyTorch's AdamW rule."""

    rule = staticmethod(_adamw)

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)
