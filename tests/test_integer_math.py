"""gcd, lcm, the shifts (and `<<`, `>>`), ldexp, frexp, i0, mvlgamma and their in-place forms
against torch: values, dtypes, first gradients (second for i0 and mvlgamma) and errors, on
NumPy and a few on JAX. The draws are in test_more_draws.py."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, raises_saying, same_integers

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
A, B = [12, -18, 0, 7, 0, 2**40], [8, 24, 5, 0, 0, 3**20]


# ------------------------------------------------------------------ integers
def test_gcd_and_lcm_match_torch():
    for name in ("gcd", "lcm"):
        same_integers(getattr(js, name)(js.tensor(A), js.tensor(B)),
             getattr(torch, name)(torch.tensor(A), torch.tensor(B)), "numpy")
        same_integers(getattr(js.tensor(A, dtype="int32"), name)(js.tensor(B)),
             getattr(torch.tensor(A).int(), name)(torch.tensor(B)), "numpy")
        t, tt = js.tensor(A[:5], dtype="int32"), torch.tensor(A[:5]).int()
        assert getattr(t, name + "_")(js.tensor(B[:5])) is t
        same_integers(t, getattr(tt, name + "_")(torch.tensor(B[:5])), "numpy")
    same_integers(js.gcd(js.tensor(A[:5], backend="jax"), js.tensor(B[:5], backend="jax")),
         torch.gcd(torch.tensor(A[:5]), torch.tensor(B[:5])), "jax")


def test_gcd_errors_are_torchs():
    raises_saying(TypeError, "gcd(): argument 'other' (position 2) must be Tensor, not int",
                  js.gcd, js.tensor([1]), 4)
    raises_saying(NotImplementedError, "\"gcd_cpu\" not implemented for 'Float'",
                  js.gcd, js.ones(1), js.ones(1))
    raises_saying(NotImplementedError, "\"lcm_cpu\" not implemented for 'Bool'",
                  js.lcm, js.tensor([True]), js.tensor([True]))


SHIFTS = [
    ([1, -3, 5], [1, 2, 70], None), ([16, -16, 5], [1, 2, -1], None),
    ([1, 2], 3, "int32"), ([200], 9, "uint8"), ([1], [9], "int8"), ([True], 1, "bool"),
]


@pytest.mark.parametrize("values, amounts, dtype", SHIFTS)
def test_shifts_match_torch(values, amounts, dtype):
    shifted("numpy", values, amounts, dtype)


@pytest.mark.parametrize("case", [0, 3])
def test_shifts_match_torch_on_jax(case):
    shifted("jax", *SHIFTS[case])


def shifted(backend, values, amounts, dtype):
    x = js.tensor(values, dtype=dtype, backend=backend)
    tx = torch.tensor(values, dtype=getattr(torch, dtype) if dtype else None)
    by = amounts if isinstance(amounts, int) else js.tensor(amounts, dtype=dtype, backend=backend)
    tby = amounts if isinstance(amounts, int) else torch.tensor(
        amounts, dtype=getattr(torch, dtype) if dtype else None)
    same_integers(js.bitwise_left_shift(x, by), torch.bitwise_left_shift(tx, tby), backend)
    same_integers(x >> by, tx >> tby, backend)


def test_shift_operators_and_in_place_forms():
    same_integers(2 << js.tensor([1, 2]), 2 << torch.tensor([1, 2]), "numpy")
    same_integers(64 >> js.tensor([1, 2]), 64 >> torch.tensor([1, 2]), "numpy")
    t, alias = js.tensor([1, 2]), None
    alias = t
    t <<= 2
    assert t is alias
    np.testing.assert_array_equal(arr(t), [4, 8])
    np.testing.assert_array_equal(arr(t.bitwise_right_shift_(1)), [2, 4])
    raises_saying(NotImplementedError, "\"lshift_cpu\" not implemented for 'Float'",
                  js.bitwise_left_shift, js.ones(1), 2)
    with pytest.raises(NotImplementedError, match="rshift_cpu"):
        js.ones(1, dtype="float64") >> 2


# ------------------------------------------------------------------ floating
def test_ldexp_and_frexp_match_torch():
    x = [8.0, -0.3, 0.0, 1.5, float("inf"), float("nan"), 3e-310]
    for dtype in ("float32", "float64"):
        ours, theirs = js.frexp(js.tensor(x, dtype=dtype)), torch.frexp(
            torch.tensor(x, dtype=getattr(torch, dtype)))
        assert type(ours).__name__ == "frexp" and ours._fields == ("mantissa", "exponent")
        for a, b in zip(ours, theirs, strict=True):
            same_integers(a, b, "numpy")
    same_integers(js.ldexp(js.tensor([1, 2]), js.tensor([1, 2])),
                  torch.ldexp(torch.tensor([1, 2]), torch.tensor([1, 2])), "numpy")
    raises_saying(RuntimeError, "torch.frexp() only supports floating-point dtypes", js.frexp,
                  js.tensor([1]))
    raises_saying(TypeError, "ldexp(): argument 'other' (position 2) must be Tensor, not int",
                  js.ldexp, js.ones(2), 3)
    y = js.tensor([3.0, -0.75], requires_grad=True)
    assert js.frexp(y).mantissa.grad_fn.name() == "FrexpBackward0"


@pytest.mark.parametrize("backend", BACKENDS)
def test_floating_functions_match_torch(backend):
    """ldexp's exponents are not negative: torch's backward takes 2 ** other in integers,
    which gives 0 there (ours gives 2 ** other)."""
    ldexp_by = [1, 2, 0]
    check_against_torch(torch, lambda a: js.ldexp(a, js.tensor(ldexp_by, backend=a.backend)),
                        lambda a: torch.ldexp(a, torch.tensor(ldexp_by)), [[0.5, -1.5, 2.0]],
                        backend)
    check_against_torch(torch, lambda a: js.frexp(a).mantissa,
                        lambda a: torch.frexp(a).mantissa, [[13.0, -0.3, 2.5]], backend)


def test_i0_and_mvlgamma_match_torch_to_second_order():
    check_against_torch(torch, js.i0, torch.i0,
                        [[0.0, 1.0, -3.0, 7.9, 8.1, 10.0, 30.0, -50.0]], "numpy")
    check_against_torch(torch, lambda x: js.mvlgamma(x, 3), lambda x: torch.mvlgamma(x, 3),
                        [[2.5, 3.0, 7.0]], "numpy")
    big = [700.0, 1e-3, -20.0]
    np.testing.assert_allclose(arr(js.i0(js.tensor(big, dtype="float64"))),
                               torch.i0(torch.tensor(big, dtype=torch.float64)).numpy(),
                               rtol=1e-14)


def test_i0_and_mvlgamma_of_integers_and_in_place():
    ours = js.i0(js.tensor([1, 2]))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(arr(ours), torch.i0(torch.tensor([1, 2])).numpy(), rtol=1e-6)
    ours, theirs = js.mvlgamma(js.tensor([2, 3]), 2), torch.mvlgamma(torch.tensor([2, 3]), 2)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(arr(ours), theirs.numpy(), rtol=1e-6)
    t = js.tensor([1.0, 2.0])
    assert t.i0_() is t
    np.testing.assert_allclose(arr(t), torch.i0(torch.tensor([1.0, 2.0])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(arr(js.tensor([2.5, 3.0]).mvlgamma_(2)),
                               torch.tensor([2.5, 3.0]).mvlgamma_(2).numpy(), rtol=1e-6)
    raises_saying(RuntimeError, "p has to be greater than or equal to 1", js.mvlgamma,
                  js.ones(2), 0)
