"""Test helpers for the engine: a fabric that reorders progress, and safety recorders.

:class:`ReorderingFabric` holds every progress batch instead of delivering it, and a driver
task releases them in a random order that still respects the protocol's guarantees: each
receiver gets each sender's batches exactly once, in the order they were sent, as a prefix
that grows at an arbitrary pace; batches of different senders interleave arbitrarily.
:class:`ReorderingClusterFabric` does the same in each process of a cluster, over real
sockets: what its local workers broadcast and what arrives from the other processes is held
and released the same way.

:func:`checked` inserts a frontier-aware pass-through operator that records its input
frontier every time it runs and every batch that reaches it, and flags a batch whose time
the frontier had already passed (the one thing progress tracking must never allow).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker
from operators.progress import Antichain
from operators.runtime import Fabric
from operators.runtime.cluster import ALL_LOCAL, ClusterFabric, ClusterSpec, Link

R = TypeVar("R")


class _DeliversInBursts:
    """A reordering fabric's driver: bursts of 0 to ``max_burst`` deliveries picked by
    ``rng``, a turn of the event loop between bursts, and a wait while nothing is held."""

    rng: random.Random
    max_burst: int
    _ready: asyncio.Event

    def held(self) -> int:
        raise NotImplementedError

    def deliver_one(self) -> bool:
        raise NotImplementedError

    async def _drive(self) -> None:
        while True:
            if not self.held():
                self._ready.clear()
                await self._ready.wait()
            for _ in range(self.rng.randint(0, self.max_burst)):
                if not self.deliver_one():
                    break
            await asyncio.sleep(0)


class ReorderingFabric(_DeliversInBursts, Fabric):
    """A fabric whose progress broadcasts arrive late, interleaved, FIFO per sender.

    ``broadcast`` only enqueues: one FIFO per (receiver, sender) or, with
    ``per_channel=True``, per (channel, receiver, sender), which is all the protocol
    promises (a sender's batches on *one* channel arrive in order). A driver task, running
    while the fabric is used as an async context manager, repeatedly lets ``rng`` pick a
    non-empty FIFO and pushes its oldest batch into the receiver's mailbox; between
    bursts of 0 to ``max_burst`` deliveries it yields to the event loop, so the workers run
    arbitrarily far ahead of what they have heard. Data channels are untouched.

    On exit the driver is cancelled and awaited, whatever is still held is delivered, and
    :meth:`check` verifies that every batch reached every worker exactly once, in order.
    """

    def __init__(
        self,
        peers: int,
        rng: random.Random,
        *,
        max_burst: int = 3,
        per_channel: bool = False,
    ) -> None:
        super().__init__(peers)
        self.rng = rng
        self.max_burst = max_burst
        self.per_channel = per_channel
        self._held: dict[tuple[int, ...], deque[tuple[int, int, int, object]]] = {}
        self._next_sequence: dict[tuple[int, int], int] = {}
        self._delivered: dict[tuple[int, int, int], list[int]] = {}
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.broadcasts = 0
        self.deliveries = 0
        self.late = 0
        """Batches still held when the fabric was closed (delivered then)."""
        self.overtakes = 0
        """Deliveries that overtook an older batch (of another sender or channel)."""

    # ------------------------------------------------------------------ the fabric

    def broadcast(self, channel: int, sender: int, message: object) -> None:
        """Hold ``message`` for every receiver (the sender included)."""
        sequence = self._next_sequence.get((channel, sender), 0)
        self._next_sequence[(channel, sender)] = sequence + 1
        order = self.broadcasts
        self.broadcasts += 1
        for receiver in range(self.peers):
            key = (channel, receiver, sender) if self.per_channel else (receiver, sender)
            self._held.setdefault(key, deque()).append((order, channel, sequence, message))
        self._ready.set()

    def held(self) -> int:
        """How many (receiver, batch) deliveries are still pending."""
        return sum(len(queue) for queue in self._held.values())

    def deliver_one(self) -> bool:
        """Deliver the oldest batch of one randomly chosen non-empty FIFO."""
        keys = sorted(key for key, queue in self._held.items() if queue)
        if not keys:
            return False
        key = self.rng.choice(keys)
        receiver, sender = (key[1], key[2]) if self.per_channel else (key[0], key[1])
        order, channel, sequence, message = self._held[key].popleft()
        if any(
            queue[0][0] < order
            for other, queue in self._held.items()
            if queue and other != key and receiver == (other[1] if self.per_channel else other[0])
        ):
            self.overtakes += 1
        self._delivered.setdefault((channel, receiver, sender), []).append(sequence)
        self.deliveries += 1
        self.mailbox(channel, receiver).push((sender, message))
        return True

    # ------------------------------------------------------------------ the driver

    async def __aenter__(self) -> ReorderingFabric:
        self._task = asyncio.get_running_loop().create_task(self._drive(), name="reordering")
        return self

    async def __aexit__(self, *_exc: object) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.late = self.held()
        while self.deliver_one():
            pass

    def check(self) -> None:
        """Every batch reached every worker exactly once and in its sender's order."""
        assert self.held() == 0
        assert self.deliveries == self.broadcasts * self.peers, (
            self.deliveries,
            self.broadcasts,
        )
        for (channel, sender), sent in self._next_sequence.items():
            for receiver in range(self.peers):
                got = self._delivered.get((channel, receiver, sender), [])
                assert got == list(range(sent)), (channel, sender, receiver, got)


class ReorderingClusterFabric(_DeliversInBursts, ClusterFabric):
    """A cluster fabric whose progress arrives late, interleaved, FIFO per sender.

    :class:`ReorderingFabric`'s delivery in one process of a cluster. A broadcast goes over
    the links at once, as ever, with its sender's sequence number, and is held for the local
    workers; a broadcast that arrives from another process is held the same way. A driver
    task lets ``rng`` (seeded with ``seed`` and the process's index) pick a non-empty FIFO of
    one (receiver, sender) and deliver its oldest batch, in bursts of 0 to ``max_burst``
    between turns of the event loop, so batches of different senders (local or remote)
    overtake each other while each sender's stay in order. Data channels are untouched.

    :meth:`summary` says, once closed, what this process's workers sent and what it
    delivered in which order (sequence numbers), for :func:`check_cluster_delivery`.
    """

    def __init__(
        self, spec: ClusterSpec, links: dict[int, Link], *, seed: int, max_burst: int = 3
    ) -> None:
        super().__init__(spec, links)
        self.rng = random.Random(f"{seed}/{spec.index}")
        self.max_burst = max_burst
        self._held: dict[tuple[int, int], deque[tuple[int, int, int, object]]] = {}
        self._sent: dict[tuple[int, int], int] = {}
        self._delivered: dict[tuple[int, int, int], list[int]] = {}
        self._arrivals = 0
        self.overtakes = 0
        self.late = 0
        self._ready = asyncio.Event()
        self._driver = asyncio.get_running_loop().create_task(self._drive(), name="reordering")

    def broadcast(self, channel: int, sender: int, message: object) -> None:
        """Send to every other process now; hold for the local workers."""
        sequence = self._sent.get((channel, sender), 0)
        self._sent[(channel, sender)] = sequence + 1
        item = (sender, (sequence, message))
        for link in self.links.values():
            link.send(channel, ALL_LOCAL, item)
        self._hold(channel, item)

    def _deliver(self, items: list[tuple[int, int, object]]) -> None:
        for channel, worker, message in items:
            if worker == ALL_LOCAL:
                self._hold(channel, message)
            else:
                self.mailboxes(channel)[worker].push(message)

    def _hold(self, channel: int, item: object) -> None:
        assert isinstance(item, tuple)
        sender, (sequence, message) = item
        order = self._arrivals
        self._arrivals += 1
        for receiver in self.local:
            queue = self._held.setdefault((receiver, sender), deque())
            queue.append((order, channel, sequence, message))
        self._ready.set()

    def held(self) -> int:
        """How many (receiver, batch) deliveries are still pending here."""
        return sum(len(queue) for queue in self._held.values())

    def deliver_one(self) -> bool:
        """Deliver the oldest batch of one randomly chosen non-empty FIFO."""
        keys = sorted(key for key, queue in self._held.items() if queue)
        if not keys:
            return False
        key = self.rng.choice(keys)
        receiver, sender = key
        order, channel, sequence, message = self._held[key].popleft()
        if any(q[0][0] < order for k, q in self._held.items() if q and k[0] == receiver):
            self.overtakes += 1
        self._delivered.setdefault((channel, receiver, sender), []).append(sequence)
        self.mailboxes(channel)[receiver].push((sender, message))
        return True

    async def _stop(self) -> None:
        self._driver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._driver

    async def close(self) -> None:
        """Close (every peer's batches have arrived), then deliver whatever is still held."""
        await super().close()
        await self._stop()
        self.late = self.held()
        while self.deliver_one():
            pass

    async def abort(self, cause: str | None = None) -> None:
        """Stop delivering and drop the links (telling the peers ``cause``, if given)."""
        await self._stop()
        await super().abort(cause)

    def summary(self) -> dict[str, Any]:
        """What the local workers broadcast, and the sequence numbers delivered here."""
        return {
            "sent": dict(self._sent),
            "delivered": dict(self._delivered),
            "overtakes": self.overtakes,
            "late": self.late,
        }


def check_cluster_delivery(summaries: list[dict[str, Any]], peers: int) -> None:
    """Across the processes: every batch reached every worker exactly once, in order."""
    sent: dict[tuple[int, int], int] = {}
    delivered: dict[tuple[int, int, int], list[int]] = {}
    for summary in summaries:
        assert not set(sent) & set(summary["sent"])  # a sender lives in one process
        sent.update(summary["sent"])
        delivered.update(summary["delivered"])
    assert sent
    for (channel, sender), count in sent.items():
        for receiver in range(peers):
            got = delivered.get((channel, receiver, sender), [])
            assert got == list(range(count)), (channel, sender, receiver, got)
    assert sum(len(seqs) for seqs in delivered.values()) == sum(sent.values()) * peers


# ---------------------------------------------------------------------- safety recording


@dataclass
class SafetyLog:
    """What the recorders of one run saw, on every worker; violations as messages."""

    frontiers: list[tuple[str, int, Antichain[Hashable]]] = field(default_factory=list)
    batches: list[tuple[str, int, Hashable, int]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def frontier_seen(self, name: str, worker: int, last: Any, frontier: Any) -> None:
        """Record a new frontier at ``name``; it must not go back before the last one."""
        if last is not None and not last.dominates(frontier):
            self.violations.append(
                f"{name} on worker {worker}: frontier went from {last!r} back to {frontier!r}"
            )
        self.frontiers.append((name, worker, frontier))

    def batch_seen(self, name: str, worker: int, frontier: Any, time: Hashable, n: int) -> None:
        """Record a batch at ``time``; the frontier seen so far must not have passed it."""
        if not frontier.less_equal(time):
            self.violations.append(
                f"{name} on worker {worker}: {n} records at {time!r} arrived after the "
                f"frontier had passed it ({frontier!r})"
            )
        self.batches.append((name, worker, time, n))


def checked(stream: Any, name: str, log: SafetyLog, exchange: Any = None) -> Any:
    """Pass ``stream`` through a frontier-aware recorder (with an exchange pact if given).

    Each time it runs it records its input frontier (when changed) and checks every batch
    it takes against the most advanced frontier it has seen, which is the current one.
    """
    worker = stream.scope.index

    def constructor(capability: Any, _core: Any) -> Callable[[Any, Any], None]:
        capability.drop()
        last: list[Any] = [None]

        def logic(input: Any, output: Any) -> None:
            frontier = input.frontier.frontier()
            if last[0] is None or frontier != last[0]:
                log.frontier_seen(name, worker, last[0], frontier)
                last[0] = frontier
            for time, records in input.batches():
                log.batch_seen(name, worker, frontier, time, len(records))
                output.forward(time, records)

        return logic

    return stream.unary_frontier(constructor, name=name, exchange=exchange)


class ProbeWatch:
    """Records every frontier a probe reports between steps, and checks it only advances."""

    def __init__(self, probe: Any, name: str, worker: int, log: SafetyLog) -> None:
        self.probe = probe
        self.name = name
        self.worker = worker
        self.log = log
        self.last: Any = None
        self.seen: list[Antichain[Hashable]] = []
        self.observe()

    def observe(self) -> None:
        """Record the probe's frontier if it changed since the last observation."""
        frontier = self.probe.frontier()
        if self.last is None or frontier != self.last:
            self.log.frontier_seen(self.name, self.worker, self.last, frontier)
            self.last = frontier
            self.seen.append(frontier)

    def check_batch(self, time: Hashable, n: int) -> None:
        """A batch at ``time`` on the probed stream: the probe must not have passed it."""
        self.observe()
        self.log.batch_seen(self.name, self.worker, self.probe.frontier(), time, n)

    async def step_while(self, worker: Worker, predicate: Callable[[], bool]) -> None:
        """Step ``worker`` while ``predicate()`` holds, observing the probe after each step."""
        while predicate():
            await worker.step()
            self.observe()


async def within(awaitable: Awaitable[R], seconds: float = 2.0) -> R:
    """Await ``awaitable`` with a timeout (a stalled dataflow fails instead of hanging).

    The dataflows of these tests finish in milliseconds; the margin is for slow machines.
    """
    return await asyncio.wait_for(awaitable, seconds)
