"""One dataflow of the service: its build on every worker, its inputs and outputs, its feeds.

A :class:`Dataflow` is made from a compiled graph and the :class:`Environment` it runs in
(the server's journal, placement, command plane and frontier feeds), given at
construction. Each worker builds it when the command plane says so; the input that lives
on a worker of this process becomes a :class:`~service.app.inputs.ProducerInput`, and each
output is captured into one :class:`~service.app.outputs.OutputLog`. The engine, the inputs
and the outputs tell it what moved (it is their listener); it publishes frontiers, finds
when it completed, and cuts the inputs' logs once every output forgot their times.

What it answers of itself (its description, frontiers and figures) is in
:mod:`service.app.describe`.
"""

from __future__ import annotations

import asyncio
import time as wallclock
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators import Capability, OutputPort, Stream, Worker
from operators.graph import BuiltGraph, Plan
from operators.progress import Antichain, Source
from service.app.commands import CommandPlane
from service.app.errors import Gone, LimitExceeded, NotFound
from service.app.frontiers import Feeds, FrontierWatch
from service.app.inputs import ProducerInput, producer_input
from service.app.journal import Journal
from service.app.outputs import OutputLog, Sizer, sorted_times
from service.app.pace import Pace, Sample
from service.app.placement import Placement
from service.app.schemas import output_schema
from service.app.settings import Limits
from service.app.subscribers import Subscriber
from service.app.views import ConsumerView, DataflowSummary


@dataclass(frozen=True, slots=True)
class Environment:
    """What every dataflow of a server runs in, given to each when it is made."""

    limits: Limits
    journal: Journal
    placement: Placement
    plane: CommandPlane
    feeds: Feeds
    sizer: Sizer | None = None
    """Gives a batch of output records' encoded size (what byte limits count)."""


@dataclass(slots=True)
class Identity:
    """Who a dataflow is: its id, owner, name, graph (as submitted), creation time, holders."""

    id: str
    tenant: str
    name: str
    graph: dict[str, Any]
    created_at: float = field(default_factory=wallclock.time)
    holders: dict[str, int] = field(default_factory=dict)
    """Which process holds each input (an input not named here: process 0)."""


def summary_of(identity: Identity, plan: Plan, status: str = "running") -> DataflowSummary:
    """A dataflow's short description, for listings."""
    return DataflowSummary(
        identity.id,
        identity.name,
        status,
        identity.created_at,
        list(plan.spec.inputs()),
        list(plan.spec.outputs()),
    )


