"""The stream sanitizer: happens-before checks of buffers used across streams."""

import gc
import threading
import types
import weakref

import numpy as np
import pytest
from helpers import WAIT_S, run_threads

from experiments.harness import cupy_stand_in
from jaxstream import sanitizer
from jaxstream.devices import Device
from jaxstream.devices.current import thread_state as current_state
from jaxstream.sanitizer import StreamKey, StreamRaceError, VectorClock, stream_key
from jaxstream.streams import Stream, current_device, current_stream, default_stream, stream

pytestmark = pytest.mark.usefixtures("no_threads_left_behind")  # conftest.py


def new_buffer():
    return np.zeros((2, 3), dtype=np.float32)


# --- the three kinds of race, and each way of ordering them away ---------------------------


def read_after_write(first, second, order):
    buffer = new_buffer()
    sanitizer.on_kernel(first, op="producer", allocs=[buffer])
    order(first, second)
    sanitizer.check_read(buffer, second, "consumer")


def write_after_write(first, second, order):
    buffer = new_buffer()
    sanitizer.on_kernel(first, op="producer", allocs=[buffer])
    order(first, second)
    sanitizer.check_write(buffer, second, "consumer")


def write_after_read(first, second, order):
    buffer = new_buffer()
    sanitizer.on_kernel(second, op="alloc", allocs=[buffer])
    first.wait_stream(second)
    sanitizer.check_read(buffer, first, "producer")
    order(first, second)
    sanitizer.check_write(buffer, second, "consumer")


RACES = {
    "read-after-write": read_after_write,
    "write-after-write": write_after_write,
    "write-after-read": write_after_read,
}

ORDERINGS = {
    "wait_stream": lambda first, second: second.wait_stream(first),
    "wait_event": lambda first, second: second.wait_event(first.record_event()),
    "event.wait": lambda first, second: first.record_event().wait(second),
    "synchronize": lambda first, second: first.synchronize(),
    "event.synchronize": lambda first, second: first.record_event().synchronize(),
    "query": lambda first, second: first.query(),
}


def unordered(first, second):
    pass


@pytest.mark.parametrize("kind", RACES)
def test_unordered_streams_race(kind):
    first, second = Stream("sim:0"), Stream("sim:0")
    with pytest.raises(StreamRaceError) as caught:
        RACES[kind](first, second, unordered)
    err = caught.value
    assert err.kind == kind
    assert err.op == "consumer" and err.prior_op == "producer"
    assert err.stream == stream_key(second) and err.prior_stream == stream_key(first)
    message = str(err)
    assert message.startswith(f"{kind} race on buffer #")
    assert "(float32[2, 3])" in message
    assert repr(first) in message and repr(second) in message
    assert "'consumer'" in message and "'producer'" in message
    assert f"{second!r}.wait_stream({first!r})" in message
    assert "record_event()" in message and "wait_event(e)" in message


@pytest.mark.parametrize("ordering", ORDERINGS)
@pytest.mark.parametrize("kind", RACES)
def test_ordered_streams_do_not_race(kind, ordering):
    RACES[kind](Stream("sim:0"), Stream("sim:0"), ORDERINGS[ordering])


def test_stream_race_error_is_a_runtime_error():
    assert issubclass(StreamRaceError, RuntimeError)
    with pytest.raises(RuntimeError, match="read-after-write"):
        read_after_write(Stream("sim:0"), Stream("sim:0"), unordered)


def test_one_stream_is_always_ordered_with_itself():
    s = Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(s, op="alloc", allocs=[buffer])
    sanitizer.check_read(buffer, s, "read")
    sanitizer.check_write(buffer, s, "write")
    sanitizer.on_kernel(s, op="inplace", reads=[buffer], writes=[buffer])
    assert sanitizer.clock_of(s)[s] == 4


def test_an_in_place_kernel_on_another_stream_is_a_write():
    writer, other = Stream("sim:0"), Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(writer, op="alloc", allocs=[buffer])
    with pytest.raises(StreamRaceError, match="write-after-write") as caught:
        sanitizer.on_kernel(other, op="add_", reads=[buffer], writes=[buffer])
    assert caught.value.op == "add_"


