"""PyTorch's type promotion, diff-tested against torch: every binary op on every pair of bool,
integer and floating dtypes (tensors with dimensions, zero-dim tensors, Python numbers), on the
NumPy backend and on JAX without its 64-bit mode; `test_promotion_x64.py` runs JAX with it.

On JAX each kernel compiles, so there each dtype pair meets one pair of shapes (the table's
`sample`); the promotion itself is the same code on every backend, and NumPy runs it all."""

from __future__ import annotations

import numpy as np
import pytest
from promotion_table import (
    DTYPES,
    ELEMENTWISE,
    ELEMENTWISE_SHAPES,
    INPLACE,
    INPLACE_SHAPES,
    NARROW_DTYPES,
    PRODUCT_SHAPES,
    PRODUCTS,
    as_newer_torch,
    differences,
    disagreement,
    outcome,
    scalar_differences,
)

import jaxstream as js

pytestmark = pytest.mark.oracle

# (backend, its dtypes, the dtype of Python ints there, whether to sample the table)
# The JAX cases run once per `make test`, outside the GPU twin: a dtype's promotion does not
# depend on the JAX device an array is on, and each case compiles kernels for its dtypes.
PLACES = [
    ("numpy", DTYPES, "int64", False),
    pytest.param("jax", NARROW_DTYPES, "int32", True, marks=pytest.mark.outside_twin),
]


@pytest.mark.parametrize("backend, dtypes, python_int, sample", PLACES)
@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_elementwise_ops_promote_as_torch(torch, op, backend, dtypes, python_int, sample):
    table = {op: ELEMENTWISE[op]}
    assert differences(torch, table, ELEMENTWISE_SHAPES, backend, dtypes, sample) == []
    assert scalar_differences(torch, table, backend, dtypes, python_int, sample) == []


@pytest.mark.parametrize("backend, dtypes, python_int, sample", PLACES)
@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_ops_refuse_what_torch_cannot_cast_back(torch, op, backend, dtypes, python_int,
                                                        sample):
    """`int_tensor += 0.5` raises as torch does, where it used to truncate silently."""
    assert differences(torch, {op: INPLACE[op]}, INPLACE_SHAPES, backend, dtypes, sample) == []


@pytest.mark.parametrize("backend, dtypes, python_int, sample", PLACES)
@pytest.mark.parametrize("op", sorted(PRODUCTS))
def test_products_of_two_dtypes_raise_as_torch(torch, op, backend, dtypes, python_int, sample):
    """torch promotes no matrix product: mixed dtypes raise its error for the ranks at hand."""
    assert differences(torch, {op: PRODUCTS[op]}, PRODUCT_SHAPES, backend, dtypes, sample) == []


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_the_issues_example_raises_instead_of_truncating(backend):
    a, b = js.tensor([[1, 2]], backend=backend), js.tensor([[0.5], [0.25]], backend=backend)
    long = "long int" if backend == "numpy" else "int"
    with pytest.raises(RuntimeError, match=f"expected m1 and m2 to have the same dtype, but got: "
                       f"{long} != float"):
        a @ b
    assert (a.float() @ b).numpy().tolist() == [[1.0]]


@pytest.mark.parametrize("error, message", [
    (NotImplementedError, "\"addmv_impl_cpu\" not implemented for 'Bool'"),
    (RuntimeError, "expected scalar type Bool but found Byte"),
], ids=["bool_matrix", "other_matrix"])
def test_torch_2_11s_refusal_of_two_dtypes_reads_as_the_pinned_torchs(torch, error, message):
    """torch 2.11 words its refusal of a matrix-vector product of two dtypes otherwise than the
    pinned torch: it agrees with jaxstream's refusal, and with nothing else."""
    mixed = (torch.ones(2, 2, dtype=torch.bool), torch.ones(2, dtype=torch.uint8))
    ours = outcome(PRODUCTS["matmul"], js, js.ones(2, 2, dtype="bool"), js.ones(2, dtype="uint8"))
    old, result = ("raise", error, message), ("ok", "uint8", np.ones(2))
    assert disagreement(ours, old) is not None
    assert disagreement(ours, as_newer_torch(old, "matmul", mixed)) is None
    theirs = outcome(PRODUCTS["matmul"], torch, *mixed)
    assert disagreement(ours, as_newer_torch(theirs, "matmul", mixed)) is None
    assert disagreement(result, as_newer_torch(old, "matmul", mixed)) is not None
    assert as_newer_torch(old, "matmul", (mixed[0], mixed[0][0])) == old
    assert as_newer_torch(old, "einsum", mixed) == old
    assert as_newer_torch(result, "matmul", mixed) is result
