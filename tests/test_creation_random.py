"""Factories and the global generator: shapes, dtypes, values against torch, keys, threads."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream.backends import get_backend

# Few distinct shapes: JAX compiles a random draw once per shape.
SHAPES = st.lists(st.sampled_from([0, 1, 3]), min_size=0, max_size=2).map(tuple)
INT = np.dtype(np.int64)


def int_dtype(backend: str) -> np.dtype:
    """Python ints' dtype: int64, int32 on JAX without x64 (the one accepted difference)."""
    return np.dtype(np.int32) if backend == "jax" else INT


# ------------------------------------------------------------------ shapes
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("factory", [js.zeros, js.ones, js.rand, js.randn])
@settings(max_examples=10, deadline=None)
@given(shape=SHAPES)
def test_shape_as_varargs_or_tuple_or_list(factory, backend, shape):
    for t in (factory(*shape, backend=backend), factory(shape, backend=backend),
              factory(list(shape), backend=backend)):
        assert t.shape == shape and t.dtype == np.float32 and t.backend == backend


@pytest.mark.parametrize("bad, error", [((2.5,), TypeError), (("a",), TypeError),
                                        ((2, -1), ValueError)])
def test_a_bad_shape_names_the_factory(bad, error):
    with pytest.raises(error, match="zeros"):
        js.zeros(*bad)


def test_zeros_and_ones_values_and_explicit_dtype():
    np.testing.assert_array_equal(arr(js.zeros(2, 3)), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(arr(js.ones(4, dtype="int32")), np.ones(4, np.int32))
    assert js.zeros(2, dtype=np.float64).dtype == np.float64


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", [2.5, 7, True, -3])
def test_full_takes_its_dtype_from_the_value_as_torch(torch, backend, value):
    ours = js.full((2, 2), value, backend=backend)
    theirs = torch.full((2, 2), value)
    expected = np.dtype(str(theirs.dtype).removeprefix("torch.").replace("long", "int64"))
    assert ours.dtype == (int_dtype(backend) if expected == INT else expected)
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_like_factories_keep_the_shape_dtype_backend_and_device(backend):
    x = js.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), backend=backend, device="sim:1")
    for made in (js.zeros_like(x), js.ones_like(x), js.full_like(x, 4.0), js.rand_like(x),
                 js.randn_like(x)):
        assert (made.shape, made.dtype, made.backend, made.device) == (
            x.shape, x.dtype, backend, js.device("sim:1"))
    assert js.full_like(x, 4, dtype="int32").dtype == np.int32
    np.testing.assert_array_equal(arr(js.full_like(x, 4.0)), np.full((2, 3), 4.0, np.float32))


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n, m", [(3, None), (2, 4), (4, 2), (0, None)])
def test_eye_matches_torch(torch, backend, n, m):
    ours = js.eye(n, m, backend=backend)
    theirs = torch.eye(n) if m is None else torch.eye(n, m)
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [(5,), (2, 9, 3), (-3, 3), (5, 0, -2), (0, 1, 0.25),
                                  (1.5,), (0.0, 1.0, 0.1), (3, 3)])
def test_arange_matches_torch_in_values_and_dtype(torch, backend, args):
    ours = js.arange(*args, backend=backend)
    theirs = torch.arange(*args)
    if theirs.dtype == torch.int64:
        assert ours.dtype == int_dtype(backend)
    else:
        assert ours.dtype == np.float32
    np.testing.assert_allclose(arr(ours), theirs.numpy(), rtol=1e-6)


def test_arange_with_zero_step_raises():
    with pytest.raises(ValueError, match="step must be nonzero"):
        js.arange(0, 3, 0)


@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("start, stop, num", [(0, 1, 5), (-2.0, 3.0, 7), (1, 1, 3), (0, 1, 1),
                                              (0, 1, 0)])
def test_linspace_matches_torch_with_num_or_steps(torch, backend, start, stop, num):
    theirs = torch.linspace(start, stop, steps=num).numpy()
    for ours in (js.linspace(start, stop, num, backend=backend),
                 js.linspace(start, stop, steps=num, backend=backend)):
        assert ours.dtype == np.float32
        np.testing.assert_allclose(arr(ours), theirs, rtol=1e-6, atol=1e-7)


