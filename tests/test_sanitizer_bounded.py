"""The stream sanitizer forgets the streams that are gone (Note [Retiring streams]).

A program that makes a fresh side stream per step must keep a bounded number of
clocks and clock entries, so that each op's check costs the same at step 10,000
as at step 1; and forgetting must change no answer: a dead stream's unsynchronized
work is still checked, and its synchronized work is still ordered.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.sanitizer import StreamRaceError

pytestmark = pytest.mark.usefixtures("no_threads_left_behind")  # conftest.py

SIM = "sim:0"
STEPS = 10_000


def new_buffer():
    return np.zeros((2, 3), dtype=np.float32)


def sizes() -> tuple[int, int]:
    return sanitizer.tracked_streams(), sanitizer.clock_entries()


def side_stream_step(x: js.Tensor, caller: js.Stream) -> js.Tensor:
    """One training-like step: work forked to a fresh stream, joined back, read by the host."""
    side = js.Stream(SIM)
    side.wait_stream(caller)
    with js.stream(side):
        y = x * 2.0
    caller.wait_stream(side)
    out = y + x
    out.numpy()  # a host read: the caller's stream, and so the side stream, synchronized
    return out


def test_a_fresh_stream_per_step_keeps_the_clocks_bounded():
    js.synchronize(SIM)
    x = js.tensor(np.ones((2, 2)), device=SIM)
    caller = js.current_stream(SIM)
    side_stream_step(x, caller)
    gc.collect()
    streams_at_start, entries_at_start = sizes()
    for step in range(STEPS):
        side_stream_step(x, caller)
        if step % 500 == 499:
            streams, entries = sizes()
            # The live streams', plus at most the streams that died since the last sync.
            assert streams <= streams_at_start + 2, (step, streams)
            assert entries <= entries_at_start + 8, (step, entries)


def test_streams_that_die_between_synchronizes_are_forgotten_at_the_next():
    gc.collect()
    js.synchronize(SIM)
    js.synchronize(SIM)  # twice: every live clock has caught up with the host's
    streams_at_start, entries_at_start = sizes()
    for _ in range(20):
        side = js.Stream(SIM)
        sanitizer.on_kernel(side, op="work", allocs=[new_buffer()])
    del side
    assert sanitizer.tracked_streams() >= streams_at_start + 20, "nothing synchronized them"
    js.synchronize(SIM)
    streams, entries = sizes()
    assert streams <= streams_at_start and entries <= entries_at_start


def test_a_dead_streams_unsynchronized_write_is_still_a_race():
    side, reader = js.Stream(SIM), js.Stream(SIM)
    buffer = new_buffer()
    sanitizer.on_kernel(side, op="producer", allocs=[buffer])
    del side
    gc.collect()
    js.current_stream(SIM).synchronize()  # a host sync that does not cover the dead stream
    with pytest.raises(StreamRaceError, match="read-after-write.*'producer'"):
        sanitizer.check_read(buffer, reader, "consumer")
    js.synchronize(SIM)  # covers it: the write is ordered before everything from now on
    sanitizer.check_write(buffer, js.Stream(SIM), "overwrite")


def test_a_retired_stream_is_ordered_before_later_work_and_stays_out_of_the_clocks():
    caller = js.Stream(SIM)
    side = js.Stream(SIM)
    buffer = new_buffer()
    sanitizer.on_kernel(side, op="producer", allocs=[buffer])
    caller.wait_stream(side)
    stale = caller.record_event()  # its snapshot names `side`
    caller.synchronize()
    gc.collect()
    streams = sanitizer.tracked_streams()
    side_key = sanitizer.stream_key(side)
    del side
    caller.synchronize()  # the host already covers `side`: it retires
    assert sanitizer.tracked_streams() == streams - 1
    later = js.Stream(SIM)
    later.wait_event(stale)  # merging a snapshot that names the retired stream
    assert side_key not in dict(sanitizer.clock_of(later).items())
    assert side_key not in dict(sanitizer.host_clock().items())
    sanitizer.check_read(buffer, later, "consumer")
    sanitizer.check_write(buffer, later, "overwrite")


def test_a_hold_on_a_stream_that_retires_is_released():
    side = js.Stream(SIM)
    buffer = new_buffer()
    sanitizer.on_kernel(side, op="use", allocs=[buffer])
    holds = sanitizer.pending_holds()
    sanitizer.record_stream(buffer, side)
    assert sanitizer.pending_holds() == holds + 1
    del side, buffer
    gc.collect()
    js.synchronize(SIM)
    assert sanitizer.pending_holds() == holds
