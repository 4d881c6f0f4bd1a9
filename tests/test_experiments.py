"""The experiments command line and each experiment's records, in a tiny (smoke) size.

Timings are never asserted here: they belong in the results, not in pass/fail.
"""

from __future__ import annotations

import datetime
import json
import os
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import experiments
from experiments import registry
from experiments.harness import hardware
from experiments.harness.progress import progress_bar
from experiments.harness.results import Column
from experiments.harness.timing import (
    Case,
    Missing,
    PeerUnavailable,
    Timing,
    time_cases,
    time_interleaved,
)
from experiments.harness.verdicts import Target, described, verdict
from experiments.streaming_backward import table as streaming_table
from experiments.workloads.random_dag import make_plan
from jaxstream.devices import jax_gpus
from jaxstream.devices.xla import TWIN_ENV

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = sorted(registry.experiments())
NOT_EXPERIMENTS = {"__main__", "gpu_check", "harness", "registry", "workloads"}
RECORD_KEYS = {
    "schema_version",
    "experiment",
    "description",
    "command",
    "date_utc",
    "mode",
    "environment",
    "intervals",
    "device",
    "intra_op_threads",
    "revision",
    "machine",
    "versions",
    "parameters",
    "columns",
    "rows",
    "checks",
    "failures",
    "notes",
    "files",
}


