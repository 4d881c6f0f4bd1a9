"""Autocast: its thread-local state, the jaxpr interpreter, and `config.backward_pass_autocast`."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import WAIT_S, float32_normals

import jaxstream as js
from jaxstream import amp, config
from jaxstream.jax_interop import autocast_function, backward_trace, jax_function

BF16 = np.dtype(jnp.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
_array = float32_normals(seed=0)


def _matmul_dtypes(closed: jax.extend.core.ClosedJaxpr) -> list[np.dtype]:
    """The operand dtype of every dot_general and convolution, sub-jaxprs included."""
    found = []

    def walk(jaxpr: jax.extend.core.Jaxpr) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in amp.CAST_PRIMITIVES:
                found.append(np.dtype(eqn.invars[0].aval.dtype))
            for value in eqn.params.values():
                for sub in value if isinstance(value, tuple) else (value,):
                    if isinstance(sub, jax.extend.core.ClosedJaxpr):
                        walk(sub.jaxpr)
                    elif isinstance(sub, jax.extend.core.Jaxpr):
                        walk(sub)

    walk(closed.jaxpr)
    return found


# ---------------------------------------------------------------- the autocast state
def test_autocast_is_nestable_and_can_be_disabled_inside() -> None:
    assert amp.current_dtype() is None
    with amp.autocast():
        assert amp.current_dtype() == BF16
        with amp.autocast("float16"):
            assert amp.current_dtype() == F16
            with amp.autocast(enabled=False):
                assert amp.current_dtype() is None and not amp.is_autocast_enabled()
            assert amp.current_dtype() == F16
        assert amp.current_dtype() == BF16
    assert amp.current_dtype() is None


def test_autocast_restores_the_state_after_an_error_and_decorates() -> None:
    with pytest.raises(ZeroDivisionError), amp.autocast("float16"):
        1 / 0  # noqa: B018
    assert amp.current_dtype() is None

    @amp.autocast(jnp.bfloat16)
    def inside() -> np.dtype | None:
        return amp.current_dtype()

    assert inside() == BF16 and amp.current_dtype() is None


def test_autocast_is_per_thread_and_the_state_can_be_carried() -> None:
    seen = {}
    with amp.autocast("float16"):
        carried = amp.current_dtype()

        def worker() -> None:
            seen["own"] = amp.current_dtype()
            amp.set_current_dtype(carried)
            seen["carried"] = amp.current_dtype()
            amp.set_current_dtype(None)
            seen["after"] = amp.current_dtype()

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(timeout=WAIT_S)
        assert not thread.is_alive()
    assert seen == {"own": None, "carried": F16, "after": None}


@pytest.mark.parametrize(
    ("dtype", "error", "message"),
    [("int32", ValueError, "floating dtype, got int32"), ("nonsense", TypeError, "not a dtype")],
)
def test_autocast_refuses_non_floating_dtypes(dtype: str, error: type, message: str) -> None:
    with pytest.raises(error, match=f"autocast: .*{message}"):
        amp.autocast(dtype)


# ---------------------------------------------------------------- config
def test_config_validates_backward_pass_autocast() -> None:
    with pytest.raises(ValueError, match="'sometimes' is not an option"):
        config.backward_pass_autocast = "sometimes"
    with pytest.raises(ValueError, match=r"unknown autocast kwargs \['device_type'\]"):
        config.backward_pass_autocast = {"device_type": "cuda"}
    with pytest.raises(ValueError, match="floating dtype, got int8"):
        config.backward_pass_autocast = {"dtype": "int8"}
    with pytest.raises(TypeError, match="got int"):
        config.backward_pass_autocast = 3
    with pytest.raises(AttributeError, match="no option 'backward_pass_autocst'"):
        config.backward_pass_autocst = "off"
    assert config.backward_pass_autocast == "same_as_forward"


def test_config_patch_restores_after_an_error() -> None:
    with pytest.raises(KeyError), config.patch(backward_pass_autocast="off"):
        assert config.backward_pass_autocast == "off"
        raise KeyError("boom")
    assert config.backward_pass_autocast == "same_as_forward"
    with pytest.raises(ValueError, match="not an option"), config.patch(backward_pass_autocast=""):
        pass


def test_config_assignment_sticks_until_reset() -> None:
    config.backward_pass_autocast = {"dtype": "float16"}
    try:
        assert config.backward_pass_autocast == {"dtype": "float16"}
    finally:
        config.backward_pass_autocast = "same_as_forward"


# ---------------------------------------------------------------- the jaxpr interpreter
def _nested(x: jax.Array, w: jax.Array) -> jax.Array:
    """Matmuls inside jit, scan, cond, while, remat and a custom_jvp function."""

    @jax.custom_jvp
    def smooth(a: jax.Array) -> jax.Array:
        return jnp.tanh(a @ w)

    smooth.defjvp(lambda p, t: (smooth(p[0]), (1 - smooth(p[0]) ** 2) * (t[0] @ w)))
    y = jax.jit(lambda a: a @ w)(x)
    y = jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), y, None, length=2)[0]
    y = jax.lax.cond(y.sum() > 0, lambda a: a @ w, lambda a: -(a @ w), y)
    y = jax.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, jnp.sin(c[1] @ w)), (0, y))[1]
    y = jax.checkpoint(lambda a: jnp.cos(a @ w))(y)
    return smooth(y)


def test_interpreter_casts_every_matmul_and_keeps_declared_dtypes() -> None:
    x, w = jnp.asarray(_array(4, 8)), jnp.asarray(_array(8, 8) / 3)
    plain = jax.make_jaxpr(_nested)(x, w)
    cast = jax.make_jaxpr(autocast_function(_nested, BF16))(x, w)
    assert set(_matmul_dtypes(plain)) == {F32}
    assert _matmul_dtypes(cast) and set(_matmul_dtypes(cast)) == {BF16}
    assert cast.out_avals == plain.out_avals
    got = jax.jit(autocast_function(_nested, BF16))(x, w)
    np.testing.assert_allclose(got, _nested(x, w), atol=0.1)


def test_interpreter_casts_convolutions() -> None:
    def conv(image: jax.Array, kernel: jax.Array) -> jax.Array:
        return jax.lax.conv(image, kernel, (1, 1), "SAME")

    image, kernel = jnp.asarray(_array(1, 2, 6, 6)), jnp.asarray(_array(3, 2, 3, 3))
    cast = jax.make_jaxpr(autocast_function(conv, F16))(image, kernel)
    assert _matmul_dtypes(cast) == [F16]
    got = autocast_function(conv, F16)(image, kernel)
    assert got.dtype == F32
    np.testing.assert_allclose(got, conv(image, kernel), atol=0.05)


def test_jax_function_forward_under_autocast() -> None:
    x, w = _array(4, 8), _array(8, 3)
    f = jax_function(lambda a, b: a @ b)
    with amp.autocast():
        y = f(js.tensor(jnp.asarray(x)), js.tensor(jnp.asarray(w)))
    assert y.dtype == F32
    # XLA may keep excess precision for bf16 intermediates (xla_allow_excess_precision),
    # so the result is within bf16 rounding of the bf16 product, not bit-equal to it.
    reference = np.asarray(jnp.asarray(x, BF16) @ jnp.asarray(w, BF16), dtype=np.float32)
    np.testing.assert_allclose(y.numpy(), reference, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- backward_pass_autocast
@jax.custom_vjp
def _precondition(x: jax.Array, m: jax.Array) -> jax.Array:
    """Identity forward; the backward multiplies the gradient by `m`: a backward-only matmul."""
    return x


_precondition.defvjp(lambda x, m: (x, m), lambda m, g: (g @ m, jnp.zeros_like(m)))


def _loss(x: jax.Array, w: jax.Array, m: jax.Array) -> jax.Array:
    return jnp.tanh(_precondition(x, m) @ w).sum()


def _backward_matmul_dtypes(option: object, forward_dtype: str | None) -> list[np.dtype]:
    x = js.tensor(jnp.asarray(_array(4, 8)), requires_grad=True)
    w = js.tensor(jnp.asarray(_array(8, 3)), requires_grad=True)
    m = js.tensor(jnp.asarray(_array(8, 8)))
    with config.patch(backward_pass_autocast=option):
        if forward_dtype is None:
            y = jax_function(_loss)(x, w, m)
        else:
            with amp.autocast(forward_dtype):
                y = jax_function(_loss)(x, w, m)
    dtypes = _matmul_dtypes(backward_trace(y.grad_fn).jaxpr)
    y.backward()
    assert x.grad.dtype == F32 and w.grad.dtype == F32
    return sorted(dtypes, key=str)


@pytest.mark.parametrize(
    ("option", "forward_dtype", "expected"),
    [
        # The transposes of the forward's bf16 matmuls stay bf16; the backward-only
        # matmul follows the option.
        ("same_as_forward", "bfloat16", [BF16, BF16, BF16]),
        ("off", "bfloat16", [BF16, BF16, F32]),
        ({"dtype": "float16"}, "bfloat16", [F16, F16, F16]),
        ("same_as_forward", None, [F32, F32, F32]),
        ({"dtype": "bfloat16"}, None, [BF16, BF16, BF16]),
        ({"dtype": "bfloat16", "enabled": False}, "float16", [F16, F16, F32]),
    ],
)
def test_backward_matmul_dtypes_under_each_option(
    option: object, forward_dtype: str | None, expected: list[np.dtype]
) -> None:
    assert _backward_matmul_dtypes(option, forward_dtype) == sorted(expected, key=str)


def test_autocast_around_backward_does_not_reach_a_jax_function() -> None:
    x, w, m = _array(4, 8), _array(8, 3), _array(8, 8)
    grads = []
    for region in (amp.autocast(enabled=False), amp.autocast("float16")):
        leaf = js.tensor(jnp.asarray(x), requires_grad=True)
        y = jax_function(_loss)(leaf, js.tensor(jnp.asarray(w)), js.tensor(jnp.asarray(m)))
        with region:
            y.backward()
        grads.append(leaf.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_eager_ops_backward_is_unaffected_by_the_option(backend: str) -> None:
    x, w = _array(4, 8), _array(8, 3)
    grads = []
    for option in ("same_as_forward", "off", {"dtype": "float16"}):
        a = js.tensor(x.copy(), requires_grad=True, backend=backend)
        b = js.tensor(w.copy(), requires_grad=True, backend=backend)
        with config.patch(backward_pass_autocast=option):
            with amp.autocast():
                y = js.matmul(a, b)
            y.sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    for other in grads[1:]:
        np.testing.assert_array_equal(other[0], grads[0][0])
        np.testing.assert_array_equal(other[1], grads[0][1])


def test_eager_matmul_computes_and_returns_the_autocast_dtype() -> None:
    a = js.tensor(jnp.asarray(_array(2, 3)), requires_grad=True)
    b = js.tensor(jnp.asarray(_array(3, 4)))
    with amp.autocast():
        y = js.matmul(a, b)
        z = js.linear(a, js.tensor(jnp.asarray(_array(5, 3))))
    assert y.dtype == BF16 and z.dtype == BF16
    y.sum().backward()
    assert a.grad.dtype == F32