def test_a_failed_kernel_records_nothing():
    first, second = Stream("sim:0"), Stream("sim:0")
    fine, racy = new_buffer(), new_buffer()
    sanitizer.on_kernel(second, op="alloc", allocs=[fine])
    sanitizer.on_kernel(first, op="alloc", allocs=[racy])
    ticks = sanitizer.clock_of(second)[second]
    with pytest.raises(StreamRaceError):
        sanitizer.on_kernel(second, op="sum", reads=[fine, racy])
    assert sanitizer.clock_of(second)[second] == ticks
    # Had the read of `fine` on `second` been recorded, this write would race with it.
    second.wait_stream(first)
    sanitizer.check_write(fine, second, "overwrite")


def test_views_share_their_base_storage():
    writer, reader = Stream("sim:0"), Stream("sim:0")
    base = np.zeros((4, 4), dtype=np.float32)
    sanitizer.on_kernel(reader, op="alloc", allocs=[base])
    writer.wait_stream(reader)
    sanitizer.check_write(base[0], writer, "fill_row")
    label = r"buffer #\d+ \(float32\[4, 4\]\)"
    with pytest.raises(StreamRaceError, match=rf"read-after-write race on {label}"):
        sanitizer.check_read(base[1:].T, reader, "sum")


# --- what orders what -----------------------------------------------------------------------


def test_an_event_covers_only_work_before_its_record():
    first, second = Stream("sim:0"), Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[buffer])
    early = first.record_event()
    sanitizer.check_write(buffer, first, "overwrite")
    second.wait_event(early)
    with pytest.raises(StreamRaceError, match="read-after-write") as caught:
        sanitizer.check_read(buffer, second, "read")
    assert caught.value.prior_op == "overwrite"


def test_waiting_orders_one_direction_only():
    first, second = Stream("sim:0"), Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[buffer])
    second.wait_stream(first)
    sanitizer.check_read(buffer, second, "read")
    with pytest.raises(StreamRaceError, match="write-after-read"):
        sanitizer.check_write(buffer, first, "overwrite")


def test_ordering_is_transitive():
    s1, s2, s3 = Stream("sim:0"), Stream("sim:0"), Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(s1, op="alloc", allocs=[buffer])
    s2.wait_stream(s1)
    s3.wait_stream(s2)
    assert sanitizer.clock_of(s3)[s1] == 1
    sanitizer.check_read(buffer, s3, "read")


def test_waits_in_the_wrong_order_are_not_transitive():
    s1, s2, s3 = Stream("sim:0"), Stream("sim:0"), Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(s1, op="alloc", allocs=[buffer])
    s3.wait_stream(s2)
    s2.wait_stream(s1)
    with pytest.raises(StreamRaceError, match="read-after-write"):
        sanitizer.check_read(buffer, s3, "read")


def test_waiting_takes_the_element_wise_max_of_clocks():
    s1, s2, s3 = Stream("sim:0"), Stream("sim:0"), Stream("sim:0")
    sanitizer.on_kernel(s1, op="k1", allocs=[new_buffer()])
    stale = s1.record_event()
    from_s1 = [new_buffer(), new_buffer()]
    sanitizer.on_kernel(s1, op="k2", allocs=[from_s1[0]])
    sanitizer.on_kernel(s1, op="k3", allocs=[from_s1[1]])
    from_s2 = new_buffer()
    sanitizer.on_kernel(s2, op="k4", allocs=[from_s2])
    s3.wait_event(s2.record_event())
    s3.wait_event(s1.record_event())
    s3.wait_event(stale)
    clock = sanitizer.clock_of(s3)
    assert (clock[s1], clock[s2]) == (3, 1)
    sanitizer.on_kernel(s3, op="combine", reads=[*from_s1, from_s2])


def test_streams_on_different_devices_are_ordered_by_events():
    on_dev0, on_dev1 = Stream("sim:0"), Stream("sim:1")
    buffer = new_buffer()
    sanitizer.on_kernel(on_dev0, op="alloc", allocs=[buffer])
    with pytest.raises(StreamRaceError, match="Stream\\(sim:0, id=.*Stream\\(sim:1"):
        sanitizer.check_write(buffer, on_dev1, "copy_")
    on_dev1.wait_event(on_dev0.record_event())
    sanitizer.check_write(buffer, on_dev1, "copy_")


