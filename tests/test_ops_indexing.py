"""gather, scatter_add, index_select, sort, argsort and topk against torch: values, the
named tuples, dtypes, node names, first and second gradients on both backends (repeated
indices adding up), under to_jax, and PyTorch's errors (out-of-range indices too, which
JAX alone would clamp)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, pair, same_structure, uniform_values

import jaxstream as js
from jaxstream.jax_interop import to_jax

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=12, deadline=None)

GATHER = np.array([[0, 2, 2], [1, 0, 2]])  # repeats, into (3, 4) along 1 or (2, 3) along 0


def _index(m, values, like):
    return js.tensor(values, backend=like.backend) if m is js else m.tensor(values)


def _cases(torch):
    """name -> (call(m, *inputs) for m in (js, torch), input shapes)."""
    return {
        "gather_dim1": (lambda m, x: m.gather(x, 1, _index(m, GATHER, x)) ** 2, [(3, 4)]),
        "gather_dim0": (lambda m, x: x.gather(0, _index(m, GATHER[:, :2] % 2, x)) ** 2,
                        [(2, 3)]),
        "gather_last": (lambda m, x: m.gather(x, -1, _index(m, GATHER[:1], x)) * x[:1, :3],
                        [(2, 4)]),
        "scatter_add": (lambda m, x, s: m.scatter_add(x, 1, _index(m, GATHER, x), s) ** 2,
                        [(2, 4), (2, 3)]),
        # torch's ScatterAddBackward0 gives a src larger than the index a gradient of the
        # index's shape, which its engine refuses: its src is cut to the index there
        "scatter_add_larger_src": (lambda m, x, s: x.scatter_add(
            0, _index(m, GATHER % 2, x), s if m is js else s[:2, :3]) * x, [(2, 3), (3, 4)]),
        "index_select": (lambda m, x: m.index_select(x, 0, _index(m, [2, 0, 2], x)) ** 2,
                         [(3, 2)]),
        "index_select_dim1": (lambda m, x: x.index_select(-1, _index(m, np.array(1), x)) * x,
                              [(3, 2)]),
        "sort": (lambda m, x: m.sort(x).values ** 2, [(3, 4)]),
        "sort_descending": (lambda m, x: x.sort(0, True).values * x, [(3, 4)]),
        "topk": (lambda m, x: m.topk(x, 2).values ** 2, [(3, 4)]),
        "topk_smallest": (lambda m, x: x.topk(3, dim=0, largest=False).values ** 2, [(4, 2)]),
    }


NAMES = ["gather_dim1", "gather_dim0", "gather_last", "scatter_add", "scatter_add_larger_src",
         "index_select", "index_select_dim1", "sort", "sort_descending", "topk", "topk_smallest"]


# Every case on NumPy, one per op on JAX (each JAX case compiles its kernels);
# test_the_ops_trace_under_jit_and_grad runs every op on JAX again.
JAX_NAMES = ["gather_dim1", "scatter_add", "index_select", "sort_descending", "topk_smallest"]


@pytest.mark.parametrize("backend, name", [("numpy", n) for n in NAMES]
                         + [("jax", n) for n in JAX_NAMES])
def test_indexing_ops_match_torch(torch, backend, name):
    call, shapes = _cases(torch)[name]
    check_against_torch(torch, lambda *xs: call(js, *xs), lambda *xs: call(torch, *xs),
                        uniform_values(1, *shapes), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_and_topk_return_torchs_named_tuples(torch, backend):
    """NaN counts as the largest; ties keep their order in a stable sort. Which of tied
    elements topk picks PyTorch leaves open: its values and that each index holds its value
    are checked."""
    values = np.array([[3.0, np.nan, 1.0, 3.0, -2.0], [0.5, 0.5, 0.5, -1.0, 4.0]], np.float32)
    x, tx = js.tensor(values, backend=backend), torch.tensor(values)
    for call in (lambda x: x.sort(stable=True), lambda x: x.sort(dim=0),
                 lambda x: x.sort(dim=1, descending=True, stable=True)):
        same_structure(call(x), call(tx), backend)
    same_structure(x.argsort(1, True, stable=True), tx.argsort(dim=1, descending=True, stable=True),
                   backend)
    for k, dim, largest in ((2, -1, True), (3, 1, False), (0, 1, True), (1, 0, True)):
        ours, theirs = x.topk(k, dim, largest), tx.topk(k, dim, largest)
        assert type(ours).__name__ == type(theirs).__name__ == "topk"
        assert ours.values is ours[0] and ours.indices is ours[1]
        same_structure(ours.values, theirs.values, backend)
        np.testing.assert_array_equal(arr(x.gather(dim, ours.indices)), arr(ours.values))


@settings(HYPOTHESIS)
@given(values=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                         elements=st.integers(-2, 2).map(float)), data=st.data())
def test_any_shape_and_ties_match_torchs_stable_order(torch, values, data):
    dim = data.draw(st.integers(-max(values.ndim, 1), max(values.ndim, 1) - 1))
    descending = data.draw(st.booleans())
    x, tx = pair(torch, values, "numpy")
    same_structure(x.sort(dim, descending, stable=True),
                   tx.sort(dim=dim, descending=descending, stable=True),
                   "numpy")
    same_structure(js.argsort(x, dim, descending, stable=True),
                   torch.argsort(tx, dim=dim, descending=descending, stable=True), "numpy")
    k = data.draw(st.integers(0, values.shape[dim] if values.ndim else 1))
    ours, theirs = x.topk(k, dim), tx.topk(k, dim)
    same_structure(ours.values, theirs.values, "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_names_are_torchs(torch, backend):
    x, tx = pair(torch, uniform_values(2, (3, 4))[0], backend)
    calls = [lambda m, x: x.gather(1, _index(m, GATHER, x)),
             lambda m, x: x.scatter_add(1, _index(m, GATHER, x), x[:, :3]),
             lambda m, x: x.index_select(0, _index(m, [1, 1], x)),
             lambda m, x: x.sort().values, lambda m, x: x.topk(2).values]
    for call in calls:
        assert call(js, x).grad_fn.name() == call(torch, tx).grad_fn.name()


def test_scatter_add_in_place_matches_torch(torch):
    x, tx = pair(torch, uniform_values(3, (2, 4))[0], "numpy")
    s, ts = pair(torch, uniform_values(4, (2, 3))[0], "numpy")
    y, ty = x * 2.0, tx * 2.0
    y.scatter_add_(1, js.tensor(GATHER), s)
    ty.scatter_add_(1, torch.tensor(GATHER), ts)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    for ours, theirs in ((y, ty.detach()), (x.grad, tx.grad), (s.grad, ts.grad)):
        np.testing.assert_allclose(arr(ours), theirs.numpy())


def test_int32_indices_and_values_keep_torchs_dtypes(torch):
    x = np.array([[3, 1, 2], [0, 5, 4]], np.int32)
    index = np.array([[0, 0], [1, 0]], np.int32)
    ours, theirs = js.tensor(x), torch.tensor(x)
    same_structure(ours.gather(1, js.tensor(index)), theirs.gather(1, torch.tensor(index)),
                   "numpy")
    same_structure(ours.index_select(1, js.tensor(index[0])),
                   theirs.index_select(1, torch.tensor(index[0])), "numpy")
    same_structure(ours.sort(1), theirs.sort(1), "numpy")
    same_structure(ours.topk(2), theirs.topk(2), "numpy")


def test_the_ops_trace_under_jit_and_grad(torch):
    """Every op of this module inside one traced loss: jax.jit(jax.grad(to_jax(loss)))
    matches torch."""
    values = uniform_values(5, (3, 4), (3, 3))

    def loss(m, x, s):
        picked = m.gather(x, 1, _index(m, GATHER[:, :2].repeat(2, 0)[:3], x))
        added = m.scatter_add(x, 1, _index(m, np.vstack([GATHER, GATHER[:1]]), x), s)
        chosen = m.index_select(x, 0, _index(m, [2, 2, 0], x))
        return ((picked ** 2).sum() + (added ** 2).sum() + (chosen * x).sum()
                + (m.sort(x, 1).values * x).sum() + (m.topk(x, 2, 0).values ** 3).sum())

    got = jax.jit(jax.grad(to_jax(lambda x, s: loss(js, x, s)), argnums=(0, 1)))(
        *(jnp.asarray(v, dtype=jnp.float32) for v in values))
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    want = torch.autograd.grad(loss(torch, *txs), txs)
    for g, tg in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=2e-3, atol=2e-4)


X = np.arange(6.0, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call, error, phrases", [
    (lambda b: js.gather(js.tensor(X, backend=b), 0, js.tensor([[0.0, 1.0]], backend=b)),
     RuntimeError, ["gather(): Expected dtype int32/int64 for index"]),
    (lambda b: js.gather(js.tensor(X, backend=b), 0, js.tensor([0, 1], backend=b)),
     RuntimeError, ["Index tensor must have the same number of dimensions as input tensor"]),
    (lambda b: js.gather(js.tensor(X, backend=b), 0, js.tensor([[2, 0]], backend=b)),
     RuntimeError, ["index 2 is out of bounds for dimension 0 with size 2"]),
    (lambda b: js.gather(js.tensor(X, backend=b), 0, js.tensor([[-1, 0]], backend=b)),
     RuntimeError, ["index -1 is out of bounds for dimension 0 with size 2"]),
    (lambda b: js.gather(js.tensor(X, backend=b), 1, js.tensor([[0], [1], [0]], backend=b)),
     RuntimeError, ["Size does not match at dimension 0 expected index [3, 1] to be no larger "
                    "than self [2, 3] apart from dimension 1"]),
    (lambda b: js.gather(js.tensor(X, backend=b), 2, js.tensor([[0]], backend=b)),
     IndexError, ["Dimension out of range (expected to be in range of [-2, 1], but got 2)"]),
    (lambda b: js.scatter_add(js.tensor(X, backend=b), 0, js.tensor([[0, 1]], backend=b),
                              js.ones(1, 1, backend=b, dtype="int32")),
     RuntimeError, ["scatter(): Expected self.dtype to be equal to src.dtype"]),
    (lambda b: js.scatter_add(js.tensor(X, backend=b), 0, js.tensor([[0, 1]], backend=b),
                              js.ones(1, 1, backend=b)),
     RuntimeError, ["Expected index [1, 2] to be no larger than self [2, 3] apart from "
                    "dimension 0 and to be no larger size than src [1, 1]"]),
    (lambda b: js.scatter_add(js.tensor(X, backend=b), 0, js.tensor([[5, 0]], backend=b),
                              js.tensor(X, backend=b)),
     RuntimeError, ["index 5 is out of bounds for dimension 0 with size 2"]),
    (lambda b: js.index_select(js.tensor(X, backend=b), 0, js.tensor([[0]], backend=b)),
     IndexError, ["index_select(): Index is supposed to be a vector"]),
    (lambda b: js.index_select(js.tensor(X, backend=b), 0, js.tensor([1.0], backend=b)),
     RuntimeError, ["index_select(): Expected dtype int32 or int64 for index"]),
    (lambda b: js.index_select(js.tensor(X, backend=b), 0, js.tensor([2], backend=b)),
     IndexError, ["index out of range in self"]),
    (lambda b: js.index_select(js.tensor(X, backend=b), 0, js.tensor([-1], backend=b)),
     IndexError, ["index out of range in self"]),
    (lambda b: js.topk(js.tensor(X, backend=b), 4), RuntimeError,
     ["selected index k out of range"]),
    (lambda b: js.sort(js.tensor(X, backend=b), 2), IndexError, ["Dimension out of range"]),
], ids=["gather_float_index", "gather_ndim", "gather_too_big", "gather_negative",
        "gather_index_larger", "gather_bad_dim", "scatter_dtype", "scatter_src_smaller",
        "scatter_too_big", "index_select_matrix", "index_select_float", "index_select_too_big",
        "index_select_negative", "topk_k", "sort_dim"])
def test_bad_arguments_raise_torchs_errors(backend, call, error, phrases):
    with pytest.raises(error) as excinfo:
        call(backend)
    for phrase in phrases:
        assert phrase in error_text(excinfo)


def test_an_index_on_another_backend_is_refused():
    with pytest.raises(RuntimeError, match=r"gather\(\): expected the index on the input's "
                                           r"backend and device"):
        js.gather(js.tensor(X), 0, js.tensor([[0, 1, 0]], backend="jax"))


def test_a_compiled_step_with_these_ops_matches_eager():
    """A training step whose indices come from the traced values themselves (topk's, then
    gather and scatter_add at them, where no host check can run) under js.compile: the
    same losses and parameters as the eager step, with ops of the other new modules."""
    rng = np.random.default_rng(6)
    values = rng.normal(size=(3, 4)).astype(np.float32)

    def make():
        w = js.tensor(values, backend="jax", requires_grad=True)

        def step(x):
            top = (x * w).topk(2, dim=1)
            picked = w.gather(1, top.indices) * top.values
            spread = js.zeros(3, 4, backend="jax").scatter_add(1, top.indices, picked)
            loss = ((spread + w.sort(1).values.cumprod(1)) ** 2).sum() + js.tril(w[:, :3]).sum()
            loss.backward()
            with js.no_grad():
                w.sub_(w.grad * 0.01)
                w.grad = None
            return loss

        return w, step

    (w_eager, eager), (w_compiled, step) = make(), make()
    compiled = js.compile(step)
    x = js.tensor(rng.normal(size=(3, 4)).astype(np.float32), backend="jax")
    for _ in range(2):
        np.testing.assert_allclose(arr(compiled(x)), arr(eager(x)), rtol=1e-5)
        np.testing.assert_allclose(arr(w_compiled), arr(w_eager), rtol=1e-5, atol=1e-6)
