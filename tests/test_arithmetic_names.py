"""PyTorch's arithmetic, comparison, logical and bitwise names (`add(alpha=)`,
`div(rounding_mode=)`, `eq`..., `equal`, `allclose`, `logical_*`, `bitwise_*`, `addcmul`,
`addcdiv`, `reciprocal`) as functions, Tensor methods and in-place methods, against torch:
values, dtypes, node names, gradients and errors, on random inputs of broadcastable shapes
and several dtypes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import jaxstream as js

torch = pytest.importorskip("torch")

# NumPy warns where torch does not (1 / 0, or (-1) ** 0.5 before an in-place op refuses to
# store it): the values and errors are compared.
pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

HYPOTHESIS = settings(max_examples=100, deadline=None, derandomize=True, database=None)
DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "bool": np.bool_}
NUMPY_DTYPES = list(DTYPES)
"""JAX's 64-bit mode is off: float64 on the NumPy backend only."""

BINARY = [
    ("add", {}), ("add", {"alpha": 2}), ("add", {"alpha": 0.5}), ("add", {"alpha": True}),
    ("sub", {}), ("sub", {"alpha": 3}), ("subtract", {"alpha": -2}), ("mul", {}),
    ("multiply", {}), ("div", {}), ("divide", {}), ("true_divide", {}),
    ("div", {"rounding_mode": "trunc"}), ("div", {"rounding_mode": "floor"}),
    ("divide", {"rounding_mode": "floor"}),
    *((name, {}) for name in ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal",
                              "less", "less_equal", "not_equal", "logical_and", "logical_or",
                              "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor")),
]
DIVISIONS = ("div", "divide", "true_divide")
UNARY = ["neg", "negative", "reciprocal", "logical_not", "bitwise_not"]
NAMES = sorted({name for name, _ in BINARY} | set(UNARY) | {"equal", "allclose", "addcmul",
                                                            "addcdiv"})


# ------------------------------------------------------------------ helpers
def _values(rng, shape, dtype, nonzero=False):
    """Small values exact in every dtype (quarters, for floats); `nonzero`: for divisors
    (torch refuses an integer division by zero, which NumPy and JAX do not check)."""
    if dtype == "bool":
        return np.ones(shape, bool) if nonzero else rng.random(shape) < 0.5
    ints = rng.integers(-6, 7, shape)
    if nonzero:
        ints = rng.integers(1, 7, shape) * rng.choice([-1, 1], shape)
    return (ints / 4 if dtype.startswith("float") else ints).astype(DTYPES[dtype])


def _pair(array, backend):
    """A jaxstream tensor and a torch tensor of `array`, requiring grad where floating."""
    grad = array.dtype.kind == "f"
    return (js.tensor(array, backend=backend, requires_grad=grad),
            torch.tensor(array, requires_grad=grad))


def _torch_dtype(theirs, backend):
    """torch's result dtype as the backend holds it (JAX's integers are 32-bit)."""
    name = str(theirs.dtype).removeprefix("torch.")
    return name.replace("64", "32") if backend == "jax" else name


