"""``Sequencer``: items pushed on any worker come out on every worker in one same order.

The sequencer is a dataflow of its own, on integer times read from a clock:

- a *source* (no inputs, one output) that, each time it runs, moves its capability to
  ``max(current, clock())``, drains this worker's push queue and sends every item to every
  worker, keyed ``(time, sender, sequence)``;
- an exchange on the target worker, so each worker receives one copy of every item;
- a *sink* (one input, no outputs, scheduled on every frontier change) that keeps the keyed
  items in a heap and releases, in key order, exactly those whose time its input frontier
  has passed: no item with a smaller key can arrive any more, on any worker.

Every worker receives the same keyed items and releases a prefix of the same sorted list,
so every worker reads the same sequence. Unlike timely, the sender is part of the key: two
workers sending at the same time are ordered the same way everywhere.

Liveness is timely's "catch-up": items at time ``t`` are released only once every worker's
source capability has passed ``t``. So once a sink has seen ``t`` it wakes its source, which
re-activates itself until its capability (following the clock) has passed ``t``. When
nothing is held the source only runs when something is pushed: an idle sequencer does not
spin. The clock must keep increasing for held items to be released.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.core import OperatorCore
from operators.input import InputClosed
from operators.ports import InputPort, OutputPort
from operators.runtime import Interest, Worker
from operators.scope import Scope
from operators.stream import Stream

T = TypeVar("T")

Clock = Callable[[], int]
"""Returns the current time as an integer (e.g. nanoseconds since some start)."""


class Sequenced(NamedTuple, Generic[T]):
    """An item as the sequencer ordered it: by ``(time, sender, sequence)``.

    Example::

        >>> Sequenced(5, 1, 0, "b") < Sequenced(5, 2, 0, "a")
        True
    """

    time: int
    """The sender's source time when it sent the item."""
    sender: int
    """The index of the worker the item was pushed on."""
    sequence: int
    """How many items that worker had pushed before this one."""
    item: T
    """The pushed object itself (not copied: every worker gets the same object)."""


_ORIGIN = time.monotonic_ns()
"""Where the default clock starts: one origin for every worker of the process."""


def monotonic_clock() -> int:
    """The default clock: nanoseconds of ``time.monotonic_ns`` since this module was loaded.

    Every worker of the process reads the same clock, so items pushed earlier tend to be
    ordered earlier whichever worker they were pushed on.

    Example::

        >>> 0 <= monotonic_clock() <= monotonic_clock()
        True
    """
    return time.monotonic_ns() - _ORIGIN


class _State(Generic[T]):
    """What the sequencer's handle, its source and its sink share on one worker."""

    __slots__ = (
        "capability",
        "closed",
        "heap",
        "horizon",
        "input",
        "pushed",
        "ready",
        "running",
        "source",
        "source_time",
    )

    def __init__(self) -> None:
        self.pushed: deque[T] = deque()
        """Items pushed here that the source has not sent yet."""
        self.ready: deque[Sequenced[T]] = deque()
        """Items released by the sink, in sequence order, not yet taken."""
        self.heap: list[Sequenced[T]] = []
        """Items the sink received but cannot release yet (keys are unique)."""
        self.closed = False
        self.capability: Capability | None = None
        self.source_time = 0
        """The time of the source's capability (kept as an ``int``)."""
        self.horizon = -1
        """The latest time the sink has received an item at."""
        self.source: OperatorCore | None = None
        self.input: InputPort | None = None
        """The sink's input (its frontier says which times may still arrive)."""
        self.running = False
        """Whether the sink has run: its input frontier is only current from then on."""

    def catch_up(self) -> bool:
        """Whether the sink has received an item at a time the source's capability has not passed.

        Such an item can only be released once every worker's source has passed its time,
        this one's included: the source must keep following the clock until then.
        """
        return self.capability is not None and self.horizon >= self.source_time


def _source(scope: Scope, state: _State[T], clock: Clock) -> Stream:
    """The operator that stamps pushed items and sends a copy to every worker."""
    builder = OperatorBuilder(scope, "SequenceInput")
    output, stream = builder.new_output()
    core = builder.core
    sender = scope.index
    peers = range(scope.peers)

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        state.capability = capabilities[0]
        sequence = 0

        def logic() -> None:
            nonlocal sequence
            capability = state.capability
            if capability is None:
                return
            now = clock()
            if now > state.source_time:
                capability.downgrade(now)
                state.source_time = now
            if state.pushed:
                _send(output, capability, state, sender, sequence, peers)
                sequence += len(state.pushed)
                state.pushed.clear()
            if state.closed:
                capability.drop()
                state.capability = None
            elif state.catch_up():
                core.activate()

        return logic

    builder.build(constructor)
    state.source = core
    return stream