def test_a_synchronize_orders_later_work_on_every_stream():
    s1 = Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(s1, op="alloc", allocs=[buffer])
    s1.synchronize()
    assert sanitizer.host_clock()[s1] == 1
    for later in (Stream("sim:0"), Stream("sim:1"), default_stream("sim:0")):
        sanitizer.check_read(buffer, later, "read")


def test_vector_clock_merge_and_order():
    a, b, c = (StreamKey(Device("sim", 0), n) for n in (101, 102, 103))
    left = VectorClock({a: 3, b: 1})
    right = VectorClock({a: 1, c: 2, b: 0})
    merged = left.merged(right)
    assert merged == VectorClock({a: 3, b: 1, c: 2})
    assert (merged[a], merged[b], merged[c]) == (3, 1, 2)
    assert left <= merged and right <= merged
    assert not merged <= left
    assert not left <= right and not right <= left
    assert VectorClock()[a] == 0
    assert right == VectorClock({a: 1, c: 2})
    assert hash(right) == hash(VectorClock({c: 2, a: 1}))


# --- host reads and the streaming-backward patterns --------------------------------------


def test_host_read_is_a_read_then_a_synchronize():
    s1, s2 = Stream("sim:0"), Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(s1, op="alloc", allocs=[buffer])
    with pytest.raises(StreamRaceError, match="'numpy'"):
        sanitizer.host_read(buffer, s2, "numpy")
    sanitizer.host_read(buffer, s1, "numpy")
    assert sanitizer.host_clock()[s1] == sanitizer.clock_of(s1)[s1]
    sanitizer.check_write(buffer, s2, "overwrite")


def backward_on(side, grad):
    """What a backward that ran its leaf on `side` leaves behind: `grad` written there."""
    with stream(side):
        sanitizer.on_kernel(current_stream(), op="AccumulateGrad", allocs=[grad])


@pytest.fixture(params=["here", "on a GPU machine"])
def any_current_device(request, monkeypatch):
    """The thread's current device as here (sim:0), and as on a GPU machine: cuda:0 (the CuPy
    stand-in's), where nothing is checked unless asked for; the patterns below are sim:0's.
    No device is chosen for the thread, whatever an earlier test left."""
    monkeypatch.setattr(current_state, "device", None)
    if request.param == "here":
        yield
        return
    with cupy_stand_in.installed():
        assert current_device() == Device("cuda", 0)
        yield


def test_backward_grad_used_on_another_stream_without_a_sync_raises(any_current_device):
    side, grad = Stream("sim:0"), new_buffer()
    backward_on(side, grad)
    with pytest.raises(StreamRaceError, match="read-after-write") as caught:
        sanitizer.check_read(grad, current_stream("sim:0"), "use_grads")
    assert caught.value.prior_op == "AccumulateGrad"
    assert caught.value.prior_stream == stream_key(side)
    assert caught.value.stream == stream_key(default_stream("sim:0"))


def test_backward_grad_used_after_the_current_stream_waits_is_fine(any_current_device):
    side, grad = Stream("sim:0"), new_buffer()
    backward_on(side, grad)
    current_stream("sim:0").wait_stream(side)
    sanitizer.check_read(grad, current_stream("sim:0"), "use_grads")
    sanitizer.host_read(grad, current_stream("sim:0"), "numpy")


def test_backward_caller_stream_is_synced_and_the_default_stream_is_not(any_current_device):
    caller, leaf, grad = Stream("sim:0"), Stream("sim:0"), new_buffer()
    with stream(caller):
        backward_on(leaf, grad)
        # backward() syncs the caller's current stream with every leaf stream ...
        current_stream().wait_stream(leaf)
        sanitizer.check_read(grad, current_stream(), "use_grads")
    # ... and not sim:0's default stream, so using the grads there needs a sync.
    with pytest.raises(StreamRaceError, match="read-after-write"):
        sanitizer.check_read(grad, current_stream("sim:0"), "use_grads")
    current_stream("sim:0").wait_stream(caller)
    sanitizer.check_read(grad, current_stream("sim:0"), "use_grads")


