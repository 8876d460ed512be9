"""Frontier watches: the latest frontier of every location of a dataflow, fed to subscribers.

A dataflow's :class:`FrontierFeed` holds the frontier of each location (``input:<name>``,
``output:<name>``, ``operator:<node>:<port>``) as last published, and the encoded event of
each, made once by the codec the API hands to the service. The manager publishes only the
locations whose frontiers changed (the engine, the inputs and the outputs report them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any, Protocol

FrontierCodec = Callable[[str, list[Hashable]], bytes]
"""Encodes one location's frontier as the event every subscriber is sent (wire bytes)."""

Reader = Callable[[], list[Hashable]]
"""Reads one location's frontier now, in its domain's total order."""

PUBLISH_DEFERRALS = 8
"""Turns of the loop a publication may wait for the workers to finish what they are doing."""


class FrontierSink(Protocol):
    """Where a watch writes its events as they happen (a WebSocket, in :mod:`api`).

    Everything is called on the event loop, synchronously: a change is written to every
    sink from the one callback that noticed it, with no task per subscriber.
    """

    @staticmethod
    def encode(payloads: list[bytes]) -> bytes:
        """The wire form of these events (each one JSON document), to write at once.

        The same function for every sink of a kind: a batch is encoded once and written to
        all of them.
        """
        ...

    def writable(self) -> bool:
        """Whether more may be written now (the sink's write buffer is under its bound)."""
        ...

    def write(self, data: bytes) -> None:
        """Write encoded events (never blocks; a closed sink drops them)."""
        ...

    def when_writable(self, then: Callable[[], None]) -> None:
        """Call ``then()`` once the sink is writable again (it is not now)."""
        ...

    @staticmethod
    def write_all(sinks: list[Any], data: bytes) -> list[int]:
        """Write ``data`` to each of ``sinks`` (all of this kind) that is writable.

        Returns the indexes of the sinks over their bound, which were written nothing. One
        call for every up-to-date subscriber of a kind: the loop over them is the sink's.
        """
        ...

    def finish(self, reason: str) -> None:
        """Send the final event for ``reason`` and close."""
        ...


class _Location:
    """One location's latest frontier, its encoded event, and when it last changed."""

    __slots__ = ("frontier", "location", "operator", "payload", "rank", "seq")

    def __init__(self, location: str, rank: int) -> None:
        self.location = location
        self.operator = location.startswith("operator:")
        self.rank = rank
        """Its position among the dataflow's locations (inputs, outputs, operators)."""
        self.frontier: list[Any] = []
        self.payload: bytes | None = None
        """The encoded event of ``frontier``, made when a sink first needs it."""
        self.seq = 0


class FrontierFeed(list["FrontierWatch"]):
    """A dataflow's frontier watches, and the frontiers they are fed from.

    Each change of a location's frontier gets the next sequence number and is encoded once,
    by the feed's codec, when a sink first needs it; every watch remembers the sequence number up
    to which it has been given everything. What a watch has not been given is then the
    latest change of each location changed since, in the order of those changes: coalesced
    (a location at most once, at its latest frontier, so never backwards) and bounded by
    the number of locations, with nothing held per watch.
    """

    __slots__ = (
        "by_change",
        "codec",
        "dataflow_id",
        "locations",
        "operator_watches",
        "pending",
        "seq",
    )

    def __init__(self, dataflow_id: str, codec: FrontierCodec) -> None:
        super().__init__()
        self.dataflow_id = dataflow_id
        self.codec = codec
        """Encodes a change once, for every watch."""
        self.locations: dict[str, _Location] = {}
        """Every location, in the order first seen (inputs, outputs, operators)."""
        self.by_change: dict[str, _Location] = {}
        """The same, least recently changed first."""
        self.seq = 0
        self.operator_watches = 0
        self.pending: Callable[[], None] | None = None
        """Publishes the changes noted but not published yet (called before a take)."""

    def publish(self, frontiers: dict[str, list[Any]]) -> None:
        """Note the current frontiers and give every watch the changes.

        ``frontiers`` may name only some locations (those that may have changed); a
        location whose frontier is as published before is not a change.
        """
        before = self.seq
        locations = self.locations
        by_change = self.by_change
        for name, frontier in frontiers.items():
            location = locations.get(name)
            if location is None:
                location = locations[name] = _Location(name, len(locations))
            elif location.frontier == frontier:
                continue
            self.seq += 1
            location.frontier = frontier
            location.seq = self.seq
            location.payload = None
            by_change.pop(name, None)
            by_change[name] = location
        if self.seq == before or not self:
            return
        seq = self.seq
        batches: dict[tuple[Any, bool], bytes] = {}
        # Nearly every watch is attached and was given everything up to ``before``: those of
        # a kind get one encoding and one write_all. The others take the long way.
        current: dict[tuple[type[Any], bool], list[FrontierWatch]] = {}
        for watch in self:
            sink = watch.sink
            if (
                sink is None
                or watch.fed != before
                or watch.waiting
                or watch.fresh
                or watch.closed is not None
            ):
                watch._changed(before, batches)
                continue
            key = (type(sink), watch.operators)
            group = current.get(key)
            if group is None:
                current[key] = [watch]
            else:
                group.append(watch)
        for (kind, operators), watches in current.items():
            changed = self.since(before, operators)
            for watch in watches:
                watch.fed = seq
            if not changed:
                continue
            data = kind.encode(self.payloads(changed))
            for index in kind.write_all([watch.sink for watch in watches], data):
                watch = watches[index]
                sink = watch.sink
                assert sink is not None
                watch.fed = before  # not given: it gets what it missed once writable
                watch.waiting = True
                sink.when_writable(watch._writable)

    def publish_moved(self, moved: dict[str, Callable[[], list[Hashable]]]) -> None:
        """Publish the locations that may have moved, each read now, in location order."""
        if len(moved) == 1:
            self.publish({location: read() for location, read in moved.items()})
            return
        locations = self.locations
        rank = len(locations)
        ordered = sorted(
            moved.items(),
            key=lambda item: locations[item[0]].rank if item[0] in locations else rank,
        )
        self.publish({location: read() for location, read in ordered})

    def payloads(self, locations: list[_Location]) -> list[bytes]:
        """The encoded events of ``locations`` (each change is encoded once, for everyone)."""
        codec = self.codec
        result: list[bytes] = []
        for location in locations:
            payload = location.payload
            if payload is None:
                payload = location.payload = codec(location.location, location.frontier)
            result.append(payload)
        return result

    def since(self, seq: int, operators: bool) -> list[_Location]:
        """The locations changed after ``seq``, least recently changed first."""
        changed: list[_Location] = []
        for location in reversed(self.by_change.values()):
            if location.seq <= seq:
                break
            if operators or not location.operator:
                changed.append(location)
        changed.reverse()
        return changed


