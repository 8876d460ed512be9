"""The dataflow manager: workers, the control plane, and every dataflow's inputs and outputs.

The workers run as coroutines on the server's event loop. Creating or dropping a dataflow is
a *command*: it is pushed into a :class:`~operators.sync.Sequencer`, which every worker runs
as its first dataflow, so every worker sees the commands in one order and builds (and drops)
dataflows in the same order, as the engine requires. The caller awaits the moment every
worker has applied the command.

Each input of a dataflow is owned by one worker (chosen by a stable hash of its name) where
producers' sessions live; each output is captured on every worker into one
:class:`~service.app.outputs.OutputLog`.
"""

from __future__ import annotations

import asyncio
import importlib
import time as wallclock
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol

import orjson

from operators import Stream, Worker
from operators.capture.event import encode_time
from operators.graph import (
    BuiltGraph,
    GraphError,
    Plan,
    compile_graph,
    parse_graph,
    register_operator,
)
from operators.sync import Sequencer
from service.app.errors import Gone, Invalid, LimitExceeded, NotFound
from service.app.inputs import ProducerInput, producer_input
from service.app.outputs import OutputLog, sorted_times
from service.app.settings import Settings
from service.runtime import INTEGERS, Fabric, TimeDomain, stable_hash


@dataclass(slots=True)
class DataflowRecord:
    """One dataflow as the service knows it."""

    id: str
    tenant: str
    name: str
    graph: dict[str, Any]
    plan: Plan
    index: int = -1
    """The dataflow's index on every worker (they build in the same order)."""
    status: str = "creating"
    error: str | None = None
    created_at: float = field(default_factory=wallclock.time)
    inputs: dict[str, ProducerInput] = field(default_factory=dict)
    outputs: dict[str, OutputLog] = field(default_factory=dict)
    built: dict[int, BuiltGraph] = field(default_factory=dict)
    """What each worker built (worker 0's is used for per-operator frontiers)."""
    ready: asyncio.Future[None] | None = None
    applied: int = 0

    def summary(self) -> dict[str, Any]:
        """A short description for listings."""
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "created_at": self.created_at,
            "inputs": list(self.plan.spec.inputs()),
            "outputs": list(self.plan.spec.outputs()),
        }


def _domain(depth: int) -> TimeDomain:
    domain = INTEGERS
    for _ in range(depth):
        domain = domain.product()
    return domain


