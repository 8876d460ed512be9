"""Where a server's dataflows live: in this one process, or across a cluster of processes.

A :class:`Placement` says, for the rest of the service, everything that depends on how
many processes run the dataflows: the workers' fabric, how commands are ordered and when
one is done everywhere, which process holds an input, what an output captures on each
worker, where an input's frontier is read, and who hears a consumer's commit. The service
is given one when it is made (:func:`placement_for`) and never asks which.

Every process builds every dataflow on all its workers; an input lives on one worker of the
cluster: on the process that holds it (decided once, when the dataflow is created, by
:func:`place_inputs`, and kept in the catalogue: the *holders*), on the worker there that a
stable hash of its name picks (:meth:`Placement.worker_of`), so every process agrees where
it is, and a cluster whose shape changes keeps each input on its process.
"""

from __future__ import annotations

import asyncio
import logging
import time as wallclock
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol

from operators import Stream, Worker
from operators.runtime import Fabric, stable_hash
from operators.runtime.cluster import ClusterFabric, ClusterSpec, PeerLost, connect
from service.app.inputs import ProducerInput
from service.app.outputs import sorted_times
from service.app.settings import Settings

log = logging.getLogger("frontier.service")

Command = tuple[str, str, int, Any]
"""``(kind, dataflow id, dataflow index, payload)``: see :mod:`service.app.commands`."""


class Sequenced(Protocol):
    """Where a placement sends what every process must see in one order (the command plane)."""

    def push(self, command: Command) -> None:
        """Order ``command`` after every command pushed before, on every process."""
        ...

    def finish(self, dataflow_id: str, kind: str) -> None:
        """Every worker of every process applied ``kind`` for the dataflow."""
        ...


class PeerListener(Protocol):
    """Who hears that another process of the cluster stopped."""

    def peer_lost(self, error: PeerLost) -> None:
        """A process was lost: nothing computed here can be trusted any more."""
        ...

    def peer_left(self, who: str) -> None:
        """A process stopped on purpose: the cluster is stopping."""
        ...


def _keep(batch: list[Any]) -> list[Any]:
    return batch


def _drop(_batch: list[Any]) -> list[Any]:
    return []


def _tracked_frontier(stream: Stream) -> list[Hashable]:
    """A stream's frontier as the worker's trackers see it."""
    subgraph = stream.scope.builder.subgraph
    return [] if subgraph is None else sorted_times(subgraph.frontier(stream.source))


class Placement:
    """One process runs every dataflow on its workers (the default): no fabric socket."""

    processes = 1
    process = 0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.fabric: Fabric | None = None

    @property
    def workers(self) -> int:
        """Workers in this process."""
        return self.settings.workers

    async def open(self) -> Fabric:
        """The workers' fabric."""
        self.fabric = Fabric(self.settings.workers)
        return self.fabric

    @property
    def clock(self) -> Callable[[], int] | None:
        """How the sequencer orders commands (``None``: its own monotonic clock)."""
        return None

    @property
    def peers(self) -> int:
        """Workers in all."""
        return self.settings.workers * self.processes

    def worker_of(self, process: int, input_name: str) -> int:
        """The worker (of all) holding input ``input_name`` on ``process``, its holder.

        A stable hash of the name picks one of the process's workers: the same on every
        process, and, with the workers per process unchanged, the same as before a rescale.
        """
        return process * self.settings.workers + stable_hash(input_name) % self.settings.workers

    def input_process(self, holder: int) -> int | None:
        """The process ``holder`` if it is another one than this (else ``None``)."""
        return None if holder == self.process else holder

    def output(self, stream: Stream, worker: Worker) -> Stream:
        """What an output captures on ``worker``: here, its own records."""
        return stream

    def input_frontier(self, producer: ProducerInput | None, stream: Stream) -> list[Hashable]:
        """An input's frontier: its producers' own (it is here), as soon as it moves."""
        if producer is None:
            return _tracked_frontier(stream)
        return producer.applied_frontier()

    def applied(self, plane: Sequenced, command: Command) -> None:
        """Every worker here applied ``command``: it is done."""
        kind, dataflow_id, _index, _payload = command
        plane.finish(dataflow_id, kind)

    def tell(self, plane: Sequenced, command: Command) -> None:
        """Nothing to tell: no other process."""

    def watch(self, listener: PeerListener) -> asyncio.Task[None] | None:
        """No peer to watch."""
        return None

    async def close(self, failure: BaseException | None) -> None:
        """Nothing to close."""


