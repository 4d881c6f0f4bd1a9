"""`to_jax` on the losses people write (a `js.grad` inside) and its two modes, engine and native.

Every gradient is checked against the same loss written in pure JAX, whose products run in
float32 as jaxstream's do (Note [Float32 matrix products] in jaxstream/precision.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import float32_normals
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream.jax_interop import jax_function, to_jax

_array = float32_normals(seed=3)
MODES = ["engine", "native"]


def _params(n_in: int, hidden: int) -> dict:
    shapes = {"w1": (n_in, hidden), "b1": (hidden,), "w2": (hidden, 1)}
    return {k: jnp.asarray(_array(*shape)) for k, shape in shapes.items()}


def _assert_trees_close(got: object, want: object) -> None:
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


# The same MLP, loss, gradient penalty and physics residual in jaxstream and in JAX.
def _mlp(p: dict, x: js.Tensor) -> js.Tensor:
    return js.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]


def _jax_mlp(p: dict, x: jax.Array) -> jax.Array:
    """`_mlp` in JAX, its products in float32 as jaxstream's (PyTorch's "highest"): at JAX's
    default precision a GPU would round their inputs to TensorFloat32."""
    h = jnp.tanh(jnp.matmul(x, p["w1"], precision="highest") + p["b1"])
    return jnp.matmul(h, p["w2"], precision="highest")


def _loss(p: dict, x: js.Tensor) -> js.Tensor:
    return (_mlp(p, x) ** 2).mean()


def _jax_loss(p: dict, x: jax.Array) -> jax.Array:
    return (_jax_mlp(p, x) ** 2).mean()


def _gradient_penalty(p: dict, x: js.Tensor) -> js.Tensor:
    scores = _mlp(p, x)
    (grad_x,) = js.grad(scores.sum(), x, create_graph=True)
    norms = js.sqrt((grad_x * grad_x).sum(axis=1))
    return ((norms - 1.0) ** 2).mean() + scores.mean()


def _jax_gradient_penalty(p: dict, x: jax.Array) -> jax.Array:
    grad_x = jax.grad(lambda x: _jax_mlp(p, x).sum())(x)
    norms = jnp.sqrt((grad_x * grad_x).sum(axis=1))
    return ((norms - 1.0) ** 2).mean() + _jax_mlp(p, x).mean()


def _physics_residual(p: dict, x: js.Tensor) -> js.Tensor:
    """The residual of `u'' + u = 0` at points `x` of shape (n, 1), by nested `js.grad`."""
    u = _mlp(p, x)
    (u_x,) = js.grad(u.sum(), x, create_graph=True)
    (u_xx,) = js.grad(u_x.sum(), x, create_graph=True)
    return ((u_xx + u) ** 2).mean()


def _jax_physics_residual(p: dict, x: jax.Array) -> jax.Array:
    def u(point: jax.Array) -> jax.Array:
        return _jax_mlp(p, point.reshape(1, 1))[0, 0]

    u_xx = jax.vmap(jax.grad(jax.grad(u)))(x[:, 0])[:, None]
    return ((u_xx + _jax_mlp(p, x)) ** 2).mean()


LOSSES_WITH_A_GRAD_INSIDE = [
    pytest.param(_gradient_penalty, _jax_gradient_penalty, 3, id="gradient_penalty"),
    pytest.param(_physics_residual, _jax_physics_residual, 1, id="physics_residual"),
]


# ------------------------------------------------- a js.grad inside the loss
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("loss", "jax_loss", "n_in"), LOSSES_WITH_A_GRAD_INSIDE)
def test_loss_with_a_grad_inside_under_grad_jit_and_value_and_grad(
    mode: str, loss, jax_loss, n_in: int
) -> None:
    fn = to_jax(loss, mode=mode)
    p, x = _params(n_in, 5), jnp.asarray(_array(4, n_in))
    _assert_trees_close(jax.value_and_grad(fn)(p, x), jax.value_and_grad(jax_loss)(p, x))
    both = (0, 1)
    _assert_trees_close(
        jax.jit(jax.grad(fn, argnums=both))(p, x), jax.grad(jax_loss, argnums=both)(p, x)
    )


@pytest.mark.parametrize("mode", MODES)
def test_second_order_of_a_loss_with_a_grad_inside(mode: str) -> None:
    p, x = _params(3, 4), jnp.asarray(_array(2, 3))
    _assert_trees_close(
        jax.jit(jax.hessian(to_jax(_gradient_penalty, mode=mode)))(p, x),
        jax.jit(jax.hessian(_jax_gradient_penalty))(p, x),
    )


@settings(max_examples=6, deadline=None)
@given(
    batch=st.integers(1, 5),
    n_in=st.integers(1, 4),
    hidden=st.integers(1, 6),
    mode=st.sampled_from(MODES),
)
def test_gradient_penalty_matches_jax_over_shapes(
    batch: int, n_in: int, hidden: int, mode: str
) -> None:
    p, x = _params(n_in, hidden), jnp.asarray(_array(batch, n_in))
    # Jitted: one compilation per shape instead of one per op and shape.
    _assert_trees_close(
        jax.jit(jax.grad(to_jax(_gradient_penalty, mode=mode)))(p, x),
        jax.jit(jax.grad(_jax_gradient_penalty))(p, x),
    )


def test_inner_grad_on_an_integer_input_still_says_why() -> None:
    def count_penalty(w: js.Tensor, n: js.Tensor) -> js.Tensor:
        return js.grad((w * n).sum(), n)[0].sum()

    with pytest.raises(RuntimeError, match="does not require grad"):
        jax.grad(to_jax(count_penalty))(jnp.ones(2), jnp.arange(2))


# ------------------------------------------------- native mode: JAX's own AD
def test_native_mode_forward_mode_and_batching_match_jax() -> None:
    fn = to_jax(_loss, mode="native")
    p, x = _params(3, 5), jnp.asarray(_array(4, 3))
    tangents = (_params(3, 5), jnp.asarray(_array(4, 3)))
    _assert_trees_close(jax.jvp(fn, (p, x), tangents), jax.jvp(_jax_loss, (p, x), tangents))
    for transform in (jax.jacfwd, jax.hessian):
        _assert_trees_close(jax.jit(transform(fn))(p, x), jax.jit(transform(_jax_loss))(p, x))
    xs = jnp.asarray(_array(6, 4, 3))
    per_batch = jax.vmap(jax.grad(fn), in_axes=(None, 0))
    _assert_trees_close(per_batch(p, xs), jax.vmap(jax.grad(_jax_loss), in_axes=(None, 0))(p, xs))


def test_native_mode_batches_with_jax_rules_not_a_custom_vjp() -> None:
    p, x = _params(3, 2), jnp.asarray(_array(4, 3))
    native = str(jax.make_jaxpr(to_jax(_loss, mode="native"))(p, x))
    engine = str(jax.make_jaxpr(to_jax(_loss, mode="engine"))(p, x))
    assert "custom_vjp" not in native and "tanh" in native
    assert "custom_vjp" in engine


def test_engine_mode_gives_the_same_values_and_gradients() -> None:
    p, x = _params(3, 5), jnp.asarray(_array(4, 3))
    engine, native = to_jax(_loss), to_jax(_loss, mode="native")
    _assert_trees_close(jax.value_and_grad(engine)(p, x), jax.value_and_grad(native)(p, x))
    _assert_trees_close(jax.jit(jax.hessian(engine))(p, x), jax.hessian(_jax_loss)(p, x))


def test_forward_mode_through_engine_mode_says_to_use_native() -> None:
    fn = to_jax(_loss)
    p, x = _params(3, 2), jnp.asarray(_array(4, 3))
    with pytest.raises(TypeError, match=r"to_jax '_loss': forward-mode.*mode='native'"):
        jax.jvp(fn, (p, x), (p, x))
    with pytest.raises(TypeError, match=r"forward-mode.*mode='native'"):
        jax.jacfwd(fn)(p, x)


def test_native_mode_differentiates_a_jax_function_inside() -> None:
    sine = jax_function(jnp.sin, name="Sine")
    fn = to_jax(lambda x: sine(x) * x, mode="native")
    x = jnp.asarray(_array(3))
    np.testing.assert_allclose(
        jax.jacfwd(fn)(x), jnp.diag(jnp.cos(x) * x + jnp.sin(x)), rtol=1e-5, atol=1e-6
    )


def test_a_stop_gradient_jax_function_stops_both_modes() -> None:
    stop = jax_function(jax.lax.stop_gradient)
    x = jnp.asarray(_array(3))
    for mode in MODES:
        got = jax.grad(to_jax(lambda x: (x * stop(x)).sum(), mode=mode))(x)
        np.testing.assert_allclose(got, x, rtol=1e-6)


@pytest.mark.parametrize("transform", [jax.grad, jax.hessian], ids=["grad", "hessian"])
def test_detach_stops_the_gradient_in_both_modes(transform) -> None:
    x = jnp.asarray(_array(3))

    def loss(x: js.Tensor) -> js.Tensor:
        return (x * x.detach()).sum()

    native, engine = (transform(to_jax(loss, mode=mode))(x) for mode in MODES)
    np.testing.assert_allclose(native, engine, rtol=1e-6)
    # The gradient is x.detach(): a constant, so the Hessian is zero (as in PyTorch).
    want = x if transform is jax.grad else jnp.zeros((3, 3))
    np.testing.assert_allclose(native, want, rtol=1e-6)


class _TripleGradient(js.autograd.Function):
    """Identity forward, a backward that is not its derivative: what native mode cannot honour."""

    @staticmethod
    def forward(ctx, x: js.Tensor) -> js.Tensor:
        return x * 1.0

    @staticmethod
    def backward(ctx, grad: js.Tensor) -> js.Tensor:
        return grad * 3.0


def _through_custom_function(x: js.Tensor) -> js.Tensor:
    return _TripleGradient.apply(x).sum()


def _with_tensor_hook(x: js.Tensor) -> js.Tensor:
    y = x * 2.0
    y.register_hook(lambda g: g * 10.0)
    return y.sum()


def _with_leaf_hook(x: js.Tensor) -> js.Tensor:
    x.register_hook(lambda g: g * 10.0)
    return (x * 2.0).sum()


def _with_node_hook(x: js.Tensor) -> js.Tensor:
    y = x * 2.0
    y.grad_fn.register_prehook(lambda grads: (grads[0] * 10.0,))
    return y.sum()


HAND_WRITTEN_BACKWARDS = [
    pytest.param(_through_custom_function, 3.0, r"autograd\.Function.*_TripleGradientBackward"),
    pytest.param(_with_tensor_hook, 20.0, r"tensor hook.*MulBackward0"),
    pytest.param(_with_leaf_hook, 20.0, r"tensor hook.*AccumulateGrad"),
    pytest.param(_with_node_hook, 20.0, r"node hook.*MulBackward0"),
]


@pytest.mark.parametrize(("fn", "engine_grad", "_"), HAND_WRITTEN_BACKWARDS)
def test_engine_mode_runs_hand_written_backwards(fn, engine_grad: float, _: str) -> None:
    x = jnp.asarray(_array(3))
    np.testing.assert_allclose(jax.grad(to_jax(fn))(x), np.full(3, engine_grad))


@pytest.mark.parametrize(("fn", "_", "names"), HAND_WRITTEN_BACKWARDS)
def test_native_mode_refuses_what_jax_would_skip(fn, _: float, names: str) -> None:
    with pytest.raises(NotImplementedError, match=rf"mode='native'.*{names}.*mode='engine'"):
        jax.grad(to_jax(fn, mode="native"))(jnp.asarray(_array(3)))


def test_native_mode_allows_hooks_an_inner_grad_consumed() -> None:
    def penalty(x: js.Tensor) -> js.Tensor:
        y = x * x
        handle = y.register_hook(lambda g: g * 0.5)
        (g,) = js.grad(y.sum(), x, create_graph=True)
        handle.remove()
        return (g * g).sum()

    x = jnp.asarray(_array(3))
    # The hook halves the inner gradient: g = x, so d/dx sum(x^2) = 2x, in both modes.
    for mode in MODES:
        np.testing.assert_allclose(jax.grad(to_jax(penalty, mode=mode))(x), 2 * x, rtol=1e-6)


def test_mode_is_validated() -> None:
    with pytest.raises(ValueError, match=r"to_jax '_loss': mode must be one of.*'forward'"):
        to_jax(_loss, mode="forward")


def test_hessian_through_a_checkpoint_in_engine_mode_matches_jax() -> None:
    """The checkpoint's recomputation starts from aliases of its inputs, not `detach()`,
    so JAX differentiating the engine's backward still sees it depend on them."""

    def loss(x):
        y = js.checkpoint(lambda t: js.tanh(t) * t, x, use_reentrant=False)
        return (y**2).sum()

    x = jnp.array([0.3, -0.7, 1.1])
    expected = jax.hessian(lambda v: ((jnp.tanh(v) * v) ** 2).sum())(x)
    np.testing.assert_allclose(jax.hessian(js.to_jax(loss))(x), expected, rtol=1e-5, atol=1e-6)
