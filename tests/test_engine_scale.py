"""Deep graphs: the engine must never recurse per node (no RecursionError),
and must free the graph and its saved arrays once they are no longer needed,
as PyTorch's engine does (ported from PyTorch's deep-graph autograd tests).
"""

import gc
import math
import weakref

import numpy as np
import pytest
from helpers import arr, leaf

import jaxstream as js

CHAIN = 100_000
FACTOR = 1.0001


def test_backward_through_100k_node_chain():
    x = leaf([1.0, 2.0])
    y = x
    for _ in range(CHAIN):
        y = y * FACTOR
    assert y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    expected = math.exp(CHAIN * math.log(FACTOR))
    np.testing.assert_allclose(arr(x.grad), [expected, expected], rtol=1e-8)
    np.testing.assert_allclose(arr(y), [expected, 2.0 * expected], rtol=1e-8)


def test_grad_through_100k_node_chain_and_graph_is_freed():
    x = leaf([1.0, 2.0])
    saved = x.exp()  # ExpBackward0 saves its result
    saved_array = weakref.ref(saved.data)
    y = saved
    for _ in range(CHAIN):
        y = y * FACTOR
    del saved
    middle = y.grad_fn
    for _ in range(CHAIN // 2):
        middle = middle.next_functions[0][0]
    assert middle.name() == "MulBackward0"
    middle_ref = weakref.ref(middle)
    root_ref = weakref.ref(y.grad_fn)
    del middle

    (gx,) = js.grad(y.sum(), x)
    expected = np.exp([1.0, 2.0]) * math.exp(CHAIN * math.log(FACTOR))
    np.testing.assert_allclose(arr(gx), expected, rtol=1e-8)

    # without retain_graph the saved arrays are released right after the run,
    # while the graph itself is still referenced by y
    gc.collect()
    assert root_ref() is not None
    assert saved_array() is None
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        js.grad(y.sum(), x)

    # dropping the last reference frees the whole graph, without recursion
    del y
    gc.collect()
    assert root_ref() is None
    assert middle_ref() is None


def test_deleting_an_unused_100k_node_graph_does_not_overflow():
    x = leaf([1.0])
    y = x
    for _ in range(CHAIN):
        y = y * FACTOR
    root_ref = weakref.ref(y.grad_fn)
    del y
    gc.collect()
    assert root_ref() is None
    (gx,) = js.grad((x * 2.0).sum(), x)
    np.testing.assert_allclose(arr(gx), [2.0])


def test_retained_graph_keeps_saved_arrays_until_released():
    x = leaf([0.5, 1.5])
    saved = x.exp()
    saved_array = weakref.ref(saved.data)
    y = saved.sin()
    del saved
    y.sum().backward(retain_graph=True)
    gc.collect()
    assert saved_array() is not None
    y.sum().backward()
    gc.collect()
    assert saved_array() is None
    e = np.exp([0.5, 1.5])
    np.testing.assert_allclose(arr(x.grad), 2.0 * np.cos(e) * e, rtol=1e-12)


def _sin_chain_derivatives(x0, depth):
    """Value, first and second derivative of sin^depth at x0 (forward mode)."""
    v, d1, d2 = np.asarray(x0, dtype=np.float64), np.ones(len(x0)), np.zeros(len(x0))
    for _ in range(depth):
        v, d1, d2 = np.sin(v), np.cos(v) * d1, -np.sin(v) * d1 * d1 + np.cos(v) * d2
    return v, d1, d2


def test_deep_create_graph_chain():
    depth = 2_000
    x0 = [0.3, 1.1]
    x = leaf(x0)
    y = x
    for _ in range(depth):
        y = y.sin()
    (g,) = js.grad(y.sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    (gg,) = js.grad(g.sum(), x)
    v, d1, d2 = _sin_chain_derivatives(x0, depth)
    np.testing.assert_allclose(arr(y), v, rtol=1e-10)
    np.testing.assert_allclose(arr(g), d1, rtol=1e-8)
    np.testing.assert_allclose(arr(gg), d2, rtol=1e-6, atol=1e-12)


@pytest.mark.oracle
def test_deep_create_graph_chain_matches_torch():
    torch = pytest.importorskip("torch")
    depth = 2_000
    x0 = [0.3, 1.1]

    def program(x, grad):
        y = x
        for _ in range(depth):
            y = y.sin()
        (g,) = grad(y.sum(), x, create_graph=True)
        (gg,) = grad(g.sum(), x)
        return g, gg

    g, gg = program(leaf(x0), js.grad)
    tg, tgg = program(torch.tensor(x0, dtype=torch.float64, requires_grad=True),
                      torch.autograd.grad)
    np.testing.assert_allclose(arr(g), tg.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(arr(gg), tgg.numpy(), rtol=1e-8, atol=1e-14)
