"""`Tensor.record_stream(s)` with PyTorch's semantics, on sim.

Memory is held until the work queued on `s` up to the tensor's deallocation is
done (Note [record_stream at deallocation]). The allocator's reuse is played by
the test: every array here views one bytearray, so a "reallocation" lands at
the address the dropped tensor had, and the sanitizer checks it (Note [Stream
sanitizer]).
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import jaxstream as js
from jaxstream import sanitizer

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

SIM = "sim:0"


@pytest.fixture
def memory():
    """One block of memory that every array of a test is made at, as a reusing allocator would."""
    return bytearray(4 * 8)


def allocate(memory: bytearray, on: js.Stream) -> js.Tensor:
    """A tensor at the start of `memory`, allocated on stream `on`."""
    with js.stream(on):
        return js.tensor(np.frombuffer(memory, np.float32), device=SIM)


def use_on_side(t: js.Tensor, side: js.Stream, main: js.Stream) -> js.Tensor:
    """The note's idiom: `side` waits for the allocation, then reads `t` there."""
    side.wait_stream(main)
    with js.stream(side):
        return t * 2.0


def collected(ref: weakref.ref) -> bool:
    gc.collect()
    return ref() is None


def test_reusing_memory_used_on_a_side_stream_without_record_stream_races(memory):
    main, side = js.Stream(SIM), js.Stream(SIM)
    t = allocate(memory, main)
    out = use_on_side(t, side, main)
    del t
    gc.collect()
    with pytest.raises(js.StreamRaceError, match="write-after-read.*deallocated, then reused"):
        allocate(memory, main)
    main.wait_stream(side)
    allocate(memory, main)
    del out


def test_record_stream_holds_the_memory_for_work_queued_up_to_deallocation(memory):
    main, side = js.Stream(SIM), js.Stream(SIM)
    t = allocate(memory, main)
    buffer = weakref.ref(t.array)
    first = use_on_side(t, side, main)
    t.record_stream(side)
    at_call = side.record_event()
    with js.stream(side):
        later = t + 1.0  # queued on `side` after the call, before the deallocation
    del t
    at_call.synchronize()
    assert not collected(buffer), "the hold covers the work queued up to the deallocation"
    with pytest.raises(js.StreamRaceError, match="record_stream"):
        allocate(memory, main)
    side.synchronize()
    assert collected(buffer)
    allocate(memory, main)
    del first, later


def test_reuse_is_safe_once_the_side_streams_work_is_ordered_before_it(memory):
    main, side = js.Stream(SIM), js.Stream(SIM)
    t = allocate(memory, main)
    out = use_on_side(t, side, main)
    t.record_stream(side)
    del t
    main.wait_stream(side)
    allocate(memory, main)  # ordered after `side` by an event: no race
    side.synchronize()
    del out


def test_a_tensor_without_pending_work_is_freed_at_once():
    main = js.Stream(SIM)
    with js.stream(main):
        t = js.tensor(np.ones(3, np.float32), device=SIM) * 2.0
    buffer = weakref.ref(t.array)
    t.record_stream(main)
    t.record_stream(main)  # recording a stream twice holds once
    main.synchronize()
    holds = sanitizer.pending_holds()
    del t
    assert sanitizer.pending_holds() == holds
    assert collected(buffer)


def test_record_stream_rejects_what_is_not_a_stream_of_the_tensors_device():
    t = js.tensor(np.ones(2, np.float32), device=SIM)
    with pytest.raises(ValueError, match="stream of the tensor's device sim:0"):
        t.record_stream(js.Stream("sim:1"))
    with pytest.raises(ValueError, match="sim:0"):
        t.record_stream("sim:0")


@pytest.mark.cuda
def test_record_stream_of_a_cupy_tensor_holds_its_block_until_the_side_stream_is_done():
    import cupy

    main, side = js.Stream("cuda:0"), js.Stream("cuda:0")
    with js.stream(main):
        t = js.tensor(cupy.arange(1 << 20, dtype=cupy.float32))
    buffer = weakref.ref(t.array)
    side.wait_stream(main)
    with js.stream(side):
        out = t * 2.0
    t.record_stream(side)
    with js.stream(side):
        later = t + 1.0
    del t
    side.synchronize()
    sanitizer.release_completed()
    assert collected(buffer)
    del out, later
