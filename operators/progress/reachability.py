"""Incremental reachability: the graph builder, the cycle check, and the progress tracker.

A :class:`Builder` collects operators (each with an inputs-by-outputs connectivity of summary
antichains) and edges. :meth:`Builder.build` refuses a graph that has a cycle along which
timestamps do not advance, and otherwise returns a :class:`Tracker` and the scope's summary
of itself (from each scope input to each scope output).

The :class:`Tracker` takes pointstamp count changes (records in flight to a target, or
capabilities held at a source) and maintains, for every location, the frontier of times that
can still reach it. Its work follows the frontier changes that actually happen: a count change
that moves no frontier stops at the location's own counts, and a frontier change travels only
as far as it changes further frontiers.

>>> from operators.progress import Source, Target
>>> builder = Builder()
>>> builder.add_node(1, inputs=0, outputs=1)
>>> builder.add_node(2, inputs=1, outputs=1)
>>> builder.add_edge(Source(1, 0), Target(2, 0))
>>> tracker, _ = builder.build()
>>> tracker.update_source(Source(1, 0), 7, +1)
>>> tracker.propagate_all()
>>> tracker.frontier(Source(2, 0))
Antichain([7])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from heapq import heappop, heappush
from typing import Any

from operators.progress.antichain import Antichain, MutableAntichain
from operators.progress.change_batch import ChangeBatch
from operators.progress.location import Location, Source, Target, location_key
from operators.progress.timestamp import (
    followed_by,
    identity_like,
    is_identity,
    less_equal,
    minimum_like,
    results_in,
)

Connectivity = list[dict[int, Antichain[Hashable]]]
"""Per input port, a sparse map from output port to the summaries from that input to it.

An output missing from an input's map is not reachable from that input."""


def all_to_all(inputs: int, outputs: int, summary: Hashable = 0) -> Connectivity:
    """Connectivity where every input reaches every output with one ``summary``.

    >>> all_to_all(1, 2)
    [{0: Antichain([0]), 1: Antichain([0])}]
    """
    return [{o: Antichain([summary]) for o in range(outputs)} for _ in range(inputs)]


class CycleError(ValueError):
    """A graph has a cycle along which timestamps do not strictly advance.

    Such a cycle could carry a record back to where it came from at the same time, so no
    frontier could ever be trusted to pass it. ``transitions`` lists every step of every such
    cycle: edges ``(Source, Target)`` and operator connections ``(Target, Source)``.
    """

    def __init__(self, transitions: list[tuple[Location, Location]]) -> None:
        self.transitions = transitions
        shown = ", ".join(f"{a}->{b}" for a, b in transitions)
        super().__init__(f"cycle without timestamp increment through: {shown}")

    def __reduce__(self) -> tuple[type[CycleError], tuple[list[tuple[Location, Location]]]]:
        # Pickled as its transitions, not its message (a cluster process sends it on).
        return (type(self), (self.transitions,))


@dataclass(frozen=True, slots=True)
class Holder:
    """A pointstamp that holds a time back at a location (what :meth:`Tracker.explain` finds).

    ``count`` records in flight to ``location`` (a :class:`Target`), or capabilities held at
    it (a :class:`Source`), at ``time``; ``summary`` is the least path summary from there to
    the explained location that carries ``time`` to at most the explained time, reaching it
    at ``arrives``, along ``path`` (the locations passed, from ``location`` to the explained
    one, both included). ``summaries`` are all the minimal summaries between the two, and
    ``upstream`` the sources whose edges lead to ``location`` (empty for a source).
    """

    location: Location
    time: Hashable
    count: int
    summary: Hashable
    arrives: Hashable
    path: tuple[Location, ...]
    summaries: tuple[Hashable, ...]
    upstream: tuple[Source, ...]


def _at_most(bound: Hashable, time: Hashable) -> bool:
    return less_equal(time, bound)


@dataclass(frozen=True, slots=True)
class _Operator:
    inputs: int
    outputs: int
    connectivity: Connectivity