class DataflowManager:
    """Runs the workers and every dataflow of the service."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.dataflows: dict[str, DataflowRecord] = {}
        self._workers: list[Worker] = []
        self._sequencers: list[Sequencer[tuple[str, str, int]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._failure: BaseException | None = None
        self._after_scheduled = False
        self.frontier_watchers: dict[str, FrontierFeed] = {}
        self._dropped: OrderedDict[str, str] = OrderedDict()
        """Recently dropped dataflows (id -> tenant), so their clients get 410, not 404."""

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Load the deployer's operators, then start the workers.

        Each worker runs the control plane's sequencer as its dataflow 0.
        """
        load_operator_plugins(self.settings.operator_modules)
        peers = self.settings.workers
        fabric = Fabric(peers)
        self._workers = [Worker(i, peers, fabric) for i in range(peers)]
        self._sequencers = [Sequencer[tuple[str, str, int]](worker) for worker in self._workers]
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(worker, sequencer), name=f"frontier-worker-{worker.index}")
            for worker, sequencer in zip(self._workers, self._sequencers, strict=True)
        ]

    def closing(self) -> None:
        """Stop taking work: close every subscriber and watch with "going away".

        Called first on shutdown, so that socket handlers can send their final events (with
        resume points) before the sockets close.
        """
        self._stopping = True
        for record in self.dataflows.values():
            for log in record.outputs.values():
                log.close("going away: the service is stopping")
            for watch in self.frontier_watchers.get(record.id, []):
                watch.close("going away: the service is stopping")

    async def stop(self) -> None:
        """Stop the workers; every subscriber is closed with "going away"."""
        self.closing()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception:  # the engine failed earlier: kept in self.failure
                pass
        self._tasks.clear()
        self._fail_pending("the service stopped")

    @property
    def running(self) -> bool:
        """Whether the workers are running."""
        return bool(self._tasks) and not self._stopping and self._failure is None

    @property
    def failure(self) -> str | None:
        """Why the workers stopped, if an error in the engine stopped them (else ``None``)."""
        if self._failure is None:
            return None
        return f"{type(self._failure).__name__}: {self._failure}"

    async def _run(self, worker: Worker, sequencer: Sequencer[tuple[str, str, int]]) -> None:
        try:
            while True:
                command = sequencer.next()
                while command is not None:
                    self._apply(worker, command)
                    command = sequencer.next()
                await worker.step()
                if not self._after_scheduled:
                    # Once per turn of the loop, whichever worker moved things.
                    self._after_scheduled = True
                    asyncio.get_running_loop().call_soon(self._after_step)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a bug in the engine: fail every request clearly
            self._failure = error
            self._fail_pending(f"the service stopped: {self.failure}")
            raise

    def _fail_pending(self, reason: str) -> None:
        """Answer every request still waiting for its command to be applied everywhere."""
        for record in self.dataflows.values():
            ready = record.ready
            if ready is not None and not ready.done():
                ready.set_exception(Gone(reason))

    # ----------------------------------------------------------------- commands

    def _apply(self, worker: Worker, command: tuple[str, str, int]) -> None:
        kind, dataflow_id, index = command
        if kind == "drop":
            # The index travels with the command: the record may be gone already.
            worker.drop_dataflow(index)
        record = self.dataflows.get(dataflow_id)
        if record is None:
            return
        if kind == "create":
            self._build(worker, record)
        record.applied += 1
        if record.applied < len(self._workers):
            return
        if kind == "create" and record.status == "creating":
            record.status = "running"
        ready = record.ready
        if ready is not None and not ready.done():
            ready.set_result(None)

    def _build(self, worker: Worker, record: DataflowRecord) -> None:
        plan = record.plan
        manager = self

        class Context:
            def input(self, name: str, scope: Any) -> Stream:
                owner = stable_hash(name) % worker.peers
                return producer_input(
                    scope, name, owner, manager.limits, lambda p: record.inputs.__setitem__(name, p)
                )

            def output(self, name: str, stream: Stream) -> None:
                log = record.outputs.get(name)
                if log is None:
                    log = record.outputs[name] = OutputLog(
                        name, plan.minimum(), worker.peers, manager.limits.output_retention_records
                    )
                stream.capture_into(log.pusher())

        def build(scope: Any) -> BuiltGraph:
            record.index = scope.builder.path[0]
            return plan.build(scope, Context())

        def failed(error: Exception) -> None:
            self._fail(record, error)

        record.built[worker.index] = worker.dataflow(
            build, domain=_domain(plan.spec.time.depth), on_error=failed
        )

    def _fail(self, record: DataflowRecord, error: Exception) -> None:
        if record.status in ("failed", "dropped"):
            return
        record.status = "failed"
        record.error = f"{type(error).__name__}: {error}"
        # Every worker must drop it, at the same point in the command order.
        self._sequencers[0].push(("drop", record.id, record.index))
        reason = f"the dataflow failed: {record.error}"
        for producer in record.inputs.values():
            producer.dropped = True
        for log in record.outputs.values():
            log.close(reason)
        for watch in self.frontier_watchers.pop(record.id, []):
            watch.close(reason)

    async def _command(self, kind: str, record: DataflowRecord) -> None:
        if not self.running:
            raise Gone("the service is not running")
        loop = asyncio.get_running_loop()
        record.ready = loop.create_future()
        record.applied = 0
        self._sequencers[0].push((kind, record.id, record.index))
        await record.ready

    # ----------------------------------------------------------------- dataflows

    def compile(self, graph: Any) -> Plan:
        """Check and compile a graph; :class:`Invalid` lists every problem with its pointer."""
        try:
            return compile_graph(parse_graph(graph))
        except GraphError as error:
            problems = [{"pointer": p.pointer, "detail": p.message} for p in error.problems]
            raise Invalid(f"the graph has {len(problems)} problem(s)", problems) from None

    async def create(self, tenant: str, graph: Any, name: str | None = None) -> DataflowRecord:
        """Check, compile and build a graph on every worker."""
        plan = self.compile(graph)
        if not self.running:
            raise Gone("the service is not running")
        owned = sum(1 for r in self.dataflows.values() if r.tenant == tenant)
        if owned >= self.limits.max_dataflows_per_tenant:
            raise LimitExceeded(
                f"tenant {tenant!r} has {owned} dataflows, the limit (max_dataflows_per_tenant)"
            )
        record = DataflowRecord(uuid.uuid4().hex, tenant, name or "", graph, plan)
        self.dataflows[record.id] = record
        await self._command("create", record)
        return record

    def get(self, tenant: str, dataflow_id: str) -> DataflowRecord:
        """The tenant's dataflow, or :class:`NotFound` (also for other tenants' dataflows)."""
        record = self.dataflows.get(dataflow_id)
        if record is None or record.tenant != tenant:
            if self._dropped.get(dataflow_id) == tenant:
                raise Gone(f"dataflow {dataflow_id!r} was dropped")
            raise NotFound(f"no dataflow {dataflow_id!r}")
        return record

    def listing(self, tenant: str) -> list[DataflowRecord]:
        """The tenant's dataflows, oldest first."""
        return sorted(
            (r for r in self.dataflows.values() if r.tenant == tenant),
            key=lambda r: (r.created_at, r.id),
        )

    async def drop(self, tenant: str, dataflow_id: str) -> None:
        """Stop a dataflow everywhere; subscribers get a final event, producers get 410."""
        record = self.get(tenant, dataflow_id)
        if record.status == "dropped":
            raise Gone(f"dataflow {dataflow_id!r} was already dropped")
        for producer in record.inputs.values():
            producer.dropped = True
        if record.status != "failed":
            await self._command("drop", record)
        record.status = "dropped"
        for log in record.outputs.values():
            log.close("the dataflow was dropped")
        for watch in self.frontier_watchers.pop(record.id, []):
            watch.close("the dataflow was dropped")
        del self.dataflows[dataflow_id]
        self._dropped[dataflow_id] = tenant
        while len(self._dropped) > 10_000:
            self._dropped.popitem(last=False)

    def input(self, tenant: str, dataflow_id: str, name: str) -> ProducerInput:
        """A dataflow's input (on its owner worker)."""
        record = self.get(tenant, dataflow_id)
        if record.status in ("failed", "dropped"):
            raise Gone(f"dataflow {dataflow_id!r} is {record.status}")
        producer = record.inputs.get(name)
        if producer is None:
            raise NotFound(f"dataflow {dataflow_id!r} has no input {name!r}")
        return producer

    def output(self, tenant: str, dataflow_id: str, name: str) -> OutputLog:
        """A dataflow's output log."""
        record = self.get(tenant, dataflow_id)
        log = record.outputs.get(name)
        if log is None:
            raise NotFound(f"dataflow {dataflow_id!r} has no output {name!r}")
        return log

    # ----------------------------------------------------------------- frontiers

    def describe(self, record: DataflowRecord, operators: bool = True) -> dict[str, Any]:
        """The dataflow in full, with frontiers and record counts.

        Its graph, status, inputs and outputs with their frontiers, and (optionally) every
        operator's output frontiers and record counts.
        """
        result: dict[str, Any] = record.summary()
        result["graph"] = record.graph
        result["error"] = record.error
        result["inputs"] = {
            name: {
                "frontier": p.frontier(),
                "sessions": len(p.sessions),
                "records_in": p.records_in,
                "closed": p.closed,
            }
            for name, p in record.inputs.items()
        }
        result["outputs"] = {
            name: {"frontier": list(log.frontier()), "records_out": log.records_out}
            for name, log in record.outputs.items()
        }
        if operators:
            result["operators"] = self.operator_frontiers(record)
        result["record_errors"] = {
            node: {"count": n, "last": record.plan.errors.last.get(node)}
            for node, n in record.plan.errors.counts.items()
        }
        return result

    def operator_frontiers(self, record: DataflowRecord) -> dict[str, Any]:
        """Per node: the frontier at each output port, and the records sent on it (all workers).

        Frontiers are the same on every worker (each tracks all of them); records are summed.
        """
        first = record.built.get(0)
        if first is None:
            return {}
        result: dict[str, Any] = {}
        for node, streams in first.streams.items():
            outputs = []
            for port, stream in enumerate(streams):
                subgraph = stream.scope.builder.subgraph
                frontier = (
                    [] if subgraph is None else sorted_times(subgraph.frontier(stream.source))
                )
                sent = 0
                for built in record.built.values():
                    mine = built.streams[node][port]
                    child = mine.scope.builder.child(mine.source.node)
                    ports = getattr(child, "output_ports", None)
                    if ports:
                        sent += ports[mine.source.port].records_out
                outputs.append({"frontier": frontier, "records": sent})
            result[node] = {"outputs": outputs}
        return result

    def frontiers(self, record: DataflowRecord, operators: bool = False) -> dict[str, list[Any]]:
        """The current frontier of each input and output (and operator output, on request).

        Only frontiers: unlike :meth:`operator_frontiers`, no record counts (this runs after
        every step of the workers while the dataflow has frontier subscribers).
        """
        result: dict[str, list[Any]] = {}
        for name, producer in record.inputs.items():
            result[f"input:{name}"] = producer.frontier()
        for name, log in record.outputs.items():
            result[f"output:{name}"] = sorted_times(log.frontier())
        if operators:
            first = record.built.get(0)
            if first is not None:
                for node, streams in first.streams.items():
                    for port, stream in enumerate(streams):
                        subgraph = stream.scope.builder.subgraph
                        result[f"operator:{node}:{port}"] = (
                            []
                            if subgraph is None
                            else sorted_times(subgraph.frontier(stream.source))
                        )
        return result

    def watch(self, tenant: str, dataflow_id: str, operators: bool = False) -> FrontierWatch:
        """Follow a dataflow's frontiers; the watch coalesces to the latest per location.

        The watch starts with the current frontiers. It is read with
        :meth:`FrontierWatch.take`, or given a :class:`FrontierSink` with
        :meth:`FrontierWatch.attach`, to which every change is then written as it happens.
        """
        record = self.get(tenant, dataflow_id)
        feed = self.frontier_watchers.get(record.id)
        if feed is None:
            feed = self.frontier_watchers[record.id] = FrontierFeed(record.id)
        if len(feed) >= self.limits.max_subscribers_per_dataflow:
            raise LimitExceeded(
                f"dataflow {dataflow_id!r} has {len(feed)} frontier subscribers, the limit "
                "(max_subscribers_per_dataflow)"
            )
        # Bring the feed up to date first (existing watches get any change as usual), so the
        # new watch starts from the frontiers as they are now.
        feed.publish(self.frontiers(record, operators or feed.operator_watches > 0))
        watch = FrontierWatch(feed, operators)
        feed.append(watch)
        if operators:
            feed.operator_watches += 1
        if record.status == "failed":
            watch.close(f"the dataflow failed: {record.error}")
        return watch

    def unwatch(self, watch: FrontierWatch) -> None:
        """Stop a frontier watch (nothing more is written to its sink)."""
        watch.sink = None
        feed = self.frontier_watchers.get(watch.dataflow_id)
        if feed is not None and watch in feed:
            feed.remove(watch)
            if watch.operators:
                feed.operator_watches -= 1

    def _after_step(self) -> None:
        """After workers stepped: report frontier changes, notice completed dataflows."""
        self._after_scheduled = False
        for dataflow_id, feed in self.frontier_watchers.items():
            record = self.dataflows.get(dataflow_id)
            if record is None or not feed:
                continue
            feed.publish(self.frontiers(record, feed.operator_watches > 0))
        for record in self.dataflows.values():
            if (
                record.status == "running"
                and record.outputs
                and all(log.frontier().is_empty() for log in record.outputs.values())
            ):
                record.status = "completed"


