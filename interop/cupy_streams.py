"""CuPy arrays made on a side stream, through a JAX function, read on a consumer stream.

The arrays are made on a side stream and enter jaxstream as they are (CuPy
backend, zero-copy); the caller's stream waits for the side stream before
using them; they enter JAX through DLPack, and the outputs and gradients come
back as CuPy arrays. A consumer stream then imports the gradient by DLPack.
It must wait for the stream that wrote the gradient first: `cupy.from_dlpack`
passes CuPy's current stream to `__dlpack__(stream=)`, which orders that stream
after CuPy's current stream, the same one inside `with js.stream(consumer)`,
so the hand-off alone orders nothing there.

`--device cuda` runs it on a GPU (the cuda13 or cuda12 extra: CuPy and JAX's
GPU plugin), with the stream sanitizer on (`JAXSTREAM_STREAM_CHECK=1`, set
here). `--device sim` is its twin that runs anywhere: NumPy-backed sim tensors
play CuPy's part on the same streams, `numpy.from_dlpack` the consumer's
import, and the sanitizer (always on for sim) checks the same orderings.

Run: python interop/cupy_streams.py --device sim   (or --device cuda on a GPU)
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.devices import require_cupy
from jaxstream.jax_interop import jax_function
from jaxstream.streams import cuda_device_count

os.environ[sanitizer.CHECK_ENV] = "1"

PLACES = {"cuda": ("cuda:0", "cupy"), "sim": ("sim:0", "numpy")}
SIZE = 1 << 16


def library(place: str) -> Any:
    """The array library playing CuPy's part: CuPy on a GPU, NumPy on sim."""
    return require_cupy("cupy_streams.py --device cuda") if place == "cuda" else np


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=tuple(PLACES), default="sim")
    place = parser.parse_args(argv).device
    if place == "cuda" and cuda_device_count() == 0:
        sys.exit("cupy_streams.py --device cuda needs a CUDA GPU with CuPy "
                 "(pip install -e '.[cuda13]' or '.[cuda12]'); none here. Run it with "
                 "--device sim instead.")
    device, backend = PLACES[place]

    xp = library(place)
    side = js.Stream(device)
    with js.stream(side):  # the library's current stream too
        x_raw = xp.linspace(-2, 2, SIZE, dtype=np.float32)
        x = js.tensor(x_raw, device=device, requires_grad=True)
        w = js.tensor(xp.full(SIZE, 0.5, np.float32), device=device, requires_grad=True)
    assert x.backend == backend and x.device == device and x.array is x_raw, "adopted as is"
    caller = js.current_stream(device)
    caller.wait_stream(side)  # the caller's stream uses what the side stream made

    loss = jax_function(lambda a, b: jnp.sum(jnp.sin(a) * b))(x, w)
    loss.backward()
    assert x.grad.backend == backend and w.grad.backend == backend

    consumer = js.Stream(device)
    consumer.wait_stream(caller)  # the gradient was written on the caller's stream
    with js.stream(consumer):
        again = xp.from_dlpack(x.grad)  # zero-copy, read on the consumer stream
        total = float(again.sum())
    js.synchronize(device)
    expected = jax.grad(lambda a: jnp.sum(jnp.sin(a) * 0.5))(jnp.linspace(-2, 2, SIZE))
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(expected), rtol=1e-5, atol=1e-6)
    print(f"gradient of a {backend} tensor through a JAX function on {device}, "
          f"summed on a consumer stream: {total:.3f}")


if __name__ == "__main__":
    main()
