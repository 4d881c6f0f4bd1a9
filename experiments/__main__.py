"""Command line: ``python -m experiments list | run NAME | reproduce | paper``.

Note [One command, this paper]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The paper's rows of an experiment are measured at one size and one number of
intra-op threads, which the experiment declares (``Experiment.paper``: the
hessian and the engine overhead at their full sizes, the digits step at the
frameworks' own thread counts). ``reproduce`` without a size runs exactly
those, each experiment in a process of its own, because the threads are capped
before NumPy, torch or JAX is first imported and so cannot change within a
process; then it rebuilds the paper. ``reproduce --quick`` (or ``--full``,
``--smoke``) runs every experiment at that one size in this process instead,
``--smoke`` being the tests' tiny size.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from experiments import registry
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.hardware import missing_gpu
from experiments.harness.progress import progress_bar
from experiments.harness.reports import DEFAULT_RESULTS_DIR, run_start, write_reports
from experiments.harness.threads import limit_intra_op_threads


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the full sizes of the paper's tables")
    size.add_argument(
        "--quick", action="store_true", help="the quick sizes (run's default; reproduce: "
        "every experiment quick, instead of at the size its paper rows declare)"
    )
    size.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda", "sim"),
        default="cpu",
        help="where to run (default cpu); sim is the CPU stand-in for cuda: jaxstream on "
        "sim:0, JAX on its JAX device, PyTorch on the cpu",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_RESULTS_DIR,
        help="directory for NAME.json, NAME.md and NAME.png (default: experiments/results)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="intra-op threads per framework (default 1, or for reproduce the experiment's "
        "paper run's; 0 keeps each framework's default)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _list(experiments: dict[str, Experiment]) -> int:
    width = max(map(len, experiments), default=0)
    for name, experiment in experiments.items():
        print(f"{name:<{width}}  {experiment.description}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the experiments")
    run = commands.add_parser("run", help="run one experiment (quick mode unless --full)")
    run.add_argument("name", help="an experiment, as named by `list`")
    _add_run_options(run)
    reproduce = commands.add_parser(
        "reproduce", help="run every experiment as the paper's rows declare (or at the size "
        "given), then write the paper from the results"
    )
    _add_run_options(reproduce)
    paper = commands.add_parser("paper", help="write paper/paper.md from the results files")
    paper.add_argument("--results", type=Path, default=DEFAULT_RESULTS_DIR, metavar="DIR")
    paper.add_argument("--template", type=Path, help="default: paper/paper.template.md")
    paper.add_argument("--out", type=Path, metavar="DIR", help="default: paper/")
    return parser


def _paper(results_dir: Path, template: Path | None = None, out_dir: Path | None = None) -> int:
    """Write the paper from the records in ``results_dir``; 0 on success, else 1."""
    # Imported here: the builder imports an experiment (the hessian's quoted PR table),
    # which imports numpy, which must come after `limit_intra_op_threads`.
    from paper.builder import DEFAULT_PAPER_DIR, DEFAULT_TEMPLATE, PaperError, write_paper

    try:
        path = write_paper(results_dir, template or DEFAULT_TEMPLATE, out_dir or DEFAULT_PAPER_DIR)
    except PaperError as exc:
        print(f"paper: {exc}", file=sys.stderr)
        return 1
    print(f"paper: wrote {_shown(path)}")
    return 0


def _options(arguments: argparse.Namespace) -> RunOptions:
    mode = "full" if arguments.full else "smoke" if arguments.smoke else "quick"
    return RunOptions(
        mode=mode,
        device=arguments.device,
        intra_op_threads=1 if arguments.threads is None else arguments.threads,
        show_progress=not arguments.no_progress,
    )


def _share_the_gpu() -> None:
    """Keep JAX from taking 75% of the GPU's memory at its first operation (JAX's "GPU
    memory allocation" page): CuPy shares the process on cuda, and other runs the GPU."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def _shown(path: Path) -> str:
    """The path relative to the working directory where it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _run(experiment: Experiment, options: RunOptions, out_dir: Path) -> bool:
    """Run and write one experiment; False if a peer raised (its error is in the results)."""
    start = run_start()
    result = experiment.run(options)
    paths = write_reports(experiment, options, result, out_dir, start)
    for case, error in result.failures.items():
        print(f"{experiment.name}: {case} failed: {error}", file=sys.stderr)
    print(f"{experiment.name}: wrote " + ", ".join(_shown(path) for path in paths))
    return not result.failures


def _run_here(experiment: Experiment, options: RunOptions, out_dir: Path) -> bool:
    """`_run` in this process; a crash is reported and costs the others nothing."""
    try:
        return _run(experiment, options, out_dir)
    except Exception:
        traceback.print_exc()
        print(f"{experiment.name}: crashed; no results written", file=sys.stderr)
        return False


def _run_as_the_paper(experiment: Experiment, arguments: argparse.Namespace) -> bool:
    """Run one experiment at the size and threads of its paper rows (``--threads`` given:
    those threads), in a process of its own (Note [One command, this paper])."""
    paper = experiment.paper
    if arguments.threads is not None:
        paper = dataclasses.replace(paper, threads=arguments.threads)
    command = [sys.executable, "-m", "experiments", "run", experiment.name,
               *paper.arguments(), "--device", arguments.device]
    if arguments.out.resolve() != DEFAULT_RESULTS_DIR.resolve():
        command += ["--out", str(arguments.out)]
    if arguments.no_progress:
        command.append("--no-progress")
    completed = subprocess.run(command, check=False)
    if completed.returncode != 0:
        print(f"{experiment.name}: exited with status {completed.returncode}", file=sys.stderr)
    return completed.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.command == "list":
        return _list(registry.experiments())
    if arguments.command == "paper":
        return _paper(arguments.results, arguments.template, arguments.out)
    limit_intra_op_threads(1 if arguments.threads is None else arguments.threads)
    experiments = registry.experiments()
    if arguments.command == "run" and arguments.name not in experiments:
        print(
            f"unknown experiment {arguments.name!r}; known: {', '.join(experiments)}",
            file=sys.stderr,
        )
        return 2
    options = _options(arguments)
    if options.device == "cuda":
        _share_the_gpu()
    problem = missing_gpu() if options.device == "cuda" else None
    if problem is not None:
        print(f"python -m experiments {arguments.command}: {problem}", file=sys.stderr)
        return 2
    if arguments.command == "run":
        return 0 if _run(experiments[arguments.name], options, arguments.out) else 1
    overall = progress_bar(
        len(experiments), "experiments", enabled=options.show_progress, leave=True
    )
    as_the_paper = not (arguments.full or arguments.quick or arguments.smoke)
    succeeded = True
    for name, experiment in experiments.items():
        overall.set_postfix_str(name)
        if as_the_paper:
            succeeded = _run_as_the_paper(experiment, arguments) and succeeded
        else:
            succeeded = _run_here(experiment, options, arguments.out) and succeeded
        overall.update()
    overall.close()
    # The paper is regenerated from whatever was written, failures included; results
    # written elsewhere than the default get their paper beside them, not in paper/.
    scratch = arguments.out.resolve() != DEFAULT_RESULTS_DIR.resolve()
    paper_written = _paper(arguments.out, out_dir=arguments.out / "paper" if scratch else None) == 0
    return 0 if succeeded and paper_written else 1


if __name__ == "__main__":
    sys.exit(main())
