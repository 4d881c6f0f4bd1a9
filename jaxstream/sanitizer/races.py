"""What the checker reports and keys: races, accesses, buffers' owners and addresses.

See Note [Stream sanitizer] in checker.py.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .clock import StreamKey


class StreamRaceError(RuntimeError):
    """Two uses of a buffer on different streams, at least one a write, with no ordering.

    Attributes: `kind` ("read-after-write", "write-after-read" or
    "write-after-write"), `buffer` (a label), `op` and `stream` (the use that
    raised), `prior_op` and `prior_stream` (the earlier use it conflicts with).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "",
        buffer: str = "",
        op: str = "",
        stream: StreamKey | None = None,
        prior_op: str = "",
        prior_stream: StreamKey | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.buffer = buffer
        self.op = op
        self.stream = stream
        self.prior_op = prior_op
        self.prior_stream = prior_stream


class Access(NamedTuple):
    stream: StreamKey
    tick: int
    op: str


class HostHold(NamedTuple):
    """A `sim` buffer kept alive until the host's clock reaches `tick` of `stream`."""

    buffer: object
    stream: StreamKey
    tick: int
    address: tuple | None


def storage_owner(buffer: object) -> object:
    """The array that owns `buffer`'s memory: a view resolves to the array it views."""
    owner = buffer
    while True:
        base = getattr(owner, "base", None)
        if base is None or not (hasattr(base, "shape") and hasattr(base, "dtype")):
            return owner
        owner = base


def address_of(owner: object, dev: Any) -> tuple | None:
    """(device, data address) of an array, from the array protocols; None if it has none."""
    for protocol in ("__array_interface__", "__cuda_array_interface__"):
        try:
            interface = getattr(owner, protocol, None)
        except (AttributeError, TypeError, RuntimeError):
            interface = None
        if interface is not None:
            return (dev, interface["data"][0])
    pointer = getattr(owner, "unsafe_buffer_pointer", None)
    return None if pointer is None else (dev, pointer())


def reuse_race(
    hold: HostHold, label: str, op: str, stream: StreamKey
) -> StreamRaceError:
    return StreamRaceError(
        f"write-after-read race on reused memory: op {op!r} on {stream} makes {label} at the "
        f"address of a buffer deallocated with record_stream({hold.stream}) pending, before "
        f"{hold.stream}'s work up to the deallocation (tick {hold.tick}) is ordered before "
        f"{stream}. Synchronize {hold.stream}, or {stream}.wait_stream({hold.stream}), first.",
        kind="write-after-read",
        buffer=label,
        op=op,
        stream=stream,
        prior_op="record_stream",
        prior_stream=hold.stream,
    )


def describe(owner: object, number: int) -> str:
    shape = getattr(owner, "shape", None)
    dtype = getattr(owner, "dtype", None)
    if shape is not None and dtype is not None:
        return f"buffer #{number} ({dtype}[{', '.join(str(n) for n in shape)}])"
    return f"buffer #{number} ({type(owner).__name__})"


def race(
    kind: str, label: str, op: str, stream: StreamKey, prior: Access
) -> StreamRaceError:
    """The race of a use by `op` on `stream` of the buffer `label` with its earlier use `prior`."""
    verb = "writes" if kind.startswith("write") else "reads"
    prior_use = "a read" if kind == "write-after-read" else "its last write"
    message = (
        f"{kind} race on {label}: op {op!r} {verb} it on {stream}, but {prior_use}, "
        f"by op {prior.op!r} on {prior.stream}, is not ordered before that stream. "
        f"Order the streams first: {stream}.wait_stream({prior.stream}), or "
        f"e = {prior.stream}.record_event() then {stream}.wait_event(e), "
        f"or synchronize {prior.stream} before launching."
    )
    return StreamRaceError(
        message,
        kind=kind,
        buffer=label,
        op=op,
        stream=stream,
        prior_op=prior.op,
        prior_stream=prior.stream,
    )
