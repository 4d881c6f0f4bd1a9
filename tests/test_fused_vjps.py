"""The one-kernel twins of vjps: fused (Note [Fused vjps without create_graph]) and on the
host's arrays (Note [Array vjps on the host]), both in ops/twins.py.

Without create_graph a vjp's gradient comes from one kernel: on the host an array twin
called with no op dispatched, elsewhere a fused op; with create_graph the same rule runs
op by op and records PyTorch's double-backward graph. Each case here checks every way
against the others and against jax.grad, on both backends and on a simulated
accelerator (where the rules dispatch their ops), and that each way is taken where it
should be.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ops_passed_to

import jaxstream as js
from jaxstream.ops import rules as R
from jaxstream.ops import twins
from jaxstream.ops.opdef import PASS_THROUGH, OpDef

_X = np.array([-1.5, -0.25, 0.5, 2.0], np.float32)
_Y = np.array([0.75, -0.25, 1.5, 2.0], np.float32)  # ties _X at index 3 (maximum's rule)
_POSITIVE = np.abs(_X) + 0.5

# name -> (jaxstream fn of the inputs, the same in JAX, inputs)
CASES: dict[str, tuple[Callable, Callable, tuple[np.ndarray, ...]]] = {
    "sin": (js.sin, jnp.sin, (_X,)),
    "cos": (js.cos, jnp.cos, (_X,)),
    "relu": (js.relu, jax.nn.relu, (_X,)),
    "sqrt": (js.sqrt, jnp.sqrt, (_POSITIVE,)),
    "abs": (js.abs, jnp.abs, (_X,)),
    "log1p": (js.log1p, jnp.log1p, (_POSITIVE,)),
    "softplus": (js.softplus, jax.nn.softplus, (_X,)),
    "silu": (js.silu, jax.nn.silu, (_X,)),
    "erf": (js.erf, jax.scipy.special.erf, (_X,)),
    "div": (lambda a, b: a / b, jnp.divide, (_X, _POSITIVE)),
    "pow": (lambda a, b: a**b, jnp.power, (_POSITIVE, _Y)),
    "pow_scalar": (lambda a: a**3, lambda a: a**3, (_X,)),
    "maximum": (js.maximum, jnp.maximum, (_X, _Y)),
    "minimum": (js.minimum, jnp.minimum, (_X, _Y)),
    "add": (lambda a, b: a + b, jnp.add, (_X, _Y)),
    "sub": (lambda a, b: a - b, jnp.subtract, (_X, _Y)),
    "mul": (lambda a, b: a * b, jnp.multiply, (_X, _Y)),
    "mul_scalar": (lambda a: a * 0.5, lambda a: a * 0.5, (_X,)),
    "neg": (lambda a: -a, jnp.negative, (_X,)),
    "tanh": (js.tanh, jnp.tanh, (_X,)),
    "sigmoid": (js.sigmoid, jax.nn.sigmoid, (_X,)),
    "exp": (js.exp, jnp.exp, (_X,)),
    "expm1": (js.expm1, jnp.expm1, (_X,)),
    "log": (js.log, jnp.log, (_POSITIVE,)),
    "square": (js.square, jnp.square, (_X,)),
    "where": (lambda a, b: js.where(b > 0, a, b), lambda a, b: jnp.where(b > 0, a, b), (_X, _Y)),
    "zero_": (lambda a: (a * 1.0).zero_() + a, lambda a: a, (_X,)),
    "clone_astype": (lambda a: a.clone().astype(np.float16), lambda a: a.astype(np.float16), (_X,)),
}
# Where the gradients without create_graph come from: the array twins on the host, the
# compiled rules on JAX, the dispatched fused ops on a simulated accelerator.
PLACES = [("numpy", None), ("jax", None), ("numpy", "sim:0")]


def _jax_grads(jax_fn: Callable, inputs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    # maximum/minimum: jax.grad splits ties evenly too, as PyTorch and jaxstream do.
    loss = lambda *xs: jnp.sum(jax_fn(*xs) * jnp.arange(1.0, 5.0))
    grads = jax.grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    return [np.asarray(g) for g in grads]


def _grads(
    fn: Callable, inputs: tuple, backend: str, create_graph: bool, device: str | None = None
) -> list[np.ndarray]:
    leaves = [js.tensor(x, backend=backend, device=device, requires_grad=True) for x in inputs]
    weights = js.tensor(np.arange(1.0, 5.0, dtype=np.float32), backend=backend, device=device)
    loss = (fn(*leaves) * weights).sum()
    grads = js.autograd.grad(loss, leaves, create_graph=create_graph)
    return [np.asarray(g.numpy()) for g in grads]


@pytest.mark.parametrize(("backend", "device"), PLACES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_kernel_and_composite_agree_with_jax(name: str, backend: str, device: str) -> None:
    fn, jax_fn, inputs = CASES[name]
    expected = _jax_grads(jax_fn, inputs)
    fused = _grads(fn, inputs, backend, create_graph=False, device=device)
    composite = _grads(fn, inputs, backend, create_graph=True, device=device)
    for got_fused, got_composite, want in zip(fused, composite, expected, strict=True):
        assert got_fused.dtype == np.float32
        np.testing.assert_allclose(got_fused, want, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got_fused, got_composite, rtol=2e-6, atol=1e-6)


_MATRIX = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4)
_ROW = np.array([0.5, -1.0, 1.5, 2.0], np.float32)
BROADCAST_CASES = {
    "div": (lambda a, b: a / b, jnp.divide, (_MATRIX, np.abs(_ROW) + 0.5)),
    "pow": (lambda a, b: a**b, jnp.power, (np.abs(_MATRIX) + 0.5, _ROW)),
    "maximum": (js.maximum, jnp.maximum, (_MATRIX, _ROW)),
    "minimum": (js.minimum, jnp.minimum, (_ROW, _MATRIX)),
    "mul": (lambda a, b: a * b, jnp.multiply, (_MATRIX, _ROW)),
    "sub": (lambda a, b: a - b, jnp.subtract, (_ROW, _MATRIX)),
}


@pytest.mark.parametrize(("backend", "device"), PLACES)
@pytest.mark.parametrize("name", sorted(BROADCAST_CASES))
def test_a_broadcast_operand_gets_its_own_shape_from_the_one_kernel(name, backend, device):
    fn, jax_fn, inputs = BROADCAST_CASES[name]
    leaves = [js.tensor(x, backend=backend, device=device, requires_grad=True) for x in inputs]
    fn(*leaves).sum().backward()
    expected = jax.grad(lambda *xs: jnp.sum(jax_fn(*xs)), argnums=(0, 1))(*inputs)
    for t, want in zip(leaves, expected, strict=True):
        assert t.grad.shape == want.shape
        np.testing.assert_allclose(t.grad.numpy(), np.asarray(want), rtol=2e-6, atol=1e-6)


def _applied_ops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the ops the rules apply themselves (fused twins among them)."""
    return ops_passed_to(monkeypatch, "apply", R, twins)  # the rules' own ops, the twins'


