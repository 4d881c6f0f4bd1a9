"""The ``Node`` API: names, ``next_functions``, ``AccumulateGrad``, metadata,
``sequence_nr``, ``topological_nr`` and hooks on nodes, ported from PyTorch's
autograd test-suite.
"""

import numpy as np
from helpers import all_nodes, arr, leaf

import jaxstream as js


def test_node_names_and_next_functions():
    x = leaf([[1.0, 2.0]])
    w = leaf([[1.0], [2.0]])
    c = leaf([[3.0, 4.0]], requires_grad=False)
    y = x @ w
    acc_x, acc_w = (fn for fn, _ in y.grad_fn.next_functions)
    assert y.grad_fn.name() == "MmBackward0"
    assert y.grad_fn.next_functions == ((acc_x, 0), (acc_w, 0))
    assert acc_x.name() == "AccumulateGrad" and acc_x.variable is x
    assert acc_w.variable is w
    assert acc_x.next_functions == ()
    assert x.grad_fn is None
    scaled = x * 2.0
    assert scaled.grad_fn.name() == "MulBackward0"
    assert scaled.grad_fn.next_functions == ((acc_x, 0), (None, 0))
    assert (x * c).grad_fn.next_functions == ((acc_x, 0), (None, 0))
    assert (c * x).grad_fn.next_functions == ((None, 0), (acc_x, 0))


def test_accumulate_grad_is_one_per_leaf():
    x = leaf([1.0, 2.0])
    a = x * 2.0
    b = x.exp()
    acc = a.grad_fn.next_functions[0][0]
    assert b.grad_fn.next_functions[0][0] is acc
    assert acc.variable is x
    assert isinstance(acc, js.autograd.Node)


def test_node_metadata_is_a_persistent_dict():
    x = leaf([1.0, 2.0])
    node = (x * 2.0).grad_fn
    assert isinstance(node.metadata, dict) and node.metadata == {}
    node.metadata["tag"] = 7
    assert node.metadata is node.metadata
    assert node.metadata["tag"] == 7


def test_sequence_nr_follows_creation_order():
    x = leaf([1.0, 2.0])
    a = x * 2.0
    b = a.exp()
    c = a.sin()
    d = b + c
    nrs = [t.grad_fn.sequence_nr for t in (a, b, c, d)]
    assert nrs == sorted(nrs) and len(set(nrs)) == 4
    acc = a.grad_fn.next_functions[0][0]
    assert all(acc.sequence_nr > n for n in nrs)


def test_topological_nr():
    x = leaf([1.0, 2.0])
    acc = (x * 1.0).grad_fn.next_functions[0][0]
    a = x * 2.0
    b = a.exp().sin()
    d = b + x
    assert acc.topological_nr == 0
    assert a.grad_fn.topological_nr == 1
    assert b.grad_fn.topological_nr == 3
    assert d.grad_fn.topological_nr == 4
    for node in all_nodes(d.grad_fn):
        nexts = [fn.topological_nr for fn, _ in node.next_functions if fn is not None]
        assert node.topological_nr == (1 + max(nexts) if nexts else 0)


def test_node_hook_registration_on_accumulate_grad_prehook_sees_gradient():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_prehook(lambda go: seen.append(arr(go[0])))
    y.sum().backward()
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
