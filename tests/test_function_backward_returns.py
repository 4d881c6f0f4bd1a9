"""What a custom ``js.autograd.Function`` may return, and how the engine checks it:
a forward that returns its input, a backward that returns ``None`` for an input,
too few or too many gradients, or gradients of a wrong or merely broadcastable
shape.  Ported from PyTorch's autograd test-suite.
"""

import numpy as np
import pytest
from helpers import arr, error_text, leaf

import jaxstream as js


class ReturnsInput(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


@pytest.mark.parametrize("shape", [(1,), ()])
def test_function_returning_its_input(shape):
    v = js.tensor(np.ones(shape), requires_grad=True)
    out = ReturnsInput.apply(v)
    assert v.is_leaf and v.grad_fn is None
    assert out.grad_fn.name() == "ReturnsInputBackward"
    out.backward()
    np.testing.assert_allclose(arr(v.grad), np.full(shape, 2.0))
    v.grad = None
    ReturnsInput.apply(v * 1.0).backward()
    np.testing.assert_allclose(arr(v.grad), np.full(shape, 2.0))


class IgnoresSecond(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, None


def test_backward_returning_none_for_an_input():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    IgnoresSecond.apply(a, b).sum().backward()
    np.testing.assert_allclose(arr(a.grad), [1.0, 1.0])
    assert b.grad is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        js.grad(IgnoresSecond.apply(a, b).sum(), b)
    (gb,) = js.grad(IgnoresSecond.apply(a, b).sum(), b, allow_unused=True)
    assert gb is None


class TooFew(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return (g,)


class TooMany(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, g, g


class TrailingNone(js.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, g, None


@pytest.mark.parametrize("fn, got", [(TooFew, 1), (TooMany, 3)])
def test_wrong_number_of_gradients_raises(fn, got):
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    with pytest.raises(RuntimeError, match=rf"number of gradients.*expected 2.*got {got}") as e:
        fn.apply(a, b).sum().backward()
    assert f"{fn.__name__}Backward" in error_text(e)
    assert a.grad is None and b.grad is None


def test_extra_none_gradients_are_ignored():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    TrailingNone.apply(a, b).sum().backward()
    np.testing.assert_allclose(arr(a.grad), [1.0, 1.0])
    np.testing.assert_allclose(arr(b.grad), [1.0, 1.0])


class WrongShape(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2.0

    @staticmethod
    def backward(ctx, g):
        return js.tensor(np.ones((4, 7)))


class Broadcast(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1.0

    @staticmethod
    def backward(ctx, g):
        return js.tensor(np.ones((4, 3)))


def test_gradient_of_wrong_shape_names_node_and_shapes():
    x = js.tensor(np.ones((7, 4)), requires_grad=True)
    with pytest.raises(RuntimeError) as excinfo:
        WrongShape.apply(x).sum().backward()
    text = error_text(excinfo)
    assert "WrongShapeBackward" in text
    assert "7, 4" in text and "4, 7" in text
    assert x.grad is None


def test_broadcastable_gradient_is_summed_to_input_shape():
    x = leaf([1.0, 2.0, 3.0])
    Broadcast.apply(x).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [4.0, 4.0, 4.0])
