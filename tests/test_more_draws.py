"""The draws randperm, multinomial, poisson, binomial and randint_like by their properties
(permutations, distinct categories, frequencies and means near the probabilities and rates
over large samples on NumPy, the same key the same draw, the global generator, zero or
refused gradients, errors in torch's words): never compared with torch's draws, which come
from another generator. On JAX each new shape of a Poisson or binomial draw compiles JAX's
sampler (seconds), so JAX runs one small case of each kind."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from ops_oracle import raises_saying

import jaxstream as js


# ------------------------------------------------------------------ draws
def test_randperm_is_a_permutation_and_keyed():
    p = js.randperm(50, key=3)
    assert p.dtype == np.int64 and sorted(arr(p).tolist()) == list(range(50))
    np.testing.assert_array_equal(arr(p), arr(js.randperm(50, key=3)))
    assert not np.array_equal(arr(p), arr(js.randperm(50, key=4)))
    f = js.randperm(4, dtype="float32", requires_grad=True)
    assert f.dtype == np.float32 and f.requires_grad and sorted(arr(f)) == [0, 1, 2, 3]
    assert js.randperm(0).shape == (0,)


def test_randperm_draws_from_the_global_generator():
    state = js.get_rng_state()
    first = arr(js.randperm(20))
    assert not np.array_equal(first, arr(js.randperm(20)))
    js.set_rng_state(state)
    np.testing.assert_array_equal(first, arr(js.randperm(20)))
    raises_saying(RuntimeError, "Trying to create tensor with negative dimension -1",
                  js.randperm, -1)
    raises_saying(NotImplementedError, "\"randperm\" not implemented for 'Bool'", js.randperm, 3,
                  dtype="bool")
    raises_saying(RuntimeError, "without overflow", js.randperm, 300, dtype="int8")


def test_multinomial_without_replacement_draws_distinct_categories():
    weights = js.tensor([[1.0, 2.0, 3.0, 4.0]] * 4000)
    draws = arr(js.multinomial(weights, 3, key=5))
    assert draws.shape == (4000, 3)
    assert all(len(set(row)) == 3 for row in draws)
    # the first draw of each row is a draw with the weights' probabilities
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=4) / 4000, [0.1, 0.2, 0.3, 0.4],
                               atol=0.03)
    np.testing.assert_array_equal(arr(js.multinomial(js.tensor([0.0, 1.0, 0.0]), 2, key=0))[0], 1)


def test_multinomial_with_replacement_follows_the_probabilities():
    p = js.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]])
    draws = arr(p.multinomial(100_000, replacement=True, key=2))
    assert str(draws.dtype) == "int64" and draws.shape == (2, 100_000)
    np.testing.assert_allclose(np.bincount(draws[0], minlength=3) / 1e5, [0.0, 0.25, 0.75],
                               atol=0.01)
    assert np.all(draws[1] == 0)
    one = js.multinomial(js.tensor([0.2, 0.8]), 5, True, key=9)
    np.testing.assert_array_equal(arr(one), arr(js.multinomial(js.tensor([0.2, 0.8]), 5, True,
                                                               key=9)))


@pytest.mark.parametrize("args, kwargs, phrase", [
    ((js.ones(2, 2, 2), 1), {}, "prob_dist must be 1 or 2 dim"),
    ((js.tensor([1, 2]), 1), {}, "multinomial only supports floating-point dtypes for input, "
                                 "got: Long"),
    ((js.ones(3), 0), {}, "cannot sample n_sample <= 0 samples"),
    ((js.ones(3), 4), {}, "cannot sample n_sample > prob_dist.size(-1) samples without "
                          "replacement"),
    ((js.tensor([-1.0, 1.0]), 1), {}, "probability tensor contains either `inf`, `nan` or "
                                      "element < 0"),
    ((js.tensor([0.0, 0.0]), 1), {}, "invalid multinomial distribution (sum of probabilities "
                                     "<= 0)"),
])
def test_multinomial_errors_are_torchs(args, kwargs, phrase):
    raises_saying(RuntimeError, phrase, js.multinomial, *args, **kwargs)
    raises_saying(TypeError, "generator= is not supported", js.multinomial, js.ones(2), 1,
                  generator=object())


def test_poisson_means_are_the_rates_and_gradients_zero():
    rates = js.tensor([0.5, 4.0, 30.0, 0.0])
    draws = arr(js.poisson(rates.expand(20000, 4), key=1))
    assert draws.dtype == np.float32 and np.all(draws == np.round(draws))
    np.testing.assert_allclose(draws.mean(0), [0.5, 4.0, 30.0, 0.0], rtol=0.03, atol=0.01)
    r = js.tensor([1.0, 5.0], requires_grad=True)
    drawn = js.poisson(r, key=3)
    assert drawn.grad_fn.name() == "PoissonBackward0"
    np.testing.assert_array_equal(arr(drawn), arr(js.poisson(r, key=3)))
    drawn.sum().backward()
    np.testing.assert_array_equal(arr(r.grad), [0.0, 0.0])


def test_binomial_draws_and_refuses_gradients():
    count = js.tensor([10.0, 5.0, -3.0, 2.5], requires_grad=True)
    prob = js.tensor([0.3, 0.0, 0.5, 1.5])
    drawn = js.binomial(count, prob, key=4)
    values = arr(drawn)
    assert values[1] == 0 and values[2] == 0 and values[3] == 2 and 0 <= values[0] <= 10
    with pytest.raises(RuntimeError, match="derivative for aten::binomial is not implemented"):
        drawn.sum().backward()
    many = arr(js.binomial(js.full((20000,), 10.0), js.full((20000,), 0.3), key=2))
    assert abs(many.mean() - 3.0) < 0.05


def test_draw_errors_are_torchs():
    raises_saying(NotImplementedError, "\"poisson_cpu\" not implemented for 'Long'",
                  js.poisson, js.tensor([1, 2]))
    raises_saying(RuntimeError, "invalid Poisson rate, expected rate to be non-negative",
                  js.poisson, js.tensor([-1.0]))
    raises_saying(ValueError, "binomial only supports floating-point dtypes for count, got: Long",
                  js.binomial, js.tensor([10]), js.tensor([0.5]))
    raises_saying(RuntimeError, "Found dtype Float but expected Double", js.binomial,
                  js.tensor([10.0], dtype="float64"), js.tensor([0.5]))
    raises_saying(RuntimeError,
                  "random_ expects 'from' to be less than 'to', but got from=10 >= to=5",
                  js.randint_like, js.ones(2), 10, 5)


def test_randint_like_keeps_the_input_place():
    x = js.ones((2, 300), dtype="float64")
    drawn = js.randint_like(x, 5, 10, key=1)
    values = arr(drawn)
    assert drawn.shape == x.shape and drawn.dtype == x.dtype
    assert values.min() == 5 and values.max() == 9 and np.all(values == np.round(values))
    np.testing.assert_array_equal(values, arr(js.randint_like(x, 5, 10, key=1)))
    assert js.randint_like(x, 3, dtype="int32").dtype == np.int32
    assert arr(js.randint_like(x, high=2)).max() == 1


@pytest.mark.outside_twin  # each JAX sampler compiles for seconds: one of CI's two runs
def test_draws_on_jax():
    """Keyed draws on JAX arrays, and draws inside `js.compile` (from its own keys)."""
    p = js.randperm(20, key=3, backend="jax")
    assert p.dtype == np.int32 and sorted(arr(p).tolist()) == list(range(20))
    step = js.compile(lambda r: (js.poisson(r, key=None), js.multinomial(r, 2, True)))
    counts, categories = step(js.tensor([1.0, 2.0, 3.0], backend="jax"))
    assert counts.shape == (3,) and np.all(arr(counts) == np.round(arr(counts)))
    assert categories.shape == (2,) and np.all(arr(categories) < 3)
