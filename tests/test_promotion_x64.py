"""The promotion table of `test_promotion.py` on JAX with its 64-bit mode on: the pairs of
dtypes that only exist there (int64 or float64 on one side at least), and the numbers, whose
ints are int64 there (each dtype pair on one pair of shapes: the table's `sample`)."""

from __future__ import annotations

import pytest
from promotion_table import (
    ELEMENTWISE,
    ELEMENTWISE_SHAPES,
    INPLACE,
    INPLACE_SHAPES,
    PRODUCT_SHAPES,
    PRODUCTS,
    WIDE_DTYPES,
    differences,
    scalar_differences,
)

pytestmark = [pytest.mark.oracle, pytest.mark.usefixtures("jax_x64")]
ONLY_HERE = {"sample": True, "involving": WIDE_DTYPES}


@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_elementwise_ops_promote_as_torch_on_jax_with_x64(torch, op):
    table = {op: ELEMENTWISE[op]}
    assert differences(torch, table, ELEMENTWISE_SHAPES, "jax", **ONLY_HERE) == []
    assert scalar_differences(torch, table, "jax", WIDE_DTYPES, sample=True) == []


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_ops_as_torch_on_jax_with_x64(torch, op):
    assert differences(torch, {op: INPLACE[op]}, INPLACE_SHAPES, "jax", **ONLY_HERE) == []


@pytest.mark.parametrize("op", sorted(PRODUCTS))
def test_products_raise_as_torch_on_jax_with_x64(torch, op):
    assert differences(torch, {op: PRODUCTS[op]}, PRODUCT_SHAPES, "jax", **ONLY_HERE) == []
