"""The dataflow manager: workers, the control plane, and every dataflow's inputs and outputs.

The workers run as coroutines on the server's event loop. Creating or dropping a dataflow is
a *command*: it is pushed into a :class:`~operators.sync.Sequencer`, which every worker runs
as its first dataflow, so every worker sees the commands in one order and builds (and drops)
dataflows in the same order, as the engine requires. The caller awaits the moment every
worker has applied the command.

Each input of a dataflow is owned by one worker (chosen by a stable hash of its name) where
producers' sessions live; each output is captured on every worker into one
:class:`~service.app.outputs.OutputLog`.

What the manager answers is typed (:mod:`service.app.views`); it writes no wire format. The
frontier events its watches send are encoded by the codec the API hands it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import time as wallclock
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from operators import Stream, Worker
from operators.graph import (
    BuiltGraph,
    GraphError,
    GraphSpec,
    Plan,
    compile_graph,
    parse_graph,
    register_operator,
)
from operators.progress import Antichain, Source
from operators.runtime import Fabric, stable_hash
from operators.runtime.cluster import ClusterFabric, ClusterSpec, PeerLost, connect
from operators.sync import Sequencer
from service.app.durable import BatchDecoder, InputJournal, Replayed, Store
from service.app.errors import (
    Gone,
    Invalid,
    LimitExceeded,
    NotFound,
    ServiceError,
    Unavailable,
)
from service.app.explain import Explainer, ExplainView
from service.app.frontiers import Feeds, FrontierCodec, FrontierFeed, FrontierWatch
from service.app.inputs import ProducerInput, producer_input
from service.app.outputs import OutputLog, Sizer, Subscriber, sorted_times
from service.app.settings import Settings
from service.app.views import (
    ConsumerView,
    DataflowPage,
    DataflowStats,
    DataflowSummary,
    DataflowView,
    InputState,
    InputView,
    OperatorState,
    OutputState,
    OutputStats,
    PortState,
    RecordErrors,
    StoreStats,
)
from service.store import Durability

log = logging.getLogger("frontier.service")


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
    """Set once the command this process issued last (``waiting``) is done everywhere."""
    waiting: str = ""
    applied: dict[str, int] = field(default_factory=dict)
    """Per command kind, how many of this process's workers applied it."""
    acknowledged: dict[str, int] = field(default_factory=dict)
    """In a cluster, per command kind, how many processes said every worker of theirs
    applied it (the command is done once all have)."""
    truncated_before: int = 0
    """Its inputs' logs hold no record at a time before this one."""
    truncation_due: bool = False

    def summary(self) -> DataflowSummary:
        """A short description for listings."""
        return DataflowSummary(
            self.id,
            self.name,
            self.status,
            self.created_at,
            list(self.plan.spec.inputs()),
            list(self.plan.spec.outputs()),
        )


Command = tuple[str, str, int, Any]
"""``(kind, dataflow id, dataflow index, payload)``, as the control plane's sequencer orders
commands:

- ``create``: in a cluster its payload is the dataflow itself (tenant, name, graph, creation
  time), so every process can build it;
- ``drop``: its payload is the reason when the dataflow failed (every process shows it);
- ``forget``: a failed dataflow, dropped on the workers already, goes;

and in a cluster only:

- ``applied`` (payload ``(kind, process)``): every worker of that process applied the
  dataflow's last ``kind``;
- ``consumer`` (payload ``(output, consumer, registered, committed, process)``): a consumer's
  commit or end, made at that process;
- ``recovered``: process 0 has issued the creates of every dataflow it had stored."""


def _kept(batch: list[Any]) -> list[Any]:
    return batch


def _dropped(_batch: list[Any]) -> list[Any]:
    return []


def _no_codec(location: str, frontier: list[Hashable]) -> bytes:
    raise RuntimeError("frontier events need a codec: DataflowManager(frontier_codec=...)")


def _no_decoder(raw: tuple[str, bytes]) -> Any:
    raise RuntimeError("replaying logged batches needs DataflowManager(batch_decoder=...)")


