"""A `jax_function` whose output is spread over several host devices, where JAX's default
device is not jaxstream's cpu one (as on a GPU machine): the engine makes the output's
gradient on one device, and the node's backward spreads it as the output was."""

from __future__ import annotations

import os
import subprocess
import sys

SPREAD_OUTPUT = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
first, *rest = jax.devices("cpu")
jax.config.update("jax_default_device", rest[-1])  # not the cpu's device, as a GPU's is not
import jaxstream as js
from jaxstream.jax_interop import jax_function
mesh = Mesh(np.array([first, rest[0]]), ("batch",))
rows, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
x_host = np.arange(8, dtype=np.float32).reshape(4, 2) / 8
w_host = np.ones((2, 3), np.float32)
x = js.tensor(jax.device_put(x_host, rows), requires_grad=True)
w = js.tensor(jax.device_put(w_host, replicated), requires_grad=True)
loss = lambda a, b: jnp.tanh(a @ b).sum()
jax_function(jax.jit(loss, in_shardings=(rows, replicated)))(x, w).backward()
on_first = [jax.device_put(a, first) for a in (x_host, w_host)]
gx, gw = jax.grad(loss, argnums=(0, 1))(*on_first)
np.testing.assert_allclose(np.asarray(x.grad.data), np.asarray(gx), rtol=1e-6)
np.testing.assert_allclose(np.asarray(w.grad.data), np.asarray(gw), rtol=1e-6)
assert x.grad.data.sharding.is_equivalent_to(rows, 2), x.grad.data.sharding
assert w.grad.data.sharding.is_equivalent_to(replicated, 2), w.grad.data.sharding
print("ok")
"""


def test_a_spread_outputs_gradient_is_spread_as_the_output_was() -> None:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=3",
           "JAX_PLATFORMS": "cpu", "JAXSTREAM_GPU_TWIN": "0"}
    done = subprocess.run([sys.executable, "-c", SPREAD_OUTPUT], env=env, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
