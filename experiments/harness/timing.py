"""Timing that survives a shared, noisy machine.

Peers are timed round-robin (one sample of each per round, the order rotating
each round) so that a burst of load from elsewhere hits every peer alike, and
results are compared as ratios within one run. Each sample is one call of a
thunk that ``prepare()`` built untimed; the cyclic garbage collector is paused
while a sample runs, as ``timeit`` does, and catches up between samples.

Every sample records wall time (``time.perf_counter``) and the process's CPU
time (``time.process_time``). The wall time is what a user waits; the CPU time
does not count the time the process spent descheduled, so on a contended
machine its ratios are the steadier ones (peers run one intra-op thread each).
Their quotient, the cores a peer used (CPU seconds per wall second), is kept
beside them: a peer whose library runs threads of its own (XLA's) may use more
than one core however its intra-op threads are capped, and then its wall time
is not a one-core peer's.
It also counts the process's minor page faults: pages the kernel handed over
zero-filled on first touch, as after the C allocator gave freed memory back
between steps. They are part of the sample's time, and they depend on what the
process ran before as much as on the peer (Note [Page faults in a step] in
hessian/notes.py).
"""

from __future__ import annotations

import gc
import statistics
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from experiments.harness.progress import ProgressBar

try:
    from resource import RUSAGE_SELF, getrusage
except ImportError:  # Windows counts no page faults this way
    getrusage = None

T = TypeVar("T")
Prepare = Callable[[], Callable[[], object]]
"""Builds (untimed) the work of one sample and returns the thunk to time."""

_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


class PeerUnavailable(Exception):
    """A peer cannot run here (package missing, no such device): its cells read n/a."""


@dataclass(frozen=True)
class Timing:
    samples_s: tuple[float, ...]
    cpu_samples_s: tuple[float, ...]
    fault_samples: tuple[int, ...] = ()
    """Minor page faults during each sample (empty where the platform does not count them)."""

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def cpu_median_s(self) -> float:
        return statistics.median(self.cpu_samples_s)

    @property
    def cores(self) -> float | None:
        """CPU seconds per wall second, the CPU median over the wall median: 1.00 is one core
        busy throughout; more is other threads of the process working beside it; less is time
        the process waited (descheduled, or for a device). None for a zero wall time."""
        return self.cpu_median_s / self.median_s if self.median_s > 0 else None

    @property
    def faults_median(self) -> float | None:
        return statistics.median(self.fault_samples) if self.fault_samples else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "median_s": self.median_s,
            "min_s": self.min_s,
            "cpu_median_s": self.cpu_median_s,
            "cores": self.cores,
            "samples_s": list(self.samples_s),
            "cpu_samples_s": list(self.cpu_samples_s),
            "faults_median": self.faults_median,
            "fault_samples": list(self.fault_samples),
        }


STATISTICS = {"": "median_s", "_min": "min_s", "_cpu": "cpu_median_s"}
"""Row-key suffix -> Timing statistic, so a table can show each ratio three ways."""
STATISTICS_HEADER = "median / min / CPU"
CORES = "_cores"
"""Row-key suffix of a peer's cores (``Timing.cores``), kept beside its statistics."""


@dataclass(frozen=True)
class Missing:
    """No timing: ``failed`` tells a raised error (a bug) from an absent peer."""

    reason: str
    failed: bool

    def to_json(self) -> dict[str, Any]:
        return {"status": "error" if self.failed else "n/a", "reason": self.reason}


Outcome = Timing | Missing


def describe_error(error: BaseException) -> str:
    """The error's type and message, and where it was raised (repository-relative)."""
    message = "".join(traceback.format_exception_only(error)).strip()
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return message
    frame = frames[-1]
    path = Path(frame.filename)
    try:
        shown = path.resolve().relative_to(_REPOSITORY_ROOT).as_posix()
    except ValueError:
        shown = path.name
    return f"{message} (raised at {shown}:{frame.lineno} in {frame.name})"


Sample = tuple[float, float, int | None]
"""(wall seconds, CPU seconds, minor page faults or None where not counted) of one sample."""


def _minor_faults() -> int | None:
    return None if getrusage is None else getrusage(RUSAGE_SELF).ru_minflt


