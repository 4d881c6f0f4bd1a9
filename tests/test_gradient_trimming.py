"""Trimming: the engine runs only the nodes on a path to the inputs asked for, and
built-in ops skip the gradients nobody needs; ported from PyTorch's autograd
test-suite.  Where PyTorch is installed the same programs run through
``torch.autograd`` and are compared.
"""

import numpy as np
import pytest
from helpers import accumulator_of, all_nodes, arr, leaf, reaches, tt

import jaxstream as js


class MustNotRun(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1.0

    @staticmethod
    def backward(ctx, g):
        raise AssertionError("this node is not on a path to the inputs")


def test_nodes_not_leading_to_inputs_are_not_executed():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = (MustNotRun.apply(a) + b * 2.0).sum()
    (gb,) = js.grad(out, b, retain_graph=True)
    np.testing.assert_allclose(arr(gb), [2.0, 2.0])
    out.backward(inputs=[b])
    np.testing.assert_allclose(arr(b.grad), [2.0, 2.0])
    assert a.grad is None
    unreachable = leaf([0.0])
    (ga, gu) = js.grad(MustNotRun.apply(a).sum(), [b, unreachable], allow_unused=True)
    assert ga is None and gu is None


# ----------------------------------------------- trimming in built-in ops


def _record_post_hooks(root):
    records = []
    for node in all_nodes(root):
        if node.name() != "AccumulateGrad":
            node.register_hook(lambda gi, go, node=node: records.append((node, gi)))
    return records


def _mm_graph():
    x = leaf([[1.0, 2.0]])
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = js.matmul(x, w)
    return x, w, y


@pytest.mark.parametrize(
    "run, expected_none",
    [
        (lambda x, w, y: js.grad(y.sum(), x), [False, True]),
        (lambda x, w, y: js.grad(y.sum(), w), [True, False]),
        (lambda x, w, y: y.sum().backward(), [False, False]),
        (lambda x, w, y: y.sum().backward(inputs=[x]), [False, True]),
    ],
)
def test_matmul_skips_gradients_that_are_not_needed(run, expected_none):
    x, w, y = _mm_graph()
    assert y.grad_fn.name() == "MmBackward0"
    (acc_x, _), (acc_w, _) = y.grad_fn.next_functions
    assert acc_x.variable is x and acc_w.variable is w
    records = _record_post_hooks(y.grad_fn)
    run(x, w, y)
    ((node, gi),) = [r for r in records if r[0] is y.grad_fn]
    assert [g is None for g in gi] == expected_none


@pytest.mark.oracle
def test_matmul_trimming_matches_torch(torch):
    runs = [
        lambda m, x, w, y: m.grad(y.sum(), x),
        lambda m, x, w, y: m.grad(y.sum(), w),
        lambda m, x, w, y: y.sum().backward(),
        lambda m, x, w, y: y.sum().backward(inputs=[x]),
    ]
    for run in runs:
        tx, tw = tt(torch, [[1.0, 2.0]]), tt(torch, [[1.0, 2.0], [3.0, 4.0]])
        ty = tx @ tw
        ref = []
        ty.grad_fn.register_hook(lambda gi, go, ref=ref: ref.append([g is None for g in gi]))
        run(torch.autograd, tx, tw, ty)
        x, w, y = _mm_graph()
        ours = []
        y.grad_fn.register_hook(lambda gi, go, ours=ours: ours.append([g is None for g in gi]))
        run(js, x, w, y)
        assert ours == ref


def test_matmul_without_trimming_computes_every_gradient():
    x, w, y = _mm_graph()
    records = _record_post_hooks(y.grad_fn)
    js.autograd.set_trimming_enabled(False)
    try:
        (gx,) = js.grad(y.sum(), x)
    finally:
        js.autograd.set_trimming_enabled(True)
    ((_, gi),) = records
    assert gi[0] is not None and gi[1] is not None
    np.testing.assert_allclose(arr(gx), [[3.0, 7.0]])


def test_linear_skips_weight_and_bias_gradients_under_grad_of_input():
    xv = np.arange(6.0).reshape(2, 3)
    wv = np.arange(12.0).reshape(4, 3) / 10.0
    bv = np.array([1.0, -1.0, 0.5, 2.0])
    x, w, b = leaf(xv), leaf(wv), leaf(bv)
    y = js.linear(x, w, b)
    np.testing.assert_allclose(arr(y), xv @ wv.T + bv)
    acc_x, acc_w, acc_b = (accumulator_of(y.grad_fn, t) for t in (x, w, b))
    unneeded = [
        n for n in all_nodes(y.grad_fn)
        if (reaches(n, acc_w) or reaches(n, acc_b)) and not reaches(n, acc_x)
    ]
    records = _record_post_hooks(y.grad_fn)
    flags = []
    will = js.autograd.graph.will_engine_execute_node
    s = y.sum()
    s.register_hook(lambda g: flags.append((will(acc_w), will(acc_b), will(y.grad_fn))))
    (gx,) = js.grad(s, x)
    assert flags == [(False, False, True)]
    np.testing.assert_allclose(arr(gx), np.ones((2, 4)) @ wv)
    assert not any(any(node is u for u in unneeded) for node, _ in records)
    checked = 0
    for node, gi in records:
        for i, (fn, _) in enumerate(node.next_functions):
            if fn is not None and any(fn is u for u in unneeded):
                assert gi[i] is None, (node.name(), i)
                checked += 1
    assert checked >= 2  # the weight's and the bias' edges


@pytest.mark.oracle
def test_linear_matches_torch(torch):
    xv = np.arange(6.0).reshape(2, 3)
    wv = np.arange(12.0).reshape(4, 3) / 10.0
    bv = np.array([1.0, -1.0, 0.5, 2.0])
    tx, tw, tb = (tt(torch, v) for v in (xv, wv, bv))
    (torch.nn.functional.linear(tx, tw, tb) ** 2).sum().backward()
    x, w, b = leaf(xv), leaf(wv), leaf(bv)
    (js.linear(x, w, b) ** 2).sum().backward()
    for ours, ref in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(arr(ours.grad), ref.grad.numpy(), rtol=1e-12)
