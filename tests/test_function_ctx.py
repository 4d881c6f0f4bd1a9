"""Custom ``js.autograd.Function``: forward and backward, and what ``ctx`` offers
(``needs_input_grad``, ``save_for_backward``, ``set_materialize_grads``,
``mark_non_differentiable``), ported from PyTorch's autograd test-suite.  Where
PyTorch is installed the same program runs through ``torch.autograd`` and is compared.
"""

import re

import numpy as np
import pytest
from helpers import arr, leaf, tt

import jaxstream as js


class ScaledProduct(js.autograd.Function):
    log = []

    @staticmethod
    def forward(ctx, a, b, k):
        ScaledProduct.log.append(("forward", js.is_grad_enabled(), ctx.needs_input_grad))
        inner = a * b
        ScaledProduct.log.append(("inner has grad_fn", inner.grad_fn is not None))
        ctx.save_for_backward(a, b)
        ctx.k = k
        return inner * k

    @staticmethod
    def backward(ctx, g):
        ScaledProduct.log.append(("backward", js.is_grad_enabled(), ctx.needs_input_grad))
        a, b = ctx.saved_tensors
        ga = g * b * ctx.k if ctx.needs_input_grad[0] else None
        gb = g * a * ctx.k if ctx.needs_input_grad[1] else None
        return ga, gb, None


@pytest.fixture
def product_log():
    ScaledProduct.log = []
    return ScaledProduct.log


def test_function_forward_backward(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = ScaledProduct.apply(a, b, 2.0)
    assert isinstance(out, js.Tensor)
    assert out.requires_grad and not out.is_leaf
    assert out.grad_fn.name() == "ScaledProductBackward"
    assert isinstance(out.grad_fn, js.autograd.Node)
    np.testing.assert_allclose(arr(out), [6.0, 16.0])
    out.sum().backward()
    np.testing.assert_allclose(arr(a.grad), [6.0, 8.0])
    np.testing.assert_allclose(arr(b.grad), [2.0, 4.0])
    assert product_log[0] == ("forward", False, (True, True, False))
    assert product_log[1] == ("inner has grad_fn", False)
    assert product_log[2] == ("backward", False, (True, True, False))


def test_function_needs_input_grad_reflects_requires_grad(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0], requires_grad=False)
    out = ScaledProduct.apply(a, b, 2.0)
    out.sum().backward()
    assert product_log[0][2] == (True, False, False)
    assert product_log[-1] == ("backward", False, (True, False, False))
    assert b.grad is None
    np.testing.assert_allclose(arr(a.grad), [6.0, 8.0])


def test_function_needs_input_grad_trimmed_by_grad_inputs(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = ScaledProduct.apply(a * 1.0, b, 2.0).sum()
    (ga,) = js.grad(out, a, retain_graph=True)
    assert product_log[-1] == ("backward", False, (True, False, False))
    np.testing.assert_allclose(arr(ga), [6.0, 8.0])
    (gb,) = js.grad(out, b, retain_graph=True)
    assert product_log[-1] == ("backward", False, (False, True, False))
    np.testing.assert_allclose(arr(gb), [2.0, 4.0])
    out.backward(inputs=[b], retain_graph=True)
    assert product_log[-1] == ("backward", False, (False, True, False))
    assert a.grad is None
    out.backward()
    assert product_log[-1] == ("backward", False, (True, True, False))


def test_function_needs_input_grad_without_trimming(product_log):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    out = ScaledProduct.apply(a, b, 2.0).sum()
    assert js.autograd.is_trimming_enabled()
    js.autograd.set_trimming_enabled(False)
    try:
        assert not js.autograd.is_trimming_enabled()
        (ga,) = js.grad(out, a)
    finally:
        js.autograd.set_trimming_enabled(True)
    assert js.autograd.is_trimming_enabled()
    assert product_log[-1] == ("backward", False, (True, True, False))
    np.testing.assert_allclose(arr(ga), [6.0, 8.0])


def test_function_without_inputs_requiring_grad_has_no_node(product_log):
    a = leaf([1.0, 2.0], requires_grad=False)
    out = ScaledProduct.apply(a, a, 3.0)
    assert not out.requires_grad and out.grad_fn is None
    np.testing.assert_allclose(arr(out), [3.0, 12.0])
    x = leaf([1.0, 2.0])
    with js.no_grad():
        out = ScaledProduct.apply(x, x, 3.0)
    assert not out.requires_grad and out.grad_fn is None


class Cube(js.autograd.Function):
    grad_modes = []

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a * a

    @staticmethod
    def backward(ctx, g):
        Cube.grad_modes.append(js.is_grad_enabled())
        (a,) = ctx.saved_tensors
        return g * 3.0 * a * a


def test_function_backward_is_differentiable_under_create_graph():
    Cube.grad_modes.clear()
    x = leaf([1.0, 2.0])
    (g,) = js.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(arr(g), [3.0, 12.0])
    (gg,) = js.grad(g.sum(), x)
    np.testing.assert_allclose(arr(gg), [6.0, 12.0])
    Cube.apply(x).sum().backward()
    # backward runs with grad mode == create_graph, as in PyTorch
    assert Cube.grad_modes == [True, False]


def test_function_saved_tensors_freed_after_backward():
    x = leaf([1.0, 2.0])
    out = Cube.apply(x).sum()
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(arr(x.grad), [6.0, 24.0])
    with pytest.raises(RuntimeError, match=re.escape("retain_graph=True")):
        out.backward()


def test_function_saved_input_modified_in_place_raises():
    x = leaf([1.0, 2.0])
    y = x * 1.0
    out = Cube.apply(y)
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="version"):
        out.sum().backward()


