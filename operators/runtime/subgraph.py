"""A scope: a dataflow of operators that presents itself to its parent as one operator.

Inside, a :class:`Subgraph` keeps a :class:`~operators.progress.Tracker` over its children and
their edges. Node 0 stands for the outside: the parent's frontier at the scope's inputs enters
as pointstamps at node 0's sources, and records leaving through the scope's outputs are
reported to the parent as produced rather than tracked inside.

Every worker builds the same scopes. Each worker's children report their progress into a
local batch that the scope *broadcasts* to every worker, itself included; each worker applies
only what comes back through that channel, so all trackers see the same updates (in
different interleavings of senders, each sender's batches in order). A consumption is always
in the same batch as the capability it grants, and a production in the same batch as the
capability that backs it, because a child's consumed, internal and produced counts are
pulled together after each of its schedules and go into one batch.

Towards its parent a scope is a *non-local* operator: the numbers it reports (records
consumed at its inputs, produced at its outputs, and changes to the frontier of capabilities
inside, projected to its outputs) are already global, so the parent applies them without
broadcasting them again.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from time import perf_counter
from typing import Protocol

from operators.progress import (
    Antichain,
    Builder,
    ChangeBatch,
    Connectivity,
    Location,
    MutableAntichain,
    Source,
    Target,
    followed_by,
    strongly_connected,
)
from operators.runtime.channels import Message, PipelinePusher, RetimingPusher, Tee
from operators.runtime.fabric import Fabric, Mailbox
from operators.runtime.operate import Interest, Operate, SharedProgress
from operators.runtime.time_domain import Refinement, TimeDomain

Update = tuple[tuple[int, Hashable], int]
"""A pointstamp change as it travels: ``((location index, time), diff)``."""

FrontierListener = Callable[[tuple[int, ...], Source], None]
"""Hears, with a scope's path, each output port whose frontier may have moved in that scope:
given to a dataflow's root scope when it is made, and to every scope nested in it."""

_MAX_PASSES = 64
"""Rounds of receive → propagate → schedule → send within one schedule of a scope.

Looping lets one step carry work through several rounds on one worker (lower latency); the
bound keeps a circulating loop from starving other workers and the event loop. So does the
worker's time slice (:attr:`Allocator.slice_deadline`): a scope stops its rounds once past it,
nested scopes included, and asks to run again, so one dataflow's loop takes turns with the
others' work and with the event loop (every tenant's requests)."""


class Allocator(Protocol):
    """What a scope needs of the worker it is built on: a :class:`~operators.runtime.Worker`.

    Its place among the workers, and channels of the fabric between them (timely's
    ``Allocate``): the scope allocates its edges and its progress channel there.
    """

    @property
    def index(self) -> int:
        """The worker's index, ``0 <= index < peers``."""
        ...

    @property
    def peers(self) -> int:
        """The number of workers."""
        ...

    @property
    def fabric(self) -> Fabric:
        """The communication between the workers."""
        ...

    def allocate_channel(self) -> int:
        """The next channel id; the same sequence on every worker."""
        ...

    @property
    def slice_deadline(self) -> float:
        """When (``perf_counter``) the dataflow being scheduled must let the others run."""
        ...


@dataclass(slots=True)
class _Child:
    """Bookkeeping of one operator inside a scope."""

    operator: Operate
    shared: SharedProgress
    local: bool
    interest: Interest
    inputs: list[int]
    """Tracker index of each input port."""
    sources: list[int]
    """Tracker index of each output port."""
    targets: list[list[int]]
    """Per output port, the tracker indexes of the input ports its edges lead to."""
    held: int
    """Capabilities this worker's copy holds (decides ``IF_CAPABILITY`` interest)."""
    alive: bool = True
    busy: float = 0.0
    """Seconds spent in the operator's ``schedule`` on this worker (a nested scope's
    include its children's): only increases."""


@dataclass(slots=True)
class _Edge:
    source: Source
    target: Target


