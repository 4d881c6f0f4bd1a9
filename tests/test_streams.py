"""Streams, events, the per-thread current stream and device."""

import queue
import threading

import numpy as np
import pytest
from helpers import WAIT_S

from jaxstream import sanitizer, streams
from jaxstream.devices import Device, set_sim_device_count, sim_device_count
from jaxstream.streams import Event, Stream, current_stream, default_stream, stream

# cuda-marked tests are skipped by conftest.py where CuPy sees no GPU.
HAS_GPU = streams.cuda_device_count() > 0


pytestmark = pytest.mark.usefixtures("no_threads_left_behind")  # conftest.py


@pytest.fixture
def sim_devices():
    """Restores the sim device count a test changes."""
    saved = sim_device_count()
    yield
    set_sim_device_count(saved)


def run_in_thread(fn):
    """Runs `fn` on a fresh thread (fresh thread-local state) and returns its result."""
    results: queue.Queue = queue.Queue()

    def body():
        try:
            results.put(("ok", fn()))
        except BaseException as exc:
            results.put(("error", exc))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(timeout=WAIT_S)
    assert not worker.is_alive(), "worker thread did not finish"
    status, value = results.get(timeout=WAIT_S)
    if status == "error":
        raise value
    return value


# --- identity: equality, hashing, repr ---------------------------------------------------


def test_streams_are_equal_only_to_themselves_and_hash_consistently():
    s1, s2 = Stream("sim:0"), Stream("sim:0")
    assert s1 == s1 and s1 != s2
    assert len({s1, s2, s1}) == 2
    assert {s1: "a"}[s1] == "a"
    assert s1 != "sim:0" and s1 != object()


def test_stream_ids_are_per_device_and_the_default_stream_is_zero():
    s = Stream("sim:1", priority=-1)
    assert s.device == Device("sim", 1)
    assert s.priority == -1
    assert s.id > 0
    assert default_stream("sim:1").id == 0
    assert Stream("sim:1").id > s.id


def test_repr_names_device_and_id():
    s = Stream("sim:0")
    assert repr(s) == f"Stream(sim:0, id={s.id})"
    assert repr(default_stream("sim:1")) == "Stream(sim:1, id=0)"


def test_default_stream_is_one_object_per_device():
    assert default_stream("sim:0") is default_stream(Device("sim", 0))
    assert default_stream("sim:0") != default_stream("sim:1")
    assert default_stream("sim:0").native is None


def test_events_compare_by_identity_and_hash():
    e1, e2 = Event(), Event()
    assert e1 == e1 and e1 != e2
    assert len({e1, e2, e1}) == 2
    assert e1.id != e2.id


def test_event_repr_device_and_stream_follow_its_record():
    e = Event()
    assert e.device is None and e.stream is None
    assert repr(e) == f"Event(id={e.id}, not recorded)"
    s = Stream("sim:1")
    assert s.record_event(e) is e
    assert e.device == Device("sim", 1) and e.stream == s
    assert repr(e) == f"Event(id={e.id}, on {s!r})"


def test_record_event_without_an_event_makes_one():
    s = Stream("sim:0")
    e = s.record_event()
    assert isinstance(e, Event) and e.stream == s


def test_event_cannot_move_to_another_device():
    e = Stream("sim:0").record_event()
    with pytest.raises(ValueError, match="belongs to sim:0"):
        e.record(Stream("sim:1"))


def test_event_record_and_wait_default_to_the_current_stream():
    s = Stream("sim:0")
    sanitizer.on_kernel(s, op="fill", allocs=[np.zeros(3)])
    with stream(s):
        e = Event()
        e.record()
    assert e.stream == s
    waiter = Stream("sim:0")
    with stream(waiter):
        e.wait()
    assert sanitizer.clock_of(waiter)[s] == sanitizer.clock_of(s)[s] == 1


def test_unrecorded_event_counts_as_reached():
    e = Event()
    assert e.query()
    e.synchronize()
    Stream("sim:0").wait_event(e)


def test_sim_stream_work_is_always_complete():
    s = Stream("sim:0")
    assert s.query()
    s.synchronize()
    assert s.record_event().query()


def test_wait_stream_on_itself_changes_nothing():
    s = Stream("sim:0")
    before = sanitizer.clock_of(s)
    s.wait_stream(s)
    assert sanitizer.clock_of(s) == before


# --- the current stream and device --------------------------------------------------------


def test_current_stream_is_the_default_until_a_stream_block():
    assert current_stream("sim:0") == default_stream("sim:0")
    s = Stream("sim:0")
    with stream(s) as entered:
        assert entered is s
        assert current_stream("sim:0") == s
        assert current_stream("sim:1") == default_stream("sim:1")
    assert current_stream("sim:0") == default_stream("sim:0")


def test_stream_block_makes_its_device_current_and_restores_it():
    outer = streams.current_device()
    s = Stream("sim:1")
    with stream(s):
        assert streams.current_device() == Device("sim", 1)
        assert current_stream() == s
    assert streams.current_device() == outer


def test_nested_stream_blocks_restore_in_order_even_on_error():
    a, b = Stream("sim:0"), Stream("sim:0")
    with stream(a):
        with pytest.raises(KeyError):
            with stream(b):
                assert current_stream("sim:0") == b
                raise KeyError("inside")
        assert current_stream("sim:0") == a
    assert current_stream("sim:0") == default_stream("sim:0")


def test_stream_none_changes_nothing():
    before = current_stream()
    with stream(None) as entered:
        assert entered is None
        assert current_stream() == before


