"""`LRScheduler`: PyTorch's scheduler protocol over per-group schedules (Note [Schedulers
over optax schedules] in lr_scheduler.py)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax

from .optimizer import Optimizer

Schedule = Callable[[Any], Any]
"""An optax schedule: the value at a step count (here, the epoch)."""


def value_at(schedule: Schedule, epoch: float) -> float:
    """`schedule(epoch)` as a Python float, computed in float64."""
    with jax.enable_x64(True):
        return float(schedule(epoch))


class LRScheduler:
    """PyTorch's scheduler protocol: `step()`, `get_last_lr()`, `last_epoch`, `base_lrs`,
    `state_dict()`; subclasses give `schedule(group)` (Note [Schedulers over optax
    schedules])."""

    _unsaved: tuple[str, ...] = ("optimizer",)

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(optimizer).__name__} is not an Optimizer; a scheduler drives the "
                "param_groups of a js.optim optimizer"
            )
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if "lr" not in group:
                raise KeyError(
                    f"param_groups[{i}] has no 'lr' (it has "
                    f"{sorted(k for k in group if k != 'params')}); build the transformation "
                    "with optax.inject_hyperparams and a hyperparameter named lr"
                )
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(
                    f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                    f"a scheduler at last_epoch={last_epoch}; load the optimizer's state dict "
                    "first, or start at last_epoch=-1"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self.step()

    def schedule(self, group: int) -> Schedule:
        """Group `group`'s lr by epoch, PyTorch's closed form."""
        raise NotImplementedError(f"{type(self).__name__} gives no schedule")

    def get_lr(self) -> list[float]:
        """The groups' lrs at `last_epoch`."""
        return self._closed_form()

    def _closed_form(self) -> list[float]:
        return [value_at(self.schedule(i), self.last_epoch) for i in range(len(self.base_lrs))]

    def step(self, epoch: int | None = None) -> None:
        """Move to the next epoch (or, deprecated as in PyTorch, to `epoch`) and set the
        groups' lrs."""
        self._refuse_tracing()
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
            warnings.warn(
                "The epoch parameter in `scheduler.step()` is deprecated, as in PyTorch; "
                "call step() once per epoch instead", UserWarning, stacklevel=2,
            )
            self.last_epoch = epoch
            lrs = self._closed_form()
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _refuse_tracing(self) -> None:
        """A step inside `js.compile` would compute the lrs from the traced ones there
        (Note [Hyperparameters under js.compile] in hyperparams.py): refused."""
        if any(isinstance(g["lr"], jax.core.Tracer) for g in self.optimizer.param_groups):
            raise RuntimeError(
                f"{type(self).__name__}.step() ran inside a function compiled with "
                "js.compile, where the groups' lrs are inputs of the program, read before "
                "each call; step the scheduler outside it, after each call: the next call "
                "uses the new lrs without a new trace"
            )

    def get_last_lr(self) -> list[float]:
        """The lrs the last `step()` set."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer (and functions, which do not pickle)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._unsaved}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