@pytest.mark.parametrize(("backend", "device"), PLACES)
@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_second_order_twins_agree_with_jax(activation: str, backend: str, device: str) -> None:
    """The vjps of tanh's and sigmoid's backward ops (TanhBackwardBackward0, ...), taken by a
    backward without create_graph through a first gradient taken with it."""
    fn, jax_fn = getattr(js, activation), {"tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}[activation]
    weights = np.arange(1.0, 5.0, dtype=np.float32)
    x = js.tensor(_X, backend=backend, device=device, requires_grad=True)
    w = js.tensor(weights, backend=backend, device=device, requires_grad=True)
    (gx,) = js.autograd.grad((fn(x) * w).sum(), [x], create_graph=True)
    (gx * gx).sum().backward()  # reaches both inputs of the backward op: g (from w) and y
    first = lambda xs, ws: jax.grad(lambda v: jnp.sum(jax_fn(v) * ws))(xs)
    want_x, want_w = jax.grad(lambda xs, ws: jnp.sum(first(xs, ws) ** 2), argnums=(0, 1))(
        _X, weights
    )
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(want_x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), np.asarray(want_w), rtol=1e-5, atol=1e-6)


def test_on_the_host_the_array_twins_run_and_no_rule_dispatches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _applied_ops(monkeypatch)
    x = js.tensor(_X, requires_grad=True)
    (js.cos(x) * x + x).sum().backward()  # cos, mul, and add's pass-through
    assert seen == []
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(_X) * _X + np.cos(_X) + 1, rtol=1e-6)


