"""The internal precision of float32 matrix products and convolutions on the JAX backend:
PyTorch's `set_float32_matmul_precision` and `get_float32_matmul_precision`.

Note [Float32 matrix products]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
JAX's default precision for a float32 `dot_general` or convolution lets XLA use
the GPU's tensor cores: TensorFloat32 inputs, about 1e-3 relative error. PyTorch
computes float32 matrix products in float32 unless told otherwise
(`torch.get_float32_matmul_precision() == "highest"`), and jaxstream gives
PyTorch's names PyTorch's meaning. So every product and convolution the JAX
backend runs for jaxstream (`matmul`, `@`, `bmm`, `addmm`, `baddbmm`, `linear`,
`einsum`, `conv1d`, `conv2d`, and their gradients) passes this setting as its
`precision=`: "highest" (the default) as `Precision.HIGHEST`, "high" as `HIGH`,
"medium" as `DEFAULT` (JAX's own default). User JAX code (`jax_function`, the
functions around `to_jax`) keeps JAX's own setting, `jax.default_matmul_precision`.

* It is one process-wide value, as PyTorch's, read by a kernel each time it is
  traced or run eagerly: a module global, no lock, no context. Set it before the
  products it is for, as PyTorch's: a kernel another thread is tracing while it
  changes may keep the old value.
* The JAX backend's kernels are compiled once per op and params, and a node's
  backward once per key (Note [Compiled kernels on JAX], Note [Compiled backward on
  JAX]): both tables read the setting while tracing, so a change empties them and
  the next call traces again at the new precision. A `js.compile` program keys on
  it as on the autocast dtype. A function from `to_jax` reads it each time JAX
  traces it; an executable that `jax.jit` made before a change keeps the
  precision it was traced with.
* Only the JAX backend has a choice: NumPy and CuPy compute float32 products in
  float32 whatever the setting (CuPy's TensorFloat32 is its own `CUPY_TF32`).
  On a CPU XLA computes float32 in float32 at every precision, so there the
  setting changes the program text and not the numbers. Only float32 (and
  complex64) operands are affected: float64, bfloat16 and integer products
  compute the same at every precision.
* Average pooling, a convolution with a kernel of ones, always runs at HIGHEST:
  PyTorch's pooling is no matrix product, and its sums must not lose bits.
* Unlike PyTorch's cuDNN convolutions, which have a flag of their own
  (`torch.backends.cudnn.allow_tf32`, on by default), jaxstream's convolutions
  follow this setting, so that one setting fixes the precision of every product.
"""

from __future__ import annotations

import warnings

import jax

from .ops import compiled_backward, compiled_kernels

_PRECISIONS = {
    "highest": jax.lax.Precision.HIGHEST,
    "high": jax.lax.Precision.HIGH,
    "medium": jax.lax.Precision.DEFAULT,
}

_current: list = ["highest", jax.lax.Precision.HIGHEST]
"""The setting's name and its `jax.lax.Precision`, one list so that both change together."""


def set_float32_matmul_precision(precision: str) -> None:
    """Set the internal precision of float32 matrix products and convolutions on the JAX
    backend, for the whole process (Note [Float32 matrix products]).

    "highest" (the default) computes in float32; "high" (`Precision.HIGH`) and "medium"
    (`Precision.DEFAULT`, JAX's default) let a GPU use TensorFloat32, and a TPU three or
    one bfloat16 passes. As PyTorch's, another string is ignored with a warning. NumPy
    and CuPy arrays are unaffected: they always compute in float32, as XLA does on a CPU.
    """
    if not isinstance(precision, str):
        raise RuntimeError(
            f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}"
        )
    chosen = _PRECISIONS.get(precision)
    if chosen is None:
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
            "set_float32_matmul_precision call has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    if precision == _current[0]:
        return
    _current[:] = [precision, chosen]
    compiled_kernels.clear_cache()  # their programs were traced at the old precision
    compiled_backward.clear_cache()


def get_float32_matmul_precision() -> str:
    """The precision of float32 matrix products on the JAX backend: "highest" (the
    default), "high" or "medium" (Note [Float32 matrix products])."""
    return _current[0]


def jax_precision() -> jax.lax.Precision:
    """The `precision=` of the JAX backend's products and convolutions now."""
    return _current[1]