class Dataflow:
    """One dataflow: its plan, its state, and what every local worker built of it."""

    def __init__(self, identity: Identity, plan: Plan, env: Environment) -> None:
        self.identity = identity
        self.id = identity.id
        self.tenant = identity.tenant
        self.name = identity.name
        self.graph = identity.graph
        self.created_at = identity.created_at
        self.plan = plan
        self.env = env
        self.index = -1
        """The dataflow's index on every worker (they build in the same order)."""
        self.status = "creating"
        self.error: str | None = None
        self.inputs: dict[str, ProducerInput] = {}
        self.outputs: dict[str, OutputLog] = {}
        self.built: dict[int, BuiltGraph] = {}
        """What each local worker built (the first's is read for operators' frontiers)."""
        self.truncated_before = 0
        """Its inputs' logs hold no record at a time before this one."""
        self._truncation_due = False
        self._locations: dict[tuple[tuple[int, ...], Source], _Location] = {}
        """The operator output ports the engine reports on, by scope path and source."""
        self.pace = Pace()
        """Its throughput and completion latency over the last minutes (sampled each second
        by the runner)."""
        self.stats_subscribers = 0
        """Open stats subscriptions (each reads it once an interval)."""

    def summary(self) -> DataflowSummary:
        """A short description for listings."""
        return summary_of(self.identity, self.plan, self.status)

    @property
    def first(self) -> BuiltGraph | None:
        """What this process's first worker built (``None`` before it did)."""
        return self.built.get(self.env.plane.workers[0].index)

    # ----------------------------------------------------------------- building

    def build(self, worker: Worker) -> None:
        """Build the dataflow on ``worker`` (every worker, in the command plane's order)."""
        plan = self.plan

        first = worker is self.env.plane.workers[0]

        def build(scope: Any) -> BuiltGraph:
            self.index = scope.builder.path[0]
            built = plan.build(scope, _Context(self, worker))
            if first:
                self._name_locations(built)
            return built

        self.built[worker.index] = worker.dataflow(
            build,
            domain=plan.spec.time.domain(),
            on_error=self.fail,
            # One worker's trackers follow every worker's progress: the first's are heard.
            on_frontier=self._engine_moved if first else None,
        )

    def add_input(self, name: str, output: OutputPort, capability: Capability) -> ProducerInput:
        """The input ``name`` lives on a worker of this process: its producers come here."""
        index = list(self.plan.spec.inputs()).index(name)
        journal = self.env.journal.input(self.id, index, name)
        schema = self.plan.spec.nodes[name].schema
        producer = ProducerInput(name, output, capability, self.env.limits, journal, self, schema)
        self.inputs[name] = producer
        return producer

    def add_output(self, name: str) -> OutputLog:
        """The log every local worker captures output ``name`` into (made by the first)."""
        limits = self.env.limits
        log = self.outputs[name] = OutputLog(
            name,
            self.plan.minimum(),
            len(self.env.plane.workers),
            limits.output_retention_records,
            limits.output_retention_bytes,
            self.env.sizer,
            self,
            output_schema(self.plan, name),
        )
        self.pace.add_output(name)
        return log

    def _name_locations(self, built: BuiltGraph) -> None:
        """Name every operator output port (and input) the engine may say moved."""
        for node, streams in built.streams.items():
            is_input = self.plan.spec.nodes[node].op == "input"
            for port, stream in enumerate(streams):
                builder = stream.scope.builder
                self._locations[(builder.path, stream.source)] = _Location(
                    f"operator:{node}:{port}", builder, node if is_input else None
                )

    def _engine_moved(self, path: tuple[int, ...], source: Source) -> None:
        """The engine says the frontier at ``source`` of the scope at ``path`` may have moved."""
        feeds = self.env.feeds
        feed = feeds.by_dataflow.get(self.id)
        location = self._locations.get((path, source))
        if feed is None or location is None:
            return
        if feed.operator_watches:
            builder = location.builder
            read = lambda: sorted_times(builder.subgraph.frontier(source))  # noqa: E731
            feeds.moved(self.id, location.name, read)
        node = location.input
        if node is not None:
            feeds.moved(self.id, f"input:{node}", lambda: self.input_frontier(node))

    # ----------------------------------------------------------------- listening

    def input_moved(self, name: str) -> None:
        """An input's own capability moved (its producers did something)."""
        self.env.feeds.moved(self.id, f"input:{name}", lambda: self.input_frontier(name))

    def records_arrived(self, name: str, times: Iterable[Hashable]) -> None:
        """Records entered through input ``name``: their times' latencies are followed."""
        self.pace.arrived(times)

    def input_frontier(self, name: str) -> list[Hashable]:
        """An input's frontier, wherever the placement reads it."""
        first = self.first
        producer = self.inputs.get(name)
        if first is None:
            return [] if producer is None else producer.applied_frontier()
        return self.env.placement.input_frontier(producer, first.streams[name][0])

    def output_moved(self, name: str, frontier: Antichain[Hashable]) -> None:
        """An output's merged frontier moved."""
        log = self.outputs[name]
        self.env.feeds.moved(self.id, f"output:{name}", lambda: sorted_times(log.frontier()))
        self.pace.output_moved(name, frontier.elements())
        if frontier.is_empty():
            self.maybe_completed()

    def output_evicted(self, name: str) -> None:
        """An output forgot completed times: the inputs' logs may be cut below them soon."""
        if not self.plan.spans_times() and not self._truncation_due:
            self._truncation_due = True
            asyncio.get_running_loop().call_soon(self._truncate)

    def _truncate(self) -> None:
        """Cut the inputs' logs below the times every output has forgotten.

        Integer times only, and only for a dataflow whose operators make output at the
        times of their input (none declares ``spans_times``): an output time then needs
        input at that time alone to be computed again.
        """
        self._truncation_due = False
        if self.status not in ("running", "completed") or not self.outputs:
            return
        before = None
        for log in self.outputs.values():
            forgotten = [t for t in log.evicted if type(t) is int]
            if len(forgotten) != len(log.evicted):
                return  # product times: the logs are kept whole
            cut = max(forgotten) + 1 if forgotten else 0
            before = cut if before is None else min(before, cut)
        if before is None or before <= self.truncated_before:
            return
        if self.env.journal.truncate(self.id, before):
            self.truncated_before = before

    def sample(self, at: float, seconds: float, loop_lag: float) -> Sample:
        """Close one interval of its :attr:`pace` (``seconds`` long, ending ``at``)."""
        return self.pace.sample(
            at,
            seconds,
            {name: producer.records_in for name, producer in self.inputs.items()},
            {name: log.records_out for name, log in self.outputs.items()},
            loop_lag,
        )

    # ----------------------------------------------------------------- lifecycle

    def started(self) -> None:
        """Every worker everywhere built it: it runs (or completed already)."""
        if self.status == "creating":
            self.status = "running"
            if self.outputs:
                self.maybe_completed()

    def maybe_completed(self) -> None:
        """A running dataflow whose every output's frontier is empty completed."""
        if self.status == "running" and all(
            log.frontier().is_empty() for log in self.outputs.values()
        ):
            self.status = "completed"

    def fail(self, error: Exception) -> None:
        """The engine raised while running it: it fails, and every worker drops it."""
        if self.status in ("failed", "dropped"):
            return
        reason = f"{type(error).__name__}: {error}"
        self.mark_failed(reason)
        # Every worker must drop it, at the same point in the command order; in a cluster
        # the reason travels with the command, so every process shows it failed, and why.
        self.env.plane.push(("drop", self.id, self.index, reason))

    def mark_failed(self, reason: str) -> None:
        """It failed (here or on another process): kept so, until it is dropped."""
        self.status = "failed"
        self.error = reason
        self.env.journal.failed(self.id, reason)
        for producer in self.inputs.values():
            producer.dropped = True
        for log in self.outputs.values():
            log.close(f"the dataflow failed: {reason}")
        self.env.feeds.close(self.id, f"the dataflow failed: {reason}")

    def stop_inputs(self) -> None:
        """Producers get 410 from now on (it is being dropped)."""
        for producer in self.inputs.values():
            producer.dropped = True

    def forget(self) -> None:
        """Everything this process held for it goes: watches, logs, what the workers built."""
        self.status = "dropped"
        for log in self.outputs.values():
            log.close("the dataflow was dropped")
        self.env.feeds.close(self.id, "the dataflow was dropped")
        self.built.clear()
        self.env.journal.drop(self.id)
        self.env.plane.forget(self.id)

    def closing(self) -> None:
        """The service stops: every subscriber and watch is told "going away"."""
        for log in self.outputs.values():
            log.close("going away: the service is stopping")
        for watch in self.env.feeds.by_dataflow.get(self.id, []):
            watch.close("going away: the service is stopping")

    # ----------------------------------------------------------------- producers, readers

    def input(self, name: str) -> ProducerInput:
        """Its input ``name`` (on this process); :class:`Gone` once it failed or was dropped."""
        if self.status in ("failed", "dropped"):
            raise Gone(f"dataflow {self.id!r} is {self.status}")
        producer = self.inputs.get(name)
        if producer is None:
            raise NotFound(f"dataflow {self.id!r} has no input {name!r}")
        return producer

    @property
    def holders(self) -> dict[str, int]:
        """Which process holds each input."""
        return self.identity.holders

    def holder(self, name: str) -> int:
        """The process holding input ``name``."""
        return self.identity.holders.get(name, 0)

    def holds_input(self, name: str) -> bool:
        """Whether ``name`` is an input of the graph (no walk over the nodes)."""
        node = self.plan.spec.nodes.get(name)
        return node is not None and node.op == "input"

    def output(self, name: str) -> OutputLog:
        """Its output ``name``."""
        log = self.outputs.get(name)
        if log is None:
            raise NotFound(f"dataflow {self.id!r} has no output {name!r}")
        return log

    def subscribe(self, name: str, frontier: Sequence[Hashable] | None) -> Subscriber:
        """A new subscriber to an output's events, from ``frontier`` (a resume point) on.

        :class:`~service.app.errors.BadRequest` for a time of another domain,
        :class:`Gone` for one already forgotten, :class:`LimitExceeded` past
        ``max_subscribers_per_dataflow``. End it with :meth:`Subscriber.leave`.
        """
        log = self.output(name)
        log.check_start(frontier or ())
        limits = self.env.limits
        self._room("output", sum(len(output.subscribers) for output in self.outputs.values()))
        return log.subscribe(
            limit=limits.subscriber_queue_events,
            frontier=frontier,
            limit_bytes=limits.subscriber_queue_bytes,
        )

    def watch(self, operators: bool, frontiers: dict[str, list[Any]]) -> FrontierWatch:
        """A new watch of its frontiers, starting from ``frontiers`` (what they are now).

        The watch coalesces to the latest frontier per location. It is read with
        :meth:`FrontierWatch.take`, or given a :class:`FrontierSink` with
        :meth:`FrontierWatch.attach`, to which every change is then written as it happens.
        A dataflow whose feed has no watch left costs nothing when its frontiers move.
        """
        feeds = self.env.feeds
        feed = feeds.feed(self.id)
        self._room("frontier", len(feed))
        # Bring the feed up to date first (existing watches get any change as usual), so
        # the new watch starts from the frontiers as they are now.
        feed.publish(frontiers)
        watch = FrontierWatch(feed, operators)
        feed.append(watch)
        if operators:
            feed.operator_watches += 1
        if self.status == "failed":
            watch.close(f"the dataflow failed: {self.error}")
        return watch

    def follow_stats(self) -> None:
        """A stats subscription opens (:class:`LimitExceeded` past the limit).

        At most ``max_subscribers_per_dataflow``; end it with :meth:`unfollow_stats`.
        """
        self._room("stats", self.stats_subscribers)
        self.stats_subscribers += 1

    def unfollow_stats(self) -> None:
        """A stats subscription ended."""
        self.stats_subscribers -= 1

    def _room(self, kind: str, count: int) -> None:
        """:class:`LimitExceeded` if ``count`` subscribers of a ``kind`` are the limit."""
        if count >= self.env.limits.max_subscribers_per_dataflow:
            raise LimitExceeded(
                f"dataflow {self.id!r} has {count} {kind} subscribers, the limit "
                "(max_subscribers_per_dataflow)"
            )

    @property
    def operator_watches(self) -> int:
        """How many of its watches follow operators' frontiers too."""
        feed = self.env.feeds.by_dataflow.get(self.id)
        return 0 if feed is None else feed.operator_watches

    # ----------------------------------------------------------------- consumers

    def commit_consumer(self, name: str, consumer: str, committed: Hashable | None) -> ConsumerView:
        """Register a reader of an output and what it has read (kept before it counts).

        Applied here at once and told to the other processes (a cluster's), so each output's
        readers, and what it may forget, are the same on every process.
        """
        log = self.output(name)
        # Kept first: a commit that is not durable must not let the output forget.
        after = log.committed_after(consumer, committed)
        self.env.journal.commit_consumer(self.id, name, consumer, after)
        view = log.commit(consumer, committed)
        self._tell((name, consumer, True, view.committed))
        return view

    def forget_consumer(self, name: str, consumer: str) -> bool:
        """Unregister a reader of an output; whether it was registered."""
        log = self.output(name)
        if consumer not in log.consumers:
            return False
        self.env.journal.forget_consumer(self.id, name, consumer)
        self._tell((name, consumer, False, None))
        return log.forget_consumer(consumer)

    def _tell(self, change: tuple[str, str, bool, Any]) -> None:
        env = self.env
        command = ("consumer", self.id, self.index, (*change, env.placement.process))
        env.placement.tell(env.plane, command)

    def consumer_elsewhere(self, payload: tuple[str, str, bool, Any, int]) -> None:
        """Apply a consumer's commit (or its end) made at another process, and keep it."""
        name, consumer, registered, committed, origin = payload
        log = self.outputs.get(name)
        if origin == self.env.placement.process or log is None:
            return
        if registered:
            self.env.journal.commit_consumer(self.id, name, consumer, committed)
            log.commit(consumer, committed)
        else:
            self.env.journal.forget_consumer(self.id, name, consumer)
            log.forget_consumer(consumer)

    def recovered_outputs(self) -> None:
        """After a restart: what the outputs had forgotten, and their kept consumers."""
        if self.truncated_before > 0:
            # Times before it were forgotten by every output, and are not replayed.
            for log in self.outputs.values():
                log.evicted = [self.truncated_before - 1]
        for output, consumer, committed in self.env.journal.consumers(self.id):
            reader = self.outputs.get(output)
            if reader is not None:
                reader.commit(consumer, committed)


@dataclass(frozen=True, slots=True)
class _Location:
    """An output port the engine may say moved: its name, its scope, and its input node."""

    name: str
    builder: Any
    input: str | None


class _Context:
    """How a plan's inputs and outputs are made on one worker (the plan calls back)."""

    __slots__ = ("dataflow", "worker")

    def __init__(self, dataflow: Dataflow, worker: Worker) -> None:
        self.dataflow = dataflow
        self.worker = worker

    def input(self, name: str, scope: Any) -> Stream:
        """The input operator for ``name``: its producers on its holder's worker."""
        dataflow = self.dataflow
        owner = dataflow.env.placement.worker_of(dataflow.holder(name), name)
        return producer_input(
            scope, name, owner, lambda output, cap: dataflow.add_input(name, output, cap)
        )

    def output(self, name: str, stream: Stream) -> None:
        """Capture ``stream`` into output ``name``'s log (as the placement says)."""
        found = self.dataflow.outputs.get(name)
        log = self.dataflow.add_output(name) if found is None else found
        self.dataflow.env.placement.output(stream, self.worker).capture_into(log.pusher())
