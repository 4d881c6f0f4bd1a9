"""Stream identities and vector clocks: the sanitizer's notion of "ordered before".

See Note [Stream sanitizer] in checker.py for how the clocks advance and merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from jaxstream.devices import Device


class StreamLike(Protocol):
    """What the sanitizer needs from a stream (`jaxstream.streams.Stream` is one)."""

    @property
    def device(self) -> Device: ...

    @property
    def id(self) -> int: ...

    def record_event(self) -> Any: ...


# The number of XLA's stream of a device (`js.xla_stream`); jaxstream's are 0 and up.
XLA_STREAM_ID = -1


class StreamKey(NamedTuple):
    """A stream's identity in clocks: streams are numbered per device."""

    device: Device
    id: int

    def __str__(self) -> str:
        return f"Stream({self.device}, {'xla' if self.id == XLA_STREAM_ID else f'id={self.id}'})"


def stream_key(stream: StreamLike) -> StreamKey:
    return StreamKey(stream.device, stream.id)


def _key_of(stream_or_key: StreamLike | StreamKey) -> StreamKey:
    if isinstance(stream_or_key, StreamKey):
        return stream_or_key
    return stream_key(stream_or_key)


class VectorClock:
    """An immutable snapshot of a clock: for each stream, the last tick known to be ordered before.

    A stream that never appears reads as tick 0 (nothing of it is ordered before).
    Index with a stream or a `StreamKey`.
    """

    __slots__ = ("_ticks",)

    def __init__(self, ticks: Mapping[StreamKey, int] | None = None) -> None:
        self._ticks = {key: tick for key, tick in (ticks or {}).items() if tick > 0}

    def __getitem__(self, stream: StreamLike | StreamKey) -> int:
        return self._ticks.get(_key_of(stream), 0)

    def items(self) -> Iterable[tuple[StreamKey, int]]:
        return self._ticks.items()

    def merged(self, other: VectorClock) -> VectorClock:
        """The element-wise max: what is ordered before either clock."""
        ticks = dict(self._ticks)
        merge_into(ticks, other)
        return VectorClock(ticks)

    def __le__(self, other: VectorClock) -> bool:
        """Whether everything ordered before `self` is ordered before `other` too."""
        return all(other._ticks.get(key, 0) >= tick for key, tick in self._ticks.items())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VectorClock) and self._ticks == other._ticks

    def __hash__(self) -> int:
        return hash(frozenset(self._ticks.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{key}: {tick}" for key, tick in sorted(self._ticks.items(), key=str))
        return f"VectorClock({{{inner}}})"


def merge_into(target: dict[StreamKey, int], source: Mapping[StreamKey, int] | VectorClock) -> None:
    """Raise `target` in place to the element-wise max of it and `source`."""
    for key, tick in source.items():
        if target.get(key, 0) < tick:
            target[key] = tick