def test_on_an_accelerator_the_fused_kernel_is_dispatched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _applied_ops(monkeypatch)
    x = js.tensor(_X, device="sim:0", requires_grad=True)
    js.cos(x).sum().backward()
    assert seen == ["cos_backward"]
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(_X), rtol=1e-6)


def test_an_op_with_a_vjp_lacking_a_twin_runs_its_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    assert R.POW_SCALAR.array_vjps is None  # the exponent-zero test reads a value in Python
    seen = _applied_ops(monkeypatch)
    x = js.tensor(_X, requires_grad=True)
    (x**3).sum().backward()
    assert seen == ["pow_backward_a"]
    np.testing.assert_allclose(x.grad.numpy(), 3 * _X**2, rtol=1e-6)


def test_an_op_has_array_vjps_only_where_each_of_its_vjps_has_a_twin() -> None:
    plain = lambda g, ctx: g
    twinned = twins.with_array_twin(lambda xp, g, a: g * a)(lambda g, ctx: g * ctx.inputs[0])
    assert OpDef("t", "T", R.XP.sin, twinned, R.same).array_vjps == (
        twinned.array_twin,
        PASS_THROUGH,
    )
    assert OpDef("t", "T", R.XP.sin, twinned, None).array_vjps == (twinned.array_twin, None)
    assert OpDef("t", "T", R.XP.sin, twinned, plain).array_vjps is None
    assert OpDef("t", None, R.XP.sin).array_vjps is None


def test_an_operand_modified_in_place_still_raises_through_the_array_twin() -> None:
    x = js.tensor(_X, requires_grad=True)
    a = x * 1.0
    y = a * x  # saves a
    a.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*MulBackward0"):
        y.sum().backward()


@pytest.mark.parametrize(("backend", "device"), PLACES)
def test_gradients_of_one_input_add_up_and_record_under_create_graph(backend, device) -> None:
    x = js.tensor(_X, backend=backend, device=device, requires_grad=True)
    (x * 2.0 + x.tanh() + x * x).sum().backward()
    want = 2.0 + (1 - np.tanh(_X) ** 2) + 2 * _X
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)
    (gx,) = js.autograd.grad((x * x).sum(), [x], create_graph=True)  # g*x from each operand
    assert gx.grad_fn is not None and gx.grad_fn.name() == "AddBackward0"
    np.testing.assert_allclose(gx.numpy(), 2 * _X, rtol=1e-6)


def test_a_mixed_precision_product_gives_each_input_its_own_dtype() -> None:
    a = js.tensor(_X, requires_grad=True)
    b = js.tensor(_Y.astype(np.float64), requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.float64
    np.testing.assert_allclose(a.grad.numpy(), _Y, rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), _X.astype(np.float64), rtol=1e-6)


def test_with_create_graph_the_composite_records_pytorchs_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _applied_ops(monkeypatch)
    x = js.tensor(_X, requires_grad=True)
    (gx,) = js.autograd.grad(js.cos(x).sum(), [x], create_graph=True)
    assert "cos_backward" not in seen
    assert gx.grad_fn.name() == "MulBackward0"
    names = {fn.name() for fn, _ in gx.grad_fn.next_functions if fn is not None}
    assert "NegBackward0" in names
    (ggx,) = js.autograd.grad(gx.sum(), [x])
    np.testing.assert_allclose(ggx.numpy(), -np.cos(_X), rtol=1e-6)


