"""jaxstream's cuda kind against a stand-in for CuPy's stream API, run on any machine.

The stand-in (experiments/harness/cupy_stand_in.py, Note [The CuPy stand-in]) has the
signatures and the device rules of CuPy's `cupy.cuda`. So every call
`jaxstream.devices.cuda` and `jaxstream.streams` make into CuPy runs here, with the
guards checked; what the GPU itself does is left to the `cuda`-marked tests.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream as js
from experiments.harness import cupy_stand_in
from experiments.harness.cupy_stand_in import Event as FakeEvent
from experiments.harness.cupy_stand_in import Stream as FakeStream
from experiments.harness.cupy_stand_in import current_device as _current
from experiments.harness.cupy_stand_in import get_current_stream
from jaxstream.devices import cuda as cuda_kind

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


@pytest.fixture
def fake_cupy():
    """Two GPUs behind the stand-in; jaxstream's cached cuda streams are set aside."""
    with cupy_stand_in.installed() as log:
        yield log


def test_a_cuda_stream_is_a_non_blocking_cupy_stream_made_on_its_device(fake_cupy):
    s = js.Stream("cuda:1", priority=-1)
    assert (s.native.device_id, s.native.non_blocking, s.native.priority) == (1, True, -1)
    assert _current() == 0, "making it left the current device alone"
    assert js.default_stream("cuda:1").native is FakeStream.null


def test_the_default_stream_is_cupys_per_thread_one_where_cupy_uses_that(fake_cupy,
                                                                         monkeypatch):
    monkeypatch.setenv(cuda_kind.PER_THREAD_DEFAULT_STREAM_ENV, "1")
    assert js.default_stream("cuda:0").native is FakeStream.ptds


def test_entering_a_stream_of_another_device_makes_its_device_and_cupy_stream_current(fake_cupy):
    s = js.Stream("cuda:1")
    with js.stream(s):
        assert _current() == 1 and get_current_stream() is s.native
        assert js.current_stream() == s
    assert _current() == 0 and get_current_stream() is FakeStream.null


def test_events_are_made_and_recorded_under_their_streams_device(fake_cupy):
    s = js.Stream("cuda:1")
    e = s.record_event()  # issued while device 0 is current
    assert (e.native.device, e.native.recorded_on) == (1, s.native)
    e.record(s)  # recorded again: the same CuPy event
    js.default_stream("cuda:0").wait_event(e)
    assert fake_cupy[-1] == ("wait_event", 0, 0), "the null stream of device 0, under device 0"
    js.default_stream("cuda:1").wait_event(e)
    assert fake_cupy[-1] == ("wait_event", 0, 1), "the null stream of device 1, under device 1"
    with pytest.raises(ValueError, match="belongs to cuda:1"):
        e.record(js.Stream("cuda:0"))
    e.synchronize()
    assert e.query() and s.query()


def test_synchronizing_a_default_stream_and_a_device_runs_under_that_device(fake_cupy):
    js.default_stream("cuda:1").synchronize()
    assert fake_cupy[-1] == ("stream synchronize", 0, 1)
    js.synchronize("cuda:1")
    assert ("device synchronize", 1, 1) in fake_cupy
    assert _current() == 0


def test_a_completion_event_is_recorded_on_the_stream_under_its_device(fake_cupy):
    s = js.Stream("cuda:1")
    event = s.device.kind.completion_event(s)
    assert (event.device, event.recorded_on, event.done) == (1, s.native, True)
    null = js.default_stream("cuda:1")
    assert s.device.kind.completion_event(null).device == 1


def test_xla_stream_and_cupy_streams_wait_for_each_other_through_the_host(fake_cupy,
                                                                          monkeypatch):
    """Note [XLA's stream]: neither side can wait for the other natively; the host waits."""
    monkeypatch.setattr(cuda_kind, "jax_gpus", lambda: (jax.devices("cpu")[0],))
    xla, side = js.xla_stream("cuda:0"), js.Stream("cuda:0")
    assert isinstance(xla.native, cuda_kind.XlaStream)
    marker = xla.record_event()
    side.wait_event(marker)
    assert not any(entry[0] == "wait_event" for entry in fake_cupy), "no CuPy wait for XLA"
    event = side.record_event()
    xla.wait_event(event)
    assert event.native.recorded_on == side.native
    assert marker.query() and xla.query()
    again = side.record_event(marker)  # an XLA marker's event recorded on CuPy: a CuPy event
    assert isinstance(again.native, FakeEvent)


def test_the_stand_in_refuses_what_cupy_and_cuda_refuse():
    """The rules the tests above rely on: without the guards, these calls fail."""
    cupy_stand_in.set_current_device(1)
    on_one = FakeStream()
    cupy_stand_in.set_current_device(0)
    with pytest.raises(RuntimeError, match="does not match with the current device"):
        with on_one:
            pass
    with pytest.raises(RuntimeError, match="recorded on a stream of device 1"):
        FakeEvent().record(on_one)


# --------------------------------------------------------------------------- ops on the GPU
def test_a_chain_and_its_backward_on_cuda_run_over_the_stand_in_as_jax_grad_says(fake_cupy):
    start = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    x = js.tensor(start, device="cuda:0", backend="cupy", requires_grad=True)
    y = x
    for _ in range(3):
        y = y.tanh() * 1.0001
    assert y.backend == "cupy" and y.grad_fn.stream is js.default_stream("cuda:0")
    y.sum().backward()

    def loss(a):
        for _ in range(3):
            a = jnp.tanh(a) * 1.0001
        return jnp.sum(a)

    np.testing.assert_allclose(x.grad.numpy(), jax.grad(loss)(start), rtol=1e-6)
    assert x.grad.device == "cuda:0" and _current() == 0


def test_an_op_on_another_gpu_runs_under_it_and_on_its_current_stream(fake_cupy):
    x = js.tensor(np.arange(4.0), device="cuda:1", backend="cupy", requires_grad=True)
    side = js.Stream("cuda:1")
    side.wait_stream(js.current_stream("cuda:1"))
    y = x * 3.0  # issued while device 0 is current
    assert y.device == "cuda:1" and _current() == 0
    with js.stream(side):
        z = x * 2.0
        assert get_current_stream(1) is side.native and _current() == 1
    assert z.grad_fn.stream is side and y.grad_fn.stream is js.default_stream("cuda:1")
    js.default_stream("cuda:1").wait_stream(side)
    np.testing.assert_array_equal(z.numpy(), [0.0, 2.0, 4.0, 6.0])
    with pytest.raises(RuntimeError, match="expected all tensors on one device"):
        z + js.tensor(np.arange(4.0), device="cuda:0", backend="cupy")
