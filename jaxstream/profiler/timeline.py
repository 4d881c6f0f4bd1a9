"""Profile exports: the Trace Event Format (Perfetto) and a PNG timeline."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from .events import KINDS, ProfileEvent, nesting

_KIND_COLORS = {"node": "tab:blue", "hook": "tab:orange", "callback": "tab:green",
                "stream": "tab:red", "kernel": "tab:purple", "host": "tab:gray"}
PROFILE_AXIS = "time since the profile started (ms)"


def chrome_trace(events: list[ProfileEvent], origin: int) -> dict[str, Any]:
    """The events in the Trace Event Format (JSON object form), times in microseconds."""
    pid = os.getpid()
    trace: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
         "args": {"name": "jaxstream"}},
    ]
    threads: dict[int, str] = {}
    for event in events:
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


def _label_bars(figure: Any, axes: Any, widest: list[tuple[float, float, float, float, str]]
                ) -> None:
    """Names each of the ``widest`` bars inside it, where its name fits: a name wider than its
    bar would run into its neighbours' names or past the axes' edge, so it is left out."""
    texts = [
        (axes.text(start + width / 2, y + band * 0.47, name, ha="center", va="center",
                   fontsize=7, clip_on=True), start, width)
        for start, width, y, band, name in widest
    ]
    figure.canvas.draw()  # lays the figure out, so that names and bars measure as drawn
    renderer = figure.canvas.get_renderer()
    for text, start, width in texts:
        left, right = (axes.transData.transform((x, 0.0))[0] for x in (start, start + width))
        if text.get_window_extent(renderer).width > right - left:
            text.remove()


def plot_timeline(
    events: list[ProfileEvent], origin: int, path: Path, max_labels: int, *,
    xlabel: str = PROFILE_AXIS, title: str = "jaxstream profile",
) -> Path:
    plt = _pyplot()
    from matplotlib.patches import Patch

    rows = _timeline_rows(events)
    parents = nesting(events, _row_label)
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
    axes.set_yticks(range(len(rows)), list(rows))
    axes.set_ylim(len(rows) - 0.5, -0.5)
    axes.set_xlim(0, span_ms * 1.01)
    axes.set_xlabel(xlabel)
    axes.set_title(f"{title}: {len(events)} events")
    kinds_present = sorted({event.kind for event in events}, key=KINDS.index)
    axes.legend(handles=[Patch(color=_KIND_COLORS[k], label=k) for k in kinds_present],
                loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    axes.grid(axis="x", alpha=0.3)
    _label_bars(figure, axes, sorted(placed, key=lambda bar: -bar[1])[:max_labels])
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
