"""The engine's two ways of running a node agree: a plain node (no hooks, no stream, no
`inputs=`, nobody observing) runs inside the worker loop's frame, any other through
`evaluate_function` (Note [A plain node in one frame] in jaxstream/autograd/engine.py).
The same random graphs run both ways must run their nodes in the same order and give the
same gradients."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import returns_this
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream.autograd import engine as engine_module
from jaxstream.autograd.function import Function


class Tagged(Function):
    """Scales by a per-node factor and logs its name when its backward runs."""

    log: list = []

    @staticmethod
    def forward(ctx, x, name, factor):
        ctx.name, ctx.factor = name, factor
        return x * factor

    @staticmethod
    def backward(ctx, g):
        Tagged.log.append(ctx.name)
        return g * ctx.factor, None, None


@st.composite
def dags(draw):
    """Each node takes one or two earlier values (the leaves come first)."""
    leaves = draw(st.integers(1, 3))
    nodes = []
    for k in range(draw(st.integers(1, 12))):
        available = leaves + k
        first = draw(st.integers(0, available - 1))
        second = draw(st.none() | st.integers(0, available - 1))
        nodes.append((first, second, draw(st.sampled_from([0.5, 2.0, -1.5]))))
    return leaves, nodes


def _run(plan, hooked: bool, monkeypatch):
    """Backward of the sum of every node; the nodes' backward order, the leaves' grads and
    how many nodes went through `evaluate_function`."""
    leaves_count, nodes = plan
    general = []
    evaluate = engine_module.Engine.evaluate_function

    def counted(self, graph_task, fn, inputs):
        general.append(fn)
        return evaluate(self, graph_task, fn, inputs)

    monkeypatch.setattr(engine_module.Engine, "evaluate_function", counted)
    leaves = [js.tensor(np.arange(3.0) + i, requires_grad=True) for i in range(leaves_count)]
    values = list(leaves)
    for k, (first, second, factor) in enumerate(nodes):
        x = values[first] if second is None else values[first] + values[second]
        y = Tagged.apply(x, f"n{k}", factor)
        if hooked:
            y.grad_fn.register_prehook(lambda grads: None)
        values.append(y)
    loss = sum(v.sum() for v in values[leaves_count:])
    Tagged.log = []
    with js.autograd.set_multithreading_enabled(False):
        loss.backward()
    monkeypatch.setattr(engine_module.Engine, "evaluate_function", evaluate)
    return Tagged.log, [None if t.grad is None else t.grad.numpy() for t in leaves], general


@settings(max_examples=40, deadline=None)
@given(plan=dags())
def test_plain_and_hooked_nodes_run_in_the_same_order_with_the_same_gradients(plan):
    with pytest.MonkeyPatch.context() as monkeypatch:
        plain_order, plain_grads, plain_general = _run(plan, False, monkeypatch)
        hooked_order, hooked_grads, hooked_general = _run(plan, True, monkeypatch)
    assert plain_order == hooked_order
    assert len(plain_order) == len(plan[1])
    for a, b in zip(plain_grads, hooked_grads, strict=True):
        np.testing.assert_array_equal(a, b)
    assert plain_general == []  # every node ran in the loop's frame
    assert len(hooked_general) == len(plan[1])  # each hooked node went the general way


def test_a_profile_sends_every_node_the_general_way(monkeypatch):
    seen = []
    evaluate = engine_module.Engine.evaluate_function
    monkeypatch.setattr(
        engine_module.Engine, "evaluate_function",
        lambda self, task, fn, inputs: seen.append(fn.name()) or evaluate(self, task, fn, inputs),
    )
    x = js.tensor([1.0, 2.0], requires_grad=True)
    y = (x * 3.0).sum()
    with js.profiler.profile():
        y.backward()
    assert seen == ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_a_plain_node_that_raises_fails_the_backward_and_names_itself():
    def bad_backward(g):
        raise ValueError("bad backward")

    x = js.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="bad backward") as info:
        returns_this(bad_backward).apply(x).sum().backward()
    assert "raised while running ReturnsThisBackward in the backward pass" in info.value.__notes__
    assert x.grad is None


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "hooked"])
def test_a_none_gradient_still_counts_towards_its_consumer(hooked):
    """The node below a None gradient runs once its other gradients are in, with their sum."""
    x = js.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    ran = []
    y.grad_fn.register_prehook(lambda grads: ran.append(grads[0].numpy().copy()))
    z = returns_this(lambda g: None).apply(y)
    if hooked:
        z.grad_fn.register_prehook(lambda grads: None)
    (z + y * 2.0).sum().backward()
    np.testing.assert_array_equal(ran, [[2.0, 2.0]])
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.exp([1.0, 2.0]), rtol=1e-6)


def test_a_node_whose_every_gradient_is_none_still_runs():
    x = js.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    ran = []
    y.grad_fn.register_prehook(lambda grads: ran.append(grads))
    returns_this(lambda g: None).apply(y).sum().backward()
    assert ran == [(None,)]
    assert x.grad is None
