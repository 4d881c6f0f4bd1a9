"""Randomness replayed right: a recomputation draws what its forward drew, a program draws anew.

checkpoint (both `use_reentrant` modes) and to_jax's engine mode run a function
again in backward: its dropout mask there must be the forward's. js.compile must
not freeze a draw into its program: each call draws anew, and after
`js.manual_seed(s)` compiled call n draws what eager call n would have drawn.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr, jax_tensor

import jaxstream as js

P = 0.5
N = 64  # elements: two independent masks agree with probability 2**-64


def dropped(t):
    return js.dropout(t * 3.0, P)


def factors(backend="numpy", device=None):
    """Distinct nonzero inputs and upstream gradients, so a gradient shows its mask."""
    dtype = np.float32 if backend == "jax" else np.float64
    x = js.tensor(np.linspace(1.0, 2.0, N, dtype=dtype), backend=backend, device=device,
                  requires_grad=True)
    upstream = js.tensor(np.linspace(-1.0, -3.0, N, dtype=dtype), backend=backend, device=device)
    return x, upstream


# ---------------------------------------------------------------- checkpoint
@pytest.mark.parametrize("backend, device", [("numpy", None), ("jax", None), ("numpy", "sim:0")])
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gradient_uses_the_forward_mask(backend, device, use_reentrant):
    x, upstream = factors(backend, device)
    js.manual_seed(11)
    plain = dropped(x)
    (plain * upstream).sum().backward()
    want, after_plain = arr(x.grad), js.get_rng_state()
    x.grad = None
    js.manual_seed(11)
    out = js.checkpoint(dropped, x, use_reentrant=use_reentrant)
    after_forward = js.get_rng_state()
    (out * upstream).sum().backward()
    np.testing.assert_array_equal(arr(out), arr(plain))
    np.testing.assert_array_equal(arr(x.grad), want)
    assert after_forward == after_plain
    assert js.get_rng_state() == after_forward  # the replay drew nothing


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_without_preserve_rng_state_draws_anew(use_reentrant):
    x, upstream = factors()
    js.manual_seed(12)
    out = js.checkpoint(dropped, x, use_reentrant=use_reentrant, preserve_rng_state=False)
    after_forward = js.get_rng_state()
    (out * upstream).sum().backward()
    assert js.get_rng_state() == (after_forward[0], after_forward[1] + 1)
    assert not np.array_equal(arr(x.grad) != 0, arr(out) != 0)


def test_nested_checkpoints_replay_their_own_draws():
    x, upstream = factors()

    def outer(t):
        return js.checkpoint(dropped, js.dropout(t, P), use_reentrant=False) * 2.0

    js.manual_seed(13)
    (outer(x) * upstream).sum().backward()
    want = arr(x.grad)
    x.grad = None
    js.manual_seed(13)
    (js.checkpoint(outer, x) * upstream).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), want)


def test_checkpoint_refuses_a_recomputation_that_draws_otherwise():
    x, _ = factors()
    runs = []

    def draws_once(t):
        runs.append(1)
        return js.dropout(t, P) if len(runs) == 1 else js.dropout(t, P) * js.rand(N)

    out = js.checkpoint(draws_once, x, use_reentrant=False)
    with pytest.raises(RuntimeError, match=r"checkpoint: the recomputation draws random values"):
        out.sum().backward()


@pytest.mark.oracle
@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_dropout_gradient_is_the_forward_mask_as_in_torch(torch, use_reentrant):
    """In both frameworks the gradient of checkpoint(dropout(3x)) is upstream * out / x."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    x, upstream = factors()
    out = js.checkpoint(dropped, x, use_reentrant=use_reentrant)
    (out * upstream).sum().backward()
    x_t = torch.tensor(arr(x), requires_grad=True)
    up_t = torch.tensor(arr(upstream))
    out_t = torch_checkpoint(lambda t: torch.nn.functional.dropout(t * 3.0, P), x_t,
                             use_reentrant=use_reentrant)
    (out_t * up_t).sum().backward()
    for value, gradient, inputs, up in (
        (arr(out), arr(x.grad), arr(x), arr(upstream)),
        (out_t.detach().numpy(), x_t.grad.numpy(), x_t.detach().numpy(), up_t.numpy()),
    ):
        np.testing.assert_allclose(gradient, up * value / inputs, rtol=1e-12)


# ---------------------------------------------------------------- to_jax, engine mode
def test_to_jax_engine_backward_replays_the_forward_mask():
    fn = js.to_jax(dropped, mode="engine")
    x, upstream = jnp.linspace(1.0, 2.0, N), jnp.linspace(-1.0, -3.0, N)
    js.manual_seed(21)
    mask = arr(js.dropout(js.ones(N, backend="jax"), P))  # eager draw 0 after the seed
    js.manual_seed(21)
    out, vjp = jax.vjp(fn, x)
    after_forward = js.get_rng_state()
    (gradient,) = vjp(upstream)
    np.testing.assert_array_equal(np.asarray(out), 3.0 * np.asarray(x) * mask)
    want = jax.grad(lambda a: jnp.sum(3.0 * a * mask * upstream))(x)
    np.testing.assert_allclose(np.asarray(gradient), np.asarray(want), rtol=1e-6)
    assert js.get_rng_state() == after_forward


