"""The dataflow manager: the facade over a server's dataflows.

It makes, from its settings, the server's :class:`~service.app.journal.Journal` (a data
directory's, or none), its :class:`~service.app.placement.Placement` (one process, or a
cluster), the :class:`~service.app.registry.Dataflows` with their command plane (the
workers, and the one order every worker applies commands in), and the
:class:`~service.app.runner.Runner` that starts, recovers and stops them. Then it creates,
drops and looks up dataflows; each :class:`~service.app.dataflow.Dataflow` does the rest.

What the manager answers is typed (:mod:`service.app.views`); it writes no wire format. The
frontier events its watches send are encoded by the codec the API hands it.
"""

from __future__ import annotations

import asyncio
import time as wallclock
import uuid
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from operators.graph import GraphSpec, Plan
from service.app import describe as describing
from service.app.dataflow import Dataflow, Identity
from service.app.errors import Gone, LimitExceeded
from service.app.explain import ExplainView
from service.app.frontiers import Feeds, FrontierCodec, FrontierFeed, FrontierWatch
from service.app.inputs import ProducerInput
from service.app.journal import journal_for
from service.app.outputs import OutputLog, Sizer
from service.app.pace import LoopLag
from service.app.placement import place_inputs, placement_for
from service.app.recovery import payload_of
from service.app.registry import Dataflows
from service.app.runner import Runner
from service.app.settings import Settings
from service.app.subscribers import Subscriber
from service.app.views import (
    ConsumerView,
    DataflowPage,
    DataflowStats,
    DataflowView,
    InputView,
    LiveStats,
    StoreStats,
)


