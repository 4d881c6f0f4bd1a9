"""SGD, Adam, AdamW, RMSprop and Adagrad: PyTorch's update rules as optax transformations.

Each rule is a chain built, per parameter group, from the group's values with
`optax.inject_hyperparams`, so that they live in the state and editing
`param_groups[i]` changes them (Note [Hyperparameters live in the state] in
optimizer.py):
- SGD: `g += weight_decay * p` (L2 in the gradient), then the momentum buffer
  `b = momentum * b + g` (it starts at the first gradient, as optax's `trace`
  from zeros does), `g = g + momentum * b` with nesterov else `g = b`, then
  `p -= lr * g`. With momentum 0 the buffer is kept but equals `g`.
- Adam: L2 in the gradient, then bias-corrected moments, `p -= lr * m / (sqrt(v) + eps)`.
- AdamW: the Adam step with the decay decoupled, `p -= lr * (adam + weight_decay * p)`,
  which is PyTorch's `p *= 1 - lr * weight_decay` followed by the Adam step.
- RMSprop and Adagrad: see their docstrings for where optax's own differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
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


def _rmsprop(lr: float, alpha: float, eps: float, weight_decay: float, momentum: float,
             centered: bool) -> optax.GradientTransformation:
    scale_by_root_mean_square = optax.scale_by_stddev if centered else optax.scale_by_rms
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        scale_by_root_mean_square(decay=alpha, eps=eps, eps_in_sqrt=False),
        optax.trace(decay=momentum),
        optax.scale(-lr),
    )


class SumOfSquaresState(NamedTuple):
    """Adagrad's accumulator: each parameter's running sum of squared gradients."""

    sum_of_squares: Any


def scale_by_root_sum_of_squares(initial_accumulator_value: float,
                                 eps: float) -> optax.GradientTransformation:
    """`g / (sqrt(sum of g*g so far) + eps)`, PyTorch's Adagrad scaling (optax's
    `scale_by_rss` adds eps inside the square root instead)."""

    def init(params: Any) -> SumOfSquaresState:
        return SumOfSquaresState(optax.tree.full_like(params, initial_accumulator_value))

    def update_fn(updates: Any, state: SumOfSquaresState,
                  params: Any = None) -> tuple[Any, SumOfSquaresState]:
        sums = jax.tree.map(lambda s, g: s + g * g, state.sum_of_squares, updates)
        scaled = jax.tree.map(lambda g, s: g / (jnp.sqrt(s) + eps), updates, sums)
        return scaled, SumOfSquaresState(sums)

    return optax.GradientTransformation(init, update_fn)


def _adagrad(lr: float, lr_decay: float, weight_decay: float, initial_accumulator_value: float,
             eps: float) -> optax.GradientTransformation:
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        scale_by_root_sum_of_squares(initial_accumulator_value, eps),
        # PyTorch's step - 1 is optax's count before this step.
        optax.scale_by_schedule(lambda count: -lr / (1 + count * lr_decay)),
    )


class _Rule(Optimizer):
    """An optimizer whose groups' transformations `factory` builds from their values."""

    factory: Any  # an optax.inject_hyperparams factory, as a staticmethod
    hyperparams: tuple[str, ...] = ()
    """The group's entries that set injected hyperparameters (under the same name, unless
    `_hyperparams_of` says otherwise)."""

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], **defaults: Any) -> None:
        self._start(params, defaults)

    def _group_transform(self, group: dict) -> optax.GradientTransformation:
        return self.factory(**self._hyperparams_of(group), **self._options_of(group))

    def _hyperparam_entries(self) -> tuple[str, ...]:
        return self.hyperparams


class SGD(_Rule):
    """Stochastic gradient descent with PyTorch's momentum, nesterov and weight decay."""

    factory = staticmethod(optax.inject_hyperparams(_sgd, static_args="nesterov"))
    hyperparams = ("lr", "momentum", "weight_decay")
    _static_options = ("nesterov",)

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float,
                 momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                         nesterov=nesterov)


class _AdamFamily(_Rule):
    """Adam's arguments and checks, shared by Adam and AdamW (`factory` builds the chain)."""

    factory = staticmethod(optax.inject_hyperparams(_adam))
    hyperparams = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        for index, beta in enumerate(betas):
            _check(f"beta parameter at index {index}", beta, upper=1.0)
        _check("weight_decay value", weight_decay)
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

    def _hyperparams_of(self, group: dict) -> dict[str, Any]:
        beta1, beta2 = group["betas"]
        return {"lr": group["lr"], "beta1": beta1, "beta2": beta2, "eps": group["eps"],
                "weight_decay": group["weight_decay"]}


class Adam(_AdamFamily):
    """Adam with PyTorch's rule: weight decay is L2 added to the gradient."""


class AdamW(_AdamFamily):
    """Adam with decoupled weight decay (default 1e-2), PyTorch's AdamW rule."""

    factory = staticmethod(optax.inject_hyperparams(_adamw))

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


class RMSprop(_Rule):
    """RMSprop with PyTorch's rule: `v = alpha * v + (1 - alpha) * g*g` (minus the square
    of the mean gradient when centered), `b = momentum * b + g / (sqrt(v) + eps)`,
    `p -= lr * b`, after L2 weight decay in the gradient.

    optax's `rmsprop` differs in its defaults (decay 0.9, not alpha 0.99) and puts eps
    inside the square root; here its `scale_by_rms` / `scale_by_stddev` run with
    `decay=alpha, eps_in_sqrt=False` and a zero initial scale, then `trace(momentum)`.
    """

    factory = staticmethod(optax.inject_hyperparams(_rmsprop, static_args="centered"))
    hyperparams = ("lr", "alpha", "eps", "weight_decay", "momentum")
    _static_options = ("centered",)

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-2,
                 alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.0, centered: bool = False) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        _check("alpha value", alpha)
        super().__init__(params, lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                         centered=centered, weight_decay=weight_decay)


class Adagrad(_Rule):
    """Adagrad with PyTorch's rule: `s += g*g`, `p -= lr / (1 + (step - 1) * lr_decay) *
    g / (sqrt(s) + eps)`, after L2 weight decay in the gradient.

    optax's `adagrad` differs: its accumulator starts at 0.1 (here at
    `initial_accumulator_value`, default 0), its eps (1e-7) is inside the square root
    (here outside, 1e-10: `scale_by_root_sum_of_squares`), and it has no `lr_decay`
    (here `scale_by_schedule` on optax's step count).
    """

    factory = staticmethod(
        optax.inject_hyperparams(_adagrad, static_args="initial_accumulator_value")
    )
    hyperparams = ("lr", "lr_decay", "weight_decay", "eps")

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-2,
                 lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10) -> None:
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value)

    def _group_transform(self, group: dict) -> optax.GradientTransformation:
        """As PyTorch, every accumulator starts at the constructor's value, whatever a
        group's `initial_accumulator_value` says."""
        return self.factory(**self._hyperparams_of(group),
                            initial_accumulator_value=self.defaults["initial_accumulator_value"])