def test_to_jax_engine_draws_anew_each_call_and_each_gradient_keeps_its_mask():
    fn = js.to_jax(dropped, mode="engine")

    def loss(a):
        out = fn(a)
        return jnp.sum(out), out

    grad_fn = jax.grad(loss, has_aux=True)
    x = jnp.linspace(1.0, 2.0, N)
    runs = [grad_fn(x) for _ in range(2)]
    for gradient, out in runs:
        np.testing.assert_array_equal(np.asarray(gradient), 6.0 * (np.asarray(out) != 0))
    assert not np.array_equal(np.asarray(runs[0][1]), np.asarray(runs[1][1]))


# ---------------------------------------------------------------- js.compile
def train_step(model, x):
    """A step with every kind of draw: dropout, rand, randn, randint; returns what it drew."""
    h = js.dropout(model(x), 0.3)
    normal, uniform = js.randn(*h.shape, backend="jax"), js.rand(*h.shape, backend="jax")
    pick = js.randint(0, 2, h.shape, backend="jax")
    loss = ((h + normal * uniform) * pick.astype("float32")).sum()
    loss.backward()
    with js.no_grad():
        for p in model.parameters():
            p -= 0.01 * p.grad
            p.grad = None
    return loss.detach(), normal, uniform, pick, h.detach() != 0


def model_and_batch():
    model = js.nn.Linear(4, 8, key=0).to("jax")
    return model, jax_tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4))


def test_compiled_step_n_draws_what_eager_step_n_draws():
    eager_model, x = model_and_batch()
    js.manual_seed(31)
    eager = [[arr(v) for v in train_step(eager_model, x)] for _ in range(3)]
    eager_state = js.get_rng_state()
    model, _ = model_and_batch()
    step = js.compile(train_step)
    js.manual_seed(31)
    compiled = [[arr(v) for v in step(model, x)] for _ in range(3)]
    assert step.cache_size() == 1
    assert js.get_rng_state() == eager_state
    for (loss, *drawn), (eager_loss, *eager_drawn) in zip(compiled, eager, strict=True):
        np.testing.assert_allclose(loss, eager_loss, rtol=1e-5)
        for ours, theirs in zip(drawn, eager_drawn, strict=True):
            np.testing.assert_array_equal(ours, theirs)  # bit for bit
    assert len({c[1].tobytes() for c in compiled}) == 3  # each step drew anew
    assert len({c[4].tobytes() for c in compiled}) == 3
    for p, q in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(arr(p), arr(q), rtol=1e-5)


def test_compiled_dropout_draws_anew_and_traces_once():
    class Counter:
        __slots__ = ("runs",)  # unseen by the walk, so counting does not change the key

    counter = Counter()
    counter.runs = 0

    def fn(t):
        counter.runs += 1
        return js.dropout(t, P)

    compiled, x = js.compile(fn), js.ones(N, backend="jax")
    masks = [arr(compiled(x)) for _ in range(4)]
    assert counter.runs == 1
    assert len({m.tobytes() for m in masks}) == 4


def test_checkpoint_inside_compile_replays_the_traced_draws():
    def step(x, upstream):
        out = js.checkpoint(dropped, x, use_reentrant=False)
        (gradient,) = js.grad((out * upstream).sum(), [x])
        return out.detach(), gradient

    x, upstream = factors("jax")
    compiled = js.compile(step)
    js.manual_seed(41)
    eager = [arr(v) for v in step(x, upstream)]
    js.manual_seed(41)
    out, gradient = (arr(v) for v in compiled(x, upstream))
    np.testing.assert_array_equal(out, eager[0])
    np.testing.assert_allclose(gradient, eager[1], rtol=1e-6)
    np.testing.assert_allclose(gradient, arr(upstream) * out / arr(x), rtol=1e-6)


def test_a_compiled_call_inside_another_draws_what_eager_code_draws():
    inner = js.compile(lambda t: js.dropout(t * 3.0, P))
    outer = js.compile(lambda t: inner(t) + js.rand(N, backend="jax"))
    x = js.ones(N, backend="jax")
    js.manual_seed(42)
    eager = [arr(js.dropout(x * 3.0, P) + js.rand(N, backend="jax")) for _ in range(2)]
    js.manual_seed(42)
    np.testing.assert_array_equal([arr(outer(x)) for _ in range(2)], eager)


def test_a_numpy_draw_inside_compile_names_the_fix():
    step = js.compile(lambda t: t + js.rand(N, backend="numpy"))
    with pytest.raises(TypeError, match=r"uniform: the key of this draw is traced .*backend='jax'"):
        step(js.ones(N, backend="jax"))
