"""A built-in node's backward as one compiled call on JAX (Note [Compiled backward on JAX] in
ops/compiled_backward.py): the gradients of the op-by-op path and of jax.grad, trimming,
create_graph, and the keys that must run op by op."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr, jax_kernels_uncompiled
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream.ops import compiled_backward
from jaxstream.ops import rules as R
from jaxstream.ops.dispatch import apply
from jaxstream.ops.opdef import OpDef

pytestmark = pytest.mark.usefixtures("fresh_compiled_caches")


def _state(key_op):
    """What the table holds for `key_op`'s backward: "compiled", "eager" or None."""
    found = [v for k, v in compiled_backward._backwards.items() if _op_of(k) is key_op]
    if not found:
        return None
    return "eager" if found[0] == "eager" else "compiled"


def _op_of(key):
    forward = key[0]
    return forward if isinstance(forward, OpDef) else forward[0]


# Each case: jaxstream's function of (x, y), JAX's, and whether y must be positive.
CASES = {
    "mul": (lambda x, y: x * y, lambda x, y: x * y),
    "div": (lambda x, y: x / y, lambda x, y: x / y),
    "scalar mul": (lambda x, y: x * 1.5 - y, lambda x, y: x * 1.5 - y),
    "tanh": (lambda x, y: js.tanh(x) * y, lambda x, y: jnp.tanh(x) * y),
    "sigmoid": (lambda x, y: js.sigmoid(x + y), lambda x, y: jax.nn.sigmoid(x + y)),
    "exp log": (lambda x, y: js.exp(x) + js.log(y), lambda x, y: jnp.exp(x) + jnp.log(y)),
    "sin cos": (lambda x, y: js.sin(x) * js.cos(y), lambda x, y: jnp.sin(x) * jnp.cos(y)),
    "maximum": (lambda x, y: js.maximum(x, y), lambda x, y: jnp.maximum(x, y)),
    "pow": (lambda x, y: y ** x, lambda x, y: y**x),
    "relu": (lambda x, y: js.relu(x - y), lambda x, y: jax.nn.relu(x - y)),
    "mean over rows": (
        lambda x, y: (x * y).mean(axis=0), lambda x, y: jnp.mean(x * y, axis=0)
    ),
    "softmax": (
        lambda x, y: js.softmax(x * y, axis=-1), lambda x, y: jax.nn.softmax(x * y, axis=-1)
    ),
    "matmul": (lambda x, y: x @ y.swapaxes(-1, -2), lambda x, y: x @ jnp.swapaxes(y, -1, -2)),
}


def _grads(fn, x, y):
    a = js.tensor(x, backend="jax", requires_grad=True)
    b = js.tensor(y, backend="jax", requires_grad=True)
    weights = js.tensor(np.linspace(0.5, 1.5, fn(a, b).array.size, dtype=np.float32),
                        backend="jax")
    out = fn(a, b)
    return [arr(g) for g in js.grad((out.reshape((-1,)) * weights).sum(), [a, b])]


def _jax_grads(fn, x, y, size):
    weights = jnp.linspace(0.5, 1.5, size, dtype=jnp.float32)
    return jax.grad(lambda a, b: jnp.sum(fn(a, b).reshape(-1) * weights), argnums=(0, 1))(x, y)


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(sorted(CASES)),
    shape=st.lists(st.integers(1, 3), min_size=2, max_size=2),
    seed=st.integers(0, 2**16),
)
def test_compiled_gradients_match_op_by_op_and_jax_grad(name, shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    y = rng.uniform(0.5, 2, shape).astype(np.float32)
    fn, jax_fn = CASES[name]
    compiled = [_grads(fn, x, y) for _ in range(2)]  # compiled, then from the cache
    with jax_kernels_uncompiled():
        op_by_op = _grads(fn, x, y)
    expected = _jax_grads(jax_fn, x, y, np.asarray(jax_fn(x, y)).size)
    for got in (*compiled, op_by_op):
        for g, want in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6, err_msg=name)
    assert compiled_backward.cache_size() > 0


def test_a_node_backward_is_one_compiled_call():
    x = js.tensor([0.5, -1.0], backend="jax", requires_grad=True)
    y = js.tanh(x)
    y.sum().backward()
    assert _state(R.TANH) == "compiled"
    np.testing.assert_allclose(arr(x.grad), 1 - np.tanh([0.5, -1.0]) ** 2, rtol=1e-6)


class _Calls:
    """A vjp that counts its calls (at trace time on the compiled path)."""

    def __init__(self, fn):
        self.fn, self.count = fn, 0

    def __call__(self, g, ctx):
        self.count += 1
        return self.fn(g, ctx)


