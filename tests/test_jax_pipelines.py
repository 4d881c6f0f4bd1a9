"""jaxstream inside pure-JAX pipelines: `jax.jit(jax.value_and_grad(js.to_jax(loss)))` + optax.

What a researcher meets there: a frozen parameter, `jnp.asarray` of a tensor that requires
grad, `jax.shard_map`, a Tensor handed to JAX itself, factories and boolean masks inside the
traced function, and errors that must name the function being traced. Gradients are checked
against PyTorch's autograd and against `jax.grad` of the same code in JAX.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import float32_normals
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import jaxstream as js

MODES = ["engine", "native"]
_draw = float32_normals(seed=11)


# ------------------------------------------------------------------ frozen parameters
class _Scaled(js.nn.Module):
    """A layer and a constant held as a frozen parameter, the PyTorch way."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = js.nn.Linear(3, 2, key=0)
        self.scale = js.nn.Parameter(js.tensor([2.0, -3.0]), requires_grad=False)

    def forward(self, x: js.Tensor) -> js.Tensor:
        return js.tanh(self.lin(x)) * self.scale


def _loss(model: js.nn.Module, x: js.Tensor) -> js.Tensor:
    return (model(x) ** 2).mean()


@pytest.mark.parametrize("mode", MODES)
def test_a_frozen_parameter_gets_no_gradient_as_in_pytorch_autograd(mode, torch):
    model, x = _Scaled(), _draw(4, 3)
    grads = jax.jit(jax.grad(js.to_jax(_loss, mode=mode)))(
        jax.tree.map(lambda t: t.jax(), model), jnp.asarray(x)
    )
    ref = torch.nn.Linear(3, 2)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(model.lin.weight.numpy().copy()))
        ref.bias.copy_(torch.from_numpy(model.lin.bias.numpy().copy()))
    scale = torch.nn.Parameter(torch.tensor([2.0, -3.0]), requires_grad=False)
    (torch.tanh(ref(torch.from_numpy(x))) * scale).pow(2).mean().backward()
    assert scale.grad is None
    np.testing.assert_array_equal(grads.scale, np.zeros(2, np.float32))
    np.testing.assert_allclose(grads.lin.weight, ref.weight.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grads.lin.bias, ref.bias.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_an_optax_step_trains_the_parameters_and_leaves_a_frozen_one_alone():
    params, x = jax.tree.map(lambda t: t.jax(), _Scaled()), jnp.asarray(_draw(4, 3))
    transform = optax.adam(0.1)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(js.to_jax(_loss))(params, x)
        updates, state = transform.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    new, _, _ = step(params, transform.init(params))
    np.testing.assert_array_equal(new.scale, params.scale)
    assert not np.allclose(new.lin.weight, params.lin.weight)


def test_the_frozen_mark_is_part_of_the_structure_and_survives_rebuilding():
    model = _Scaled()
    arrays = jax.tree.map(lambda t: t.jax(), model)
    assert jax.tree.structure(arrays) == jax.tree.structure(model)
    model.scale.requires_grad_(True)  # thawed: another structure, so JAX retraces
    assert jax.tree.structure(model) != jax.tree.structure(arrays)
    rebuilt = jax.tree.unflatten(
        jax.tree.structure(arrays), [js.tensor(np.asarray(a), requires_grad=True)
                                     for a in jax.tree.leaves(arrays)]
    )
    assert not rebuilt.scale.requires_grad and rebuilt.lin.weight.requires_grad


# ------------------------------------------------------------------ np/jnp.asarray
@pytest.mark.parametrize("convert", [np.asarray, jnp.asarray], ids=["np", "jnp"])
def test_asarray_of_a_tensor_that_requires_grad_raises_as_pytorch_does(convert, torch):
    with pytest.raises(RuntimeError, match="numpy"):
        np.asarray(torch.ones(2, requires_grad=True))
    t = js.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"requires grad.*shape \(2,\).*detach\(\)"):
        convert(t)
    np.testing.assert_array_equal(convert(t.detach()), [1.0, 2.0])
    assert np.shares_memory(np.asarray(t.detach()), t.numpy())  # NumPy's view, no copy
    on_jax = js.tensor(jnp.ones(3), requires_grad=True)
    assert on_jax.detach().jax() is on_jax.array  # the zero-copy way to JAX
    # An array on the left of an operator still defers to the tensor, graph kept.
    out = jnp.asarray([3.0, 4.0]) * t
    assert isinstance(out, js.Tensor) and out.grad_fn is not None
    np.testing.assert_array_equal(js.grad(out.sum(), t)[0].numpy(), [3.0, 4.0])


