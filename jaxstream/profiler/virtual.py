"""A virtual clock's kernels as profile events, so the timeline can draw virtual time.

The clock (Note [Virtual time] in jaxstream/devices/virtual_time.py) knows when
each sim kernel would have run on its profile's GPU, and when the host was
issuing them; each kernel becomes a "kernel" event on a row per stream, and each
stretch of issuing a "host" event on the host's row above them, their times in
virtual nanoseconds from the clock's start.
"""

from __future__ import annotations

from typing import Any

from .events import ProfileEvent

HOST_ROW = "host (issuing)"


def virtual_events(clock: Any) -> list[ProfileEvent]:
    """One event per kernel of `clock` (a closed `js.sim.virtual_time` clock) and per stretch of
    the host's issuing, in start order."""
    if not clock.kernels:
        raise ValueError(
            "the virtual clock saw no sim kernels, so there is no timeline to plot (did sim ops "
            "run inside the `with js.sim.virtual_time(...)` block?)"
        )
    thread = f"virtual {clock.profile.name}"
    host = [
        ProfileEvent(
            name=span.name, kind="host", thread=HOST_ROW, thread_id=0, device=None, stream=None,
            start=round(span.start * 1e9), end=round(span.end * 1e9), args={"launches": span.ops},
        )
        for span in clock.host_spans
    ]
    kernels = [
        ProfileEvent(
            name=kernel.name, kind="kernel", thread=thread, thread_id=1,
            device=str(kernel.stream.device), stream=clock.label(kernel.stream),
            start=round(kernel.start * 1e9), end=round(kernel.end * 1e9), args=dict(kernel.details),
        )
        for kernel in clock.kernels
    ]
    # The host's row first (on a tie too): the timeline's rows follow the first events.
    return sorted([*host, *kernels], key=lambda e: (e.start, e.kind != "host", -e.end))


def virtual_axis(clock: Any) -> dict[str, str]:
    """The timeline's axis and title for `clock`."""
    return {
        "xlabel": f"virtual time on {clock.profile.description} (ms)",
        "title": f"predicted schedule, makespan {clock.makespan * 1e3:.3f} ms, {clock.verdict} "
                 f"(host issuing {clock.host_share:.0%} of it)",
    }