def _same(ours, theirs, backend):
    """One value, dtype, shape, and the same node (or none) as torch's."""
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == _torch_dtype(theirs, backend)
    expected = theirs.detach().numpy()
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(arr(ours), expected, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(arr(ours), expected)
    assert ours.requires_grad == theirs.requires_grad
    assert (ours.grad_fn and ours.grad_fn.name()) == (theirs.grad_fn and theirs.grad_fn.name())


def _same_gradients(ours, theirs, xs, txs, backend, seed=0):
    """The gradients of every floating input under one random cotangent match torch's."""
    if not theirs.requires_grad:
        return
    w = np.random.default_rng(seed).standard_normal(ours.shape).astype(ours.dtype)
    inputs = [(x, tx) for x, tx in zip(xs, txs, strict=True) if tx.requires_grad]
    try:
        tgrads = torch.autograd.grad((theirs * torch.tensor(w)).sum(), [tx for _, tx in inputs],
                                     allow_unused=True)
    except RuntimeError as failed:  # addcdiv of 0-d tensors with an integer divisor
        assert "can't be cast" in str(failed)
        return
    grads = js.grad((ours * js.tensor(w, backend=backend)).sum(), [x for x, _ in inputs],
                    allow_unused=True)
    for (x, _), g, tg in zip(inputs, grads, tgrads, strict=True):
        expected = np.zeros(x.shape) if tg is None else tg.numpy()
        np.testing.assert_allclose(np.zeros(x.shape) if g is None else arr(g), expected,
                                   rtol=1e-5, atol=1e-5)


def _check(ours_fn, theirs_fn, arrays, backend):
    """`ours_fn` of tensors of `arrays` does what `theirs_fn` of torch's does, error included."""
    xs, txs = zip(*(_pair(a, backend) for a in arrays), strict=True)
    try:
        theirs = theirs_fn(*txs)
    except Exception as expected:
        with pytest.raises(Exception) as excinfo:  # noqa: B017  (the type is compared below)
            ours_fn(*xs)
        assert type(excinfo.value) is type(expected), error_text(excinfo)
        return
    ours = ours_fn(*xs)
    _same(ours, theirs, backend)
    _same_gradients(ours, theirs, xs, txs, backend)


def _called(name, kwargs, form):
    """The op as a function of tensors: `js.name(a, b)`/`torch.name(a, b)` or `a.name(b)`."""
    if form == "method":
        return lambda lib: lambda a, *rest: getattr(a, name)(*rest, **kwargs)
    return lambda lib: lambda *args: getattr(lib, name)(*args, **kwargs)


# ------------------------------------------------------------------ the names exist
def test_every_name_is_a_function_and_a_method_where_torch_has_both():
    for name in NAMES:
        assert hasattr(torch, name) and hasattr(torch.Tensor, name), name
        assert callable(getattr(js, name)) and callable(getattr(js.Tensor, name)), name
        assert name in js.__all__
    for name in IN_PLACE_NAMES:
        assert hasattr(torch.Tensor, name) and callable(getattr(js.Tensor, name)), name


# ------------------------------------------------------------------ binary
@HYPOTHESIS
@given(case=st.sampled_from(BINARY),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       dtypes=st.tuples(st.sampled_from(NUMPY_DTYPES), st.sampled_from(NUMPY_DTYPES)),
       form=st.sampled_from(["function", "method"]), seed=st.integers(0, 2**16))
def test_binary_names_match_torch(case, shapes, dtypes, form, seed):
    rng = np.random.default_rng(seed)
    arrays = [_values(rng, s, d, nonzero=i == 1 and case[0] in DIVISIONS)
              for i, (s, d) in enumerate(zip(shapes.input_shapes, dtypes, strict=True))]
    call = _called(*case, form)
    _check(call(js), call(torch), arrays, "numpy")


# On JAX each op compiles its kernels: one pair of shapes and a few dtypes keep this fast.
JAX_DTYPES = [("float32", "float32"), ("int32", "int32"), ("bool", "float32"), ("int32", "bool")]


@pytest.mark.parametrize("case", BINARY, ids=lambda c: f"{c[0]}{c[1] or ''}")
def test_binary_names_match_torch_on_jax(case):
    rng = np.random.default_rng(1)
    call = _called(*case, "function")
    for first, second in JAX_DTYPES:
        arrays = [_values(rng, (2, 3), first),
                  _values(rng, (3,), second, nonzero=case[0] in DIVISIONS)]
        _check(call(js), call(torch), arrays, "jax")


SCALARS = [("add", 2, {"alpha": 3}), ("sub", 1.5, {}), ("sub", 2, {"alpha": 2}),
           ("mul", 2.5, {}), ("div", 2, {}), ("div", 2, {"rounding_mode": "floor"}),
           ("div", -3, {"rounding_mode": "trunc"}), ("div", 2.5, {"rounding_mode": "floor"}),
           ("eq", 2, {}), ("gt", 0.5, {}), ("le", -1, {}), ("bitwise_and", 3, {}),
           ("bitwise_or", True, {}), ("bitwise_xor", 1.5, {})]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name, number, kwargs", SCALARS, ids=str)
def test_a_python_number_is_the_other_operand_as_in_torch(backend, name, number, kwargs):
    for dtype in ("float32", "int32", "bool"):
        array = _values(np.random.default_rng(2), (2, 3), dtype, nonzero=name == "div")
        _check(lambda x: getattr(x, name)(number, **kwargs),
               lambda x: getattr(x, name)(number, **kwargs), [array], backend)
        _check(lambda x: getattr(js, name)(number, x, **kwargs),
               lambda x: getattr(torch, name)(torch.tensor(number), x, **kwargs), [array],
               backend)


# ------------------------------------------------------------------ unary
@HYPOTHESIS
@given(name=st.sampled_from(UNARY), shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3),
       dtype=st.sampled_from(NUMPY_DTYPES), form=st.sampled_from(["function", "method"]),
       seed=st.integers(0, 2**16))
