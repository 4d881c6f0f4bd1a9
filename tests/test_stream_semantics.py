"""The stream_semantics experiment: each pattern of the note gets the verdict the note gives it.

The experiment runs on `sim` devices, where the stream sanitizer is always on,
so a verdict here is what the sanitizer observed, not what the table claims.
"""

from __future__ import annotations

import pytest

from experiments import stream_semantics
from experiments.harness import cupy_stand_in
from experiments.registry import RunOptions
from experiments.stream_semantics import PATTERNS, RACE, SAFE, SIM_DEVICE, observe, run, verdict

NOTE_VERDICTS = {
    "same_context": SAFE,
    "other_stream_unsynced": RACE,
    "other_stream_wait_stream": SAFE,
    "legacy_default_stream": RACE,
    "initial_grad_synced": SAFE,
    "initial_grad_unsynced": RACE,
    "two_stream_forward": SAFE,
}

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


def test_the_table_covers_the_patterns_of_the_note() -> None:
    assert {pattern.key: pattern.expected for pattern in PATTERNS} == NOTE_VERDICTS


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda pattern: pattern.key)
def test_each_pattern_behaves_as_the_note_says_on_sim(pattern) -> None:
    observed = observe(pattern, SIM_DEVICE)
    if pattern.expected == SAFE:
        assert observed == SAFE
    else:
        # The race is a read of data written on a stream the reader never waited for.
        assert observed.startswith(f"{RACE} (read-after-write in ")


def test_the_run_agrees_everywhere_and_leaves_cuda_to_a_gpu_run() -> None:
    result = run(RunOptions(mode="smoke", show_progress=False))
    assert result.failures == {}
    assert [row["agrees"] for row in result.rows] == ["yes"] * len(PATTERNS)
    assert all(row["cuda"] is None for row in result.rows)
    assert result.parameters["cuda_device"].startswith("n/a")
    assert result.checks["agreeing"] == result.checks["patterns"] == len(PATTERNS)


def test_the_cuda_run_checks_each_pattern_as_the_note_says(monkeypatch) -> None:
    """`--device cuda` over the CuPy stand-in (Note [The CuPy stand-in]), its checks switched
    on as the run switches them: the initial gradient, made by a factory on cuda:0's current
    stream, is seen written there, so using it on another stream unsynced is the race."""
    monkeypatch.setattr(stream_semantics, "require_cuda_streams", lambda device: None)
    with cupy_stand_in.installed():
        result = run(RunOptions(mode="smoke", device="cuda", show_progress=False))
    assert result.parameters["cuda_device"] == "cuda:0"
    assert {row["key"]: verdict(row["cuda"]) for row in result.rows} == NOTE_VERDICTS
    assert result.failures == {}


def test_a_pattern_that_disagrees_with_the_note_is_a_failure(monkeypatch) -> None:
    wrong = stream_semantics.Pattern(
        "claimed_unsafe", "a safe pattern claimed unsafe", RACE, "use(x.grad)",
        stream_semantics.two_stream_forward, 5.0,
    )
    monkeypatch.setattr(stream_semantics, "PATTERNS", (wrong,))
    result = run(RunOptions(mode="smoke", show_progress=False))
    assert result.rows[0]["agrees"] == "no"
    assert result.failures == {"claimed_unsafe: sim": f"the note says {RACE}, observed {SAFE}"}
