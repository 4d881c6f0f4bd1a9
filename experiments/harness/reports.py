"""Writing one run's results: NAME.json (the record), NAME.md (the table), NAME.png."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.harness import environment, intervals
from experiments.harness.conditions import conditions, snapshot
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.plots import matplotlib_available
from experiments.harness.results import ExperimentResult
from experiments.harness.revision import code_diff, revision

SCHEMA_VERSION = 3
"""2: intervals of the ratios, verdicts, the environment and the code's diff."""
DEFAULT_RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


@dataclass(frozen=True)
class RunStart:
    """What is taken as a run starts: the code's revision and its difference from the commit
    (Note [A revision without a false -dirty] in revision.py), and the machine's conditions."""

    revision: str | None
    diff: str | None
    conditions: dict[str, Any]


def run_start() -> RunStart:
    return RunStart(revision(), code_diff(), snapshot())


def build_record(
    experiment: Experiment,
    options: RunOptions,
    result: ExperimentResult,
    files: dict[str, Any],
    start: RunStart,
) -> dict[str, Any]:
    """The JSON record: enough to rerun the command and to judge the numbers. ``files``
    names the plot, the extra plots and the diff."""
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment.name,
        "description": experiment.description,
        "command": environment.command_line(),
        "date_utc": environment.utc_now(),
        "mode": options.mode,
        "device": options.device,
        "intra_op_threads": options.intra_op_threads or "framework defaults",
        "revision": start.revision,
        "machine": environment.machine(),
        "versions": environment.versions(),
        "environment": {
            **conditions(start.conditions),
            "imported_packages": environment.imported_versions(),
        },
        "intervals": intervals.method(),
        "parameters": result.parameters,
        "columns": [{"header": c.header, "keys": list(c.keys)} for c in result.columns],
        "rows": result.rows,
        "checks": result.checks,
        "failures": result.failures,
        "notes": result.notes,
        "files": {"markdown": f"{experiment.name}.md", **files},
    }


def _table(result: ExperimentResult) -> str:
    header = "| " + " | ".join(c.header for c in result.columns) + " |"
    rule = "|" + "|".join("---" for _ in result.columns) + "|"
    body = ["| " + " | ".join(c.render(row) for c in result.columns) + " |" for row in result.rows]
    return "\n".join([header, rule, *body])


def build_markdown(record: dict[str, Any], result: ExperimentResult) -> str:
    machine = record["machine"]
    versions = ", ".join(f"{name} {version}" for name, version in record["versions"].items())
    lines = [
        f"# {record['experiment']}",
        "",
        record["description"],
        "",
        f"- Command: `{record['command']}` ({record['mode']} mode, device {record['device']}, "
        f"intra-op threads: {record['intra_op_threads']})",
        f"- Date (UTC): {record['date_utc']}; revision: {record['revision'] or 'unknown'}"
        + (f" (the difference: {record['files']['diff']})" if record["files"]["diff"] else ""),
        f"- Machine: {machine['processor']}, {machine['usable_cpus']} usable of "
        f"{machine['cpu_count']} CPUs, {machine['platform']}",
        f"- Versions: {versions}",
        f"- Conditions: {_conditions_line(record['environment'])}",
        f"- Intervals: {_intervals_line(record['intervals'])}",
        "",
        _table(result),
        "",
    ]
    lines += [f"{note}\n" for note in result.notes]
    if result.failures:
        lines += ["## Failures", ""]
        lines += [f"- {case}: `{error}`" for case, error in result.failures.items()]
        lines.append("")
    if record["files"]["plot"]:
        lines += [f"![{record['experiment']}]({record['files']['plot']})", ""]
    for name, file in record["files"]["extra_plots"].items():
        lines += [f"![{record['experiment']}: {name}]({file})", ""]
    if result.appendix_markdown:
        lines += [result.appendix_markdown.strip(), ""]
    return "\n".join(lines)


def _intervals_line(method: dict[str, Any]) -> str:
    return (
        f"each median ratio's {method['level']:.0%} {method['method']} interval in brackets, "
        f"{method['resamples']:,} resamples, seed {method['seed']} (Note [Bootstrap intervals "
        "of ratios] in experiments/harness/intervals.py)"
    )


def _conditions_line(found: dict[str, Any]) -> str:
    """Load averages and available memory at start and end, and the variables set."""
    def at(snapshot: dict[str, Any] | None) -> str:
        if snapshot is None:
            return "not taken"
        load = snapshot["load_average"]
        memory = snapshot["memory_available_bytes"]
        return (
            f"load {'n/a' if load is None else ' '.join(f'{value:.2f}' for value in load)}, "
            f"{'n/a' if memory is None else f'{memory / 2**30:.1f} GiB'} available"
        )

    variables = ", ".join(f"{name}={value}" for name, value in found["variables"].items())
    return (
        f"at start {at(found['at_start'])}; at end {at(found['at_end'])}; "
        f"variables: {variables or 'none set'}"
    )


def write_reports(
    experiment: Experiment,
    options: RunOptions,
    result: ExperimentResult,
    out_dir: Path,
    start: RunStart | None = None,
) -> list[Path]:
    """Write the JSON, the Markdown, the code's diff where the tree was dirty (``start``, by
    default taken now) and (where a picture helps) the PNGs; return their paths."""
    start = start or run_start()
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_figures(out_dir, experiment.name)  # a figure from an earlier run would mislead
    diff_path = out_dir / f"{experiment.name}.diff"
    diff_path.unlink(missing_ok=True)  # as would a diff
    if start.diff is not None:
        diff_path.write_text(start.diff, encoding="utf-8")
    plot_path = out_dir / f"{experiment.name}.png"
    extra_paths = {name: out_dir / f"{experiment.name}.{name}.png" for name in result.extra_plots}
    drawn: list[Path] = []
    if matplotlib_available():
        if result.plot is not None and result.plot(plot_path):
            drawn.append(plot_path)
        drawn += [path for name, path in extra_paths.items() if result.extra_plots[name](path)]
    files = {
        "plot": plot_path.name if plot_path in drawn else None,
        "extra_plots": {name: path.name for name, path in extra_paths.items() if path in drawn},
        "diff": diff_path.name if start.diff is not None else None,
    }
    record = build_record(experiment, options, result, files, start)
    json_path = out_dir / f"{experiment.name}.json"
    json_path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    markdown_path = out_dir / f"{experiment.name}.md"
    markdown_path.write_text(build_markdown(record, result), encoding="utf-8")
    return [json_path, markdown_path, *([diff_path] if start.diff is not None else []), *drawn]


def _remove_figures(out_dir: Path, name: str) -> None:
    """Delete ``NAME.png`` and every ``NAME.<extra>.png`` (experiment names hold no dot)."""
    (out_dir / f"{name}.png").unlink(missing_ok=True)
    for extra in out_dir.glob(f"{name}.*.png"):
        extra.unlink()