def test_unary_names_match_torch(name, shape, dtype, form, seed):
    array = _values(np.random.default_rng(seed), shape, dtype, nonzero=name == "reciprocal")
    call = _called(name, {}, form)
    _check(call(js), call(torch), [array], "numpy")


@pytest.mark.parametrize("name", UNARY)
def test_unary_names_match_torch_on_jax(name):
    for dtype in ("float32", "int32", "bool"):
        _check(getattr(js, name), getattr(torch, name),
               [_values(np.random.default_rng(3), (2, 3), dtype, nonzero=True)], "jax")


# ------------------------------------------------------------------ addcmul, addcdiv
@HYPOTHESIS
@given(name=st.sampled_from(["addcmul", "addcdiv"]),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       dtypes=st.tuples(*[st.sampled_from(NUMPY_DTYPES)] * 3),
       value=st.sampled_from([1, 2, -0.5, 1.5]), form=st.sampled_from(["function", "method"]),
       seed=st.integers(0, 2**16))
def test_addcmul_and_addcdiv_match_torch(name, shapes, dtypes, value, form, seed):
    rng = np.random.default_rng(seed)
    arrays = [_values(rng, s, d, nonzero=i == 2)
              for i, (s, d) in enumerate(zip(shapes.input_shapes, dtypes, strict=True))]
    call = _called(name, {"value": value}, form)
    _check(call(js), call(torch), arrays, "numpy")


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_and_addcdiv_match_torch_on_jax(name):
    rng = np.random.default_rng(4)
    arrays = [_values(rng, (2, 3), "float32"), _values(rng, (3,), "float32"),
              _values(rng, (2, 1), "float32", nonzero=True)]
    call = _called(name, {"value": -0.5}, "function")
    _check(call(js), call(torch), arrays, "jax")


# ------------------------------------------------------------------ equal, allclose
CLOSE_CASES = {
    "same": ([1.0, 2.0], [1.0, 2.0], {}),
    "differ": ([1.0, 2.0], [1.0, 2.5], {}),
    "within_rtol": ([1.0, 2.0], [1.0, 2.00001], {}),
    "loose": ([1.0, 2.0], [1.0, 2.1], {"rtol": 0.1}),
    "atol": ([0.0], [1e-9], {}),
    "nan": ([np.nan, 1.0], [np.nan, 1.0], {}),
    "equal_nan": ([np.nan, 1.0], [np.nan, 1.0], {"equal_nan": True}),
    "broadcast": ([1.0, 1.0], [[1.0, 1.0]], {}),
    "mismatch": ([1.0, 2.0], [1.0, 2.0, 3.0], {}),
}


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("case", CLOSE_CASES)
def test_equal_and_allclose_are_python_bools_as_torchs(backend, case):
    a, b, kwargs = CLOSE_CASES[case]
    x, y = (js.tensor(np.float32(v), backend=backend) for v in (a, b))
    tx, ty = (torch.tensor(np.float32(v)) for v in (a, b))
    assert x.equal(y) is js.equal(x, y) is torch.equal(tx, ty)
    if case == "mismatch":
        with pytest.raises(RuntimeError, match="The size of tensor a"):
            torch.allclose(tx, ty)
        with pytest.raises(RuntimeError, match=r"The size of tensor a \(2\) must match"):
            js.allclose(x, y)
        return
    assert x.allclose(y, **kwargs) is js.allclose(x, y, **kwargs) is tx.allclose(ty, **kwargs)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_equal_promotes_and_allclose_needs_one_dtype_as_torch(backend):
    x = js.tensor(np.array([1, 2], np.int32), backend=backend)
    assert js.equal(x, x.float()) and torch.equal(torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="Int did not match Float"):
        js.allclose(x, x.float())
    with pytest.raises(TypeError, match="must be Tensor, not int"):
        js.equal(x, 2)