# --- record_stream --------------------------------------------------------------------------


def collected(ref) -> bool:
    gc.collect()
    return ref() is None


def test_record_stream_keeps_a_buffer_alive_until_the_host_sees_the_stream_done():
    s = Stream("sim:0")
    buffer = new_buffer()
    ref = weakref.ref(buffer)
    sanitizer.on_kernel(s, op="use", reads=[buffer])
    holds = sanitizer.pending_holds()
    sanitizer.record_stream(buffer, s)
    assert sanitizer.pending_holds() == holds + 1
    del buffer
    assert not collected(ref)
    Stream("sim:0").wait_stream(s)
    sanitizer.release_completed()
    assert not collected(ref), "another stream waiting is not completion"
    s.synchronize()
    assert collected(ref)
    assert sanitizer.pending_holds() == holds


def test_record_stream_waits_only_for_work_queued_before_it():
    s = Stream("sim:0")
    sanitizer.on_kernel(s, op="earlier", allocs=[new_buffer()])
    before_use = s.record_event()
    buffer = new_buffer()
    ref = weakref.ref(buffer)
    sanitizer.on_kernel(s, op="use", reads=[buffer])
    sanitizer.record_stream(buffer, s)
    at_record = s.record_event()
    sanitizer.on_kernel(s, op="later", allocs=[new_buffer()])
    del buffer
    before_use.synchronize()
    assert not collected(ref)
    at_record.synchronize()
    assert collected(ref)


def test_record_stream_with_nothing_pending_holds_nothing():
    s = Stream("sim:0")
    buffer = new_buffer()
    sanitizer.on_kernel(s, op="use", reads=[buffer])
    assert s.query()
    holds = sanitizer.pending_holds()
    sanitizer.record_stream(buffer, s)
    sanitizer.record_stream(buffer, None)
    assert sanitizer.pending_holds() == holds


# --- bookkeeping ----------------------------------------------------------------------------


def test_history_is_dropped_when_a_buffer_dies_or_is_forgotten():
    first, second = Stream("sim:0"), Stream("sim:0")
    gc.collect()
    tracked = sanitizer.tracked_buffers()
    buffer = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[buffer])
    assert sanitizer.tracked_buffers() == tracked + 1
    sanitizer.forget(buffer[0])
    assert sanitizer.tracked_buffers() == tracked
    sanitizer.check_read(buffer, second, "read")
    del buffer
    assert sanitizer.tracked_buffers() == tracked


def test_a_buffer_without_weak_references_is_rejected():
    with pytest.raises(TypeError, match="weak reference"):
        sanitizer.check_read([1.0, 2.0], Stream("sim:0"), "read")


def test_checks_are_on_for_sim_and_opt_in_for_cuda(monkeypatch):
    monkeypatch.delenv(sanitizer.CHECK_ENV, raising=False)
    assert sanitizer.enabled_for("sim:1")
    assert not sanitizer.enabled_for("cpu")
    assert not sanitizer.enabled_for(None)
    assert not sanitizer.enabled_for("cuda:0")
    monkeypatch.setenv(sanitizer.CHECK_ENV, "0")
    assert not sanitizer.enabled_for(Device("cuda", 0))
    assert not sanitizer.enabled_for("sim:1"), "0 turns them off on sim too, for timing"
    monkeypatch.setenv(sanitizer.CHECK_ENV, "1")
    assert sanitizer.enabled_for("cuda:0") and sanitizer.enabled_for("sim:1")


def test_sim_races_go_unchecked_only_with_the_checks_turned_off(monkeypatch):
    first, second = Stream("sim:0"), Stream("sim:0")
    monkeypatch.setenv(sanitizer.CHECK_ENV, "0")
    unchecked = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[unchecked])
    sanitizer.check_write(unchecked, second, "overwrite")
    monkeypatch.delenv(sanitizer.CHECK_ENV)
    checked = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[checked])
    with pytest.raises(StreamRaceError, match="read-after-write"):
        sanitizer.check_read(checked, second, "read")


