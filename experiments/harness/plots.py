"""Grouped bar charts written headless (matplotlib's Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def grouped_bars(
    path: Path,
    *,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    ylabel: str,
    title: str,
    log_scale: bool = False,
) -> bool:
    """One cluster of bars per group, one bar per series; a None value leaves a gap.

    Returns False, writing nothing, when no value at all was measured.
    """
    if all(value is None for values in series.values() for value in values):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(len(series), 1)
    figure, axes = plt.subplots(figsize=(4.0 + 1.9 * len(groups), 4.2), layout="constrained")
    for index, (label, values) in enumerate(series.items()):
        heights = [math.nan if value is None else value for value in values]
        positions = [
            group + (index - (len(series) - 1) / 2) * width for group in range(len(groups))
        ]
        axes.bar(positions, heights, width=width, label=label)
    axes.set_xticks(range(len(groups)), list(groups))
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    if log_scale:
        axes.set_yscale("log")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True