# ------------------------------------------------------------------ in place
class _Other:
    """Stands for a tensor of shape (3,) that broadcasts to the changed tensor's."""

    def __repr__(self):
        return "other"


OTHER = _Other()
IN_PLACE = [
    ("add_", (OTHER,), {"alpha": 2}), ("sub_", (OTHER,), {"alpha": 2}),
    ("subtract_", (OTHER,), {}), ("mul_", (OTHER,), {}), ("multiply_", (OTHER,), {}),
    ("div_", (OTHER,), {"rounding_mode": "floor"}), ("divide_", (OTHER,), {}),
    ("true_divide_", (OTHER,), {}), ("neg_", (), {}), ("negative_", (), {}),
    ("reciprocal_", (), {}), ("clamp_", (-0.5, 0.5), {}), ("clip_", (), {"min": 0.0}),
    ("pow_", (2,), {}), ("addcmul_", (OTHER, OTHER), {"value": 2}),
    ("addcdiv_", (OTHER, OTHER), {"value": 0.5}), ("logical_not_", (), {}),
    *((f"{n}_", (OTHER,), {}) for n in ("logical_and", "logical_or", "logical_xor")),
    *((f"{n}_", (o,), {}) for n in ("eq", "ne", "lt", "le", "gt", "ge", "greater",
                                    "greater_equal", "less", "less_equal", "not_equal")
      for o in (OTHER, 0.5)),
]
IN_PLACE_NAMES = sorted({name for name, _, _ in IN_PLACE} | {
    "bitwise_and_", "bitwise_or_", "bitwise_xor_", "bitwise_not_"})
JAX_IN_PLACE = ["add_", "div_", "reciprocal_", "addcmul_", "eq_", "logical_not_"]


def _in_place_call(name, args, kwargs, other):
    args = tuple(other if a is OTHER else a for a in args)
    return lambda t: getattr(t, name)(*args, **kwargs)


# Every case on NumPy, one per kind on JAX (each JAX case compiles its kernels).
@pytest.mark.parametrize("backend, name, args, kwargs", [
    *(("numpy", *case) for case in IN_PLACE),
    *(("jax", *case) for case in IN_PLACE if case[0] in JAX_IN_PLACE)], ids=str)
def test_in_place_names_change_the_tensor_as_torch(backend, name, args, kwargs):
    rng = np.random.default_rng(5)
    x, tx = _pair(_values(rng, (2, 3), "float32", nonzero=True), backend)
    o, to = _pair(_values(rng, (3,), "float32", nonzero=True), backend)
    ours, theirs = x * 1, tx * 1  # not leaves: in place, with a history
    version = ours._version
    assert _in_place_call(name, args, kwargs, o)(ours) is ours
    _in_place_call(name, args, kwargs, to)(theirs)
    assert ours._version > version
    _same(ours, theirs, backend)
    _same_gradients(ours, theirs, [x, o], [tx, to], backend)
    try:  # a leaf that requires grad: refused, but by the logical ops, which record nothing
        _in_place_call(name, args, kwargs, to)(tx)
    except RuntimeError as refused:
        assert "a leaf Variable that requires grad" in str(refused)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            _in_place_call(name, args, kwargs, o)(x)
        return
    _in_place_call(name, args, kwargs, o)(x)
    _same(x, tx, backend)
    assert x.is_leaf and x.requires_grad


