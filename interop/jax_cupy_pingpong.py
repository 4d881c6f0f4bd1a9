"""JAX and CuPy hand a tensor back and forth under streams, and backward goes through it all.

Each round, JAX computes on XLA's stream (`js.xla_stream`), the result crosses
to CuPy on a side stream (`to(backend="cupy")` inside `with js.stream(side)`:
the side stream waits for XLA's, and DLPack's `stream=` argument orders the
zero-copy hand-off), CuPy computes there, and the result crosses back to JAX
(XLA's stream waits for the side stream). The loss is taken in JAX and its
gradient flows back through every crossing, each backward op on the stream its
forward ran on. The stream sanitizer checks every kernel and crossing
(`JAXSTREAM_STREAM_CHECK=1`, set here), so a missing hand-off is an error,
not a wrong number; the gradients are compared with `jax.grad`.

`--device cuda` runs it on a GPU (the cuda13 or cuda12 extra: CuPy and JAX's
GPU plugin). `--device sim`, its twin that runs anywhere, plays JAX's side by
JAX-backed sim tensors on the sim-XLA stream and CuPy's by NumPy-backed sim
tensors on a jaxstream stream, so the same crossing rules are checked.

Run: python interop/jax_cupy_pingpong.py --device sim   (or --device cuda on a GPU)
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.sanitizer import StreamRaceError
from jaxstream.streams import cuda_device_count

# The sanitizer is asked for before any stream is used; sim streams are always checked.
os.environ[sanitizer.CHECK_ENV] = "1"

# Per place: the device, and the backend playing CuPy's part on the side stream.
PLACES = {"cuda": ("cuda:0", "cupy"), "sim": ("sim:0", "numpy")}
SIZE = 1 << 12


def reference_loss(x: jax.Array, w: jax.Array, rounds: int) -> jax.Array:
    """The same computation in plain JAX, for `jax.grad`."""
    h = x
    for _ in range(rounds):
        h = jnp.sin(h) * 1.5
        h = jnp.tanh(h * w) + h
    return jnp.sum(h * h)


def pingpong(x: js.Tensor, w: js.Tensor, side: js.Stream, rounds: int, backend: str) -> js.Tensor:
    """`rounds` crossings JAX -> side stream -> JAX; `x` is a JAX tensor, `w` lives on `side`."""
    h = x
    for _ in range(rounds):
        h = js.sin(h) * 1.5  # JAX, on XLA's stream
        with js.stream(side):
            c = h.to(backend=backend)  # the side stream waits for XLA's, then DLPack
            c = js.tanh(c * w) + c  # CuPy's kernels, on the side stream
            h = c.to(backend="jax")  # XLA's stream waits for the side stream, then DLPack
    return (h * h).sum()


def missing_handoff_is_caught(w: js.Tensor, side: js.Stream) -> str:
    """The crossing back issued on the default stream, which never waited for `side`: the
    sanitizer's error, where a GPU would read a value `side` may not have written yet."""
    with js.stream(side):
        fresh = w * 2.0
    try:
        fresh.to(backend="jax")
    except StreamRaceError as race:
        return race.kind
    raise AssertionError("the stream sanitizer let an unordered crossing through")


def check_gpu(device: str) -> None:
    """Exit with the missing hardware named, where `--device cuda` cannot run."""
    if device == "cuda" and (cuda_device_count() == 0 or jax.default_backend() != "gpu"):
        sys.exit(
            "jax_cupy_pingpong.py --device cuda needs a CUDA GPU seen by both CuPy and JAX "
            "(pip install -e '.[cuda13]' or '.[cuda12]'); none here. Run it with --device sim "
            "instead."
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=tuple(PLACES), default="sim")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args(argv)
    check_gpu(arguments.device)
    device, backend = PLACES[arguments.device]
    assert sanitizer.enabled_for(device), "the stream sanitizer is on for every crossing"

    rng = np.random.default_rng(0)
    x_host = rng.uniform(-1, 1, SIZE).astype(np.float32)
    w_host = rng.uniform(0.5, 1.5, SIZE).astype(np.float32)
    side = js.Stream(device)
    x = js.tensor(x_host, backend="jax", device=device, requires_grad=True)
    with js.stream(side):
        w = js.tensor(w_host, backend=backend, device=device, requires_grad=True)

    loss = pingpong(x, w, side, arguments.rounds, backend)
    loss.backward()
    caught = missing_handoff_is_caught(w, side)
    js.synchronize(device)
    print(f"{arguments.rounds} rounds JAX (XLA's stream) <-> {backend} ({side}) on {device}, "
          "stream sanitizer on: no race")
    print(f"the same crossing issued off the side stream is caught: a {caught} race")

    grads = jax.grad(reference_loss, argnums=(0, 1))(x_host, w_host, arguments.rounds)
    assert x.grad.backend == "jax" and w.grad.backend == backend, (x.grad, w.grad)
    np.testing.assert_allclose(loss.item(), reference_loss(x_host, w_host, arguments.rounds),
                               rtol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(grads[0]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), np.asarray(grads[1]), rtol=1e-4, atol=1e-5)
    print(f"loss {loss.item():.4f}; x.grad ({x.grad.backend}) and w.grad ({w.grad.backend}) "
          "match jax.grad")


if __name__ == "__main__":
    main()
