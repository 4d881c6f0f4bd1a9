"""Where backward time goes: a process-wide recorder of engine and stream events.

`with js.profiler.profile() as prof:` records, from every thread, each node the
engine evaluates, each hook and final callback it runs, and each stream wait
and event record, with its thread, device, stream, graph task and reentrant
depth. `prof.table()` summarizes them, `prof.export_chrome_trace(path)` writes
a trace that Perfetto and chrome://tracing open, and `prof.plot_timeline(path)`
draws a Gantt chart with a row per thread and stream.

While a profile is open, a `Recorder` is the installed instrumentation (Note
[Instrumentation] in instrumentation.py): the engine and the streams run each
step through it, and it times the step. With no profile open nothing here
runs. Profiles nest: every open profile receives the events recorded while it
is open.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .events import (
    KINDS,
    EventSummary,
    ProfileEvent,
    Recorder,
    attach,
    clock,
    detach,
    is_active,
    nesting,
)
from .timeline import chrome_trace, plot_timeline
from .virtual import virtual_axis, virtual_events

__all__ = [
    "KINDS", "EventSummary", "Profile", "ProfileEvent", "Recorder", "clock", "is_active", "profile"
]

class Profile:
    """The events recorded while it was open (a context manager; use it once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[ProfileEvent] = []
        self._started_ns: int | None = None
        self._stopped_ns: int | None = None
        self._sorted: list[ProfileEvent] | None = None

    def __enter__(self) -> Profile:
        if self._started_ns is not None:
            raise RuntimeError(
                "this profile was already used; open a new one with js.profiler.profile()"
            )
        self._started_ns = clock()
        attach(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopped_ns = clock()
        detach(self)

    @property
    def started_ns(self) -> int | None:
        """The `clock()` reading when the profile was opened (None before)."""
        return self._started_ns

    def add(self, event: ProfileEvent) -> None:
        """Keep `event` (called by the Recorder from any thread)."""
        with self._lock:
            self._events.append(event)

    @property
    def is_open(self) -> bool:
        return self._started_ns is not None and self._stopped_ns is None

    @property
    def events(self) -> list[ProfileEvent]:
        """The events in start order (an enclosing event before the ones nested in it)."""
        if self._sorted is not None:
            return self._sorted
        with self._lock:
            events = sorted(self._events, key=lambda e: (e.start, -e.end))
        if self._stopped_ns is not None:
            self._sorted = events
        return events

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<Profile ({state}) with {len(self._events)} events>"

    # ------------------------------------------------------------- summaries
    def key_averages(self) -> list[EventSummary]:
        """One summary per (name, kind), the largest total time first."""
        events = self.events
        self_times = _self_times(events)
        groups: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for event, self_ns in zip(events, self_times, strict=True):
            group = groups[(event.name, event.kind)]
            group[0] += 1
            group[1] += event.duration
            group[2] += self_ns
            group[3] = max(group[3], event.duration)
        summaries = [
            EventSummary(name, kind, count, total, own, longest)
            for (name, kind), (count, total, own, longest) in groups.items()
        ]
        return sorted(summaries, key=lambda s: (-s.total_ns, s.name))

    def table(self, sort_by: str = "total", limit: int | None = 20) -> str:
        """A fixed-width text table of `key_averages()`, sorted by total, self or count."""
        keys: dict[str, Callable[[EventSummary], Any]] = {
            "total": lambda s: -s.total_ns,
            "self": lambda s: -s.self_ns,
            "count": lambda s: -s.count,
        }
        if sort_by not in keys:
            raise ValueError(f"sort_by must be one of {', '.join(keys)}; got {sort_by!r}")
        summaries = sorted(self.key_averages(), key=keys[sort_by])
        shown = summaries if limit is None else summaries[:limit]
        header = ("name", "kind", "count", "total ms", "self ms", "mean us", "max us")
        rows = [
            (s.name, s.kind, str(s.count), f"{s.total_ns / 1e6:.3f}", f"{s.self_ns / 1e6:.3f}",
             f"{s.mean_ns / 1e3:.2f}", f"{s.max_ns / 1e3:.2f}")
            for s in shown
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        lines = [_table_line(header, widths), "  ".join("-" * w for w in widths)]
        lines += [_table_line(row, widths) for row in rows]
        if len(shown) < len(summaries):
            lines.append(f"... {len(summaries) - len(shown)} more rows (limit={limit})")
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The events in the Trace Event Format (JSON object form), times in microseconds."""
        return chrome_trace(self.events, self._started_ns or 0)

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write `chrome_trace()` as JSON to `path` (open it in Perfetto); returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.chrome_trace()), encoding="utf-8")
        return target

    def plot_timeline(
        self, path: str | os.PathLike[str], *, max_labels: int = 60, clock: Any = None
    ) -> Path:
        """Draw a PNG Gantt chart: a row per (thread, stream), nested events stacked below.

        Needs matplotlib. The `max_labels` widest bars are labeled with their names.
        With `clock` (a closed `js.sim.virtual_time` clock) it draws that clock's
        kernels in virtual time instead, a row per stream, below a row of the host's
        issuing; the title gives the verdict and the host's share (Note [Virtual time]).
        """
        if clock is not None:
            return plot_timeline(virtual_events(clock), 0, Path(path), max_labels,
                                 **virtual_axis(clock))
        events = self.events
        if not events:
            raise ValueError(
                "the profile recorded no events, so there is no timeline to plot "
                "(did a backward run inside the `with js.profiler.profile()` block?)"
            )
        return plot_timeline(events, self._started_ns or events[0].start, Path(path),
                              max_labels)


def profile() -> Profile:
    """A new profile; `with js.profiler.profile() as prof:` records until the block ends."""
    return Profile()


# ----------------------------------------------------------------- helpers


def _table_line(cells: Iterable[str], widths: list[int]) -> str:
    cells = list(cells)
    first = cells[0].ljust(widths[0])
    rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
    return "  ".join([first, *rest]).rstrip()


def _self_times(events: list[ProfileEvent]) -> list[int]:
    self_times = [event.duration for event in events]
    for index, parent in enumerate(nesting(events, lambda e: e.thread_id)):
        if parent >= 0:
            self_times[parent] -= events[index].duration
    return self_times


