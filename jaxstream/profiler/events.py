"""Profile events and the Recorder that makes them.

While any profile is open, `Recorder` is the installed instrumentation (Note
[Instrumentation] in instrumentation.py): the engine and the streams run each
step through it, it times the step and hands the event to every open profile.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import instrumentation
from ..autograd.exec_state import exec_state
from ..instrumentation import Instrumentation

clock = time.perf_counter_ns
"""The profiler's clock (integer nanoseconds)."""


_lock = threading.Lock()
_open: list[Any] = []  # the open profiles, each with `started_ns` and `add(event)`


def attach(profile: Any) -> None:
    """Start sending events to `profile` (the Recorder is installed while any is attached)."""
    with _lock:
        _open.append(profile)
        instrumentation.install(_RECORDER)


def detach(profile: Any) -> None:
    with _lock:
        _open.remove(profile)
        if not _open:
            instrumentation.install(None)


def is_active() -> bool:
    """Whether any profile is open (its Recorder is then the installed instrumentation)."""
    return bool(_open)


KINDS = ("node", "hook", "callback", "stream", "kernel", "host")
"""What an event is; "kernel" and "host" come from a virtual clock (virtual.py)."""
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


class Recorder(Instrumentation):
    """The instrumentation installed while any profile is open: it times every step."""

    def evaluate_node(self, evaluate: Callable, graph_task: Any, fn: Any, inputs: list) -> None:
        start = clock()
        try:
            evaluate(graph_task, fn, inputs)
        except BaseException as exc:
            _emit_node(graph_task, fn, start, {"error": type(exc).__name__})
            raise
        _emit_node(graph_task, fn, start, {})

    def call_hook(self, kind: str, graph_task: Any, fn: Any, hook: Callable, *args: Any) -> Any:
        start = clock()
        try:
            return hook(*args)
        finally:
            device, stream = _node_place(fn)
            _emit(ProfileEvent(
                f"hook:{kind}", "hook", *_thread(), device, stream, start, clock(),
                *_task_fields(graph_task), None, {"node": fn.name(), "hook": _callable_name(hook)},
            ))

    def run_callback(self, graph_task: Any, callback: Callable[[], None]) -> None:
        start = clock()
        try:
            callback()
        finally:
            _emit(ProfileEvent(
                "callback", "callback", *_thread(), None, None, start, clock(),
                *_task_fields(graph_task), None, {"callback": _callable_name(callback)},
            ))

    def stream_op(self, name: str, stream: Any, details: dict, run: Callable, *args: Any) -> Any:
        start = clock()
        result = run(*args)
        _emit(ProfileEvent(
            name, "stream", *_thread(), str(stream.device), _stream_label(stream), start, clock(),
            *_task_fields(exec_state.graph_task), None,
            {key: _describe(value) for key, value in details.items()},
        ))
        return result


_RECORDER = Recorder()


def _emit_node(graph_task: Any, fn: Any, start: int, args: dict[str, Any]) -> None:
    end = clock()
    device, stream = _node_place(fn)
    _emit(ProfileEvent(
        fn.name(), "node", *_thread(), device, stream, start, end,
        graph_task.id, graph_task.reentrant_depth, fn.sequence_nr, args,
    ))


def _emit(event: ProfileEvent) -> None:
    with _lock:
        for session in _open:
            if event.start >= session.started_ns:
                session.add(event)


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


def nesting(events: list[ProfileEvent], key: Callable[[ProfileEvent], Any]) -> list[int]:
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