class SubgraphBuilder:
    """A scope under construction: operators are added, then :meth:`build` runs it.

    Children are numbered from 1 in the order their indexes are reserved; 0 is the boundary.
    """

    def __init__(
        self,
        worker: Allocator,
        path: tuple[int, ...],
        domain: TimeDomain,
        refinement: Refinement,
        activate_self: Callable[[], None],
        name: str = "Subgraph",
        listener: FrontierListener | None = None,
    ) -> None:
        self.worker = worker
        self.path = path
        self.listener = listener
        """Hears which frontiers moved (from when the scope runs), so a watcher of many
        frontiers reads only those that moved instead of comparing all after every step."""
        self.domain = domain
        self.refinement = refinement
        self.name = name
        self._activate_self = activate_self
        self._children: list[Operate | SubgraphBuilder | None] = [None]
        self._edges: list[_Edge] = []
        self._input_tees: list[Tee] = []
        """Per scope input: the pushers of inner edges leaving ``Source(0, p)``."""
        self._output_tees: list[Tee] = []
        """Per scope output: the pushers of the parent's edges leaving the scope."""
        self._input_counts: list[ChangeBatch[Hashable]] = []
        self._watched: list[tuple[Source, MutableAntichain[Hashable]]] = []
        self.subgraph: Subgraph | None = None
        # Activations that arrive before ``build`` (records pushed at construction time)
        # are remembered here and replayed.
        self._early: set[int] = set()
        self._before_build: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ construction

    def reserve(self) -> int:
        """Reserve the next child index (a nested scope reserves its own at creation)."""
        self._children.append(None)
        return len(self._children) - 1

    def place(self, index: int, operator: Operate | SubgraphBuilder) -> None:
        """Install the operator for a reserved index."""
        if self._children[index] is not None:
            raise RuntimeError(f"child {index} of {self.name} is already placed")
        self._children[index] = operator

    def child(self, index: int) -> Operate | SubgraphBuilder | None:
        """The operator placed at child ``index`` (a nested scope is its builder)."""
        return self._children[index]

    def before_build(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when :meth:`build` starts, before any child is built.

        For construction left to finish until every operator of the scope is known (the
        operator layer builds fused ``map``/``filter`` chains nobody consumed there). The
        callbacks run last registered first, as ``atexit``'s do, and may add operators.
        """
        self._before_build.append(callback)

    def add_edge(self, source: Source, target: Target) -> None:
        """Record an edge for progress tracking (the data path is wired separately)."""
        self._edges.append(_Edge(source, target))

    def activator(self, child: int) -> Callable[[], None]:
        """A function that schedules ``child`` on this worker at the next opportunity."""

        def activate() -> None:
            subgraph = self.subgraph
            if subgraph is None:
                self._early.add(child)
            else:
                subgraph.activate_child(child)

        return activate

    def connect(self, source: Source, tee: Tee, target: Target) -> Mailbox[Message]:
        """Wire a pipeline edge ``source -> target`` on this worker; return its mailbox."""
        channel = self.worker.allocate_channel()
        mailbox: Mailbox[Message] = self.worker.fabric.mailbox(channel, self.worker.index)  # type: ignore[assignment]
        mailbox.attach(self.activator(target.node))
        tee.pushers.append(PipelinePusher(mailbox))
        self.add_edge(source, target)
        return mailbox

    def connect_exchange(
        self, source: Source, target: Target
    ) -> tuple[int, Mailbox[Message], list[Mailbox[Message]]]:
        """Allocate an exchange channel for ``source -> target``.

        Returns the channel id, this worker's mailbox (activating the consumer) and every
        worker's mailbox (for the sender's pusher).
        """
        channel = self.worker.allocate_channel()
        boxes: list[Mailbox[Message]] = self.worker.fabric.mailboxes(channel)  # type: ignore[assignment]
        mine = boxes[self.worker.index]
        mine.attach(self.activator(target.node))
        self.add_edge(source, target)
        return channel, mine, boxes

    def watch(self, source: Source, frontier: MutableAntichain[Hashable]) -> None:
        """Keep ``frontier`` equal to the frontier at ``source`` (from when the scope runs).

        This is how a probe sees a stream: the times that may still appear at the output
        port, with no operator, edge or scheduling of its own.
        """
        self._watched.append((source, frontier))

    def new_input(self, outer_tee: Tee, parent: SubgraphBuilder, index_in_parent: int) -> int:
        """Open a scope input fed by ``outer_tee`` in the parent; return its port number.

        Records cross by pipeline (they stay on their worker) and are re-timed to inner
        times; the scope counts them so it can report them consumed.
        """
        port = len(self._input_tees)
        inner = Tee()
        counts: ChangeBatch[Hashable] = ChangeBatch()
        self._input_tees.append(inner)
        self._input_counts.append(counts)
        activate = parent.activator(index_in_parent)

        def count(time: Hashable, n: int) -> None:
            counts.update(time, n)
            activate()

        outer_tee.pushers.append(RetimingPusher(self.refinement.to_inner, inner, count))
        return port

    def input_tee(self, port: int) -> Tee:
        """The tee inner operators attach to in order to read scope input ``port``."""
        return self._input_tees[port]

    def new_output(self) -> tuple[int, Tee]:
        """Open a scope output; return its port and the parent-side tee it feeds."""
        port = len(self._output_tees)
        tee = Tee()
        self._output_tees.append(tee)
        return port, tee

    def egress(self, port: int) -> RetimingPusher:
        """The pusher inner edges into ``Target(0, port)`` use: re-times to the outside."""
        return RetimingPusher(self.refinement.to_outer, self._output_tees[port])

    @property
    def inputs(self) -> int:
        """The number of scope inputs opened so far."""
        return len(self._input_tees)

    @property
    def outputs(self) -> int:
        """The number of scope outputs opened so far."""
        return len(self._output_tees)

    @property
    def reserved(self) -> int:
        """How many child indexes were reserved so far (0, the boundary, included)."""
        return len(self._children)

    # ------------------------------------------------------------------ build

    def build(self) -> Subgraph:
        """Finish the scope (and every scope nested in it) and return it as an operator."""
        callbacks, self._before_build = self._before_build, []
        for callback in reversed(callbacks):
            callback()
        children: list[Operate | None] = [None]
        for index, child in enumerate(self._children[1:], start=1):
            if child is None:
                raise RuntimeError(f"child {index} of {self.name} was reserved but never placed")
            children.append(child.build() if isinstance(child, SubgraphBuilder) else child)
        subgraph = Subgraph(self, children)
        self.subgraph = subgraph
        for early in sorted(self._early):
            subgraph.activate_child(early)
        self._early.clear()
        return subgraph


class Subgraph:
    """A running scope; an :class:`Operate` to its parent (see the module docstring)."""

    interest = Interest.ALWAYS

    def __init__(self, builder: SubgraphBuilder, children: list[Operate | None]) -> None:
        self.name = builder.name
        self.path = builder.path
        self.inputs = builder.inputs
        self.outputs = builder.outputs
        self._worker = builder.worker
        self._peers = builder.worker.peers
        self._domain = builder.domain
        self._refinement = builder.refinement
        self._activate_self = builder._activate_self
        self._input_counts = builder._input_counts
        self._shared = SharedProgress.for_ports(self.inputs, self.outputs)
        self.external_summary: Connectivity = [{} for _ in range(self.outputs)]
        operators = [operator for operator in children[1:] if operator is not None]
        assert len(operators) == len(children) - 1  # SubgraphBuilder.build placed every child
        initial, shared_of = self._track(operators, builder._edges)
        self._place_children(operators, shared_of, builder._edges)
        self._external_summaries(children)
        self._watchers: dict[Source, list[MutableAntichain[Hashable]]] = {}
        for source, frontier in builder._watched:
            self._watchers.setdefault(source, []).append(frontier)
        self._listener = builder.listener
        self._path = builder.path

        # Initial capabilities: every worker assumes every worker's operators start with
        # one per output; these counts are applied locally and never broadcast.
        self.tracker.update_iter(initial)
        self._output_capabilities: list[MutableAntichain[Hashable]] = [
            MutableAntichain() for _ in range(self.outputs)
        ]
        self._progress_channel = self._worker.allocate_channel()
        self._progress: Mailbox[tuple[int, list[Update]]] = self._worker.fabric.mailbox(  # type: ignore[assignment]
            self._progress_channel, self._worker.index
        )
        self._progress.attach(self._activate_self)
        self._local: dict[tuple[int, Hashable], int] = {}
        self._pending: list[int] = []
        self._pending_set: set[int] = set()
        self._running = False
        self._alive = len(operators)
        self._propagate()
        # Every child runs once at startup, to drop or downgrade its initial capabilities.
        for index in range(1, len(children)):
            self.activate_child(index)

    def _track(
        self, operators: list[Operate], edges: list[_Edge]
    ) -> tuple[list[tuple[Source, Hashable, int]], list[SharedProgress]]:
        """Build the tracker over the children and edges, and this scope's internal summary.

        Returns the children's initial capabilities (as pointstamps) and each child's
        shared progress (child ``index`` at ``index - 1``).
        """
        reach = Builder(identity=self._domain.identity)
        reach.add_node(0, inputs=self.outputs, outputs=self.inputs)
        initial: list[tuple[Source, Hashable, int]] = []
        shared_of: list[SharedProgress] = []
        for index, operator in enumerate(operators, start=1):
            connectivity, shared = operator.initialize()
            reach.add_node(index, operator.inputs, operator.outputs, connectivity)
            shared_of.append(shared)
            for port, batch in enumerate(shared.internals):
                initial.extend((Source(index, port), t, d) for t, d in batch.drain())
        for edge in edges:
            reach.add_edge(edge.source, edge.target)
        self.tracker, summary = reach.build()
        self._reach = reach
        refine = self._refinement.summarize
        self.internal_summary: Connectivity = [
            {o: Antichain(refine(s) for s in summaries) for o, summaries in row.items()}
            for row in summary
        ]
        return initial, shared_of

    def _place_children(
        self, operators: list[Operate], shared_of: list[SharedProgress], edges: list[_Edge]
    ) -> None:
        """Each child's bookkeeping, and where the scope's own inputs and outputs are."""
        index_of = self.tracker.index_of
        targets_of: dict[Source, list[int]] = {}
        for edge in edges:
            targets_of.setdefault(edge.source, []).append(index_of(edge.target))
        self._children: list[_Child | None] = [None]
        for index, (operator, shared) in enumerate(zip(operators, shared_of, strict=True), 1):
            self._children.append(
                _Child(
                    operator=operator,
                    shared=shared,
                    local=operator.local,
                    interest=operator.interest,
                    inputs=[index_of(Target(index, i)) for i in range(operator.inputs)],
                    sources=[index_of(Source(index, o)) for o in range(operator.outputs)],
                    targets=[targets_of.get(Source(index, o), []) for o in range(operator.outputs)],
                    held=operator.outputs if operator.local else 0,
                )
            )
        self._scope_input_of: dict[int, int] = {
            index_of(Source(0, p)): p for p in range(self.inputs)
        }
        self._scope_output_of: dict[int, int] = {
            index_of(Target(0, o)): o for o in range(self.outputs)
        }
        self._input_targets: list[list[int]] = [
            targets_of.get(Source(0, p), []) for p in range(self.inputs)
        ]

    def _external_summaries(self, children: list[Operate | None]) -> None:
        """Tell each child the paths from its outputs back to its inputs within this scope.

        Paths through node 0 (out of this scope and back in) would need the parent's view
        too; they are left out, which makes the summaries larger (more conservative) only.

        A path from a child's output back to one of its inputs closes a cycle once the child
        is taken to connect every input to every output, so it lies in one strongly connected
        component of that graph: each child's search keeps to its own component. A child on
        no cycle searches nothing, and a chain of a thousand operators costs linear time, not
        a search of everything downstream of each operator (4 s for that chain before).
        """
        nodes = self._reach.nodes()
        edges = self._reach.edges()
        forward: dict[Location, list[tuple[Location, Hashable | None]]] = {}
        for target, source, summary in nodes:
            forward.setdefault(target, []).append((source, summary))
        for source, target in edges:
            forward.setdefault(source, []).append((target, None))
        joined: dict[Location, list[Location]] = {
            location: [] for location in self._reach.locations()
        }
        for here, theres in forward.items():
            joined[here].extend(there for there, _ in theres)
        for index, operator in enumerate(children[1:], start=1):
            assert operator is not None
            outs = [Source(index, out) for out in range(operator.outputs)]
            for port in range(operator.inputs):
                joined[Target(index, port)].extend(outs)
        component = strongly_connected(joined)
        for index, operator in enumerate(children[1:], start=1):
            assert operator is not None
            paths: Connectivity = [{} for _ in range(operator.outputs)]
            for out in range(operator.outputs):
                start = Source(index, out)
                best: dict[int, Antichain[Hashable]] = {}
                pending: list[tuple[Location, Hashable]] = [(start, self._domain.identity)]
                seen: dict[Location, Antichain[Hashable]] = {}
                while pending:
                    here, acc = pending.pop()
                    if isinstance(here, Target) and here.node == index:
                        best.setdefault(here.port, Antichain()).insert(acc)
                        continue
                    if not seen.setdefault(here, Antichain()).insert(acc):
                        continue
                    for there, step in forward.get(here, []):
                        if component[there] != component[start]:
                            continue  # no way back to this child from there
                        moved = acc if step is None else followed_by(acc, step)
                        if moved is not None:
                            pending.append((there, moved))
                paths[out] = best
            operator.set_external_summary(paths)

    # ------------------------------------------------------------------ Operate

    @property
    def local(self) -> bool:
        """A scope reports global totals: its parent must not broadcast them again."""
        return False

    def initialize(self) -> tuple[Connectivity, SharedProgress]:
        """The internal summary, and the initial capabilities projected to the outputs."""
        self._report_outputs()
        return self.internal_summary, self._shared

    def set_external_summary(self, summary: Connectivity) -> None:
        """Remember the parent's paths from this scope's outputs back to its inputs."""
        self.external_summary = summary

    def schedule(self) -> bool:
        """Run rounds of send, receive, propagate and schedule children, until quiet.

        Each round first broadcasts what the previous one produced, so with one worker a
        batch is back and applied in the next round of the same call. Updates a nested
        scope reported land in the tracker directly and are propagated the same way.
        """
        self._running = True
        try:
            self._accept_frontier()
            self._harvest_inputs()
            deadline = self._worker.slice_deadline
            for _ in range(_MAX_PASSES):
                self._send()
                self._receive()
                self._propagate()
                if not self._pending or perf_counter() > deadline:
                    break  # quiet, or out of time: what is pending runs at the next turn
                self._schedule_children()
            self._send()
        finally:
            self._running = False
        if self._pending or self._progress.queue or self.tracker.has_pending():
            self._activate_self()
        return self._alive > 0 or self.tracker.tracking_anything()

    # ------------------------------------------------------------------ activation

    def activate_child(self, index: int) -> None:
        """Schedule child ``index`` in this scope's next pass (and this scope in its parent)."""
        if index not in self._pending_set:
            self._pending_set.add(index)
            heapq.heappush(self._pending, index)
        if not self._running:
            self._activate_self()

    # ------------------------------------------------------------------ the rounds

    def _accept_frontier(self) -> None:
        """The parent's frontier at the scope inputs becomes pointstamps at node 0's sources."""
        to_inner = self._refinement.to_inner
        tracker = self.tracker
        for port, batch in enumerate(self._shared.frontiers):
            if batch:
                source = Source(0, port)
                for time, diff in batch.drain():
                    tracker.update_source(source, to_inner(time), diff)

    def _harvest_inputs(self) -> None:
        """Records that entered: in flight to inner targets, and consumed from the parent."""
        local = self._local
        for port, counts in enumerate(self._input_counts):
            if not counts:
                continue
            marker = self.tracker.index_of(Source(0, port))
            for time, n in counts.drain():
                for target in self._input_targets[port]:
                    key = (target, time)
                    local[key] = local.get(key, 0) + n
                key = (marker, time)
                local[key] = local.get(key, 0) - n

    def _receive(self) -> None:
        """Apply every progress batch that has arrived, from every worker."""
        queue = self._progress.queue
        while queue:
            _sender, updates = queue.popleft()
            self._apply(updates)

    def _apply(self, updates: list[Update]) -> None:
        """Apply pointstamp changes; node-0 entries become reports to the parent."""
        update_at = self.tracker.update_at
        scope_input = self._scope_input_of
        scope_output = self._scope_output_of
        to_outer = self._refinement.to_outer
        for (index, time), diff in updates:
            port = scope_input.get(index)
            if port is not None:
                self._shared.consumeds[port].update(to_outer(time), -diff)
                continue
            port = scope_output.get(index)
            if port is not None:
                self._shared.produceds[port].update(to_outer(time), diff)
                continue
            update_at(index, time, diff)

    def _propagate(self) -> None:
        """Propagate the tracker; deliver frontier changes to children and to the parent."""
        tracker = self.tracker
        tracker.propagate_all()
        children = self._children
        watchers = self._watchers
        listener = self._listener
        for location, time, diff in tracker.drain_pushed():
            node = location.node
            if not isinstance(location, Target):
                if watchers:
                    for frontier in watchers.get(location, ()):
                        frontier.update_iter(((time, diff),))
                if listener is not None:
                    listener(self._path, location)
                continue
            if node == 0:
                continue
            child = children[node]
            if child is None or not child.alive:
                continue
            child.shared.frontiers[location.port].update(time, diff)
            interest = child.interest
            if (
                interest is Interest.ALWAYS
                or (interest is Interest.IF_CAPABILITY and child.held > 0)
                or (diff < 0 and tracker.frontier_is_empty(child.inputs[location.port]))
            ):
                # The last case wakes any child whose input just closed, so it can finish.
                self.activate_child(node)
        self._report_outputs()

    def _report_outputs(self) -> None:
        """Inner capabilities projected to the outputs: the scope's own, for its parent."""
        to_outer = self._refinement.to_outer
        for port, changes in enumerate(self.tracker.drain_outputs()):
            if changes:
                capabilities = self._output_capabilities[port]
                outer = [(to_outer(t), d) for t, d in changes]
                self._shared.internals[port].extend(capabilities.update_iter(outer))

    def _schedule_children(self) -> None:
        """Schedule activated children in increasing index order, each at most once.

        A child activated by an earlier one in this pass runs in this pass when its index is
        higher (data flows forward in construction order); otherwise in the next pass.
        """
        pending = self._pending
        pending_set = self._pending_set
        children = self._children
        later: list[int] = []
        last = 0
        while pending:
            index = heapq.heappop(pending)
            pending_set.discard(index)
            if index <= last:
                later.append(index)
                continue
            last = index
            child = children[index]
            if child is None or not child.alive:
                continue
            started = perf_counter()
            incomplete = child.operator.schedule()
            child.busy += perf_counter() - started
            self._pull(index, child)
            if not incomplete and child.held <= 0 and self._inputs_closed(child):
                child.alive = False
                self._alive -= 1
        for index in later:
            if index not in pending_set:
                pending_set.add(index)
                heapq.heappush(pending, index)

    def _inputs_closed(self, child: _Child) -> bool:
        is_empty = self.tracker.frontier_is_empty
        return all(is_empty(i) for i in child.inputs)

    def _pull(self, index: int, child: _Child) -> None:
        """Take the child's consumed, internal and produced counts, together."""
        shared = child.shared
        updates: dict[tuple[int, Hashable], int]
        updates = self._local if child.local else {}
        for port, batch in enumerate(shared.consumeds):
            if batch:
                target = child.inputs[port]
                for time, n in batch.drain():
                    key = (target, time)
                    updates[key] = updates.get(key, 0) - n
        for port, batch in enumerate(shared.internals):
            if batch:
                source = child.sources[port]
                for time, diff in batch.drain():
                    if child.local:
                        child.held += diff
                    key = (source, time)
                    updates[key] = updates.get(key, 0) + diff
        for port, batch in enumerate(shared.produceds):
            if batch:
                targets = child.targets[port]
                for time, n in batch.drain():
                    for target in targets:
                        key = (target, time)
                        updates[key] = updates.get(key, 0) + n
        if not child.local and updates:
            # A nested scope's numbers are global already: apply them here, unbroadcast.
            self._apply([(k, d) for k, d in updates.items() if d])

    def _send(self) -> None:
        """Broadcast this worker's batch of local progress (if any) to every worker."""
        local = self._local
        if not local:
            return
        self._local = {}
        batch = [(k, d) for k, d in local.items() if d]
        if batch:
            self._worker.fabric.broadcast(self._progress_channel, self._worker.index, batch)
            if self._peers == 1:
                # Alone, the batch is ours at once: skip the round trip through the mailbox.
                self._receive()

    # ------------------------------------------------------------------ inspection

    def frontier(self, location: Source | Target) -> Antichain[Hashable]:
        """The current frontier at a location of this scope (as this worker sees it)."""
        return self.tracker.frontier(location)

    @property
    def domain(self) -> TimeDomain:
        """This scope's time domain."""
        return self._domain

    @property
    def refinement(self) -> Refinement:
        """How times cross this scope's boundary to and from its parent's."""
        return self._refinement

    def child(self, index: int) -> Operate | None:
        """The running operator at child ``index`` (a nested scope is its :class:`Subgraph`)."""
        child = self._children[index] if 0 < index < len(self._children) else None
        return None if child is None else child.operator

    def busy_seconds(self, index: int) -> float:
        """Seconds child ``index`` has spent being scheduled on this worker, so far.

        A counter that only increases (0.0 for no such child): measured around each call
        of the child's ``schedule``, so a nested scope's includes all its children's.
        """
        child = self._children[index] if 0 < index < len(self._children) else None
        return 0.0 if child is None else child.busy

    def edges(self) -> list[tuple[Source, Target]]:
        """Every edge of this scope, in the order added."""
        return self._reach.edges()
