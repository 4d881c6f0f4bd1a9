"""The host forms of the softmax losses (Note [Host forms of the softmax losses] in
ops/neural_rules.py): the same bits as the array API forms on every case they take, the same
gradients as the rules they twin, and PyTorch's values and errors.

The training step of a small classifier spends its host time in these kernels, so each one
is a fast path; each test here runs the fast path and the general path on one case (edge
cases included: empty arrays, non-finite rows, ignored targets, non-contiguous and
zero-stride views, every float dtype) and asserts they agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ops_passed_to

import jaxstream as js
from jaxstream.backends import get_backend
from jaxstream.ops import neural_rules as N

XP = get_backend("numpy").xp
RNG = np.random.default_rng(7)


def _logits(shape: tuple, dtype: str = "float32") -> np.ndarray:
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def _non_finite_rows() -> np.ndarray:
    a = _logits((5, 4))
    a[0] = -np.inf  # a row of -inf stays -inf minus nothing (Note [Stable softmax])
    a[1, 2] = np.inf
    a[2, 1] = np.nan
    a[3] = [0.0, -0.0, -np.inf, 1e30]
    return a


LOG_SOFTMAX_CASES = {
    "classifier": (_logits((128, 10)), 1),
    "float64": (_logits((6, 3), "float64"), 1),
    "float16": (_logits((6, 3), "float16"), 1),
    "long rows": (_logits((4, 100)), 1),
    "axis 0": (_logits((7, 3)), 0),
    "spatial": (_logits((2, 5, 3, 4)), 1),
    "one sample": (_logits((6,)), 0),
    "no rows": (np.zeros((0, 5), np.float32), 1),
    "non-finite": (_non_finite_rows(), 1),
    "transposed": (_logits((10, 8)).T, 1),
    "strided": (_logits((8, 12))[::2, ::3], 1),
    "zero stride": (np.broadcast_to(_logits((1, 5)), (4, 5)), 1),
}


@pytest.mark.parametrize("name", sorted(LOG_SOFTMAX_CASES))
def test_log_softmax_host_form_gives_the_array_api_forms_bits(name: str) -> None:
    a, axis = LOG_SOFTMAX_CASES[name]
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.asarray(N._log_softmax_array_api(XP, a, axis))
        got = np.asarray(N._log_softmax(XP, a, axis))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_maximum_over_short_rows_is_numpys_maximum_nan_and_signed_zero_included() -> None:
    a = _logits((300, 7))
    a[3, 2] = np.nan
    a[5] = [0.0, -0.0, -1.0, -2.0, -3.0, -4.0, -5.0]
    got, want = N._kept_max(a, 1), np.max(a, axis=1, keepdims=True)
    assert got.shape == want.shape == (300, 1)
    np.testing.assert_array_equal(got, want)  # NaN where NaN, and 0 == -0


def test_log_softmax_over_an_empty_class_axis_raises_numpys_error_on_both_forms() -> None:
    a = np.zeros((3, 0), np.float32)
    with pytest.raises(ValueError, match="zero-size array"):
        N._log_softmax_array_api(XP, a, 1)
    with pytest.raises(ValueError, match="zero-size array"):
        N._log_softmax(XP, a, 1)


def _targets(shape: tuple, classes: int, dtype: str = "int64", ignored: str = "none",
             ignore_index: int = -100) -> np.ndarray:
    t = RNG.integers(0, classes, shape).astype(dtype)
    if ignored == "some" and t.size:
        t.flat[:: 3] = ignore_index
    elif ignored == "all":
        t[...] = ignore_index
    return t


NLL_CASES = {
    "classifier": (_logits((128, 10)), _targets((128,), 10)),
    "some ignored": (_logits((9, 4)), _targets((9,), 4, ignored="some")),
    "all ignored": (_logits((3, 4)), _targets((3,), 4, ignored="all")),
    "ignore a class": (_logits((9, 4)), _targets((9,), 4, ignored="some", ignore_index=2)),
    "int32 target": (_logits((6, 5)), _targets((6,), 5, "int32")),
    "uint8 target": (_logits((6, 5)), _targets((6,), 5, "uint8")),
    "spatial": (_logits((2, 5, 3, 4)), _targets((2, 3, 4), 5, ignored="some")),
    "one sample": (_logits((6,)), np.array(4)),
    "one ignored sample": (_logits((6,)), np.array(-100)),
    "no samples": (np.zeros((0, 5), np.float32), np.zeros((0,), np.int64)),
    "float64": (_logits((5, 3), "float64"), _targets((5,), 3)),
    "float16": (_logits((5, 3), "float16"), _targets((5,), 3)),
    "strided": (_logits((8, 12))[::2, ::3], _targets((8,), 4)[::2]),
    "zero stride": (np.broadcast_to(_logits((1, 5)), (4, 5)), np.broadcast_to(np.array([3]), (4,))),
}


def _ignore_index(name: str) -> int:
    return 2 if name == "ignore a class" else -100


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "class weights"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(NLL_CASES))
def test_nll_loss_host_form_gives_the_array_api_forms_bits(name: str, reduction: str,
                                                          weighted: bool) -> None:
    log_probs, target = NLL_CASES[name]
    ignore = _ignore_index(name)
    classes = log_probs.shape[1 if log_probs.ndim > 1 else 0]
    weight = (np.linspace(0.5, 2.0, classes).astype(log_probs.dtype) if weighted else None)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.asarray(N._nll_loss_array_api(XP, log_probs, target, weight, reduction,
                                                ignore))
        got = np.asarray(N._nll_loss(XP, log_probs, target, weight, reduction, ignore))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.0 where ignored


def _grad(name: str, reduction: str, create_graph: bool, backend: str = "numpy",
          device: str | None = None) -> np.ndarray:
    """The gradient of `cross_entropy` at the case's log-probabilities taken as logits: by
    the array twins (no create_graph, on the host), by the rules (create_graph)."""
    logits, target = NLL_CASES[name]
    x = js.tensor(np.array(logits), backend=backend, device=device,
                  requires_grad=True)
    t = js.tensor(np.array(target), backend=backend, device=device)
    loss = js.nn.functional.cross_entropy(x, t, reduction=reduction,
                                          ignore_index=_ignore_index(name))
    weights = js.tensor(np.linspace(0.5, 2.0, loss.numel()).astype(logits.dtype)
                        .reshape(loss.shape), backend=backend, device=device)
    (g,) = js.autograd.grad((loss * weights).sum(), [x], create_graph=create_graph)
    return np.asarray(g.numpy())


# A sim device's nodes run on its worker thread, outside this thread's np.errstate.
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(set(NLL_CASES) - {"no samples"}))
def test_the_array_twins_of_cross_entropy_give_the_rules_gradient(name: str,
                                                                  reduction: str) -> None:
    with np.errstate(invalid="ignore", divide="ignore"):
        twins = _grad(name, reduction, create_graph=False)
        rules = _grad(name, reduction, create_graph=True)
        on_sim = _grad(name, reduction, create_graph=False, device="sim:0")
    assert twins.dtype == rules.dtype == NLL_CASES[name][0].dtype
    np.testing.assert_array_equal(twins, rules)
    np.testing.assert_array_equal(on_sim, rules)


TORCH_CASES = [
    (name, backend)
    for name in ("classifier", "some ignored", "ignore a class", "spatial", "one sample",
                 "float64")
    for backend in ("numpy", "jax")
    if not (backend == "jax" and name == "float64")  # JAX holds no float64 in 32-bit mode
]


@pytest.mark.oracle
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("name", "backend"), TORCH_CASES)
def test_cross_entropy_and_its_gradient_match_torch(torch, name, reduction, backend) -> None:
    logits, target = NLL_CASES[name]
    ignore = _ignore_index(name)
    x = js.tensor(logits, backend=backend, requires_grad=True)
    loss = js.nn.functional.cross_entropy(x, js.tensor(target, backend=backend),
                                          reduction=reduction, ignore_index=ignore)
    loss.sum().backward()
    tx = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tx, torch.tensor(target.astype(np.int64)),
                                              reduction=reduction, ignore_index=ignore)
    tloss.sum().backward()
    assert loss.grad_fn.name() == tloss.grad_fn.name()
    tol = {"rtol": 1e-5, "atol": 1e-6} if logits.dtype == np.float32 else {"rtol": 1e-12}
    np.testing.assert_allclose(np.asarray(loss.numpy()), tloss.detach().numpy(), **tol)
    np.testing.assert_allclose(np.asarray(x.grad.numpy()), tx.grad.numpy(), **tol)


def test_on_the_host_the_softmax_losses_backward_dispatches_no_op(monkeypatch) -> None:
    logits, target = NLL_CASES["some ignored"]
    x = js.tensor(logits, requires_grad=True)
    loss = js.nn.functional.cross_entropy(x, js.tensor(target))
    seen = ops_passed_to(monkeypatch, "apply", N)
    loss.backward()
    assert seen == []  # no CLASS_HITS, where, sum, exp or product dispatched
    assert x.grad.shape == logits.shape


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_class_index_errors_are_pytorchs(backend: str) -> None:
    x = js.tensor(_logits((4, 3)), backend=backend)
    F = js.nn.functional
    for bad, first in (([0, 1, 3, 2], 3), ([0, -1, 1, 2], -1), ([0, -7, 1, -100], -7)):
        with pytest.raises(IndexError, match=f"Target {first} is out of bounds"):
            F.cross_entropy(x, js.tensor(np.array(bad), backend=backend))
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        F.nll_loss(x, js.tensor(np.array([0, 1, 3, 2]), backend=backend))
    with pytest.raises(RuntimeError, match="expected scalar type Long"):
        F.cross_entropy(x, js.tensor(np.array([0, 1, 2, 0], np.float32), backend=backend))
    with pytest.raises(ValueError, match=r"expected target shape \(4,\)"):
        F.nll_loss(x, js.tensor(np.array([0, 1, 2]), backend=backend))
    ignored = F.cross_entropy(x, js.tensor(np.array([0, 5, 1, 2]), backend=backend),
                              ignore_index=5)  # an ignore_index past the classes is no error
    assert np.isfinite(np.asarray(ignored.numpy()))
