"""The one object through which observers watch the engine and the streams.

Note [Instrumentation]
~~~~~~~~~~~~~~~~~~~~~~
Every step an observer may want to time (a node's evaluation, a hook, a final
callback, a stream wait or event record) is run by calling a method of
`current()`, the installed `Instrumentation`. The default one just runs the
step: the engine and the streams have no `if profiling:` branches, and an
observer (the profiler) is a subclass that times the step around the same
call. `install` swaps the object for the whole process; it lives at the bottom
of the import graph so that streams and the engine can call it without
knowing who observes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Instrumentation:
    """Runs each observable step and does nothing else (what runs when nobody observes)."""

    def evaluate_node(self, evaluate: Callable, graph_task: Any, fn: Any, inputs: list) -> None:
        """The engine evaluates node `fn` of `graph_task` by calling `evaluate`."""
        evaluate(graph_task, fn, inputs)

    def call_hook(self, kind: str, graph_task: Any, fn: Any, hook: Callable, *args: Any) -> Any:
        """The engine calls `hook(*args)`, a hook of `kind` on node `fn`."""
        return hook(*args)

    def run_callback(self, graph_task: Any, callback: Callable[[], None]) -> None:
        """The engine runs a final callback of `graph_task`."""
        callback()

    def stream_op(self, name: str, stream: Any, details: dict, run: Callable, *args: Any) -> Any:
        """A stream operation `name` on `stream` (`details`: the events and streams it orders)."""
        return run(*args)


QUIET = Instrumentation()
"""The instrumentation installed while nobody observes: it only runs each step."""

installed: Instrumentation = QUIET
"""The installed instrumentation. Read it here (the engine's loop tests it once per node,
Note [A plain node in one frame] in autograd/engine.py); change it with `install`."""


def current() -> Instrumentation:
    """The installed instrumentation (Note [Instrumentation])."""
    return installed


def install(instrumentation: Instrumentation | None) -> None:
    """Make `instrumentation` the process's observer; None puts back the one that does nothing."""
    global installed
    installed = QUIET if instrumentation is None else instrumentation
