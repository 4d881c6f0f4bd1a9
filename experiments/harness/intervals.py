"""Bootstrap intervals of the ratios a table reports, so that a ratio says how sure it is.

Note [Bootstrap intervals of ratios]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A ratio of two peers' medians is one draw from a noisy machine; its interval
says which ratios the samples allow. The interval is a percentile bootstrap:
each of ``RESAMPLES`` times, every peer's samples are resampled with
replacement, each peer independently (the peers' samples are not pairs, since
the ratio is of their medians), the ratio of the resampled medians is taken,
and the interval runs from the 2.5th to the 97.5th percentile of those ratios.
A paired ratio (the median over rounds of the two peers' times in one round,
as the profiler's table reports) resamples whole rounds instead, so that each
pair stays together. The generator is seeded with ``SEED`` for every interval,
so a record's intervals follow from its samples alone and rebuilding the paper
from the same samples gives the same intervals. Minimum times get no interval:
a bootstrap of a minimum can never go below the smallest sample, so it would
claim a certainty it does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LEVEL = 0.95
RESAMPLES = 2_000
SEED = 0
SHOWN = f"{LEVEL:.0%} interval"
"""How tables, notes and figures name the interval."""

Interval = list[float]
"""[low, high], as the JSON record keeps it."""


def method() -> dict[str, Any]:
    """How every interval of a record was computed: the record keeps it beside them."""
    return {
        "method": "percentile bootstrap",
        "statistic": "ratio of medians (a paired ratio: median of per-round ratios)",
        "resampling": "each peer's samples independently, with replacement (a paired ratio: "
        "whole rounds)",
        "level": LEVEL,
        "resamples": RESAMPLES,
        "seed": SEED,
    }


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float]) -> Interval | None:
    """The interval of median(numerator) / median(denominator); None without samples."""
    if not numerator or not denominator:
        return None
    import numpy as np

    rng = np.random.default_rng(SEED)
    medians = [
        np.median(rng.choice(np.asarray(samples, dtype=float), (RESAMPLES, len(samples))), axis=1)
        for samples in (numerator, denominator)
    ]
    with np.errstate(divide="ignore", invalid="ignore"):
        return _percentiles(medians[0] / medians[1])


def paired_interval(numerator: Sequence[float], denominator: Sequence[float]) -> Interval | None:
    """The interval of the median of numerator[i] / denominator[i] over rounds i."""
    if not numerator or len(numerator) != len(denominator):
        return None
    import numpy as np

    rng = np.random.default_rng(SEED)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_round = np.asarray(numerator, dtype=float) / np.asarray(denominator, dtype=float)
    return _percentiles(np.median(rng.choice(per_round, (RESAMPLES, len(per_round))), axis=1))


def interval_text(interval: Interval | None) -> str:
    """" [1.20, 1.26]" as a table or a note shows it after its ratio; nothing without one."""
    return "" if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]"


def _percentiles(ratios: Any) -> Interval | None:
    """The interval's ends; None where a resampled median of zero made a ratio infinite."""
    import numpy as np

    if not np.all(np.isfinite(ratios)):
        return None
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return [float(low), float(high)]