def load_operator_plugins(modules: tuple[str, ...]) -> list[str]:
    """Let deployer code register its operators; returns what was loaded.

    Each module in ``modules``, and each ``frontier.operators`` entry point, provides
    ``register_operators(register)`` and calls ``register(OpKind(...))`` for every operator.
    Only the server's own configuration reaches here: API clients cannot add operators.
    """
    loaded: list[str] = []
    hooks: list[tuple[str, Any]] = [
        (name, importlib.import_module(name).register_operators) for name in modules
    ]
    hooks.extend(
        (entry.value, entry.load()) for entry in metadata.entry_points(group="frontier.operators")
    )
    for name, hook in hooks:
        if name in _LOADED_PLUGINS:
            continue
        hook(register_operator)
        _LOADED_PLUGINS.add(name)
        loaded.append(name)
    return loaded


_LOADED_PLUGINS: set[str] = set()


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

    def finish(self, reason: str) -> None:
        """Send the final event for ``reason`` and close."""
        ...


class _Location:
    """One location's latest frontier, its encoded event, and when it last changed."""

    __slots__ = ("frontier", "location", "operator", "payload", "seq")

    def __init__(self, location: str) -> None:
        self.location = location
        self.operator = location.startswith("operator:")
        self.frontier: list[Any] = []
        self.payload = b""
        self.seq = 0


