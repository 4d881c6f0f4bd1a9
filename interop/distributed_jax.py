"""A sharded `jax_function` across two processes, under JAX's own distributed runtime.

    python interop/distributed_jax.py

starts two worker processes on 127.0.0.1 (each with two host devices, set by
`XLA_FLAGS=--xla_force_host_platform_device_count=2` in its environment before
JAX starts), which call

    jax.distributed.initialize(coordinator_address, num_processes=2, process_id=RANK,
                               initialization_timeout=...)

and build one `Mesh` over `jax.devices()`, the four devices of both processes.
Each process holds its half of the batch (`jax.make_array_from_process_local_data`);
both run the same jaxstream graph: jaxstream ops, then a `jax.jit` with
`NamedSharding`s over the mesh as one `jax_function` node, then jaxstream ops
again, and backward through all of it. jaxstream adds no communication of its
own (Note [Multi-device and multi-host] in `jaxstream/jax_interop/backward.py`):
XLA's collectives run inside the compiled programs. Process 0 gathers the
gradients (`process_allgather`) and the launcher checks them against the same
graph run in one process without a mesh, on the cpu as the workers, the layer's
product in float32 in both (`precision="highest"`: not a GPU's TensorFloat32).

On CPU, cross-process programs need a collectives implementation: without one
XLA fails with "Multiprocess computations aren't implemented on the CPU
backend". JAX 0.10 defaults `jax_cpu_collectives_implementation` to "gloo"
(TCP); the workers set it anyway, since older releases defaulted to none (and
"mpi" is the other choice). It must be set before the CPU backend starts.

`launch` is the reusable part: it runs one command per process, tells each its
rank, the process count and a free coordinator port through the environment,
and bounds the whole run: a worker that fails has the others killed and its
stderr raised at once; a run past `timeout` is killed and raised as a
`TimeoutError`; every worker is reaped, whatever happens. Workers call
`exit_with_launcher` so that they also end if the launcher itself is killed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxstream as js
from jaxstream.devices.xla import TWIN_ENV

RANK, COUNT, COORDINATOR = "JAX_PROCESS_ID", "JAX_NUM_PROCESSES", "JAX_COORDINATOR_ADDRESS"
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
BATCH, FEATURES, UNITS = 16, 8, 4


class WorkerError(RuntimeError):
    """A worker process exited with an error; the others were killed."""

    def __init__(self, process_id: int, returncode: int, stderr: str) -> None:
        super().__init__(
            f"worker process {process_id} exited with status {returncode}; the other workers "
            f"were killed. Its stderr ends with:\n{stderr}"
        )
        self.process_id, self.returncode, self.stderr = process_id, returncode, stderr


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the coordinator binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(process_id: int, num_processes: int, devices: int, port: int) -> dict[str, str]:
    """The launcher's environment, plus this worker's rank, coordinator and device count.

    Without the GPU twin: it starts JAX when jaxstream is imported, and
    `jax.distributed.initialize` must come before that.
    """
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.split("=")[0] !=
             DEVICE_COUNT_FLAG]
    inherited = {k: v for k, v in os.environ.items() if k != TWIN_ENV}
    return {
        **inherited,
        "XLA_FLAGS": " ".join([*flags, f"{DEVICE_COUNT_FLAG}={devices}"]),
        "JAX_PLATFORMS": "cpu",
        RANK: str(process_id),
        COUNT: str(num_processes),
        COORDINATOR: f"127.0.0.1:{port}",
    }


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:]


def launch(
    command: Sequence[str],
    *,
    num_processes: int = 2,
    devices_per_process: int = 2,
    timeout: float = 120.0,
) -> list[str]:
    """Run `command` once per process; their stdouts, in rank order, once all exit 0.

    Raises `WorkerError` as soon as one worker fails and `TimeoutError` after
    `timeout` seconds; either way every worker is killed and reaped first.
    """
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jaxstream-workers-") as tmp:
        logs = [(Path(tmp, f"{i}.out"), Path(tmp, f"{i}.err")) for i in range(num_processes)]
        procs: list[subprocess.Popen] = []
        try:
            for i, (out, err) in enumerate(logs):
                with out.open("w") as o, err.open("w") as e:
                    env = worker_env(i, num_processes, devices_per_process, port)
                    procs.append(subprocess.Popen(
                        command, env=env, stdin=subprocess.PIPE, stdout=o, stderr=e))
            _wait_all(procs, [err for _, err in logs], time.monotonic() + timeout, timeout)
            return [out.read_text() for out, _ in logs]
        finally:
            _kill_all(procs)


def _wait_all(procs: list, errs: list[Path], deadline: float, timeout: float) -> None:
    """Poll until every worker exits 0; raise on the first failure or at the deadline."""
    while True:
        codes = [p.poll() for p in procs]
        for i, code in enumerate(codes):
            if code not in (None, 0):
                _kill_all(procs)
                raise WorkerError(i, code, _tail(errs[i]))
        if all(code == 0 for code in codes):
            return
        if time.monotonic() > deadline:
            running = [i for i, code in enumerate(codes) if code is None]
            _kill_all(procs)
            tails = "\n".join(f"--- worker {i} stderr:\n{_tail(errs[i], 1500)}" for i in running)
            raise TimeoutError(
                f"workers {running} still running after {timeout:g} s; they were killed "
                f"(raise `timeout` if the run is just slow).\n{tails}"
            )
        time.sleep(0.05)


def _kill_all(procs: list[subprocess.Popen]) -> None:
    """Kill the workers still running and reap every one, closing their stdin pipes."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(timeout=30)
        p.stdin.close()