def test_linspace_needs_the_count_exactly_once():
    with pytest.raises(TypeError, match="num or as steps="):
        js.linspace(0, 1)
    with pytest.raises(TypeError, match="num or as steps="):
        js.linspace(0, 1, 3, steps=3)
    with pytest.raises(ValueError, match="non-negative"):
        js.linspace(0, 1, -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_factories_honour_requires_grad_dtype_and_sim_devices(backend):
    t = js.linspace(0, 1, 4, backend=backend, requires_grad=True, device="sim:0")
    assert t.requires_grad and t.is_leaf and t.device == js.device("sim:0")
    (t * t).sum().backward()
    np.testing.assert_allclose(arr(t.grad), 2 * arr(t), rtol=1e-6)
    assert js.eye(2, dtype="float16", backend=backend).dtype == np.float16
    with pytest.raises(RuntimeError, match="floating point"):
        js.arange(3, requires_grad=True)


# ------------------------------------------------------------------ the global generator
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("draw", [
    lambda b: js.rand(3, backend=b), lambda b: js.randn(3, backend=b),
    lambda b: js.randint(0, 1000, (3,), backend=b), lambda b: js.uniform(3, -1, 1, backend=b),
    lambda b: js.normal(2.0, 0.5, (3,), backend=b),
    lambda b: js.bernoulli(js.full((64,), 0.5, backend=b)),
])
def test_draws_are_fresh_each_call_and_reproducible_after_manual_seed(backend, draw):
    js.manual_seed(1234)
    first, second = arr(draw(backend)), arr(draw(backend))
    assert not np.array_equal(first, second)
    js.manual_seed(1234)
    np.testing.assert_array_equal(arr(draw(backend)), first)
    np.testing.assert_array_equal(arr(draw(backend)), second)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key", [7, 2**63 + 5, np.int64(7), jax.random.PRNGKey(3),
                                 jax.random.key(3)])
def test_a_key_makes_a_draw_pure_and_consumes_no_generator_state(backend, key):
    js.manual_seed(0)
    expected_next = arr(js.randn(4, backend=backend))
    js.manual_seed(0)
    a = js.randn(4, key=key, backend=backend)
    b = js.randn((4,), key, backend=backend)
    np.testing.assert_array_equal(arr(a), arr(b))
    np.testing.assert_array_equal(arr(js.randn(4, backend=backend)), expected_next)
    np.testing.assert_array_equal(arr(js.rand(4, key=key, backend=backend)),
                                  arr(js.rand(4, key=key, backend=backend)))


def test_different_int_keys_give_different_values_even_past_32_bits():
    """The high half of a 64-bit seed matters on JAX too (PRNGKey alone would drop it)."""
    low = arr(js.randn(4, key=5, backend="jax"))
    assert not np.array_equal(low, arr(js.randn(4, key=2**40 + 5, backend="jax")))
    assert not np.array_equal(arr(js.randn(4, key=5)), arr(js.randn(4, key=6)))


def test_an_int_key_on_jax_is_jax_prng_key_of_that_seed():
    np.testing.assert_array_equal(arr(js.randn(5, key=42, backend="jax")),
                                  np.asarray(jax.random.normal(jax.random.PRNGKey(42), (5,))))
    key = jax.random.PRNGKey(9)
    np.testing.assert_array_equal(arr(js.rand(3, key=key, backend="jax")),
                                  np.asarray(jax.random.uniform(key, (3,))))


def test_rng_state_replays_the_draws_that_follow():
    state = js.get_rng_state()
    first = arr(js.rand(5))
    js.set_rng_state(state)
    np.testing.assert_array_equal(arr(js.rand(5)), first)


def test_manual_seed_wraps_negative_seeds_and_refuses_non_ints():
    js.manual_seed(-1)
    assert js.initial_seed() == 2**64 - 1
    for bad in (1.5, "3", True, None):
        with pytest.raises(TypeError, match="seed must be an int"):
            js.manual_seed(bad)


