"""Stream semantics of backward: which ways of using gradients are safe, as the sanitizer sees them.

The note of PyTorch PR #60421 (and the CUDA notes it edits) says a backward
call has the stream semantics of any other op: the gradients may be used on the
stream that was current when backward was called, and on any other stream only
after a sync. Since that PR the default stream is no longer synced, so the
pattern that was safe up to PyTorch 1.9 (backward in a side stream, grads used
on the default stream afterwards) is not. Each pattern below runs on a `sim`
device, where the stream sanitizer is always on, and, with `--device cuda` on a
machine with a GPU and CuPy, on `cuda:0` with the checks switched on; so
"unsafe" is an observed `StreamRaceError`, not a reading of the docs. A pattern
whose observed verdict differs from the note's is a failure of the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.peers import array_backend, placement_note, require_cuda_streams
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import PeerUnavailable

SHAPE = (5,)
SAFE = "safe"
RACE = "StreamRaceError"
SIM_DEVICE = "sim:0"
CUDA_DEVICE = "cuda:0"


@dataclass(frozen=True)
class Pattern:
    """One way of calling backward and using the gradients, with the note's verdict.

    ``run`` performs it on a device and returns the first element of the used
    gradient, which must equal ``grad`` when the pattern is safe.
    """

    key: str
    label: str
    expected: str
    snippet: str
    run: Callable[[str], float]
    grad: float


def _leaf(device: str) -> Any:
    import jaxstream as js

    return js.ones(SHAPE, backend=array_backend(device), device=device, requires_grad=True)


def _use(grad: Any) -> float:
    """Use a gradient on the current stream (a kernel that reads it), then read the result."""
    return float((grad * 1).numpy()[0])


def _two_stream_forward(x: Any) -> Any:
    """The note's StreamModel: ``x * 2`` on one side stream, ``x * 3`` and the sum on another.

    Both side streams wait for the caller's stream first and the caller's stream
    waits for the result, as a correct multi-stream forward must; the leaf's
    gradient is accumulated on the first side stream, where ``x`` is first used.
    """
    import jaxstream as js

    ambient = js.current_stream(x.device)
    stream0, stream1 = js.Stream(x.device), js.Stream(x.device)
    stream0.wait_stream(ambient)
    stream1.wait_stream(ambient)
    with js.stream(stream0):
        doubled = x * 2
        doubled_ready = stream0.record_event()
    with js.stream(stream1):
        tripled = x * 3
        stream1.wait_event(doubled_ready)
        out = doubled + tripled
    ambient.wait_stream(stream1)
    return out


def same_context(device: str) -> float:
    import jaxstream as js

    forward, s = js.Stream(device), js.Stream(device)
    forward.wait_stream(js.current_stream(device))
    with js.stream(forward):
        x = _leaf(device)
        loss = (x * 2).sum()
    with js.stream(s):
        loss.backward()
        return _use(x.grad)


def other_stream_unsynced(device: str) -> float:
    import jaxstream as js

    s = js.Stream(device)
    s.wait_stream(js.current_stream(device))
    with js.stream(s):
        x = _leaf(device)
        (x * 2).sum().backward()
    return _use(x.grad)


def other_stream_wait_stream(device: str) -> float:
    import jaxstream as js

    s = js.Stream(device)
    s.wait_stream(js.current_stream(device))
    with js.stream(s):
        x = _leaf(device)
        (x * 2).sum().backward()
    js.current_stream(device).wait_stream(s)
    return _use(x.grad)


def legacy_default_stream(device: str) -> float:
    import jaxstream as js

    s = js.Stream(device)
    s.wait_stream(js.current_stream(device))
    with js.stream(s):
        x = _leaf(device)
        _two_stream_forward(x).sum().backward()
    with js.stream(js.default_stream(device)):
        return _use(x.grad)


def initial_grad_synced(device: str) -> float:
    import jaxstream as js

    x = _leaf(device)
    loss = (x * 2).sum()
    initial_grad = js.ones_like(loss)
    s = js.Stream(device)
    s.wait_stream(js.current_stream(device))
    with js.stream(s):
        initial_grad.record_stream(s)
        loss.backward(gradient=initial_grad)
        return _use(x.grad)


def initial_grad_unsynced(device: str) -> float:
    import jaxstream as js

    s = js.Stream(device)
    s.wait_stream(js.current_stream(device))
    with js.stream(s):
        x = _leaf(device)
        loss = (x * 2).sum()
    initial_grad = js.ones_like(loss)
    with js.stream(s):
        loss.backward(gradient=initial_grad)
        return _use(x.grad)


def two_stream_forward(device: str) -> float:
    x = _leaf(device)
    _two_stream_forward(x).sum().backward()
    return _use(x.grad)


PATTERNS = (
    Pattern(
        "same_context",
        "backward and use in one stream context (forward on another stream)",
        SAFE,
        "with js.stream(s): loss.backward(); use(x.grad)",
        same_context,
        grad=2.0,
    ),
    Pattern(
        "other_stream_unsynced",
        "backward in a side stream, grads used on the caller's stream, no sync",
        RACE,
        "with js.stream(s): loss.backward()  then  use(x.grad)",
        other_stream_unsynced,
        grad=2.0,
    ),
    Pattern(
        "other_stream_wait_stream",
        "as above, with wait_stream before the use",
        SAFE,
        "with js.stream(s): loss.backward()  then  "
        "js.current_stream().wait_stream(s); use(x.grad)",
        other_stream_wait_stream,
        grad=2.0,
    ),
    Pattern(
        "legacy_default_stream",
        "the default-stream pattern of PyTorch 1.9 and earlier (forward on two streams)",
        RACE,
        "with js.stream(s): model(x).sum().backward()  then  "
        "with js.stream(js.default_stream()): use(x.grad)",
        legacy_default_stream,
        grad=5.0,
    ),
    Pattern(
        "initial_grad_synced",
        "initial gradient made on the caller's stream, synced into s",
        SAFE,
        "g = js.ones_like(loss); s.wait_stream(js.current_stream()); "
        "with js.stream(s): g.record_stream(s); loss.backward(gradient=g); use(x.grad)",
        initial_grad_synced,
        grad=2.0,
    ),
    Pattern(
        "initial_grad_unsynced",
        "initial gradient made on another stream than backward's, no sync",
        RACE,
        "g = js.ones_like(loss)  then  with js.stream(s): loss.backward(gradient=g)",
        initial_grad_unsynced,
        grad=2.0,
    ),
    Pattern(
        "two_stream_forward",
        "forward on two streams (StreamModel), backward and use on the caller's stream",
        SAFE,
        "loss = model(x).sum(); loss.backward(); use(x.grad)",
        two_stream_forward,
        grad=5.0,
    ),
)


def observe(pattern: Pattern, device: str) -> str:
    """What running the pattern on ``device`` shows: "safe", the race (kind, op), or the fault."""
    import jaxstream as js

    try:
        value = pattern.run(device)
    except js.StreamRaceError as race:
        return f"{RACE} ({race.kind} in {race.op})"
    except Exception as error:  # any other error is a finding to report, not a crash
        return f"error: {type(error).__name__}: {error}"
    if value != pattern.grad:
        return f"wrong gradient {value} (expected {pattern.grad})"
    return SAFE


def verdict(observed: str) -> str:
    """``observed`` without the race kind, comparable with a pattern's ``expected``."""
    return RACE if observed.startswith(RACE) else observed