class FrontierFeed(list["FrontierWatch"]):
    """A dataflow's frontier watches, and the frontiers they are fed from.

    Each change of a location's frontier gets the next sequence number and is encoded once
    (``{"type": "frontier", ...}`` as JSON); every watch remembers the sequence number up
    to which it has been given everything. What a watch has not been given is then the
    latest change of each location changed since, in the order of those changes: coalesced
    (a location at most once, at its latest frontier, so never backwards) and bounded by
    the number of locations, with nothing held per watch.
    """

    __slots__ = ("by_change", "dataflow_id", "locations", "operator_watches", "seq")

    def __init__(self, dataflow_id: str) -> None:
        super().__init__()
        self.dataflow_id = dataflow_id
        self.locations: dict[str, _Location] = {}
        """Every location, in the order first seen (inputs, outputs, operators)."""
        self.by_change: dict[str, _Location] = {}
        """The same, least recently changed first."""
        self.seq = 0
        self.operator_watches = 0

    def publish(self, frontiers: dict[str, list[Any]]) -> None:
        """Note the current frontiers and give every watch the changes."""
        before = self.seq
        locations = self.locations
        by_change = self.by_change
        for name, frontier in frontiers.items():
            location = locations.get(name)
            if location is None:
                location = locations[name] = _Location(name)
            elif location.frontier == frontier:
                continue
            self.seq += 1
            location.frontier = frontier
            location.seq = self.seq
            location.payload = orjson.dumps(
                {
                    "type": "frontier",
                    "location": name,
                    "frontier": [encode_time(t) for t in frontier],
                }
            )
            by_change.pop(name, None)
            by_change[name] = location
        if self.seq == before or not self:
            return
        batches: dict[tuple[Any, bool], bytes] = {}
        for watch in self:
            watch._changed(before, batches)

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
            sink.write(sink.encode([location.payload for location in pending]))
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
            data = sink.encode([location.payload for location in changed]) if changed else b""
            batches[key] = data
        self.fed = self.feed.seq
        if data:
            sink.write(data)

    def _catch_up(self) -> None:
        sink = self.sink
        assert sink is not None
        pending = self._given()
        if pending:
            sink.write(sink.encode([location.payload for location in pending]))

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
