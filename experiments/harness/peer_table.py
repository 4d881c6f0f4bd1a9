"""A table with a row per case and a column per peer: its row keys, columns and figure.

A peer's time is stored in the row under ``{peer}_{unit}{suffix}`` (``torch_ms``,
``torch_ms_min``, ``torch_ms_cpu``), one key per statistic of
``timing.STATISTICS``, and the cores it used (CPU time / wall time) under
``{peer}_{unit}_cores``; a ratio of two peers under ``{name}{suffix}``, the median
ones with their bootstrap interval under ``{name}{suffix}_interval`` (Note
[Bootstrap intervals of ratios] in intervals.py); every sample under ``timings``.
A peer's column shows its wall and CPU medians and its cores, so that a ratio of
wall times between a peer that used one core and one that used more says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.harness.intervals import SHOWN, ratio_interval
from experiments.harness.plots import RatioPanel, RatioSeries, ratio_bars
from experiments.harness.results import Column
from experiments.harness.timing import (
    CORES,
    STATISTICS,
    Outcome,
    Timing,
    ratio_or_none,
    statistic_or_none,
)

Row = dict[str, Any]
SAMPLES = {"": "samples_s", "_cpu": "cpu_samples_s"}
"""Row-key suffix -> the Timing samples whose median that statistic is, for its interval."""
RATIO_HEADER = f"median [{SHOWN}] / min / CPU [{SHOWN}]"
TIMES_HEADER = "wall / CPU / cores"
"""A peer's column: its wall-time and CPU-time medians, and the cores it used (CPU / wall)."""


def peer_times(
    outcomes: Mapping[str, Outcome],
    unit: str,
    scale: float = 1.0,
    statistics: Mapping[str, str] = STATISTICS,
) -> Row:
    """``{peer}_{unit}{suffix}``: each statistic of each peer times ``scale``, and
    ``{peer}_{unit}_cores``: the cores it used (None: no timing)."""
    row: Row = {}
    for peer, outcome in outcomes.items():
        for suffix, statistic in statistics.items():
            row[f"{peer}_{unit}{suffix}"] = statistic_or_none(outcome, statistic, scale)
        row[f"{peer}_{unit}{CORES}"] = outcome.cores if isinstance(outcome, Timing) else None
    return row


def ratio_of(name: str, numerator: Outcome | None, denominator: Outcome | None) -> Row:
    """``{name}{suffix}``: numerator's statistic / denominator's, for each statistic, and
    ``{name}{suffix}_interval`` for the medians (None where a peer has no timing)."""
    row: Row = {
        f"{name}{suffix}": ratio_or_none(
            statistic_or_none(numerator, statistic), statistic_or_none(denominator, statistic)
        )
        for suffix, statistic in STATISTICS.items()
    }
    timed = isinstance(numerator, Timing) and isinstance(denominator, Timing)
    for suffix, samples in SAMPLES.items():
        row[f"{name}{suffix}_interval"] = (
            ratio_interval(getattr(numerator, samples), getattr(denominator, samples))
            if timed
            else None
        )
    return row


def timings(outcomes: Mapping[str, Outcome]) -> Row:
    """Every peer's samples (or why it has none), for the JSON record."""
    return {peer: outcome.to_json() for peer, outcome in outcomes.items()}


def per_node_row(workload: str, nodes: int, outcomes: Mapping[str, Outcome],
                 pairs: Sequence[tuple[str, str]]) -> Row:
    """A row of per-node times (us) for each peer and the within-run ratio of each pair."""
    row: Row = {"workload": workload, "nodes": nodes}
    row.update(peer_times(outcomes, "us_per_node", 1e6 / nodes))
    for numerator, denominator in pairs:
        row.update(
            ratio_of(f"{numerator}_over_{denominator}", outcomes[numerator], outcomes[denominator])
        )
    row["timings"] = timings(outcomes)
    return row


def peer_column(peer: str, header: str, unit: str, fmt: str) -> Column:
    """The peer's wall-time and CPU-time medians (``fmt``) and the cores it used."""
    keys = tuple(f"{peer}_{unit}{suffix}" for suffix in ("", "_cpu", CORES))
    return Column(f"{header} ({TIMES_HEADER})", keys, (fmt, fmt, "{:.2f}"))


def peer_columns(peers: Mapping[str, str], unit: str, header: str, fmt: str) -> list[Column]:
    """A ``peer_column`` per peer; ``header`` names the peer's label ``{label}``."""
    return [peer_column(peer, header.format(label=label), unit, fmt)
            for peer, label in peers.items()]


def ratio_column(header: str, name: str) -> Column:
    """A ratio by wall-time median, wall-time minimum and CPU-time median, the medians with
    their intervals."""
    return Column(
        f"{header} ({RATIO_HEADER})", tuple(name + suffix for suffix in STATISTICS), "{:.2f}x"
    )


def pair_ratio_columns(
    peers: Mapping[str, str], pairs: Sequence[tuple[str, str]]
) -> list[Column]:
    """A ratio column "A / B" for each (numerator, denominator) pair of peer keys."""
    return [
        ratio_column(
            f"{peers[numerator]} / {peers[denominator]}", f"{numerator}_over_{denominator}"
        )
        for numerator, denominator in pairs
    ]


def ratio_panel(
    rows: Sequence[Row],
    ratios: Mapping[str, str],
    *,
    groups: Sequence[str],
    title: str,
    ylabel: str,
    targets: Sequence[float | None] = (),
    target_label: str = "target",
) -> RatioPanel:
    """A panel of the rows' median ratios (``ratios``: row key -> label) with their
    intervals, a group per row."""
    return RatioPanel(
        title=title,
        ylabel=ylabel,
        groups=groups,
        series=[
            RatioSeries(
                label,
                [row.get(key) for row in rows],
                [row.get(f"{key}_interval") for row in rows],
            )
            for key, label in ratios.items()
        ],
        targets=targets,
        target_label=target_label,
    )


def ratio_figure(path: Path, rows: Sequence[Row], ratios: Mapping[str, str], *,
                 groups: Sequence[str], title: str, ylabel: str,
                 targets: Sequence[float | None] = (), target_label: str = "target") -> bool:
    """One panel of the rows' ratios (Note [Ratio figures] in plots.py)."""
    panel = ratio_panel(rows, ratios, groups=groups, title="", ylabel=ylabel, targets=targets,
                        target_label=target_label)
    return ratio_bars(path, [panel], title)