@pytest.mark.parametrize("bad", [1.5, "key", [1, 2], True])
def test_a_bad_key_names_what_is_accepted(bad):
    with pytest.raises(TypeError, match="int seed, a JAX PRNG key or None"):
        js.randn(2, key=bad)


def test_threads_drawing_at_once_never_share_a_seed():
    js.manual_seed(5)
    seeds: list[int] = []
    lock = threading.Lock()

    def draw() -> None:
        mine = [js.ops.random.next_seed() for _ in range(200)]
        with lock:
            seeds.extend(mine)

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seeds)) == 800
    js.manual_seed(5)
    assert set(seeds) == {js.ops.random.next_seed() for _ in range(800)}


# ------------------------------------------------------------------ distributions
@pytest.mark.parametrize("backend", BACKENDS)
def test_distributions_have_the_right_range_and_moments(backend):
    js.manual_seed(3)
    u = arr(js.uniform(20000, -2.0, 3.0, backend=backend))
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.05
    n = arr(js.normal(1.0, 2.0, (20000,), backend=backend))
    assert abs(n.mean() - 1.0) < 0.06 and abs(n.std() - 2.0) < 0.06
    r = arr(js.randint(-3, 4, (20000,), backend=backend))
    assert set(np.unique(r)) == set(range(-3, 4))
    mask = arr(js.bernoulli(js.zeros(20000, backend=backend), 0.3))
    assert mask.dtype == np.float32 and set(np.unique(mask)) == {0.0, 1.0}
    assert abs(mask.mean() - 0.3) < 0.02


@pytest.mark.parametrize("backend", BACKENDS)
def test_randint_dtypes_and_the_high_only_spelling(backend):
    t = js.randint(10, (3, 2), backend=backend)
    assert t.shape == (3, 2) and t.dtype == int_dtype(backend)
    assert 0 <= arr(t).min() and arr(t).max() < 10
    assert js.randint(0, 5, 4, dtype="int32", backend=backend).dtype == np.int32
    with pytest.raises(ValueError, match="low < high"):
        js.randint(5, 5, (2,), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_draws_check_their_arguments(backend):
    with pytest.raises(TypeError, match="not a floating dtype"):
        js.randn(3, dtype="int32", backend=backend)
    with pytest.raises(RuntimeError, match=r"expects p to be in \[0, 1\], but got p=1.5"):
        js.bernoulli(js.zeros(3, backend=backend), 1.5)
    with pytest.raises(TypeError, match="key given twice"):
        js.rand((2,), 1, key=2, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_draws_take_dtype_device_and_requires_grad(backend):
    t = js.randn(2, 3, dtype="float16", backend=backend, device="sim:1", requires_grad=True)
    assert (t.dtype, t.device, t.requires_grad, t.is_leaf) == (
        np.float16, js.device("sim:1"), True, True)
    js.set_default_dtype("float64")
    try:
        assert js.rand(2).dtype == np.float64
    finally:
        js.set_default_dtype("float32")


def test_float64_draws_on_jax_without_x64_are_an_error():
    assert not jax.config.x64_enabled
    with pytest.raises(TypeError, match="jax_enable_x64"):
        js.randn(3, dtype="float64", backend="jax")
    with pytest.raises(TypeError, match="jax_enable_x64"):
        js.randint(0, 3, (2,), dtype="int64", backend="jax")
    assert jnp.asarray(js.rand(2, backend="jax").array).dtype == jnp.float32


def test_python_ints_take_the_widest_integer_the_backend_holds():
    numpy_backend, jax_backend = (get_backend(name) for name in ("numpy", "jax"))
    assert numpy_backend.holds_64bit_dtypes() and not jax_backend.holds_64bit_dtypes()
    assert js.full((2,), 7, backend="numpy").dtype == np.int64
    assert js.tensor([1, 2], backend="jax").dtype == jnp.int32
    assert js.arange(3, backend="jax").dtype == jnp.int32
    with jax.enable_x64(True):
        assert jax_backend.holds_64bit_dtypes()
        assert js.tensor([1, 2], backend="jax").dtype == jnp.int64
