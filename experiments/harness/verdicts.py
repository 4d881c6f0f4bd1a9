"""A ratio judged against its target: met, missed, or inconclusive where its interval says so.

Note [Verdicts from intervals]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A target is judged on the ratio's wall-time and CPU-time medians, each with its
bootstrap interval (Note [Bootstrap intervals of ratios] in intervals.py). One
statistic has met its target when its whole interval lies on the target's side,
missed it when its whole interval lies beyond, and is inconclusive when the
interval straddles the target. The target asks for both statistics, so the
verdict is "met" only if both met, "missed" if either missed, and
"inconclusive" otherwise. Where a statistic has no interval (a record without
samples), its median alone decides it, as before intervals were kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.harness.intervals import SHOWN, interval_text
from experiments.harness.results import Column

MET, MISSED, INCONCLUSIVE = "met", "missed", "inconclusive"
RULE = (
    f"medians with their {SHOWN}s; a target is met only if both the wall and the CPU "
    "interval lie within it, missed if either lies beyond it, inconclusive otherwise (Note "
    "[Verdicts from intervals] in experiments/harness/verdicts.py)"
)
"""The verdicts' rule, as the notes state it."""
JUDGED = {"": "wall", "_cpu": "CPU"}
"""The ratio's statistics a verdict judges (row-key suffix -> name)."""


@dataclass(frozen=True)
class Target:
    """A ratio's target: at most ``value`` (a slowdown) or, with ``at_least``, at least it."""

    value: float
    at_least: bool = False

    def __str__(self) -> str:
        return f"{'at least' if self.at_least else 'at most'} {self.value:g}x"

    def judge(self, ratio: float, interval: list[float] | None) -> str:
        """One statistic's verdict: its interval (or, without one, its value) against the target."""
        low, high = interval if interval is not None else (ratio, ratio)
        if self.at_least:
            return MET if low >= self.value else MISSED if high < self.value else INCONCLUSIVE
        return MET if high <= self.value else MISSED if low > self.value else INCONCLUSIVE


def verdict(row: dict[str, Any], name: str, target: Target) -> str | None:
    """The ratio ``name``'s verdict by its wall and CPU medians; None where either is missing."""
    found = []
    for suffix in JUDGED:
        ratio = row.get(f"{name}{suffix}")
        if ratio is None:
            return None
        found.append(target.judge(ratio, row.get(f"{name}{suffix}_interval")))
    if all(one == MET for one in found):
        return MET
    return MISSED if MISSED in found else INCONCLUSIVE


def described(row: dict[str, Any], name: str, target: Target) -> str | None:
    """"1.23x [1.20, 1.26] wall / 1.10x [1.08, 1.12] CPU: met (target at most 1.5x)";
    None where the ratio was not measured."""
    found = verdict(row, name, target)
    if found is None:
        return None
    shown = " / ".join(
        f"{row[name + suffix]:.2f}x{interval_text(row.get(f'{name}{suffix}_interval'))} {label}"
        for suffix, label in JUDGED.items()
    )
    return f"{shown}: {found} (target {target})"


def judged(row: dict[str, Any], name: str, target: Target | None) -> dict[str, Any]:
    """The row's ``{name}_verdict`` and ``{name}_target`` (None where there is no target)."""
    return {
        f"{name}_verdict": None if target is None else verdict(row, name, target),
        f"{name}_target": None if target is None else str(target),
    }


def verdict_column(header: str, name: str) -> Column:
    """"met / at most 1.2x": the verdict of ``name`` and its target."""
    return Column(f"{header}: verdict / target", (f"{name}_verdict", f"{name}_target"))