def test_a_freed_graph_still_raises_through_the_fused_rule() -> None:
    x = js.tensor(_X, requires_grad=True)
    loss = js.cos(x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_host_select_is_where_bit_for_bit(dtype) -> None:
    rng = np.random.default_rng(0)
    g = rng.standard_normal((6, 5)).astype(dtype)
    g[0, :4] = [np.inf, -np.inf, np.nan, -1.0]
    keep = rng.random((6, 5)) > 0.5
    keep[0, :4] = [False, False, False, False]
    keep[1, :3] = True
    g[1, :3] = [np.nan, np.inf, -0.0]
    got = twins.kept_or_zero(np, keep, g)
    want = np.where(keep, g, np.zeros_like(g))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()  # NaNs, infinities and the sign of zero alike


def test_the_host_select_takes_a_zero_dimensional_array_without_warning() -> None:
    g = np.array(-2.5, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert twins.kept_or_zero(np, np.array(True), g) == -2.5
        got = twins.kept_or_zero(np, np.float32(1.0) <= 0, g)  # a NumPy scalar mask
    assert got == 0.0 and not np.signbit(got)


def test_the_host_select_falls_back_to_where_off_its_fast_case() -> None:
    g = np.arange(6, dtype=np.int64).reshape(2, 3)  # not a float: no bit mask
    np.testing.assert_array_equal(twins.kept_or_zero(np, g > 2, g), [[0, 0, 0], [3, 4, 5]])
    row = np.array([True, False, True])  # broadcast against g: where itself
    gf = g.astype(np.float32)
    np.testing.assert_array_equal(twins.kept_or_zero(np, row, gf), np.where(row, gf, 0))
    weights = np.array([[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]])  # not booleans: nonzero keeps
    np.testing.assert_array_equal(twins.kept_or_zero(np, weights, gf), [[0, 0, 2], [0, 4, 0]])


def test_relus_host_twin_drops_infinite_gradients_to_positive_zero() -> None:
    x = js.tensor(np.array([-1.0, -2.0, 0.0, 3.0], np.float32), requires_grad=True)
    g = js.tensor(np.array([np.inf, -5.0, np.nan, -np.inf], np.float32))
    js.relu(x).backward(g)
    got = x.grad.numpy()
    np.testing.assert_array_equal(got[:3], [0.0, 0.0, 0.0])
    assert not np.signbit(got[:3]).any()  # +0.0, as PyTorch's threshold_backward gives
    assert got[3] == -np.inf


def test_relus_host_twin_takes_a_broadcast_gradient() -> None:
    x = js.tensor(np.array([[-1.0, 2.0, 0.0], [3.0, -4.0, 5.0]], np.float32), requires_grad=True)
    js.relu(x).sum().backward()  # sum's backward hands relu a read-only broadcast view
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])


def test_fused_rules_keep_relus_nan_behaviour() -> None:
    x = js.tensor(np.array([np.nan, -1.0, 1.0], np.float32), requires_grad=True)
    js.relu(x).sum().backward()
    got = x.grad.numpy()
    assert got[0] == 1.0  # NaN passes g through, as in PyTorch
    np.testing.assert_array_equal(got[1:], [0.0, 1.0])


@pytest.mark.oracle
@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_relus_double_backward_reaches_its_input_as_pytorchs_does(torch, backend) -> None:
    """relu's gradient, recorded, is PyTorch's threshold_backward of g and relu's output: a
    second grad through a ReLU network reaches the input (a zero through the select) where it
    used to find the input unused, and matches torch's through a layer that is not linear."""
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((4, 3), np.float32), rng.standard_normal((3, 3), np.float32)
    x = js.tensor(x0, backend=backend, requires_grad=True)
    w = js.tensor(w0, backend=backend, requires_grad=True)
    (g,) = js.autograd.grad(js.relu(x).sum(), [x], create_graph=True)
    assert g.grad_fn.name() == "ThresholdBackwardBackward0"
    (gg,) = js.autograd.grad(g.sum(), [x])
    np.testing.assert_array_equal(gg.numpy(), np.zeros_like(x0))
    (g,) = js.autograd.grad((js.relu(x @ w) @ w).tanh().sum(), [x], create_graph=True)
    ours = js.autograd.grad(g.sum(), [x, w])
    xt, wt = (torch.tensor(a, requires_grad=True) for a in (x0, w0))
    (gt,) = torch.autograd.grad((torch.relu(xt @ wt) @ wt).tanh().sum(), xt, create_graph=True)
    for got, want in zip(ours, torch.autograd.grad(gt.sum(), [xt, wt]), strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="second time"):
        js.autograd.grad(g.sum(), [x])