def test_trimming_still_skips_unneeded_inputs():
    da = _Calls(lambda g, ctx: g * ctx.inputs[1])
    db = _Calls(lambda g, ctx: g * ctx.inputs[0])
    op = OpDef("counted_mul", "CountedMulBackward", R.XP.multiply, da, db, save_inputs=(0, 1))
    a = js.tensor([1.0, 2.0], backend="jax", requires_grad=True)
    b = js.tensor([3.0, 4.0], backend="jax", requires_grad=True)
    for _ in range(2):
        (gb,) = js.grad(apply(op, a, b).sum(), [b])
    np.testing.assert_allclose(arr(gb), [1.0, 2.0])
    assert da.count == 0 and db.count == 1  # traced once, for b only
    (ga,) = js.grad(apply(op, a, b).sum(), [a])  # the other input: its own key
    np.testing.assert_allclose(arr(ga), [3.0, 4.0])
    assert da.count == 1


def test_create_graph_records_a_differentiable_graph():
    x = js.tensor([0.3, -0.7], backend="jax", requires_grad=True)
    (g,) = js.grad(js.tanh(x * 2.0).sum(), [x], create_graph=True)
    assert g.grad_fn is not None
    assert _state(R.TANH) is None  # its rules ran op by op, recording g's graph
    (h,) = js.grad(g.sum(), [x])
    expected = jax.grad(lambda v: jnp.sum(jax.grad(lambda u: jnp.sum(jnp.tanh(u * 2.0)))(v)))
    np.testing.assert_allclose(arr(h), expected(jnp.asarray([0.3, -0.7])), rtol=1e-5)
    assert _state(R.TANH_BW) == "compiled"  # the second backward is not create_graph


def test_an_unhashable_param_runs_op_by_op():
    op = OpDef("scaled", "ScaledBackward", lambda xp, a, factors: a * factors[0],
               lambda g, ctx: g * ctx.params["factors"][0])
    x = js.tensor([1.0, 2.0], backend="jax", requires_grad=True)
    for _ in range(2):
        (g,) = js.grad(apply(op, x, factors=[3.0]).sum(), [x])
    np.testing.assert_allclose(arr(g), [3.0, 3.0])
    assert _state(op) is None
    assert compiled_backward.run(None, op, {"factors": [3.0]}, (True,), g, [], None, ()) is None


def test_a_rule_that_tests_a_value_in_python_runs_op_by_op_for_good():
    x = js.tensor([1.5, 2.0], backend="jax", requires_grad=True)
    for _ in range(2):
        (g,) = js.grad((x**3).sum(), [x])  # the scalar power's rule tests `exponent != 0`
    np.testing.assert_allclose(arr(g), 3 * np.array([1.5, 2.0]) ** 2, rtol=1e-6)
    assert _state(R.POW_SCALAR) == "eager"


def test_rules_that_compute_nothing_run_op_by_op():
    x = js.tensor([1.0, 2.0], backend="jax", requires_grad=True)
    y = js.tensor([3.0, 4.0], backend="jax", requires_grad=True)
    (x + y).sum().backward()
    assert _state(R.ADD) == "eager"  # both gradients are g itself: nothing to compile
    np.testing.assert_allclose(arr(x.grad), [1.0, 1.0])


def test_a_failing_rule_raises_its_own_error():
    def broken(g, ctx):
        raise ValueError("broken rule for input 0")

    op = OpDef("broken", "BrokenBackward", R.XP.negative, broken)
    x = js.tensor([1.0], backend="jax", requires_grad=True)
    for _ in range(2):
        with pytest.raises(ValueError, match="broken rule for input 0"):
            apply(op, x).sum().backward()
    assert _state(op) == "eager"


def test_a_sanitized_device_runs_op_by_op():
    x = js.tensor(np.array([0.5, 1.0], np.float32), backend="jax", device="sim:0",
                  requires_grad=True)
    js.tanh(x).sum().backward()
    assert _state(R.TANH) is None
    np.testing.assert_allclose(arr(x.grad), 1 - np.tanh([0.5, 1.0]) ** 2, rtol=1e-6)


def test_a_new_scalar_value_reuses_the_compiled_backward():
    x = js.tensor([1.0, 2.0], backend="jax", requires_grad=True)
    for factor in (1.5, 2.5, 3.5):
        (g,) = js.grad((x * factor).sum(), [x])
        np.testing.assert_allclose(arr(g), [factor, factor])
    (entry,) = [v for k, v in compiled_backward._backwards.items() if _op_of(k) is R.MUL]
    assert entry.jitted._cache_size() == 1


def test_the_backward_cache_keeps_at_most_its_limit(monkeypatch):
    monkeypatch.setattr(compiled_backward, "CACHE_LIMIT", 3)
    x = js.tensor(np.arange(6.0, dtype=np.float32), backend="jax", requires_grad=True)
    for low in range(6):
        (g,) = js.grad(js.clip(x, low, None).sum(), [x])
        np.testing.assert_allclose(arr(g), (np.arange(6.0) >= low).astype(np.float32))
    assert compiled_backward.cache_size() <= 3


