"""A sharded `jax.jit` over a device mesh as one jaxstream op.

Run on one machine with four simulated CPU devices:

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python interop/sharded_jax_function.py

(the script sets the flag itself when it is missing; XLA reads it only at start-up). Its
mesh and its reference are on JAX's host devices, named (`jax.devices("cpu")`): on a
machine with a GPU, JAX's default devices (`jax.devices()`) are the GPUs.

On several hosts, start the same script on every host and initialise JAX's own
distributed runtime before any array is created:

    jax.distributed.initialize(
        coordinator_address="host0:1234", num_processes=N, process_id=RANK
    )

then build the `Mesh` over `jax.devices()` (every host's devices) and make the
global inputs with `jax.make_array_from_process_local_data(sharding, local_rows)`.
jaxstream adds no communication of its own: the engine schedules the sharded
function as one node on each host, and XLA's collectives do the rest.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402  (XLA_FLAGS must be set before JAX starts)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxstream as js  # noqa: E402
from jaxstream.jax_interop import jax_function  # noqa: E402


def loss(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w).sum()


def main() -> None:
    devices = jax.devices("cpu")
    assert len(devices) >= 4, f"needs 4 host devices, got {devices}"
    mesh = Mesh(np.array(devices[:4]), ("batch",))
    rows = NamedSharding(mesh, P("batch"))
    replicated = NamedSharding(mesh, P())

    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((16, 8)).astype(np.float32)
    w_host = rng.standard_normal((8, 4)).astype(np.float32)
    x = js.tensor(jax.device_put(x_host, rows), requires_grad=True)
    w = js.tensor(jax.device_put(w_host, replicated), requires_grad=True)

    sharded_loss = jax_function(jax.jit(loss, in_shardings=(rows, replicated)))
    sharded_loss(x, w).backward()

    with jax.default_device(devices[0]):
        gx, gw = jax.grad(loss, argnums=(0, 1))(x_host, w_host)
    np.testing.assert_allclose(np.asarray(x.grad.data), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(w.grad.data), gw, rtol=1e-5, atol=1e-6)
    assert x.grad.data.sharding.is_equivalent_to(rows, x_host.ndim), x.grad.data.sharding
    assert w.grad.data.sharding.is_equivalent_to(replicated, w_host.ndim)
    print("sharded gradients equal the unsharded ones and keep the input shardings:")
    print("  x.grad:", x.grad.data.sharding.spec, " w.grad:", w.grad.data.sharding.spec)


if __name__ == "__main__":
    main()
