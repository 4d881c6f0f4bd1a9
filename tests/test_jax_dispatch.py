"""The JAX backend's compiled kernels (Note [Compiled kernels on JAX] in ops/compiled_kernels.py):
the same values, dtypes, errors and gradients as the eager kernels, and a bounded cache."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr, jax_kernels_uncompiled
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dtypes import OP_CALLS, Inputs

import jaxstream as js
from jaxstream.ops import compiled_kernels
from jaxstream.ops.dispatch import apply
from jaxstream.ops.opdef import OpDef
from jaxstream.ops.rules import INDEX, INDEX_ADD, MUL

F32 = np.dtype("float32")


pytestmark = pytest.mark.usefixtures("fresh_compiled_caches")


def _run(call, kind):
    """The result's values and dtype, or the type of the error the call raised."""
    try:
        out = call(Inputs("jax", kind))
    except Exception as err:
        return type(err)
    return np.asarray(out.array), np.dtype(out.dtype)


@pytest.mark.parametrize("kind", ["float", "int"])
@pytest.mark.parametrize("name", sorted(OP_CALLS))
def test_compiled_kernels_give_the_eager_values_and_dtypes(name, kind):
    with jax_kernels_uncompiled():
        expected = _run(OP_CALLS[name], kind)
    for _ in range(2):  # compiled, then taken from the cache
        got = _run(OP_CALLS[name], kind)
        if isinstance(expected, type):
            assert got is expected, name
        else:
            assert got[1] == expected[1], name
            np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=1e-6, err_msg=name)


def test_the_table_compiled_something():
    x = js.tensor([1.0, 2.0], backend="jax")
    x * x
    assert callable(compiled_kernels._kernels[MUL])


@pytest.mark.parametrize(("data", "scalar", "dtype"), [
    ([1.0, 2.0], 2.0, F32), ([1, 2], 2.5, None), ([1, 2], 2, np.dtype("int32")),
    ([1.0, 2.0], 3, F32),
])
def test_python_scalars_stay_weak(data, scalar, dtype):
    x = js.tensor(np.asarray(data, np.float32 if isinstance(data[0], float) else np.int32),
                  backend="jax")
    for _ in range(3):
        out = x * scalar
    assert np.dtype(out.dtype) == (dtype or np.dtype(js.get_default_dtype()))
    np.testing.assert_allclose(arr(out), np.asarray(data) * scalar, rtol=1e-6)


def test_a_new_scalar_value_reuses_the_executable():
    x = js.tensor([1.0, 2.0], backend="jax")
    for factor in (1.5, 2.5, 3.5, 4.5):
        out = x * factor
    np.testing.assert_allclose(arr(out), [4.5, 9.0])
    assert compiled_kernels._kernels[MUL]._cache_size() == 1


def test_repeated_calls_with_the_same_params_do_not_grow_the_cache():
    x = js.tensor(np.ones((2, 3), np.float32), backend="jax")
    js.sum(x, axis=1)
    size = compiled_kernels.cache_size()
    for _ in range(20):
        js.sum(x, axis=1)
    assert compiled_kernels.cache_size() == size


def test_the_cache_keeps_at_most_its_limit(monkeypatch):
    monkeypatch.setattr(compiled_kernels, "CACHE_LIMIT", 5)
    x = js.tensor(np.arange(6.0, dtype=np.float32), backend="jax")
    for low in range(12):
        assert arr(js.clip(x, low, None)).min() == low
    assert compiled_kernels.cache_size() <= 5


def test_params_of_different_types_never_share_a_kernel():
    assert compiled_kernels.compile_key(MUL, {"v": 1}) != compiled_kernels.compile_key(
        MUL, {"v": 1.0}
    )


def test_unhashable_params_and_backend_kernels_run_eagerly():
    index = (js.tensor([1, 0], backend="jax").array,)
    assert compiled_kernels.compile_key(INDEX, {"index": index}) is None
    assert compiled_kernels.compile_key(INDEX_ADD, {"index": 0, "shape": (2,)}) is None


