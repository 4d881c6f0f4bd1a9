"""`jax_function` (JAX functions as jaxstream ops) and `to_jax` (jaxstream code as JAX)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import float32_normals

import jaxstream as js
from jaxstream.jax_interop import backward_trace, jax_function, to_jax

_array = float32_normals(seed=0)


def _leaf(array: np.ndarray, backend: str = "numpy", requires_grad: bool = True) -> js.Tensor:
    data = jnp.asarray(array) if backend == "jax" else array.copy()
    return js.tensor(data, requires_grad=requires_grad)


def _mlp(params: dict, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ params["w"] + params["b"]).sum()


def _count_dot_generals(text: str) -> int:
    return text.count("stablehlo.dot_general")


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_gradients_of_a_pytree_function_match_jax(backend: str) -> None:
    w, b, x = _array(3, 4), _array(4), _array(5, 3)
    params = {"w": _leaf(w, backend), "b": _leaf(b, backend)}
    loss = jax_function(_mlp)(params, _leaf(x, backend, requires_grad=False))
    loss.backward()
    expected = jax.grad(_mlp)({"w": w, "b": b}, x)
    np.testing.assert_allclose(loss.item(), _mlp({"w": w, "b": b}, x), rtol=1e-5)
    np.testing.assert_allclose(params["w"].grad.numpy(), expected["w"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params["b"].grad.numpy(), expected["b"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_outputs_and_gradients_keep_the_callers_backend(backend: str) -> None:
    x = _leaf(_array(2, 3), backend)
    y, z = jax_function(lambda a: (jnp.sin(a), {"cos": jnp.cos(a)}))(x)
    assert y.backend == backend and z["cos"].backend == backend
    (y.sum() + z["cos"].sum()).backward()
    assert x.grad.backend == backend
    np.testing.assert_allclose(
        x.grad.numpy(), np.cos(x.numpy()) - np.sin(x.numpy()), rtol=1e-5, atol=1e-6
    )


def test_third_derivative_matches_jax_grad() -> None:
    def f(x: jax.Array) -> jax.Array:
        return jnp.sin(x) * x**3

    x = _leaf(np.linspace(-1.5, 1.5, 7).astype(np.float32))
    y = jax_function(lambda a: f(a).sum())(x)
    (first,) = js.grad(y, x, create_graph=True)
    (second,) = js.grad(first.sum(), x, create_graph=True)
    (third,) = js.grad(second.sum(), x)
    expected = jax.vmap(jax.grad(jax.grad(jax.grad(f))))(jnp.asarray(x.numpy()))
    np.testing.assert_allclose(third.numpy(), expected, rtol=1e-4, atol=1e-4)
    assert second.grad_fn is not None and "JaxFunction" in second.grad_fn.name()


def test_second_derivative_through_two_inputs() -> None:
    a, b = _leaf(_array(3)), _leaf(_array(3))
    y = jax_function(lambda p, q: (p**2 * q).sum())(a, b)
    (ga,) = js.grad(y, a, create_graph=True)
    (gab,) = js.grad(ga.sum(), b)
    np.testing.assert_allclose(gab.numpy(), 2 * a.numpy(), rtol=1e-6)


def test_compiled_once_per_signature_and_grad_pattern() -> None:
    traces = []

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        traces.append(1)
        return (x * w).sum()

    jf = jax_function(f)
    x, w = _array(4), _array(4)
    for _ in range(3):
        jf(_leaf(x), _leaf(w)).backward()
    assert len(traces) == 1
    jf(_leaf(x), _leaf(w, requires_grad=False)).backward()
    assert len(traces) == 2
    jf(_leaf(_array(6)), _leaf(_array(6))).backward()
    assert len(traces) == 3


def test_inputs_without_grad_are_closed_over() -> None:
    x, w = _array(8, 16), _array(16, 4)
    jf = jax_function(lambda a, b: jnp.tanh(a @ b).sum())
    both = jf(_leaf(x), _leaf(w))
    only_x = jf(_leaf(x), _leaf(w, requires_grad=False))
    both_jaxpr = backward_trace(both.grad_fn).jaxpr
    only_x_jaxpr = backward_trace(only_x.grad_fn).jaxpr
    assert [(a.shape, a.dtype) for a in only_x_jaxpr.out_avals] == [((8, 16), np.float32)]
    assert len(both_jaxpr.out_avals) == 2
    dots = [e for e in only_x_jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 1


def test_backward_computes_only_the_gradients_the_engine_asks_for() -> None:
    x, w = _leaf(_array(8, 16)), _leaf(_array(16, 4))
    y = jax_function(lambda a, b: jnp.tanh(a @ b).sum())(x, w)
    (gx,) = js.grad(y, [x], retain_graph=True)
    assert y.grad_fn.needs_input_grad == (False, True, False)
    assert w.grad is None
    trimmed = backward_trace(y.grad_fn, y.grad_fn.needs_input_grad[1:])
    full = backward_trace(y.grad_fn)
    assert _count_dot_generals(trimmed.lower().as_text()) == 1
    assert _count_dot_generals(full.lower().as_text()) == 2
    # The user's `a @ b` ran on the cpu, in float32; unplaced, the expectation runs on JAX's
    # default device, a GPU's at TensorFloat32 unless asked for float32.
    with jax.default_matmul_precision("highest"):
        expected = jax.grad(lambda a: jnp.tanh(a @ w.numpy()).sum())(x.numpy())
    np.testing.assert_allclose(gx.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_eager_mode_matches_compiled() -> None:
    x = _array(5)
    grads = []
    for jit in (True, False):
        t = _leaf(x)
        jax_function(lambda a: (jnp.exp(a) * a).sum(), jit=jit)(t).backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_static_arguments_are_hashed_into_the_cache() -> None:
    jf = jax_function(lambda x, power: (x**power).sum(), static_argnums=1)
    x = _leaf(np.array([1.0, 2.0], np.float32))
    jf(x, 3).backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_keyword_arguments_and_constants() -> None:
    x = _leaf(_array(3))
    y = jax_function(lambda a, *, scale: (a * scale).sum())(x, scale=np.float32(2.0))
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_integer_outputs_are_not_differentiable() -> None:
    x = _leaf(_array(6))
    total, index = jax_function(lambda a: (jnp.sum(a**2), jnp.argmax(a)))(x)
    assert not index.requires_grad and total.requires_grad
    assert int(index.item()) == int(np.argmax(x.numpy()))
    total.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy(), rtol=1e-6)


def test_non_contiguous_numpy_input() -> None:
    base = _array(4, 6)
    view = base.T[::2]
    x = js.tensor(view, requires_grad=True)
    y = jax_function(lambda a: (a * jnp.arange(a.shape[1], dtype=a.dtype)).sum())(x)
    y.backward()
    np.testing.assert_allclose(y.item(), (view * np.arange(4)).sum(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(np.arange(4.0), (3, 4)))


def test_aligned_numpy_input_enters_jax_without_a_copy() -> None:
    buffer = np.zeros(64 + 16 * 4, np.uint8)
    start = (-buffer.ctypes.data) % 64
    array = buffer[start : start + 64].view(np.float32)
    array[:] = np.arange(16)
    seen = []

    def record(a: jax.Array) -> jax.Array:
        seen.append(a.unsafe_buffer_pointer())
        return a * 2

    out = jax_function(record, jit=False)(js.tensor(array))
    assert seen == [array.ctypes.data]
    np.testing.assert_array_equal(out.numpy(), np.arange(16) * 2)


def test_outputs_chain_into_another_jax_function() -> None:
    x = _leaf(_array(4))
    sin = jax_function(jnp.sin)
    y = jax_function(lambda a: (a**2).sum())(sin(x))
    y.backward()
    np.testing.assert_allclose(
        x.grad.numpy(), 2 * np.sin(x.numpy()) * np.cos(x.numpy()), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_name_names_the_node_and_its_double_backward(backend: str) -> None:
    data = _array(3)
    x = _leaf(data, backend)
    y = jax_function(lambda a: jnp.sin(a).sum(), name="Sine")(x)
    assert y.grad_fn.name() == "SineBackward"
    (g,) = js.grad(y, x, create_graph=True)
    assert g.grad_fn.name() == "SineBackwardBackward"
    (h,) = js.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), -np.sin(data), rtol=1e-5, atol=1e-6)


def test_unnamed_function_nodes_read_jax_function_backward() -> None:
    x = _leaf(_array(3))
    assert jax_function(lambda a: a.sum())(x).grad_fn.name() == "JaxFunctionBackward"


def test_second_backward_without_retain_graph_raises() -> None:
    x = _leaf(_array(3))
    y = jax_function(lambda a: jnp.sin(a).sum())(x)
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_no_node_when_nothing_requires_grad() -> None:
    y = jax_function(jnp.cos)(_leaf(_array(3), requires_grad=False))
    assert y.grad_fn is None and not y.requires_grad
    with js.no_grad():
        z = jax_function(jnp.cos)(_leaf(_array(3)))
    assert z.grad_fn is None


# ---------------------------------------------------------------- errors
def test_non_array_output_names_the_function() -> None:
    def returns_string(x: jax.Array) -> dict:
        return {"value": x.sum(), "label": "loss"}

    with pytest.raises(TypeError, match=r"returns_string.*output\['label'\] is a str"):
        jax_function(returns_string)(_leaf(_array(2)))


def test_unhashable_static_argument_names_the_function() -> None:
    def scaled(x: jax.Array, factors: list) -> jax.Array:
        return x * factors[0]

    with pytest.raises(TypeError, match=r"scaled.*static argument 1 is an unhashable list"):
        jax_function(scaled, static_argnums=1)(_leaf(_array(2)), [2.0])


def test_non_array_argument_suggests_static_argnums() -> None:
    with pytest.raises(TypeError, match=r"<lambda>'.*args\[1\] is a str.*static_argnums"):
        jax_function(lambda x, mode: x)(_leaf(_array(2)), "mean")


def test_integer_input_asked_for_a_gradient_names_the_function() -> None:
    def count(n: jax.Array) -> jax.Array:
        return n.sum()

    integers = js.tensor(np.arange(3, dtype=np.int32))
    integers._requires_grad = True  # what an op that forgets to mark an output produces
    with pytest.raises(TypeError, match=r"count.*args\[0\] is int32.*requires grad"):
        jax_function(count)(integers)
    with pytest.raises(RuntimeError, match="floating point"):
        js.tensor(np.arange(3), requires_grad=True)


def test_float64_input_asked_for_a_gradient_names_the_function() -> None:
    if jax.config.x64_enabled:
        pytest.skip("64-bit JAX is enabled in this process")
    with pytest.raises(TypeError, match=r"'double'.*float64.*jax_enable_x64"):
        jax_function(lambda x: x.sum(), name="double")(
            js.tensor(np.array([1.0, 2.0]), requires_grad=True)
        )


def test_tracer_leaking_into_the_tape_names_the_function() -> None:
    leaked = []

    @jax.jit
    def leak(a: jax.Array) -> jax.Array:
        leaked.append(js.tensor(a))
        return a

    leak(jnp.ones(3))

    def total(x: jax.Array) -> jax.Array:
        return x.sum()

    with pytest.raises(TypeError, match=r"total.*JAX tracer.*leaked.*to_jax"):
        jax_function(total)(leaked[0])


def test_tensors_of_several_backends_are_refused() -> None:
    with pytest.raises(ValueError, match="several backends"):
        jax_function(jnp.add)(_leaf(_array(2)), _leaf(_array(2), "jax"))


# ---------------------------------------------------------------- to_jax
def _jaxstream_loss(w: js.Tensor, x: js.Tensor) -> js.Tensor:
    return js.tanh(x @ w).sum() + (w * w).sum()


def _jax_loss(w: jax.Array, x: jax.Array) -> jax.Array:
    """`_jaxstream_loss` in JAX, its product at jaxstream's precision (PyTorch's "highest")."""
    return jnp.tanh(jnp.matmul(x, w, precision="highest")).sum() + (w * w).sum()


def test_to_jax_under_jit_grad_and_vmap() -> None:
    # Inputs of its own: drawn from the module's stream, they changed with the tests a -k
    # selection ran first, and some made a loss of 4e-4 out of terms near 1.
    draw = float32_normals(seed=1)
    fn = to_jax(_jaxstream_loss)
    w, x = jnp.asarray(draw(3, 2)), jnp.asarray(draw(4, 3))
    np.testing.assert_allclose(jax.jit(fn)(w, x), _jax_loss(w, x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        jax.jit(jax.grad(fn))(w, x), jax.grad(_jax_loss)(w, x), rtol=1e-5, atol=1e-6
    )
    xs = jnp.asarray(draw(5, 4, 3))
    np.testing.assert_allclose(
        jax.vmap(jax.grad(fn, argnums=1), in_axes=(None, 0))(w, xs),
        jax.vmap(jax.grad(_jax_loss, argnums=1), in_axes=(None, 0))(w, xs),
        rtol=1e-5,
        atol=1e-6,
    )


def test_to_jax_with_a_jax_function_inside() -> None:
    inner = jax_function(lambda a: jnp.sin(a) * a)

    def model(w: js.Tensor) -> js.Tensor:
        return inner(w).sum()

    w = jnp.asarray(_array(4))
    got = jax.jit(jax.grad(to_jax(model)))(w)
    np.testing.assert_allclose(got, jnp.cos(w) * w + jnp.sin(w), rtol=1e-5, atol=1e-6)


def test_to_jax_static_arguments() -> None:
    fn = to_jax(lambda w, power: (w**power).sum(), static_argnums=1)
    np.testing.assert_allclose(jax.grad(fn)(jnp.asarray([1.0, 2.0]), 3), [3.0, 12.0])


def test_to_jax_value_dependent_python_is_a_clear_error() -> None:
    def branchy(w: js.Tensor) -> js.Tensor:
        return w.sum() if w.sum().item() > 0 else -w.sum()

    with pytest.raises(TypeError, match=r"to_jax 'test_to_jax.*branchy'.*\.item\(\)"):
        jax.jit(to_jax(branchy))(jnp.ones(3))


def test_to_jax_non_array_output_is_a_clear_error() -> None:
    def labelled(w: js.Tensor) -> tuple:
        return w.sum(), "loss"

    with pytest.raises(TypeError, match=r"labelled.*output\[1\] is a str"):
        to_jax(labelled)(jnp.ones(3))


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_jax_function_on_sim_tensors_is_a_kernel_of_their_stream(backend: str) -> None:
    """On an accelerator the program reads its inputs on their stream (the current one, or
    XLA's for JAX tensors), so NumPy inputs made on a side stream must be waited for;
    results and gradients stay on the inputs' device."""
    sine_sum = jax_function(lambda a: jnp.sum(jnp.sin(a)))
    side = js.Stream("sim:0")
    with js.stream(side):
        x = js.tensor(_array(5), backend=backend, device="sim:0", requires_grad=True)
    if backend == "numpy":  # made on `side`, read on the current stream
        with pytest.raises(js.StreamRaceError, match="read-after-write"):
            sine_sum(x)
        js.current_stream("sim:0").wait_stream(side)
    # A JAX tensor is made on XLA's stream, whatever stream is current, and read there.
    loss = sine_sum(x)
    assert loss.device == "sim:0" and loss.backend == backend
    loss.backward()
    assert x.grad.device == "sim:0" and x.grad.backend == backend
    np.testing.assert_allclose(x.grad.numpy(), np.cos(x.numpy()), rtol=1e-6)