def test_cuda_accesses_are_checked_only_with_the_env_flag(monkeypatch):
    # Stand-ins with a stream's identity: the checks themselves need no GPU.
    first = types.SimpleNamespace(device=Device("cuda", 0), id=9001)
    second = types.SimpleNamespace(device=Device("cuda", 0), id=9002)
    monkeypatch.delenv(sanitizer.CHECK_ENV, raising=False)
    unchecked = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[unchecked])
    sanitizer.check_write(unchecked, second, "overwrite")
    monkeypatch.setenv(sanitizer.CHECK_ENV, "1")
    checked = new_buffer()
    sanitizer.on_kernel(first, op="alloc", allocs=[checked])
    with pytest.raises(StreamRaceError, match=r"Stream\(cuda:0, id=9002\)"):
        sanitizer.check_read(checked, second, "read")


def test_the_cpu_is_never_checked():
    buffer = new_buffer()
    sanitizer.on_kernel(None, op="alloc", allocs=[buffer])
    sanitizer.check_write(buffer, current_stream("cpu"), "write")
    sanitizer.host_read(buffer, None, "numpy")


# --- threads --------------------------------------------------------------------------------


def test_kernels_from_many_threads_are_all_recorded():
    n_threads, n_kernels = 8, 200
    origin, shared = Stream("sim:0"), new_buffer()
    sanitizer.on_kernel(origin, op="alloc", allocs=[shared])
    workers = [Stream("sim:0") for _ in range(n_threads)]
    for s in workers:
        s.wait_stream(origin)
    start = threading.Barrier(n_threads, timeout=WAIT_S)

    def work(s):
        own = new_buffer()
        start.wait()
        sanitizer.on_kernel(s, op="alloc", allocs=[own])
        for _ in range(n_kernels - 1):
            sanitizer.on_kernel(s, op="step", reads=[shared], writes=[own])

    assert run_threads(work, [(s,) for s in workers]) == []
    assert [sanitizer.clock_of(s)[s] for s in workers] == [n_kernels] * n_threads


def test_a_race_between_threads_is_reported_once():
    origin, shared = Stream("sim:0"), new_buffer()
    sanitizer.on_kernel(origin, op="alloc", allocs=[shared])
    writers = [Stream("sim:0"), Stream("sim:0")]
    for s in writers:
        s.wait_stream(origin)
    start = threading.Barrier(2, timeout=WAIT_S)

    def write(s):
        start.wait()
        sanitizer.check_write(shared, s, "write")

    errors = run_threads(write, [(s,) for s in writers])
    assert len(errors) == 1
    assert isinstance(errors[0], StreamRaceError) and errors[0].kind == "write-after-write"


# --- cuda -----------------------------------------------------------------------------------


@pytest.mark.cuda  # skipped by conftest.py where CuPy sees no GPU
class TestCuda:
    @pytest.fixture(autouse=True)
    def checks_on(self, monkeypatch):
        monkeypatch.setenv(sanitizer.CHECK_ENV, "1")

    def test_unordered_cuda_streams_race_and_ordered_ones_do_not(self):
        import cupy

        first, second = Stream("cuda:0"), Stream("cuda:0")
        with stream(first):
            buffer = cupy.zeros((2, 3), dtype=cupy.float32)
        sanitizer.on_kernel(first, op="zeros", allocs=[buffer])
        with pytest.raises(StreamRaceError, match=r"float32\[2, 3\]"):
            sanitizer.check_read(buffer, second, "sum")
        second.wait_stream(first)
        sanitizer.check_read(buffer, second, "sum")
        sanitizer.check_read(buffer[1:], second, "sum_view")
        second.synchronize()

    def test_record_stream_holds_until_the_cupy_event_completes(self, monkeypatch):
        import cupy

        monkeypatch.delenv(sanitizer.CHECK_ENV)
        s = Stream("cuda:0")
        with stream(s):
            buffer = cupy.arange(1 << 20, dtype=cupy.float32)
            buffer *= 2
        ref = weakref.ref(buffer)
        holds = sanitizer.pending_holds()
        sanitizer.record_stream(buffer, s)
        del buffer
        s.synchronize()
        assert collected(ref)
        assert sanitizer.pending_holds() == holds
