"""PyTorch's samplers with PyTorch's meaning: `js.normal` of tensors of means or deviations
(and of two numbers and a size), `js.bernoulli` of probabilities, and the in-place draws
`normal_`, `uniform_`, `bernoulli_`; each checked against torch on what a draw can be
compared by: shapes, dtypes, nodes, zero gradients, errors and moments."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js

torch = pytest.importorskip("torch")

BACKENDS = ["numpy", "jax"]
DTYPES = {"float16": (np.float16, torch.float16), "float32": (np.float32, torch.float32),
          "float64": (np.float64, torch.float64)}
WIDE = {"numpy": "float64", "jax": "float32"}
"""A dtype wider than another on each backend (JAX's 64-bit mode is off)."""
NARROW = {"numpy": "float32", "jax": "float16"}


def pair(values, dtype="float32", backend="numpy", requires_grad=False):
    """The same values as a jaxstream tensor and a torch tensor."""
    values = np.asarray(values, dtype=DTYPES[dtype][0])
    ours = js.tensor(values, backend=backend, requires_grad=requires_grad)
    return ours, torch.tensor(values, requires_grad=requires_grad)


def node_name(t):
    return t.grad_fn.name() if t.grad_fn is not None else None


# ------------------------------------------------------------------ normal
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("overload", ["tensor-tensor", "tensor-float", "float-tensor"])
def test_normal_of_tensors_has_torchs_node_dtype_and_zero_gradients(backend, overload):
    mean, mean_t = pair([0.0, 10.0, -5.0], WIDE[backend], backend, requires_grad=True)
    std, std_t = pair([1.0, 0.0, 2.0], NARROW[backend], backend, requires_grad=True)
    args = {"tensor-tensor": ((mean, std), (mean_t, std_t)),
            "tensor-float": ((mean, 2.0), (mean_t, 2.0)),
            "float-tensor": ((3.0, std), (3.0, std_t))}[overload]
    ours, theirs = js.normal(*args[0]), torch.normal(*args[1])
    assert node_name(ours) == theirs.grad_fn.name()
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert ours.backend == backend and ours.shape == tuple(theirs.shape)
    ours.sum().backward()
    theirs.sum().backward()
    for leaf, oracle in ((mean, mean_t), (std, std_t)):
        assert (leaf.grad is None) == (oracle.grad is None)
        if leaf.grad is not None:
            np.testing.assert_array_equal(arr(leaf.grad), oracle.grad.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_draws_each_mean_and_deviation_of_its_own_element(backend):
    js.manual_seed(7)
    mean = js.tensor(np.array([[0.0], [10.0], [-5.0]], np.float32), backend=backend)
    std = js.tensor(np.array([1.0, 0.0, 3.0, 0.5], np.float32), backend=backend)
    draws = np.stack([arr(js.normal(mean, std)) for _ in range(3000)])
    assert draws.shape[1:] == (3, 4)  # broadcast, as torch.normal's
    np.testing.assert_array_equal(draws[:, :, 1], np.broadcast_to([0.0, 10.0, -5.0], (3000, 3)))
    np.testing.assert_allclose(draws.mean(0), np.broadcast_to(arr(mean), (3, 4)), atol=0.2)
    np.testing.assert_allclose(draws.std(0), np.broadcast_to(arr(std), (3, 4)), rtol=0.08)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 3), max_size=3), st.lists(st.integers(1, 3), max_size=3))
