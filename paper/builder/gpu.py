"""The paper's GPU section: the newest GPU check report under ``results/gpu/``, if any.

A report is written on a GPU machine by ``python -m experiments.gpu_check``; its
tables are rendered here by the report's own writer, so the paper shows what the
report shows, and says on which GPU, when and at which revision it was taken. A
rehearsal on the CPU (``--device sim``) is never shown as a GPU's measurement.
One experiment's rows from it (``gpu_rows``) can stand beside that experiment's
CPU table, or say that no GPU measured them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.gpu_check.report import experiment_tables, newest, step, steps_table, table

GPU_DIR = "gpu"
NO_REPORT = (
    "No GPU report yet. On a machine with an NVIDIA GPU, `python -m experiments.gpu_check` "
    "(`make gpu-check`) writes one to `experiments/results/gpu/`, and the next "
    "`python -m experiments paper` shows it here."
)


def gpu_section(results_dir: Path) -> str:
    """The newest GPU report's summary, its steps and its experiments' headline tables."""
    record = newest(results_dir / GPU_DIR)
    if record is None:
        return NO_REPORT
    experiments = step(record, "experiments")
    lines = [
        f"Measured on {record['gpu']} on {record['date_utc']} (UTC), at revision "
        f"{record['revision'] or 'unknown'}, by `python -m experiments.gpu_check`: "
        + ("every step passed." if record["ok"] else "NOT every step passed (see below)."),
        "",
        steps_table(record),
        "",
    ]
    if experiments is not None:
        details = experiments["details"]
        lines += [
            f"The experiments ran in {details['mode']} mode with `--device {details['device']}`, "
            f"{details['concurrency']} at a time beside the whole suite, within the check's "
            "eight minutes, so their timings were taken on a busy machine: they show what each "
            "ratio looks like on this GPU, and one experiment run alone "
            "(`python -m experiments run NAME --device cuda`) gives numbers of its own. The "
            f"full report is `experiments/results/gpu/{record['slug']}.md`.",
            "",
            *experiment_tables(details, heading="####"),
        ]
    return "\n".join(lines).rstrip()


def _run_of(record: dict[str, Any], name: str) -> dict[str, Any] | None:
    experiments = step(record, "experiments")
    runs = experiments["details"]["runs"] if experiments is not None else []
    return next((run for run in runs if run["name"] == name), None)


def gpu_rows(results_dir: Path, name: str) -> str:
    """Experiment ``name``'s `--device cuda` rows from the newest GPU report (its table's label
    columns and its ratios), or a line saying that no GPU report holds them."""
    record = newest(results_dir / GPU_DIR)
    if record is None:
        return (f"No GPU report yet, so no `--device cuda` rows of {name}: on a machine with an "
                "NVIDIA GPU, `python -m experiments.gpu_check` measures them.")
    run = _run_of(record, name)
    where = f"the GPU report of {record['gpu']} of {record['date_utc']} (UTC)"
    if run is None or "headline" not in run:
        why = "it did not run" if run is None else run.get("reason") or run["status"]
        return f"No `--device cuda` rows of {name} in {where}: {why}."
    details = step(record, "experiments")["details"]
    return "\n".join([
        f"From {where}, at revision {record['revision'] or 'unknown'}, in {details['mode']} "
        f"mode with `--device cuda` beside the GPU check's other steps (so on a busy "
        f"machine), {name}'s table cut to its label columns and its ratios:",
        "",
        table(run["headline"]["headers"], run["headline"]["rows"]),
    ])
