"""SGD, Adam, AdamW, RMSprop and Adagrad: PyTorch's update rules as optax transformations.

Each rule is a chain built, per parameter group, from the group's values with
`optax.inject_hyperparams`, so that they live in the state and editing
`param_groups[i]` changes them (Note [Hyperparameters live in the state] in
optimizer.py). Every rule first negates the gradient when `maximize` (PyTorch's
order: before weight decay), then:
- SGD: `g += weight_decay * p` (L2 in the gradient), then PyTorch's momentum with
  dampening and nesterov (`momentum_with_dampening`), then `p -= lr * g`.
- Adam: L2 in the gradient, then bias-corrected moments, `p -= lr * m / (sqrt(v) + eps)`
  (with amsgrad, the running maximum of `v`: `scale_by_amsgrad`).
- AdamW, or Adam with `decoupled_weight_decay`: the Adam step with the decay decoupled,
  `p -= lr * (adam + weight_decay * p)`, which is PyTorch's `p *= 1 - lr * weight_decay`
  followed by the Adam step.
- RMSprop and Adagrad: see their docstrings for where optax's own differ.

PyTorch's implementation switches (`foreach`, `fused`, `capturable`, `differentiable`)
are taken at their defaults and refused otherwise (`_refuse_switches`): every step here
is already one jitted update over all parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import optax

from ..tensor import Tensor
from .optimizer import Optimizer
from .rule_pieces import (
    ascending,
    momentum_with_dampening,
    scale_by_amsgrad,
    scale_by_root_sum_of_squares,
)

_SWITCHES = {
    "foreach": "PyTorch's multi-tensor (foreach) implementation",
    "fused": "PyTorch's fused-kernel implementation",
    "capturable": "PyTorch's CUDA-graph capturable implementation",
}


def _check(name: str, value: float, *, upper: float | None = None) -> None:
    """PyTorch's argument checks: `Invalid learning rate: -0.1` and the like."""
    if not 0.0 <= value or (upper is not None and not value < upper):
        raise ValueError(f"Invalid {name}: {value}")


def _refuse_switches(optimizer: str, group: dict, switches: tuple[str, ...]) -> None:
    """PyTorch's implementation switches select ways to compute the same step; jaxstream
    has one way, so each is taken at its default (None or False) and refused otherwise."""
    for name in switches:
        value = group.get(name)
        if not value:
            continue
        if name == "differentiable":
            raise ValueError(
                f"{optimizer}: differentiable={value!r} asks for a step that autograd can "
                "differentiate through, but jaxstream's optimizer step is not differentiable "
                "(it updates the parameters under no_grad); leave differentiable=False, the "
                "default, which gives the same parameter values"
            )
        raise ValueError(
            f"{optimizer}: {name}={value!r} selects {_SWITCHES[name]}, a mode jaxstream does "
            f"not have (each step is one jitted update over all parameters); leave {name} at "
            "its default, which gives the same values"
        )


def _sgd(lr: float, momentum: float, dampening: float, weight_decay: float, nesterov: bool,
         maximize: bool) -> optax.GradientTransformation:
    return optax.chain(
        ascending(maximize, optax.add_decayed_weights(weight_decay)),
        momentum_with_dampening(momentum, dampening, nesterov),
        optax.scale(-lr),
    )


def _adam(lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
          amsgrad: bool, maximize: bool,
          decoupled_weight_decay: bool) -> optax.GradientTransformation:
    if amsgrad:
        moments = scale_by_amsgrad(beta1, beta2, eps)
    else:
        moments = optax.scale_by_adam(b1=beta1, b2=beta2, eps=eps)
    decay = optax.add_decayed_weights(weight_decay)
    if decoupled_weight_decay:
        return ascending(maximize, optax.chain(moments, decay, optax.scale(-lr)))
    return optax.chain(ascending(maximize, decay), moments, optax.scale(-lr))


def _rmsprop(lr: float, alpha: float, eps: float, weight_decay: float, momentum: float,
             centered: bool, maximize: bool) -> optax.GradientTransformation:
    scale_by_root_mean_square = optax.scale_by_stddev if centered else optax.scale_by_rms
    return optax.chain(
        ascending(maximize, optax.add_decayed_weights(weight_decay)),
        scale_by_root_mean_square(decay=alpha, eps=eps, eps_in_sqrt=False),
        optax.trace(decay=momentum),
        optax.scale(-lr),
    )


