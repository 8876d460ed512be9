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
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from operators import Stream, Worker
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
        self.frontier_watchers: dict[str, list[FrontierWatch]] = {}
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
        self._tasks.clear()

    @property
    def running(self) -> bool:
        """Whether the workers are running."""
        return bool(self._tasks) and not self._stopping and self._failure is None

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
            raise

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
        """The current frontier of each input and output (and operator output, on request)."""
        result: dict[str, list[Any]] = {}
        for name, producer in record.inputs.items():
            result[f"input:{name}"] = producer.frontier()
        for name, log in record.outputs.items():
            result[f"output:{name}"] = sorted_times(log.frontier())
        if operators:
            for node, entry in self.operator_frontiers(record).items():
                for port, output in enumerate(entry["outputs"]):
                    result[f"operator:{node}:{port}"] = output["frontier"]
        return result

    def watch(self, tenant: str, dataflow_id: str, operators: bool = False) -> FrontierWatch:
        """Follow a dataflow's frontiers; the watch coalesces to the latest per location."""
        record = self.get(tenant, dataflow_id)
        watchers = self.frontier_watchers.setdefault(record.id, [])
        if len(watchers) >= self.limits.max_subscribers_per_dataflow:
            raise LimitExceeded(
                f"dataflow {dataflow_id!r} has {len(watchers)} frontier subscribers, the limit "
                "(max_subscribers_per_dataflow)"
            )
        watch = FrontierWatch(record.id, operators)
        watch.update(self.frontiers(record, operators))
        watchers.append(watch)
        return watch

    def unwatch(self, watch: FrontierWatch) -> None:
        """Stop a frontier watch."""
        watchers = self.frontier_watchers.get(watch.dataflow_id, [])
        if watch in watchers:
            watchers.remove(watch)

    def _after_step(self) -> None:
        """After workers stepped: report frontier changes, notice completed dataflows."""
        self._after_scheduled = False
        for dataflow_id, watchers in list(self.frontier_watchers.items()):
            record = self.dataflows.get(dataflow_id)
            if record is None or not watchers:
                continue
            plain = self.frontiers(record, False)
            full = self.frontiers(record, True) if any(w.operators for w in watchers) else plain
            for watch in watchers:
                watch.update(full if watch.operators else plain)
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


class FrontierWatch:
    """A subscriber to a dataflow's frontiers: the latest antichain per location, in order."""

    def __init__(self, dataflow_id: str, operators: bool) -> None:
        self.dataflow_id = dataflow_id
        self.operators = operators
        self._last: dict[str, list[Any]] = {}
        self._pending: dict[str, list[Any]] = {}
        self.wake = asyncio.Event()
        self.closed: str | None = None

    def update(self, frontiers: dict[str, list[Any]]) -> None:
        """Note the current frontiers; only changed locations are queued (coalesced)."""
        for location, frontier in frontiers.items():
            if self._last.get(location) != frontier:
                self._last[location] = frontier
                # Re-inserting moves the location to the end: events stay in change order.
                self._pending.pop(location, None)
                self._pending[location] = frontier
                self.wake.set()

    def take(self) -> list[tuple[str, list[Any]]]:
        """The changes not yet taken, oldest first (one per location: the latest)."""
        events = list(self._pending.items())
        self._pending.clear()
        self.wake.clear()
        return events

    def close(self, reason: str) -> None:
        """End the watch with a reason."""
        self.closed = reason
        self.wake.set()
