"""The record's timelines, with each stream named by its role (caller, s1, s2, ...), as the
text and the schedule tables name it, instead of by the device's stream number."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

MAX_LABELS = 40
"""The widest bars labelled with their kernel's or node's name."""


def _renamed(events: list[Any], roles: dict[str, str]) -> list[Any]:
    """``events`` with each stream's label replaced by its role, where it has one."""
    return [
        dataclasses.replace(event, stream=roles.get(event.stream, event.stream))
        if event.stream is not None
        else event
        for event in events
    ]


def plot_schedule(path: Path, profile: Any, roles: dict[str, str]) -> bool:
    """A profiled sim backward's timeline: a row per thread and stream."""
    from jaxstream.profiler.timeline import plot_timeline

    events = _renamed(profile.events, roles)
    plot_timeline(events, min(event.start for event in events), path, MAX_LABELS,
                  title="jaxstream profile of the sim backward")
    return True


def plot_predicted(path: Path, clock: Any, roles: dict[str, str]) -> bool:
    """The kernels of a backward in the virtual time of ``clock``: a row per stream."""
    from jaxstream.profiler.timeline import plot_timeline
    from jaxstream.profiler.virtual import virtual_axis, virtual_events

    plot_timeline(_renamed(virtual_events(clock), roles), 0, path, MAX_LABELS,
                  **virtual_axis(clock))
    return True