def _adagrad(lr: float, lr_decay: float, weight_decay: float, initial_accumulator_value: float,
             eps: float, maximize: bool) -> optax.GradientTransformation:
    return optax.chain(
        ascending(maximize, optax.add_decayed_weights(weight_decay)),
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
    options: tuple[str, ...] = ("maximize",)
    """The group's entries the transformation is built with (static arguments of `factory`)."""
    switches: tuple[str, ...] = ()
    """PyTorch's implementation switches this optimizer takes, at their defaults only."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A changed switch rebuilds the transformation too, which refuses it.
        cls._static_options = cls.options + cls.switches

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], **defaults: Any) -> None:
        self._start(params, defaults)

    def _group_transform(self, group: dict) -> optax.GradientTransformation:
        _refuse_switches(type(self).__name__, group, self.switches)
        return self.factory(**self._hyperparams_of(group), **self._build_options(group))

    def _build_options(self, group: dict) -> dict[str, Any]:
        return {name: group[name] for name in self.options}

    def _hyperparam_entries(self) -> tuple[str, ...]:
        return self.hyperparams

    def add_param_group(self, param_group: dict) -> None:
        """PyTorch's `add_param_group`; a switch set in the group is refused before the
        group joins."""
        _refuse_switches(type(self).__name__, param_group, self.switches)
        super().add_param_group(param_group)


class SGD(_Rule):
    """Stochastic gradient descent with PyTorch's momentum, dampening, nesterov and weight
    decay."""

    factory = staticmethod(optax.inject_hyperparams(_sgd, static_args=("nesterov", "maximize")))
    hyperparams = ("lr", "momentum", "dampening", "weight_decay")
    options = ("nesterov", "maximize")
    switches = ("foreach", "differentiable", "fused")

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-3,
                 momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, *, maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        _check("learning rate", lr)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                         foreach=foreach, differentiable=differentiable, fused=fused)


class _AdamFamily(_Rule):
    """Adam's arguments and checks, shared by Adam and AdamW (a group's
    `decoupled_weight_decay` picks the rule, as in PyTorch)."""

    factory = staticmethod(optax.inject_hyperparams(
        _adam, static_args=("amsgrad", "maximize", "decoupled_weight_decay")))
    hyperparams = ("lr", "betas", "eps", "weight_decay")
    options = ("amsgrad", "maximize", "decoupled_weight_decay")
    switches = ("foreach", "capturable", "differentiable", "fused")

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        for index, beta in enumerate(betas):
            _check(f"beta parameter at index {index}", beta, upper=1.0)
        _check("weight_decay value", weight_decay)
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=decoupled_weight_decay)

    def _hyperparams_of(self, group: dict) -> dict[str, Any]:
        beta1, beta2 = group["betas"]
        return {"lr": group["lr"], "beta1": beta1, "beta2": beta2, "eps": group["eps"],
                "weight_decay": group["weight_decay"]}


class Adam(_AdamFamily):
    """Adam with PyTorch's rule: weight decay is L2 added to the gradient, unless
    `decoupled_weight_decay` makes it AdamW."""


class AdamW(_AdamFamily):
    """Adam with decoupled weight decay (default 1e-2), PyTorch's AdamW rule: its groups
    hold `decoupled_weight_decay=True`, as PyTorch's do."""

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class RMSprop(_Rule):
    """RMSprop with PyTorch's rule: `v = alpha * v + (1 - alpha) * g*g` (minus the square
    of the mean gradient when centered), `b = momentum * b + g / (sqrt(v) + eps)`,
    `p -= lr * b`, after L2 weight decay in the gradient.

    optax's `rmsprop` differs in its defaults (decay 0.9, not alpha 0.99) and puts eps
    inside the square root; here its `scale_by_rms` / `scale_by_stddev` run with
    `decay=alpha, eps_in_sqrt=False` and a zero initial scale, then `trace(momentum)`.
    """

    factory = staticmethod(optax.inject_hyperparams(_rmsprop,
                                                    static_args=("centered", "maximize")))
    hyperparams = ("lr", "alpha", "eps", "weight_decay", "momentum")
    options = ("centered", "maximize")
    switches = ("capturable", "foreach", "differentiable")

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-2,
                 alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check("learning rate", lr)
        _check("epsilon value", eps)
        _check("momentum value", momentum)
        _check("weight_decay value", weight_decay)
        _check("alpha value", alpha)
        super().__init__(params, lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                         centered=centered, weight_decay=weight_decay, capturable=capturable,
                         foreach=foreach, maximize=maximize, differentiable=differentiable)


class Adagrad(_Rule):
    """Adagrad with PyTorch's rule: `s += g*g`, `p -= lr / (1 + (step - 1) * lr_decay) *
    g / (sqrt(s) + eps)`, after L2 weight decay in the gradient.

    optax's `adagrad` differs: its accumulator starts at 0.1 (here at
    `initial_accumulator_value`, default 0), its eps (1e-7) is inside the square root
    (here outside, 1e-10: `scale_by_root_sum_of_squares`), and it has no `lr_decay`
    (here `scale_by_schedule` on optax's step count).
    """

    factory = staticmethod(optax.inject_hyperparams(
        _adagrad, static_args=("initial_accumulator_value", "maximize")))
    hyperparams = ("lr", "lr_decay", "weight_decay", "eps")
    switches = ("foreach", "differentiable", "fused")

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], lr: float = 1e-2,
                 lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10,
                 foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        _check("learning rate", lr)
        _check("lr_decay value", lr_decay)
        _check("weight_decay value", weight_decay)
        _check("initial_accumulator_value value", initial_accumulator_value)
        _check("epsilon value", eps)
        super().__init__(params, lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                         maximize=maximize, differentiable=differentiable, fused=fused)

    def _build_options(self, group: dict) -> dict[str, Any]:
        """As PyTorch, every accumulator starts at the constructor's value, whatever a
        group's `initial_accumulator_value` says."""
        return {**super()._build_options(group),
                "initial_accumulator_value": self.defaults["initial_accumulator_value"]}
