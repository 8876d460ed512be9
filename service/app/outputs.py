"""Outputs: the captured events of a dataflow output, retained and fanned out to subscribers.

Every worker captures its share of an output (``capture_into``) into the same
:class:`OutputLog`. Each worker's events are a valid history relative to one capability at
the minimum, so the log starts the merged frontier at ``peers`` there and applies every
progress event to it: the merged frontier passes a time only when every worker has. What
the log emits is one history: ``messages`` events as they arrive, and ``progress`` events
with the changes of the merged frontier.

The log keeps records per time, as the batches came (lists of records, or columns: a typed
output's stay Arrow arrays, read as they are by Arrow readers), up to ``retention`` records
and ``retention_bytes`` (columns count their Arrow buffers' size, lists their encoded
size); when over, it forgets the oldest *completed* times first. Subscribers read from a
bounded queue each (:mod:`service.app.subscribers`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol, cast

from operators.capture import Messages, Progress
from operators.graph.schema import Schema
from operators.progress import Antichain, MutableAntichain, encode_time, less_equal, same_domain
from operators.runtime import Batch, Columns, rows_of
from operators.runtime.containers import concat
from service.app.errors import BadRequest, Gone, Invalid
from service.app.subscribers import Subscriber
from service.app.views import ConsumerView, OutputPage, OutputView, SubscriberView

Sizer = Callable[[Sequence[Any]], int]
"""The encoded size of a batch of records, in bytes (the API's encoding): what the byte
limits of retention and of subscribers' queues count. It must not raise."""


class OutputListener(Protocol):
    """Who hears what an output does (its dataflow: it publishes, and cuts the logs)."""

    def output_moved(self, name: str, frontier: Antichain[Hashable]) -> None:
        """Output ``name``'s merged frontier moved to ``frontier``."""
        ...

    def output_evicted(self, name: str) -> None:
        """Output ``name`` forgot completed times (the inputs' logs may be cut below them)."""
        ...


class _Quiet:
    """The listener of an output nobody follows."""

    def output_moved(self, name: str, frontier: Antichain[Hashable]) -> None:
        """Nothing to tell."""

    def output_evicted(self, name: str) -> None:
        """Nothing to tell."""


class OutputLog:
    """The merged captured stream of one output (see the module docstring).

    Retention is bounded by ``retention`` records and, given a ``sizer``, by
    ``retention_bytes`` of encoded records: a cap in records alone would let large records
    take any amount of memory.
    """

    def __init__(
        self,
        name: str,
        minimum: Hashable,
        peers: int,
        retention: int,
        retention_bytes: int | None = None,
        sizer: Sizer | None = None,
        listener: OutputListener | None = None,
        schema: Schema | None = None,
    ) -> None:
        self.name = name
        self.schema = schema
        """The records' schema when the output is typed (fed by a typed input through
        operators that forward): its batches are then columns of that struct type."""
        self._listener = listener or _Quiet()
        self.minimum = minimum
        self._frontier: MutableAntichain[Hashable] = MutableAntichain([(minimum, peers)])
        self._retention = retention
        self._retention_bytes = retention_bytes if sizer is not None else None
        self._sizer = sizer
        self._times: dict[Hashable, list[Batch]] = {}
        """The batches retained per time, as they came."""
        self._order: list[int] | None = [] if type(minimum) is int else None
        """Integer times: the retained times as a min-heap, so that eviction takes the
        oldest without sorting them all (each time is pushed and popped once)."""
        self._counts: dict[Hashable, int] = {}
        self._bytes: dict[Hashable, int] = {}
        """Encoded bytes retained per time (with a sizer)."""
        self._retained = 0
        self.retained_bytes = 0
        self.evicted: list[Hashable] = []
        """The frontier below which completed times may have been forgotten."""
        self.subscribers: list[Subscriber] = []
        self.records_out = 0
        self.closed_reason: str | None = None
        self.consumers: dict[str, Hashable | None] = {}
        """Registered readers and the time before which each has read everything."""

    # ----------------------------------------------------------------- the pusher side

    def pusher(self) -> _WorkerPusher:
        """A pusher for one worker's capture of this output."""
        return _WorkerPusher(self)

    def _messages(self, event: Messages) -> None:
        batch: Batch = event.records  # a list, or columns (capture passes them as they are)
        time = event.time
        batches = self._times.get(time)
        if batches is None:
            self._times[time] = [batch]
            self._counts[time] = len(batch)
            if self._order is not None:
                heapq.heappush(self._order, cast("int", time))
        else:
            batches.append(batch)  # a container is never modified once sent
            self._counts[time] += len(batch)
        count = len(batch)
        self._retained += count
        self.records_out += count
        size = 0
        if self._sizer is not None:
            # One call per batch, not per record: columns count their buffers' bytes.
            size = batch.nbytes if isinstance(batch, Columns) else self._sizer(batch)
            self._bytes[event.time] = self._bytes.get(event.time, 0) + size
            self.retained_bytes += size
        for subscriber in self.subscribers:
            subscriber.offer(event, size)
        self._evict()

    def _over(self) -> bool:
        """Whether more is retained than the limits allow."""
        if self._retained > self._retention:
            return True
        most = self._retention_bytes
        return most is not None and self.retained_bytes > most

    def _progress(self, event: Progress) -> None:
        changes = self._frontier.update_iter(event.changes)
        if changes:
            merged = Progress(changes)
            for subscriber in self.subscribers:
                subscriber.offer(merged)
            self._evict()
            self._listener.output_moved(self.name, self._frontier.frontier())

    def _evict(self) -> None:
        """Forget completed times that are no longer needed.

        Those every registered consumer has read past go at once; beyond that, the oldest
        go whenever more than ``retention`` records (or ``retention_bytes``) are held (the
        hard bound).
        """
        frontier = self._frontier
        read = self._read_by_all()
        if read is None and not self._over():
            return
        if self._order is not None:
            self._evict_oldest(read)
            return
        complete = sorted((t for t in self._times if not frontier.less_equal(t)), key=_sort_key)
        forgot = False
        for time in complete:
            consumed = read is not None and not less_equal(read, time)
            if not consumed and not self._over():
                continue
            self._forget(time)
            forgot = self._forgotten(time) or forgot
        if forgot:
            self._listener.output_evicted(self.name)

    def _evict_oldest(self, read: Hashable | None) -> None:
        """:meth:`_evict` for integer times, oldest first from the heap: O(log n) a time.

        The same times go as when all complete times are sorted: the consumed ones are the
        oldest, and once a complete time stays, every later one does too.
        """
        order = self._order
        assert order is not None
        frontier = self._frontier
        forgot = False
        while order:
            time = order[0]
            if time not in self._times:
                heapq.heappop(order)  # pragma: no cover - every retained time is in both
                continue
            if frontier.less_equal(time):
                break  # not complete: neither it nor any later time may go
            consumed = read is not None and not less_equal(read, time)
            if not consumed and not self._over():
                break
            heapq.heappop(order)
            self._forget(time)
            forgot = self._forgotten(time) or forgot
        if forgot:
            self._listener.output_evicted(self.name)

    def _forget(self, time: Hashable) -> None:
        """Drop the batches retained at ``time``."""
        del self._times[time]
        self._retained -= self._counts.pop(time)
        self.retained_bytes -= self._bytes.pop(time, 0)

    def _forgotten(self, time: Hashable) -> bool:
        """Note that ``time`` was forgotten; whether ``evicted`` moved on."""
        # ``evicted`` keeps the latest forgotten times: everything at or before one of
        # them may be gone.
        if any(less_equal(time, e) for e in self.evicted):
            return False
        self.evicted = [e for e in self.evicted if not less_equal(e, time)] + [time]
        return True

    def _read_by_all(self) -> Hashable | None:
        """The least committed time over the consumers (None: no consumer, or one at none)."""
        if not self.consumers:
            return None
        committed = list(self.consumers.values())
        if any(c is None for c in committed):
            return None
        least = committed[0]
        for time in committed[1:]:
            if less_equal(time, least):
                least = time
            elif not less_equal(least, time):
                return None  # incomparable commits: keep everything (conservative)
        return least

    def commit(self, consumer: str, committed: Hashable | None) -> ConsumerView:
        """Register ``consumer`` as having read every time before ``committed``.

        Once every registered consumer has committed past a completed time, the output may
        forget it. A commit never moves backwards: an earlier time than before is ignored.
        Returns the consumer as registered now.
        """
        committed = self.committed_after(consumer, committed)
        self.consumers[consumer] = committed
        self._evict()
        return ConsumerView(consumer, committed, list(self.frontier()))

    def committed_after(self, consumer: str, committed: Hashable | None) -> Hashable | None:
        """What a commit of ``committed`` would register for ``consumer`` (nothing changes).

        :class:`Invalid` for a time of another domain.
        """
        if committed is not None and not self.matches(committed):
            raise Invalid(
                f"{committed!r} is not a time of output {self.name!r}'s domain",
                [{"pointer": "/committed", "detail": "not a time of this output's domain"}],
            )
        before = self.consumers.get(consumer)
        if committed is not None and before is not None and less_equal(committed, before):
            return before
        return committed

    def forget_consumer(self, consumer: str) -> bool:
        """Unregister a consumer; returns whether it was registered."""
        if consumer not in self.consumers:
            return False
        del self.consumers[consumer]
        return True

    # ----------------------------------------------------------------- the reader side

    def frontier(self) -> Antichain[Hashable]:
        """The merged frontier: times not in it (and not after it) are complete."""
        return self._frontier.frontier()

    def view(self) -> OutputView:
        """The output as its description shows it: frontier, counts, readers."""
        frontier = list(self.frontier())
        subscribers = [SubscriberView(len(s.queue), list(s.resume)) for s in self.subscribers]
        consumers = [
            ConsumerView(name, committed, frontier)
            for name, committed in sorted(self.consumers.items())
        ]
        schema = None if self.schema is None else self.schema.describe()
        return OutputView(
            self.name, frontier, self.records_out, self._retained, subscribers, consumers, schema
        )

    def complete_times(self, start: Hashable | None, end: Hashable | None) -> list[Hashable]:
        """Retained complete times ``t`` with ``start <= t`` and not ``end <= t``, in order."""
        frontier = self._frontier
        times = [
            t
            for t in self._times
            if not frontier.less_equal(t)
            and (start is None or less_equal(start, t))
            and (end is None or not less_equal(end, t))
        ]
        times.sort(key=_sort_key)
        return times

    def check_start(self, times: Iterable[Hashable]) -> None:
        """Check that reading may start at ``times`` (or end there).

        Raises :class:`BadRequest` for a time of another domain, and :class:`Gone` for one
        whose records may have been forgotten (a read from it would miss some).
        """
        for time in times:
            if not self.matches(time):
                raise BadRequest(
                    f"{encode_time(time)} is not a time of output {self.name!r}'s time domain"
                )
            if self.is_forgotten(time):
                retained = [encode_time(e) for e in self.evicted]
                raise Gone(
                    f"records at {encode_time(time)} are no longer retained by output "
                    f"{self.name!r}; retained times start after {retained}"
                )

    def page(
        self,
        start: Hashable | None,
        end: Hashable | None,
        limit: int,
        counts: bool = False,
        columns: bool = False,
    ) -> OutputPage:
        """The retained complete times in ``[start, end)``, at most ``limit`` of them.

        Each with its records, or (``counts``) their number, or (``columns``) its batch as
        it is kept: columns stay columns, for a reader that takes them (Arrow).
        """
        for time in (start, end):
            if time is not None and not self.matches(time):
                self.check_start((time,))  # refuses it
        if start is not None:
            self.check_start((start,))
        times = self.complete_times(start, end)
        page = times[:limit]
        more = times[limit] if len(times) > limit else None
        frontier = list(self.frontier())
        integers = self.matches(0)
        if counts:
            counted = [self.count_at(t) for t in page]
            return OutputPage(self.name, integers, page, frontier, more, counts=counted)
        if columns:
            batches = [self.batch_at(t) for t in page]
            return OutputPage(self.name, integers, page, frontier, more, batches=batches)
        records = [self.records_at(t) for t in page]
        return OutputPage(self.name, integers, page, frontier, more, records=records)

    def records_at(self, time: Hashable) -> list[Any]:
        """The retained records at ``time`` (empty if none or forgotten), as Python values."""
        return rows_of(self.batch_at(time))

    def batch_at(self, time: Hashable) -> Batch:
        """The retained records at ``time`` as one batch: columns if they came so."""
        return merged(self._times.get(time, ()))

    def count_at(self, time: Hashable) -> int:
        """How many records are retained at ``time`` (0 if none or forgotten)."""
        return self._counts.get(time, 0)

    def matches(self, time: Hashable) -> bool:
        """Whether ``time`` belongs to this output's time domain."""
        return same_domain(time, self.minimum)

    def is_forgotten(self, time: Hashable) -> bool:
        """Whether records at ``time`` may have been dropped from retention."""
        return any(less_equal(time, e) for e in self.evicted)

    def subscribe(
        self,
        start: Hashable | None = None,
        limit: int = 1000,
        *,
        frontier: Sequence[Hashable] | None = None,
        limit_bytes: int | None = None,
    ) -> Subscriber:
        """A new subscriber, fed first the backlog, then live events.

        The backlog is the retained records at ``start`` or later (or, given a ``frontier``
        such as a closed subscriber's ``resume``, at times some element of it is ``<=``: with
        partially ordered times one time cannot say where a subscriber stopped), then the
        current frontier (as progress relative to the start of time).
        """
        if start is not None:
            frontier = [start]
        subscriber = Subscriber(
            limit=max(limit, 1),
            resume=[self.minimum],
            seen=MutableAntichain([(self.minimum, 1)]),
        )
        if self.closed_reason is not None:
            subscriber.closed = self.closed_reason
            subscriber.wake.set()
            return subscriber
        initial = [(t, 1) for t in self._frontier.frontier()]
        initial.append((self.minimum, -1))
        consolidated: dict[Hashable, int] = {}
        for time, diff in initial:
            consolidated[time] = consolidated.get(time, 0) + diff
        backlog: list[Messages | Progress] = [
            Messages(t, cast("list[Any]", merged(self._times[t])))  # columns stay columns
            for t in sorted(self._times, key=_sort_key)
            if frontier is None or any(less_equal(f, t) for f in frontier)
        ]
        changes = [(t, d) for t, d in consolidated.items() if d]
        if changes:
            backlog.append(Progress(changes))
        subscriber.limit = max(subscriber.limit, len(backlog) + 1)
        for event in backlog:  # the backlog is taken whole, whatever its size
            size = self._bytes.get(event.time, 0) if isinstance(event, Messages) else 0
            subscriber.offer(event, size)
        subscriber.limit = max(limit, 1)
        subscriber.limit_bytes = limit_bytes if self._sizer is not None else None
        subscriber.output = self
        self.subscribers.append(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Stop delivering to ``subscriber``."""
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)

    def close(self, reason: str) -> None:
        """Close every subscriber (the dataflow was dropped or the service stops)."""
        self.closed_reason = reason
        for subscriber in self.subscribers:
            subscriber.closed = reason
            subscriber.wake.set()
        self.subscribers.clear()


def _sort_key(time: Hashable) -> Any:
    """Times sort by their domain's total order (ints, or products lexicographically)."""
    return time


def merged(batches: Sequence[Batch]) -> Batch:
    """One batch of the records of ``batches`` (a new list, or columns concatenated).

    Columns of one type stay columns; anything else becomes a list of records.
    """
    if batches and all(isinstance(b, Columns) for b in batches):
        first = cast("Columns", batches[0])
        if len(batches) == 1:
            return first
        if all(cast("Columns", b).type == first.type for b in batches):
            return concat(cast("list[Columns]", batches))
    return [record for batch in batches for record in rows_of(batch)]


def sorted_times(times: Iterable[Hashable]) -> list[Hashable]:
    """``times`` in their domain's total order (which extends the partial order)."""
    return sorted(times, key=_sort_key)


class _WorkerPusher:
    """One worker's capture of an output, feeding the shared log."""

    __slots__ = ("_log",)

    def __init__(self, log: OutputLog) -> None:
        self._log = log

    def push(self, event: Messages | Progress) -> None:
        """Add a worker's event to the log."""
        if isinstance(event, Messages):
            self._log._messages(event)
        else:
            self._log._progress(event)

    def flush(self) -> None:
        """Events are applied as they are pushed: nothing to do."""
