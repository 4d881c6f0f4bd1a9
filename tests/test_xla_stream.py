"""JAX arrays on an accelerator run on XLA's stream, `js.xla_stream(device)`.

On sim, JAX-backed sim tensors (`js.tensor(x, backend="jax", device="sim:0")`)
play the part of JAX arrays on a GPU: their ops run on the sim-XLA stream, and
every crossing to a jaxstream stream must be ordered by an event. See Note
[XLA's stream] in jaxstream/devices/xla.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.backends import get_backend
from jaxstream.streams import stream_for

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

SIM = "sim:0"


def jax_sim(values, **kwargs):
    return js.tensor(np.asarray(values, dtype=np.float32), backend="jax", device=SIM, **kwargs)


def test_xla_stream_is_one_stream_per_device_that_cannot_be_entered():
    xla = js.xla_stream(SIM)
    assert isinstance(xla, js.Stream) and xla.is_xla
    assert xla is js.xla_stream(js.device(SIM)) and xla != js.xla_stream("sim:1")
    assert xla != js.default_stream(SIM) and xla.device == SIM
    assert repr(xla) == "Stream(sim:0, xla)"
    with pytest.raises(ValueError, match="XLA's stream and cannot be entered"):
        with js.stream(xla):
            pass
    with pytest.raises(ValueError, match="accelerator"):
        js.xla_stream("cpu")


def test_xla_stream_can_be_recorded_and_waited_on():
    xla, side = js.xla_stream(SIM), js.Stream(SIM)
    with js.stream(side):
        t = js.tensor(np.ones(3, np.float32), device=SIM)
    xla.wait_stream(side)
    assert sanitizer.clock_of(xla)[side] == sanitizer.clock_of(side)[side]
    event = xla.record_event()
    assert event.stream == xla
    side.wait_event(event)
    xla.synchronize()
    assert xla.query()
    del t


def test_ops_on_jax_sim_tensors_run_on_the_xla_stream():
    xla, current = js.xla_stream(SIM), js.current_stream(SIM)
    a = jax_sim([1.0, 2.0])
    before_xla, before_current = sanitizer.clock_of(xla)[xla], sanitizer.clock_of(current)[current]
    b = (a * 2.0).sum()
    assert sanitizer.clock_of(xla)[xla] == before_xla + 2
    assert sanitizer.clock_of(current)[current] == before_current
    assert stream_for(a.device, a.array_backend) == xla
    assert stream_for(js.device(SIM), get_backend("numpy")) == current
    assert b.item() == 6.0  # a host read of a JAX array waits for XLA's stream


def test_a_crossing_to_a_jaxstream_stream_without_an_event_races():
    xla, side = js.xla_stream(SIM), js.Stream(SIM)
    made_by_xla = (jax_sim([1.0, 2.0]) * 3.0).array
    with pytest.raises(js.StreamRaceError, match="Stream\\(sim:0, xla\\)"):
        sanitizer.check_read(made_by_xla, side, "cupy_kernel")
    side.wait_stream(xla)
    sanitizer.check_read(made_by_xla, side, "cupy_kernel")
    # And the other way: XLA reading what a jaxstream stream wrote.
    buffer = np.ones(2, np.float32)
    with js.stream(side):
        sanitizer.launch(side, op="fill", allocs=(buffer,))
    with pytest.raises(js.StreamRaceError, match="read-after-write"):
        sanitizer.check_read(buffer, xla, "jax_kernel")
    xla.wait_event(side.record_event())
    sanitizer.check_read(buffer, xla, "jax_kernel")


def test_conversions_between_numpy_and_jax_sim_tensors_are_ordered():
    side = js.Stream(SIM)
    side.wait_stream(js.default_stream(SIM))
    with js.stream(side):
        n = js.tensor(np.arange(3.0, dtype=np.float32), device=SIM) * 2.0
        j = n.to(backend="jax")  # XLA's stream waits for `side`
        back = (j + 1.0).to(backend="numpy")  # `side` waits for XLA's stream
        doubled = back * 2.0
    assert (j.backend, j.device, back.backend) == ("jax", SIM, "numpy")
    side.synchronize()
    np.testing.assert_array_equal(doubled.numpy(), [2.0, 6.0, 10.0])


def test_dlpack_hand_off_of_a_jax_sim_tensor_is_ordered():
    j = jax_sim([1.0, 2.0]) * 2.0
    side = js.Stream(SIM)
    with js.stream(side):
        imported = np.from_dlpack(j)  # a host read on XLA's stream, then a wait
    np.testing.assert_array_equal(imported, [2.0, 4.0])


def test_backward_across_numpy_and_jax_on_sim_matches_jax_grad():
    side = js.Stream(SIM)
    x_host = np.array([0.5, -1.0, 2.0], np.float32)
    side.wait_stream(js.default_stream(SIM))
    with js.stream(side):
        x = js.tensor(x_host, device=SIM, requires_grad=True)
        y = x.to(backend="jax")
        z = (js.sin(y) * y).to(backend="numpy")
        loss = (z * z).sum()
    assert loss.grad_fn is not None
    with js.stream(side):
        loss.backward()
    side.synchronize()

    def reference(v):
        w = jnp.sin(v) * v
        return jnp.sum(w * w)

    expected = jax.grad(reference)(jnp.asarray(x_host))
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(expected), rtol=1e-5)
    assert x.grad.backend == "numpy" and x.grad.device == SIM


@pytest.mark.cuda
class TestJaxOnGpu:
    @pytest.fixture(autouse=True)
    def gpu(self):
        if jax.devices()[0].platform != "gpu":
            pytest.skip("needs JAX with a CUDA GPU")

    def test_jax_gpu_tensors_run_on_xla_stream_without_cupy_streams(self):
        t = js.tensor(jnp.arange(3.0))
        assert t.device == "cuda:0"
        assert stream_for(t.device, t.array_backend) == js.xla_stream("cuda:0")
        assert (t * 2.0).sum().item() == 6.0

    def test_crossings_between_jax_and_cupy_are_ordered(self):
        side = js.Stream("cuda:0")
        with js.stream(side):
            c = js.tensor(np.arange(4, dtype=np.float32), device="cuda:0", backend="cupy") * 2.0
            j = c.to(backend="jax")
            back = (j + 1.0).to(backend="cupy")
        np.testing.assert_array_equal(back.numpy(), [1.0, 3.0, 5.0, 7.0])
        js.xla_stream("cuda:0").synchronize()


class _StreamOps(js.instrumentation.Instrumentation):
    """Counts the stream operations (records, waits) that the engine issues."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def stream_op(self, name, stream, details, run, *args):
        self.names.append(name)
        return run(*args)


def test_jax_nodes_on_one_device_order_no_stream_between_them():
    """A JAX node's forward ran on XLA's stream, so that is its stream, as its gradients'
    producers' is: as in PyTorch, a consumer waits for a producer only when their streams
    differ (Note [Streaming backward]). Only the seed (from the caller's stream) and the
    caller's wait for the leaf's stream at the end cross streams; the chain's 40 nodes none."""
    x = js.tensor(np.linspace(0.1, 1.0, 4, dtype=np.float32), backend="jax", device="sim:0",
                  requires_grad=True)
    y = x
    for _ in range(20):
        y = js.tanh(y) * 1.5
    loss = y.sum()
    assert loss.grad_fn.stream == js.xla_stream("sim:0")
    observed = _StreamOps()
    js.instrumentation.install(observed)
    try:
        loss.backward()
    finally:
        js.instrumentation.install(None)
    assert observed.names.count("wait_stream") <= 2, observed.names
    expected = jax.grad(lambda v: _chain(v, 20))(jnp.asarray(np.linspace(0.1, 1.0, 4), jnp.float32))
    js.synchronize("sim:0")
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def _chain(v, length):
    for _ in range(length):
        v = jnp.tanh(v) * 1.5
    return jnp.sum(v)