def test_normal_broadcasts_mean_and_std_as_torch(mean_shape, std_shape):
    mean, std = np.zeros(mean_shape, np.float32), np.ones(std_shape, np.float32)
    try:
        expected = tuple(torch.normal(torch.tensor(mean), torch.tensor(std)).shape)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="must match"):
            js.normal(js.tensor(mean), js.tensor(std))
        return
    assert js.normal(js.tensor(mean), js.tensor(std)).shape == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_of_two_numbers_is_a_factory_with_torchs_argument_order(backend):
    js.manual_seed(3)
    t = js.normal(1.0, 2.0, (20000,), backend=backend, dtype=NARROW[backend], requires_grad=True)
    assert (t.shape, str(t.dtype), t.is_leaf, t.requires_grad) == (
        (20000,), NARROW[backend], True, True)
    values = arr(t).astype(np.float64)
    assert abs(values.mean() - 1.0) < 0.06 and abs(values.std() - 2.0) < 0.06
    assert js.normal(0.0, 1.0, size=(2, 3), backend=backend).dtype == np.float32
    with pytest.raises(TypeError, match=r"give the size too, normal\(mean, std, size\)"):
        js.normal(0.0, 1.0)
    with pytest.raises(TypeError, match="a shape is ints"):
        js.normal((2, 3), 0.0, 1.0)  # the old shape-first order is refused, never misread


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_refuses_what_torch_refuses(backend):
    mean, mean_t = pair([0.0, 1.0], backend=backend)
    for ours, theirs in [
        (lambda: js.normal(mean, -1.0), lambda: torch.normal(mean_t, -1.0)),
        (lambda: js.normal(mean, js.tensor([-1.0, 1.0], backend=backend)),
         lambda: torch.normal(mean_t, torch.tensor([-1.0, 1.0]))),
        (lambda: js.normal(0.0, -1.0, (2,), backend=backend),
         lambda: torch.normal(0.0, -1.0, (2,))),
        (lambda: js.normal(js.zeros(2, dtype="int32", backend=backend), 1.0),
         lambda: torch.normal(torch.zeros(2, dtype=torch.int32), 1.0)),
    ]:
        with pytest.raises(Exception) as theirs_raised:
            theirs()
        with pytest.raises((RuntimeError, NotImplementedError)) as ours_raised:
            ours()
        assert str(theirs_raised.value).split(" ")[0] == str(ours_raised.value).split(" ")[0]
    with pytest.raises(TypeError, match="size goes with two numbers only"):
        js.normal(mean, 1.0, (2,))
    with pytest.raises(TypeError, match="requires_grad goes with two numbers only"):
        js.normal(mean, 1.0, requires_grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_normal_with_a_key_is_pure_and_follows_the_generator_without(backend):
    mean = js.zeros(5, backend=backend)
    np.testing.assert_array_equal(arr(js.normal(mean, key=4)), arr(js.normal(mean, key=4)))
    assert not np.array_equal(arr(js.normal(mean, key=4)), arr(js.normal(mean, key=5)))
    js.manual_seed(11)
    first = arr(js.normal(mean))
    js.manual_seed(11)
    np.testing.assert_array_equal(arr(js.normal(mean)), first)


def test_normal_inside_a_compiled_step_draws_anew_each_call():
    step = js.compile(lambda mean: js.normal(mean, 1.0) * 1.0)
    mean = js.zeros(4, backend="jax")
    first, second = arr(step(mean)), arr(step(mean))
    assert first.shape == (4,) and not np.array_equal(first, second)


# ------------------------------------------------------------------ bernoulli
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_bernoulli_of_probabilities_has_torchs_dtype_node_and_zero_gradient(backend, width):
    p, p_t = pair([0.0, 1.0, 0.5], width[backend], backend, requires_grad=True)
    ours, theirs = js.bernoulli(p), torch.bernoulli(p_t)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    assert node_name(ours) == theirs.grad_fn.name() == "BernoulliBackward0"
    assert arr(ours)[0] == 0.0 and arr(ours)[1] == 1.0  # certain outcomes
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_array_equal(arr(p.grad), p_t.grad.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_draws_each_elements_own_probability(backend):
    js.manual_seed(5)
    p = js.tensor(np.array([0.1, 0.5, 0.9], np.float32), backend=backend)
    draws = np.stack([arr(js.bernoulli(p)) for _ in range(4000)])
    assert set(np.unique(draws)) == {0.0, 1.0}
    np.testing.assert_allclose(draws.mean(0), [0.1, 0.5, 0.9], atol=0.03)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_with_p_keeps_the_input_dtype_and_shape(backend):
    for dtype in ("float32", "int32", "bool"):
        x = js.zeros((2, 3), dtype=dtype, backend=backend)
        drawn = js.bernoulli(x, 0.5, key=1)
        expected = torch.bernoulli(torch.zeros((2, 3), dtype=getattr(torch, dtype)), 0.5)
        assert (drawn.shape, str(drawn.dtype)) == (tuple(expected.shape),
                                                  str(expected.dtype).removeprefix("torch."))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bernoulli_refuses_what_torch_refuses(backend):
    with pytest.raises(RuntimeError, match=r"expected every probability in \[0, 1\].*1.5"):
        js.bernoulli(js.tensor(np.array([0.5, 1.5], np.float32), backend=backend))
    with pytest.raises(NotImplementedError, match="bernoulli_tensor_cpu_p_.*'Int'"):
        js.bernoulli(js.zeros(2, dtype="int32", backend=backend))
    with pytest.raises(RuntimeError, match=r"expects p to be in \[0, 1\], but got p=-0.5"):
        js.bernoulli(js.zeros(2, backend=backend), -0.5)


# ------------------------------------------------------------------ in-place draws
@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_draws_fill_the_tensor_and_record_torchs_nodes(backend):
    base, base_t = pair(np.zeros(3), backend=backend, requires_grad=True)
    for draw in (lambda t: t.normal_(0.0, 2.0), lambda t: t.uniform_(-1.0, 1.0),
                 lambda t: t.bernoulli_(0.5), lambda t: t.bernoulli_(torch_or_js(t, 0.3))):
        ours, theirs = base * 1.0, base_t * 1.0
        assert draw(ours) is ours
        draw(theirs)
        assert node_name(ours) == theirs.grad_fn.name()
        ours.sum().backward()
        theirs.sum().backward()
        np.testing.assert_array_equal(arr(base.grad), base_t.grad.numpy())
        base.grad, base_t.grad = None, None


def torch_or_js(like, p):
    """A tensor of probabilities `p` of `like`'s library and shape."""
    if isinstance(like, torch.Tensor):
        return torch.full(like.shape, p)
    return js.full(like.shape, p, backend=like.backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_draws_have_the_right_moments_and_range(backend):
    js.manual_seed(9)
    with js.no_grad():
        w = js.zeros(20000, requires_grad=True, backend=backend)
        assert arr(w.normal_(1.0, 0.5)).std() == pytest.approx(0.5, rel=0.05)
        values = arr(w.uniform_(-3.0, -1.0))
        assert values.min() >= -3.0 and values.max() < -1.0
        assert arr(w.bernoulli_(0.25)).mean() == pytest.approx(0.25, abs=0.02)
    assert w.is_leaf and w.requires_grad and w.dtype == np.float32


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_draws_refuse_what_torch_refuses(backend):
    leaf = js.zeros(3, requires_grad=True, backend=backend)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.normal_()
    with pytest.raises(RuntimeError, match="uniform_ expects to return a \\[from, to\\) range"):
        js.zeros(3, backend=backend).uniform_(2.0, 1.0)
    with pytest.raises(NotImplementedError, match="check_uniform_bounds.*'Int'"):
        js.zeros(3, dtype="int32", backend=backend).uniform_()
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        js.zeros(3, backend=backend).normal_(0.0, -1.0)
    assert arr(js.zeros(3, dtype="int32", backend=backend).bernoulli_(1.0)).tolist() == [1, 1, 1]
