"""What a device's watchers hear: one call per launch, copy, record, wait or host read.

Note [The watchers' bus]
~~~~~~~~~~~~~~~~~~~~~~~~
Two things watch the work jaxstream issues on an accelerator: the stream sanitizer, which
checks that every access is ordered (Note [Stream sanitizer] in sanitizer/checker.py) and
counts a sim device's memory, and an open virtual clock, which charges each launch its time
(Note [Virtual time] in devices/virtual_time.py). Each event is told to both here, by one
call: an op's kernel launched, a whole XLA program launched (a `jax_function`'s, a compiled
step's), another kernel launched (a factory's, a copy's), an event
recorded, a stream made to wait for one, the host waiting for a stream, an event or a
device, the host reading an array back. The streams, the moves, the conversions and the op
venues (Note [Deciding once where an op runs] in ops/venues.py) make that one call and know
neither watcher; a third watcher would be one more line in each function here.

Each watcher is off when off, read once per event: the clock is the device kind's
`virtual_clock` (None unless a clock is open and the kind is timed, sim's), and the
sanitizer's functions return at once for a device whose checks are off. Inside a JAX trace
(`js.compile`, `to_jax`) neither hears of the traced work, which does not run: the program
that runs is one launch (`program_launched`) when it is called. The sanitizer's
snapshot of a stream's clock is no event: `Event.record` takes it before the native record,
so that the event covers at least what it claims to, and passes it back with the wait.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import sanitizer
from .devices.kernel_cost import copy_cost, is_product, launches_kernel, op_cost
from .devices.tracing import inside_trace


def _timing(dev: Any) -> Any:
    """The open virtual clock that times `dev`'s kind; None where none is, and inside a JAX
    trace, where nothing runs (the compiled program's one launch is charged instead)."""
    clock = dev.kind.virtual_clock
    return None if clock is None or inside_trace() else clock


def op_launched(stream: Any, op: Any, args: tuple, arrays: list, params: dict, out: Any,
                in_backward: bool) -> None:
    """Op `op` ran its kernel on `stream` under the device's guard, on `args` (tensors and
    numbers; `arrays` the tensors' arrays and the numbers themselves) with `params`, and
    produced `out`; in a backward node or not (the host's cost of each differs: Note [Virtual
    time]). Every op on an accelerator comes here, so a watcher's share is worked out only
    where it watches (Note [An op on an accelerator] in ops/dispatch.py)."""
    kind = stream.device.kind
    checked = kind.sanitized()  # read once: Note [Reading a switch on every op]
    if checked:
        reads = [array for array, arg in zip(arrays, args) if array is not arg]  # noqa: B905
        sanitizer.on_op(stream, op.name, reads, out, checked)
    elif kind.counts_memory:  # the reads matter to the checks alone
        sanitizer.on_op(stream, op.name, [], out, checked)
    clock = kind.virtual_clock
    if clock is not None and launches_kernel(op.name, op.view) and not inside_trace():
        clock.launch(stream, op.name, op_cost(op.name, arrays, params, out, clock.profile),
                     clock.op_host_s(in_backward, is_product(op.name)), switches=not in_backward)


def program_launched(stream: Any, name: str, reads: list, outputs: list) -> None:
    """XLA program `name` ran on `stream` (XLA's, under the device's guard) as one kernel:
    it read the arrays `reads` and made `outputs`. The clock charges it as one op over its
    largest array (Note [Virtual time]): what XLA fused inside is not seen."""
    sanitizer.launch(stream, op=name, reads=reads, allocs=outputs)
    clock = _timing(stream.device)
    if clock is not None:
        clock.launch(stream, name, op_cost(name, reads, {}, outputs, clock.profile),
                     clock.op_host_s(False))


def launched(stream: Any, op: str, reads: Iterable[object] = (),
             allocs: Iterable[object] = ()) -> None:
    """A kernel `op` on `stream` that reads `reads` and makes `allocs`: handing an array to
    a consumer, the first half of a move, a factory's array made where it was asked for.
    The clock charges none: a copy is charged where it lands (`copied`), and a factory's
    kernel is not modelled."""
    sanitizer.launch(stream, op=op, reads=reads, allocs=allocs)


def copied(stream: Any, op: str, array: Any) -> None:
    """`array` was made on `stream`'s device by a copy, from the host or another device."""
    sanitizer.launch(stream, op=op, allocs=(array,))
    clock = _timing(stream.device)
    if clock is not None:
        clock.launch(stream, "copy to device", copy_cost(array, clock.profile))


def host_read(stream: Any, array: Any, call: str) -> None:
    """The host reads `array` by `call` (`numpy`, `to`, `__dlpack__`): a copy to the host on
    `stream`, then the host waits for it."""
    sanitizer.host_read(array, stream, call)
    clock = _timing(stream.device)
    if clock is not None:
        clock.launch(stream, "copy to host", copy_cost(array, clock.profile))
        clock.host_sync(stream)


def recorded(stream: Any, event: Any) -> None:
    """`event` was recorded on `stream` (its sanitizer clock already taken)."""
    clock = _timing(stream.device)
    if clock is not None:
        clock.record(stream, event)


def waited(stream: Any, event: Any, event_clock: Any) -> None:
    """`stream` was made to wait for `event`, which carries the sanitizer's `event_clock`."""
    sanitizer.wait(stream, event_clock)
    clock = _timing(stream.device)
    if clock is not None:
        clock.wait(stream, event)


def host_waited(stream: Any, stream_clock: Any) -> None:
    """The host waited for `stream`, whose sanitizer clock was `stream_clock` then."""
    sanitizer.host_wait(stream_clock)
    clock = _timing(stream.device)
    if clock is not None:
        clock.host_sync(stream)


def host_waited_event(event: Any, event_clock: Any) -> None:
    """The host waited for `event`, which carries the sanitizer's `event_clock`."""
    sanitizer.host_wait(event_clock)
    clock = _timing(event.stream.device)
    if clock is not None:
        clock.host_sync_event(event)


def device_waited(dev: Any) -> None:
    """The host waited for every stream of `dev` (`js.synchronize`)."""
    sanitizer.host_wait_device(dev)
    clock = _timing(dev)
    if clock is not None:
        clock.host_sync_device(dev)
