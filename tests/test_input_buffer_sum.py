"""Two gradients of one input summed in place into the first where nothing else holds it
(Note [Summing into a gradient no one else holds] in autograd/input_buffer.py), and into a
new array wherever anything does: a hook, the caller, another array it is a view of."""

from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np
import pytest
from helpers import returns_this

import jaxstream as js
from jaxstream.autograd import input_buffer

_SHAPE = (2, 3)


def _two_gradients_into_one(make: Callable[[int], js.Tensor], keep=None, create_graph=False):
    """x -> consumer -> two producers, whose backwards return `make(i)`; returns what the
    consumer's backward received, x's gradient, and weak references to what they made."""
    made: list[weakref.ref] = []
    received: list[js.Tensor] = []

    def produce(g: js.Tensor) -> js.Tensor:
        grad = make(len(made))
        made.append(weakref.ref(grad))
        return grad

    def consume(g: js.Tensor) -> js.Tensor:
        received.append(g)
        return g * 1.0

    Producer, Consumer = returns_this(produce), returns_this(consume)
    x = js.tensor(np.ones(_SHAPE, np.float32), requires_grad=True)
    c = Consumer.apply(x)
    outputs = [Producer.apply(c), Producer.apply(c)]
    if keep is not None:
        for out in outputs:
            out.grad_fn.register_hook(lambda grad_inputs, grad_outputs: keep.extend(grad_inputs))
    (x_grad,) = js.autograd.grad((outputs[0] + outputs[1]).sum(), x, create_graph=create_graph)
    return received[0], x_grad, made


def _fresh(fill: float) -> Callable[[int], js.Tensor]:
    return lambda i: js.tensor(np.full(_SHAPE, fill + i, np.float32))


def test_a_first_gradient_no_one_holds_takes_the_second_in_place():
    received, x_grad, made = _two_gradients_into_one(_fresh(1.0))
    np.testing.assert_array_equal(received.numpy(), np.full(_SHAPE, 3.0))
    np.testing.assert_array_equal(x_grad.numpy(), np.full(_SHAPE, 3.0))
    in_place = any(received is ref() for ref in made)
    assert in_place == input_buffer._COUNTS_HOLDERS


def test_a_gradient_a_hook_kept_is_left_as_it_was():
    kept: list[js.Tensor] = []
    received, x_grad, made = _two_gradients_into_one(_fresh(1.0), keep=kept)
    assert sorted(float(k.numpy()[0, 0]) for k in kept) == [1.0, 2.0]
    assert all(received is not k for k in kept)
    np.testing.assert_array_equal(x_grad.numpy(), np.full(_SHAPE, 3.0))


def test_the_callers_array_is_never_written():
    theirs = [np.full(_SHAPE, 1.0, np.float32), np.full(_SHAPE, 2.0, np.float32)]
    received, x_grad, _ = _two_gradients_into_one(lambda i: js.tensor(theirs[i]))
    assert js.tensor(theirs[0]).array is theirs[0]  # the tensor was the caller's array itself
    np.testing.assert_array_equal(theirs[0], np.full(_SHAPE, 1.0))
    np.testing.assert_array_equal(theirs[1], np.full(_SHAPE, 2.0))
    np.testing.assert_array_equal(x_grad.numpy(), np.full(_SHAPE, 3.0))


def test_a_view_of_another_array_is_never_written():
    base = np.ones((2, *_SHAPE), np.float32)
    received, x_grad, _ = _two_gradients_into_one(lambda i: js.from_dlpack(base[i]))
    np.testing.assert_array_equal(base, np.ones((2, *_SHAPE)))
    np.testing.assert_array_equal(x_grad.numpy(), np.full(_SHAPE, 2.0))


def test_under_create_graph_the_sum_is_a_new_tensor():
    """Grad mode is on while a create_graph backward runs: the sum is an op, never in place."""
    received, x_grad, made = _two_gradients_into_one(_fresh(1.0), create_graph=True)
    assert all(received is not ref() for ref in made)
    np.testing.assert_array_equal(x_grad.numpy(), np.full(_SHAPE, 3.0))


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_one_gradient_routed_twice_into_one_input_counts_twice(backend):
    """add's backward hands the same tensor to both its inputs, here one and the same."""
    x = js.tensor(np.arange(6.0, dtype=np.float32).reshape(_SHAPE), backend=backend,
                  requires_grad=True)
    y = x * 3.0
    (y + y).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad.numpy()), np.full(_SHAPE, 6.0))