class FrontierWatch:
    """A subscriber to a dataflow's frontiers: the latest antichain per location, in order.

    Read it with :meth:`take` (``wake`` is set while there is something to take), or
    :meth:`attach` a sink: every change is then written to the sink from the callback that
    noticed it. A sink over its bound is written nothing more until it is writable again;
    then it gets what it missed, coalesced (see :class:`FrontierFeed`).
    """

    __slots__ = ("_wake", "closed", "fed", "feed", "fresh", "operators", "sink", "waiting")

    def __init__(self, feed: FrontierFeed, operators: bool) -> None:
        self.feed = feed
        self.operators = operators
        self.fed = feed.seq
        """Every change up to this sequence number has been given."""
        self.fresh = True
        """The current frontiers (as of ``fed``) have not been given yet."""
        self.sink: FrontierSink | None = None
        self.waiting = False
        """The sink was over its bound: it is caught up when it is writable again."""
        self.closed: str | None = None
        self._wake: asyncio.Event | None = None

    @property
    def dataflow_id(self) -> str:
        """The dataflow watched."""
        return self.feed.dataflow_id

    @property
    def wake(self) -> asyncio.Event:
        """Set while there are changes to take or the watch is closed (pull mode)."""
        if self._wake is None:
            self._wake = asyncio.Event()
            if self.closed is not None or self._pending():
                self._wake.set()
        return self._wake

    def _pending(self) -> list[_Location]:
        feed = self.feed
        changed = feed.since(self.fed, self.operators)
        if not self.fresh:
            return changed
        current = [
            location
            for location in feed.locations.values()
            if location.seq <= self.fed and (self.operators or not location.operator)
        ]
        return current + changed

    def _given(self) -> list[_Location]:
        pending = self._pending()
        self.fed = self.feed.seq
        self.fresh = False
        return pending

    def take(self) -> list[tuple[str, list[Any]]]:
        """The changes not yet taken, oldest first (one per location: the latest)."""
        if self.feed.pending is not None:
            self.feed.pending()
        if self._wake is not None:
            self._wake.clear()
        return [(location.location, location.frontier) for location in self._given()]

    def attach(self, sink: FrontierSink) -> None:
        """Write everything not yet taken to ``sink``, then every change as it happens."""
        self.sink = sink
        if self.closed is not None:
            self._finish(self.closed)
        else:
            self._catch_up()

    def close(self, reason: str) -> None:
        """End the watch with a reason (a sink gets what it has not had, then the reason)."""
        if self.closed is not None:
            return
        self.closed = reason
        if self.sink is not None:
            self._finish(reason)
        elif self._wake is not None:
            self._wake.set()

    def _finish(self, reason: str) -> None:
        sink = self.sink
        assert sink is not None
        # Bounded (one event per location) whatever the sink's buffer holds.
        pending = self._given()
        if pending:
            sink.write(sink.encode(self.feed.payloads(pending)))
        sink.finish(reason)

    def _changed(self, before: int, batches: dict[tuple[Any, bool], bytes]) -> None:
        """The feed moved from ``before`` on: write the changes (or note them)."""
        sink = self.sink
        if sink is None:
            if self._wake is not None and self.closed is None and self._pending():
                self._wake.set()
            return
        if self.waiting or self.closed is not None:
            return
        if not sink.writable():
            self.waiting = True
            sink.when_writable(self._writable)
            return
        if self.fed != before or self.fresh:
            self._catch_up()
            return
        # Up to date until now, like (nearly) every watch: the batch is encoded once.
        key = (sink.encode, self.operators)
        data = batches.get(key)
        if data is None:
            changed = self.feed.since(before, self.operators)
            data = sink.encode(self.feed.payloads(changed)) if changed else b""
            batches[key] = data
        self.fed = self.feed.seq
        if data:
            sink.write(data)

    def _catch_up(self) -> None:
        sink = self.sink
        assert sink is not None
        pending = self._given()
        if pending:
            sink.write(sink.encode(self.feed.payloads(pending)))

    def _writable(self) -> None:
        self.waiting = False
        sink = self.sink
        if sink is None or self.closed is not None:
            return
        if sink.writable():
            self._catch_up()
        else:
            self.waiting = True
            sink.when_writable(self._writable)


