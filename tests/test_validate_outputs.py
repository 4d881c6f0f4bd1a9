"""validate_outputs: what a node returns is checked against where it flows, naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import returns_this

import jaxstream as js
from jaxstream.autograd.engine import validate_outputs


def _leaf(shape=(3,), dtype=np.float32, **kw):
    return js.tensor(np.ones(shape, dtype), requires_grad=True, **kw)


def _backward_with(result, x, hooked=False):
    """Backward through `returns_this(result)`; `hooked` gives its node a pre-hook that
    changes nothing, so that the engine takes its general path instead of the plain one
    (Note [A plain node in one frame] in engine.py)."""
    y = returns_this(result).apply(x)
    if hooked:
        y.grad_fn.register_prehook(lambda grads: None)
    y.sum().backward()


PATHS = pytest.mark.parametrize("hooked", [False, True], ids=["plain", "hooked"])


def test_wrong_number_of_gradients_names_the_node():
    x = _leaf()
    y = x * 2.0
    edges = y.grad_fn.next_edges
    with pytest.raises(RuntimeError, match=r"MulBackward0 returned an invalid number of "
                       r"gradients - expected 2, but got 1"):
        validate_outputs(edges, [js.ones(3)], y.grad_fn)


@PATHS
def test_a_broadcast_gradient_is_summed_back_to_the_input_shape(hooked):
    x = _leaf((3,))
    _backward_with(lambda g: g.broadcast_to((4, 3)), x, hooked)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 4.0, np.float32))


@PATHS
def test_a_gradient_of_a_shape_that_does_not_broadcast_is_an_error(hooked):
    x = _leaf((3,))
    with pytest.raises(RuntimeError, match=r"ReturnsThisBackward returned an invalid gradient "
                       r"at index 0 - got shape \(2,\) but expected shape compatible with "
                       r"\(3,\)"):
        _backward_with(lambda g: js.ones(2), x, hooked)
    assert x.grad is None


@PATHS
def test_a_gradient_of_another_float_dtype_is_cast_to_the_input_dtype(hooked):
    x = _leaf((3,), np.float32)
    _backward_with(lambda g: g.astype("float64") * 3.0, x, hooked)
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 3.0, np.float32))


@PATHS
def test_a_gradient_on_another_device_is_an_error(hooked):
    x = _leaf((3,), device="sim:0")
    with pytest.raises(RuntimeError, match=r"ReturnsThisBackward returned an invalid gradient "
                       r"at index 0 - expected device sim:0 but got sim:1"):
        _backward_with(lambda g: g.to("sim:1"), x, hooked)


@PATHS
def test_a_gradient_of_another_backend_is_an_error(hooked):
    x = _leaf((3,))
    with pytest.raises(RuntimeError, match=r"expected a numpy tensor but got a jax one"):
        _backward_with(lambda g: g.to(backend="jax"), x, hooked)


@PATHS
def test_a_non_tensor_gradient_is_an_error(hooked):
    x = _leaf((3,))
    with pytest.raises(TypeError, match=r"invalid gradient at index 0 - expected a Tensor, got "
                       r"ndarray"):
        _backward_with(lambda g: np.ones(3, np.float32), x, hooked)


def test_after_each_error_the_next_backward_works():
    x = _leaf((3,))
    for bad in (lambda g: js.ones(2), lambda g: np.ones(3)):
        with pytest.raises((RuntimeError, TypeError)):
            _backward_with(bad, x)
    _backward_with(lambda g: g, x)
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))


def test_a_pre_hook_returning_the_wrong_number_of_gradients_is_an_error():
    x = _leaf()
    y = x * 2.0
    y.grad_fn.register_prehook(lambda grads: (grads[0], grads[0]))
    with pytest.raises(RuntimeError, match=r"pre hook '<lambda>' of MulBackward0 returned 2 "
                       r"gradients, expected 1"):
        y.sum().backward()


@PATHS
def test_a_node_returning_the_wrong_number_of_gradients_names_it(hooked, monkeypatch):
    x = _leaf((3,))
    y = x * 2.0
    node, apply = y.grad_fn, type(y.grad_fn).apply
    monkeypatch.setattr(
        type(node), "apply", lambda fn, grads: [grads[0]] * 3 if fn is node else apply(fn, grads)
    )
    if hooked:
        node.register_prehook(lambda grads: None)
    with pytest.raises(RuntimeError, match=r"MulBackward0 returned an invalid number of "
                       r"gradients - expected 2, but got 3"):
        y.sum().backward()
    assert x.grad is None


def test_a_post_hook_gradient_of_another_float_dtype_is_refused_naming_the_hook():
    """Unlike a node's own gradient, a hook's is not cast (Note [Hook results])."""
    x = _leaf((3,), np.float32)
    y = x * 2.0
    y.grad_fn.register_hook(lambda grads, _: (grads[0].astype("float64"), None))
    with pytest.raises(RuntimeError, match=r"post hook '<lambda>' of MulBackward0, gradient 0, "
                       r"has changed the dtype of value \(was float32 got float64\)"):
        y.sum().backward()
    assert x.grad is None


def test_a_post_hook_gradient_of_another_shape_is_refused_naming_the_hook():
    x = _leaf((3,))
    y = x * 2.0
    y.grad_fn.register_hook(lambda grads, _: (js.ones(2, dtype="float32"), None))
    with pytest.raises(RuntimeError, match=r"post hook '<lambda>' of MulBackward0, gradient 0, "
                       r"has changed the size of value \(was \(3,\) got \(2,\)\)"):
        y.sum().backward()
    assert x.grad is None
