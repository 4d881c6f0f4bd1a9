"""Where backward time goes: a process-wide recorder of engine and stream events.

`with js.profiler.profile() as prof:` records, from every thread, each node the
engine evaluates, each hook and final callback it runs, and each stream wait
and event record, with its thread, device, stream, graph task and reentrant
depth. `prof.table()` summarizes them, `prof.export_chrome_trace(path)` writes
a trace that Perfetto and chrome://tracing open, and `prof.plot_timeline(path)`
draws a Gantt chart with a row per thread and stream.

The engine and the streams call in here only behind a check of `active`, so
with no profile open each event site costs that one attribute check. Profiles
nest: every open profile receives the events recorded while it is open.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EventSummary", "Profile", "ProfileEvent", "profile"]

active = False
"""True while any profile is open. Read by the event sites; set only by `Profile`."""

clock = time.perf_counter_ns
"""The profiler's clock (integer nanoseconds); event sites take their start time with it."""

_lock = threading.Lock()
_open: list[Profile] = []
_exec_state: Any = None  # the engine's per-thread "current graph task", bound on first use

KINDS = ("node", "hook", "callback", "stream")
_KIND_COLORS = {"node": "tab:blue", "hook": "tab:orange", "callback": "tab:green",
                "stream": "tab:red"}


@dataclass(slots=True)
class ProfileEvent:
    """One timed thing the engine or a stream did; `start`/`end` are `clock()` readings."""

    name: str
    kind: str
    thread: str
    thread_id: int
    device: str | None
    stream: str | None
    start: int
    end: int
    graph_task_id: int | None = None
    reentrant_depth: int | None = None
    sequence_nr: int | None = None
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> int:
        """Nanoseconds between start and end (nested events included)."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class EventSummary:
    """All events of one name and kind: count and times in nanoseconds.

    `self_ns` leaves out the events nested inside them on the same thread
    (a node's hooks, a nested backward run from inside a node).
    """

    name: str
    kind: str
    count: int
    total_ns: int
    self_ns: int
    max_ns: int

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count


# ----------------------------------------------------------------- event sites
# Called by the engine and the streams only while `active` is True.


def evaluate_node(engine: Any, graph_task: Any, fn: Any, inputs: list) -> None:
    """Run `engine.evaluate_function` for `fn` and record it as a node event."""
    start = clock()
    try:
        engine.evaluate_function(graph_task, fn, inputs)
    except BaseException as exc:
        _record_node(graph_task, fn, start, {"error": type(exc).__name__})
        raise
    _record_node(graph_task, fn, start, {})


def call_hook(kind: str, fn: Any, hook: Callable, *args: Any) -> Any:
    """Call `hook(*args)`, a hook of `kind` on node `fn`, recorded as `hook:<kind>`."""
    start = clock()
    try:
        return hook(*args)
    finally:
        device, stream = _node_place(fn)
        task = _exec_state.graph_task if _exec_state is not None else None
        _record(ProfileEvent(
            f"hook:{kind}", "hook", *_thread(), device, stream, start, clock(),
            *_task_fields(task), None, {"node": fn.name(), "hook": _callable_name(hook)},
        ))


def run_callback(graph_task: Any, callback: Callable[[], None]) -> None:
    """Run a final callback of `graph_task`, recorded as a callback event."""
    start = clock()
    try:
        callback()
    finally:
        _record(ProfileEvent(
            "callback", "callback", *_thread(), None, None, start, clock(),
            *_task_fields(graph_task), None, {"callback": _callable_name(callback)},
        ))


def record_stream_op(name: str, started: int, stream: Any, **details: Any) -> None:
    """Record a stream operation on `stream` that began at `started` (0: not profiled)."""
    if not started or not active:
        return
    end = clock()
    task = _exec_state.graph_task if _exec_state is not None else None
    _record(ProfileEvent(
        name, "stream", *_thread(), str(stream.device), _stream_label(stream), started, end,
        *_task_fields(task), None, {key: _describe(value) for key, value in details.items()},
    ))


def _record_node(graph_task: Any, fn: Any, start: int, args: dict[str, Any]) -> None:
    end = clock()
    device, stream = _node_place(fn)
    _record(ProfileEvent(
        fn.name(), "node", *_thread(), device, stream, start, end,
        graph_task.id, graph_task.reentrant_depth, fn.sequence_nr, args,
    ))


def _record(event: ProfileEvent) -> None:
    with _lock:
        for session in _open:
            if event.start >= session._started_ns:
                session._events.append(event)


def _thread() -> tuple[str, int]:
    thread = threading.current_thread()
    return thread.name, thread.native_id or thread.ident or 0


def _task_fields(task: Any) -> tuple[int | None, int | None]:
    if task is None:
        return None, None
    return task.id, task.reentrant_depth


def _node_place(fn: Any) -> tuple[str | None, str | None]:
    """The device and stream a node runs on: its stream's, else its first input's device."""
    stream = fn.stream
    if stream is not None:
        return str(stream.device), _stream_label(stream)
    metadata = fn.input_metadata
    return (str(metadata[0].device) if metadata else None), None


def _stream_label(stream: Any) -> str:
    stream_id = getattr(stream, "id", None)
    return str(stream) if stream_id is None else f"{stream.device} stream {stream_id}"


def _describe(value: Any) -> Any:
    """A JSON-ready form of an event detail (a stream, an event, a number)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "device") and hasattr(value, "priority"):
        return _stream_label(value)
    event_id = getattr(value, "id", None)
    if event_id is not None:
        return f"event {event_id}"
    return repr(value)