def _no_codec(location: str, frontier: list[Hashable]) -> bytes:
    raise RuntimeError("frontier events need a codec: DataflowManager(frontier_codec=...)")


class Feeds:
    """Every dataflow's feed, and the publication of what moved: driven by change.

    The engine, the inputs and the outputs say which locations may have moved
    (:meth:`moved`); once per turn of the loop those, and only those, are read and
    published, each dataflow's in one batch. A dataflow no one watches costs nothing.
    """

    def __init__(self, codec: FrontierCodec | None, busy: Callable[[], bool]) -> None:
        self.codec = codec or _no_codec
        self.busy = busy
        """Whether the workers still have work (a change may be on its way to an output)."""
        self.by_dataflow: dict[str, FrontierFeed] = {}
        self.pending: dict[str, dict[str, Reader]] = {}
        """Per watched dataflow, the locations that may have moved since the last
        publication, each with how to read it."""
        self._scheduled = False
        self._deferred = 0

    def feed(self, dataflow_id: str) -> FrontierFeed:
        """The dataflow's feed (made on first use)."""
        feed = self.by_dataflow.get(dataflow_id)
        if feed is None:
            feed = self.by_dataflow[dataflow_id] = FrontierFeed(dataflow_id, self.codec)
            feed.pending = lambda: self.publish_now(dataflow_id)
        return feed

    def watched(self, dataflow_id: str) -> bool:
        """Whether some watch follows the dataflow."""
        return bool(self.by_dataflow.get(dataflow_id))

    def moved(self, dataflow_id: str, location: str, read: Reader) -> None:
        """A location's frontier may have moved: publish it soon, if anyone watches."""
        if not self.by_dataflow.get(dataflow_id):
            return
        moved = self.pending.get(dataflow_id)
        if moved is None:
            moved = self.pending[dataflow_id] = {}
        moved[location] = read
        if not self._scheduled:
            # Once per turn of the loop, whatever moved things (a worker's step, a producer).
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._publish)

    def _publish(self) -> None:
        """Publish the frontiers that moved since the last time, and only those.

        While the workers still have work (the change is still travelling through the
        dataflow: an input moved, its output will next) the publication waits a few turns of
        the loop, so that one write per subscriber carries both.
        """
        if self._deferred < PUBLISH_DEFERRALS and self.busy():
            self._deferred += 1
            asyncio.get_running_loop().call_soon(self._publish)
            return
        self._deferred = 0
        self._scheduled = False
        pending, self.pending = self.pending, {}
        for dataflow_id, locations in pending.items():
            feed = self.by_dataflow.get(dataflow_id)
            if feed:
                feed.publish_moved(locations)

    def publish_now(self, dataflow_id: str) -> None:
        """Publish what moved in one dataflow now (a watch is about to be read)."""
        locations = self.pending.pop(dataflow_id, None)
        feed = self.by_dataflow.get(dataflow_id)
        if locations and feed:
            feed.publish_moved(locations)

    def unwatch(self, watch: FrontierWatch) -> None:
        """Stop a watch (nothing more is written to its sink)."""
        watch.sink = None
        feed = self.by_dataflow.get(watch.dataflow_id)
        if feed is not None and watch in feed:
            feed.remove(watch)
            if watch.operators:
                feed.operator_watches -= 1

    def close(self, dataflow_id: str, reason: str) -> None:
        """The dataflow is gone: every watch gets ``reason``, and its feed goes."""
        self.pending.pop(dataflow_id, None)
        for watch in self.by_dataflow.pop(dataflow_id, []):
            watch.close(reason)
