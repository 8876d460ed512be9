"""Probes: handles that tell which times may still appear on a stream (``stream.probe()``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable

from operators.progress import Antichain, MutableAntichain
from operators.runtime import Worker


class ProbeHandle:
    """The frontier of a probed stream, as this worker currently knows it.

    It is current from the moment its dataflow is built, and only moves forward.
    ``less_than(t)`` is the usual wait condition: while it is true, records at
    times before ``t`` may still arrive.
    """

    __slots__ = ("_frontier", "_worker")

    def __init__(self, frontier: MutableAntichain[Hashable], worker: Worker) -> None:
        self._frontier = frontier
        self._worker = worker

    def less_than(self, time: Hashable) -> bool:
        """Whether some time strictly before ``time`` may still appear."""
        return self._frontier.less_than(time)

    def less_equal(self, time: Hashable) -> bool:
        """Whether ``time`` itself, or an earlier time, may still appear."""
        return self._frontier.less_equal(time)

    def done(self) -> bool:
        """Whether no time at all may still appear (the stream is complete)."""
        return self._frontier.is_empty()

    def frontier(self) -> Antichain[Hashable]:
        """A copy of the current frontier."""
        return self._frontier.frontier()

    async def changes(self) -> AsyncIterator[Antichain[Hashable]]:
        """Each new frontier, starting with the current one, until the stream completes.

        It steps the worker itself while waiting, so it can be used from the worker's own
        ``fn``.
        """
        last: Antichain[Hashable] | None = None
        while True:
            current = self._frontier.frontier()
            if current != last:
                last = current
                yield current
                if current.is_empty():
                    return
            await self._worker.step()
