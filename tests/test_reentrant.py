"""Reentrant backward: nesting on one thread, hand-off to pool threads, checkpointing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from helpers import WAIT_S, returns_this

import jaxstream as js
from jaxstream.autograd import Function
from jaxstream.autograd.threads import POOL_THREADS_KEPT

DEVICES = ["cpu", "sim:0"]

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


@pytest.fixture(autouse=True)
def restore_max_reentrant_depth():
    depth = js.autograd.get_max_reentrant_depth()
    yield
    js.autograd.set_max_reentrant_depth(depth)


class DeepReentrant(Function):
    """Each backward runs a backward of a fresh graph one level shorter (x - 1), through
    the same class, until the sum of x goes negative; there it calls `bottom`.

    Subclasses change what the bottom of the chain does, or log each level.
    """

    @staticmethod
    def forward(ctx, x):
        with js.enable_grad():
            ctx.x = x.detach().requires_grad_() - 1
        return ctx.x.detach()

    @classmethod
    def backward(cls, ctx, g):
        if ctx.x.sum().item() < 0:
            return cls.bottom(g)
        with js.enable_grad():
            cls.apply(ctx.x).sum().backward()
        return g

    @staticmethod
    def bottom(g):
        return g


def pool_threads() -> list[threading.Thread]:
    return [t for t in js.autograd.engine_threads() if "reentrant" in t.name]


@pytest.mark.parametrize("device", DEVICES)
def test_deep_reentrant(device):
    v = js.tensor(2000.0, requires_grad=True, device=device)
    DeepReentrant.apply(v).sum().backward()
    assert v.grad.item() == 1.0
    started = pool_threads()
    # One pool thread per `max_depth` levels or so: each runs its own nested levels.
    per_thread = js.autograd.get_max_reentrant_depth()
    assert 2000 // (per_thread + 1) <= len(started) <= 2000 // per_thread
    # A shorter chain reuses the parked pool threads.
    v = js.tensor(200.0, requires_grad=True, device=device)
    DeepReentrant.apply(v).sum().backward()
    assert v.grad.item() == 1.0
    assert pool_threads() == started


def test_reentrant_within_the_limit_stays_on_the_thread():
    v = js.tensor(float(js.autograd.get_max_reentrant_depth() - 2), requires_grad=True)
    DeepReentrant.apply(v).sum().backward()
    assert v.grad.item() == 1.0
    assert js.autograd.engine_threads() == []


def test_max_reentrant_depth_is_settable():
    js.autograd.set_max_reentrant_depth(3)
    assert js.autograd.get_max_reentrant_depth() == 3
    v = js.tensor(20.0, requires_grad=True)
    DeepReentrant.apply(v).sum().backward()
    assert v.grad.item() == 1.0
    assert 20 // 4 <= len(pool_threads()) <= 20 // 3
    with pytest.raises(ValueError):
        js.autograd.set_max_reentrant_depth(0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("max_depth", [60, 2])
def test_reentrant_priority(device, max_depth):
    js.autograd.set_max_reentrant_depth(max_depth)
    order = []

    class MyFunction(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            order.append("MyFunction")
            return g

    class Reentrant(DeepReentrant):
        @classmethod
        def backward(cls, ctx, g):
            order.append("Reentrant")
            return super().backward(ctx, g)

    a = MyFunction.apply(js.tensor(6.0, requires_grad=True, device=device))
    b = Reentrant.apply(js.tensor(9.0, requires_grad=True, device=device))
    (a * b).backward()
    # The nested backwards run before MyFunction, whatever its sequence number.
    assert order == ["Reentrant"] * 10 + ["MyFunction"]


@pytest.mark.parametrize("max_depth", [60, 1])
def test_final_callbacks_belong_to_the_task_that_queued_them(max_depth):
    js.autograd.set_max_reentrant_depth(max_depth)
    events = []

    class Inner(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            js.autograd.queue_callback(lambda: events.append("inner callback"))
            events.append("inner node")
            return g

    class Outer(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            js.autograd.queue_callback(lambda: events.append("outer callback"))
            leaf = js.tensor(1.0, requires_grad=True)
            with js.enable_grad():
                Inner.apply(leaf).backward()
            events.append("outer resumes")
            return g

    Outer.apply(js.tensor(1.0, requires_grad=True)).backward()
    assert events == ["inner node", "inner callback", "outer resumes", "outer callback"]


class FailsDeep(DeepReentrant):
    @staticmethod
    def bottom(g):
        raise ValueError("bottom of the chain")


@pytest.mark.parametrize("device", DEVICES)
def test_an_error_deep_in_a_handed_off_chain_reaches_the_caller(device):
    js.autograd.set_max_reentrant_depth(4)
    v = js.tensor(30.0, requires_grad=True, device=device)
    with pytest.raises(ValueError, match="bottom of the chain") as info:
        FailsDeep.apply(v).sum().backward()
    assert any("FailsDeepBackward" in note for note in info.value.__notes__)
    # Still usable, and the parked threads are reused.
    started = pool_threads()
    v = js.tensor(30.0, requires_grad=True, device=device)
    DeepReentrant.apply(v).sum().backward()
    assert v.grad.item() == 1.0
    assert pool_threads() == started


# ---------------------------------------------------------------- checkpoint
def block(x, w):
    return (x @ w).tanh() * x.sum()


def reference(x, w):
    x = js.tensor(x.numpy(), requires_grad=True, device=x.device)
    w = js.tensor(w.numpy(), requires_grad=True, device=w.device)
    block(x, w).sum().backward()
    return x.grad.numpy(), w.grad.numpy()


def leaves(device):
    rng = np.random.default_rng(0)
    x = js.tensor(rng.standard_normal((3, 4)), requires_grad=True, device=device)
    w = js.tensor(rng.standard_normal((4, 4)), requires_grad=True, device=device)
    return x, w


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_matches_plain_backward(device, use_reentrant):
    x, w = leaves(device)
    out = js.checkpoint(block, x, w, use_reentrant=use_reentrant)
    np.testing.assert_allclose(out.numpy(), block(x, w).numpy())
    assert out.grad_fn is not None
    out.sum().backward()
    want_x, want_w = reference(x, w)
    np.testing.assert_allclose(x.grad.numpy(), want_x)
    np.testing.assert_allclose(w.grad.numpy(), want_w)


def test_checkpoint_nested_in_a_deeper_graph():
    x, w = leaves("cpu")
    h = js.checkpoint(block, x, w)
    js.checkpoint(block, h, w).sum().backward()
    x2 = js.tensor(x.numpy(), requires_grad=True)
    w2 = js.tensor(w.numpy(), requires_grad=True)
    block(block(x2, w2), w2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy())
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy())


def test_reentrant_checkpoint_refuses_grad_and_backward_inputs():
    x, w = leaves("cpu")
    out = js.checkpoint(block, x, w, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match="incompatible with grad"):
        js.grad(out, [x])
    out = js.checkpoint(block, x, w, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match="incompatible"):
        out.backward(inputs=[w])
    assert w.grad is None


def test_non_reentrant_checkpoint_supports_grad_and_backward_inputs():
    x, w = leaves("cpu")
    want_x, want_w = reference(x, w)
    out = js.checkpoint(block, x, w, use_reentrant=False).sum()
    (gx,) = js.grad(out, [x])
    np.testing.assert_allclose(gx.numpy(), want_x)
    assert x.grad is None and w.grad is None
    out = js.checkpoint(block, x, w, use_reentrant=False).sum()
    out.backward(inputs=[w])
    np.testing.assert_allclose(w.grad.numpy(), want_w)
    assert x.grad is None


def test_checkpoint_frees_its_inputs_after_backward():
    x, w = leaves("cpu")
    out = js.checkpoint(block, x, w).sum()
    out.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        out.backward()


def test_threads_mixing_devices_reentrancy_and_hand_offs():
    js.autograd.set_max_reentrant_depth(2)
    errors: list[BaseException] = []

    def work(i):
        try:
            for k in range(4):
                a = js.tensor(np.full(3, 6.0), requires_grad=True)
                c = DeepReentrant.apply(a.to(f"sim:{i % 2}") * 2).to("cpu") * 3
                other = js.tensor(np.full(3, 4.0), requires_grad=True, device=f"sim:{(i + 1) % 2}")
                loss = (c + DeepReentrant.apply(other).to("cpu").sum()).sum()
                if k % 2:
                    loss.backward()
                    got = a.grad
                else:
                    (got,) = js.grad(loss, [a])
                np.testing.assert_allclose(got.numpy(), 6.0)
        except BaseException as exc:  # noqa: BLE001  (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not any(t.is_alive() for t in threads), "a backward thread hung"
    assert errors == []


def test_a_handed_off_caller_only_task_runs_a_nested_backward_on_a_device():
    """A task that never leaves its thread keeps its nodes in a queue of its own (Note
    [Device threads] in threads.py). Handed to a pool thread, that queue must not become
    the one where a nested backward with device work waits: device threads push there."""
    js.autograd.set_max_reentrant_depth(1)
    grads = []

    def device_backward(g):
        with js.enable_grad():
            x = js.tensor([1.0, 2.0], requires_grad=True, device="sim:0")
            (x * 3.0).sum().backward()
        grads.append(x.grad.to("cpu").numpy())
        return g

    def nesting(inner):
        def run(g):
            with js.enable_grad():
                x = js.tensor([1.0], requires_grad=True)
                returns_this(inner).apply(x).sum().backward()
            return g

        return run

    x = js.tensor([1.0], requires_grad=True)
    # The caller runs level 0 and nests level 1; level 2 (cpu only) goes to a pool thread,
    # whose node then runs the device backward.
    returns_this(nesting(nesting(device_backward))).apply(x).sum().backward()
    assert js.autograd.is_multithreading_enabled()
    np.testing.assert_array_equal(grads, [[3.0, 3.0]])
    assert x.grad.item() == 1.0
    assert pool_threads()


# ---------------------------------------------------------------- retiring pool threads
class CountsPoolThreads(DeepReentrant):
    """Counts the pool threads at the bottom of the chain, where all of them are alive."""

    counts = []

    @staticmethod
    def bottom(g):
        CountsPoolThreads.counts.append(len(pool_threads()))
        return g


def deep_backward(depth: int) -> int:
    """A reentrant chain `depth` deep; how many pool threads were alive at its bottom."""
    v = js.tensor(float(depth), requires_grad=True)
    CountsPoolThreads.apply(v).sum().backward()
    assert v.grad.item() == 1.0
    return CountsPoolThreads.counts.pop()


def settle(count: int) -> int:
    """Wait (at most WAIT_S) until at most `count` pool threads are alive; how many are."""
    deadline = time.monotonic() + WAIT_S
    while len(pool_threads()) > count and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(pool_threads())


def test_idle_pool_threads_beyond_the_kept_few_exit_after_the_timeout():
    js.autograd.set_max_reentrant_depth(4)
    with js.config.patch(autograd_pool_idle_s=0.1):
        deep_backward(40)  # about 10 pool threads; the kept few stay
        assert settle(POOL_THREADS_KEPT) == POOL_THREADS_KEPT
        baseline = threading.active_count()
        assert deep_backward(400) >= 400 // 5  # one pool thread per 4 levels or so
        assert settle(POOL_THREADS_KEPT) == POOL_THREADS_KEPT
        assert threading.active_count() == baseline
        deep_backward(400)  # the kept threads still serve, and new ones start as needed
        assert settle(POOL_THREADS_KEPT) == POOL_THREADS_KEPT


def test_idle_pool_threads_are_reused_within_the_timeout():
    js.autograd.set_max_reentrant_depth(4)
    with js.config.patch(autograd_pool_idle_s=WAIT_S):
        deep_backward(40)
        started = pool_threads()
        deep_backward(40)
        assert pool_threads() == started


def test_the_pool_idle_timeout_is_validated():
    for wrong in (-1, float("inf"), float("nan"), "soon"):
        with pytest.raises(ValueError, match="autograd_pool_idle_s: expected a finite number "
                           "of seconds >= 0"):
            js.config.autograd_pool_idle_s = wrong
    with pytest.raises(TypeError, match="autograd_pool_idle_s: expected a number of seconds"):
        js.config.autograd_pool_idle_s = None
    with pytest.raises(TypeError, match="autograd_pool_idle_s"):
        js.config.autograd_pool_idle_s = True
    with js.config.patch(autograd_pool_idle_s="2.5"):
        assert js.config.autograd_pool_idle_s == 2.5
