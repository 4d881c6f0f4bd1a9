"""Each recipe in interop/ runs as a plain script and checks what it shows."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from jaxstream.devices.xla import TWIN_ENV

RECIPES = pathlib.Path(__file__).resolve().parents[1] / "interop"


def _run(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(RECIPES / name), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def test_numpy_exchange() -> None:
    assert "NumPy -> JAX shares the buffer" in _run("numpy_exchange.py").stdout


def test_torch_exchange() -> None:
    pytest.importorskip("torch")
    assert "gradients match torch.autograd" in _run("torch_exchange.py").stdout


@pytest.mark.skipif(importlib.util.find_spec("optax") is None, reason="needs optax")
def test_optax_training_loss_goes_down() -> None:
    out = _run("optax_training.py").stdout
    assert "loss went down" in out


@pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn (the 'examples' extra)"
)
def test_digits_mlp_trains_eagerly_with_a_penalty_step_and_under_jax_jit() -> None:
    out = _run("digits_mlp.py").stdout
    assert "+ penalty" in out
    assert "both paths reach 93%" in out


@pytest.mark.oracle
@pytest.mark.outside_twin  # a training run in each recipe: one in each CI run
@pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn (the 'examples' extra)"
)
def test_cnn_digits_follows_torch_step_for_step_eagerly_and_compiled() -> None:
    out = _run("cnn_digits.py").stdout
    assert "eager: all 20 losses within" in out
    assert "js.compile: all 20 losses within" in out
    assert "eval mode matches torch" in out


@pytest.mark.oracle
@pytest.mark.twin_only  # a training run in each recipe: one in each CI run
def test_transformer_lm_follows_torch_step_for_step_and_samples_as_torch_does() -> None:
    out = _run("transformer_lm.py").stdout
    assert "eager: all 20 losses within" in out
    assert "js.compile: all 20 losses within" in out
    assert "torch writes the same continuation" in out


def test_sharded_jax_function_over_four_host_devices() -> None:
    # Without the GPU twin, whose sim devices hold JAX's host devices (Note [The GPU twin]);
    # the recipe names JAX's host devices, which a GPU machine has beside its GPUs.
    out = _run(
        "sharded_jax_function.py", XLA_FLAGS="--xla_force_host_platform_device_count=4",
        **{TWIN_ENV: "0"},
    ).stdout
    assert "keep the input shardings" in out
    assert "x.grad: P('batch',)" in out


def test_distributed_jax_over_two_processes() -> None:
    assert "equal the single-process ones" in _run("distributed_jax.py").stdout


def _hidden_gpus() -> dict[str, str]:
    """An environment in which neither CuPy nor JAX sees a GPU, whatever the machine has."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}


def _gpu_refused(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(RECIPES / name), "--device", "cuda"],
        env=_hidden_gpus(), capture_output=True, text=True, timeout=240,
    )
    assert done.returncode != 0
    return done.stderr


def test_jax_cupy_pingpong_on_sim_with_the_sanitizer_on() -> None:
    out = _run("jax_cupy_pingpong.py", "--device", "sim").stdout
    assert "stream sanitizer on: no race" in out
    assert "caught: a read-after-write race" in out
    assert "w.grad (numpy) match jax.grad" in out


def test_jax_cupy_pingpong_on_cuda_without_a_gpu_names_the_hardware() -> None:
    assert "needs a CUDA GPU" in _gpu_refused("jax_cupy_pingpong.py")


@pytest.mark.cuda
def test_jax_cupy_pingpong_on_cuda() -> None:
    out = _run("jax_cupy_pingpong.py", "--device", "cuda").stdout
    assert "stream sanitizer on: no race" in out
    assert "w.grad (cupy) match jax.grad" in out


def test_cupy_streams_on_sim() -> None:
    assert "consumer stream" in _run("cupy_streams.py", "--device", "sim").stdout


def test_cupy_streams_on_cuda_without_a_gpu_names_the_hardware() -> None:
    assert "needs a CUDA GPU" in _gpu_refused("cupy_streams.py")


@pytest.mark.cuda
def test_cupy_streams() -> None:
    assert "consumer stream" in _run("cupy_streams.py", "--device", "cuda").stdout