class Builder:
    """Collects a scope's operators and edges, then builds its :class:`Tracker`.

    Node 0 is the scope itself seen from inside: add it with ``inputs`` = the number of scope
    outputs and ``outputs`` = the number of scope inputs, and no connectivity. ``identity``
    is the identity summary of the scope's time domain (``0`` for integers,
    ``Product(0, 0)`` for pairs); paths are measured from it.
    """

    def __init__(self, identity: Hashable = 0) -> None:
        self.identity = identity
        self._operators: dict[int, _Operator] = {}
        self._edges: list[tuple[Source, Target]] = []

    def add_node(
        self, node: int, inputs: int, outputs: int, connectivity: Connectivity | None = None
    ) -> None:
        """Declare operator ``node`` (replacing any earlier declaration).

        ``connectivity[i][o]`` is the antichain of summaries from input ``i`` to output
        ``o``; ``None`` means every input reaches every output with the identity summary.
        Node 0 never has connectivity (``None`` or an empty list are accepted for it).
        """
        if node < 0 or inputs < 0 or outputs < 0:
            raise ValueError(f"node {node}: indexes and port counts must be non-negative")
        if node == 0:
            # Paths outside the scope are the parent's business: node 0 connects nothing.
            if connectivity and any(connectivity):
                raise ValueError("node 0 stands for the outside world and has no connectivity")
            connectivity = [{} for _ in range(inputs)]
        elif connectivity is None:
            connectivity = all_to_all(inputs, outputs, self.identity)
        if len(connectivity) != inputs:
            raise ValueError(
                f"node {node}: connectivity has {len(connectivity)} rows for {inputs} inputs"
            )
        cleaned: Connectivity = []
        for i, row in enumerate(connectivity):
            for o in row:
                if not 0 <= o < outputs:
                    raise ValueError(f"node {node}: input {i} connects to missing output {o}")
            # An empty antichain means "no path"; dropping it keeps the graph sparse.
            cleaned.append({o: Antichain(s) for o, s in row.items() if len(s)})
        self._operators[node] = _Operator(inputs, outputs, cleaned)

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect output port ``source`` to input port ``target``."""
        self._edges.append((source, target))

    def nodes(self) -> list[tuple[Target, Source, Hashable]]:
        """Every internal connection as ``(Target, Source, summary)`` (for the reference)."""
        return [
            (Target(n, i), Source(n, o), summary)
            for n, op in sorted(self._operators.items())
            for i, row in enumerate(op.connectivity)
            for o, summaries in row.items()
            for summary in summaries
        ]

    def edges(self) -> list[tuple[Source, Target]]:
        """Every edge, in the order added."""
        return list(self._edges)

    def locations(self) -> list[Location]:
        """Every port of every operator: per node in order, its targets then its sources."""
        found: list[Location] = []
        for n, op in sorted(self._operators.items()):
            found.extend(Target(n, i) for i in range(op.inputs))
            found.extend(Source(n, o) for o in range(op.outputs))
        return found

    def _check_edges(self) -> None:
        for source, target in self._edges:
            for port, count in ((source, "outputs"), (target, "inputs")):
                op = self._operators.get(port.node)
                if op is None:
                    raise ValueError(f"edge {source}->{target}: node {port.node} was not added")
                if not 0 <= port.port < getattr(op, count):
                    raise ValueError(f"edge {source}->{target}: {port} does not exist")

    def find_cycles(self) -> list[tuple[Location, Location]]:
        """The non-advancing transitions that lie on a cycle (empty when the graph is sound).

        Strongly connected components of the graph of non-advancing transitions (edges, and
        connections whose summary is the identity), found in linear time; a transition lies
        on a cycle exactly when both its ends are in one component.
        """
        self._check_edges()
        successors: dict[Location, list[Location]] = {loc: [] for loc in self.locations()}
        for n, op in self._operators.items():
            for i, row in enumerate(op.connectivity):
                for o, summaries in row.items():
                    if any(is_identity(s) for s in summaries):
                        successors[Target(n, i)].append(Source(n, o))
        for source, target in dict.fromkeys(self._edges):
            successors[source].append(target)
        component = strongly_connected(successors)
        return sorted(
            (
                (here, there)
                for here, theres in successors.items()
                for there in theres
                if component[here] == component[there]
            ),
            key=lambda pair: (location_key(pair[0]), location_key(pair[1])),
        )

    def build(self) -> tuple[Tracker, Connectivity]:
        """Check the graph and return its tracker and the scope's summary of itself.

        The scope summary has one row per scope input (node 0's sources), mapping each scope
        output it reaches to the minimal summaries of the paths between them.

        Raises:
            ValueError: an edge names a node or port that was not declared.
            CycleError: some cycle does not strictly advance timestamps.
        """
        if 0 not in self._operators:
            self.add_node(0, 0, 0)
        self._check_edges()
        cycles = self.find_cycles()
        if cycles:
            raise CycleError(cycles)

        locations = self.locations()
        index = {loc: i for i, loc in enumerate(locations)}
        successors: list[list[tuple[int, tuple[Hashable, ...] | None]]] = [[] for _ in locations]
        predecessors: list[list[tuple[int, tuple[Hashable, ...] | None]]] = [[] for _ in locations]
        for n, op in self._operators.items():
            for i, row in enumerate(op.connectivity):
                for o, summaries in row.items():
                    here, there = index[Target(n, i)], index[Source(n, o)]
                    steps = tuple(summaries)
                    successors[here].append((there, steps))
                    predecessors[there].append((here, steps))
        for source, target in self._edges:
            successors[index[source]].append((index[target], None))
            predecessors[index[target]].append((index[source], None))

        to_outputs = self._summarize_outputs(locations, predecessors)
        zero = self._operators[0]
        scope_summary: Connectivity = [
            dict(to_outputs[index[Source(0, p)]]) for p in range(zero.outputs)
        ]
        output_summaries: list[list[tuple[int, tuple[Hashable, ...]]]] = [
            []
            if isinstance(loc, Source) and loc.node == 0
            else [(o, tuple(s)) for o, s in sorted(to_outputs[i].items())]
            for i, loc in enumerate(locations)
        ]
        tracker = Tracker(locations, index, successors, output_summaries, zero.inputs)
        return tracker, scope_summary

    def _summarize_outputs(
        self,
        locations: list[Location],
        predecessors: list[list[tuple[int, tuple[Hashable, ...] | None]]],
    ) -> list[dict[int, Antichain[Hashable]]]:
        """From every location, the minimal summaries to each scope output (backwards BFS)."""
        result: list[dict[int, Antichain[Hashable]]] = [{} for _ in locations]
        pending: list[tuple[int, int, Hashable]] = [
            (i, loc.port, self.identity)
            for i, loc in enumerate(locations)
            if isinstance(loc, Target) and loc.node == 0
        ]
        while pending:
            here, output, summary = pending.pop()
            per_output = result[here]
            if output not in per_output:
                per_output[output] = Antichain()
            if not per_output[output].insert(summary):
                continue
            for before, steps in predecessors[here]:
                if steps is None:
                    pending.append((before, output, summary))
                    continue
                for step in steps:
                    combined = followed_by(step, summary)
                    if combined is not None:
                        pending.append((before, output, combined))
        return result


def strongly_connected(successors: Mapping[Location, list[Location]]) -> dict[Location, int]:
    """Each location's strongly connected component (a label), by Tarjan's algorithm.

    Iterative, so deep graphs do not hit the recursion limit. Every location a successor
    names must be a key of ``successors``.

    >>> a, b, c = Source(1, 0), Target(2, 0), Source(2, 0)
    >>> labels = strongly_connected({a: [b], b: [c], c: [b]})
    >>> labels[b] == labels[c] != labels[a]
    True
    """
    order: dict[Location, int] = {}
    low: dict[Location, int] = {}
    component: dict[Location, int] = {}
    stack: list[Location] = []
    on_stack: set[Location] = set()
    labels = 0
    for root in successors:
        if root in order:
            continue
        work: list[tuple[Location, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                order[node] = low[node] = len(order)
                stack.append(node)
                on_stack.add(node)
            targets = successors[node]
            descended = False
            for k in range(child, len(targets)):
                nxt = targets[k]
                if nxt not in order:
                    work.append((node, k + 1))
                    work.append((nxt, 0))
                    descended = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], order[nxt])
            if descended:
                continue
            if low[node] == order[node]:
                label = labels
                labels += 1
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = label
                    if member == node:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


def _summaries_to(
    start: int,
    identity: Hashable,
    minimum: Hashable,
    admits: Callable[[Hashable], bool],
    predecessors: list[list[tuple[int, tuple[Hashable, ...] | None]]],
) -> tuple[dict[int, Antichain[Hashable]], dict[tuple[int, Hashable], tuple[int, Hashable]]]:
    """Every minimal summary from each location to ``start`` that can still be admitted.

    Breadth first, backwards from ``start``; returns the summaries per location index, and
    for each ``(location, summary)`` the next location (and its summary) of one path with
    that summary, from which :meth:`Tracker._path` rebuilds the path.
    """
    found: dict[int, Antichain[Hashable]] = {start: Antichain([identity])}
    toward: dict[tuple[int, Hashable], tuple[int, Hashable]] = {}
    pending: deque[tuple[int, Hashable]] = deque([(start, identity)])
    while pending:
        here, summary = pending.popleft()
        for before, steps in predecessors[here]:
            for step in (identity,) if steps is None else steps:
                combined = summary if steps is None else followed_by(step, summary)
                if combined is None:
                    continue
                least = results_in(combined, minimum)
                if least is None or not admits(least):
                    continue
                if not found.setdefault(before, Antichain()).insert(combined):
                    continue
                toward.setdefault((before, combined), (here, summary))
                pending.append((before, combined))
    return found, toward


class Tracker:
    """Maintains the frontier at every location of one scope as pointstamp counts change.

    Feed it count changes with :meth:`update_source` / :meth:`update_target` (buffered and
    consolidated), then call :meth:`propagate_all`. Read what changed with
    :meth:`drain_pushed` (frontier changes per location, sources and targets alike) and
    :meth:`drain_outputs` (count changes per scope output, from the scope's own pointstamps
    only: the frontier outside the scope, arriving at node 0's sources, is never mirrored back
    out, or a loop around the scope could never complete).

    Propagation pops a heap ordered by (time, location), so an increment and the decrement
    it replaces meet before they ripple onwards, and each location's frontier is maintained
    by a :class:`MutableAntichain` that reports only real changes.
    """

    __slots__ = (
        "_implications",
        "_index",
        "_locations",
        "_output_summaries",
        "_outputs",
        "_pending",
        "_pointstamps",
        "_pushed",
        "_successors",
        "_total_counts",
    )

    def __init__(
        self,
        locations: list[Location],
        index: dict[Location, int],
        successors: list[list[tuple[int, tuple[Hashable, ...] | None]]],
        output_summaries: list[list[tuple[int, tuple[Hashable, ...]]]],
        outputs: int,
    ) -> None:
        self._locations = locations
        self._index = index
        self._successors = successors
        self._output_summaries = output_summaries
        self._pointstamps: list[MutableAntichain[Hashable]] = [
            MutableAntichain() for _ in locations
        ]
        self._implications: list[MutableAntichain[Hashable]] = [
            MutableAntichain() for _ in locations
        ]
        self._pending: dict[tuple[int, Hashable], int] = {}
        self._pushed: list[tuple[int, Hashable, int]] = []
        self._outputs: list[ChangeBatch[Hashable]] = [ChangeBatch() for _ in range(outputs)]
        self._total_counts = 0

    def locations(self) -> list[Location]:
        """Every location, in index order."""
        return list(self._locations)

    def index_of(self, location: Location) -> int:
        """The dense index of ``location`` (for callers that keep per-location arrays)."""
        return self._index[location]

    # The three below repeat update_at's two lines rather than call it: they run once per
    # pointstamp change, and a Python call costs as much as the rest of their work.

    def update_source(self, source: Source, time: Hashable, diff: int) -> None:
        """Change the count of capabilities at output port ``source`` at ``time``."""
        pending = self._pending
        key = (self._index[source], time)
        pending[key] = pending.get(key, 0) + diff

    def update_target(self, target: Target, time: Hashable, diff: int) -> None:
        """Change the count of records in flight to input port ``target`` at ``time``."""
        pending = self._pending
        key = (self._index[target], time)
        pending[key] = pending.get(key, 0) + diff

    def update(self, location: Location, time: Hashable, diff: int) -> None:
        """Change the pointstamp count at ``location`` (either kind) at ``time``."""
        pending = self._pending
        key = (self._index[location], time)
        pending[key] = pending.get(key, 0) + diff

    def update_at(self, index: int, time: Hashable, diff: int) -> None:
        """Change the pointstamp count at the location with dense ``index``."""
        pending = self._pending
        key = (index, time)
        pending[key] = pending.get(key, 0) + diff

    def update_iter(self, updates: Iterable[tuple[Location, Hashable, int]]) -> None:
        """Apply several ``(location, time, diff)`` pointstamp changes."""
        index = self._index
        pending = self._pending
        for location, time, diff in updates:
            key = (index[location], time)
            pending[key] = pending.get(key, 0) + diff

    def propagate_all(self) -> None:
        """Propagate every buffered count change to the frontiers it moves."""
        pending = self._pending
        if not pending:
            return
        self._pending = {}
        # The worklist is ordered by time, then by location index (construction order, so
        # upstream first): all changes at one location and time meet before it is processed,
        # and opposite signs cancel instead of rippling. It is kept as a heap of distinct
        # times, each with a heap of location indexes and their summed diffs, which is much
        # cheaper in Python than one heap of (time, location, diff) tuples.
        times: list[Any] = []  # times sort by the domain's total order
        buckets: dict[Hashable, tuple[list[int], dict[int, int]]] = {}

        def enqueue(time: Hashable, there: int, diff: int) -> None:
            bucket = buckets.get(time)
            if bucket is None:
                buckets[time] = ([there], {there: diff})
                heappush(times, time)
                return
            diffs = bucket[1]
            if there in diffs:
                diffs[there] += diff
            else:
                diffs[there] = diff
                heappush(bucket[0], there)

        self._count_pointstamps(pending, enqueue)
        self._work_off(times, buckets, enqueue)

    def _count_pointstamps(
        self,
        pending: dict[tuple[int, Hashable], int],
        enqueue: Callable[[Hashable, int, int], None],
    ) -> None:
        """Apply the buffered changes to the pointstamp counts, and what they imply.

        A location's own pointstamps imply its frontier directly; applying them here rather
        than through the worklist makes count churn that moves no frontier cost two antichain
        updates and nothing else. What moves a frontier is enqueued for its successors.
        """
        pointstamps = self._pointstamps
        output_summaries = self._output_summaries
        outputs = self._outputs
        implications = self._implications
        successors = self._successors
        pushed = self._pushed
        for (here, time), diff in pending.items():
            if not diff:
                continue
            for changed, delta in pointstamps[here].update(time, diff):
                self._total_counts += delta
                for output, summaries in output_summaries[here]:
                    batch = outputs[output]
                    for summary in summaries:
                        moved = results_in(summary, changed)
                        if moved is not None:
                            batch.update(moved, delta)
                for implied, sign in implications[here].update(changed, delta):
                    pushed.append((here, implied, sign))
                    for there, steps in successors[here]:
                        if steps is None:
                            enqueue(implied, there, sign)
                        else:
                            for step in steps:
                                moved = results_in(step, implied)
                                if moved is not None:
                                    enqueue(moved, there, sign)

    def _work_off(
        self,
        times: list[Any],
        buckets: dict[Hashable, tuple[list[int], dict[int, int]]],
        enqueue: Callable[[Hashable, int, int], None],
    ) -> None:
        """Process the worklist in (time, location) order until no frontier moves."""
        implications = self._implications
        successors = self._successors
        pushed = self._pushed
        while times:
            time = heappop(times)
            order, diffs = buckets[time]
            while order:
                here = heappop(order)
                diff = diffs.pop(here)
                if not diff:
                    continue
                for changed, delta in implications[here].update(time, diff):
                    pushed.append((here, changed, delta))
                    for there, steps in successors[here]:
                        if steps is None:
                            if changed == time:
                                # Same time: straight into the bucket being processed.
                                if there in diffs:
                                    diffs[there] += delta
                                else:
                                    diffs[there] = delta
                                    heappush(order, there)
                            else:
                                enqueue(changed, there, delta)
                        else:
                            for step in steps:
                                moved = results_in(step, changed)
                                if moved is not None:
                                    enqueue(moved, there, delta)
            del buckets[time]

    def drain_pushed(self) -> list[tuple[Location, Hashable, int]]:
        """Frontier changes ``(location, time, ±1)`` since the last drain, consolidated."""
        pushed = self._pushed
        if not pushed:
            return []
        self._pushed = []
        net: dict[tuple[int, Hashable], int] = {}
        for here, time, diff in pushed:
            key = (here, time)
            net[key] = net.get(key, 0) + diff
        locations = self._locations
        return [(locations[here], time, diff) for (here, time), diff in net.items() if diff]

    def drain_outputs(self) -> list[list[tuple[Hashable, int]]]:
        """Per scope output, count changes from the scope's own pointstamps since last drain.

        Accumulated in a :class:`MutableAntichain`, they give the times at which the scope
        may still produce output: what it reports upwards as its capabilities.
        """
        return [batch.drain() for batch in self._outputs]

    def frontier(self, location: Location) -> Antichain[Hashable]:
        """The times that may still reach ``location``: its current frontier."""
        return self._implications[self._index[location]].frontier()

    def frontier_is_empty(self, index: int) -> bool:
        """Whether nothing can reach the location with dense ``index`` any more."""
        return not self._implications[index].frontier_elements()

    def pointstamp_frontier(self, location: Location) -> Antichain[Hashable]:
        """The minimal times with positive count reported *at* ``location`` itself."""
        return self._pointstamps[self._index[location]].frontier()

    def has_pending(self) -> bool:
        """Whether some buffered count change awaits :meth:`propagate_all`."""
        return any(self._pending.values())

    def tracking_anything(self) -> bool:
        """Whether any change is buffered or any pointstamp count is positive somewhere."""
        return self._total_counts > 0 or any(self._pending.values())

    def explain(self, location: Location, time: Hashable) -> list[Holder]:
        """Every pointstamp now counted that holds ``time`` back at ``location``.

        A pointstamp ``(l, t)`` with a positive count holds ``time`` back when some path
        summary ``s`` from ``l`` to ``location`` (edges and operators' connectivity, as the
        tracker propagates them) has ``s(t) <= time``: exactly the pointstamps behind the
        frontier elements at or before ``time``. So the answer is empty when ``time`` is
        complete there. Changes buffered and not yet propagated are not counted.

        >>> from operators.progress import Antichain, Source, Target
        >>> builder = Builder()
        >>> builder.add_node(1, inputs=0, outputs=1)
        >>> builder.add_node(2, inputs=1, outputs=1, connectivity=[{0: Antichain([1])}])
        >>> builder.add_edge(Source(1, 0), Target(2, 0))
        >>> tracker, _ = builder.build()
        >>> tracker.update_source(Source(1, 0), 3, +1)
        >>> tracker.update_target(Target(2, 0), 5, +2)
        >>> tracker.propagate_all()
        >>> [(h.location, h.time, h.count, h.summary) for h in tracker.explain(Source(2, 0), 5)]
        [(Source(1, 0), 3, 1, 1)]
        >>> [(h.location, h.time, h.count, h.arrives) for h in tracker.explain(Source(2, 0), 6)]
        [(Source(1, 0), 3, 1, 4), (Target(2, 0), 5, 2, 6)]
        """
        return self.holders(location, partial(_at_most, time), minimum_like(time))

    def holders(
        self,
        location: Location,
        admits: Callable[[Hashable], bool],
        minimum: Hashable,
        skip: Collection[Location] = (),
    ) -> list[Holder]:
        """Every counted pointstamp some path carries to ``location`` at a time ``admits`` takes.

        The general form of :meth:`explain`: ``admits`` must be downward closed (if it takes
        a time, it takes every earlier one), as "at most ``time``" is, or "leaves a nested
        scope at most at ``time``" for an inner location. ``minimum`` is the least time of
        the scope's domain: a path that cannot carry even it to an admitted time is not
        followed, which bounds the search around loops. Pointstamps at ``skip`` are left
        out. Holders come in location order (construction order, upstream first), then time.
        """
        identity = identity_like(minimum)
        start = self._index[location]
        reached = results_in(identity, minimum)
        if reached is None or not admits(reached):
            return []
        predecessors: list[list[tuple[int, tuple[Hashable, ...] | None]]] = [
            [] for _ in self._locations
        ]
        for here, theres in enumerate(self._successors):
            for there, steps in theres:
                predecessors[there].append((here, steps))
        found, toward = _summaries_to(start, identity, minimum, admits, predecessors)
        locations = self._locations
        held: list[Holder] = []
        for here in sorted(found):
            at = locations[here]
            if at in skip:
                continue
            counts = self._pointstamps[here].positive()
            if not counts:
                continue
            summaries = tuple(sorted(found[here]))  # type: ignore[type-var]
            upstream = tuple(
                source
                for before, steps in predecessors[here]
                if steps is None and isinstance(source := locations[before], Source)
            )
            for time, count in counts:
                for summary in summaries:
                    arrives = results_in(summary, time)
                    if arrives is not None and admits(arrives):
                        path = self._path(here, summary, toward, start)
                        held.append(
                            Holder(at, time, count, summary, arrives, path, summaries, upstream)
                        )
                        break
        return held

    def _path(
        self,
        here: int,
        summary: Hashable,
        toward: dict[tuple[int, Hashable], tuple[int, Hashable]],
        end: int,
    ) -> tuple[Location, ...]:
        """The locations from ``here`` to ``end`` along a path whose summary is ``summary``."""
        locations = self._locations
        path = [locations[here]]
        while here != end:
            here, summary = toward[(here, summary)]
            path.append(locations[here])
        return tuple(path)
