"""Where a piece of work spends its own time: the top functions of a cProfile of it."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

HOTSPOT_ROWS = 6


def hotspots(work: Callable[[], object], rows: int = HOTSPOT_ROWS) -> list[str]:
    """The ``rows`` functions where ``work()`` spends most of its own time, as
    "share% function (file:line)" lines, the share being of the whole profile."""
    profiler = cProfile.Profile()
    profiler.runcall(work)
    stats = pstats.Stats(profiler).stats
    total = sum(entry[2] for entry in stats.values())
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:rows]
    return [
        f"{100 * own / total:.0f}% {name} ({file.rsplit('/', 1)[-1]}:{line})"
        for (file, line, name), (_, _, own, _, _) in top
    ]
