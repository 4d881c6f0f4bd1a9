"""The engine's faults and their fixes: ctx apart from the node, workers that never die,
seeds ordered on a pool thread, the execution order mid-backward, the workers' current
device, failed tasks leaving the queues, and a bounded wait at shutdown. All on sim devices.
"""

from __future__ import annotations

import ctypes
import threading
import time
import warnings

import numpy as np
import pytest
from helpers import WAIT_S, run_threads

import jaxstream as js
from jaxstream import streams
from jaxstream.autograd import Function
from jaxstream.autograd.graph_task import GraphTask
from jaxstream.autograd.ready_queue import ReadyQueue
from jaxstream.autograd.threads import worker

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


def device_threads() -> list[threading.Thread]:
    return [t for t in js.autograd.engine_threads() if "device" in t.name]


def pool_threads() -> list[threading.Thread]:
    return [t for t in js.autograd.engine_threads() if "reentrant" in t.name]


@pytest.fixture
def max_depth_one():
    depth = js.autograd.get_max_reentrant_depth()
    js.autograd.set_max_reentrant_depth(1)
    yield
    js.autograd.set_max_reentrant_depth(depth)


# ---------------------------------------------------------------- ctx is not the node
class ShadowsEngineNames(Function):
    """Sets, on ctx, names the node has: they stay the user's and change nothing."""

    ran_on: list = []

    @staticmethod
    def forward(ctx, x, k):
        ctx.name = "not the node's name"
        ctx.stream = js.Stream("sim:1")
        ctx.next_functions = ()
        ctx.next_edges = ()
        ctx.input_metadata = []
        ctx.release_variables = None
        ctx.k = k
        ctx.save_for_backward(x)
        return x * k

    @staticmethod
    def backward(ctx, g):
        ShadowsEngineNames.ran_on.append((threading.current_thread().name, ctx.name))
        (x,) = ctx.saved_tensors
        return g * ctx.k + 0 * x, None


def test_attributes_set_on_ctx_do_not_reach_the_node():
    ShadowsEngineNames.ran_on = []
    x = js.tensor([1.0, 2.0], device="sim:0", requires_grad=True)
    y = ShadowsEngineNames.apply(x, 3.0)
    node = y.grad_fn
    assert node.name() == "ShadowsEngineNamesBackward"
    assert node.stream == js.default_stream("sim:0")
    assert node.next_functions[0][0].name() == "AccumulateGrad"
    assert node.k == 3.0  # the user's own attributes are read through the node
    assert node.saved_tensors[0] is x
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    # The backward ran on device 0's thread, not rerouted to sim:1 by ctx.stream.
    assert ShadowsEngineNames.ran_on == [("jaxstream autograd device 0", "not the node's name")]
    assert [t.name for t in device_threads()] == ["jaxstream autograd device 0"]


