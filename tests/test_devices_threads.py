"""sim devices in tensors and ops, and the engine's device threads (one per device index)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from helpers import WAIT_S, run_threads

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.autograd import Function

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


class RecordThread(Function):
    """Identity whose backward records the thread and current stream it ran on."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        RecordThread.seen.append((threading.current_thread(), js.current_stream(g.device)))
        return g


# ---------------------------------------------------------------- sim tensors
def test_sim_tensor_is_tagged_host_array():
    x = js.tensor([1.0, 2.0], device="sim:1")
    assert x.device == js.device("sim:1")
    assert isinstance(x.data, np.ndarray)
    assert (x * 2).device == js.device("sim:1")
    np.testing.assert_array_equal((x * 2).numpy(), [2.0, 4.0])


def test_sim_device_must_exist():
    with pytest.raises(ValueError, match="sim:7 does not exist"):
        js.tensor([1.0], device="sim:7")


def test_ops_across_devices_are_an_error():
    a = js.tensor([1.0], device="sim:0")
    b = js.tensor([1.0], device="sim:1")
    with pytest.raises(RuntimeError, match="expected all tensors on one device"):
        a + b
    with pytest.raises(RuntimeError, match="expected all tensors on one device"):
        a + js.tensor([1.0])


def test_to_copies_between_devices_and_is_differentiable():
    x = js.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("sim:1")
    assert y.device == js.device("sim:1")
    assert y.data is not x.data
    z = y.to("sim:0")
    assert z.data is not y.data
    (z * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    assert x.grad.device == js.device("cpu")


def test_to_orders_the_copy_after_the_source_stream():
    s = js.Stream("sim:0")
    with js.stream(s):
        x = js.tensor([1.0, 2.0], device="sim:0") * 2
        # Reads x on s, then writes on sim:1's current stream, which waits for s.
        y = x.to("sim:1")
    # Another stream of the source device is not ordered after s.
    with pytest.raises(js.StreamRaceError, match="read-after-write"):
        x + 1
    with pytest.raises(js.StreamRaceError, match="read-after-write"):
        x.to("sim:1")
    # A host read waits for the stream it reads on, and so for s.
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])


def test_ops_record_nodes_and_metadata_streams():
    s = js.Stream("sim:0")
    x = js.tensor([1.0], device="sim:0", requires_grad=True)
    with js.stream(s):
        s.wait_stream(js.default_stream("sim:0"))
        y = x * 2
    assert y.grad_fn.stream == s
    assert y.grad_fn.input_metadata[0].stream == s
    assert (js.tensor([1.0], requires_grad=True) * 2).grad_fn.stream is None


def test_ops_on_sim_are_checked_by_the_sanitizer():
    s = js.Stream("sim:0")
    x = js.tensor([1.0], device="sim:0")
    with js.stream(s), pytest.raises(js.StreamRaceError, match="read-after-write"):
        x * 2
    s.wait_stream(js.default_stream("sim:0"))
    with js.stream(s):
        y = x * 2
    with pytest.raises(js.StreamRaceError):
        y.numpy()
    js.current_stream("sim:0").wait_stream(s)
    assert y.item() == 2.0


def test_view_outputs_are_not_new_buffers():
    x = js.tensor(np.zeros((2, 3)), device="sim:0")
    before = sanitizer.tracked_buffers()
    v = x.reshape(3, 2)
    assert np.shares_memory(v.data, x.data)
    # No new buffer (others may have died meanwhile).
    assert sanitizer.tracked_buffers() <= before


# ---------------------------------------------------------------- device threads
def test_sim_nodes_run_on_the_device_thread_and_cpu_nodes_on_the_caller():
    RecordThread.seen = []
    x = js.tensor([1.0, 2.0], requires_grad=True)
    on_sim = RecordThread.apply(x.to("sim:1"))
    back_on_cpu = RecordThread.apply(on_sim.to("cpu"))
    back_on_cpu.sum().backward()
    (cpu_thread, cpu_stream), (sim_thread, sim_stream) = RecordThread.seen
    assert cpu_thread is threading.current_thread()
    assert cpu_stream is None
    assert sim_thread.name == "jaxstream autograd device 1"
    assert sim_stream == js.default_stream("sim:1")
    assert js.autograd.engine_threads() == [sim_thread]
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_one_thread_per_device_index():
    for _ in range(3):
        for dev in ("sim:0", "sim:1"):
            x = js.tensor([1.0], device=dev, requires_grad=True)
            (x * 2).sum().backward()
    names = sorted(t.name for t in js.autograd.engine_threads())
    assert names == ["jaxstream autograd device 0", "jaxstream autograd device 1"]


