"""A table with a row per case and a column per peer: its row keys, columns and figure.

A peer's time is stored in the row under ``{peer}_{unit}{suffix}`` (``torch_ms``,
``torch_ms_min``, ``torch_ms_cpu``), one key per statistic of
``timing.STATISTICS``; a ratio of two such times under ``{name}{suffix}``; every
sample under ``timings``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.harness.plots import grouped_bars
from experiments.harness.results import Column
from experiments.harness.timing import (
    STATISTICS,
    STATISTICS_HEADER,
    Outcome,
    ratio_or_none,
    statistic_or_none,
)

Row = dict[str, Any]


def peer_times(
    outcomes: Mapping[str, Outcome],
    unit: str,
    scale: float = 1.0,
    statistics: Mapping[str, str] = STATISTICS,
) -> Row:
    """``{peer}_{unit}{suffix}``: each statistic of each peer times ``scale`` (None: no timing)."""
    return {
        f"{peer}_{unit}{suffix}": statistic_or_none(outcome, statistic, scale)
        for peer, outcome in outcomes.items()
        for suffix, statistic in statistics.items()
    }


def ratios(row: Row, name: str, numerator: str, denominator: str) -> Row:
    """``{name}{suffix}``: the row's ``{numerator}{suffix}`` / ``{denominator}{suffix}``."""
    return {
        f"{name}{suffix}": ratio_or_none(row[f"{numerator}{suffix}"], row[f"{denominator}{suffix}"])
        for suffix in STATISTICS
    }


def ratio_verdict(row: Row, name: str, met: Callable[[float], bool]) -> str | None:
    """"1.23x wall / 1.10x CPU (met)": the ratio ``name`` by wall-time and CPU-time median,
    met only if ``met`` holds for both; None where the ratio was not measured."""
    wall, cpu = row[name], row[f"{name}_cpu"]
    if wall is None or cpu is None:
        return None
    verdict = "met" if met(wall) and met(cpu) else "not met"
    return f"{wall:.2f}x wall / {cpu:.2f}x CPU ({verdict})"


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
            ratios(
                row,
                f"{numerator}_over_{denominator}",
                f"{numerator}_us_per_node",
                f"{denominator}_us_per_node",
            )
        )
    row["timings"] = timings(outcomes)
    return row


def peer_columns(peers: Mapping[str, str], unit: str, header: str, fmt: str) -> list[Column]:
    """A column of median times per peer; ``header`` names the peer's label ``{label}``."""
    return [
        Column(header.format(label=label), (f"{peer}_{unit}",), fmt)
        for peer, label in peers.items()
    ]


def ratio_column(header: str, name: str) -> Column:
    """A ratio by wall-time median, wall-time minimum and CPU-time median."""
    return Column(
        f"{header} ({STATISTICS_HEADER})", tuple(name + suffix for suffix in STATISTICS), "{:.2f}x"
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


def peer_bars(
    path: Path,
    rows: Sequence[Row],
    peers: Mapping[str, str],
    unit: str,
    *,
    ylabel: str,
    title: str,
    groups: Sequence[str] | None = None,
    log_scale: bool = False,
) -> bool:
    """A cluster of bars per row, named by ``groups`` (by default the rows' ``workload``),
    and in each a bar per peer's median time."""
    return grouped_bars(
        path,
        groups=[row["workload"] for row in rows] if groups is None else groups,
        series={label: [row[f"{peer}_{unit}"] for row in rows] for peer, label in peers.items()},
        ylabel=ylabel,
        title=title,
        log_scale=log_scale,
    )