def test_jnp_asarray_inside_to_jax_raises_naming_detach_and_the_function():
    def leaves_the_graph(x):
        return js.tensor(jnp.asarray(x) * 2).sum()

    with pytest.raises(RuntimeError, match=r"detach\(\).*js\.jax_function") as caught:
        jax.jit(jax.grad(js.to_jax(leaves_the_graph)))(jnp.ones(3))
    assert any("leaves_the_graph" in note for note in caught.value.__notes__)


# ------------------------------------------------------------------ shard_map
def _mesh() -> Mesh:
    """Two host devices where JAX has them (the GPU twin), else one: both check the types."""
    return Mesh(np.array(jax.devices("cpu")[:2]), ("d",))


def _js_loss(w, b, x, unused, k):
    return ((x @ w).tanh() ** 2).sum() + (b * b).sum() * k.sum()


def _jax_loss(w, b, x, unused, k):
    return (jnp.tanh(x @ w) ** 2).sum() + (b * b).sum() * k.sum()


def _sharded_inputs(n: int) -> tuple:
    """w replicated; b, x, an unused input and an int one sharded over `n` devices."""
    w, x = jnp.asarray(_draw(3, 2)), jnp.asarray(_draw(4 * n, 3))
    return w, jnp.asarray(_draw(2 * n)), x, jnp.asarray(_draw(2 * n)), jnp.arange(2 * n)


def _sharded_grads(loss, mesh: Mesh, inputs: tuple, check_vma: bool):
    def local(*args):
        value, grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3))(*args)
        return jax.lax.psum(value, "d"), grads

    sharded = P("d")
    grads_spec = (P(), sharded, sharded, sharded) if check_vma else (sharded,) * 4
    mapped = jax.shard_map(
        local, mesh=mesh, in_specs=(P(), sharded, sharded, sharded, sharded),
        out_specs=(P(), grads_spec), check_vma=check_vma,
    )
    return jax.jit(mapped)(*inputs)


def test_to_jax_under_shard_map_gives_jax_gradients_in_both_modes():
    mesh = _mesh()
    inputs = _sharded_inputs(mesh.devices.size)
    for check_vma in (True, False):  # JAX's default, then untyped (per-device gradients)
        want = _sharded_grads(_jax_loss, mesh, inputs, check_vma)
        for mode in MODES:
            got = _sharded_grads(js.to_jax(_js_loss, mode=mode), mesh, inputs, check_vma)
            for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6,
                                           err_msg=f"{mode}, check_vma={check_vma}")