@contextmanager
def _checked_cuda() -> Iterator[None]:
    """The sanitizer's checks on for `cuda` for the duration (they are opt-in there)."""
    from jaxstream import sanitizer

    previous = os.environ.get(sanitizer.CHECK_ENV)
    os.environ[sanitizer.CHECK_ENV] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[sanitizer.CHECK_ENV]
        else:
            os.environ[sanitizer.CHECK_ENV] = previous


def _observe_all(device: str) -> dict[str, str]:
    import jaxstream as js

    try:
        return {pattern.key: observe(pattern, device) for pattern in PATTERNS}
    finally:
        js.autograd.shutdown_engine_threads()


def run(options: RunOptions) -> ExperimentResult:
    """The same patterns in every mode: there is nothing to size, and nothing is timed."""
    bar = options.progress(2, "stream_semantics")
    observed = {"sim": _observe_all(SIM_DEVICE)}
    bar.update()
    try:
        require_cuda_streams(options.device)
    except PeerUnavailable as reason:
        cuda_status = f"n/a: {reason}"
    else:
        with _checked_cuda():
            observed["cuda"] = _observe_all(CUDA_DEVICE)
        cuda_status = CUDA_DEVICE
    bar.update()
    bar.close()
    rows, failures = [], {}
    for pattern in PATTERNS:
        seen = {kind: by_pattern[pattern.key] for kind, by_pattern in observed.items()}
        disagreeing = {kind: o for kind, o in seen.items() if verdict(o) != pattern.expected}
        failures.update(
            {
                f"{pattern.key}: {kind}": f"the note says {pattern.expected}, observed {o}"
                for kind, o in disagreeing.items()
            }
        )
        rows.append(
            {
                "pattern": pattern.label,
                "key": pattern.key,
                "expected": pattern.expected,
                "sim": seen["sim"],
                "cuda": seen.get("cuda"),
                "agrees": "no" if disagreeing else "yes",
                "snippet": f"`{pattern.snippet}`",
            }
        )
    return ExperimentResult(
        columns=[
            Column("pattern", ("pattern",)),
            Column("expected (note)", ("expected",)),
            Column("observed on sim", ("sim",)),
            Column("observed on cuda", ("cuda",)),
            Column("agrees", ("agrees",)),
            Column("code", ("snippet",)),
        ],
        rows=rows,
        parameters={
            "shape": list(SHAPE),
            "dtype": "float32",
            "sim_device": SIM_DEVICE,
            "cuda_device": cuda_status,
            "use_of_grads": "use(g) reads g on the current stream: (g * 1).numpy()",
        },
        checks={
            "patterns": len(PATTERNS),
            "agreeing": sum(row["agrees"] == "yes" for row in rows),
            "unsafe_patterns_raising": sum(
                verdict(row["sim"]) == RACE for row in rows if row["expected"] == RACE
            ),
        },
        failures=failures,
        notes=[
            "Verdicts: every pattern is run once per device; \"safe\" means it ran under the "
            "stream sanitizer without a StreamRaceError and the used gradient had the right "
            "value; a StreamRaceError is shown with the kind of race the sanitizer saw and the "
            "op that raised it. "
            "\"expected\" is the verdict of the note of PyTorch PR #60421 and the CUDA notes it "
            "edits; a disagreement is recorded as a failure.",
            *placement_note(options.device, ("cupy",)),
        ],
    )


EXPERIMENT = Experiment(
    name="stream_semantics",
    description="Which ways of using gradients after a backward on side streams are safe "
    "(the note of PyTorch PR #60421), each checked under the stream sanitizer.",
    run=run,
)
