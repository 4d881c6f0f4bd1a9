"""Every binary op run on every pair of bool, integer and floating dtypes, in jaxstream and in
torch, and what differs: the result dtype and values, or the error and its message.

A library for ``test_promotion*.py``, not a test file.
"""

from __future__ import annotations

import re

import numpy as np

import jaxstream as js

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
# What JAX holds with its 64-bit mode off, and what only with it on.
WIDE_DTYPES = ("int64", "float64")
NARROW_DTYPES = tuple(d for d in DTYPES if d not in WIDE_DTYPES)

# A tensor with dimensions outranks a zero-dim one of its category (torch's rule): each op runs
# on both kinds, in both places.
ELEMENTWISE_SHAPES = (((2,), (2,)), ((2,), ()), ((), (2,)), ((), ()))
INPLACE_SHAPES = (((2,), (2,)), ((2,), ()))
PRODUCT_SHAPES = (((2, 2), (2, 2)), ((2,), (2,)), ((2, 2), (2,)), ((2,), (2, 2)),
                  ((3, 2, 2), (3, 2, 2)), ((3, 2, 2), (2, 2)), ((2, 2), (3, 2, 2)))


def _mask(a, b):
    """All true, of the shape of the operand with more dimensions (a tensor)."""
    t = max((x for x in (a, b) if hasattr(x, "ndim")), key=lambda x: x.ndim)
    return t == t


def _inplace(method: str):
    return lambda lib, a, b: getattr(a.clone(), method)(b)


# name -> call(lib, a, b), where `lib` is `js` or `torch` and a, b are its tensors.
ELEMENTWISE = {
    "add": lambda lib, a, b: a + b, "sub": lambda lib, a, b: a - b,
    "mul": lambda lib, a, b: a * b, "div": lambda lib, a, b: a / b,
    "pow": lambda lib, a, b: a ** b, "floor_divide": lambda lib, a, b: a // b,
    "remainder": lambda lib, a, b: a % b,
    "maximum": lambda lib, a, b: lib.maximum(a, b), "minimum": lambda lib, a, b: lib.minimum(a, b),
    "eq": lambda lib, a, b: a == b, "ne": lambda lib, a, b: a != b,
    "lt": lambda lib, a, b: a < b, "le": lambda lib, a, b: a <= b,
    "gt": lambda lib, a, b: a > b, "ge": lambda lib, a, b: a >= b,
    "where": lambda lib, a, b: lib.where(_mask(a, b), a, b),
}
INPLACE = {"add_": _inplace("add_"), "sub_": _inplace("sub_"), "mul_": _inplace("mul_"),
           "div_": _inplace("div_")}
_EINSUM = {(2, 2): "ij,jk->ik", (1, 1): "i,i->", (2, 1): "ij,j->i", (1, 2): "i,ij->j",
           (3, 3): "bij,bjk->bik", (3, 2): "bij,jk->bik", (2, 3): "ij,bjk->bik"}
PRODUCTS = {
    "matmul": lambda lib, a, b: a @ b,
    "einsum": lambda lib, a, b: lib.einsum(_EINSUM[a.ndim, b.ndim], a, b),
}
SCALARS = (True, 2, 2.5)


def values_of(dtype: str, shape: tuple) -> np.ndarray:
    """1, 2, 1, ... in `dtype`: no zero divisor, no negative power, True for bool."""
    return (np.arange(int(np.prod(shape))) % 2 + 1).reshape(shape).astype(dtype)


def outcome(call, lib, a, b, python_int: str = "int64"):
    """("ok", dtype name, values as float64) or ("raise", error type, message).

    `python_int`: the name int64 takes (int32 where Python ints are, on JAX without x64).
    """
    try:
        out = call(lib, a, b)
    except Exception as err:  # what is compared is the error itself
        return ("raise", type(err), str(err))
    name = str(out.dtype).removeprefix("torch.")
    return ("ok", python_int if name == "int64" else name,
            np.asarray(out.numpy(), dtype=np.float64))


