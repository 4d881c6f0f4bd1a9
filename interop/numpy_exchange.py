"""NumPy arrays in and out of jaxstream and JAX without copies.

A NumPy array becomes a jaxstream tensor as is; a `jax_function` hands it to
JAX through DLPack (zero-copy when the buffer is C-contiguous and aligned the
way XLA's CPU client wants: 64 bytes), and its outputs and gradients come
back as read-only NumPy views of JAX's buffers.

Run: python interop/numpy_exchange.py
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxstream as js
from jaxstream.jax_interop import jax_function


def aligned_empty(shape: tuple, dtype: type = np.float32, alignment: int = 64) -> np.ndarray:
    """An uninitialised array whose buffer starts on an `alignment`-byte boundary."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buffer = np.empty(nbytes + alignment, np.uint8)
    start = (-buffer.ctypes.data) % alignment
    return buffer[start : start + nbytes].view(dtype).reshape(shape)


def main() -> None:
    x_np = aligned_empty((4, 3))
    x_np[:] = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    w_np = np.full((3, 2), 0.5, np.float32)

    # 1. NumPy -> JAX by DLPack: the same buffer. As in PyTorch, a tensor that requires
    # grad is exported through `detach()`, which shares its buffer outside the graph.
    x = js.tensor(x_np, requires_grad=True)
    assert x.data is x_np
    as_jax = jax.dlpack.from_dlpack(x.detach())
    assert as_jax.unsafe_buffer_pointer() == x_np.ctypes.data
    print("NumPy -> JAX shares the buffer at", hex(x_np.ctypes.data))

    # 2. A JAX function as a jaxstream op on NumPy tensors.
    layer = jax_function(lambda a, b: jnp.tanh(a @ b))
    w = js.tensor(w_np, requires_grad=True)
    y = layer(x, w)
    assert y.backend == "numpy" and isinstance(y.data, np.ndarray)
    y.sum().backward()
    expected = jax.grad(lambda a, b: jnp.tanh(a @ b).sum(), argnums=(0, 1))(x_np, w_np)
    np.testing.assert_allclose(x.grad.numpy(), expected[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), expected[1], rtol=1e-5, atol=1e-6)
    print("gradients are NumPy arrays:", type(x.grad.data).__name__, x.grad.shape)

    # 3. Outputs are read-only views of JAX's buffers, and export again by DLPack.
    assert not y.numpy().flags.writeable
    assert np.shares_memory(np.from_dlpack(y.detach()), y.numpy())

    # 4. Strided views are fine: they are made contiguous before JAX sees them.
    strided = js.tensor(np.arange(12, dtype=np.float32).reshape(3, 4).T, requires_grad=True)
    jax_function(lambda a: (a**2).sum())(strided).backward()
    np.testing.assert_array_equal(strided.grad.numpy(), 2 * strided.numpy())
    print("strided input: gradient", strided.grad.shape, "ok")


if __name__ == "__main__":
    main()