def sample_once(prepare: Prepare) -> Sample:
    """One call of the thunk that ``prepare`` returns, timed."""
    thunk = prepare()
    gc.disable()
    try:
        faults, cpu_start, start = _minor_faults(), time.process_time(), time.perf_counter()
        thunk()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        return wall, cpu, None if faults is None else _minor_faults() - faults
    finally:
        gc.enable()


def attempt(compute: Callable[[], T]) -> T | Missing:
    """``compute()``, or a Missing that tells an absent peer from a failing one."""
    try:
        return compute()
    except PeerUnavailable as unavailable:
        return Missing(str(unavailable), failed=False)
    except Exception as error:  # a peer's bug must not hide the others' results
        return Missing(describe_error(error), failed=True)


def time_interleaved(
    peers: Mapping[str, Prepare],
    *,
    warmup: int,
    repeat: int,
    on_sample: Callable[[], object] = lambda: None,
) -> dict[str, Outcome]:
    """Median/min over ``repeat`` samples per peer after ``warmup`` untimed ones.

    ``on_sample`` is called once per peer per round (also for peers that have
    dropped out), so a progress bar of ``len(peers) * (warmup + repeat)`` ends full.
    """
    samples: dict[str, list[Sample]] = {name: [] for name in peers}
    missing: dict[str, Missing] = {}
    names = list(peers)
    for round_index in range(warmup + repeat):
        shift = round_index % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            if name not in missing:
                sample = attempt(partial(sample_once, peers[name]))
                if isinstance(sample, Missing):
                    missing[name] = sample
                elif round_index >= warmup:
                    samples[name].append(sample)
            on_sample()
    return {name: missing.get(name) or timing_of(samples[name]) for name in names}


def failures(case: str, outcomes: Mapping[str, Outcome]) -> dict[str, str]:
    """The peers that raised (bugs, not absent peers), as "CASE: PEER" -> the error."""
    return {
        f"{case}: {peer}": outcome.reason
        for peer, outcome in outcomes.items()
        if isinstance(outcome, Missing) and outcome.failed
    }


def time_case(
    case: str,
    peers: Mapping[str, Prepare],
    *,
    warmup: int,
    repeat: int,
    bar: ProgressBar,
    failed: dict[str, str],
    shown: str | None = None,
) -> dict[str, Outcome]:
    """``time_interleaved`` of one case (one table row) behind ``bar``, which shows
    ``shown`` (by default ``case``); the peers that raised are added to ``failed``."""
    bar.set_postfix_str(case if shown is None else shown)
    outcomes = time_interleaved(peers, warmup=warmup, repeat=repeat, on_sample=bar.update)
    failed.update(failures(case, outcomes))
    return outcomes


@dataclass(frozen=True)
class Case:
    """One table row's timing: the peers to time, the samples of each, the bar's label."""

    name: str
    peers: Mapping[str, Prepare]
    repeat: int
    shown: str | None = None
    """What the progress bar shows while the case runs (by default ``name``)."""


def time_cases(
    cases: Sequence[Case], *, warmup: int, progress: Callable[[int], ProgressBar]
) -> tuple[list[dict[str, Outcome]], dict[str, str]]:
    """``time_case`` of every case, in order, behind one bar from ``progress(total)``.

    Returns the outcomes of each case and the peers that raised, as ``failures``.
    """
    bar = progress(sum(len(case.peers) * (warmup + case.repeat) for case in cases))
    failed: dict[str, str] = {}
    outcomes = [
        time_case(
            case.name,
            case.peers,
            warmup=warmup,
            repeat=case.repeat,
            bar=bar,
            failed=failed,
            shown=case.shown,
        )
        for case in cases
    ]
    bar.close()
    return outcomes, failed


def timing_of(samples: Sequence[Sample]) -> Timing:
    """The Timing of ``samples``, as ``sample_once`` returns them."""
    walls, cpus, faults = zip(*samples, strict=True) if samples else ((), (), ())
    return Timing(tuple(walls), tuple(cpus), () if None in faults else tuple(faults))


def statistic_or_none(outcome: Outcome, statistic: str, scale: float = 1.0) -> float | None:
    """A Timing statistic (``median_s``, ...) times ``scale``; None (n/a) without a timing."""
    return getattr(outcome, statistic) * scale if isinstance(outcome, Timing) else None


def ratio_or_none(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
