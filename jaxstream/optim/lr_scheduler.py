"""`js.optim.lr_scheduler`: PyTorch's learning-rate schedulers, as values of optax schedules.

Note [Schedulers over optax schedules]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Each scheduler has, for each parameter group, a schedule: a function of the
epoch giving PyTorch's closed form of that group's lr, made with optax's
schedules (`optax.exponential_decay`, `optax.piecewise_constant_schedule`,
`optax.cosine_decay_schedule`, `optax.linear_schedule`) from the group's
`initial_lr`. `step()` moves `last_epoch` and writes each group's new lr into
`optimizer.param_groups`, which the optimizer's next step writes into its state
(Note [Hyperparameters live in the state] in optimizer.py). A step compiled with
`js.compile` reads the lrs as inputs, so a scheduler stepped between its calls
takes no new trace; stepped inside one, it is refused (Note [Hyperparameters
under js.compile] in hyperparams.py).

PyTorch's chainable schedulers (StepLR, MultiStepLR, ExponentialLR, LinearLR,
CosineAnnealingLR) move a group's *current* lr as their schedule moved since the
previous epoch: by the ratio of the two values (above `eta_min` for the cosine),
or by their difference where the previous value sat at `eta_min`. So an lr set by
hand, or a second scheduler on the same optimizer, composes as in PyTorch.
LambdaLR, OneCycleLR and `from_optax` set the schedule's value itself.

Schedules are evaluated in float64 (JAX's x64 mode, for the call only), as
PyTorch computes lrs in Python floats.
"""

from __future__ import annotations

import types
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import optax

from .one_cycle import OneCycleLR
from .optimizer import Optimizer
from .scheduler import LRScheduler, Schedule, value_at


def _moved(lr: float, before: float, now: float, floor: float) -> float:
    """`lr` moved as a schedule moved from `before` to `now`: by their ratio above `floor`,
    or by their difference where `before` sat at `floor`."""
    if before == floor:
        return lr + (now - before)
    return floor + (lr - floor) * (now - floor) / (before - floor)


class _Chainable(LRScheduler):
    """PyTorch's chainable form: each group's current lr moves as the schedule moved."""

    _floor = 0.0

    def get_lr(self) -> list[float]:
        epoch = self.last_epoch
        groups = self.optimizer.param_groups
        if self._step_count == 1 and epoch > 0:
            return [group["lr"] for group in groups]  # resumed: the lrs are where they were
        lrs = []
        for i, group in enumerate(groups):
            schedule = self.schedule(i)
            before = self.base_lrs[i] if epoch == 0 else value_at(schedule, epoch - 1)
            lrs.append(_moved(group["lr"], before, value_at(schedule, epoch), self._floor))
        return lrs


class StepLR(_Chainable):
    """The lr times `gamma` every `step_size` epochs: `optax.exponential_decay` with
    `staircase=True` (a `gamma` of 0 makes optax's schedule constant)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        return optax.exponential_decay(self.base_lrs[group], self.step_size, self.gamma,
                                       staircase=True)


class MultiStepLR(_Chainable):
    """The lr times `gamma` at each milestone (a repeated one counts each time):
    `optax.piecewise_constant_schedule`."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        scales = {epoch: self.gamma**count for epoch, count in self.milestones.items()}
        return optax.piecewise_constant_schedule(self.base_lrs[group], scales)


class ExponentialLR(_Chainable):
    """The lr times `gamma` every epoch: `optax.exponential_decay` (a `gamma` of 0 makes
    optax's schedule constant)."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        return optax.exponential_decay(self.base_lrs[group], 1, self.gamma)


class CosineAnnealingLR(_Chainable):
    """The lr along half a cosine from the initial lr down to `eta_min` over `T_max`
    epochs, and back up over the next `T_max`, as PyTorch's: `optax.cosine_decay_schedule`
    (which stays at its end after `T_max`) at the epoch reflected into `[0, T_max]`."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        self._floor = eta_min
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        period, eta_min = self.T_max, self.eta_min
        cosine = optax.cosine_decay_schedule(self.base_lrs[group] - eta_min, period)

        def reflected(epoch: int) -> Any:
            phase = epoch % (2 * period)
            return eta_min + cosine(min(phase, 2 * period - phase))

        return reflected


class LinearLR(_Chainable):
    """The lr times a factor going linearly from `start_factor` to `end_factor` over
    `total_iters` epochs: `optax.linear_schedule`."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or "
                f"equal to 1, got start_factor={start_factor}"
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(
                f"Ending multiplicative factor expected to be between 0 and 1, got "
                f"end_factor={end_factor}"
            )
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        base = self.base_lrs[group]
        return optax.linear_schedule(base * self.start_factor, base * self.end_factor,
                                     self.total_iters)


class LambdaLR(LRScheduler):
    """The initial lr times `lr_lambda(epoch)` (one function, or one per group)."""

    _unsaved = ("optimizer", "lr_lambdas")

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1) -> None:
        groups = len(optimizer.param_groups)
        if isinstance(lr_lambda, list | tuple):
            if len(lr_lambda) != groups:
                raise ValueError(f"Expected {groups} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * groups
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        base, factor = self.base_lrs[group], self.lr_lambdas[group]
        return lambda epoch: base * factor(epoch)

    def state_dict(self) -> dict[str, Any]:
        """As PyTorch: a function is left out (None), a callable object keeps its attributes."""
        return {**super().state_dict(), "lr_lambdas": [
            None if isinstance(fn, types.FunctionType) else dict(vars(fn))
            for fn in self.lr_lambdas
        ]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict["lr_lambdas"]
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for fn, attributes in zip(self.lr_lambdas, saved, strict=True):
            if attributes is not None:
                vars(fn).update(attributes)


class _FromOptax(LRScheduler):
    """Each group's lr is its schedule's value at the epoch."""

    _unsaved = ("optimizer", "schedules")

    def __init__(self, optimizer: Optimizer, schedules: list[Schedule], last_epoch: int) -> None:
        self.schedules = schedules
        super().__init__(optimizer, last_epoch)

    def schedule(self, group: int) -> Schedule:
        return self.schedules[group]


def from_optax(optimizer: Optimizer, schedule: Schedule | list[Schedule],
               last_epoch: int = -1) -> LRScheduler:
    """A scheduler that sets each group's lr to an optax schedule's value at the epoch
    (`schedule`, or `schedule[i]` for group i), e.g. `optax.warmup_cosine_decay_schedule`."""
    groups = len(optimizer.param_groups)
    schedules = list(schedule) if isinstance(schedule, list | tuple) else [schedule] * groups
    if len(schedules) != groups or not all(callable(s) for s in schedules):
        raise ValueError(
            f"from_optax: give one optax schedule, or one per parameter group ({groups}); got "
            f"{schedule!r}"
        )
    return _FromOptax(optimizer, schedules, last_epoch)


__all__ = [
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "OneCycleLR",
    "StepLR",
    "from_optax",
]
