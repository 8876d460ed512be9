"""How a dataflow keeps pace: throughput and completion latency, and the event loop's lag.

Every second the service *samples* each dataflow (:meth:`Pace.sample`): the records its
inputs took in and its outputs gave out during that second, and the **completion latency**
of the times that completed at each output: the wall-clock time from a time's first record
entering the dataflow (at any input of this process) to the moment the output's frontier
passed it, so that every record of that time is out. The last :data:`WINDOW` samples are
kept, so a page opened now shows the minutes before it.

Following a time costs one dictionary entry from its first record to its completion at
every output; at most :data:`FOLLOWED` times are followed at once per dataflow (the others
are counted, :attr:`Pace.unfollowed`). Integer times complete in order, so each output
keeps them in a heap and pops the completed ones; partially ordered times are looked at
one by one when the output's frontier moves (a time ``[1, 0]`` may complete before
``[0, 5]``).

:class:`LoopLag` watches the event loop itself: a timer meant to fire every
:data:`TICK` seconds that fires late says the loop was busy or blocked meanwhile (a
plugin's blocking call, a long step). A lateness of :data:`STALL` seconds or more is a
*stall*: the server answered nothing meanwhile, and the last few are kept with when they
began.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.progress import less_equal

WINDOW = 300
"""Samples kept per dataflow: five minutes of one a second."""

FOLLOWED = 10_000
"""Times followed at once per dataflow, from their first record to their completion."""

TICK = 0.1
"""Seconds between the loop watch's timers (and so its resolution)."""

STALL = 0.5
"""A timer this many seconds late or more is a stall of the event loop."""

STALLS_KEPT = 20
"""The most recent stalls kept."""


@dataclass(frozen=True, slots=True)
class Latency:
    """The completion latencies of the times an output completed during one sample."""

    completed: int
    """Times that completed."""
    mean: float
    """Their mean latency, in seconds."""
    max: float
    """The longest, in seconds."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One interval (about a second) of a dataflow's life."""

    seq: int
    """The sample's number (consecutive, from 0 for each dataflow)."""
    at: float
    """When the interval ended (wall clock, seconds since the epoch)."""
    seconds: float
    """How long the interval was."""
    records_in: dict[str, int]
    """Per input held by this process: the records it took in during the interval."""
    records_out: dict[str, int]
    """Per output: the records it gave out during the interval."""
    latency: dict[str, Latency]
    """Per output that completed times during the interval: their latencies."""
    loop_lag: float
    """The event loop's worst lateness during the interval (seconds)."""


@dataclass(frozen=True, slots=True)
class Stall:
    """A time the event loop ran nothing for ``seconds`` (from ``at``, wall clock)."""

    at: float
    seconds: float


class _Waiting:
    """The times one output has not completed yet (of those followed)."""

    __slots__ = ("frontier", "heap", "others")

    def __init__(self) -> None:
        self.frontier: tuple[Hashable, ...] | None = None
        """The output's frontier as last heard (``None``: not yet heard, nothing complete)."""
        self.heap: list[int] = []
        """Integer times, as a min-heap: they complete in order."""
        self.others: list[Hashable] = []
        """Other (partially ordered) times, looked at one by one."""

    def holds(self, time: Hashable) -> bool:
        """Whether ``time`` is not complete at the output yet."""
        frontier = self.frontier
        return frontier is None or any(less_equal(f, time) for f in frontier)

    def add(self, time: Hashable) -> None:
        if type(time) is int:
            heapq.heappush(self.heap, time)
        else:
            self.others.append(time)

    def completed(self, frontier: tuple[Hashable, ...]) -> list[Hashable]:
        """The output's frontier is now ``frontier``: the waiting times it completed."""
        self.frontier = frontier
        done: list[Hashable] = []
        heap = self.heap
        if heap:
            if not frontier:
                done.extend(heap)
                heap.clear()
            elif all(type(f) is int for f in frontier):
                least: int = min(frontier)  # type: ignore[type-var, assignment]
                while heap and heap[0] < least:
                    done.append(heapq.heappop(heap))
        if self.others:
            kept: list[Hashable] = []
            for time in self.others:
                (kept if self.holds(time) else done).append(time)
            self.others = kept
        return done


