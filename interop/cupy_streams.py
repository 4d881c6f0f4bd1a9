"""CuPy arrays on a side stream, through jaxstream and a JAX function, on the GPU.

A CuPy array enters jaxstream as is (CuPy backend), enters JAX through DLPack,
and the outputs and gradients come back as CuPy arrays. Passing the consumer's
stream to `__dlpack__` (which `cupy.from_dlpack` does for you) orders the
consumer after the producer's pending work, as the array API specifies.

Run: python interop/cupy_streams.py   (needs a CUDA GPU, CuPy and jax[cuda])
"""

import sys


def main() -> None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("no CUDA device")
    except Exception as error:  # no CuPy, no driver or no device: say so and stop
        sys.exit(f"cupy_streams.py needs a CUDA GPU with CuPy ({error})")

    import jax.numpy as jnp
    import numpy as np

    import jaxstream as js
    from jaxstream.jax_interop import jax_function

    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        x_gpu = cupy.linspace(-2, 2, 1 << 16, dtype=cupy.float32)
        w_gpu = cupy.full((1 << 16,), 0.5, dtype=cupy.float32)
    side.synchronize()

    x = js.tensor(x_gpu, requires_grad=True)
    w = js.tensor(w_gpu, requires_grad=True)
    assert x.backend == "cupy" and x.data.data.ptr == x_gpu.data.ptr

    loss = jax_function(lambda a, b: jnp.sum(jnp.sin(a) * b))(x, w)
    loss.backward()
    assert x.grad.backend == "cupy" and w.grad.backend == "cupy"
    np.testing.assert_allclose(
        cupy.asnumpy(x.grad.data), 0.5 * np.cos(cupy.asnumpy(x_gpu)), rtol=1e-5, atol=1e-6
    )

    consumer = cupy.cuda.Stream(non_blocking=True)
    with consumer:
        again = cupy.from_dlpack(x.grad)  # __dlpack__(stream=consumer) under the hood
        total = float(again.sum())
    print("gradient on the GPU, summed on a consumer stream:", round(total, 3))


if __name__ == "__main__":
    main()
