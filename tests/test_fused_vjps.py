"""The fused twins of composite vjps (Note [Fused vjps without create_graph] in ops/rules.py).

Without create_graph a composite vjp's gradient comes from one kernel; with it, the
same rule runs op by op and records PyTorch's double-backward graph. Each case here
checks the two against each other and against jax.grad, on both backends, and that
each way is taken where it should be.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream as js
from jaxstream.ops import rules as R

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
}


def _jax_grads(jax_fn: Callable, inputs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    # maximum/minimum: jax.grad splits ties evenly too, as PyTorch and jaxstream do.
    loss = lambda *xs: jnp.sum(jax_fn(*xs) * jnp.arange(1.0, 5.0))
    grads = jax.grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    return [np.asarray(g) for g in grads]


def _grads(fn: Callable, inputs: tuple, backend: str, create_graph: bool) -> list[np.ndarray]:
    leaves = [js.tensor(x, backend=backend, requires_grad=True) for x in inputs]
    weights = js.tensor(np.arange(1.0, 5.0, dtype=np.float32), backend=backend)
    loss = (fn(*leaves) * weights).sum()
    grads = js.autograd.grad(loss, leaves, create_graph=create_graph)
    return [np.asarray(g.numpy()) for g in grads]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_and_composite_agree_with_jax(name: str, backend: str) -> None:
    fn, jax_fn, inputs = CASES[name]
    expected = _jax_grads(jax_fn, inputs)
    fused = _grads(fn, inputs, backend, create_graph=False)
    composite = _grads(fn, inputs, backend, create_graph=True)
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
}


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name", sorted(BROADCAST_CASES))
def test_a_broadcast_operand_gets_its_own_shape_from_the_fused_kernel(name, backend):
    fn, jax_fn, inputs = BROADCAST_CASES[name]
    leaves = [js.tensor(x, backend=backend, requires_grad=True) for x in inputs]
    fn(*leaves).sum().backward()
    expected = jax.grad(lambda *xs: jnp.sum(jax_fn(*xs)), argnums=(0, 1))(*inputs)
    for t, want in zip(leaves, expected, strict=True):
        assert t.grad.shape == want.shape
        np.testing.assert_allclose(t.grad.numpy(), np.asarray(want), rtol=2e-6, atol=1e-6)


def _applied_ops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the ops the rules apply themselves (fused twins among them)."""
    seen: list[str] = []
    real_apply = R.apply

    def counting(op, *args, **params):
        seen.append(op.name)
        return real_apply(op, *args, **params)

    monkeypatch.setattr(R, "apply", counting)
    return seen


def test_without_create_graph_the_fused_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _applied_ops(monkeypatch)
    x = js.tensor(_X, requires_grad=True)
    js.cos(x).sum().backward()
    assert seen == ["cos_backward"]
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(_X), rtol=1e-6)


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


def test_fused_rules_keep_relus_nan_behaviour() -> None:
    x = js.tensor(np.array([np.nan, -1.0, 1.0], np.float32), requires_grad=True)
    js.relu(x).sum().backward()
    got = x.grad.numpy()
    assert got[0] == 1.0  # NaN passes g through, as in PyTorch
    np.testing.assert_array_equal(got[1:], [0.0, 1.0])
