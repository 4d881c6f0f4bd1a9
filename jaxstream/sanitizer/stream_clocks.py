"""The streams' clocks and the host's, with the clocks of dead streams dropped once unneeded.

See Note [Stream sanitizer] in checker.py for what the clocks mean, and Note
[Retiring streams] below for when a stream's clock, and its entries in the
others, can be forgotten.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Mapping

from .clock import StreamKey, StreamLike, VectorClock, merge_into

# Note [Retiring streams]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A clock per stream ever used, each naming every stream it is ordered after,
# grows without bound in a program that makes a fresh stream per step: at
# step 2,500 there were 2,500 clocks holding 3.1 M entries, and each op's merge
# of the host's clock walked thousands of them (1.1 ms per step became 3.3 ms).
# A stream `d` is retired, its clock `V[d]` and every entry for `d` in the other
# clocks dropped, once two things hold:
#
# - `d` is dead: its Stream object was collected. Stream numbers are never
#   reused (counted per device from 1; the default and XLA streams live as long
#   as the process), so no kernel, record or wait names `d` again and `V[d]`
#   stops changing. Its own tick `F = V[d][d]` bounds every access on `d` that a
#   buffer history or a `record_stream` hold names.
# - The host's clock covers `V[d]`, entry by entry (`d` is synchronized with
#   the host). Every stream operation first merges the host's clock into its
#   stream's, so from then on every clock a check reads holds `d: >= F`: every
#   check against an access on `d` passes. The one other reader of `V[d]`, a
#   device-wide synchronize, would add nothing the host does not have.
#
# A stream without a clock then reads as ordered before everything
# (`StreamClocks.ordered`), which is exactly what the dropped entries would have
# answered: no race is missed and none is invented. Only a retired stream can
# lack a clock while an access or an entry names it, since a stream gets its
# clock before its first kernel. Snapshots that events still carry may name
# `d`; merging one skips streams without a clock, so `d` never comes back.
# Holds on `d` are released, as the host is past `F`, and a freed buffer's
# history is dropped once all its uses are ordered before the host.
#
# A dead stream that the host has not caught up with keeps its clock until a
# synchronize covers it (`js.synchronize()`, or a host read on a stream ordered
# after it): a program that makes a stream per step and synchronizes in each
# keeps the clocks of its live streams and of those that died since the last
# synchronize. Dead streams are noticed through weak references whose callbacks
# only queue them (garbage collection may run under the checker's lock); the
# queue is drained, and retirement decided, when the host's clock grows.


class _StreamRef(weakref.ref):
    """A weak reference to a stream that knows the stream's key."""

    __slots__ = ("key",)


class StreamClocks:
    """`V[s]` of every stream still needed and the host's clock (Note [Retiring streams]).

    The checker holds its lock around every call.
    """

    def __init__(self) -> None:
        self.clocks: dict[StreamKey, dict[StreamKey, int]] = {}
        self.host: dict[StreamKey, int] = {}
        self._refs: dict[StreamKey, _StreamRef] = {}
        self._died: deque[_StreamRef] = deque()  # appended by collection, without the lock
        self._dead: set[StreamKey] = set()  # dead, not yet covered by the host's clock

    def of(self, key: StreamKey, stream: StreamLike | None = None) -> dict[StreamKey, int]:
        """`V[key]`, made on first use, first ordered after what the host knows."""
        clock = self.clocks.get(key)
        if clock is None:
            clock = self.clocks[key] = {}
            self._watch(key, stream)
        merge_into(clock, self.host)
        return clock

    def _watch(self, key: StreamKey, stream: StreamLike | None) -> None:
        try:
            ref = _StreamRef(stream, self._died.append)
        except TypeError:
            return  # a stream that cannot be watched is never retired
        ref.key = key
        self._refs[key] = ref

    def ordered(self, clock: Mapping[StreamKey, int], key: StreamKey, tick: int) -> bool:
        """Whether tick `tick` of stream `key` is ordered before `clock`; a retired stream's
        always is."""
        return clock.get(key, 0) >= tick or key not in self.clocks

    def merge(self, target: dict[StreamKey, int], source: VectorClock) -> None:
        """Raise `target` to the element-wise max with `source`, skipping retired streams."""
        clocks = self.clocks
        for key, tick in source.items():
            if target.get(key, 0) < tick and key in clocks:
                target[key] = tick

    def host_wait(self, source: VectorClock) -> None:
        """The host is ordered after `source`; then the dead streams it now covers retire."""
        self.merge(self.host, source)
        self._retire()

    def _retire(self) -> None:
        while self._died:
            ref = self._died.popleft()
            if self._refs.get(ref.key) is ref:
                del self._refs[ref.key]
                self._dead.add(ref.key)
        host, clocks = self.host, self.clocks
        done = [
            key for key in self._dead
            if all(self.ordered(host, k, tick) for k, tick in clocks[key].items())
        ]
        if not done:
            return
        for key in done:
            self._dead.discard(key)
            del clocks[key]
        for clock in (*clocks.values(), host):
            for key in done:
                clock.pop(key, None)

    def count(self) -> int:
        return len(self.clocks)

    def entries(self) -> int:
        return len(self.host) + sum(len(clock) for clock in self.clocks.values())