# ------------------------------------------------------------------ a Tensor handed to JAX
_HANDED = {
    "jnp.sin": lambda t: jnp.sin(t),
    "jax.jit": lambda t: jax.jit(lambda a: a * 2)(t),
    "jax.grad": lambda t: jax.grad(lambda a: (a * a).sum())(t),
    "jax.vmap": lambda t: jax.vmap(lambda a: a * 2)(t),
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("call", sorted(_HANDED))
def test_a_tensor_handed_to_jax_raises_naming_the_conversions(call, requires_grad):
    t = js.tensor(np.arange(40, dtype=np.float32), requires_grad=requires_grad)
    with pytest.raises(ValueError, match=r"shape \(40,\).*t\.jax\(\).*jax\.tree\.map.*to_jax") as e:
        _HANDED[call](t)
    assert "tensor([" not in str(e.value)  # not JAX's message, with the whole tensor in it
    # On the device of `t.jax()`: JAX's default device (a GPU's sin) may differ by an ulp.
    same_device = jax.device_put(t.numpy(), t.jax().sharding)
    np.testing.assert_allclose(_HANDED[call](t.jax()), _HANDED[call](same_device))


# ------------------------------------------------------------------ factories
_FACTORIES = {
    "zeros": lambda n: js.zeros(n),
    "ones": lambda n: js.ones(n),
    "full": lambda n: js.full((n,), 2.5),
    "arange": lambda n: js.arange(n),
    "linspace": lambda n: js.linspace(0.0, 1.0, n),
    "eye": lambda n: js.eye(n).sum(0),
    "tensor": lambda n: js.tensor([float(i) for i in range(n)]),
    "ones_like": lambda n: js.ones_like(js.zeros(n)),
}


@settings(max_examples=3, deadline=None)
@given(n=st.integers(1, 5), name=st.sampled_from(sorted(_FACTORIES)))
def test_factories_inside_to_jax_make_jax_tensors(n, name):
    made = _FACTORIES[name]
    expected = jnp.asarray(made(n).numpy(), jnp.float32)  # NumPy outside any trace

    def loss(x):
        c = made(n)
        assert c.backend == "jax"
        return (x * c + c).sum()

    x = jnp.asarray(_draw(n))
    np.testing.assert_allclose(jax.jit(js.to_jax(loss))(x), (x * expected + expected).sum(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.grad(js.to_jax(loss)))(x), expected, rtol=1e-6)


def test_a_random_factory_inside_to_jax_draws_on_jax():
    def noisy(x):
        noise = js.randn(3, key=7)
        assert noise.backend == "jax" and noise.shape == (3,)
        return (x * noise).sum()

    want = js.randn(3, key=7, backend="jax").numpy()
    np.testing.assert_allclose(jax.jit(jax.grad(js.to_jax(noisy)))(jnp.ones(3)), want)


def test_an_explicit_backend_inside_to_jax_is_obeyed_and_the_error_names_the_function():
    def on_numpy(x):
        return (x + js.zeros(3, backend="numpy")).sum()

    with pytest.raises(RuntimeError, match=r"one backend.*to\(backend='jax'\)") as caught:
        jax.jit(js.to_jax(on_numpy))(jnp.ones(3))
    assert any("to_jax traced" in note and "on_numpy" in note for note in caught.value.__notes__)
    assert js.zeros(3).backend == "numpy"  # outside a trace, factories stay NumPy


# ------------------------------------------------------------------ boolean masks
def _masked_sum(x):
    return (x[x > 0] ** 2).sum()


def _where_sum(x):
    return (js.where(x > 0, x, 0) ** 2).sum()


@pytest.mark.parametrize("mode", MODES)
def test_a_traced_boolean_mask_raises_naming_the_op_the_shapes_and_the_fix(mode):
    x = jnp.asarray(_draw(5))
    with pytest.raises(IndexError, match=r"getitem.*mask of shape \(5,\).*js\.where") as caught:
        jax.jit(js.to_jax(_masked_sum, mode=mode))(x)
    assert not isinstance(caught.value, jax.errors.NonConcreteBooleanIndexError)
    assert any("_masked_sum" in note for note in caught.value.__notes__)
    want = jax.grad(lambda a: (jnp.where(a > 0, a, 0) ** 2).sum())(x)
    np.testing.assert_allclose(jax.jit(jax.grad(js.to_jax(_where_sum, mode=mode)))(x), want,
                               rtol=1e-6)
    np.testing.assert_allclose(jax.grad(js.to_jax(_masked_sum, mode=mode))(x), want, rtol=1e-6)


def test_a_traced_boolean_mask_in_an_assignment_raises_too():
    def clipped(x):
        y = x.clone()
        y[x > 0] = 0.0
        return y.sum()

    with pytest.raises(IndexError, match=r"index_put.*mask of shape \(3,\).*js\.where"):
        jax.jit(js.to_jax(clipped))(jnp.ones(3))