class Pace:
    """One dataflow's throughput and completion latency, sampled (see the module docstring).

    ``clock`` measures latencies (monotonic seconds); the samples' ``at`` is given.
    """

    __slots__ = (
        "_clock",
        "_completed",
        "_counts",
        "_first",
        "_waiting",
        "history",
        "next_seq",
        "unfollowed",
    )

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._first: dict[Hashable, list[Any]] = {}
        """Per followed time: ``[when its first record arrived, outputs still waiting]``."""
        self._waiting: dict[str, _Waiting] = {}
        self._completed: dict[str, list[float]] = {}
        """Per output: the latencies of the times completed since the last sample."""
        self._counts: tuple[dict[str, int], dict[str, int]] = ({}, {})
        """The inputs' and outputs' record counts at the last sample."""
        self.history: deque[Sample] = deque(maxlen=WINDOW)
        """The last samples, oldest first."""
        self.next_seq = 0
        self.unfollowed = 0
        """Times not followed because :data:`FOLLOWED` were already."""

    def add_output(self, name: str) -> None:
        """Follow times to output ``name`` too (from now on)."""
        self._waiting.setdefault(name, _Waiting())

    def arrived(self, times: Iterable[Hashable]) -> None:
        """Records at ``times`` entered the dataflow: follow each time not followed yet.

        A time already complete at an output is not followed there (nothing will complete
        it again); one complete at every output is not followed at all.
        """
        first = self._first
        now = -1.0
        for time_ in times:
            if time_ in first:
                continue
            if len(first) >= FOLLOWED:
                self.unfollowed += 1
                continue
            waiting = 0
            for output in self._waiting.values():
                if output.holds(time_):
                    output.add(time_)
                    waiting += 1
            if waiting:
                if now < 0:
                    now = self._clock()
                first[time_] = [now, waiting]

    def output_moved(self, name: str, frontier: Iterable[Hashable]) -> None:
        """Output ``name``'s frontier is now ``frontier``: note the times it completed."""
        waiting = self._waiting.get(name)
        if waiting is None:
            return
        done = waiting.completed(tuple(frontier))
        if not done:
            return
        now = self._clock()
        latencies = self._completed.setdefault(name, [])
        first = self._first
        for time_ in done:
            entry = first[time_]
            latencies.append(now - entry[0])
            entry[1] -= 1
            if not entry[1]:
                del first[time_]

    @property
    def followed(self) -> int:
        """Times followed now (arrived, not yet complete at every output)."""
        return len(self._first)

    def sample(
        self,
        at: float,
        seconds: float,
        records_in: Mapping[str, int],
        records_out: Mapping[str, int],
        loop_lag: float,
    ) -> Sample:
        """Close an interval of ``seconds`` ending ``at``, given the counts now; kept.

        ``records_in`` and ``records_out`` are the inputs' and outputs' record counts so far
        (counters); the sample holds what they grew by since the last one.
        """
        before_in, before_out = self._counts
        grown_in = {name: n - before_in.get(name, 0) for name, n in records_in.items()}
        grown_out = {name: n - before_out.get(name, 0) for name, n in records_out.items()}
        self._counts = (dict(records_in), dict(records_out))
        latency = {
            name: Latency(len(times), sum(times) / len(times), max(times))
            for name, times in self._completed.items()
            if times
        }
        self._completed = {}
        sample = Sample(self.next_seq, at, seconds, grown_in, grown_out, latency, loop_lag)
        self.next_seq += 1
        self.history.append(sample)
        return sample

    def samples_after(self, seq: int) -> list[Sample]:
        """The kept samples numbered after ``seq`` (all of them for ``-1``), oldest first."""
        history = self.history
        if not history or history[-1].seq <= seq:
            return []
        return [sample for sample in history if sample.seq > seq]


class LoopLag:
    """How late the event loop runs a timer meant for every :data:`TICK` seconds.

    :meth:`observe` is given each timer's lateness; :meth:`take` answers the worst since it
    was last asked (one sample's), and :attr:`stalls` keeps the last lateness of
    :data:`STALL` seconds or more.
    """

    __slots__ = ("_worst", "last", "stalls", "total_stalls")

    def __init__(self) -> None:
        self._worst = 0.0
        self.last = 0.0
        """The worst lateness of the last sample (what :meth:`take` answered last)."""
        self.stalls: deque[Stall] = deque(maxlen=STALLS_KEPT)
        self.total_stalls = 0
        """Stalls since the process started."""

    def observe(self, late: float, wall: float) -> None:
        """A timer fired ``late`` seconds late, at ``wall`` (the wall clock)."""
        if late > self._worst:
            self._worst = late
        if late >= STALL:
            self.stalls.append(Stall(wall - late, late))
            self.total_stalls += 1

    def take(self) -> float:
        """The worst lateness since the last call (and start again from nothing)."""
        self.last, self._worst = self._worst, 0.0
        return self.last
