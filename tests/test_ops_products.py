"""bmm, addmm, baddbmm and `js.linalg`'s det, inv and solve against torch: values, dtypes,
node names, first and second gradients on both backends, under to_jax, and PyTorch's
errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from ops_oracle import check_against_torch, pair, uniform_values

import jaxstream as js
import jaxstream.linalg as LA

pytestmark = pytest.mark.oracle


def _products(torch):
    """name -> (jaxstream call, torch call, input shapes)."""
    return {
        "bmm": (js.bmm, torch.bmm, [(2, 3, 4), (2, 4, 2)]),
        "bmm_method": (lambda a, b: a.bmm(b) ** 2, lambda a, b: a.bmm(b) ** 2,
                       [(2, 2, 3), (2, 3, 2)]),
        "addmm": (js.addmm, torch.addmm, [(2, 3), (2, 4), (4, 3)]),
        "addmm_row": (lambda c, a, b: js.addmm(c, a, b, beta=0.5, alpha=-2.0) ** 2,
                      lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=-2.0) ** 2,
                      [(3,), (2, 4), (4, 3)]),
        "addmm_column": (lambda c, a, b: c.addmm(a, b, alpha=3.0) * c,
                         lambda c, a, b: c.addmm(a, b, alpha=3.0) * c, [(2, 1), (2, 4), (4, 3)]),
        "addmm_beta_0": (lambda c, a, b: js.addmm(c, a, b, beta=0) ** 2,
                         lambda c, a, b: torch.addmm(c, a, b, beta=0) ** 2,
                         [(2, 3), (2, 4), (4, 3)]),
        "baddbmm": (js.baddbmm, torch.baddbmm, [(2, 3, 2), (2, 3, 4), (2, 4, 2)]),
        "baddbmm_scaled": (lambda c, a, b: c.baddbmm(a, b, beta=2.0, alpha=0.5) ** 2,
                           lambda c, a, b: c.baddbmm(a, b, beta=2.0, alpha=0.5) ** 2,
                           [(2,), (3, 2, 4), (3, 4, 2)]),
    }


PRODUCTS = ["bmm", "bmm_method", "addmm", "addmm_row", "addmm_column", "addmm_beta_0",
            "baddbmm", "baddbmm_scaled"]


# Every case on NumPy, one or two per op on JAX (each JAX case compiles its kernels);
# test_the_ops_trace_under_jit_and_grad runs every op on JAX again.
@pytest.mark.parametrize("backend, name", [("numpy", n) for n in PRODUCTS]
                         + [("jax", n) for n in ("bmm", "addmm_row", "baddbmm")])
def test_products_match_torch(torch, backend, name):
    js_fn, torch_fn, shapes = _products(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, uniform_values(1, *shapes), backend)


def test_beta_0_leaves_the_input_out_nan_and_all(torch):
    c = js.tensor(np.full((2, 2), np.nan), requires_grad=True)
    a = js.tensor(np.ones((2, 2)), requires_grad=True)
    y = js.addmm(c, a, a, beta=0)
    np.testing.assert_array_equal(arr(y), torch.addmm(torch.tensor(np.full((2, 2), np.nan)),
                                                      torch.ones(2, 2, dtype=torch.float64),
                                                      torch.ones(2, 2, dtype=torch.float64),
                                                      beta=0).numpy())
    y.sum().backward()
    np.testing.assert_array_equal(arr(c.grad), np.zeros((2, 2)))


def _well_conditioned(seed, *shapes):
    """Matrices (and batches of them) with a heavy diagonal, and right-hand sides."""
    values = uniform_values(seed, *shapes, low=-1.0, high=1.0)
    return [v + 3.0 * np.eye(v.shape[-1]) if v.ndim >= 2 and v.shape[-1] == v.shape[-2]
            and i == 0 else v for i, v in enumerate(values)]


def _linalg(torch):
    T = torch.linalg
    return {
        "det": (LA.det, T.det, [(3, 3)]),
        "det_batch": (lambda a: LA.det(a) ** 2, lambda a: T.det(a) ** 2, [(2, 3, 3)]),
        "det_method": (lambda a: a.det() * a.sum(), lambda a: a.det() * a.sum(), [(2, 2)]),
        "inv": (LA.inv, T.inv, [(3, 3)]),
        "inverse_batch": (lambda a: a.inverse() ** 2, lambda a: a.inverse() ** 2, [(2, 2, 2)]),
        "solve": (LA.solve, T.solve, [(3, 3), (3, 2)]),
        "solve_vector": (lambda a, b: LA.solve(a, b) ** 2, lambda a, b: T.solve(a, b) ** 2,
                         [(3, 3), (3,)]),
        "solve_vectors": (LA.solve, T.solve, [(2, 3, 3), (2, 3)]),
        "solve_broadcast": (lambda a, b: LA.solve(a, b) ** 2, lambda a, b: T.solve(a, b) ** 2,
                            [(3, 3), (2, 3, 2)]),
        "solve_right": (lambda a, b: LA.solve(a, b, left=False) ** 2,
                        lambda a, b: T.solve(a, b, left=False) ** 2, [(3, 3), (2, 3)]),
    }


LINALG = ["det", "det_batch", "det_method", "inv", "inverse_batch", "solve", "solve_vector",
          "solve_vectors", "solve_broadcast", "solve_right"]


@pytest.mark.parametrize("backend, name", [("numpy", n) for n in LINALG] + [
    ("jax", n) for n in ("det_batch", "inv", "solve_vector", "solve_broadcast")])
def test_linalg_matches_torch_to_the_second_order(torch, backend, name):
    js_fn, torch_fn, shapes = _linalg(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, _well_conditioned(2, *shapes), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_names_are_torchs(torch, backend):
    a, ta = pair(torch, _well_conditioned(3, (3, 3))[0], backend)
    b, tb = pair(torch, uniform_values(4, (2, 3, 3))[0], backend)
    calls = [lambda m, a, b: b.bmm(b), lambda m, a, b: a.addmm(a, a),
             lambda m, a, b: b.baddbmm(b, b), lambda m, a, b: m.linalg.det(a),
             lambda m, a, b: m.linalg.inv(a), lambda m, a, b: m.linalg.solve(a, a[0]),
             lambda m, a, b: m.linalg.solve(a, b)]
    for call in calls:
        assert call(js, a, b).grad_fn.name() == call(torch, ta, tb).grad_fn.name()


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_products_keep_their_dtype(torch, backend):
    a = np.arange(12, dtype=np.int32).reshape(2, 2, 3)
    b = np.arange(12, dtype=np.int32).reshape(2, 3, 2)
    for call in (lambda m, a, b: m.bmm(a, b), lambda m, a, b: m.addmm(a[0, 0, :2], a[0], b[0]),
                 lambda m, a, b: m.baddbmm(a[0, 0, :2], a, b, beta=2)):
        ours = call(js, js.tensor(a, backend=backend), js.tensor(b, backend=backend))
        theirs = call(torch, torch.tensor(a), torch.tensor(b))
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(arr(ours), theirs.numpy())


def test_the_ops_trace_under_jit_and_grad(torch):
    """Every op of this module inside one traced loss: jax.jit(jax.grad(to_jax(loss)))
    matches torch."""
    values = _well_conditioned(5, (3, 3), (2, 3, 3), (3,))

    def loss(m, a, b, v):
        y = m.bmm(b, b).sum() + m.addmm(v, a, a, alpha=0.5).sum() + m.baddbmm(v, b, b).sum()
        return (y + m.linalg.det(a) + (m.linalg.inv(a) ** 2).sum()
                + (m.linalg.solve(a, v) ** 2).sum() + (m.linalg.solve(b, b) ** 2).sum())

    got = jax.jit(jax.grad(js.to_jax(lambda *xs: loss(js, *xs)), argnums=(0, 1, 2)))(
        *(jnp.asarray(v, dtype=jnp.float32) for v in values))
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    want = torch.autograd.grad(loss(torch, *txs), txs)
    for g, tg in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("call, error, phrases", [
    (lambda: js.bmm(js.ones(2, 3), js.ones(2, 3, 2)), RuntimeError,
     ["batch1 must be a 3D tensor"]),
    (lambda: js.bmm(js.ones(2, 2, 3), js.ones(3, 3, 2)), RuntimeError,
     ["Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3]."]),
    (lambda: js.bmm(js.ones(2, 2, 3), js.ones(2, 3, 2, dtype="float64")), RuntimeError,
     ["expected scalar type Float but found Double", "do not promote"]),
    (lambda: js.bmm(js.ones(2, 2, 3) > 0, js.ones(2, 3, 2) > 0), NotImplementedError,
     ["\"bmm\" not implemented for 'Bool'"]),
    (lambda: js.addmm(js.ones(3), js.ones(2, 3, 1), js.ones(3, 3)), RuntimeError,
     ["mat1 must be a matrix, got 3-D tensor"]),
    (lambda: js.addmm(js.ones(2), js.ones(2, 3), js.ones(4, 3)), RuntimeError,
     ["mat1 and mat2 shapes cannot be multiplied (2x3 and 4x3)"]),
    (lambda: js.addmm(js.ones(4), js.ones(2, 3), js.ones(3, 3)), RuntimeError,
     ["The expanded size of the tensor (3) must match the existing size (4) at non-singleton "
      "dimension 1.  Target sizes: [2, 3].  Tensor sizes: [4]"]),
    (lambda: js.addmm(js.ones(3, dtype="float64"), js.ones(2, 3), js.ones(3, 3)), RuntimeError,
     ["self and mat2 must have the same dtype, but got Double and Float"]),
    (lambda: js.baddbmm(js.ones(3, dtype="float64"), js.ones(2, 2, 3), js.ones(2, 3, 3)),
     RuntimeError, ["Input dtypes must be the same, got: input double, batch1: float, "
                    "batch2: float"]),
    (lambda: js.baddbmm(js.ones(4), js.ones(2, 2, 3), js.ones(2, 3, 3)), RuntimeError,
     ["The expanded size of the tensor (3) must match the existing size (4) at non-singleton "
      "dimension 2.  Target sizes: [2, 2, 3].  Tensor sizes: [4]"]),
    (lambda: LA.det(js.ones(2, 3)), RuntimeError,
     ["linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices"]),
    (lambda: LA.det(js.ones(2, 2, dtype="int64")), RuntimeError,
     ["linalg.det: Expected a floating point or complex tensor as input. Got Long"]),
    (lambda: LA.inv(js.ones(3)), RuntimeError,
     ["linalg.inv: The input tensor A must have at least 2 dimensions."]),
    (lambda: LA.inv(js.ones(2, 2)), LA.LinAlgError,
     ["linalg.inv:", "the input matrix is singular"]),
    (lambda: LA.solve(js.eye(2), js.ones(3)), RuntimeError,
     ["linalg.solve: Incompatible shapes of A and B for the equation AX = B (2x2 and 3x1)"]),
    (lambda: LA.solve(js.eye(2), js.ones(3, 2)), RuntimeError,
     ["Incompatible shapes of A and B for the equation AX = B (2x2 and 3x2)"]),
    (lambda: LA.solve(js.eye(2), js.ones(2, dtype="float64")), RuntimeError,
     ["linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B "
      "of type Double instead"]),
    (lambda: LA.solve(js.ones(2, 2), js.ones(2)), LA.LinAlgError,
     ["The solver failed because the input matrix is singular"]),
], ids=["bmm_2d", "bmm_sizes", "bmm_dtypes", "bmm_bool", "addmm_3d", "addmm_shapes",
        "addmm_input", "addmm_dtypes", "baddbmm_dtypes", "baddbmm_input", "det_not_square",
        "det_int", "inv_vector", "inv_singular", "solve_vector_size", "solve_matrix_size",
        "solve_dtypes", "solve_singular"])
def test_bad_arguments_raise_torchs_errors(call, error, phrases):
    with pytest.raises(error) as excinfo:
        call()
    for phrase in phrases:
        assert phrase in error_text(excinfo)
    assert issubclass(LA.LinAlgError, RuntimeError)