def _send(
    output: OutputPort,
    capability: Capability,
    state: _State[T],
    sender: int,
    sequence: int,
    peers: range,
) -> None:
    """Send every pushed item to every worker as ``(target, Sequenced)``."""
    now = state.source_time
    records: list[tuple[int, Sequenced[T]]] = []
    for offset, item in enumerate(state.pushed):
        entry: Sequenced[T] = Sequenced(now, sender, sequence + offset, item)
        records.extend((target, entry) for target in peers)
    output.give_batch(capability, records)


def _target(record: tuple[int, Sequenced[Any]]) -> int:
    return record[0]


def _sink(stream: Stream, state: _State[T]) -> None:
    """The operator that holds received items until their time is complete, then releases."""
    builder = OperatorBuilder(stream.scope, "SequenceOutput")
    input = builder.new_input(stream, exchange=_target)
    state.input = input
    frontier = input.frontier
    heap = state.heap
    ready = state.ready

    def constructor(_capabilities: list[Capability]) -> Callable[[], None]:
        def logic() -> None:
            state.running = True
            records: list[tuple[int, Sequenced[T]]]
            for _time, records in input.batches():
                for _worker, entry in records:
                    heapq.heappush(heap, entry)
                    if entry.time > state.horizon:
                        state.horizon = entry.time
            passed = None  # the last time found complete: many items share a time
            while heap:
                time = heap[0].time
                if time != passed:
                    if frontier.less_equal(time):
                        break
                    passed = time
                ready.append(heapq.heappop(heap))
            source = state.source
            if source is not None and state.catch_up():
                source.activate()

        return logic

    builder.build(constructor, Interest.ALWAYS)


class Sequencer(Generic[T]):
    """Orders the items pushed on every worker into one sequence that every worker reads.

    Every worker must create its sequencers in the same order as its other dataflows (it
    builds one). Items are ordered by the time their worker's source sent them, then by
    that worker's index, then by the order they were pushed there; an item is released
    once no worker can still send an item ordered before it. Items stay Python objects:
    every worker receives the very object that was pushed.

    Example::

        >>> from operators import run
        >>> async def work(worker):
        ...     sequencer = Sequencer(worker)
        ...     sequencer.push(f"hello from {worker.index}")
        ...     sequencer.close()
        ...     return [item async for item in sequencer]
        >>> first, second = run(work, workers=2)
        >>> first == second and sorted(first) == ["hello from 0", "hello from 1"]
        True

    Args:
        worker: The worker to build the sequencer's dataflow on.
        clock: The integer time items are stamped with; it must keep increasing for
            items to be released. Defaults to :func:`monotonic_clock`.
    """

    __slots__ = ("_state", "_worker")

    def __init__(self, worker: Worker, clock: Clock | None = None) -> None:
        state: _State[T] = _State()
        read = monotonic_clock if clock is None else clock

        def build(scope: Scope) -> None:
            _sink(_source(scope, state, read), state)

        self._worker = worker
        self._state = state
        worker.dataflow(build)
        worker.on_finish(self.close)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called on this worker."""
        return self._state.closed

    def push(self, item: T) -> None:
        """Propose ``item``: it will come out on every worker, in the common order.

        Raises:
            InputClosed: If the sequencer was closed on this worker.
        """
        state = self._state
        if state.closed:
            raise InputClosed("the sequencer is closed: nothing more can be pushed")
        state.pushed.append(item)
        self._activate_source()

    def next(self) -> T | None:
        """The next item in the sequence, or ``None`` if none is ready yet.

        It does not step the worker. An item that is itself ``None`` is indistinguishable
        from "nothing ready": use :meth:`next_entry` or ``async for`` then.
        """
        entry = self.next_entry()
        return None if entry is None else entry.item

    def next_entry(self) -> Sequenced[T] | None:
        """Like :meth:`next`, with the item's place in the order: its time, sender and number."""
        ready = self._state.ready
        return ready.popleft() if ready else None

    def done(self) -> bool:
        """Whether every worker has closed the sequencer and every item has been read here."""
        state = self._state
        port = state.input
        assert port is not None
        return state.running and port.frontier.is_empty() and not state.heap and not state.ready

    def close(self) -> None:
        """Stop pushing on this worker; items already pushed are still sequenced.

        The sequencer finishes once every worker has closed it and everything pushed has
        been delivered. Closing twice does nothing.
        """
        state = self._state
        if not state.closed:
            state.closed = True
            self._activate_source()

    def _activate_source(self) -> None:
        source = self._state.source
        assert source is not None
        source.activate()

    def __aiter__(self) -> Sequencer[T]:
        return self

    async def __anext__(self) -> T:
        """The next item, stepping the worker until one is ready.

        Raises:
            StopAsyncIteration: Once the sequencer is closed everywhere and drained.
        """
        ready = self._state.ready
        while not ready:
            if self.done():
                raise StopAsyncIteration
            await self._worker.step()
        return ready.popleft().item

    def __repr__(self) -> str:
        state = self._state
        return (
            f"Sequencer(worker={self._worker.index}, time={state.source_time}, "
            f"pushed={len(state.pushed)}, held={len(state.heap)}, ready={len(state.ready)})"
        )
