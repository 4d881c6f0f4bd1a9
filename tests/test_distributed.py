"""Two processes under JAX's distributed runtime, and the launcher that bounds them.

The recipe is `interop/distributed_jax.py`; `test_interop_recipes.py` runs it as a script.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

INTEROP = pathlib.Path(__file__).resolve().parents[1] / "interop"
_spec = importlib.util.spec_from_file_location("distributed_jax", INTEROP / "distributed_jax.py")
dj = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dj)


def _python(body: str) -> list[str]:
    """A worker command: `body` run by Python with the recipe importable as `dj`."""
    prelude = f"import os, sys, time\nsys.path.insert(0, {str(INTEROP)!r})\n"
    return [sys.executable, "-c", prelude + "import distributed_jax as dj\n" + body]


def _pids(tmp: pathlib.Path, count: int) -> list[int]:
    return [int((tmp / f"pid{i}").read_text()) for i in range(count)]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _oracle() -> dict[str, np.ndarray]:
    """`jax.grad` of the recipe's loss written out in JAX, for an independent check: on the
    cpu, as the workers, with its product in float32 (not a GPU's TensorFloat32)."""
    def loss(x: jax.Array, w: jax.Array) -> jax.Array:
        y = jnp.tanh(jnp.matmul(jnp.sin(x * 2.0), w, precision="highest"))
        return (y * y).sum() + 0.1 * (w * w).sum()

    cpu = jax.devices("cpu")[0]
    gx, gw = jax.grad(loss, argnums=(0, 1))(*(jax.device_put(a, cpu) for a in dj.problem()))
    return {"x": np.asarray(gx), "w": np.asarray(gw)}


def test_gradients_over_two_processes_equal_one_process_and_jax_grad() -> None:
    grads, outs = dj.distributed_gradients(timeout=100)
    assert "process 0: 2 of 4 devices, x.grad P('batch',) w.grad P()" in outs[0]
    assert "process 1: 2 of 4 devices" in outs[1]
    single, oracle = dj.single_process_gradients(), _oracle()
    assert grads.keys() == single.keys() == {"x", "w"}
    for name in grads:
        assert grads[name].shape == single[name].shape
        np.testing.assert_allclose(grads[name], single[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads[name], oracle[name], rtol=1e-5, atol=1e-5)


def test_a_failing_worker_raises_its_error_and_the_others_are_killed(tmp_path) -> None:
    body = (
        f"tmp = {str(tmp_path)!r}\n"
        "rank = os.environ['JAX_PROCESS_ID']\n"
        "open(os.path.join(tmp, 'pid' + rank), 'w').write(str(os.getpid()))\n"
        "if rank == '0':\n    time.sleep(100)\n"
        "for _ in range(500):\n"
        "    if os.path.exists(os.path.join(tmp, 'pid0')): break\n"
        "    time.sleep(0.01)\n"
        "raise ValueError('worker 1 broke on purpose')\n"
    )
    # Not a TimeoutError: the failure ends the run long before the 100 s deadline.
    with pytest.raises(dj.WorkerError, match="worker process 1 exited with status 1") as info:
        dj.launch(_python(body), timeout=100)
    assert info.value.process_id == 1
    assert "ValueError: worker 1 broke on purpose" in info.value.stderr
    assert all(_gone(pid) for pid in _pids(tmp_path, 2))


def test_a_run_past_its_timeout_is_killed(tmp_path) -> None:
    body = (
        f"open(os.path.join({str(tmp_path)!r}, 'pid' + os.environ['JAX_PROCESS_ID']), 'w')"
        ".write(str(os.getpid()))\n"
        "print('worker up', file=sys.stderr, flush=True)\n"
        "time.sleep(100)\n"
    )
    with pytest.raises(TimeoutError, match=r"workers \[0, 1\] still running after 5 s") as info:
        dj.launch(_python(body), timeout=5)
    assert "worker up" in str(info.value)
    assert all(_gone(pid) for pid in _pids(tmp_path, 2))


def test_distributed_initialization_is_bounded(tmp_path) -> None:
    """A process that never joins: the coordinator gives up after its init timeout."""
    body = (
        "if os.environ['JAX_PROCESS_ID'] == '1':\n    time.sleep(100)\n"
        f"dj.worker({str(tmp_path / 'grads.npz')!r}, init_timeout=2)\n"
    )
    with pytest.raises(dj.WorkerError, match="worker process 0") as info:
        dj.launch(_python(body), timeout=100)
    assert "Deadline Exceeded" in info.value.stderr
    assert not (tmp_path / "grads.npz").exists()


def test_a_worker_ends_when_its_launcher_goes() -> None:
    proc = subprocess.Popen(
        _python("dj.exit_with_launcher(code=7)\ntime.sleep(100)"), stdin=subprocess.PIPE
    )
    try:
        proc.stdin.close()  # what the kernel does to the pipe when the launcher dies
        assert proc.wait(timeout=60) == 7
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_worker_env_sets_rank_coordinator_and_replaces_the_device_count(monkeypatch) -> None:
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4 --xla_foo=1")
    env = dj.worker_env(1, 2, 3, 4321)
    assert env["XLA_FLAGS"] == "--xla_foo=1 --xla_force_host_platform_device_count=3"
    assert (env["JAX_PROCESS_ID"], env["JAX_NUM_PROCESSES"]) == ("1", "2")
    assert env["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:4321"
    assert 0 < dj.free_port() < 65536


def test_the_single_process_reference_runs_where_the_workers_run(monkeypatch) -> None:
    """On the cpu, in float32, wherever JAX's default device is (a GPU's matmul would round
    to TensorFloat32, and its sin differ by an ulp)."""
    seen, real = [], dj.loss_graph

    def spy(x, w, layer_fn):
        seen.append((str(x.device), str(w.device)))
        return real(x, w, layer_fn)

    monkeypatch.setattr(dj, "loss_graph", spy)
    grads = dj.single_process_gradients()
    assert seen == [("cpu", "cpu")]
    np.testing.assert_allclose(grads["w"], _oracle()["w"], rtol=1e-5, atol=1e-5)
    dots = str(jax.make_jaxpr(dj.layer)(*dj.problem()))
    assert "precision=(Precision.HIGHEST, Precision.HIGHEST)" in dots