def test_ctx_without_its_node_says_so():
    kept = []

    class KeepsCtx(Function):
        @staticmethod
        def forward(ctx, x):
            kept.append(ctx)
            ctx.save_for_backward(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    KeepsCtx.apply(js.tensor([1.0], requires_grad=True))  # the output, and node, are dropped
    with pytest.raises(RuntimeError, match="backward node is gone"):
        _ = kept[0].saved_tensors
    node = KeepsCtx.apply(js.tensor([1.0], requires_grad=True)).grad_fn
    with pytest.raises(AttributeError, match="neither has its ctx"):
        _ = node.no_such_attribute


# ---------------------------------------------------------------- a worker never dies
def _raising_in_backward(error: BaseException, ctx_name: str | None) -> type[Function]:
    """A Function whose backward raises `error`; its forward labels ctx when given a name
    (the user's attribute, which must not become the node's name)."""

    class Raises(Function):
        @staticmethod
        def forward(ctx, x):
            if ctx_name is not None:
                ctx.name = ctx_name
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise error

    return Raises


@pytest.mark.parametrize(
    ("error", "ctx_name", "device"),
    [
        (ValueError("boom in backward"), None, "sim:1"),
        (ValueError("boom"), "user's label", "sim:0"),
        (SystemExit("leave, from a node"), None, "sim:1"),
    ],
)
def test_an_error_in_a_node_reaches_the_caller_named_and_the_worker_stays(error, ctx_name, device):
    raises = _raising_in_backward(error, ctx_name)
    x = js.tensor([1.0], device=device, requires_grad=True)
    with pytest.raises(type(error), match=str(error)) as info:
        (raises.apply(x) * 2).sum().backward()
    assert any("RaisesBackward" in note for note in info.value.__notes__)
    assert x.grad is None
    (thread,) = device_threads()
    (x * 3).sum().backward()  # the engine is still usable, on the same device thread
    np.testing.assert_array_equal(x.grad.numpy(), [3.0])
    assert device_threads() == [thread]
    assert len(js.autograd.engine_threads()) == 1


def _raise_in_thread(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Raise `exc_type` asynchronously in `thread` (at its next Python instruction)."""
    hit = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type)
    )
    assert hit == 1


def test_a_lost_worker_is_replaced_and_its_queue_served():
    x = js.tensor([1.0, 2.0], device="sim:0", requires_grad=True)
    (x * 2).sum().backward()
    (lost,) = device_threads()
    # Outside any node (the thread idles in its queue), as a bug or a signal could.
    _raise_in_thread(lost, SystemExit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_threads(lambda: (x * 3).sum().backward(), [()]) == []
    lost.join(WAIT_S)
    assert not lost.is_alive()
    (fresh,) = device_threads()
    assert fresh is not lost and fresh.name == lost.name
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("device 0 stopped on SystemExit()" in m for m in messages)


# ---------------------------------------------------------------- seeds on a pool thread
class Reenter(Function):
    """Identity whose backward calls `ctx.inner()`, a nested backward."""

    @staticmethod
    def forward(ctx, x, inner):
        ctx.inner = inner
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        ctx.inner()
        return g, None


@pytest.mark.parametrize("second", ["sim:0", "sim:1"])
def test_multi_root_reentrant_hand_off_orders_the_seeds(max_depth_one, second):
    devices = ["sim:0", second]
    forward_streams = {d: js.Stream(d) for d in devices}
    seed_streams = {d: js.Stream(d) for d in devices}
    leaves = [js.tensor([1.0, 2.0], device=d, requires_grad=True) for d in devices]
    roots = []
    for d, leaf, k in zip(devices, leaves, (2.0, 3.0), strict=True):
        with js.stream(forward_streams[d]):
            forward_streams[d].wait_stream(js.default_stream(d))
            roots.append(leaf * k)

    def innermost():
        # Two roots, each seeded on a stream of its own, on a pool thread (depth 2 > 1).
        with js.stream(seed_streams["sim:0"]), js.stream(seed_streams[second]):
            seeds = []
            for d, root in zip(devices, roots, strict=True):
                seed_streams[d].wait_stream(forward_streams[d])
                seeds.append(js.ones_like(root))
            js.backward(roots, seeds)

    def middle():
        start = js.tensor([1.0], device="sim:0", requires_grad=True)
        with js.enable_grad():
            Reenter.apply(start, innermost).sum().backward()

    outer = js.tensor([1.0], device="sim:0", requires_grad=True)
    Reenter.apply(outer, middle).sum().backward()
    assert len(pool_threads()) == 1
    for d, leaf, k in zip(devices, leaves, (2.0, 3.0), strict=True):
        # The nested backward ordered its caller's streams (the seed streams) after the leaves'.
        js.default_stream(d).wait_stream(seed_streams[d])
        np.testing.assert_array_equal(leaf.grad.numpy(), [k, k])
    np.testing.assert_array_equal(outer.grad.numpy(), [1.0])


def test_graph_root_runs_on_the_callers_stream_of_its_seeds():
    s = js.Stream("sim:1")
    a = js.tensor([1.0], device="sim:1", requires_grad=True)
    b = js.tensor([1.0], requires_grad=True)
    with js.stream(s):
        s.wait_stream(js.default_stream("sim:1"))
        root = js.autograd.GraphRoot([((a * 2).grad_fn, 0), ((b * 2).grad_fn, 0)],
                                     [js.ones_like(a), js.ones_like(b)])
    assert root.stream == s
    assert [m.stream for m in root.input_metadata] == [s, None]


# ---------------------------------------------------------------- execution order
def _chain_with_probes():
    x = js.tensor(np.array([0.5, 1.5]), requires_grad=True)
    w = js.tensor(np.array([2.0, -1.0]), requires_grad=True)
    y = ((x * w).exp() + x.sin()).sum()
    nodes, stack = [], [y.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in nodes:
            nodes.append(node)
            stack.extend(fn for fn, _ in node.next_functions)
    return y, nodes


def test_current_execution_order_from_every_node_is_the_rest_of_it():
    y, nodes = _chain_with_probes()
    seen: list = []
    for node in nodes:
        node.register_prehook(
            lambda go, node=node: seen.append((node, js.autograd.graph.current_execution_order()))
        )
    with js.autograd.set_multithreading_enabled(False):
        y.backward()
    ran = [node for node, _ in seen]
    assert len(ran) == len(nodes)
    for i, (node, rest) in enumerate(seen):
        assert rest == ran[i:], f"from {node.name()}"


def test_current_execution_order_asks_the_tasks_multithreading_flag():
    y, _ = _chain_with_probes()
    orders, errors = [], []

    def flip_then_ask(go):
        js.autograd.set_multithreading_enabled(not js.autograd.is_multithreading_enabled())
        try:
            orders.append(js.autograd.graph.current_execution_order())
        except RuntimeError as error:
            errors.append(error)

    y.grad_fn.register_prehook(flip_then_ask)
    try:
        with js.autograd.set_multithreading_enabled(False):
            y.backward(retain_graph=True)  # the hook turns the flag on: the task's is off
        assert len(orders) == 1 and orders[0][0] is y.grad_fn
        js.autograd.set_multithreading_enabled(True)
        y.backward()  # the hook turns the flag off: the task's is on
    finally:
        js.autograd.set_multithreading_enabled(True)
    assert len(errors) == 1 and "multithreading disabled" in str(errors[0])


def test_current_execution_order_is_empty_in_a_final_callback():
    y, _ = _chain_with_probes()
    orders = []
    y.grad_fn.register_prehook(
        lambda go: js.autograd.queue_callback(
            lambda: orders.append(js.autograd.graph.current_execution_order())
        )
    )
    with js.autograd.set_multithreading_enabled(False):
        y.backward()
    assert orders == [[]]


# ---------------------------------------------------------------- the workers' device
class RecordsDevice(Function):
    """A cpu op: its node has no stream, so it runs under the thread's own current device."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        RecordsDevice.seen.append((threading.current_thread().name, streams.current_device()))
        return g


def _record_device_on_the_thread_of(node_device: str, *, nestings: int) -> None:
    """A cpu backward nested `nestings` deep in backwards of sim nodes (on their queue)."""

    def cpu_backward():
        with js.enable_grad():
            RecordsDevice.apply(js.tensor([1.0], requires_grad=True)).sum().backward()

    inner = cpu_backward
    for _ in range(nestings):
        def inner(inner=inner):
            start = js.tensor([1.0], device=node_device, requires_grad=True)
            with js.enable_grad():
                Reenter.apply(start, inner).sum().backward()
    inner()


def test_a_device_thread_makes_its_device_current():
    RecordsDevice.seen = []
    _record_device_on_the_thread_of("sim:1", nestings=1)
    assert RecordsDevice.seen == [("jaxstream autograd device 1", js.device("sim:1"))]


def test_a_pool_thread_makes_the_device_of_its_queue_current(max_depth_one):
    RecordsDevice.seen = []
    _record_device_on_the_thread_of("sim:1", nestings=2)
    assert RecordsDevice.seen == [("jaxstream autograd reentrant backward", js.device("sim:1"))]
    assert len(pool_threads()) == 1


# ---------------------------------------------------------------- failed tasks leave the queues
class DropScene:
    """Task A: Join feeds five Track nodes and FailsLater (created last, so run first) on
    device 0; FailsLater blocks until task B's Probe is queued there too, then fails."""

    ran: list = []
    queue_len_seen: list = []
    device_queue: list = []
    queue_known = threading.Event()
    may_fail = threading.Event()


class Track(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        DropScene.ran.append("Track")
        return g


class FailsLater(Track):
    @staticmethod
    def backward(ctx, g):
        DropScene.device_queue.append(worker.ready_queue)
        DropScene.queue_known.set()
        assert DropScene.may_fail.wait(WAIT_S)
        raise ValueError("task A fails")


class Probe(Track):
    @staticmethod
    def backward(ctx, g):
        DropScene.queue_len_seen.append(len(worker.ready_queue))
        return g


class Join(Function):
    @staticmethod
    def forward(ctx, *xs):
        return sum(xs[1:], xs[0].clone())

    @staticmethod
    def backward(ctx, g):
        return (g,) * 6


def _run_b_once_a_is_stuck(loss_b):
    assert DropScene.queue_known.wait(WAIT_S)
    queue = DropScene.device_queue[0]
    b = threading.Thread(target=loss_b.backward)
    b.start()
    deadline = time.monotonic() + WAIT_S
    while len(queue) < 6:  # A's five Track nodes and B's first node
        assert time.monotonic() < deadline, "task B never reached device 0's queue"
        time.sleep(0.001)
    DropScene.may_fail.set()
    b.join(WAIT_S)
    assert not b.is_alive()


def test_a_failed_tasks_queued_nodes_are_dropped_while_another_task_proceeds():
    for log in (DropScene.ran, DropScene.queue_len_seen, DropScene.device_queue):
        log.clear()
    DropScene.queue_known.clear()
    DropScene.may_fail.clear()
    x = js.tensor([1.0], device="sim:0", requires_grad=True)
    tracked = [Track.apply(x) for _ in range(5)]
    loss_a = Join.apply(*tracked, FailsLater.apply(x)).sum()
    other = js.tensor([1.0], device="sim:0", requires_grad=True)
    loss_b = Probe.apply(other).sum()  # created last: its nodes sort before A's
    helper = threading.Thread(target=_run_b_once_a_is_stuck, args=(loss_b,))
    helper.start()
    with pytest.raises(ValueError, match="task A fails"):
        loss_a.backward()
    helper.join(WAIT_S)
    assert not helper.is_alive()
    assert DropScene.ran == []  # none of A's queued nodes ran
    assert DropScene.queue_len_seen == [0]  # when B ran, A's nodes had left the queue
    np.testing.assert_array_equal(other.grad.numpy(), [1.0])
    assert x.grad is None


def test_a_queue_refuses_and_drops_the_nodes_of_a_failed_task_but_keeps_its_wake_ups():
    def task():
        return GraphTask(False, False, 0, ReadyQueue(), [], False)

    failed, other = task(), task()
    queue = ReadyQueue()
    nodes = [js.autograd.Node(()) for _ in range(3)]
    queue.push(failed, nodes[0], [])
    queue.push(other, nodes[1], [])
    failed.set_exception(ValueError("failed"), None)
    queue.drop_tasks_of(failed)
    queue.push(failed, nodes[2], [])  # refused: its task has failed
    queue.push(failed, None, [])  # a wake-up: kept, its owner must still raise
    assert queue.nodes_of(failed) == [] and queue.nodes_of(other) == [nodes[1]]
    popped = [queue.pop()[2:4] for _ in range(len(queue))]
    assert popped == [(failed, None), (other, nodes[1])]


# ---------------------------------------------------------------- a bounded wait at shutdown
def test_shutdown_waits_a_bounded_time_and_names_the_thread_that_did_not_stop():
    entered, release = threading.Event(), threading.Event()

    def callback():
        entered.set()
        assert release.wait(WAIT_S)

    class QueuesABlockingCallback(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            js.autograd.queue_callback(callback)
            return g

    x = js.tensor([1.0], device="sim:0", requires_grad=True)
    loss = QueuesABlockingCallback.apply(x).sum()
    caller = threading.Thread(target=loss.backward)
    caller.start()
    assert entered.wait(WAIT_S)  # device 0's thread runs the callback (it ran the last node)
    (stuck,) = device_threads()
    with js.config.patch(autograd_shutdown_wait_s=0.05):
        with pytest.warns(RuntimeWarning, match="jaxstream autograd device 0 did not stop"):
            assert js.autograd.shutdown_engine_threads() is False
    release.set()
    caller.join(WAIT_S)
    stuck.join(WAIT_S)
    assert not caller.is_alive() and not stuck.is_alive()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])


def test_the_shutdown_wait_is_validated():
    with pytest.raises(ValueError, match=">= 0"):
        js.config.autograd_shutdown_wait_s = -1
    with pytest.raises(TypeError, match="number of seconds"):
        js.config.autograd_shutdown_wait_s = None
    with js.config.patch(autograd_shutdown_wait_s="2.5"):
        assert js.config.autograd_shutdown_wait_s == 2.5