def test_current_stream_is_per_thread():
    mine, theirs = Stream("sim:0"), Stream("sim:0")
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    def worker():
        with stream(theirs):
            seen["inside"] = current_stream("sim:0")
            inside.set()
            release.wait(timeout=WAIT_S)
        seen["after"] = current_stream("sim:0")

    with stream(mine):
        thread = threading.Thread(target=worker)
        thread.start()
        try:
            assert inside.wait(timeout=WAIT_S)
            assert current_stream("sim:0") == mine
        finally:
            release.set()
            thread.join(timeout=WAIT_S)
    assert not thread.is_alive()
    assert seen == {"inside": theirs, "after": default_stream("sim:0")}


def test_new_thread_starts_on_the_default_stream():
    with stream(Stream("sim:0")):
        assert run_in_thread(lambda: current_stream("sim:0")) == default_stream("sim:0")


def test_set_device_is_per_thread():
    main_device = streams.current_device()

    def choose_sim1():
        streams.set_device("sim:1")
        return streams.current_device(), current_stream(), Stream().device

    device, current, made = run_in_thread(choose_sim1)
    assert device == made == Device("sim", 1)
    assert current == default_stream("sim:1")
    assert streams.current_device() == main_device


def test_int_device_is_an_index_of_the_current_device_type():
    def pick():
        streams.set_device("sim:0")
        streams.set_device(1)
        return streams.current_device(), Stream(0).device

    assert run_in_thread(pick) == (Device("sim", 1), Device("sim", 0))


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present, so cuda:0 is the default")
def test_default_device_without_a_gpu_is_sim0():
    assert run_in_thread(streams.current_device) == Device("sim", 0)


# --- devices without streams, missing devices ---------------------------------------------


def test_cpu_has_no_streams():
    assert current_stream("cpu") is None
    assert default_stream("cpu") is None
    with pytest.raises(ValueError, match="cpu has no streams"):
        Stream("cpu")
    with pytest.raises(ValueError, match="cpu has no streams"):
        streams.set_device("cpu")


def test_missing_sim_device_is_a_clear_error(sim_devices):
    with pytest.raises(ValueError, match="sim:2 does not exist: there are 2 sim devices"):
        Stream("sim:2")
    streams.sim.set_device_count(3)
    assert streams.sim.device_count() == 3 == sim_device_count()
    assert Stream("sim:2").device == Device("sim", 2)
    streams.sim.set_device_count(1)
    with pytest.raises(ValueError, match="there are 1 sim devices"):
        current_stream("sim:1")


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present")
def test_cuda_stream_without_a_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="cuda:0 is unavailable: cuda streams need CuPy"):
        Stream("cuda:0")
    with pytest.raises(RuntimeError, match="unavailable"):
        streams.set_device("cuda:0")
    assert streams.cuda_device_count() == 0


def test_priority_must_be_an_int():
    with pytest.raises(TypeError, match="priority is an int"):
        Stream("sim:0", priority=0.5)


# --- cuda: CuPy streams and events underneath --------------------------------------------


@pytest.mark.cuda
class TestCuda:
    def test_cuda_stream_wraps_a_non_blocking_cupy_stream(self):
        import cupy

        s = Stream("cuda:0", priority=-1)
        assert isinstance(s.native, cupy.cuda.Stream)
        runtime = cupy.cuda.runtime  # the stream's flags, as CUDA reports them
        assert runtime.streamGetFlags(s.native.ptr) & runtime.streamNonBlocking
        assert default_stream("cuda:0").native == cupy.cuda.Stream.null

    def test_stream_block_makes_the_cupy_stream_current_on_this_thread_only(self):
        import cupy

        s = Stream("cuda:0")
        with stream(s):
            assert cupy.cuda.get_current_stream() == s.native
            other_thread = run_in_thread(lambda: cupy.cuda.get_current_stream())
            assert other_thread == cupy.cuda.Stream.null
        assert cupy.cuda.get_current_stream() == cupy.cuda.Stream.null

    def test_events_order_cupy_work(self):
        import cupy

        producer, consumer = Stream("cuda:0"), Stream("cuda:0")
        with stream(producer):
            x = cupy.arange(1 << 10, dtype=cupy.float32)
            y = x * 2
        e = producer.record_event()
        consumer.wait_event(e)
        with stream(consumer):
            total = float(y.sum())
        e.synchronize()
        assert e.query() and producer.query()
        assert total == float(2 * sum(range(1 << 10)))
        consumer.synchronize()

    def test_cuda_event_waited_by_a_sim_stream_blocks_the_host(self):
        e = Stream("cuda:0").record_event()
        Stream("sim:0").wait_event(e)
        assert e.native.done


@pytest.mark.parametrize("bad", [5, 0, "sim:0", None, 1.0, object()],
                         ids=["5", "0", "str", "None", "float", "object"])
def test_stream_arguments_that_are_not_streams_are_refused_with_what_is_expected(bad):
    s = Stream("sim:0")
    event = s.record_event()
    calls = {
        "wait_stream": lambda: s.wait_stream(bad),
        "wait_event": lambda: s.wait_event(bad),
    }
    if bad is not None:  # None means the current stream for these three
        calls.update({
            "Event.record": lambda: Event().record(bad),
            "Event.wait": lambda: event.wait(bad),
            "js.stream": lambda: stream(bad).__enter__(),
        })
    for what, call in calls.items():
        with pytest.raises(ValueError, match=r"expected a js\.(Stream|Event)"):
            call()
        assert current_stream("sim:0") == default_stream("sim:0"), what
