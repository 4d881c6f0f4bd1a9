"""Where draws take their keys: the generator's keys, keys given as tensors, nn.Dropout's key,
and to_jax functions that JAX traces, which take their keys from the caller or raise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.extend.random import threefry_2x32

import jaxstream as js
from jaxstream.randomness.generator import default_generator
from jaxstream.randomness.threefry import state_words, threefry2x32, traced_key

N = 64
WORDS = st.integers(0, 2**32 - 1)


# ---------------------------------------------------------------- the generator's keys
@settings(max_examples=20, deadline=None)
@given(key=st.tuples(WORDS, WORDS), counter=st.tuples(WORDS, WORDS))
def test_keys_are_threefry_2x32_of_the_count_under_the_seed(key, counter):
    ours = threefry2x32(tuple(np.array([k], np.uint32) for k in key),
                        tuple(np.array([c], np.uint32) for c in counter))
    theirs = threefry_2x32(np.array(key, np.uint32), np.array(counter, np.uint32))
    np.testing.assert_array_equal(np.concatenate(ours), np.asarray(theirs))


@pytest.mark.parametrize("seed, count", [(0, 0), (2**64 - 1, 5), (7, 2**32 - 2), (3, 2**40)])
def test_a_program_derives_the_keys_the_host_derives(seed, count):
    """Across the carry into the count's high word too."""
    keys = jax.jit(lambda s: jnp.stack([traced_key(s, n) for n in range(4)]))(
        state_words(seed, count))
    want = [default_generator.key((seed, count), n) for n in range(4)]
    assert [int(hi) << 32 | int(lo) for hi, lo in np.asarray(keys)] == want
    assert len(set(want)) == 4


def test_a_draw_without_a_key_on_jax_uses_the_generator_key_as_a_prng_key():
    js.manual_seed(5)
    key = default_generator.key((5, 0))
    np.testing.assert_array_equal(
        arr(js.rand(3, backend="jax")),
        np.asarray(jax.random.uniform(jnp.array([key >> 32, key & 0xFFFFFFFF], jnp.uint32), (3,))))


# ---------------------------------------------------------------- keys given as tensors
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("key, same_as", [
    (js.tensor(jax.random.key(3)), jax.random.key(3)),
    (js.tensor(jax.random.PRNGKey(3), backend="jax"), jax.random.PRNGKey(3)),
    (js.tensor(np.array([1, 2], np.uint32)), 2**32 + 2),
    (js.tensor(np.int64(9)), 9),
])
def test_a_key_tensor_draws_what_its_key_draws(backend, key, same_as):
    x = js.ones(N, backend=backend)
    np.testing.assert_array_equal(arr(js.dropout(x, key=key)), arr(js.dropout(x, key=same_as)))
    np.testing.assert_array_equal(arr(js.randn(4, key=key, backend=backend)),
                                  arr(js.randn(4, key=same_as, backend=backend)))


@pytest.mark.parametrize("bad", [js.tensor([1.0, 2.0]), js.tensor(np.arange(3, dtype=np.uint32))])
def test_a_tensor_that_holds_no_key_is_refused_with_its_shape_and_dtype(bad):
    with pytest.raises(TypeError, match=r"int seed, a JAX PRNG key or None.*got a tensor of shape"):
        js.dropout(js.ones(4), key=bad)


def test_nn_dropout_takes_a_key_at_call_time_as_js_dropout_does():
    layer, x = js.nn.Dropout(0.4), js.ones(N, backend="jax")
    key = js.tensor(jax.random.key(8))
    np.testing.assert_array_equal(arr(layer(x, key=key)), arr(js.dropout(x, 0.4, key=key)))
    np.testing.assert_array_equal(arr(layer(x, key=8)), arr(layer(x, key=8)))
    js.manual_seed(2)
    first = arr(layer(x))
    js.manual_seed(2)
    np.testing.assert_array_equal(first, arr(js.dropout(x, 0.4)))
    assert layer.eval()(x, key=key) is x
    with pytest.raises(TypeError, match="int seed, a JAX PRNG key or None"):
        layer.train()(x, key=1.5)


# ---------------------------------------------------------------- to_jax under JAX's trace
def noisy(x):
    return js.dropout(x, 0.5) * 2.0


@pytest.mark.parametrize("mode", ["engine", "native"])
@pytest.mark.parametrize("transform", [
    jax.jit, jax.vmap, lambda f: jax.jit(jax.grad(lambda a: f(a).sum())),
])
def test_a_traced_draw_without_a_key_raises_naming_the_function(mode, transform):
    fn = transform(js.to_jax(noisy, mode=mode))
    with pytest.raises(RuntimeError, match=r"to_jax 'noisy': a random draw without key=.*"
                                           r"Pass a JAX key as an argument"):
        fn(jnp.ones((2, N)))


def test_native_mode_under_jax_grad_raises_too():
    grad_fn = jax.grad(lambda a: js.to_jax(noisy, mode="native")(a).sum())
    with pytest.raises(RuntimeError, match="to_jax 'noisy'"):
        grad_fn(jnp.ones(N))


def masked_loss(x, key):
    """`key` arrives as a tensor (to_jax wraps every argument), and dropout takes it."""
    return (js.dropout(x * 3.0, 0.5, key=key) * x).sum()


def masked_loss_of_the_array(x, key):
    return (js.dropout(x * 3.0, 0.5, key=key.array) * x).sum()


@pytest.mark.parametrize("mode", ["engine", "native"])
def test_a_key_argument_draws_anew_under_jit_and_the_gradient_uses_its_mask(mode):
    x = jnp.linspace(1.0, 2.0, N)
    value_and_grad = jax.jit(jax.value_and_grad(js.to_jax(masked_loss, mode=mode)))
    of_the_array = jax.jit(jax.value_and_grad(js.to_jax(masked_loss_of_the_array, mode=mode)))
    masks = []
    for seed in (0, 1):
        key = jax.random.key(seed)
        value, gradient = value_and_grad(x, key)
        mask = arr(js.dropout(js.tensor(np.asarray(x) * 3.0, backend="jax"), 0.5, key=key)) != 0
        np.testing.assert_allclose(value, np.sum(6.0 * np.asarray(x) ** 2 * mask), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(gradient), 12.0 * np.asarray(x) * mask, rtol=1e-5)
        np.testing.assert_array_equal(np.asarray(of_the_array(x, key)[1]), np.asarray(gradient))
        masks.append(mask)
    assert not np.array_equal(*masks)


def test_a_traced_seed_tensor_is_refused_with_what_to_pass():
    fn = jax.jit(js.to_jax(lambda x, seed: js.dropout(x, key=seed)))
    with pytest.raises(TypeError, match=r"traced seed cannot become a key.*jax.random.key"):
        fn(jnp.ones(N), 3)