INTEGER_IN_PLACE = [
    ("bitwise_and_", (6,)), ("bitwise_or_", (OTHER,)), ("bitwise_xor_", (OTHER,)),
    ("bitwise_not_", ()), ("add_", (OTHER,)), ("div_", (OTHER,)), ("eq_", (2,)),
    ("reciprocal_", ()), ("pow_", (0.5,)), ("logical_not_", ()), ("neg_", ()),
]


@pytest.mark.parametrize("dtype", ["int32", "bool"])
@pytest.mark.parametrize("name, args", INTEGER_IN_PLACE, ids=str)
def test_in_place_names_of_integers_and_bools_as_torch(dtype, name, args):
    """Values, or torch's error where the result cannot be stored (a float in an integer)."""
    rng = np.random.default_rng(6)
    other = _values(rng, (3,), "int32", nonzero=True)
    _check(_in_place_call(name, args, {}, js.tensor(other)),
           _in_place_call(name, args, {}, torch.tensor(other)),
           [_values(rng, (2, 3), dtype)], "numpy")


# ------------------------------------------------------------------ errors
ERRORS = [
    (lambda lib, f, i, b: lib.bitwise_and(f, f), NotImplementedError,
     "\"bitwise_and_cpu\" not implemented for 'Float'"),
    (lambda lib, f, i, b: f.bitwise_not(), NotImplementedError,
     "\"bitwise_not_cpu\" not implemented for 'Float'"),
    (lambda lib, f, i, b: lib.bitwise_or(i, 2.5), NotImplementedError,
     "\"bitwise_or_cpu\" not implemented for 'Float'"),
    (lambda lib, f, i, b: lib.div(f, f, rounding_mode="round"), RuntimeError,
     "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"),
    (lambda lib, f, i, b: lib.div(b, b, rounding_mode="trunc"), NotImplementedError,
     "\"div_trunc_cpu\" not implemented for 'Bool'"),
    (lambda lib, f, i, b: lib.add(i, i, alpha=0.5), RuntimeError,
     "For integral input tensors, argument alpha must not be a floating point number."),
    (lambda lib, f, i, b: f.sub(f, alpha=True), RuntimeError,
     "Boolean alpha only supported for Boolean results."),
    (lambda lib, f, i, b: lib.sub(b, b, alpha=2), RuntimeError,
     "Subtraction, the `-` operator, with two bool tensors is not supported."),
    (lambda lib, f, i, b: b.neg(), RuntimeError,
     "Negation, the `-` operator, on a bool tensor is not supported."),
    (lambda lib, f, i, b: lib.addcmul(b, b, b), NotImplementedError,
     "\"addcmul_cpu_out\" not implemented for 'Bool'"),
    (lambda lib, f, i, b: lib.addcdiv(f, i, i), RuntimeError,
     "Integer division with addcdiv is no longer supported"),
    (lambda lib, f, i, b: i.clone().add_(2.5), RuntimeError,
     "result type Float can't be cast to the desired output type Int"),
]