class DataflowManager:
    """Runs the workers and every dataflow of the service.

    ``frontier_codec`` encodes a location's frontier as the event frontier watches are
    sent (the API's wire format); watches read with :meth:`FrontierWatch.take` need none.
    ``record_sizer`` gives a batch of output records' encoded size, which the byte limits
    of outputs' retention and subscribers' queues count (without one, only their limits in
    records and events hold).

    With a ``data_dir`` every dataflow, every operation on its inputs and every consumer's
    commit is stored, and :meth:`start` recovers what the directory holds: until that is
    done, :attr:`ready` is false.
    """

    def __init__(
        self,
        settings: Settings,
        frontier_codec: FrontierCodec | None = None,
        record_sizer: Sizer | None = None,
    ) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.feeds = Feeds(frontier_codec, lambda: self.plane.busy)
        self.journal = journal_for(settings, lambda error: self.runner.store_failed(error))
        self.placement = placement_for(settings)
        self.registry = Dataflows(
            self.limits,
            self.journal,
            self.placement,
            self.feeds,
            record_sizer,
            lambda error: self.runner.engine_failed(error),
        )
        self.plane = self.registry.plane
        self.runner = Runner(settings, self.journal, self.placement, self.registry)

    # ----------------------------------------------------------------- running

    async def start(self) -> None:
        """Start the workers and recover what the data directory holds (see :class:`Runner`)."""
        await self.runner.start()

    async def stop(self) -> None:
        """Stop the workers; every subscriber is closed with "going away"."""
        self.closing()
        await self.runner.stop()

    def closing(self) -> None:
        """Stop taking work: close every subscriber and watch with "going away".

        Called first on shutdown, so that socket handlers can send their final events (with
        resume points) before the sockets close.
        """
        self.runner.stopping = True
        for dataflow in self.dataflows.values():
            dataflow.closing()

    @property
    def running(self) -> bool:
        """Whether the workers are running."""
        return self.runner.running

    @property
    def loop_lag(self) -> LoopLag:
        """How late the event loop runs: the last second's worst lateness, and stalls."""
        return self.runner.loop_lag

    @property
    def ready(self) -> bool:
        """Whether what the data directory held is recovered (the service takes requests)."""
        return self.runner.ready

    @property
    def fatal(self) -> asyncio.Event | None:
        """Set once this process must stop and exit non-zero (see :class:`Runner`)."""
        return self.runner.fatal

    @property
    def left(self) -> asyncio.Event:
        """Set when another process of the cluster stopped on purpose: this one stops too."""
        return self.runner.left

    @property
    def left_by(self) -> str | None:
        """Which process left (``process 1 (host:port)``)."""
        return self.runner.left_by

    @property
    def failure(self) -> str | None:
        """Why the workers stopped, if an error stopped them (else ``None``)."""
        return self.runner.failure

    def check_ready(self) -> None:
        """:class:`Unavailable` while the service recovers, or once its cluster failed."""
        self.runner.check_ready()

    def write_problem(self) -> str | None:
        """Why writes are refused now (a full disk, say), or ``None``: checked afresh."""
        return self.journal.write_problem()

    async def expire_transactions(self, now: float | None = None) -> int:
        """Expire every transaction due at ``now`` (default: the wall clock); how many."""
        return await self.runner.expire_transactions(now)

    def store_stats(self) -> StoreStats | None:
        """What the metrics show of the data directory (``None`` without one)."""
        return self.runner.store_stats()

    @property
    def process(self) -> int:
        """This process's index in its cluster (0 alone)."""
        return self.placement.process

    # ----------------------------------------------------------------- dataflows

    @property
    def dataflows(self) -> dict[str, Dataflow]:
        """Every dataflow this process knows, by id."""
        return self.registry.by_id

    def compile(self, graph: GraphSpec | Mapping[str, Any]) -> Plan:
        """Check and compile a graph (see :func:`~service.app.registry.compile_plan`)."""
        return self.registry.compile(graph)

    def plan(self, graph: GraphSpec | Mapping[str, Any]) -> dict[str, Any]:
        """What creating ``graph`` would build (a dry run); :class:`Invalid` if it cannot."""
        return self.compile(graph).describe()

    async def create(
        self, tenant: str, graph: GraphSpec | Mapping[str, Any], name: str | None = None
    ) -> Dataflow:
        """Check, compile and build a graph on every worker (stored first, with a journal).

        ``graph`` is as :meth:`compile` takes it; a :class:`GraphSpec` must come from
        :func:`parse_graph`, which keeps the document it read: that is what is stored. The
        dataflow is named ``name``, else the graph's own ``name`` (else it has none, ``""``).
        """
        plan = self.compile(graph)
        document = plan.spec.document
        if not document:
            raise ValueError("a GraphSpec to create must come from parse_graph (with its document)")
        if not self.running:
            raise Gone("the service is not running")
        owned = self.registry.owned(tenant)
        if owned >= self.limits.max_dataflows_per_tenant:
            raise LimitExceeded(
                f"tenant {tenant!r} has {owned} dataflows, the limit (max_dataflows_per_tenant)"
            )
        holders = place_inputs(plan.spec.inputs(), self._held())
        if not name and isinstance(document.get("name"), str):
            name = document["name"]
        identity = Identity(uuid.uuid4().hex, tenant, name or "", document, holders=holders)
        self.journal.add_dataflow(
            identity.id, tenant, identity.name, document, identity.created_at, holders
        )
        dataflow = self.registry.add(identity, plan)
        try:
            await self.plane.issue("create", dataflow.id, dataflow.index, payload_of(dataflow))
        except BaseException:
            self.journal.drop(dataflow.id)
            raise
        return dataflow

    def _held(self) -> list[int]:
        """How many inputs of live dataflows each process holds (as this process knows)."""
        held = [0] * self.placement.processes
        for dataflow in self.dataflows.values():
            if dataflow.status in ("failed", "dropped"):
                continue
            for process in dataflow.holders.values():
                if process < len(held):
                    held[process] += 1
        return held

    def get(self, tenant: str, dataflow_id: str) -> Dataflow:
        """The tenant's dataflow, or :class:`NotFound` (also for other tenants' dataflows)."""
        return self.registry.get(tenant, dataflow_id)

    def listing(self, tenant: str) -> list[Dataflow]:
        """The tenant's dataflows, oldest first."""
        return self.registry.listing(tenant)

    def page(
        self, tenant: str, after: tuple[float, str] | None, limit: int, name: str | None = None
    ) -> DataflowPage:
        """Up to ``limit`` of the tenant's dataflows created after ``after`` (creation, id).

        With ``name``, only the dataflows of that name (exactly).
        """
        return self.registry.page(tenant, after, limit, name)

    async def drop(self, tenant: str, dataflow_id: str) -> None:
        """Stop a dataflow everywhere; subscribers get a final event, producers get 410.

        Everything the service held for it goes: its record, watches, logs and consumers;
        the engine releases its operators and channels on every worker.
        """
        dataflow = self.get(tenant, dataflow_id)
        if dataflow.status == "dropped":
            raise Gone(f"dataflow {dataflow_id!r} was already dropped")
        dataflow.stop_inputs()
        # A failed dataflow is dropped on the workers already: every process forgets it.
        kind = "drop" if dataflow.status != "failed" else "forget"
        await self.plane.issue(kind, dataflow.id, dataflow.index)

    # ----------------------------------------------------------------- one dataflow's parts

    def input(self, tenant: str, dataflow_id: str, name: str) -> ProducerInput:
        """A dataflow's input (on its owner worker)."""
        return self.get(tenant, dataflow_id).input(name)

    def input_process(self, dataflow_id: str, name: str) -> int | None:
        """The process holding input ``name`` of a dataflow if another one (else ``None``)."""
        dataflow = self.dataflows.get(dataflow_id)
        if dataflow is None or not dataflow.holds_input(name):
            return None  # this process answers for it
        return self.placement.input_process(dataflow.holder(name))

    def output(self, tenant: str, dataflow_id: str, name: str) -> OutputLog:
        """A dataflow's output log."""
        return self.get(tenant, dataflow_id).output(name)

    def commit_consumer(
        self, tenant: str, dataflow_id: str, name: str, consumer: str, committed: Hashable | None
    ) -> ConsumerView:
        """Register a reader of an output and what it has read (stored before it counts)."""
        return self.get(tenant, dataflow_id).commit_consumer(name, consumer, committed)

    def forget_consumer(self, tenant: str, dataflow_id: str, name: str, consumer: str) -> bool:
        """Unregister a reader of an output; whether it was registered."""
        return self.get(tenant, dataflow_id).forget_consumer(name, consumer)

    def subscribe(
        self, tenant: str, dataflow_id: str, name: str, frontier: Sequence[Hashable] | None
    ) -> Subscriber:
        """A new subscriber to an output's events (see :meth:`Dataflow.subscribe`)."""
        return self.get(tenant, dataflow_id).subscribe(name, frontier)

    def describe(
        self,
        dataflow: Dataflow,
        operators: bool = True,
        elsewhere: Mapping[str, InputView] | None = None,
    ) -> DataflowView:
        """The dataflow in full (see :func:`service.app.describe.describe`)."""
        return describing.describe(dataflow, operators, elsewhere)

    def explain(
        self,
        tenant: str,
        dataflow_id: str,
        location: str,
        time: Any,
        elsewhere: Mapping[str, InputView] | None = None,
    ) -> ExplainView:
        """Why ``time`` is not complete at ``location`` (see :func:`describe.explain`)."""
        return describing.explain(self.get(tenant, dataflow_id), location, time, elsewhere)

    def follow_stats(self, tenant: str, dataflow_id: str) -> Dataflow:
        """Open a stats subscription to a dataflow (see :meth:`Dataflow.follow_stats`)."""
        dataflow = self.get(tenant, dataflow_id)
        dataflow.follow_stats()
        return dataflow

    def live(
        self,
        tenant: str,
        dataflow_id: str,
        after: int,
        elsewhere: Mapping[str, InputView] | None = None,
    ) -> LiveStats:
        """A dataflow's state now and its pace's samples after ``after`` (a stats socket's)."""
        dataflow = self.get(tenant, dataflow_id)
        return describing.live(dataflow, after, self.loop_lag, wallclock.time(), elsewhere)

    def stats(self, tenant: str | None = None) -> list[DataflowStats]:
        """What the metrics show of every dataflow (of ``tenant``, if given)."""
        dataflows = self.dataflows.values()
        return [describing.stats(d) for d in dataflows if tenant in (None, d.tenant)]

    def frontiers(self, dataflow: Dataflow, operators: bool = False) -> dict[str, list[Any]]:
        """The current frontier of each input and output (and operator output, on request)."""
        return describing.frontiers(dataflow, operators)

    def watch(self, tenant: str, dataflow_id: str, operators: bool = False) -> FrontierWatch:
        """Follow a dataflow's frontiers (see :meth:`Dataflow.watch`)."""
        dataflow = self.get(tenant, dataflow_id)
        now = self.frontiers(dataflow, operators or dataflow.operator_watches > 0)
        return dataflow.watch(operators, now)

    def unwatch(self, watch: FrontierWatch) -> None:
        """Stop a frontier watch (nothing more is written to its sink)."""
        self.feeds.unwatch(watch)

    @property
    def frontier_watchers(self) -> dict[str, FrontierFeed]:
        """Each watched dataflow's feed."""
        return self.feeds.by_dataflow
