"""`OneCycleLR`: PyTorch's 1cycle policy, each phase an optax schedule (Note [Schedulers
over optax schedules] in lr_scheduler.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

import optax

from .optimizer import Optimizer
from .scheduler import LRScheduler, Schedule, value_at


class _Phase(NamedTuple):
    """One phase of a cycle: where it ends, and the group entries it goes from and to."""

    end: float
    lr: tuple[str, str]
    momentum: tuple[str, str]


class OneCycleLR(LRScheduler):
    """PyTorch's 1cycle policy: the lr rises from `max_lr / div_factor` to `max_lr` over the
    first `pct_start` of `total_steps`, then falls to `initial_lr / final_div_factor`
    (three phases with `three_phase`); the momentum (Adam's beta1) cycles the other way.

    optax's `cosine_onecycle_schedule` puts the peak at step `int(pct_start * total)` and
    the end at `total`; PyTorch's at `pct_start * total - 1` and `total - 1`. So each phase
    here is `optax.cosine_decay_schedule` (or `optax.linear_schedule`) over PyTorch's
    phase, at the step's fractional place in it.
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self.anneal_strategy = anneal_strategy
        self.cycle_momentum = cycle_momentum
        self._phases = _phases(self.total_steps, pct_start, three_phase)
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, top in zip(groups, _per_group(max_lr, groups, "max_lr"), strict=True):
                group.update(initial_lr=top / div_factor, max_lr=top,
                             min_lr=top / div_factor / final_div_factor)
        self._use_beta1 = "betas" in optimizer.defaults
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and not self._use_beta1:
                raise ValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option "
                    f"enabled; {type(optimizer).__name__} has neither: pass "
                    "cycle_momentum=False"
                )
            if last_epoch == -1:
                tops = _per_group(max_momentum, groups, "max_momentum")
                bottoms = _per_group(base_momentum, groups, "base_momentum")
                for group, top, bottom in zip(groups, tops, bottoms, strict=True):
                    group.update(max_momentum=top, base_momentum=bottom)
                    self._set_momentum(group, top)
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict, value: float) -> None:
        if self._use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def schedule(self, group: int) -> Schedule:
        return self._cycle(self.optimizer.param_groups[group], "lr")

    def _cycle(self, group: dict, kind: str) -> Schedule:
        """The cycle of `group`'s lr or momentum, by step, from its entries now."""

        def at(step: float) -> Any:
            start = 0.0
            for i, phase in enumerate(self._phases):
                if step <= phase.end or i == len(self._phases) - 1:
                    first, last = getattr(phase, kind)
                    return self._anneal(group[first], group[last], phase.end - start)(step - start)
                start = phase.end
            raise AssertionError("the last phase takes every step")

        return at

    def _anneal(self, start: float, end: float, steps: float) -> Schedule:
        if self.anneal_strategy == "linear":
            return optax.linear_schedule(start, end, steps)
        cosine = optax.cosine_decay_schedule(start - end, steps)
        return lambda step: end + cosine(step)

    def get_lr(self) -> list[float]:
        if self.last_epoch > self.total_steps:
            raise ValueError(
                f"Tried to step {self.last_epoch} times. The specified number of total steps "
                f"is {self.total_steps}"
            )
        if self.cycle_momentum:
            for group in self.optimizer.param_groups:
                momentum = value_at(self._cycle(group, "momentum"), self.last_epoch)
                self._set_momentum(group, momentum)
        return self._closed_form()


def _total_steps(total_steps: int | None, epochs: int | None,
                 steps_per_epoch: int | None) -> int:
    """OneCycleLR's length, from `total_steps` or `epochs * steps_per_epoch`, checked."""
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
    for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"Expected positive integer {name}, but got {value}")
    return epochs * steps_per_epoch


def _phases(total: int, pct_start: float, three_phase: bool) -> list[_Phase]:
    """PyTorch's phases: up to the peak, (back to the start,) down to the minimum."""
    up = _Phase(pct_start * total - 1, ("initial_lr", "max_lr"), ("max_momentum", "base_momentum"))
    if not three_phase:
        return [up, _Phase(total - 1, ("max_lr", "min_lr"), ("base_momentum", "max_momentum"))]
    return [
        up,
        _Phase(2 * pct_start * total - 2, ("max_lr", "initial_lr"),
               ("base_momentum", "max_momentum")),
        _Phase(total - 1, ("initial_lr", "min_lr"), ("max_momentum", "max_momentum")),
    ]


def _per_group(value: float | list[float], groups: list[dict], name: str) -> list[float]:
    """One value for every group, or a list with one per group."""
    if not isinstance(value, list | tuple):
        return [value] * len(groups)
    if len(value) != len(groups):
        raise ValueError(f"expected {len(groups)} values for {name}, got {len(value)}")
    return list(value)