def _linear_grads(x, w, region):
    """The gradients of a linear's inputs, its forward outside `region`, its backward inside."""
    out = js.linear(x, w)
    with region:
        return [arr(g).astype(np.float32) for g in js.grad(out.sum(), [x, w])]


def test_the_autocast_state_around_backward_reaches_the_compiled_rules():
    """As in eager PyTorch, a built-in node's backward runs under the autocast state around
    backward(), not the forward's: that state is part of the compiled backward's key."""
    rng = np.random.default_rng(0)
    x = js.tensor(rng.uniform(-1, 1, (3, 5)).astype(np.float32), backend="jax",
                  requires_grad=True)
    w = js.tensor(rng.uniform(-1, 1, (4, 5)).astype(np.float32), backend="jax",
                  requires_grad=True)
    plain = _linear_grads(x, w, js.amp.autocast(enabled=False))
    low = _linear_grads(x, w, js.amp.autocast(dtype="bfloat16"))
    with jax_kernels_uncompiled():
        low_op_by_op = _linear_grads(x, w, js.amp.autocast(dtype="bfloat16"))
    for got, want, plain_grad in zip(low, low_op_by_op, plain, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
        assert not np.array_equal(got, plain_grad)  # bfloat16 products: autocast reached them
    linear_keys = [k for k in compiled_backward._backwards if _op_of(k).name == "linear"]
    assert len(linear_keys) == 2  # one per autocast state


def test_each_combination_of_input_shapes_is_its_own_key():
    """The inputs' shapes are closed over in the compiled backward, so they are in its key:
    broadcasts that share an op and its needs never share a compiled function."""
    shapes = [((2, 3), (3,)), ((2, 3), (2, 3)), ((3,), (2, 3)), ((2, 3), (3,))]
    rng = np.random.default_rng(0)
    for a_shape, b_shape in shapes:
        x, y = (rng.uniform(-1, 1, s).astype(np.float32) for s in (a_shape, b_shape))
        a = js.tensor(x, backend="jax", requires_grad=True)
        b = js.tensor(y, backend="jax", requires_grad=True)
        got = js.grad((a * b).sum(), [a, b])
        want = jax.grad(lambda u, v: jnp.sum(u * v), argnums=(0, 1))(x, y)
        for g, w, s in zip(got, want, (a_shape, b_shape), strict=True):
            assert g.shape == s
            np.testing.assert_allclose(arr(g), w, rtol=1e-6)
    mul_keys = [k for k, v in compiled_backward._backwards.items() if _op_of(k) is R.MUL]
    assert len(mul_keys) == 3  # the repeated combination found its own
    assert {k[2] for k in mul_keys} == {tuple(s) for s in shapes}


def test_an_absent_optional_input_is_an_empty_argument():
    """linear without a bias saves None where the bias would be: the compiled call takes it
    as an empty argument, and the key tells the two apart by the inputs' shapes."""
    rng = np.random.default_rng(1)
    x_np, w_np, b_np = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((3, 5), (4, 5), (4,)))
    x = js.tensor(x_np, backend="jax", requires_grad=True)
    w = js.tensor(w_np, backend="jax", requires_grad=True)
    b = js.tensor(b_np, backend="jax", requires_grad=True)
    gx, gw = js.grad(js.linear(x, w).sum(), [x, w])
    gx_b, gw_b, gb = js.grad(js.linear(x, w, b).sum(), [x, w, b])
    want = jax.grad(lambda u, v: jnp.sum(u @ v.T), argnums=(0, 1))(x_np, w_np)
    for got in ((gx, gw), (gx_b, gw_b)):
        for g, expected in zip(got, want, strict=True):
            np.testing.assert_allclose(arr(g), expected, rtol=1e-5)
    np.testing.assert_allclose(arr(gb), np.full(4, 3.0))
    assert len([k for k in compiled_backward._backwards if _op_of(k).name == "linear"]) == 2


@pytest.mark.parametrize("modify", ["output", "input"])
def test_a_saved_value_modified_in_place_is_an_error_on_the_compiled_path(modify):
    """The compiled backward reads the saved arrays without making tensors, checked by
    their versions as `unpack` checks them: the same error as op by op."""
    x = js.tensor([0.5, 1.0], backend="jax", requires_grad=True)
    y = js.tanh(x * 1.0)  # saves its output
    if modify == "output":
        loss = y.sum()
        what, node = "output 0", "TanhBackward0"
    else:
        loss = (x.exp() * y).sum()  # saves its inputs
        what, node = "an input", "MulBackward0"
    loss.backward(retain_graph=True)  # compiled, from the saved arrays
    y.add_(1.0)
    with pytest.raises(RuntimeError, match=f"{what} of {node} \\(shape \\(2,\\), dtype float32"):
        loss.backward()
