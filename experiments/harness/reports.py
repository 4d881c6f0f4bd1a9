"""Writing one run's results: NAME.json (the record), NAME.md (the table), NAME.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.harness import environment
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.plots import matplotlib_available
from experiments.harness.results import ExperimentResult

SCHEMA_VERSION = 1
DEFAULT_RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def build_record(
    experiment: Experiment,
    options: RunOptions,
    result: ExperimentResult,
    plot_file: str | None,
    extra_plot_files: dict[str, str],
) -> dict[str, Any]:
    """The JSON record: enough to rerun the command and to judge the numbers."""
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment.name,
        "description": experiment.description,
        "command": environment.command_line(),
        "date_utc": environment.utc_now(),
        "mode": options.mode,
        "device": options.device,
        "intra_op_threads": options.intra_op_threads or "framework defaults",
        "revision": environment.revision(),
        "machine": environment.machine(),
        "versions": environment.versions(),
        "parameters": result.parameters,
        "columns": [{"header": c.header, "keys": list(c.keys)} for c in result.columns],
        "rows": result.rows,
        "checks": result.checks,
        "failures": result.failures,
        "notes": result.notes,
        "files": {
            "markdown": f"{experiment.name}.md",
            "plot": plot_file,
            "extra_plots": extra_plot_files,
        },
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
        f"- Date (UTC): {record['date_utc']}; revision: {record['revision'] or 'unknown'}",
        f"- Machine: {machine['processor']}, {machine['usable_cpus']} usable of "
        f"{machine['cpu_count']} CPUs, {machine['platform']}",
        f"- Versions: {versions}",
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


def write_reports(
    experiment: Experiment, options: RunOptions, result: ExperimentResult, out_dir: Path
) -> list[Path]:
    """Write the JSON, the Markdown and (where a picture helps) the PNGs; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_figures(out_dir, experiment.name)  # a figure from an earlier run would mislead
    plot_path = out_dir / f"{experiment.name}.png"
    extra_paths = {name: out_dir / f"{experiment.name}.{name}.png" for name in result.extra_plots}
    drawn: list[Path] = []
    if matplotlib_available():
        if result.plot is not None and result.plot(plot_path):
            drawn.append(plot_path)
        drawn += [path for name, path in extra_paths.items() if result.extra_plots[name](path)]
    record = build_record(
        experiment,
        options,
        result,
        plot_path.name if plot_path in drawn else None,
        {name: path.name for name, path in extra_paths.items() if path in drawn},
    )
    json_path = out_dir / f"{experiment.name}.json"
    json_path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    markdown_path = out_dir / f"{experiment.name}.md"
    markdown_path.write_text(build_markdown(record, result), encoding="utf-8")
    return [json_path, markdown_path, *drawn]


def _remove_figures(out_dir: Path, name: str) -> None:
    """Delete ``NAME.png`` and every ``NAME.<extra>.png`` (experiment names hold no dot)."""
    (out_dir / f"{name}.png").unlink(missing_ok=True)
    for extra in out_dir.glob(f"{name}.*.png"):
        extra.unlink()
