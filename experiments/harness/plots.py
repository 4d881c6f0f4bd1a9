"""Ratio figures written headless (matplotlib's Agg backend).

Note [Ratio figures]
~~~~~~~~~~~~~~~~~~~~
A figure shows what the tables judge: ratios measured within one run, on a
linear axis from zero, each bar with its bootstrap interval as an error bar
(Note [Bootstrap intervals of ratios] in intervals.py), a line at 1 (parity)
and, over each group that has one, its target as a dashed segment. Absolute
times stay in the tables: on a shared machine they do not compare across runs,
and bars of times on a log scale start from an arbitrary floor, so their
lengths mean nothing. Group labels are wrapped, so that long workload names do
not run into each other, and a group with no ratio measured says n/a.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

LABEL_WIDTH = 18
"""Characters per line of a group's label under its bars."""


@dataclass(frozen=True)
class RatioSeries:
    """One bar per group: a ratio and its interval (None: not measured, or no interval)."""

    label: str
    values: Sequence[float | None]
    intervals: Sequence[Sequence[float] | None]


@dataclass(frozen=True)
class RatioPanel:
    """One axes of bars; ``targets`` holds one target per group (None: no target there)."""

    title: str
    ylabel: str
    groups: Sequence[str]
    series: Sequence[RatioSeries]
    targets: Sequence[float | None] = field(default_factory=tuple)
    target_label: str = "target"


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def ratio_bars(path: Path, panels: Sequence[RatioPanel], title: str) -> bool:
    """Each panel's bars with their error bars, parity line and targets, one panel per row.

    Returns False, writing nothing, when no ratio at all was measured.
    """
    if all(v is None for panel in panels for s in panel.series for v in s.values):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widest = max(len(panel.groups) * max(len(panel.series), 1) for panel in panels)
    figure, axes_list = plt.subplots(
        len(panels), 1, squeeze=False, layout="constrained",
        figsize=(4.5 + 0.55 * widest, 3.6 * len(panels)),
    )
    for axes, panel in zip(axes_list[:, 0], panels, strict=True):
        _draw_panel(axes, panel)
    figure.suptitle(title)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def _draw_panel(axes: object, panel: RatioPanel) -> None:
    width = 0.8 / max(len(panel.series), 1)
    for index, series in enumerate(panel.series):
        offset = (index - (len(panel.series) - 1) / 2) * width
        positions = [group + offset for group in range(len(panel.groups))]
        heights = [math.nan if value is None else value for value in series.values]
        axes.bar(positions, heights, width=width, label=series.label,
                 yerr=_error_bars(series), capsize=3, error_kw={"elinewidth": 1})
    if all(value is None for series in panel.series for value in series.values):
        axes.text(0.5, 0.5, "not measured in this run", transform=axes.transAxes,
                  ha="center", va="center")
    else:
        for group in range(len(panel.groups)):
            if all(series.values[group] is None for series in panel.series):
                axes.text(group, 0, "n/a", ha="center", va="bottom", fontsize="small")
    axes.axhline(1.0, color="black", linewidth=0.8, label="parity (1x)")
    _draw_targets(axes, panel)
    axes.set_xticks(range(len(panel.groups)),
                    [textwrap.fill(group, LABEL_WIDTH) for group in panel.groups])
    axes.tick_params(axis="x", labelsize="small")
    axes.set_ylim(bottom=0)
    axes.set_ylabel(panel.ylabel)
    axes.set_title(panel.title, fontsize="medium")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))


def _error_bars(series: RatioSeries) -> list[list[float]]:
    """Distances below and above each bar to its interval's ends (none without one)."""
    below, above = [], []
    for value, interval in zip(series.values, series.intervals, strict=True):
        missing = value is None or interval is None
        below.append(0.0 if missing else max(value - interval[0], 0.0))
        above.append(0.0 if missing else max(interval[1] - value, 0.0))
    return [below, above]


def _draw_targets(axes: object, panel: RatioPanel) -> None:
    labelled = False
    for group, target in enumerate(panel.targets):
        if target is None:
            continue
        axes.hlines(target, group - 0.45, group + 0.45, colors="tab:red", linestyles="dashed",
                    label=None if labelled else panel.target_label)
        labelled = True
