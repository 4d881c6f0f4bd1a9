"""PyTorch's names of dtypes in its error messages, so that ours read as its do and a search
for one finds the other."""

from __future__ import annotations

from typing import Any

# c10's ScalarType names ("expected scalar type Long but found Float").
_SCALAR_TYPES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
    "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
    "float64": "Double", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}
# The C++ types of the same ("expected m1 and m2 to have the same dtype, but got: long int
# != float").
_CPP_TYPES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int",
    "int32": "int", "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "float32": "float", "float64": "double", "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


def scalar_type(dtype: Any) -> str:
    """`Long` for int64, `Float` for float32, ... (the NumPy name where torch has none)."""
    return _SCALAR_TYPES.get(str(dtype), str(dtype))


def cpp_type(dtype: Any) -> str:
    """`long int` for int64, `float` for float32, ... (the NumPy name where torch has none)."""
    return _CPP_TYPES.get(str(dtype), str(dtype))
