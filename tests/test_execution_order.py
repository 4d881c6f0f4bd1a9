"""The execution-order queries (``graph.current_execution_order``,
``graph.will_engine_execute_node``), ported from PyTorch's autograd test-suite.
Where PyTorch is installed the same program runs through ``torch.autograd`` and is
compared.
"""

import pytest
from helpers import accumulator_of, all_nodes, leaf, tt

import jaxstream as js


def _diamond(make):
    x = make([0.5, 1.0])
    a = x.exp()
    p = a.sin()
    q = a.cos()
    return x, a, (p * q).sum()


EXPECTED_ORDER = [
    "SumBackward0",
    "MulBackward0",
    "CosBackward0",
    "SinBackward0",
    "ExpBackward0",
    "AccumulateGrad",
]


def test_current_execution_order_predicts_the_run():
    x, a, c = _diamond(leaf)
    predicted, executed = [], []
    c.register_hook(lambda g: predicted.append(js.autograd.graph.current_execution_order()))
    for node in all_nodes(c.grad_fn):
        node.register_prehook(lambda go, node=node: executed.append(node))
    assert js.autograd.is_multithreading_enabled()
    with js.autograd.set_multithreading_enabled(False):
        assert not js.autograd.is_multithreading_enabled()
        c.backward(retain_graph=True)
        js.grad(c, a)
    assert js.autograd.is_multithreading_enabled()
    assert [n.name() for n in predicted[0]] == EXPECTED_ORDER
    assert predicted[0][0] is c.grad_fn
    assert predicted[0][-1] is a.grad_fn.next_functions[0][0]
    assert [n.name() for n in executed[: len(EXPECTED_ORDER)]] == EXPECTED_ORDER
    names = [n.name() for n in predicted[1]]
    assert names[:4] == EXPECTED_ORDER[:4] and "AccumulateGrad" not in names


@pytest.mark.oracle
def test_current_execution_order_matches_torch(torch):
    _, _, c = _diamond(lambda v: tt(torch, v))
    ref = []
    c.register_hook(
        lambda g: ref.append([n.name() for n in torch._C._current_graph_task_execution_order()])
    )
    with torch.autograd.set_multithreading_enabled(False):
        c.backward()
    assert [name.split("::")[-1] for name in ref[0]] == EXPECTED_ORDER


def test_current_execution_order_outside_backward_raises():
    with pytest.raises(RuntimeError):
        js.autograd.graph.current_execution_order()


def test_current_execution_order_requires_multithreading_disabled():
    x, _, c = _diamond(leaf)
    calls = []

    def hook(g):
        calls.append(js.autograd.graph.current_execution_order())

    c.register_hook(hook)
    with pytest.raises(RuntimeError, match="multithreading"):
        c.backward(retain_graph=True)
    js.autograd.set_multithreading_enabled(False)
    try:
        c.backward()
    finally:
        js.autograd.set_multithreading_enabled(True)
    assert js.autograd.is_multithreading_enabled()
    assert x.grad is not None
    assert [n.name() for n in calls[-1]] == EXPECTED_ORDER


def test_will_engine_execute_node():
    x = leaf([[1.0, 2.0]])
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x @ w
    acc_x = accumulator_of(y.grad_fn, x)
    acc_w = accumulator_of(y.grad_fn, w)
    will = js.autograd.graph.will_engine_execute_node
    with pytest.raises(RuntimeError):
        will(acc_w)
    seen = []
    y.register_hook(lambda g: seen.append((will(y.grad_fn), will(acc_w))))
    y.sum().backward(retain_graph=True)
    assert seen.pop() == (True, True)
    y.sum().backward(inputs=[x], retain_graph=True)
    assert seen.pop() == (True, False)
    js.grad(y.sum(), x, retain_graph=True)
    assert seen.pop() == (True, False)
    y.register_hook(lambda g: seen.append(will(acc_x)))
    y.sum().backward(inputs=[x])
    assert seen.pop() is True
