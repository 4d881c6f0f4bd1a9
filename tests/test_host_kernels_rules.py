"""The products' rules on the host: linear's bias added into the product's own array, and
the array twins of matmul's and linear's vjps (Note [Product vjps on the host] in
ops/linalg_rules.py), each against the rules run op by op and against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ops_passed_to

import jaxstream as js
from jaxstream.ops import linalg_rules as L
from jaxstream.ops import opdef

_RNG = np.random.default_rng(11)


def _normal(shape: tuple) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


def _grads(fn, inputs: list, needs: tuple, create_graph: bool, weighted: bool) -> list:
    leaves = [js.tensor(x, requires_grad=need) for x, need in zip(inputs, needs, strict=True)]
    out = fn(*leaves)
    loss = (out * js.tensor(_normal(out.shape))).sum() if weighted else out.sum()
    wanted = [t for t in leaves if t.requires_grad]
    return [g.numpy() for g in js.grad(loss, wanted, create_graph=create_graph)]


def _torch_grads(torch, fn, inputs: list, needs: tuple, weights) -> list:
    leaves = [torch.tensor(x, requires_grad=need) for x, need in zip(inputs, needs, strict=True)]
    out = fn(*leaves)
    loss = (out * torch.from_numpy(weights)).sum() if weights is not None else out.sum()
    wanted = [t for t in leaves if t.requires_grad]
    return [g.numpy() for g in torch.autograd.grad(loss, wanted)]


def _check(torch, monkeypatch, js_fn, torch_fn, inputs: list, needs: tuple, weighted: bool):
    """Twins (no graph) against the rules (create_graph) and against PyTorch."""
    state = _RNG.bit_generator.state
    by_rules = _grads(js_fn, inputs, needs, create_graph=True, weighted=weighted)
    _RNG.bit_generator.state = state
    seen = ops_passed_to(monkeypatch, "rules_of", opdef)  # the rules run op by op
    by_twins = _grads(js_fn, inputs, needs, create_graph=False, weighted=weighted)
    assert not {"matmul", "linear"} & set(seen), "a product's rules ran, not its twins"
    _RNG.bit_generator.state = state
    out_shape = np.shape(torch_fn(*(torch.from_numpy(x) for x in inputs)))
    weights = _normal(out_shape) if weighted else None
    by_torch = _torch_grads(torch, torch_fn, inputs, needs, weights)
    wanted = [x for x, need in zip(inputs, needs, strict=True) if need]
    for twin, rule, want, leaf in zip(by_twins, by_rules, by_torch, wanted, strict=True):
        assert twin.shape == rule.shape == np.shape(leaf) and twin.dtype == np.float32
        np.testing.assert_array_equal(twin, rule)
        np.testing.assert_allclose(twin, want, rtol=1e-5, atol=1e-5)


_MATMUL_SHAPES = [
    ((3,), (3,)), ((3,), (3, 2)), ((4, 3), (3,)), ((4, 3), (3, 2)), ((2, 4, 3), (3, 2)),
    ((3,), (2, 3, 4)), ((2, 4, 3), (3,)), ((2, 1, 4, 3), (5, 3, 2)), ((4, 3), (2, 3, 2)),
    ((6, 1), (1, 5)),
]
_NEEDS = [(True, True), (True, False), (False, True)]


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "summed"])
@pytest.mark.parametrize("needs", _NEEDS, ids=str)
@pytest.mark.parametrize("shapes", _MATMUL_SHAPES, ids=str)
def test_matmul_twins_match_the_rules_and_pytorch(torch, monkeypatch, shapes, needs, weighted):
    inputs = [_normal(s) for s in shapes]
    _check(torch, monkeypatch, lambda a, b: a @ b, lambda a, b: a @ b, inputs, needs, weighted)


_LINEAR_SHAPES = [(5, 3), (3,), (2, 5, 3), (7, 1)]


_LINEAR_NEEDS = [(True, True, True), (True, False, False), (False, True, True),
                 (False, False, True), (True, True), (False, True)]
"""Which of x, w and the bias require grad (two: no bias)."""


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "summed"])
@pytest.mark.parametrize("bias", [(4,), (1,)], ids=str)
@pytest.mark.parametrize("needs", _LINEAR_NEEDS, ids=str)
@pytest.mark.parametrize("x_shape", _LINEAR_SHAPES, ids=str)
def test_linear_twins_match_the_rules_and_pytorch(torch, monkeypatch, x_shape, needs, bias,
                                                  weighted):
    inputs = [_normal(x_shape), _normal((4, x_shape[-1])), _normal(bias)][: len(needs)]
    _check(torch, monkeypatch, js.linear, torch.nn.functional.linear, inputs, needs, weighted)


@pytest.mark.parametrize("bias", [(4,), (1,), None], ids=str)
@pytest.mark.parametrize("x_shape", [(5, 3), (3,), (2, 5, 3)], ids=str)
@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_linear_adds_its_bias_into_the_product(torch, backend, x_shape, bias) -> None:
    x, w = _normal(x_shape), _normal((4, 3))
    b = None if bias is None else _normal(bias)
    before = [a.copy() for a in (x, w, b) if a is not None]
    args = [js.tensor(a, backend=backend) for a in (x, w, b) if a is not None]
    got = js.linear(*args).numpy()
    want = torch.nn.functional.linear(*(torch.from_numpy(a) for a in (x, w, b)
                                        if a is not None)).numpy()
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for now, then in zip((a for a in (x, w, b) if a is not None), before, strict=True):
        np.testing.assert_array_equal(now, then)


def test_the_host_linear_kernel_writes_only_the_products_array() -> None:
    """The bias goes into the product's new array; where it would broadcast the product
    or promote it, the kernel adds into a new one, as before."""
    x, w = _normal((5, 3)), _normal((4, 3))
    for b in (_normal((4,)), _normal((1,)), _normal((5, 4)), _normal((4,)).astype(np.float64)):
        kept = b.copy()
        got = L._linear(js.backends.get_backend("numpy").xp, x, w, b)
        assert got.dtype == np.result_type(x, b)
        np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(b, kept)
    np.testing.assert_allclose(L._linear(np, _normal((3,)), w, np.float32(2.0)).shape, (4,))


def test_a_second_order_grad_through_linear_matches_pytorch(torch) -> None:
    """The hessian workload's shape in small: grad of grad through linear and tanh, whose
    second backward runs the twins of the first backward's products."""
    x0, w0, b0, v0 = _normal((6, 3)), _normal((4, 3)), _normal((4,)), _normal((1, 4))

    def run(lib, tensor):
        x = tensor(x0, requires_grad=True)
        w, b, v = tensor(w0), tensor(b0), tensor(v0)
        y = lib.nn.functional.linear(lib.tanh(lib.nn.functional.linear(x, w, b)), v)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = lib.autograd.grad(g.sum(), x)
        return h.detach().numpy() if lib is torch else h.numpy()

    np.testing.assert_allclose(run(js, js.tensor), run(torch, torch.tensor), rtol=1e-5,
                               atol=1e-6)
