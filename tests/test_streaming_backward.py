"""Streaming backward: each backward op on its forward stream, with the syncs that makes safe.

Ported from PyTorch's `test_streaming_backwards_*` (test_cuda.py). On `sim`
devices the stream sanitizer is always on, so a missing sync in the engine is a
`StreamRaceError` rather than a flaky wrong value. Every test runs on `sim`;
the `cuda` variants need a GPU with CuPy and `JAXSTREAM_STREAM_CHECK=1`.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import WAIT_S

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.autograd import Function

SIM = "sim:0"

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


def device_params():
    return [
        pytest.param("sim:0", id="sim"),
        pytest.param("cuda:0", id="cuda", marks=pytest.mark.cuda),
    ]


@pytest.fixture
def checked(device, monkeypatch):
    if device.startswith("cuda"):
        pytest.importorskip("cupy")
        monkeypatch.setenv(sanitizer.CHECK_ENV, "1")
    assert sanitizer.enabled_for(device)
    # Each test starts on an idle device: memory an earlier test freed while another stream
    # still read it (CuPy's pool hands it out again at once) is then safe to reuse.
    js.synchronize(device)
    return device


def ones(device, shape=(5, 5), requires_grad=False):
    backend = "cupy" if device.startswith("cuda") else "numpy"
    return js.tensor(np.ones(shape), device=device, backend=backend, requires_grad=requires_grad)


def host(t):
    return np.asarray(t.numpy() if t.backend != "cupy" else t.data.get())


class MultiplyInStream(Function):
    """x * val; its backward checks that it runs on its forward's stream."""

    wrong_stream: list = []

    @staticmethod
    def forward(ctx, x, val):
        ctx.val = val
        ctx.stream = js.current_stream(x.device)
        return x * val

    @staticmethod
    def backward(ctx, g):
        if js.current_stream(g.device) != ctx.stream:
            MultiplyInStream.wrong_stream.append((js.current_stream(g.device), ctx.stream))
        return g * ctx.val, None


@pytest.fixture(autouse=True)
def reset_stream_log():
    MultiplyInStream.wrong_stream = []
    yield
    assert MultiplyInStream.wrong_stream == []


@pytest.mark.parametrize("device", device_params())
def test_streaming_backwards_sync(checked):
    default = js.current_stream(checked)
    s = js.Stream(checked)
    x = ones(checked, requires_grad=True)
    with js.stream(s):
        s.wait_stream(default)
        out = MultiplyInStream.apply(x, 2)
        out.sum().backward()
    # The grads were made on s: the default stream must wait for it.
    default.wait_stream(s)
    np.testing.assert_array_equal(host(x.grad), np.full((5, 5), 2.0))
    assert js.current_stream(checked) == default

    # Forward on s, backward from the default stream: the engine syncs the
    # caller's stream with the leaf stream (s) before returning.
    x = ones(checked, requires_grad=True)
    s.wait_stream(default)
    with js.stream(s):
        out = MultiplyInStream.apply(x, 3)
    default.wait_stream(s)
    out.sum().backward()
    np.testing.assert_array_equal(host(x.grad), np.full((5, 5), 3.0))
    assert js.current_stream(checked) == default


@pytest.mark.parametrize("device", device_params())
def test_using_grads_on_another_stream_without_a_sync_is_a_race(checked):
    """The seed's unsafe pattern: backward in a side stream, grads used outside it."""
    default = js.current_stream(checked)
    s = js.Stream(checked)
    s.wait_stream(default)
    with js.stream(s):
        x = ones(checked, requires_grad=True)
        (x * 2).sum().backward()
    with pytest.raises(js.StreamRaceError, match="read-after-write"):
        x.grad * 1
    # The documented fix: order the using stream after the backward's.
    default.wait_stream(s)
    np.testing.assert_array_equal(host(x.grad * 1), np.full((5, 5), 2.0))


class StreamModel:
    def __init__(self, device):
        self.event = js.Event()
        self.stream0 = js.Stream(device)
        self.stream1 = js.Stream(device)

    def __call__(self, x, first_use_on_ambient):
        ambient = js.current_stream(x.device)
        if first_use_on_ambient:
            x0 = x.clone()
        self.stream0.wait_stream(ambient)
        self.stream1.wait_stream(ambient)
        with js.stream(self.stream0):
            if not first_use_on_ambient:
                x0 = x.clone()
            y0 = MultiplyInStream.apply(x0, 2)
            self.event.record(js.current_stream(x.device))
        with js.stream(self.stream1):
            y1 = MultiplyInStream.apply(x, 3)
            self.stream1.wait_event(self.event)
            out = y0 + y1
        ambient.wait_stream(self.stream1)
        return out


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("first_use_on_ambient", [True, False])
@pytest.mark.parametrize(("out_of_place", "iters"), [(True, 1), (False, 1), (False, 5)])
def test_streaming_backwards_multiple_streams(checked, first_use_on_ambient, out_of_place, iters):
    stream = js.Stream(checked)
    hook_streams = []
    with js.stream(stream):
        x = ones(checked, requires_grad=True)
        model = StreamModel(checked)
        x.register_hook(lambda grad: hook_streams.append(js.current_stream(checked)))
        for _ in range(iters):
            loss = model(x, first_use_on_ambient).sum()
            if out_of_place:
                (x_grad,) = js.grad((loss,), (x,))
            else:
                loss.backward()
    js.current_stream(checked).wait_stream(stream)
    expected_hook_stream = stream if first_use_on_ambient else model.stream0
    assert hook_streams == [expected_hook_stream] * iters
    got = x_grad if out_of_place else x.grad
    np.testing.assert_array_equal(host(got), np.full((5, 5), 5.0 * iters))


