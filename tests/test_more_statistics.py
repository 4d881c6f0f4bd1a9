"""cov, corrcoef, trapezoid (trapz), cumulative_trapezoid, histc and histogram against torch:
values, dtypes, first gradients and errors on NumPy (float64), a few on JAX (float32) and the
histograms inside `js.compile`."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_first_order, close, raises_saying, tensor_of

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle
RNG = np.random.default_rng(1)


def _r(*shape):
    return RNG.standard_normal(shape)


# ------------------------------------------------------------------ statistics
FREQUENCIES = np.array([1, 2, 1, 3, 1])
IMPORTANCE = RNG.uniform(0.1, 1.0, 5)
STATISTICS = {
    "cov": (js.cov, torch.cov, [_r(3, 5)]),
    "cov of a vector, no correction": (lambda x: js.cov(x, correction=0),
                                       lambda x: torch.cov(x, correction=0), [_r(5)]),
    "cov weighted": (
        lambda x: js.cov(x, fweights=js.tensor(FREQUENCIES, backend=x.backend),
                         aweights=tensor_of(IMPORTANCE, x.backend, False)),
        lambda x: torch.cov(x, fweights=torch.tensor(FREQUENCIES),
                            aweights=torch.tensor(IMPORTANCE)), [_r(3, 5)]),
    "corrcoef": (js.corrcoef, torch.corrcoef, [_r(3, 5)]),
    "trapezoid": (js.trapezoid, torch.trapezoid, [_r(2, 5)]),
    "trapezoid dx": (lambda y: js.trapezoid(y, dx=0.5, dim=0),
                     lambda y: torch.trapezoid(y, dx=0.5, dim=0), [_r(2, 5)]),
    "trapezoid x": (js.trapezoid, torch.trapezoid, [_r(2, 5), _r(5)]),
    "trapz x along 0": (lambda y, x: js.trapz(y, x, dim=0), lambda y, x: torch.trapz(y, x, dim=0),
                        [_r(3, 2), _r(3, 2)]),
    "cumulative_trapezoid": (js.cumulative_trapezoid, torch.cumulative_trapezoid, [_r(2, 5)]),
    "cumulative_trapezoid x": (js.cumulative_trapezoid, torch.cumulative_trapezoid,
                               [_r(2, 5), _r(5)]),
}


@pytest.mark.parametrize("name", STATISTICS)
def test_statistics_match_torch(name):
    check_first_order(torch, *STATISTICS[name], "numpy")


@pytest.mark.parametrize("name", ["trapezoid x"])
def test_statistics_match_torch_on_jax(name):
    check_first_order(torch, *STATISTICS[name], "jax")


def test_statistics_of_integers_are_floating():
    m = [[1, 2, 3], [2, 2, 5]]
    for name in ("cov", "corrcoef"):
        close(getattr(js, name)(js.tensor(m)), getattr(torch, name)(torch.tensor(m)).numpy(),
              "jax", name)
    ours = js.cumulative_trapezoid(js.tensor([1, 2, 3]))
    assert ours.dtype == np.float32 and np.all(arr(ours) == [1.5, 4.0])
    assert js.trapezoid(js.ones(2, 0)).shape == (2,)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"), \
            np.errstate(invalid="ignore"):
        assert np.all(np.isnan(arr(js.cov(js.ones(3, 1)))))


@pytest.mark.parametrize("fn, args, kwargs, phrase", [
    (js.cov, (js.ones(2, 2, 2),), {}, "expected input to have two or fewer dimensions"),
    (js.cov, (js.ones(3, 5),), {"fweights": js.ones(5)},
     "expected fweights to have integral dtype but got fweights with Float dtype"),
    (js.cov, (js.ones(3, 5),), {"fweights": js.tensor([1, -2, 1, 3, 1])},
     "fweights cannot be negative"),
    (js.cov, (js.ones(3, 5),), {"aweights": js.ones(4)},
     "expected aweights to have the same numel as there are observations in the input but got "
     "4 != 5"),
    (js.corrcoef, (js.ones(2, 2, 2),), {}, "expected input to have two or fewer dimensions"),
    (js.trapezoid, (js.ones(2, 5), js.ones(4)), {},
     "trapezoid: There must be one `x` value for each sample point"),
])
def test_statistics_errors_are_torchs(fn, args, kwargs, phrase):
    raises_saying(RuntimeError, phrase, fn, *args, **kwargs)


HISTOGRAMS = [
    ([1.0, 2.0, 1.0, 4.0, 2.5], {"bins": 4, "min": 0, "max": 3}),
    ([1.0, 2.0, 1.0, 4.0, 2.5], {"bins": 4}), ([2.0, 2.0], {"bins": 4}),
    ([0.0, 1.0, 3.0, 3.0], {"bins": 3, "min": 0, "max": 3}),
    (RNG.random(200), {"bins": 10, "min": 0, "max": 1}), (RNG.random(50), {"bins": 7}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("values, kwargs", HISTOGRAMS)
def test_histc_matches_torch(values, kwargs, dtype):
    ours = js.histc(js.tensor(np.asarray(values, dtype=dtype), requires_grad=True), **kwargs)
    theirs = torch.histc(torch.tensor(np.asarray(values, dtype=dtype)), **kwargs)
    assert str(ours.dtype) == dtype and not ours.requires_grad
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kwargs", [
    {"bins": 4, "range": (0.0, 3.0)}, {"bins": 4}, {"bins": 2, "density": True},
    {"bins": 3, "weight": [1.0, 2.0, 3.0, 4.0, 5.0]}, {"bins": [0.0, 1.5, 5.0]},
    {"bins": [3.0, 1.0]},
])
def test_histogram_matches_torch(kwargs, dtype):
    values = np.asarray([1.0, 2.0, 1.0, 4.0, 2.5], dtype=dtype)

    def given(to_tensor):
        return {k: to_tensor(np.asarray(v, dtype=dtype)) if k in ("weight", "bins") and
                not isinstance(v, int) else v for k, v in kwargs.items()}

    ours = js.histogram(js.tensor(values), **given(js.tensor))
    theirs = torch.histogram(torch.tensor(values), **given(torch.tensor))
    assert type(ours).__name__ == "histogram" and ours._fields == ("hist", "bin_edges")
    for a, b in zip(ours, theirs, strict=True):
        assert str(a.dtype) == dtype
        np.testing.assert_allclose(arr(a), b.numpy(), rtol=1e-6)
    assert np.array_equal(arr(js.histogram(js.tensor([2.0, 2.0]), 2).bin_edges), [1.5, 2.0, 2.5])


def test_histograms_run_on_jax_and_inside_js_compile():
    values = RNG.random(50).astype(np.float32)
    both = js.compile(lambda x: (js.histc(x, bins=5), js.histogram(x, 4).hist))
    for ours, theirs in zip(both(js.tensor(values, backend="jax")),
                            (torch.histc(torch.tensor(values), 5),
                             torch.histogram(torch.tensor(values), 4).hist), strict=True):
        np.testing.assert_array_equal(arr(ours), theirs.numpy())


@pytest.mark.parametrize("fn, args, error, phrase", [
    (js.histc, (js.tensor([1, 2]),), NotImplementedError,
     "\"histogram_cpu\" not implemented for 'Long'"),
    (js.histc, (js.ones(2), 0), RuntimeError, "bins must be > 0, but got 0 for dimension 0"),
    (js.histc, (js.ones(2), 2, 3, 1), RuntimeError, "torch.histc: max must be larger than min"),
    (js.histc, (js.tensor([1.0, float("inf")]), 3), RuntimeError, "is not finite"),
    (js.histogram, (js.tensor([1, 2]), 2), NotImplementedError,
     "\"histogramdd\" not implemented for 'Long'"),
])
def test_histogram_errors_are_torchs(fn, args, error, phrase):
    raises_saying(error, phrase, fn, *args)
    raises_saying(RuntimeError, "min should not exceed max", js.histogram, js.ones(2), 2,
                  range=(3.0, 1.0))
