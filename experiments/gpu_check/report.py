"""The GPU check's report: a JSON record and its Markdown, and the pieces the paper reuses.

The record (``build_record``) holds every step's result as the steps return
them; the Markdown is rendered from the record alone, so that the paper can
render the same tables from a report written on another machine
(``environment_table``, ``steps_table``, ``experiment_tables``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.gpu_check.calibration import calibration_markdown
from experiments.gpu_check.commands import scrub
from experiments.gpu_check.predictions import predictions_markdown
from experiments.gpu_check.steps import OK, StepResult
from experiments.harness import environment
from experiments.harness.revision import revision

SCHEMA_VERSION = 1
KIND = "gpu_check"
REHEARSAL_SLUG = "cpu-rehearsal"
DEFAULT_REPORTS_DIR = Path(__file__).resolve().parents[1] / "results" / "gpu"


def slug(gpu_name: str) -> str:
    """A file name for a GPU: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-") or "unnamed-gpu"


def build_record(
    steps: Sequence[StepResult], *, device: str, gpu: str | None, budget_s: float, wall_s: float
) -> dict[str, Any]:
    """The JSON record of one check: where and when it ran, and every step's result."""
    rehearsal = device != "cuda"
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "rehearsal": rehearsal,
        "device": device,
        "gpu": gpu,
        "slug": REHEARSAL_SLUG if rehearsal or gpu is None else slug(gpu),
        "command": scrub(environment.command_line()),
        "date_utc": environment.utc_now(),
        "revision": revision(),
        "budget_s": budget_s,
        "wall_s": wall_s,
        "ok": all(step.status == OK for step in steps),
        "steps": [step.to_json() for step in steps],
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table; a cell's `|` is escaped."""
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(map(cell, cells)) + " |"

    rule = "|" + "|".join("---" for _ in headers) + "|"
    return "\n".join([line(headers), rule, *map(line, rows)])


def step(record: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in record["steps"] if s["name"] == name), None)


def title(record: dict[str, Any]) -> str:
    if record["rehearsal"]:
        return "GPU check: a CPU rehearsal on sim:0 (no GPU)"
    return f"GPU check: {record['gpu']}"


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def environment_table(facts: dict[str, Any]) -> str:
    """What the install saw: the GPU, its driver and CUDA, and each framework's devices."""
    cupy, jax, torch, ours = facts["cupy"], facts["jax"], facts["torch"], facts["jaxstream"]
    drivers = ", ".join(gpu["driver_version"] for gpu in facts["nvidia_smi"].get("gpus", []))
    cuda = (
        f"runtime {cupy['cuda_runtime']}, driver API {cupy['cuda_driver_api']}"
        if "cuda_runtime" in cupy else "n/a (CuPy sees no GPU)"
    )
    rows = [
        ("GPU", facts["gpu_name"] or "none"),
        ("driver", drivers or "n/a (nvidia-smi found no GPU)"),
        ("CUDA (CuPy's)", cuda),
        ("JAX", f"{jax['version']} (jaxlib {jax['jaxlib']}); devices "
                f"{', '.join(jax['devices'])}; default backend {jax['default_backend']}"),
        ("CuPy", f"{cupy['version']}; devices {', '.join(cupy['devices']) or 'none'}"),
        ("torch", f"{torch['version']}; sees CUDA: {'yes' if torch['cuda_available'] else 'no'}"
                  + (f" (CUDA {torch['cuda']})" if torch.get("cuda") else "")),
        ("jaxstream", f"{ours['version']}, revision {ours['revision'] or 'unknown'}; "
                      f"{ours['cuda_devices']} cuda device(s); sim:0's JAX device "
                      f"{ours['sim0_jax_device']}"
                      + ("; GPU twin on" if ours["gpu_twin"] else "")),
        ("CUDA packages", ", ".join(f"{k} {v}" for k, v in facts["cuda_packages"].items())
                          or "none installed"),
        ("Python", facts["python"]),
    ]
    return table(("", ""), rows)


def steps_table(record: dict[str, Any]) -> str:
    rows = [
        (s["title"], s["status"], _seconds(s["wall_s"]), _seconds(s["timeout_s"]), s["summary"])
        for s in record["steps"]
    ]
    return table(("step", "status", "wall s", "budget s", "summary"), rows)


