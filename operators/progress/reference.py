"""The three reference computations of progress tracking, as plain fixpoints.

These are the oracle the incremental machinery (:mod:`operators.progress.reachability`) is
tested against: simple enough to be obviously correct, with no attempt at speed. A dataflow
graph is given as

* ``nodes``: ``(Target, Source, summary)`` triples, an operator's internal connection from an
  input port to an output port, advancing times by at least ``summary``;
* ``edges``: ``(Source, Target)`` pairs, which never change times;
* ``times``: ``(location, time)`` pairs where a record or capability may exist.

>>> from operators.progress import Source, Target
>>> nodes = [(Target(1, 0), Source(1, 0), 0), (Target(2, 0), Source(2, 0), 1)]
>>> edges = [(Source(1, 0), Target(2, 0)), (Source(2, 0), Target(1, 0))]
>>> find_cycles(nodes, edges)  # the loop passes a +1: sound
set()
>>> frontier(nodes, edges, [(Source(1, 0), 5)])[Target(1, 0)]
Antichain([6])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable

from operators.progress.antichain import Antichain
from operators.progress.location import Location, Source, Target
from operators.progress.timestamp import followed_by, is_identity, results_in

Node = tuple[Target, Source, Hashable]
"""An internal connection ``(input port, output port, summary)`` of one operator."""

Edge = tuple[Source, Target]
"""A channel from an output port to an input port."""

Transition = tuple[Location, Location]
"""A step from one location to the next: an edge, or a connection inside an operator."""


def find_cycles(nodes: Iterable[Node], edges: Iterable[Edge]) -> set[Transition]:
    """The transitions that lie on a cycle along which timestamps do not strictly advance.

    Only non-advancing transitions can form such a cycle: every edge, and every internal
    connection whose summary is the identity. A transition ``(u, v)`` lies on a cycle of them
    exactly when ``u`` can be reached again from ``v``; transitions merely upstream or
    downstream of a cycle are not reported. The result is empty for a sound graph.

    >>> cycle = find_cycles([(Target(1, 0), Source(1, 0), 0)], [(Source(1, 0), Target(1, 0))])
    >>> cycle == {(Source(1, 0), Target(1, 0)), (Target(1, 0), Source(1, 0))}
    True
    """
    successors: dict[Location, set[Location]] = defaultdict(set)
    transitions: set[Transition] = set()
    for target, source, summary in nodes:
        if is_identity(summary):
            transitions.add((target, source))
    transitions.update(edges)
    for here, there in transitions:
        successors[here].add(there)

    def reaches(start: Location, goal: Location) -> bool:
        seen = {start}
        stack = [start]
        while stack:
            here = stack.pop()
            if here == goal:
                return True
            for there in successors[here]:
                if there not in seen:
                    seen.add(there)
                    stack.append(there)
        return False

    return {(here, there) for here, there in transitions if reaches(there, here)}


def frontier(
    nodes: Iterable[Node], edges: Iterable[Edge], times: Iterable[tuple[Location, Hashable]]
) -> dict[Location, Antichain[Hashable]]:
    """For every location some time can reach, the minimal times that can reach it.

    A time at a location reaches the location itself, crosses edges unchanged, and crosses an
    operator's internal connection as ``summary.results_in(time)``; a path whose summary
    would overflow the time is dropped.

    >>> reach = frontier([], [(Source(1, 0), Target(2, 0))], [(Source(1, 0), 3), (Target(2, 0), 1)])
    >>> reach[Source(1, 0)], reach[Target(2, 0)]
    (Antichain([3]), Antichain([1]))
    """
    steps: dict[Location, list[tuple[Location, Hashable | None]]] = defaultdict(list)
    for target, source, summary in nodes:
        steps[target].append((source, summary))
    for source, target in edges:
        steps[source].append((target, None))

    result: dict[Location, Antichain[Hashable]] = {}
    pending: list[tuple[Location, Hashable]] = list(times)
    while pending:
        location, time = pending.pop()
        if location not in result:
            result[location] = Antichain()
        # A time dominated by one already known adds nothing: whatever it reaches, the
        # smaller time reaches no later (summaries are monotone).
        if result[location].insert(time):
            for there, summary in steps[location]:
                moved = time if summary is None else results_in(summary, time)
                if moved is not None:
                    pending.append((there, moved))
    return result


def summarize(
    nodes: Iterable[Node], edges: Iterable[Edge], identity: Hashable = 0
) -> dict[Location, dict[Target, Antichain[Hashable]]]:
    """From every location, the minimal path summaries to each target of node 0.

    The targets of node 0 are the scope's outputs (those that some edge leads into). The
    entries for node 0's sources, the scope's inputs, are the scope's summary of itself as
    seen from its parent. ``identity`` is the summary that leaves times unchanged, of the
    scope's summary type (``0`` for integer times, ``Product(0, 0)`` for pairs).

    >>> nodes = [(Target(1, 0), Source(1, 0), 1)]
    >>> edges = [(Source(0, 0), Target(1, 0)), (Source(1, 0), Target(0, 0))]
    >>> summarize(nodes, edges)[Source(0, 0)]
    {Target(0, 0): Antichain([1])}
    """
    backwards: dict[Location, list[tuple[Location, Hashable | None]]] = defaultdict(list)
    outputs: set[Target] = set()
    for target, source, summary in nodes:
        backwards[source].append((target, summary))
    for source, target in edges:
        backwards[target].append((source, None))
        if target.node == 0:
            outputs.add(target)

    result: dict[Location, dict[Target, Antichain[Hashable]]] = {}
    pending: list[tuple[Location, Target, Hashable]] = [(o, o, identity) for o in outputs]
    while pending:
        location, output, summary = pending.pop()
        per_output = result.setdefault(location, {})
        if output not in per_output:
            per_output[output] = Antichain()
        if per_output[output].insert(summary):
            for before, step in backwards[location]:
                # The path is ``step`` (an internal connection) then the path found so far.
                combined = summary if step is None else followed_by(step, summary)
                if combined is not None:
                    pending.append((before, output, combined))
    return result