def _callable_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


# ----------------------------------------------------------------- profiles


class Profile:
    """The events recorded while it was open (a context manager; use it once)."""

    def __init__(self) -> None:
        self._events: list[ProfileEvent] = []
        self._started_ns: int | None = None
        self._stopped_ns: int | None = None
        self._sorted: list[ProfileEvent] | None = None

    def __enter__(self) -> Profile:
        global active, _exec_state
        if self._started_ns is not None:
            raise RuntimeError(
                "this profile was already used; open a new one with js.profiler.profile()"
            )
        if _exec_state is None:
            from .autograd.graph import exec_state

            _exec_state = exec_state
        with _lock:
            self._started_ns = clock()
            _open.append(self)
            active = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        global active
        with _lock:
            self._stopped_ns = clock()
            _open.remove(self)
            active = bool(_open)

    @property
    def is_open(self) -> bool:
        return self._started_ns is not None and self._stopped_ns is None

    @property
    def events(self) -> list[ProfileEvent]:
        """The events in start order (an enclosing event before the ones nested in it)."""
        if self._sorted is not None:
            return self._sorted
        with _lock:
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

    # ------------------------------------------------------------- exports
    def chrome_trace(self) -> dict[str, Any]:
        """The events in the Trace Event Format (JSON object form), times in microseconds."""
        origin = self._started_ns or 0
        pid = os.getpid()
        trace: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
             "args": {"name": "jaxstream"}},
        ]
        threads: dict[int, str] = {}
        for event in self.events:
            threads.setdefault(event.thread_id, event.thread)
            args: dict[str, Any] = {"device": event.device, "stream": event.stream,
                                    "graph_task_id": event.graph_task_id,
                                    "reentrant_depth": event.reentrant_depth}
            if event.sequence_nr is not None:
                args["sequence_nr"] = event.sequence_nr
            args.update(event.args)
            trace.append({
                "name": event.name, "cat": event.kind, "ph": "X",
                "ts": (event.start - origin) / 1e3, "dur": event.duration / 1e3,
                "pid": pid, "tid": event.thread_id, "args": args,
            })
        for index, (thread_id, name) in enumerate(threads.items()):
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": thread_id,
                          "args": {"name": name}})
            trace.append({"name": "thread_sort_index", "ph": "M", "pid": pid,
                          "tid": thread_id, "args": {"sort_index": index}})
        return {"traceEvents": trace, "displayTimeUnit": "ms",
                "otherData": {"producer": "jaxstream.profiler", "clock": "perf_counter_ns",
                              "origin_ns": origin}}

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write `chrome_trace()` as JSON to `path` (open it in Perfetto); returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.chrome_trace()), encoding="utf-8")
        return target

    def plot_timeline(self, path: str | os.PathLike[str], *, max_labels: int = 60) -> Path:
        """Draw a PNG Gantt chart: a row per (thread, stream), nested events stacked below.

        Needs matplotlib. The `max_labels` widest bars are labeled with their names.
        """
        events = self.events
        if not events:
            raise ValueError(
                "the profile recorded no events, so there is no timeline to plot "
                "(did a backward run inside the `with js.profiler.profile()` block?)"
            )
        return _plot_timeline(events, self._started_ns or events[0].start, Path(path),
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


def _nesting(events: list[ProfileEvent], key: Callable[[ProfileEvent], Any]) -> list[int]:
    """For events in start order: the index of the innermost enclosing event of the same key.

    Events of one thread come from one call stack, so they nest or are disjoint.
    """
    parents = [-1] * len(events)
    stacks: dict[Any, list[int]] = defaultdict(list)
    for index, event in enumerate(events):
        stack = stacks[key(event)]
        while stack and events[stack[-1]].end < event.end:
            stack.pop()
        if stack:
            parents[index] = stack[-1]
        stack.append(index)
    return parents


def _self_times(events: list[ProfileEvent]) -> list[int]:
    self_times = [event.duration for event in events]
    for index, parent in enumerate(_nesting(events, lambda e: e.thread_id)):
        if parent >= 0:
            self_times[parent] -= events[index].duration
    return self_times


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError(
            "plot_timeline needs matplotlib, which is not installed; install it with "
            "`pip install matplotlib` (it is in jaxstream's `experiments` extra)"
        ) from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _row_label(event: ProfileEvent) -> str:
    return event.thread if event.stream is None else f"{event.thread} | {event.stream}"


def _timeline_rows(events: list[ProfileEvent]) -> dict[str, int]:
    """Row numbers: threads in first-event order, each thread's own row before its streams."""
    first_seen: dict[int, int] = {}
    labels: dict[str, tuple[int, int, str]] = {}
    for event in events:
        thread_rank = first_seen.setdefault(event.thread_id, len(first_seen))
        stream = event.stream or ""
        labels.setdefault(_row_label(event), (thread_rank, 1 if stream else 0, stream))
    ordered = sorted(labels, key=labels.__getitem__)
    return {label: row for row, label in enumerate(ordered)}


def _plot_timeline(events: list[ProfileEvent], origin: int, path: Path, max_labels: int) -> Path:
    plt = _pyplot()
    from matplotlib.patches import Patch

    rows = _timeline_rows(events)
    parents = _nesting(events, _row_label)
    levels = [0] * len(events)
    for index, parent in enumerate(parents):
        if parent >= 0:
            levels[index] = levels[parent] + 1
    depth_of_row: dict[str, int] = defaultdict(int)
    for event, level in zip(events, levels, strict=True):
        depth_of_row[_row_label(event)] = max(depth_of_row[_row_label(event)], level + 1)

    bars: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    placed: list[tuple[float, float, float, float, str]] = []
    for event, level in zip(events, levels, strict=True):
        label = _row_label(event)
        band = 0.8 / depth_of_row[label]
        start_ms = (event.start - origin) / 1e6
        width_ms = event.duration / 1e6
        bars[(label, event.kind, level)].append((start_ms, width_ms))
        placed.append((start_ms, width_ms, rows[label] - 0.4 + level * band, band, event.name))

    span_ms = max((start + width for start, width, *_ in placed), default=1.0) or 1.0
    figure, axes = plt.subplots(figsize=(12.0, 1.2 + 0.7 * len(rows)), layout="constrained")
    for (label, kind, level), spans in bars.items():
        band = 0.8 / depth_of_row[label]
        y = rows[label] - 0.4 + level * band
        # At least about a pixel wide, so that instantaneous events stay visible.
        visible = [(start, max(width, span_ms * 1e-3)) for start, width in spans]
        axes.broken_barh(visible, (y, band * 0.95), facecolors=_KIND_COLORS.get(kind, "gray"),
                         edgecolor="none")
    widest = sorted(placed, key=lambda bar: -bar[1])[:max_labels]
    for start, width, y, band, name in widest:
        if width < span_ms * 0.02:
            break
        axes.text(start + width / 2, y + band * 0.47, name, ha="center", va="center",
                  fontsize=7, clip_on=True)
    axes.set_yticks(range(len(rows)), list(rows))
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xlim(0, span_ms * 1.01)
    axes.set_xlabel("time since the profile started (ms)")
    axes.set_title(f"jaxstream profile: {len(events)} events")
    kinds_present = sorted({event.kind for event in events}, key=KINDS.index)
    axes.legend(handles=[Patch(color=_KIND_COLORS[k], label=k) for k in kinds_present],
                loc="upper right", fontsize="small")
    axes.grid(axis="x", alpha=0.3)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