class ClusterPlacement(Placement):
    """A cluster's processes each run every dataflow; an input lives on one of them.

    Commands are ordered by the wall clock (the processes' monotonic clocks start anywhere)
    and done once every process said so, at the same point of the order everywhere. An
    output's records go to every process's first worker, so every process serves it whole;
    an input's frontier is read off the progress every process tracks, so each shows the
    same.
    """

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        assert settings.cluster is not None
        self.cluster = settings.cluster
        self.processes = self.cluster.processes
        self.process = self.cluster.process
        self.fabric: ClusterFabric | None = None

    async def open(self) -> Fabric:
        """Connect to the cluster's other processes.

        Start-up waits for every peer (``startup_timeout``); a peer that does not come, or
        whose hello does not match, ends it with ``ClusterError`` naming it.
        """
        cluster = self.cluster
        spec = ClusterSpec(
            cluster.processes,
            cluster.process,
            self.settings.workers,
            cluster.peers,
            cluster.secret,
            cluster.startup_timeout,
            bind=self.settings.host,
        )
        self.fabric = await connect(spec)
        return self.fabric

    @property
    def clock(self) -> Callable[[], int] | None:
        """The wall clock: items wait until every worker's clock has passed theirs."""
        return wallclock.time_ns

    def output(self, stream: Stream, worker: Worker) -> Stream:
        """Every record to every process's first worker; the others keep none."""
        first = worker.index % self.settings.workers == 0
        return stream.broadcast().map_batches(_keep if first else _drop)

    def input_frontier(self, producer: ProducerInput | None, stream: Stream) -> list[Hashable]:
        """Read off the progress all processes track, so each shows the same frontier."""
        return _tracked_frontier(stream)

    def applied(self, plane: Sequenced, command: Command) -> None:
        """Say so to the cluster: each process finishes it once every process has said so."""
        kind, dataflow_id, index, _payload = command
        plane.push(("applied", dataflow_id, index, (kind, self.process)))

    def tell(self, plane: Sequenced, command: Command) -> None:
        """Send ``command`` (a consumer's commit, say) to the other processes."""
        plane.push(command)

    def watch(self, listener: PeerListener) -> asyncio.Task[None] | None:
        """Stop when a peer does: fail-stop if it was lost, gracefully if it left."""
        fabric = self.fabric
        assert fabric is not None
        loop = asyncio.get_running_loop()
        return loop.create_task(_watch(fabric, listener), name="frontier-peers")

    async def close(self, failure: BaseException | None) -> None:
        """Say goodbye (the others stop too), or, after a failure, abort naming its cause."""
        if self.fabric is None:
            return
        if failure is None:
            await self.fabric.close()
        else:
            # No goodbye from a process that failed: the others fail-stop, as it did, and
            # name its cause (a lost peer, a failed disk) as theirs.
            await self.fabric.abort(str(failure))


async def _watch(fabric: ClusterFabric, listener: PeerListener) -> None:
    failed, left = fabric.failed(), fabric.left()
    either: list[asyncio.Future[Any]] = [failed, left]
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    error = failed.exception() if failed.done() and not failed.cancelled() else None
    if isinstance(error, PeerLost):
        listener.peer_lost(error)
    elif left.done():
        listener.peer_left(left.result())


def place_inputs(inputs: Iterable[str], held: Sequence[int]) -> dict[str, int]:
    """Which process holds each of a new dataflow's ``inputs``.

    ``held[p]`` is how many inputs of live dataflows process ``p`` holds now. Each input,
    in the graph's order, goes to the process holding the fewest (the inputs placed before
    it counted), the lowest index among equals: a cluster's inputs spread over its
    processes, new ones filling the processes a rescale added.

    >>> place_inputs(["a", "b", "c"], [1, 0, 0])
    {'a': 1, 'b': 2, 'c': 0}
    >>> place_inputs(["a"], [0])
    {'a': 0}
    """
    counts = list(held)
    holders = {}
    for name in inputs:
        process = min(range(len(counts)), key=lambda p: (counts[p], p))
        holders[name] = process
        counts[process] += 1
    return holders


def legacy_holders(inputs: Iterable[str], processes: int, workers: int) -> dict[str, int]:
    """The holders the rule before holders were kept gives, at a cluster's shape.

    That rule picked one of all ``processes x workers`` workers by a stable hash of the
    input's name: the process of that worker. Its worker there is the one
    :meth:`Placement.worker_of` picks (the hash modulo the workers per process), so a
    directory written before is read as it was written.

    >>> legacy_holders(["words"], 1, 4)
    {'words': 0}
    """
    peers = processes * workers
    return {name: stable_hash(name) % peers // workers for name in inputs}


def placement_for(settings: Settings) -> Placement:
    """The placement ``settings`` ask for: one process, or a cluster."""
    if settings.cluster is None:
        return Placement(settings)
    return ClusterPlacement(settings)
