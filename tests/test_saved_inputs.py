"""An op saves an input only when a vjp that reads it may run (`OpDef.save_for`, Note
[Objects the collector tracks per node]), as PyTorch saves a variable only for a gradient
that may be computed: the input no running vjp reads may then be changed in place before
the backward, and is freed with the forward's other temporaries.

Each case differentiates with respect to every subset of its inputs on both backends, and
checks the gradients against `jax.grad` of the same function, with the inputs that need no
gradient changed in place after the forward wherever the op did not save them.
"""

from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, error_text

import jaxstream as js
from jaxstream.ops.opdef import OpDef

RNG = np.random.default_rng(7)

# name -> (the op in jaxstream, the same in jnp, the inputs' shapes, what each input's
# vjp reads: the op's save_for)
CASES = {
    "mul": (lambda a, b: a * b, jnp.multiply, [(3,), (3,)], ((1,), (0,))),
    "div": (lambda a, b: a / b, jnp.divide, [(3,), (3,)], ((1,), (0, 1))),
    "matmul": (lambda a, b: a @ b, jnp.matmul, [(2, 4), (4, 3)], ((1,), (0,))),
    "matvec": (lambda a, b: a @ b, jnp.matmul, [(2, 4), (4,)], ((1,), (0,))),
    "vecmat": (lambda a, b: a @ b, jnp.matmul, [(4,), (4, 3)], ((1,), (0,))),
    "dot": (lambda a, b: a @ b, jnp.matmul, [(4,), (4,)], ((1,), (0,))),
    "linear": (
        lambda x, w, b: js.linear(x, w, b),
        lambda x, w, b: x @ w.T + b,
        [(5, 4), (3, 4), (3,)],
        ((1,), (0,), ()),
    ),
}
SUBSETS = [(0,), (1,), (0, 1)]


def _values(shapes):
    # Away from zero: `div` divides by the second input.
    return [RNG.uniform(0.5, 1.5, shape).astype(np.float32) for shape in shapes]


def _inputs(values, wanted, backend):
    """A non-leaf tensor per value (so it may change in place): requiring grad through a
    leaf of its own where `wanted`, else a constant."""
    leaves, inputs = [], []
    for i, v in enumerate(values):
        leaf = js.tensor(v, backend=backend, requires_grad=i in wanted)
        leaves.append(leaf)
        inputs.append(leaf * 1.0 if i in wanted else leaf.clone())
    return leaves, inputs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wanted", SUBSETS, ids=lambda w: "grad of " + "+".join(map(str, w)))
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_with_an_unsaved_input_changed_in_place(name, wanted, backend):
    fn, reference, shapes, save_for = CASES[name]
    values = _values(shapes)
    leaves, inputs = _inputs(values, wanted, backend)
    out = fn(*inputs)
    needed = {j for i in wanted for j in save_for[i]}
    for i, t in enumerate(inputs):
        if i not in needed:  # no running vjp reads it: a later change must not matter
            t.mul_(3.0)
    out.sum().backward()
    expected = jax.grad(lambda *xs: reference(*xs).sum(), argnums=wanted)(*values)
    for i, want in zip(wanted, expected, strict=True):
        np.testing.assert_allclose(
            np.asarray(leaves[i].grad.numpy()), np.asarray(want), rtol=1e-5, atol=1e-6,
            err_msg=f"{name}: gradient of input {i}",
        )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_saved_input_changed_in_place_is_still_an_error(name, backend):
    fn, _, shapes, _ = CASES[name]
    leaves, inputs = _inputs(_values(shapes), (0, 1), backend)
    out = fn(*inputs)
    inputs[0].mul_(3.0)  # read by the second input's vjp, which runs
    with pytest.raises(RuntimeError) as excinfo:
        out.sum().backward()
    assert "modified by an inplace operation" in error_text(excinfo)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_chain_by_a_number_frees_its_intermediates(backend):
    x = js.tensor(np.ones(4, np.float32), backend=backend, requires_grad=True)
    h = x * 2.0
    alive = weakref.ref(h)
    y = h * 3.0  # saves 3.0 alone: the gradient of h reads nothing else
    del h
    gc.collect()
    assert alive() is None
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad.numpy()), np.full(4, 6.0, np.float32))


def test_an_input_both_vjps_read_keeps_its_tensor_until_backward():
    x = js.tensor(np.ones(4, np.float32), requires_grad=True)
    w = js.tensor(np.full(4, 2.0, np.float32), requires_grad=True)
    h = x * 1.0
    alive = weakref.ref(h)
    y = h * w  # w requires grad: its vjp reads h
    del h
    gc.collect()
    assert alive() is not None
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(w.grad.numpy()), np.ones(4, np.float32))


def test_double_backward_through_a_product_with_a_constant():
    x = js.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    c = js.tensor(np.array([4.0, 5.0, 6.0]))
    (g,) = js.grad((x * x * c).sum(), [x], create_graph=True)
    (gg,) = js.grad(g.sum(), [x])
    np.testing.assert_allclose(g.numpy(), 2 * np.array([1.0, 2.0, 3.0]) * c.numpy())
    np.testing.assert_allclose(gg.numpy(), 2 * c.numpy())


def test_an_op_takes_save_inputs_or_save_for_not_both():
    with pytest.raises(ValueError, match="save_inputs or save_for"):
        OpDef("twice", None, lambda xp, a: a, None, save_inputs=(0,), save_for=((0,),))
