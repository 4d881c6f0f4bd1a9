"""The paper's GPU section: the newest GPU check report under ``results/gpu/``, if any.

A report is written on a GPU machine by ``python -m experiments.gpu_check``; its
tables are rendered here by the report's own writer, so the paper shows what the
report shows, and says on which GPU, when and at which revision it was taken. A
rehearsal on the CPU (``--device sim``) is never shown as a GPU's measurement.
"""

from __future__ import annotations

from pathlib import Path

from experiments.gpu_check.report import experiment_tables, newest, step, steps_table

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