def _sampled(cases: list, every: int) -> list:
    """One case in `every`, the phase turning with each group of `every` cases: where a group
    is one dtype pair over `every` shapes, each pair meets one shape, and each shape a share
    of the pairs (a table that compiles a kernel per case on JAX stays quick)."""
    return [c for i, c in enumerate(cases) if i % every == (i // every) % every]


# torch 2.11 refused a matrix-vector product of two dtypes inside its CPU kernel, in words
# that name no product: NotImplementedError('"addmv_impl_cpu" not implemented for 'Bool'')
# where the matrix is bool, RuntimeError('expected scalar type Byte but found Long') otherwise.
# From pytorch/pytorch#165777 (in the pinned torch) addmv checks the dtypes first and raises
# RuntimeError("addmv input tensors must have the same dtype, but got ..."), as jaxstream does.
_OLD_ADDMV_REFUSAL = re.compile(
    r'"addmv_impl_cpu" not implemented for \'\w+\'|expected scalar type \w+ but found \w+')
_ADDMV_REFUSAL = "addmv input tensors must have the same dtype"


def as_newer_torch(theirs: tuple, name: str, operands: tuple) -> tuple:
    """`theirs`, where it is torch 2.11's refusal of `a @ b` (`name` "matmul") for a matrix,
    or a batch of them, times a vector of another dtype, as the pinned torch's refusal: its
    error type and the words of its message that name no dtype. Every other outcome (a result,
    the same words for einsum or other ranks, which the pinned torch keeps) stays as it is."""
    a, b = operands
    if (theirs[0] == "raise" and name == "matmul"
            and getattr(a, "ndim", 0) >= 2 and getattr(b, "ndim", 0) == 1
            and a.dtype != b.dtype and _OLD_ADDMV_REFUSAL.fullmatch(theirs[2])):
        return ("raise", RuntimeError, _ADDMV_REFUSAL)
    return theirs


def _compare(torch, call, make_torch, make_ours, python_int: str = "int64",
             name: str = "") -> str | None:
    operands = make_torch()
    theirs = as_newer_torch(outcome(call, torch, *operands, python_int), name, operands)
    if theirs[0] == "raise" and theirs[1] is TypeError:
        return None  # torch takes no number there (maximum(t, 2)); jaxstream does
    return disagreement(outcome(call, js, *make_ours(), python_int), theirs)


def differences(torch, table: dict, shapes, backend: str, dtypes=DTYPES,
                sample: bool = False, involving=DTYPES) -> list[str]:
    """Each op of `table` on each pair of `dtypes` (with one of `involving` at least) and
    each pair of `shapes`, in jaxstream on `backend` and in torch: the list of disagreements
    (empty when every one agrees). `sample`: each dtype pair on one pair of shapes only."""
    cases = [(da, db, sa, sb) for da in dtypes for db in dtypes for sa, sb in shapes
             if da in involving or db in involving]
    found = []
    for name, call in table.items():
        for da, db, sa, sb in _sampled(cases, len(shapes)) if sample else cases:
            va, vb = values_of(da, sa), values_of(db, sb)
            problem = _compare(torch, call,
                               lambda va=va, vb=vb: (torch.tensor(va), torch.tensor(vb)),
                               lambda va=va, vb=vb: (js.tensor(va, backend=backend),
                                                     js.tensor(vb, backend=backend)),
                               name=name)
            if problem:
                found.append(f"{name}({da}{list(sa)}, {db}{list(sb)}): {problem}")
    return found


def scalar_differences(torch, table: dict, backend: str, dtypes=DTYPES,
                       python_int: str = "int64", sample: bool = False) -> list[str]:
    """As `differences`, between a tensor of each dtype and each Python number, either side.
    `python_int`: the name int64 takes, int32 where Python ints are (JAX without x64)."""
    cases = [(dtype, shape, scalar, swap) for dtype in dtypes for shape in ((2,), ())
             for scalar in SCALARS for swap in (False, True)]
    found = []
    for name, call in table.items():
        for dtype, shape, scalar, swap in _sampled(cases, 4) if sample else cases:
            va = values_of(dtype, shape)

            def pair(t, scalar=scalar, swap=swap):
                return (scalar, t) if swap else (t, scalar)

            problem = _compare(torch, call, lambda va=va: pair(torch.tensor(va)),
                               lambda va=va: pair(js.tensor(va, backend=backend)), python_int)
            if problem:
                operands = [repr(scalar), f"{dtype}{list(shape)}"]
                left, right = operands if swap else operands[::-1]
                found.append(f"{name}({left}, {right}): {problem}")
    return found


def disagreement(ours, theirs) -> str | None:
    """What differs between two outcomes, or None. An error agrees when it is of torch's type
    and its message contains torch's."""
    if theirs[0] == "raise":
        if ours[0] != "raise":
            return f"torch raises {theirs[1].__name__}({theirs[2]!r}), jaxstream gives {ours[1]}"
        if ours[1] is not theirs[1] or theirs[2] not in ours[2]:
            return (f"torch raises {theirs[1].__name__}({theirs[2]!r}), jaxstream "
                    f"{ours[1].__name__}({ours[2]!r})")
        return None
    if ours[0] == "raise":
        return f"torch gives {theirs[1]}, jaxstream raises {ours[1].__name__}({ours[2]!r})"
    if ours[1] != theirs[1]:
        return f"torch gives {theirs[1]}, jaxstream {ours[1]}"
    if not np.allclose(ours[2], theirs[2], rtol=1e-3, equal_nan=True):
        return f"values {ours[2]} against torch's {theirs[2]}"
    return None
