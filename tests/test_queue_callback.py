"""Final callbacks (``js.autograd.queue_callback``): when they run, in which order,
and what an error in one does, ported from PyTorch's autograd test-suite.  Where
PyTorch is installed the same program runs through ``torch.autograd`` and is compared.
"""

import re
import threading

import numpy as np
import pytest
from helpers import arr, leaf, tt

import jaxstream as js

CALLBACK_MESSAGE = "Final callbacks can only be installed during backward pass."


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match=re.escape(CALLBACK_MESSAGE)) as excinfo:
        js.autograd.queue_callback(lambda: None)
    assert str(excinfo.value) == CALLBACK_MESSAGE
    x = leaf([1.0])
    (x * 2.0).sum().backward()
    with pytest.raises(RuntimeError, match=re.escape(CALLBACK_MESSAGE)) as excinfo:
        js.autograd.queue_callback(lambda: None)
    assert str(excinfo.value) == CALLBACK_MESSAGE


def _callback_program(make, queue_callback):
    order = []
    x = make([1.0, 2.0])
    y = x * 2.0
    caller = threading.get_ident()

    def first():
        order.append(("first", x.grad is not None, threading.get_ident() == caller))
        queue_callback(lambda: order.append("queued by a callback"))

    def hook(g):
        queue_callback(first)
        queue_callback(lambda: order.append("second"))
        order.append("hook")

    y.register_hook(hook)
    y.sum().backward()
    order.append("returned")
    return order


def test_queue_callback_fifo_after_leaves_and_nested():
    order = _callback_program(leaf, js.autograd.queue_callback)
    assert order == [
        "hook",
        ("first", True, True),
        "second",
        "queued by a callback",
        "returned",
    ]


@pytest.mark.oracle
def test_queue_callback_matches_torch(torch):
    from torch.autograd import Variable

    ours = _callback_program(leaf, js.autograd.queue_callback)
    ref = _callback_program(lambda v: tt(torch, v), Variable._execution_engine.queue_callback)
    assert ours == ref


def test_queue_callback_from_function_backward_and_grad():
    ran = []

    class Queues(js.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0

        @staticmethod
        def backward(ctx, g):
            js.autograd.queue_callback(lambda: ran.append("callback"))
            return g

    x = leaf([1.0])
    (gx,) = js.grad(Queues.apply(x).sum(), x)
    assert ran == ["callback"]
    np.testing.assert_allclose(arr(gx), [1.0])
    # callbacks belong to their graph task: a second backward does not rerun them
    (x * 1.0).sum().backward()
    assert ran == ["callback"]


def test_error_in_callback_reaches_caller_and_engine_recovers():
    x = leaf([1.0, 2.0])
    y = x * 2.0

    def bad():
        raise KeyError("from a callback")

    y.register_hook(lambda g: js.autograd.queue_callback(bad))
    with pytest.raises(KeyError, match="from a callback"):
        y.sum().backward()
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(arr(x.grad), [3.0, 3.0])