@pytest.mark.parametrize("call, error, message", ERRORS, ids=[m[:32] for _, _, m in ERRORS])
def test_errors_are_torchs(call, error, message):
    arrays = [np.ones(3, np.float32), np.ones(3, np.int32), np.ones(3, np.bool_)]
    with pytest.raises(error) as theirs:
        call(torch, *(torch.tensor(a) for a in arrays))
    with pytest.raises(error) as ours:
        call(js, *(js.tensor(a) for a in arrays))
    assert message in str(theirs.value) and message in error_text(ours)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_the_bit_operators_are_bitwise_as_torchs(backend):
    ints, bools = np.array([1, 2, 3], np.int32), np.array([True, False, True])
    t, b = js.tensor(ints, backend=backend), js.tensor(bools, backend=backend)
    tt, tb = torch.tensor(ints), torch.tensor(bools)
    for ours, theirs in [(t & 6, tt & 6), (6 & t, 6 & tt), (t | 8, tt | 8), (t ^ 1, tt ^ 1),
                         (1 ^ t, 1 ^ tt), (~t, ~tt), (~b, ~tb), (True & b, True & tb),
                         (b ^ True, tb ^ True), (b | b, tb | tb)]:
        np.testing.assert_array_equal(arr(ours), theirs.numpy())
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    with pytest.raises(NotImplementedError, match="bitwise_and_cpu.*'Float'"):
        js.ones(2, backend=backend) & js.ones(2, backend=backend)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_sign_of_nan_is_zero_and_pow_is_a_function_as_torchs(backend):
    values = np.array([np.nan, -2.0, -0.0, 0.0, 3.0], np.float32)
    np.testing.assert_array_equal(arr(js.sign(js.tensor(values, backend=backend))),
                                  torch.sign(torch.tensor(values)).numpy())
    base = js.tensor(np.array([2.0, 3.0], np.float32), backend=backend, requires_grad=True)
    out = js.pow(base, 2)
    out.sum().backward()
    np.testing.assert_allclose(arr(out), [4.0, 9.0])
    np.testing.assert_allclose(arr(base.grad), [4.0, 6.0])
    assert out.grad_fn.name() == torch.pow(torch.ones(1, requires_grad=True), 2).grad_fn.name()
    np.testing.assert_allclose(arr(js.pow(2.0, base.detach())), [4.0, 8.0])


INTEGER_DIVISIONS = [
    ("floor_divide", lambda a, b: a // b), ("remainder", lambda a, b: a % b),
    ("fmod", lambda a, b: a.fmod(b)),
    ("div (rounding_mode='trunc')", lambda a, b: a.div(b, rounding_mode="trunc")),
    ("div (rounding_mode='floor')", lambda a, b: a.div(b, rounding_mode="floor")),
]


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize(("op", "call"), INTEGER_DIVISIONS, ids=[d[0] for d in INTEGER_DIVISIONS])
def test_integer_division_by_zero_raises_as_torchs_on_the_cpu(backend, op, call):
    """NumPy and XLA give 0 (or garbage) where PyTorch's CPU kernels raise."""
    a, b = js.tensor([7, -7, 3], backend=backend), js.tensor([2, 0, 1], backend=backend)
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as caught:
        call(torch.tensor([7, -7, 3]), torch.tensor([2, 0, 1]))
    for divisor in (b, 0):
        with pytest.raises(RuntimeError, match=f"ZeroDivisionError: integer {re.escape(op)}"
                                               r".*Mask the zero divisors") as ours:
            call(a, divisor)
        assert "int" in error_text(ours) and str(caught.value) in error_text(ours)
    nonzero = js.tensor([2, -3, 1], backend=backend)
    expected = call(torch.tensor([7, -7, 3]), torch.tensor([2, -3, 1])).numpy()
    np.testing.assert_array_equal(arr(call(a, nonzero)), expected)
    np.testing.assert_array_equal(arr(call(a.float(), b.float())),  # floats divide by zero
                                  call(torch.tensor([7.0, -7, 3]), torch.tensor([2.0, 0, 1])))


def test_an_integer_divisor_is_not_read_on_an_accelerator_nor_in_a_trace():
    """As PyTorch's CUDA kernels: reading the divisor would wait for the device."""
    a = js.tensor([7, 8], device="sim")
    assert (a // js.tensor([0, 2], device="sim")).shape == (2,)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a // 0  # a Python number costs nothing to read

    @js.compile
    def halve(x, d):
        return x // d

    x = js.tensor([4, 6], backend="jax")
    np.testing.assert_array_equal(arr(halve(x, js.tensor([2, 3], backend="jax"))), [2, 2])
    assert halve(x, js.tensor([0, 3], backend="jax")).shape == (2,)
    with pytest.raises(RuntimeError, match=r"ZeroDivisionError.*of 5 and int64"):
        5 % js.tensor([1, 0])