def test_multithreading_disabled_runs_everything_on_the_caller():
    RecordThread.seen = []
    x = js.tensor([1.0], device="sim:1", requires_grad=True)
    with js.autograd.set_multithreading_enabled(False):
        RecordThread.apply(x).sum().backward()
    assert RecordThread.seen[0][0] is threading.current_thread()
    assert js.autograd.engine_threads() == []


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_backward_from_many_threads_into_a_shared_leaf(device):
    x = js.tensor(np.ones((5, 5)), requires_grad=True, device=device)

    def train(x):
        y = (x + 3) * (x + 4) * 0.5
        y.sum().backward()

    assert run_threads(train, [(x,)] * 10) == []
    np.testing.assert_allclose(x.grad.numpy(), 10 * (np.ones((5, 5)) + 3.5))


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_grad_from_many_threads_does_not_accumulate(device):
    x = js.tensor(np.ones((5, 5)), requires_grad=True, device=device)

    def train(x):
        y = (x + 3) * (x + 4) * 0.5
        (g,) = js.grad(y.sum(), x)
        np.testing.assert_allclose(g.numpy(), np.ones((5, 5)) + 3.5)

    assert run_threads(train, [(x,)] * 10) == []
    assert x.grad is None


def test_shared_subgraph_without_retain_graph_fails_cleanly_in_the_losers():
    outcome = {"ok": 0, "raised": 0}
    lock = threading.Lock()
    x = js.tensor(np.ones((5, 5)), requires_grad=True)
    shared = x + x**2

    def train(y):
        z = y + y**2
        try:
            z.sum().backward()
            with lock:
                outcome["ok"] += 1
        except RuntimeError as error:
            assert "Specify retain_graph=True" in str(error)
            with lock:
                outcome["raised"] += 1

    assert run_threads(train, [(shared,)] * 5) == []
    assert outcome["ok"] >= 1
    assert outcome["ok"] + outcome["raised"] == 5

    x = js.tensor(np.ones((5, 5)), requires_grad=True)
    shared = x + x**2

    def train_retained(y):
        (y + y**2).sum().backward(retain_graph=True)

    assert run_threads(train_retained, [(shared,)] * 5) == []
    one = np.ones((5, 5))
    np.testing.assert_allclose(x.grad.numpy(), 5 * (4 * one**3 + 6 * one**2 + 4 * one + 1))


class Warns(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        warnings.warn("careful in backward", UserWarning, stacklevel=1)
        return g


def test_warnings_on_a_worker_are_replayed_on_the_caller():
    shown_on: list = []

    def show(message, category, filename, lineno, file=None, line=None):
        shown_on.append((str(message), threading.current_thread()))

    x = js.tensor([1.0], device="sim:1", requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        Warns.apply(x).sum().backward()
    assert shown_on == [("careful in backward", threading.current_thread())]
    with pytest.warns(UserWarning, match="careful in backward"):
        Warns.apply(x).sum().backward()


def exit_code_in_fork(child) -> int:
    """Run `child() -> int` in a forked process; its result is the exit code."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    with warnings.catch_warnings():
        # The child only runs jaxstream's NumPy path; JAX's threads are not used there.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = child()
        finally:
            os._exit(code)
    deadline = time.monotonic() + WAIT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.01)


def test_a_forked_child_refuses_backward_once_threads_ran():
    x = js.tensor([1.0], device="sim:0", requires_grad=True)
    (x * 2).sum().backward()
    assert js.autograd.engine_threads()

    def child() -> int:
        try:
            (x * 2).sum().backward()
            return 1
        except RuntimeError as error:
            if "forked" not in str(error):
                return 2
        with js.autograd.set_multithreading_enabled(False):
            (x * 2).sum().backward()
        return 0

    assert exit_code_in_fork(child) == 0


def test_a_fork_after_shutdown_is_fine():
    x = js.tensor([1.0], device="sim:0", requires_grad=True)
    (x * 2).sum().backward()
    assert js.autograd.shutdown_engine_threads(WAIT_S)

    def child() -> int:
        (x * 2).sum().backward()
        return 0 if x.grad.item() == 4.0 else 1

    assert exit_code_in_fork(child) == 0


def test_interpreter_exit_does_not_wait_for_engine_threads():
    script = textwrap.dedent(
        """
        import jaxstream as js
        x = js.tensor([1.0], device="sim:1", requires_grad=True)
        (x * 2).sum().backward()
        assert js.autograd.engine_threads()
        print(x.grad.item())
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT_S, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2.0"


@pytest.mark.cuda
def test_cuda_and_sim_share_the_thread_of_a_device_index():
    RecordThread.seen = []
    x = js.tensor(np.ones(3), backend="cupy", device="cuda:0", requires_grad=True)
    y = js.tensor(np.ones(3), device="sim:0", requires_grad=True)
    RecordThread.apply(x).sum().backward()
    RecordThread.apply(y).sum().backward()
    (cuda_thread, _), (sim_thread, _) = RecordThread.seen
    assert cuda_thread is sim_thread
    assert cuda_thread.name == "jaxstream autograd device 0"


class RecordsAutocast(Function):
    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        RecordsAutocast.seen.append((js.amp.current_dtype(), threading.current_thread()))
        return g


def test_the_callers_autocast_state_holds_on_device_workers():
    x = js.tensor(np.ones((2, 2), np.float32), device="sim:1", requires_grad=True)
    RecordsAutocast.seen.clear()
    with js.amp.autocast("bfloat16"):
        RecordsAutocast.apply(x).sum().backward()
    RecordsAutocast.apply(x).sum().backward()
    (inside, worker), (outside, _) = RecordsAutocast.seen
    assert worker is not threading.current_thread()
    assert inside == np.dtype(js.amp.resolve_dtype("bfloat16")) and outside is None
    assert js.amp.current_dtype() is None