class DataflowManager:
    """Runs the workers and every dataflow of the service.

    ``frontier_codec`` encodes a location's frontier as the event frontier watches are
    sent (the API's wire format); watches read with :meth:`FrontierWatch.take` need none.
    ``batch_decoder`` decodes a batch logged as it arrived (JSON or Arrow bytes), for
    recovery. ``record_sizer`` gives a batch of output records' encoded size, which the
    byte limits of outputs' retention and subscribers' queues count (without one, only
    their limits in records and events hold).

    With a ``data_dir`` every dataflow, every operation on its inputs and every consumer's
    commit is stored (:mod:`service.app.durable`), and :meth:`start` recovers what the
    directory holds: until that is done, :attr:`ready` is false.
    """

    def __init__(
        self,
        settings: Settings,
        frontier_codec: FrontierCodec | None = None,
        batch_decoder: BatchDecoder | None = None,
        record_sizer: Sizer | None = None,
    ) -> None:
        self.settings = settings
        self.record_sizer = record_sizer
        self.limits = settings.limits
        self.frontier_codec: FrontierCodec = frontier_codec or _no_codec
        self.batch_decoder: BatchDecoder = batch_decoder or _no_decoder
        self.store: Store | None = None
        self._journals: dict[tuple[str, str], InputJournal] = {}
        """Each input's journal (dataflow id, input name), opened before it is built."""
        self.ready = False
        """Whether what the data directory held is recovered (the service takes requests)."""
        self.recovery_seconds: float | None = None
        self.replayed = Replayed()
        self._recovery: asyncio.Task[None] | None = None
        self._expiry: asyncio.Task[None] | None = None
        self.fatal: asyncio.Event | None = None
        """Set when the data directory failed (a sync, or recovery), or the cluster lost a
        process: this process must stop (and exit non-zero)."""
        self.left: asyncio.Event = asyncio.Event()
        """Set when another process of the cluster stopped on purpose: this one stops too."""
        self.left_by: str | None = None
        """Which process left (``process 1 (host:port)``)."""
        self.dataflows: dict[str, DataflowRecord] = {}
        cluster = settings.cluster
        self.processes = cluster.processes if cluster is not None else 1
        """How many processes run the dataflows (each builds every one of them)."""
        self.process = cluster.process if cluster is not None else 0
        """This process's index in its cluster."""
        self.fabric: Fabric | None = None
        self._workers: list[Worker] = []
        self._sequencers: list[Sequencer[Command]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._failure: BaseException | None = None
        self.feeds = Feeds(self.frontier_codec, self._busy)
        self._zero_recovered = False
        """Whether process 0 has issued the creates of every dataflow it had stored."""
        self._dropped: OrderedDict[str, str] = OrderedDict()
        """Recently dropped dataflows (id -> tenant), so their clients get 410, not 404."""

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Load the deployer's operators, then start the workers.

        Each worker runs the control plane's sequencer as its dataflow 0.
        """
        load_operator_plugins(self.settings.operator_modules)
        self.fatal = asyncio.Event()
        stored = []
        if self.settings.data_dir is not None:
            durability = Durability(self.settings.durability)
            self.store = Store(
                self.settings.data_dir,
                durability,
                on_failure=self._store_failed,
                segment_bytes=self.settings.log_segment_bytes,
            )
            stored = list(self.store.catalogue.dataflows())
            self.store.remove_orphans({dataflow.id for dataflow in stored})
            # Every log is opened (every frame checked) before anything runs: a corrupt
            # directory refuses to start, naming the file and the offset.
            for dataflow in stored:
                if dataflow.status != "failed":
                    for index, name in enumerate(self.compile(dataflow.graph).spec.inputs()):
                        self._journal(dataflow.id, index, name)
        fabric = self.fabric = await self._fabric()
        self._workers = [Worker(i, fabric.peers, fabric) for i in fabric.local]
        # A cluster's processes order commands by the wall clock: their monotonic clocks
        # start anywhere, and items wait until every worker's clock has passed theirs.
        clock = wallclock.time_ns if self.processes > 1 else None
        self._sequencers = [Sequencer[Command](worker, clock) for worker in self._workers]
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(worker, sequencer), name=f"frontier-worker-{worker.index}")
            for worker, sequencer in zip(self._workers, self._sequencers, strict=True)
        ]
        if isinstance(fabric, ClusterFabric):
            self._tasks.append(loop.create_task(self._watch(fabric), name="frontier-peers"))
        if stored:
            self._recovery = loop.create_task(self._recover(stored), name="frontier-recovery")
        else:
            self.ready = True
            self._recovered()
        if math.isfinite(self.limits.staged_transaction_seconds):
            self._expiry = loop.create_task(self._expire_loop(), name="frontier-expiry")

    async def _fabric(self) -> Fabric:
        """The workers' fabric: this process's alone, or connected to the cluster's others.

        A cluster's start-up waits for every peer (``startup_timeout``); a peer that does not
        come, or whose hello does not match, ends it with ``ClusterError`` naming it.
        """
        cluster = self.settings.cluster
        if cluster is None:
            return Fabric(self.settings.workers)
        spec = ClusterSpec(
            cluster.processes,
            cluster.process,
            self.settings.workers,
            cluster.peers,
            cluster.secret,
            cluster.startup_timeout,
            bind=self.settings.host,
        )
        return await connect(spec)

    async def _watch(self, fabric: ClusterFabric) -> None:
        """Stop when a peer does: fail-stop if it was lost, gracefully if it left on purpose.

        A lost peer means nothing computed here can be trusted any more; a peer that left
        means the cluster is stopping.
        """
        failed, left = fabric.failed(), fabric.left()
        either: list[asyncio.Future[Any]] = [failed, left]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        error = failed.exception() if failed.done() and not failed.cancelled() else None
        if isinstance(error, PeerLost):
            self._failure = error
            log.critical("the cluster lost a process, this one stops: %s", error)
            self._fail_pending(f"the service stopped: {error}")
            if self.fatal is not None:
                self.fatal.set()
        elif left.done():
            self.left_by = left.result()
            log.warning("%s left the cluster: this process stops too", self.left_by)
            self.left.set()

    def _journal(self, dataflow: str, index: int, name: str) -> InputJournal:
        journal = self._journals.get((dataflow, name))
        if journal is None:
            assert self.store is not None
            journal = self.store.journal(dataflow, index, name, self._decode)
            self._journals[(dataflow, name)] = journal
        return journal

    def _decode(self, raw: tuple[str, bytes]) -> Any:
        return self.batch_decoder(raw)

    async def _recover(self, stored: list[Any]) -> None:
        """Build every stored dataflow again, in creation order, and replay its inputs.

        In a cluster every process holds the same catalogue (each stored every dataflow as
        it was created, and every failure): process 0 issues the creates, in that order, and
        every process, once a dataflow runs everywhere, replays the inputs it holds.
        """
        began = wallclock.perf_counter()
        store = self.store
        assert store is not None
        try:
            records = [self._stored_record(dataflow) for dataflow in stored]
            for record in records:
                if record.status == "failed":
                    continue
                if self.process == 0:
                    await self._command("create", record, self._payload(record))
                elif not await self._until_running(record):
                    continue

                if record.truncated_before > 0:
                    # Times before it were forgotten by every output, and are not replayed.
                    for forgetting in record.outputs.values():
                        forgetting.evicted = [record.truncated_before - 1]
                for output, consumer, committed in store.catalogue.consumers(record.id):
                    read = record.outputs.get(output)
                    if read is not None:
                        read.commit(consumer, committed)
                for name, producer in record.inputs.items():
                    journal = self._journals[(record.id, name)]
                    await journal.replay(producer, self.replayed, self._caught_up)
        except Exception as error:
            self._failure = error
            log.critical("recovery failed, the service stops: %s", error)
            assert self.fatal is not None
            self.fatal.set()
            return
        self._recovered()
        self.recovery_seconds = wallclock.perf_counter() - began
        self.ready = True
        log.info(
            "recovered %d dataflows, %d records replayed in %.3f s",
            len(stored),
            self.replayed.records,
            self.recovery_seconds,
        )

    def _recovered(self) -> None:
        """Process 0 of a cluster says it has issued every stored create (maybe none).

        The others then drop whatever only they had stored.
        """
        if self.processes > 1 and self.process == 0:
            self._sequencers[0].push(("recovered", "", -1, None))

    def _stored_record(self, dataflow: Any) -> DataflowRecord:
        """A stored dataflow's record, known before any command about it arrives."""
        record = DataflowRecord(
            dataflow.id,
            dataflow.tenant,
            dataflow.name,
            dataflow.graph,
            self.compile(dataflow.graph),
            created_at=dataflow.created_at,
            truncated_before=dataflow.truncated_before,
        )
        self.dataflows[record.id] = record
        if dataflow.status == "failed":
            record.status, record.error = "failed", dataflow.error
        return record

    def _payload(self, record: DataflowRecord) -> Any:
        """What a create carries: in a cluster, the dataflow, so every process can build it."""
        if self.processes == 1:
            return None
        return (record.tenant, record.name, record.graph, record.created_at)

    async def _until_running(self, record: DataflowRecord) -> bool:
        """Wait until process 0's create of ``record`` is done everywhere (recovery).

        ``False`` if process 0 recovered everything it had without it: a crash between the
        processes' storing it left it here alone. It never ran everywhere, and goes.
        """
        while record.status == "creating":
            if self._failure is not None:
                raise RuntimeError(f"the service stopped: {self.failure}")
            if self._zero_recovered:
                log.warning(
                    "dataflow %s is stored here but not at process 0: it is dropped", record.id
                )
                self.dataflows.pop(record.id, None)
                if self.store is not None:
                    self.store.drop(record.id)
                return False
            await asyncio.sleep(0.01)
        return True

    async def _expire_loop(self) -> None:
        """Expire staged transactions left ``staged_transaction_seconds``, all along.

        Looked at every twentieth of that bound (between 50 ms and 10 s), so one expires
        at most that late; a commit or a staging request finds a due one expired at once.
        """
        seconds = self.limits.staged_transaction_seconds
        interval = min(max(seconds / 20, 0.05), 10.0)
        while True:
            await asyncio.sleep(interval)
            if self.ready and self.running:
                try:
                    await self.expire_transactions()
                except Exception:  # a bug must not stop expiry for good: said, tried again
                    log.exception("expiring staged transactions failed")

    async def expire_transactions(self, now: float | None = None) -> int:
        """Expire every transaction due at ``now`` (default: the wall clock); how many.

        Each expiry is in its input's log (durable before this returns) so that a restart
        does not bring the transaction back.
        """
        now = wallclock.time() if now is None else now
        expired = 0
        for record in list(self.dataflows.values()):
            for producer in list(record.inputs.values()):
                try:
                    gone = producer.expire(now)
                    if gone:
                        await producer.durable()
                except ServiceError as error:  # a full disk: the next round tries again
                    log.warning("expiring transactions of %s waits: %s", record.id, error)
                    continue
                for transaction, records in gone:
                    log.info(
                        "transaction %r of input %r of dataflow %s expired: %d records "
                        "discarded (staged_transaction_seconds %g)",
                        transaction,
                        producer.name,
                        record.id,
                        records,
                        self.limits.staged_transaction_seconds,
                    )
                expired += len(gone)
        return expired

    async def _caught_up(self) -> None:
        """Wait until the workers have done what they were given (a pause in a replay)."""
        await asyncio.sleep(0)
        while any(worker.busy for worker in self._workers):
            await asyncio.sleep(0)

    def _store_failed(self, error: BaseException) -> None:
        """A sync failed: nothing can be acknowledged any more (fail-stop)."""
        self._failure = error
        log.critical("the data directory failed, the service stops: %s", error)
        self._fail_pending(f"the service stopped: the data directory failed: {error}")
        if self.fatal is not None:
            self.fatal.set()

    def closing(self) -> None:
        """Stop taking work: close every subscriber and watch with "going away".

        Called first on shutdown, so that socket handlers can send their final events (with
        resume points) before the sockets close.
        """
        self._stopping = True
        for record in self.dataflows.values():
            for log in record.outputs.values():
                log.close("going away: the service is stopping")
            for watch in self.feeds.by_dataflow.get(record.id, []):
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
        for background in (self._recovery, self._expiry):
            if background is not None:
                background.cancel()
                await asyncio.gather(background, return_exceptions=True)
        self._fail_pending("the service stopped")
        if isinstance(self.fabric, ClusterFabric):
            if self._failure is None:
                await self.fabric.close()  # a goodbye: the others stop too, on purpose
            else:
                # No goodbye from a process that failed: the others fail-stop, as it did,
                # and name its cause (a lost peer, a failed disk) as theirs.
                await self.fabric.abort(str(self._failure))
        if self.store is not None:
            await self.store.close()

    @property
    def running(self) -> bool:
        """Whether the workers are running."""
        return bool(self._tasks) and not self._stopping and self._failure is None

    def write_problem(self) -> str | None:
        """Why writes are refused now (a full disk, say), or ``None``: checked afresh."""
        store = self.store
        if store is None or store.writable():
            return None
        return store.refusal

    def check_ready(self) -> None:
        """:class:`Unavailable` while the service recovers, or once its cluster failed."""
        if isinstance(self._failure, PeerLost):
            raise Unavailable(f"the service stopped: {self._failure}")
        if not self.ready and self._failure is None:
            raise Unavailable("the service is recovering its data directory", retry_after=1)

    @property
    def failure(self) -> str | None:
        """Why the workers stopped, if an error in the engine stopped them (else ``None``)."""
        if self._failure is None:
            return None
        return f"{type(self._failure).__name__}: {self._failure}"

    async def _run(self, worker: Worker, sequencer: Sequencer[Command]) -> None:
        try:
            while True:
                command = sequencer.next()
                while command is not None:
                    self._apply(worker, command)
                    command = sequencer.next()
                await worker.step()
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

    def _apply(self, worker: Worker, command: Command) -> None:
        kind, dataflow_id, index, payload = command
        if kind == "applied":
            if worker is self._workers[0]:
                self._acknowledged(dataflow_id, payload)
            return
        if kind == "consumer":
            if worker is self._workers[0]:
                self._consumer_elsewhere(dataflow_id, payload)
            return
        if kind == "recovered":
            self._zero_recovered = True  # process 0 issued every stored dataflow's create
            return
        if kind == "drop":
            # The index travels with the command: the record may be gone already.
            worker.drop_dataflow(index)
        record = self.dataflows.get(dataflow_id)
        if record is None and kind == "create" and payload is not None:
            record = self._adopt(dataflow_id, payload)
        if record is None:
            return
        if kind == "create":
            self._build(worker, record)
        elif kind == "drop" and payload is not None and record.status != "failed":
            self._mark_failed(record, payload)  # it failed on another process
        applied = record.applied[kind] = record.applied.get(kind, 0) + 1
        if applied < len(self._workers):
            return
        if self.processes > 1:
            # Every worker here has it: say so to the cluster; each process finishes the
            # command once every process has said so (the same moment in the sequence).
            self._sequencers[0].push(("applied", dataflow_id, index, (kind, self.process)))
            return
        self._done(record, kind)

    def _acknowledged(self, dataflow_id: str, payload: tuple[str, int]) -> None:
        """A process applied a command on all its workers; once all have, it is done."""
        kind, _process = payload
        record = self.dataflows.get(dataflow_id)
        if record is None:
            return
        count = record.acknowledged[kind] = record.acknowledged.get(kind, 0) + 1
        if count == self.processes:
            self._done(record, kind)

    def _done(self, record: DataflowRecord, kind: str) -> None:
        """Every worker of every process applied ``kind``: finish it, answer who waits."""
        if kind == "create" and record.status == "creating":
            record.status = "running"
            if record.outputs:
                self._maybe_completed(record)
        elif (kind == "drop" and record.status != "failed") or kind == "forget":
            self._forget(record)  # a failed dataflow stays, to be seen, until it is dropped
        ready = record.ready
        if ready is not None and not ready.done() and record.waiting == kind:
            ready.set_result(None)

    def _adopt(
        self, dataflow_id: str, payload: tuple[str, str, dict[str, Any], float]
    ) -> DataflowRecord:
        """A dataflow another process of the cluster created: built here the same way."""
        tenant, name, document, created_at = payload
        record = DataflowRecord(
            dataflow_id, tenant, name, document, self.compile(document), created_at=created_at
        )
        if self.store is not None:
            self.store.catalogue.add_dataflow(dataflow_id, tenant, name, document, created_at)
        self.dataflows[dataflow_id] = record
        return record

    def _build(self, worker: Worker, record: DataflowRecord) -> None:
        plan = record.plan
        manager = self

        class Context:
            def input(self, name: str, scope: Any) -> Stream:
                owner = stable_hash(name) % worker.peers
                return producer_input(
                    scope, name, owner, manager.limits, lambda p: manager._add_input(record, p)
                )

            def output(self, name: str, stream: Stream) -> None:
                log = record.outputs.get(name)
                if log is None:
                    log = manager._add_output(record, name, len(manager._workers))
                if manager.processes > 1:
                    # Every process serves the output whole: its records go to every
                    # process's first worker; each process merges its own workers' progress.
                    first = worker.index % len(manager._workers) == 0
                    stream = stream.broadcast().map_batches(_kept if first else _dropped)
                stream.capture_into(log.pusher())

        def build(scope: Any) -> BuiltGraph:
            record.index = scope.builder.path[0]
            built = plan.build(scope, Context())
            if worker is manager._workers[0]:
                self._follow_operators(record, built)
            return built

        def failed(error: Exception) -> None:
            self._fail(record, error)

        record.built[worker.index] = worker.dataflow(
            build, domain=plan.spec.time.domain(), on_error=failed
        )

    def _add_input(self, record: DataflowRecord, producer: ProducerInput) -> None:
        record.inputs[producer.name] = producer
        if self.store is not None:
            index = list(record.plan.spec.inputs()).index(producer.name)
            journal = producer.journal = self._journal(record.id, index, producer.name)
            journal.snapshot = producer.snapshot
            if self.store.durability is Durability.FSYNC:
                producer.defer_effects()
        if self.processes == 1:  # in a cluster, read off the tracker (_follow_operators)
            location = f"input:{producer.name}"
            producer.on_frontier = lambda: self.feeds.moved(
                record.id, location, producer.applied_frontier
            )

    def _add_output(self, record: DataflowRecord, name: str, peers: int) -> OutputLog:
        log = record.outputs[name] = OutputLog(
            name,
            record.plan.minimum(),
            peers,
            self.limits.output_retention_records,
            self.limits.output_retention_bytes,
            self.record_sizer,
        )
        location = f"output:{name}"

        def reader() -> list[Hashable]:
            return sorted_times(log.frontier())

        def moved(frontier: Antichain[Hashable]) -> None:
            self.feeds.moved(record.id, location, reader)
            if frontier.is_empty():
                self._maybe_completed(record)

        log.on_frontier = moved
        if self.store is not None and not record.plan.spans_times():
            log.on_evict = lambda: self._truncation_due(record)
        return log

    def _truncation_due(self, record: DataflowRecord) -> None:
        if not record.truncation_due:
            record.truncation_due = True
            asyncio.get_running_loop().call_soon(self._truncate, record)

    def _truncate(self, record: DataflowRecord) -> None:
        """Cut the inputs' logs below the times every output has forgotten.

        Integer times only, and only for a dataflow whose operators make output at the
        times of their input (none declares ``spans_times``): an output time then needs
        input at that time alone to be computed again.
        """
        record.truncation_due = False
        store = self.store
        if store is None or record.status not in ("running", "completed") or not record.outputs:
            return
        before = None
        for log_ in record.outputs.values():
            forgotten = [t for t in log_.evicted if type(t) is int]
            if len(forgotten) != len(log_.evicted):
                return  # product times: the log is kept whole
            cut = max(forgotten) + 1 if forgotten else 0
            before = cut if before is None else min(before, cut)
        if before is None or before <= record.truncated_before:
            return
        try:
            # First the catalogue: a restart then knows those times are gone, whatever
            # segments a crash left.
            store.catalogue.truncated(record.id, before)
        except OSError as error:
            log.warning("truncating the logs of %s waits: %s", record.id, error)
            return
        record.truncated_before = before
        for name in record.inputs:
            journal = self._journals.get((record.id, name))
            if journal is not None:
                journal.truncate(before)

    def _follow_operators(self, record: DataflowRecord, built: BuiltGraph) -> None:
        """Have the engine say which operators' frontiers moved (worker 0 tracks them all).

        In a cluster, inputs' frontiers are followed here too: an input lives on one
        process, and every process reads its frontier off the progress they all track.
        """
        scopes: dict[int, tuple[Any, dict[Source, str], dict[Source, str]]] = {}
        clustered = self.processes > 1
        for node, streams in built.streams.items():
            for port, stream in enumerate(streams):
                builder = stream.scope.builder
                _, names, inputs = scopes.setdefault(id(builder), (builder, {}, {}))
                names[stream.source] = f"operator:{node}:{port}"
                if clustered and record.plan.spec.nodes[node].op == "input":
                    inputs[stream.source] = f"input:{node}"
        for builder, names, inputs in scopes.values():
            builder.on_frontier_change(self._operator_listener(record.id, builder, names, inputs))

    def _operator_listener(
        self, dataflow_id: str, builder: Any, names: dict[Source, str], inputs: dict[Source, str]
    ) -> Callable[[Source], None]:
        def moved(source: Source) -> None:
            feed = self.feeds.by_dataflow.get(dataflow_id)
            if feed is None:
                return
            name = names.get(source)
            read = lambda: sorted_times(builder.subgraph.frontier(source))  # noqa: E731
            if name is not None and feed.operator_watches:
                self.feeds.moved(dataflow_id, name, read)
            location = inputs.get(source)
            if location is not None:
                self.feeds.moved(dataflow_id, location, read)

        return moved

    def _maybe_completed(self, record: DataflowRecord) -> None:
        if record.status == "running" and all(
            log.frontier().is_empty() for log in record.outputs.values()
        ):
            record.status = "completed"

    def _fail(self, record: DataflowRecord, error: Exception) -> None:
        if record.status in ("failed", "dropped"):
            return
        reason = f"{type(error).__name__}: {error}"
        self._mark_failed(record, reason)
        # Every worker must drop it, at the same point in the command order; in a cluster
        # the reason travels with the command, so every process shows it failed, and why.
        self._sequencers[0].push(("drop", record.id, record.index, reason))

    def _mark_failed(self, record: DataflowRecord, reason: str) -> None:
        record.status = "failed"
        record.error = reason
        if self.store is not None:
            self.store.catalogue.set_status(record.id, "failed", record.error)
        for producer in record.inputs.values():
            producer.dropped = True
        for log in record.outputs.values():
            log.close(f"the dataflow failed: {reason}")
        self.feeds.close(record.id, f"the dataflow failed: {reason}")

    async def _command(self, kind: str, record: DataflowRecord, payload: Any = None) -> None:
        if not self.running:
            raise Gone("the service is not running")
        loop = asyncio.get_running_loop()
        record.ready = loop.create_future()
        record.waiting = kind
        record.applied.pop(kind, None)
        record.acknowledged.pop(kind, None)
        self._sequencers[0].push((kind, record.id, record.index, payload))
        await record.ready

    # ----------------------------------------------------------------- dataflows

    def compile(self, graph: GraphSpec | Mapping[str, Any]) -> Plan:
        """Check and compile a graph; :class:`Invalid` lists every problem with its pointer.

        ``graph`` is a :class:`GraphSpec` whose shape is checked (what the API hands over, from
        its graph model) or a graph as JSON (from library users, the catalogue on recovery and
        the demo), whose shape :func:`parse_graph` checks here: the same checker either way.
        """
        try:
            spec = graph if isinstance(graph, GraphSpec) else parse_graph(graph)
            return compile_graph(spec, self.limits.max_record_bytes)
        except GraphError as error:
            problems = [{"pointer": p.pointer, "detail": p.message} for p in error.problems]
            raise Invalid(f"the graph has {len(problems)} problem(s)", problems) from None

    def plan(self, graph: GraphSpec | Mapping[str, Any]) -> dict[str, Any]:
        """What creating ``graph`` would build (a dry run); :class:`Invalid` if it cannot."""
        return self.compile(graph).describe()

    async def create(
        self, tenant: str, graph: GraphSpec | Mapping[str, Any], name: str | None = None
    ) -> DataflowRecord:
        """Check, compile and build a graph on every worker.

        ``graph`` is as :meth:`compile` takes it; a :class:`GraphSpec` must come from
        :func:`parse_graph`, which keeps the document it read: that is what is stored.
        """
        plan = self.compile(graph)
        document = plan.spec.document
        if not document:
            raise ValueError("a GraphSpec to create must come from parse_graph (with its document)")
        if not self.running:
            raise Gone("the service is not running")
        owned = sum(1 for r in self.dataflows.values() if r.tenant == tenant)
        if owned >= self.limits.max_dataflows_per_tenant:
            raise LimitExceeded(
                f"tenant {tenant!r} has {owned} dataflows, the limit (max_dataflows_per_tenant)"
            )
        record = DataflowRecord(uuid.uuid4().hex, tenant, name or "", document, plan)
        if self.store is not None:
            try:
                self.store.catalogue.add_dataflow(
                    record.id, tenant, record.name, document, record.created_at
                )
            except OSError as error:
                raise self.store.refused(error, "the dataflow cannot be stored") from None
        self.dataflows[record.id] = record
        try:
            await self._command("create", record, self._payload(record))
        except BaseException:
            if self.store is not None:
                self.store.drop(record.id)
            raise
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

    def page(self, tenant: str, after: tuple[float, str] | None, limit: int) -> DataflowPage:
        """Up to ``limit`` of the tenant's dataflows created after ``after`` (creation, id).

        A position stays valid even if the dataflow it names was dropped meanwhile.
        """
        records = self.listing(tenant)
        start = 0
        if after is not None:
            start = next(
                (i for i, r in enumerate(records) if (r.created_at, r.id) > after), len(records)
            )
        page = records[start : start + limit]
        return DataflowPage([r.summary() for r in page], start + limit < len(records))

    async def drop(self, tenant: str, dataflow_id: str) -> None:
        """Stop a dataflow everywhere; subscribers get a final event, producers get 410.

        Everything the service held for it goes: its record, watches, logs and consumers;
        the engine releases its operators and channels on every worker.
        """
        record = self.get(tenant, dataflow_id)
        if record.status == "dropped":
            raise Gone(f"dataflow {dataflow_id!r} was already dropped")
        for producer in record.inputs.values():
            producer.dropped = True
        # A failed dataflow is dropped on the workers already: every process forgets it.
        await self._command("drop" if record.status != "failed" else "forget", record)

    def _forget(self, record: DataflowRecord) -> None:
        """Everything this process held for a dropped dataflow goes."""
        record.status = "dropped"
        for log in record.outputs.values():
            log.close("the dataflow was dropped")
        self.feeds.close(record.id, "the dataflow was dropped")
        self.dataflows.pop(record.id, None)
        record.built.clear()
        if self.store is not None:
            self.store.drop(record.id)
            for name in record.inputs:
                self._journals.pop((record.id, name), None)
        self._dropped[record.id] = record.tenant
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

    def input_process(self, dataflow_id: str, name: str) -> int | None:
        """The process whose worker holds input ``name`` of a dataflow, if another one.

        ``None`` when this process holds it, or the dataflow has no such input (this process
        answers for it then). The owner is the same on every process: a stable hash of the
        input's name picks one of the cluster's workers.
        """
        if self.processes == 1 or self.fabric is None:
            return None
        record = self.dataflows.get(dataflow_id)
        node = record.plan.spec.nodes.get(name) if record is not None else None
        if node is None or node.op != "input":  # every push asks: no walk over the nodes
            return None
        process = (stable_hash(name) % self.fabric.peers) // self.settings.workers
        return None if process == self.process else process

    def output(self, tenant: str, dataflow_id: str, name: str) -> OutputLog:
        """A dataflow's output log."""
        record = self.get(tenant, dataflow_id)
        log = record.outputs.get(name)
        if log is None:
            raise NotFound(f"dataflow {dataflow_id!r} has no output {name!r}")
        return log

    def commit_consumer(
        self, tenant: str, dataflow_id: str, name: str, consumer: str, committed: Hashable | None
    ) -> ConsumerView:
        """Register a reader of an output and what it has read (stored before it counts).

        In a cluster the commit is applied here at once and sent to the other processes
        through the sequencer, so each output's readers, and what it may forget, are the
        same on every process.
        """
        log_ = self.output(tenant, dataflow_id, name)
        if self.store is not None:
            # Stored first: a commit that is not durable must not let the output forget.
            after = log_.committed_after(consumer, committed)
            try:
                self.store.catalogue.commit_consumer(dataflow_id, name, consumer, after)
            except OSError as error:
                raise self.store.refused(error, "the commit cannot be stored") from None
        view = log_.commit(consumer, committed)
        self._tell_consumer(dataflow_id, (name, consumer, True, view.committed))
        return view

    def forget_consumer(self, tenant: str, dataflow_id: str, name: str, consumer: str) -> bool:
        """Unregister a reader of an output; whether it was registered."""
        log_ = self.output(tenant, dataflow_id, name)
        if consumer not in log_.consumers:
            return False
        if self.store is not None:
            try:
                self.store.catalogue.forget_consumer(dataflow_id, name, consumer)
            except OSError as error:
                raise self.store.refused(error, "the consumer cannot be forgotten") from None
        self._tell_consumer(dataflow_id, (name, consumer, False, None))
        return log_.forget_consumer(consumer)

    def _tell_consumer(self, dataflow_id: str, change: tuple[str, str, bool, Any]) -> None:
        """In a cluster, send a consumer's commit (or its end) to the other processes."""
        record = self.dataflows.get(dataflow_id)
        if self.processes > 1 and record is not None:
            self._sequencers[0].push(
                ("consumer", dataflow_id, record.index, (*change, self.process))
            )

    def _consumer_elsewhere(
        self, dataflow_id: str, payload: tuple[str, str, bool, Any, int]
    ) -> None:
        """Apply a consumer's commit (or its end) made at another process, and store it."""
        name, consumer, registered, committed, origin = payload
        record = self.dataflows.get(dataflow_id)
        log_ = record.outputs.get(name) if record is not None else None
        if origin == self.process or log_ is None:
            return
        if self.store is not None:
            if registered:
                self.store.catalogue.commit_consumer(dataflow_id, name, consumer, committed)
            else:
                self.store.catalogue.forget_consumer(dataflow_id, name, consumer)
        if registered:
            log_.commit(consumer, committed)
        else:
            log_.forget_consumer(consumer)

    def store_stats(self) -> StoreStats | None:
        """What the metrics show of the data directory (``None`` without one)."""
        store = self.store
        if store is None:
            return None
        committer = store.committer
        return StoreStats(
            store.log_bytes,
            committer.syncs,
            committer.sync_seconds,
            committer.last_sync_seconds,
            self.recovery_seconds,
            self.replayed.records,
        )

    def subscribe(
        self, tenant: str, dataflow_id: str, name: str, frontier: Sequence[Hashable] | None
    ) -> Subscriber:
        """A new subscriber to an output's events, from ``frontier`` (a resume point) on.

        :class:`~service.app.errors.BadRequest` for a time of another domain,
        :class:`Gone` for one already forgotten, :class:`LimitExceeded` past
        ``max_subscribers_per_dataflow``. End it with :meth:`Subscriber.leave`.
        """
        log = self.output(tenant, dataflow_id, name)
        log.check_start(frontier or ())
        record = self.dataflows[dataflow_id]
        subscribers = sum(len(output.subscribers) for output in record.outputs.values())
        if subscribers >= self.limits.max_subscribers_per_dataflow:
            raise LimitExceeded(
                f"dataflow {record.id!r} has {subscribers} output subscribers, the limit "
                "(max_subscribers_per_dataflow)"
            )
        return log.subscribe(
            limit=self.limits.subscriber_queue_events,
            frontier=frontier,
            limit_bytes=self.limits.subscriber_queue_bytes,
        )

    # ----------------------------------------------------------------- descriptions

    def describe(
        self,
        record: DataflowRecord,
        operators: bool = True,
        elsewhere: Mapping[str, InputView] | None = None,
    ) -> DataflowView:
        """The dataflow in full, with frontiers and record counts.

        Its graph, status, inputs and outputs with their frontiers, and (optionally) every
        operator's output frontiers and record counts. ``elsewhere`` is, in a cluster, the
        inputs other processes hold, as they describe them.
        """
        inputs = {
            name: InputState(p.applied_frontier(), len(p.sessions), p.records_in, p.closed)
            for name, p in record.inputs.items()
        }
        for name, view in (elsewhere or {}).items():
            inputs[name] = InputState(
                view.frontier, len(view.sessions), view.records_in, view.closed
            )
        order = record.plan.spec.inputs()
        return DataflowView(
            record.id,
            record.name,
            record.status,
            record.created_at,
            record.graph,
            record.error,
            {name: inputs[name] for name in order if name in inputs},
            {
                name: OutputState(list(log.frontier()), log.records_out)
                for name, log in record.outputs.items()
            },
            {
                node: RecordErrors(n, record.plan.errors.last.get(node))
                for node, n in record.plan.errors.counts.items()
            },
            self.operator_frontiers(record) if operators else None,
        )

    def operator_frontiers(self, record: DataflowRecord) -> dict[str, OperatorState]:
        """Per node: the frontier at each output port, and the records sent on it (all workers).

        Frontiers are the same on every worker (each tracks all of them); records are summed.
        """
        first = record.built.get(self._workers[0].index)
        if first is None:
            return {}
        result: dict[str, OperatorState] = {}
        for node, streams in first.streams.items():
            outputs = []
            for port, stream in enumerate(streams):
                sent = 0
                for built in record.built.values():
                    mine = built.streams[node][port]
                    child = mine.scope.builder.child(mine.source.node)
                    ports = getattr(child, "output_ports", None)
                    if ports:
                        sent += ports[mine.source.port].records_out
                outputs.append(PortState(_operator_frontier(stream), sent))
            result[node] = OperatorState(outputs)
        return result

    def explain(
        self,
        tenant: str,
        dataflow_id: str,
        location: str,
        time: Any,
        elsewhere: Mapping[str, InputView] | None = None,
    ) -> ExplainView:
        """Why ``time`` is not complete at ``location`` of a dataflow (or that it is).

        ``time`` is as decoded from the request (an int or nested lists), or its text when it
        was not even that; ``location`` is ``node:port`` (an output port) or an output's name.
        ``elsewhere`` is, in a cluster, the inputs other processes hold, as they describe
        them (so their sessions are named too). :class:`NotFound` for another location
        (naming the dataflow's), :class:`Invalid` for a time of another domain, :class:`Gone`
        for a dataflow that failed or was dropped.
        """
        record = self.get(tenant, dataflow_id)
        if record.status in ("failed", "dropped") or not record.built:
            raise Gone(f"dataflow {dataflow_id!r} is {record.status}: nothing runs to explain")
        # Any worker's trackers count every worker's pointstamps: this process's first.
        built = record.built[min(record.built)]
        inputs = {name: producer.view() for name, producer in record.inputs.items()}
        inputs.update(elsewhere or {})
        return Explainer(record.id, record.plan, built, inputs).explain(location, time)

    def stats(self, tenant: str | None = None) -> list[DataflowStats]:
        """What the metrics show of every dataflow (of ``tenant``, if given)."""
        result: list[DataflowStats] = []
        for record in self.dataflows.values():
            if tenant is not None and record.tenant != tenant:
                continue
            least = [
                t for p in record.inputs.values() for t in p.applied_frontier() if type(t) is int
            ]
            outputs: dict[str, OutputStats] = {}
            for name, log in record.outputs.items():
                frontier = [t for t in log.frontier() if type(t) is int]
                lag = max(0, min(least) - min(frontier)) if frontier and least else None
                outputs[name] = OutputStats(
                    log.records_out,
                    lag,
                    len(log.subscribers),
                    sum(len(s.queue) for s in log.subscribers),
                )
            records_in = {name: p.records_in for name, p in record.inputs.items()}
            result.append(DataflowStats(record.id, record.status, records_in, outputs))
        return result

    # ----------------------------------------------------------------- frontiers

    def frontiers(self, record: DataflowRecord, operators: bool = False) -> dict[str, list[Any]]:
        """The current frontier of each input and output (and operator output, on request).

        Only frontiers: unlike :meth:`operator_frontiers`, no record counts.
        """
        result: dict[str, list[Any]] = {}
        first = record.built.get(self._workers[0].index)
        if self.processes == 1:
            for name, producer in record.inputs.items():
                result[f"input:{name}"] = producer.applied_frontier()
        elif first is not None:
            # An input lives on one process: every process reads its frontier off the
            # progress all of them track, so each shows the same frontiers.
            for name in record.plan.spec.inputs():
                result[f"input:{name}"] = _operator_frontier(first.streams[name][0])
        for name, log in record.outputs.items():
            result[f"output:{name}"] = sorted_times(log.frontier())
        if operators and first is not None:
            for node, streams in first.streams.items():
                for port, stream in enumerate(streams):
                    result[f"operator:{node}:{port}"] = _operator_frontier(stream)
        return result

    def watch(self, tenant: str, dataflow_id: str, operators: bool = False) -> FrontierWatch:
        """Follow a dataflow's frontiers; the watch coalesces to the latest per location.

        The watch starts with the current frontiers. It is read with
        :meth:`FrontierWatch.take`, or given a :class:`FrontierSink` with
        :meth:`FrontierWatch.attach`, to which every change is then written as it happens.
        """
        record = self.get(tenant, dataflow_id)
        feed = self.feeds.feed(record.id)
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
        """Stop a frontier watch (nothing more is written to its sink).

        A dataflow whose feed has no watch left costs nothing when its frontiers move; the
        feed itself goes with the dataflow.
        """
        self.feeds.unwatch(watch)

    @property
    def frontier_watchers(self) -> dict[str, FrontierFeed]:
        """Each watched dataflow's feed."""
        return self.feeds.by_dataflow

    def _busy(self) -> bool:
        return any(worker.busy for worker in self._workers)


def _operator_frontier(stream: Stream) -> list[Hashable]:
    subgraph = stream.scope.builder.subgraph
    return [] if subgraph is None else sorted_times(subgraph.frontier(stream.source))


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