@pytest.mark.parametrize("device", device_params())
def test_streaming_backward_sync_graph_root(checked):
    """The seed gradient, made on the caller's stream, is ordered into the root's."""
    fwd_bwd_op_stream = js.Stream(checked)
    bwd_ambient_stream = js.Stream(checked)
    a = ones(checked, (1000,), requires_grad=True) * 2
    b = ones(checked, (1000,), requires_grad=True) * 3
    a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
    for trial in range(3):
        js.current_stream(checked).synchronize()
        a.grad = b.grad = None
        fwd_bwd_op_stream.wait_stream(js.current_stream(checked))
        with js.stream(fwd_bwd_op_stream):
            c = a * b
        with js.stream(bwd_ambient_stream):
            grad = ones(checked, (1000,)) * float(trial + 1)
            js.backward(c, grad)
            # Safe on the ambient stream: backward synced it with the leaf streams.
            np.testing.assert_array_equal(host(a.grad), host(grad * b))
            np.testing.assert_array_equal(host(b.grad), host(grad * a))


@pytest.mark.parametrize("device", device_params())
def test_grad_syncs_the_caller_with_captured_streams(checked):
    side = js.Stream(checked)
    x = ones(checked, requires_grad=True)
    side.wait_stream(js.current_stream(checked))
    with js.stream(side):
        h = MultiplyInStream.apply(x, 2)
        y = MultiplyInStream.apply(h, 3)
    js.current_stream(checked).wait_stream(side)
    # h's gradient is captured from a node that ran on `side`.
    (gh,) = js.grad(y.sum(), h)
    np.testing.assert_array_equal(host(gh * 1), np.full((5, 5), 3.0))


@pytest.mark.parametrize("device", device_params())
def test_streaming_backwards_callback(checked):
    size = 1000
    a = ones(checked, (size,), requires_grad=True)
    b = ones(checked, (size,), requires_grad=True)
    s0, s1, s2 = js.Stream(checked), js.Stream(checked), js.Stream(checked)
    stash = []

    s0.wait_stream(js.current_stream(checked))
    with js.stream(s0):
        c = MultiplyInStream.apply(a, 2)
    s1.wait_stream(js.current_stream(checked))
    with js.stream(s1):
        d = MultiplyInStream.apply(b, 3)
        s1.wait_stream(s0)
        e = c * d

        def clone_leaf_grads():
            stash.append((js.current_stream(checked), a.grad.clone(), b.grad.clone()))

        e.register_hook(lambda grad: js.autograd.queue_callback(clone_leaf_grads))

    s2.wait_stream(s1)
    with js.stream(s2):
        e.sum().backward()
        # The callback ran on s2, after s2 waited for every leaf stream.
        (stream, ga, gb) = stash[0]
        assert stream == s2
        np.testing.assert_array_equal(host(ga), np.full(size, 6.0))
        np.testing.assert_array_equal(host(gb), np.full(size, 6.0))


def test_streaming_backwards_device_transfer():
    s0 = js.Stream("sim:0")
    s1 = js.Stream("sim:1")
    x = ones("sim:0", requires_grad=True)
    s0.wait_stream(js.current_stream("sim:0"))
    with js.stream(s0):
        y = MultiplyInStream.apply(x, 2)
        with js.stream(s1):
            z = MultiplyInStream.apply(y.to("sim:1"), 3)
    js.current_stream("sim:1").wait_stream(s1)
    z.sum().backward()
    # Each device's current stream of the caller waits for that device's leaves.
    np.testing.assert_array_equal(x.grad.numpy(), np.full((5, 5), 6.0))
    assert js.current_stream("sim:0") == js.default_stream("sim:0")


def test_backward_keeps_the_caller_current_stream_and_device():
    seen = []

    def body():
        js.set_device("sim:1")
        s = js.Stream("sim:0")
        x = ones("sim:0", requires_grad=True)
        s.wait_stream(js.current_stream("sim:0"))
        with js.stream(s):
            y = MultiplyInStream.apply(x, 2).sum()
        with js.autograd.set_multithreading_enabled(False):
            y.backward()
        seen.append((js.current_stream("sim:0"), js.streams.current_device()))

    # The current device is per thread: change it on a thread of our own.
    thread = threading.Thread(target=body)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert seen == [(js.default_stream("sim:0"), js.device("sim:1"))]


def test_record_stream_holds_the_buffer_until_the_stream_is_seen_done():
    import gc
    import weakref

    side = js.Stream("sim:0")
    with js.stream(side):
        t = js.tensor(np.ones(3, np.float32), device="sim:0") * 2.0
    buffer = weakref.ref(t.data)
    t.record_stream(side)
    del t
    gc.collect()
    assert buffer() is not None
    side.synchronize()
    js.sanitizer.release_completed()
    gc.collect()
    assert buffer() is None


def test_record_stream_rejects_a_stream_of_another_device():
    t = js.tensor(np.ones(3, np.float32), device="sim:0")
    with pytest.raises(ValueError, match="sim:0"):
        t.record_stream(js.Stream("sim:1"))
    with pytest.raises(ValueError):
        t.record_stream(None)


def test_dlpack_export_of_a_sim_tensor_is_a_host_read_on_the_current_stream():
    side = js.Stream("sim:0")
    with js.stream(side):
        t = js.tensor(np.ones(3, np.float32), device="sim:0") * 2.0
    with pytest.raises(js.StreamRaceError):
        np.from_dlpack(t)
    js.current_stream("sim:0").wait_stream(side)
    assert np.from_dlpack(t).tolist() == [2.0, 2.0, 2.0]