def _pytest_section(details: dict[str, Any]) -> list[str]:
    lines = [f"`{details['command']}`", ""]
    if details["counts"]:
        lines += [table(list(details["counts"]), [list(details["counts"].values())]), ""]
    if details["failures"]:
        lines += ["Failed:", "", *(f"- `{failure}`" for failure in details["failures"]), ""]
    if details["skip_reasons"]:
        lines += ["Skipped, by reason:", ""]
        lines += [f"- {count}: {reason}" for reason, count in details["skip_reasons"].items()]
        lines.append("")
    if "output_tail" in details:
        lines += ["```text", details["output_tail"], "```", ""]
    return lines


def _readme_section(details: dict[str, Any]) -> list[str]:
    rows = [
        (f"`{c['command']}`", c["status"], _seconds(c.get("wall_s")),
         c.get("reason") or (f"ran as `{c['ran_as']}`" if "ran_as" in c else ""))
        for c in details["commands"]
    ]
    lines = [table(("command", "status", "wall s", "note"), rows), ""]
    for command in details["commands"]:
        if "output_tail" in command:
            lines += [f"`{command['command']}`:", "", "```text", command["output_tail"], "```", ""]
    return lines


def experiment_tables(details: dict[str, Any], heading: str = "###") -> list[str]:
    """Each experiment's status and wall time, the host calibration, then each one's headline
    table (with the predictions beside the measurements, where it predicts) and failures."""
    runs = details["runs"]
    rows = [(r["name"], r["status"], _seconds(r["wall_s"]), len(r.get("failures", {})))
            for r in runs]
    lines = [table(("experiment", "status", "wall s", "failures"), rows), ""]
    if "calibration" in details:
        lines += calibration_markdown(details["calibration"], table)
    for run in runs:
        lines += [f"{heading} {run['name']}", ""]
        if "headline" in run:
            lines += [table(run["headline"]["headers"], run["headline"]["rows"]), ""]
        if "predictions" in run:
            lines += predictions_markdown(run["predictions"], table)
        lines += [f"- {case}: `{error}`" for case, error in run.get("failures", {}).items()]
        if run.get("reason"):
            lines.append(f"- {run['reason']}")
        if run.get("failures") or run.get("reason"):
            lines.append("")
    return lines


_SECTIONS = {"cuda_tests": _pytest_section, "suite": _pytest_section, "readme": _readme_section,
             "experiments": experiment_tables}


def render_markdown(record: dict[str, Any]) -> str:
    """The report's Markdown, from its record."""
    failed = [s["title"] for s in record["steps"] if s["status"] != OK]
    verdict = (
        f"every step passed ({len(record['steps'])})" if not failed
        else f"{len(failed)} of {len(record['steps'])} steps did not pass: {'; '.join(failed)}"
    )
    lines = [f"# {title(record)}", ""]
    if record["rehearsal"]:
        lines += ["A CPU rehearsal, not a GPU measurement: the same steps with `--device sim` "
                  "on the GPU twin, in small sizes (Note [The sim run] in "
                  "experiments/harness/peers.py).", ""]
    lines += [
        f"- Result: {verdict}.",
        f"- Command: `{record['command']}`; date (UTC): {record['date_utc']}; revision: "
        f"{record['revision'] or 'unknown'}.",
        f"- Wall time: {record['wall_s']:.0f} s, within a budget of {record['budget_s']:.0f} s.",
        "",
    ]
    environment_step = step(record, "environment")
    if environment_step and environment_step["details"].get("facts"):
        lines += ["## Environment", "", environment_table(environment_step["details"]["facts"]), ""]
    lines += ["## Steps", "", steps_table(record), ""]
    for s in record["steps"]:
        render = _SECTIONS.get(s["name"])
        if render is not None:
            lines += [f"## {s['title']}", "", *render(s["details"])]
    return "\n".join(lines).rstrip() + "\n"


def write_report(record: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write ``SLUG.md`` and ``SLUG.json`` into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = out_dir / f"{record['slug']}.md"
    record_path = out_dir / f"{record['slug']}.json"
    markdown.write_text(render_markdown(record), encoding="utf-8")
    record_path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return markdown, record_path


def newest(reports_dir: Path = DEFAULT_REPORTS_DIR) -> dict[str, Any] | None:
    """The newest GPU check record under ``reports_dir`` measured on a GPU (not a
    rehearsal), or None."""
    found = []
    for path in reports_dir.glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("kind") == KIND and not record["rehearsal"]:
            found.append(record)
    return max(found, key=lambda record: record["date_utc"], default=None)