def exit_with_launcher(code: int = 3) -> None:
    """End this worker when the launcher goes: its stdin pipe reaches EOF then."""

    def watch() -> None:
        # The raw descriptor: a buffered `sys.stdin` read would hold a lock at shutdown.
        while os.read(0, 1024):
            pass
        os._exit(code)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()


def layer(x: jax.Array, w: jax.Array) -> jax.Array:
    """The JAX layer, its product in float32 (at JAX's default precision a GPU would round
    its inputs to TensorFloat32, and the reference would not match the workers')."""
    return jnp.tanh(jnp.matmul(x, w, precision="highest"))


def loss_graph(x: js.Tensor, w: js.Tensor, layer_fn: Callable) -> js.Tensor:
    """jaxstream ops, the JAX layer, jaxstream ops; `w` also feeds a second branch."""
    h = (x * 2.0).sin()
    y = layer_fn(h, w)
    return (y * y).sum() + 0.1 * (w * w).sum()


def problem() -> tuple[np.ndarray, np.ndarray]:
    """The global batch and weights, the same in every process."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    w = rng.standard_normal((FEATURES, UNITS)).astype(np.float32)
    return x, w


def single_process_gradients() -> dict[str, np.ndarray]:
    """The gradients of `loss_graph` in one process, without a mesh, on the cpu: the kind of
    device the workers run on (`JAX_PLATFORMS=cpu`), whatever JAX's default device is here."""
    xh, wh = problem()
    x = js.tensor(xh, backend="jax", device="cpu", requires_grad=True)
    w = js.tensor(wh, backend="jax", device="cpu", requires_grad=True)
    loss_graph(x, w, js.jax_function(layer)).backward()
    return {"x": np.asarray(x.grad.data), "w": np.asarray(w.grad.data)}


def worker(result_path: str, init_timeout: int = 60) -> None:
    """One process of the distributed run; process 0 saves the gathered gradients."""
    exit_with_launcher()
    rank, count = int(os.environ[RANK]), int(os.environ[COUNT])
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(os.environ[COORDINATOR], num_processes=count, process_id=rank,
                               initialization_timeout=init_timeout)
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    rows, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    xh, wh = problem()
    mine = slice(rank * BATCH // count, (rank + 1) * BATCH // count)
    x = js.tensor(jax.make_array_from_process_local_data(rows, xh[mine], xh.shape),
                  requires_grad=True)
    w = js.tensor(jax.make_array_from_process_local_data(replicated, wh), requires_grad=True)
    sharded = jax.jit(layer, in_shardings=(rows, replicated), out_shardings=rows)
    loss_graph(x, w, js.jax_function(sharded, name="ShardedLayer")).backward()
    assert x.grad.data.sharding.is_equivalent_to(rows, 2), x.grad.data.sharding
    assert w.grad.data.sharding.is_equivalent_to(replicated, 2), w.grad.data.sharding
    gx, gw = multihost_utils.process_allgather((x.grad.data, w.grad.data), tiled=True)
    print(f"process {rank}: {len(jax.local_devices())} of {len(jax.devices())} devices, "
          f"x.grad {x.grad.data.sharding.spec} w.grad {w.grad.data.sharding.spec}")
    if rank == 0:
        np.savez(result_path, x=gx, w=gw)


def distributed_gradients(timeout: float = 120.0) -> tuple[dict[str, np.ndarray], list[str]]:
    """The gradients of the two-process run, and the workers' stdouts."""
    with tempfile.TemporaryDirectory(prefix="jaxstream-distributed-") as tmp:
        path = os.path.join(tmp, "grads.npz")
        outs = launch([sys.executable, __file__, "--worker", path], timeout=timeout)
        with np.load(path) as saved:
            return {k: saved[k] for k in saved.files}, outs


def main() -> None:
    grads, outs = distributed_gradients()
    print("".join(outs), end="")
    reference = single_process_gradients()
    for name, g in grads.items():
        np.testing.assert_allclose(g, reference[name], rtol=1e-5, atol=1e-6, err_msg=name)
    print("gradients over 2 processes x 2 devices equal the single-process ones")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main()