def run_cli(
    *arguments: str, env: dict[str, str] | None = None, timeout: float = 110
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments", *arguments],
        cwd=REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def smoke_run(name: str, out_dir: Path, env: dict[str, str] | None = None) -> dict:
    completed = run_cli("run", name, "--smoke", "--no-progress", "--out", str(out_dir), env=env)
    assert completed.returncode == 0, completed.stderr
    return json.loads((out_dir / f"{name}.json").read_text(encoding="utf-8"))


class SmokeReproduction:
    """Every experiment in smoke size, run once by `reproduce` in one process, as `make
    reproduce` runs them (a process per experiment would pay the imports each time)."""

    def __init__(
        self, out_dir: Path, env: dict[str, str] | None = None, device: str = "cpu"
    ) -> None:
        self.out_dir = out_dir
        self.completed = run_cli(
            "reproduce", "--smoke", "--no-progress", "--device", device, "--out", str(out_dir),
            env=env, timeout=900,
        )

    def record(self, name: str) -> dict:
        path = self.out_dir / f"{name}.json"
        assert path.exists(), self.completed.stderr[-4000:]
        return json.loads(path.read_text(encoding="utf-8"))


IN_TWIN = os.environ.get(TWIN_ENV) == "1"


def _torch_hidden(shadow: Path) -> dict[str, str]:
    """The environment with `import torch` failing, as where the optional extra is not
    installed."""
    (shadow / "torch").mkdir()
    hidden = "raise ImportError('torch is hidden by the test')\n"
    (shadow / "torch" / "__init__.py").write_text(hidden)
    path = os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> SmokeReproduction:
    """The smoke reproduction CI pays for once in each of its two runs: on the cpu with torch
    outside the GPU twin, as `make reproduce` runs; in the twin, on sim (the CPU stand-in for
    cuda, Note [The sim run] in experiments/harness/peers.py) with torch hidden, so that the
    other run covers both an accelerator's paths and a machine without the optional extra."""
    if not IN_TWIN:
        return SmokeReproduction(tmp_path_factory.mktemp("smoke"))
    env = _torch_hidden(tmp_path_factory.mktemp("shadow"))
    return SmokeReproduction(tmp_path_factory.mktemp("smoke"), env, device="sim")


def test_list_names_every_experiment_with_a_description() -> None:
    completed = run_cli("list")
    assert completed.returncode == 0, completed.stderr
    listed = dict(line.split(maxsplit=1) for line in completed.stdout.splitlines())
    assert {"engine_overhead", "hessian"} <= set(listed)
    assert sorted(listed) == EXPERIMENTS
    assert all(description.strip() for description in listed.values())


def test_every_experiment_module_is_registered() -> None:
    modules = {info.name for info in pkgutil.iter_modules(experiments.__path__)}
    registered = {name.removeprefix("experiments.") for name in registry.MODULES}
    assert modules - NOT_EXPERIMENTS == registered
    assert sorted(registry.experiments()) == sorted(registered)


def test_a_cuda_run_without_a_gpu_names_the_missing_hardware(tmp_path: Path) -> None:
    hidden = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
    completed = run_cli(
        "run", "streaming_backward", "--device", "cuda", "--smoke", "--out", str(tmp_path),
        env=hidden,
    )
    assert completed.returncode == 2
    assert "--device cuda needs a CUDA GPU" in completed.stderr
    assert not list(tmp_path.iterdir()), "nothing is written for a run that cannot start"


def test_a_peer_that_cannot_run_on_cuda_reads_not_available_and_the_run_goes_on() -> None:
    """jax_overhead on `--device cuda`: NumPy's arrays never live on a GPU, and JAX may see
    none (here); such a peer is missing, with the reason, on any machine, not a crash."""
    from experiments import jax_overhead

    result = jax_overhead.run(registry.RunOptions(mode="smoke", device="cuda",
                                                  show_progress=False))
    timings = result.rows[0]["timings"]
    host_only = {"status": "n/a", "reason": "NumPy arrays live on the host only"}
    assert timings["jaxstream-numpy"] == host_only
    assert result.checks["jaxstream-numpy"]["status"] == "n/a"
    assert all(timing.get("status") != "error" for timing in timings.values())
    assert not any("jaxstream-numpy" in failure for failure in result.failures)
    if not jax_gpus():
        no_gpu = {"status": "n/a", "reason": "jax has no device for cuda:0"}
        assert timings["jax-jit"] == timings["jaxstream-jax"] == no_gpu
        assert result.failures == {}


def test_streaming_backward_puts_the_prediction_error_beside_cuda() -> None:
    measured = {
        "cuda-k-forward_ms": 2.0, "cuda-forward-k_over_one": 0.8,
        "cuda-k-backward_ms": None, "cuda-backward-k_over_one": None,
        "predicted-k-forward_us": 1500.0, "predicted-forward-k_over_one": 0.6,
        "predicted-k-backward_us": 900.0, "predicted-backward-k_over_one": 0.7,
    }
    errors = streaming_table.prediction_errors(measured)
    assert errors["predicted-forward-time_error"] == pytest.approx(-0.25)
    assert errors["predicted-forward-ratio_difference"] == pytest.approx(-0.2)
    assert errors["predicted-backward-time_error"] is None  # cuda not measured: n/a
    assert errors["predicted-backward-ratio_difference"] is None
    headers = [column.header for column in streaming_table.columns()]
    cuda_ratio = headers.index("cuda backward, K streams / 1 stream (median [95% interval] / min)")
    assert headers[cuda_ratio + 1].startswith("prediction against cuda: forward")


def test_a_cuda_record_names_the_gpu_that_measured_it(monkeypatch) -> None:
    from jaxstream.devices import cuda as cuda_kind

    properties = {0: {"name": b"NVIDIA H100 80GB HBM3"}, 1: {"name": "NVIDIA H200"}}
    runtime = types.SimpleNamespace(getDeviceProperties=properties.__getitem__)
    monkeypatch.setattr(cuda_kind, "_cupy", lambda: types.SimpleNamespace(
        cuda=types.SimpleNamespace(runtime=runtime)))
    assert hardware.gpu_name() == "NVIDIA H100 80GB HBM3"
    assert hardware.gpu_name(1) == "NVIDIA H200"
    monkeypatch.setattr(cuda_kind, "_cupy", lambda: None)
    with pytest.raises(ImportError, match="the GPU's name needs CuPy"):
        hardware.gpu_name()


def test_unknown_experiment_is_refused() -> None:
    completed = run_cli("run", "no_such_experiment", "--smoke")
    assert completed.returncode == 2
    assert "no_such_experiment" in completed.stderr


@pytest.mark.outside_twin
def test_smoke_reproduction_succeeds_and_writes_its_paper_beside_its_results(
    smoke: SmokeReproduction,
) -> None:
    assert smoke.completed.returncode == 0, smoke.completed.stderr[-4000:]
    assert "## Results" in (smoke.out_dir / "paper" / "paper.md").read_text(encoding="utf-8")


def test_a_run_records_its_own_command(tmp_path: Path) -> None:
    record = smoke_run("stream_semantics", tmp_path)
    assert "-m experiments run stream_semantics --smoke" in record["command"]
    assert record["failures"] == {}


@pytest.mark.outside_twin
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_smoke_run_writes_a_complete_record_and_table(
    name: str, smoke: SmokeReproduction
) -> None:
    record = smoke.record(name)
    out_dir = smoke.out_dir

    assert set(record) == RECORD_KEYS
    assert record["experiment"] == name
    assert record["mode"] == "smoke"
    assert "-m experiments reproduce --smoke" in record["command"]
    date = datetime.datetime.fromisoformat(record["date_utc"])
    assert date.utcoffset() == datetime.timedelta(0)
    assert {"platform", "processor", "cpu_count"} <= set(record["machine"])
    assert {"python", "numpy", "jax", "torch", "jaxstream"} <= set(record["versions"])
    assert record["failures"] == {}
    assert record["rows"]
    assert record["schema_version"] == 3
    assert set(record["versions"]) >= {"optax", "scikit-learn", "matplotlib", "threadpoolctl",
                                       "array-api-compat", "jaxlib"}
    environment = record["environment"]
    assert {"variables", "at_start", "at_end", "imported_packages"} <= set(environment)
    assert environment["variables"]["OMP_NUM_THREADS"] == "1"
    assert "numpy" in environment["imported_packages"]
    assert record["intervals"]["resamples"] > 0
    keys = [key for column in record["columns"] for key in column["keys"]]
    for row in record["rows"]:
        assert set(keys) <= set(row)
        assert all(timing["status"] in {"ok", "n/a"} for timing in row.get("timings", {}).values())
        for key in keys:  # every median ratio of timings has its interval beside it
            if f"{key}_min" in row and ("_over_" in key or "speedup" in key):
                interval = row[f"{key}_interval"]
                assert (interval is None) == (row[key] is None), (name, key)

    markdown = (out_dir / record["files"]["markdown"]).read_text(encoding="utf-8")
    header = "| " + " | ".join(column["header"] for column in record["columns"]) + " |"
    lines = markdown.splitlines()
    assert header in lines
    table_start = lines.index(header)
    assert lines[table_start + 1].startswith("|---")
    assert all(
        line.startswith("| ")
        for line in lines[table_start + 2 : table_start + 2 + len(record["rows"])]
    )
    if record["files"]["plot"]:
        assert (out_dir / record["files"]["plot"]).read_bytes().startswith(b"\x89PNG")


@pytest.mark.twin_only
def test_every_experiment_runs_on_sim_without_torch_and_says_where(
    smoke: SmokeReproduction,
) -> None:
    """`--device sim` with torch hidden: the twin's smoke reproduction. Every experiment runs
    without a failure; the PyTorch cells read "not installed", the cuda cells (CuPy,
    PyTorch's CUDA streams) and the rows timed on cuda only read n/a."""
    assert smoke.completed.returncode == 0, smoke.completed.stderr[-4000:]
    for name in EXPERIMENTS:
        record = smoke.record(name)
        assert record["device"] == "sim", name
        assert record["failures"] == {}, name
        assert [n for n in record["notes"] if n.startswith("Device sim")], name
        for row in record["rows"]:
            for peer, timing in row.get("timings", {}).items():
                if peer.startswith("torch"):
                    assert timing == {"status": "n/a", "reason": "torch is not installed"}
                else:
                    assert timing["status"] == "ok" or _cuda_only(peer, timing), (name, peer)
    streaming = smoke.record("streaming_backward")
    assert streaming["checks"]["sim_grads_match_cpu"] is True
    assert streaming["checks"]["cuda_grads_match_cpu"] is None


def _cuda_only(peer: str, timing: dict) -> bool:
    return peer.startswith("cuda") or "cuda" in timing.get("reason", "")


def test_interleaved_timing_tells_absent_peers_from_failing_ones() -> None:
    def absent() -> None:
        raise PeerUnavailable("not installed here")

    def broken() -> None:
        raise ValueError("a bug")

    outcomes = time_interleaved(
        {"ok": lambda: lambda: None, "absent": absent, "broken": broken}, warmup=1, repeat=3
    )
    assert isinstance(outcomes["ok"], Timing) and len(outcomes["ok"].samples_s) == 3
    assert outcomes["absent"] == Missing("not installed here", failed=False)
    assert outcomes["broken"].failed and "ValueError: a bug" in outcomes["broken"].reason


def test_columns_render_missing_values_as_not_available() -> None:
    column = Column("ratio (median / min)", ("median", "min"), "{:.2f}x")
    assert column.render({"median": 1.234, "min": None}) == "1.23x / n/a"


def test_random_dag_is_reproducible_from_its_seed() -> None:
    assert make_plan(20, 5, seed=3) == make_plan(20, 5, seed=3)
    assert make_plan(20, 5, seed=3) != make_plan(20, 5, seed=4)
    assert make_plan(20, 5, seed=3).backward_node_count() >= 5


def test_time_cases_times_every_case_and_collects_the_failures() -> None:
    def broken() -> None:
        raise ValueError("a bug")

    totals: list[int] = []

    def progress(total: int):
        totals.append(total)
        return progress_bar(total, "test", enabled=False)

    outcomes, failures = time_cases(
        [
            Case("first", {"ok": lambda: lambda: None}, repeat=2),
            Case("second", {"ok": lambda: lambda: None, "broken": broken}, repeat=3),
        ],
        warmup=1,
        progress=progress,
    )
    assert totals == [1 * (1 + 2) + 2 * (1 + 3)]
    assert [len(outcome["ok"].samples_s) for outcome in outcomes] == [2, 3]
    assert list(failures) == ["second: broken"]
    assert "ValueError: a bug" in failures["second: broken"]


def test_a_target_is_met_only_if_the_wall_and_cpu_intervals_lie_within_it() -> None:
    def ratio(wall: list[float], cpu: list[float]) -> dict:
        return {"r": sum(wall) / 2, "r_interval": wall, "r_cpu": sum(cpu) / 2,
                "r_cpu_interval": cpu}

    at_most = Target(2.0)
    assert verdict(ratio([1.4, 1.6], [1.2, 1.3]), "r", at_most) == "met"
    assert verdict(ratio([1.4, 1.6], [1.8, 2.2]), "r", at_most) == "inconclusive"
    assert verdict(ratio([1.8, 2.2], [2.1, 2.9]), "r", at_most) == "missed"
    assert verdict(ratio([1.4, 1.6], [2.1, 2.9]), "r", at_most) == "missed"
    at_least = Target(1.5, at_least=True)
    assert verdict(ratio([1.6, 1.9], [1.55, 1.7]), "r", at_least) == "met"
    assert verdict(ratio([1.4, 1.6], [1.55, 1.7]), "r", at_least) == "inconclusive"
    assert verdict({"r": None, "r_cpu": None}, "r", at_most) is None
    assert described(ratio([1.4, 1.6], [1.2, 1.3]), "r", at_most) == (
        "1.50x [1.40, 1.60] wall / 1.25x [1.20, 1.30] CPU: met (target at most 2x)"
    )


def test_without_an_interval_a_ratio_is_judged_by_its_median() -> None:
    row = {"r": 1.5, "r_cpu": 1.25}
    assert verdict(row, "r", Target(2.0)) == "met"
    assert verdict({"r": 2.5, "r_cpu": 1.25}, "r", Target(2.0)) == "missed"


def test_a_training_step_sample_waits_for_the_updated_parameters(monkeypatch) -> None:
    """JAX dispatches the eager step's backward and update after the loss; a sample that
    waited for the loss alone would leave that work running into the next peer's sample.
    jax.jit's sample waits for the same things, so that no peer pays for less waiting."""
    import jax

    from experiments.compiled import mlp

    waited: list = []
    monkeypatch.setattr(mlp, "block_until_ready", lambda values: waited.extend(values))
    monkeypatch.setattr(jax, "block_until_ready", lambda tree: waited.extend(jax.tree.leaves(tree)))
    params = mlp.init_parameters()
    for peer, prepare in mlp.prepares(params, batch=4, device="cpu").items():
        waited.clear()
        prepare()()
        loss, *parameters = waited
        assert loss.shape == () and len(parameters) == 2 * len(params), peer
        if peer != "jax-jit":
            assert all(p.requires_grad and p.grad is None for p in parameters), peer


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has no getrusage page-fault count")
def test_a_sample_counts_the_page_faults_of_its_work() -> None:
    """Touching 64 MiB of fresh memory faults its pages in; doing nothing faults hardly any."""
    import numpy as np

    def touch() -> None:
        np.ones(1 << 24, np.float32)

    outcomes = time_interleaved({"touch": lambda: touch, "idle": lambda: lambda: None},
                                warmup=1, repeat=3)
    touching, idle = outcomes["touch"], outcomes["idle"]
    assert len(touching.fault_samples) == len(idle.fault_samples) == 3
    assert touching.faults_median >= 16  # at least one fault per 2 MiB huge page
    assert idle.faults_median < touching.faults_median
    assert touching.to_json()["fault_samples"] == list(touching.fault_samples)
    assert Timing((1.0,), (1.0,)).faults_median is None  # a worker that did not count them


def test_the_digits_verdict_says_when_other_threads_inflate_the_cpu_time() -> None:
    from experiments.digits_training.experiment import _busy_neighbours

    def row(together_cpu: float) -> dict:
        return {"batch": 64, "jaxstream-numpy_ms": 1.0, "jaxstream-numpy_ms_cpu": together_cpu,
                "jaxstream-numpy_alone_ms": 1.0, "jaxstream-numpy_alone_ms_cpu": 1.0}

    said = _busy_neighbours([row(2.5)])
    assert "2.5x in one process and 1.0x alone at batch 64" in said
    assert "each-alone" in said
    assert _busy_neighbours([row(1.05)]) == ""
    assert _busy_neighbours([{**row(2.5), "jaxstream-numpy_alone_ms": None}]) == ""


def test_the_hessian_faults_note_names_each_counted_peer_and_says_when_none_were() -> None:
    from experiments.hessian.notes import faults_note

    counted = {"variant": "B: training", "batch": 2000, "torch_faults": 1500.0,
               "jaxstream-numpy/on_faults": 0.0, "jaxstream-jax/on_faults": None}
    note = faults_note([counted])
    assert "B at batch 2,000: PyTorch eager 1,500, jaxstream (NumPy) trimming on 0." in note
    uncounted = {**counted, "torch_faults": None, "jaxstream-numpy/on_faults": None}
    assert "not counted on this platform" in faults_note([uncounted])


def test_the_jax_dispatch_reference_counts_the_pytorch_rows_over_the_target() -> None:
    from experiments.jax_dispatch import _reference_note

    def row(name: str, wall: float | None, cpu: float | None) -> dict:
        return {"workload": name, "torch_over_torch-op": wall, "torch_over_torch-op_cpu": cpu,
                "torch_us_per_node": 3.0, "torch-op_us_per_node": 1.0,
                "jaxstream_us_per_node": 16.0, "jax-jit_us_per_node": 5.5}

    note = _reference_note([row("mul chain, forward", 1.2, 1.25),
                            row("tanh chain, backward", 3.9, 1.1)])
    assert "mul chain, forward 1.20x / 1.25x; tanh chain, backward 3.90x / 1.10x" in note
    assert "over 1.3x on 1 of 2 rows" in note
    assert "adds 2.0 to 2.0 us to PyTorch's op and 10.5 to 10.5 us to one jitted op" in note
    wall_only = _reference_note([row("mul chain, forward", 1.0, 1.31)])
    assert "over 1.3x on 1 of 1 rows" in wall_only
    assert _reference_note([row("mul chain, forward", None, None)]) == (
        "Reference: PyTorch was not measured in this run."
    )


@pytest.mark.outside_twin
def test_every_timed_peer_has_the_cores_it_used_beside_its_times(
    smoke: SmokeReproduction,
) -> None:
    for name in EXPERIMENTS:
        record = smoke.record(name)
        timed = [row for row in record["rows"] if row.get("timings")]
        if not timed:
            continue
        assert any("cores" in column["header"] for column in record["columns"]), name
        for row in timed:
            for peer, timing in row["timings"].items():
                cores = [key for key in row if key.startswith(f"{peer}_") and
                         key.endswith("_cores")]
                assert cores, (name, peer)
                if timing["status"] == "ok":
                    assert timing["cores"] == pytest.approx(
                        timing["cpu_median_s"] / timing["median_s"]), (name, peer)
                    assert row[cores[0]] == pytest.approx(timing["cores"]), (name, peer)


@pytest.fixture(scope="module")
def hessian_smoke(smoke: SmokeReproduction) -> dict:
    return smoke.record("hessian")


@pytest.mark.outside_twin
def test_the_hessian_record_has_relu_and_the_prs_form_beside_ours_and_a_torch_func_peer(
    hessian_smoke: dict,
) -> None:
    from experiments.hessian.peers import JAXSTREAM_PEERS
    from experiments.workloads.hessian_model import WORKLOADS

    rows = {row["key"]: row for row in hessian_smoke["rows"]}
    assert set(rows) == set(WORKLOADS)
    assert {row["activation"] for row in rows.values()} == {"tanh", "relu"}
    assert rows["hessian_pr"]["variant"].startswith("A' (tanh)")
    second_order = hessian_smoke["checks"]["second_order"]
    assert second_order["tanh"]["torch"] is True and second_order["relu"]["torch"] is True
    for key, row in rows.items():
        assert row["timings"]["torch-func"]["status"] == "ok", key
        assert row["torch-func_over_torch"] is not None, key
        assert row["torch-func_over_torch_interval"] is not None, key
        for peer in JAXSTREAM_PEERS:  # measured exactly where the second grad finds x
            measured = row["timings"][peer]["status"] == "ok"
            assert measured == (second_order[row["activation"]][peer] is True), (key, peer)
            if not measured:
                assert "no path back to x" in row["timings"][peer]["reason"], (key, peer)
    pr = hessian_smoke["parameters"]["pr82544"]
    assert pr["snippet"]["create_graph"] == "True on both grads"
    assert pr["batch"] == 10_000 and pr["activation"] == "relu" and pr["hidden_layers"] == 6
    assert "the hidden width" in pr["not_recorded"] and "the input size" in pr["not_recorded"]
    assert pr["functorch_over_after"]["training"] == pytest.approx(68.988 / 54.917)
    notes = hessian_smoke["notes"]
    assert [n for n in notes if n.startswith("Forms")] and [n for n in notes
                                                           if n.startswith("ReLU")]


def test_the_hessian_prs_form_records_the_second_grads_graph_and_ours_does_not(torch) -> None:
    """A' is the PR's snippet: create_graph=True on both grads, so h has a grad_fn."""
    from experiments.hessian.peers import torch_autograd
    from experiments.workloads.hessian_model import (
        PR_FORM,
        init_inputs,
        init_parameters,
        variant_outputs,
    )

    def h_of(variant: str, activation: str):
        x = torch.tensor(init_inputs(4), requires_grad=True)
        params = [tuple(torch.tensor(p, requires_grad=True) for p in layer)
                  for layer in init_parameters()]
        (h,) = variant_outputs(torch_autograd(), variant, x, params, activation)
        return h

    for activation in ("tanh", "relu"):
        assert h_of(PR_FORM, activation).grad_fn is not None, activation
        assert h_of("hessian", activation).grad_fn is None, activation
        assert torch.allclose(h_of(PR_FORM, activation), h_of("hessian", activation))
    assert float(h_of("hessian", "relu").abs().max()) == 0.0  # zero almost everywhere


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("variant", ["hessian", "training"])
def test_the_hessian_torch_func_peer_computes_what_jax_jit_does(
    torch, variant: str, activation: str
) -> None:
    from experiments.harness.peers import as_numpy
    from experiments.hessian.peers import build_stepper
    from experiments.workloads.hessian_model import init_inputs, init_parameters

    x, params = init_inputs(8), init_parameters()
    found, reference = (
        [as_numpy(v) for v in build_stepper(peer, variant, x, params, "cpu", activation).step()]
        for peer in ("torch-func", "jax-jit")
    )
    assert len(found) == len(reference) == (1 if variant == "hessian" else 14)
    for mine, theirs in zip(found, reference, strict=True):
        assert mine.shape == theirs.shape
        assert float(abs(mine - theirs).max()) <= 1e-4 * max(float(abs(theirs).max()), 1.0)


def test_the_hessian_and_profiler_records_say_what_an_interval_allows() -> None:
    from experiments.hessian.table import against_one
    from experiments.profiler_overhead.experiment import against_prediction

    assert against_one([1.06, 1.71]).startswith("it lies above 1")
    assert against_one([0.97, 1.59]).startswith("it includes 1")
    assert against_one([0.8, 0.95]).startswith("it lies below 1")
    assert against_one(None) == "not measured in this run"
    assert against_prediction([0.85, 0.91], 1.002).startswith("it lies wholly below")
    assert against_prediction([0.98, 1.03], 1.002) == "it includes the prediction"
    assert against_prediction([1.05, 1.1], 1.002).startswith("it lies wholly above")
    assert against_prediction(None, 1.002) == "not measured in this run"


def test_the_hessian_pr_record_follows_the_quoted_table() -> None:
    from experiments.hessian import pr82544

    assert pr82544.functorch_over_after() == {
        "hessian": pytest.approx(29.547 / 29.392), "training": pytest.approx(68.988 / 54.917)
    }
    setting = pr82544.SETTING
    assert f"{pr82544.PARAMETERS['hidden_layers']} hidden layers" in setting
    assert f"batch size {pr82544.PARAMETERS['batch']}" in setting
    assert set(pr82544.BESIDE.values()) == set(pr82544.PR_SPEEDUPS)
    assert pr82544.pr_record()["speedups"] == pr82544.PR_SPEEDUPS
