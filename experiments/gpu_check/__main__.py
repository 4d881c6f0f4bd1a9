"""Command line: ``python -m experiments.gpu_check [--device cuda|sim]``."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from experiments.gpu_check.check import CheckOptions, NoGpu, run_check
from experiments.gpu_check.report import DEFAULT_REPORTS_DIR, write_report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.gpu_check",
        description="Check that this install works on a GPU (within eight minutes on one GPU): "
        "the environment, pytest -m cuda, the README's GPU section, every experiment in quick "
        "mode on cuda and the whole suite, with a Markdown report of it all.",
    )
    parser.add_argument(
        "--device", choices=("cuda", "sim"), default="cuda",
        help="cuda (default), or sim: a CPU rehearsal of the same steps on the GPU twin",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_REPORTS_DIR,
        help="directory for the report, SLUG.md and SLUG.json, and the experiments' records "
        "(default: experiments/results/gpu)",
    )
    parser.add_argument(
        "--mode", choices=("smoke", "quick"),
        help="the experiments' sizes (default: quick on cuda, smoke in a rehearsal)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    # For the tests: a few tests instead of the whole suite, a few experiments.
    parser.add_argument("--suite-args", help=argparse.SUPPRESS)
    parser.add_argument("--experiments", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    logs = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    options = CheckOptions(
        device=arguments.device,
        out=arguments.out,
        logs=logs,
        mode=arguments.mode or ("quick" if arguments.device == "cuda" else "smoke"),
        suite_args=tuple(shlex.split(arguments.suite_args)) if arguments.suite_args else None,
        experiments=arguments.experiments.split(",") if arguments.experiments else None,
        show_progress=not arguments.no_progress,
    )
    try:
        record = run_check(options)
    except NoGpu as reason:
        print(f"gpu check: {reason}", file=sys.stderr)
        return 2
    markdown, _ = write_report(record, arguments.out)
    for step in record["steps"]:
        print(f"gpu check: {step['title']}: {step['status']} ({step['wall_s']:.0f} s): "
              f"{step['summary']}")
    print(f"gpu check: wrote {markdown} and its JSON record; full logs in {logs}")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