def test_an_op_without_params_is_its_own_key_unless_compile_key_refuses_it():
    """`run` looks an op without params up by itself; one that `compile_key` refuses (its
    kernel takes the backend) is never stored there and runs eagerly every time."""
    seen = []

    def kernel(backend, a):
        seen.append(type(a))
        return backend.xp.negative(a)

    negated = OpDef("negated_by_backend", None, kernel, backend_kernel=True)
    x = js.tensor([1.0, -2.0], backend="jax")
    for _ in range(3):
        np.testing.assert_allclose(arr(apply(negated, x)), [-1.0, 2.0])
    assert compiled_kernels.compile_key(negated, {}) is None
    assert negated not in compiled_kernels._kernels
    assert len(seen) == 3 and all(issubclass(t, jax.Array) for t in seen)  # never traced
    apply(MUL, x, 2.0)
    assert callable(compiled_kernels._kernels[MUL])


def test_a_loop_over_slices_compiles_nothing_per_slice():
    """An index is per-call data: `x[i]` for every `i` must not compile a kernel per `i`."""
    x = js.tensor(np.arange(40.0, dtype=np.float32).reshape(20, 2), backend="jax")
    x[0], x[0:2]  # noqa: B018
    size = compiled_kernels.cache_size()
    rows = [x[i] for i in range(20)] + [x[i : i + 3] for i in range(10)]
    assert compiled_kernels.cache_size() == size
    np.testing.assert_allclose(arr(rows[7]), [14.0, 15.0])
    assert compiled_kernels.compile_key(INDEX, {"index": (slice(0, 2),)}) is None


def test_an_integer_array_index_falls_back_and_is_right():
    x = js.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2), backend="jax",
                  requires_grad=True)
    for _ in range(2):
        y = x[js.tensor([2, 0, 2])]
        (g,) = js.grad((y * y).sum(), [x])
    np.testing.assert_allclose(arr(y), [[4, 5], [0, 1], [4, 5]])
    np.testing.assert_allclose(arr(g), [[0, 2], [0, 0], [16, 20]])
    assert compiled_kernels.cache_size() > 0  # the other ops of the step were cached


def test_a_kernel_that_reads_the_host_falls_back_for_good():
    scaled = OpDef("scaled_by_total", None, lambda xp, a: a * float(a.sum()))
    x = js.tensor([1.0, 2.0], backend="jax")
    for _ in range(3):
        np.testing.assert_allclose(arr(apply(scaled, x)), [3.0, 6.0])
    assert compiled_kernels._kernels[scaled] == "eager"


def test_errors_are_the_eager_errors():
    a = js.tensor(np.ones((2, 3), np.float32), backend="jax")
    b = js.tensor(np.ones((4,), np.float32), backend="jax")
    messages = []
    for run_eagerly in (True, False, False):
        with pytest.raises(Exception) as caught:
            if run_eagerly:
                with jax_kernels_uncompiled():
                    a + b
            else:
                a + b
        messages.append((type(caught.value), str(caught.value)))
    assert messages[0] == messages[1] == messages[2]
    assert callable(compiled_kernels._kernels[js.ops.rules.ADD])  # compiled, not marked eager


def _js_loss(x):
    return (js.tanh(x * 1.5) * js.exp(-x) + js.sigmoid(x) ** 2).sum()


def _jax_loss(x):
    return jnp.sum(jnp.tanh(x * 1.5) * jnp.exp(-x) + jax.nn.sigmoid(x) ** 2)


# Three shapes (a one-element, a vector and a matrix): each new shape compiles every kernel
# of the loss and its two backward passes again, and the values are what varies.
@settings(max_examples=8, deadline=None)
@given(shape=st.sampled_from([(1,), (3,), (2, 3)]), seed=st.integers(0, 2**16))
def test_grads_through_compiled_kernels_match_jax(shape, seed):
    values = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    x = js.tensor(values, backend="jax", requires_grad=True)
    for _ in range(2):
        (g,) = js.grad(_js_loss(x), [x], create_graph=True)
        (h,) = js.grad(g.sum(), [x])
    np.testing.assert_allclose(arr(g), jax.grad(_jax_loss)(values), rtol=1e-5, atol=1e-6)
    hessian_rows = jax.grad(lambda v: jnp.sum(jax.grad(_jax_loss)(v)))(values)
    np.testing.assert_allclose(arr(h), hessian_rows, rtol=1e-4, atol=1e-5)


def test_compiled_kernels_run_under_a_jax_trace():
    values = jnp.asarray([0.5, -1.0, 2.0], dtype=jnp.float32)
    fn = js.to_jax(_js_loss)
    np.testing.assert_allclose(jax.jit(jax.grad(fn))(values), jax.grad(_jax_loss)(values),
                               rtol=1e-5)
    assert compiled_kernels.cache_size() > 0