class ExpFn(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        result = a.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, g):
        (result,) = ctx.saved_tensors
        return g * result


def test_function_may_save_its_output():
    x = leaf([0.0, 1.0])
    ExpFn.apply(x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), np.exp([0.0, 1.0]))


class TwoOutputs(js.autograd.Function):
    seen = []
    materialize = True

    @staticmethod
    def forward(ctx, a):
        ctx.set_materialize_grads(TwoOutputs.materialize)
        return a * 2.0, a * 3.0

    @staticmethod
    def backward(ctx, g1, g2):
        TwoOutputs.seen.append((g1, g2))
        total = g1 * 2.0
        if g2 is not None:
            total = total + g2 * 3.0
        return total


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads(materialize):
    TwoOutputs.seen.clear()
    TwoOutputs.materialize = materialize
    x = leaf([1.0, 2.0, 3.0])
    o1, o2 = TwoOutputs.apply(x)
    assert o1.grad_fn is o2.grad_fn
    o1.sum().backward()
    (g1, g2) = TwoOutputs.seen[0]
    np.testing.assert_allclose(arr(g1), [1.0, 1.0, 1.0])
    if materialize:
        np.testing.assert_allclose(arr(g2), [0.0, 0.0, 0.0])
    else:
        assert g2 is None
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0, 2.0])


def test_multi_output_function_edges_carry_input_nr():
    TwoOutputs.materialize = True
    x = leaf([1.0, 2.0])
    o1, o2 = TwoOutputs.apply(x)
    z = o1 + o2
    node = o1.grad_fn
    assert z.grad_fn.next_functions == ((node, 0), (node, 1))
    z.sum().backward()
    np.testing.assert_allclose(arr(x.grad), [5.0, 5.0])


class WithIndex(js.autograd.Function):
    seen = []

    @staticmethod
    def forward(ctx, a):
        index = a * 0.0 + 1.0
        ctx.mark_non_differentiable(index)
        return a * 2.0, index

    @staticmethod
    def backward(ctx, g, g_index):
        WithIndex.seen.append(g_index)
        return g * 2.0


def test_mark_non_differentiable():
    WithIndex.seen.clear()
    x = leaf([1.0, 2.0])
    out, index = WithIndex.apply(x)
    assert out.requires_grad
    assert not index.requires_grad and index.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        index.sum().backward()
    out.sum().backward()
    np.testing.assert_allclose(arr(WithIndex.seen[0]), [0.0, 0.0])
    np.testing.assert_allclose(arr(x.grad), [2.0, 2.0])


@pytest.mark.oracle
def test_function_matches_torch(torch):
    class TorchScaledProduct(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            ctx.save_for_backward(a, b)
            ctx.k = k
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b * ctx.k, g * a * ctx.k, None

    def program(fn, make):
        a = make([1.0, -2.0, 0.5])
        b = make([3.0, 4.0, -1.0])
        out = fn.apply(a * a, b, 1.5)
        ((out * out).sum() + out.sum()).backward()
        return a.grad, b.grad

    ours = program(ScaledProduct, leaf)
    ref = program(TorchScaledProduct, lambda v: tt(torch, v))
    for x, y in zip(ours, ref, strict=True):
        np.testing.assert_allclose(arr(x), y.numpy(), rtol=1e-12)
