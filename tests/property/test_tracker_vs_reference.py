"""The incremental Builder/Tracker against the plain fixpoints of ``operators.progress.reference``.

Graphs are small random scopes (see ``progress_strategies.graphs``): acyclic, or with cycles
that re-enter only strictly advancing operators, over int times and over ``Product(int, int)``
times, with sparse multi-port connectivity and node 0's scope inputs and outputs wired in.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from progress_strategies import GraphSpec, graphs, minimal, times_for

from operators.progress import (
    Antichain,
    CycleError,
    MutableAntichain,
    Source,
    Target,
    find_cycles,
    frontier,
    summarize,
)

KINDS = ["int", "product"]

Update = tuple[Source | Target, Hashable, int]


@dataclass(frozen=True)
class Scenario:
    graph: GraphSpec
    batches: tuple[tuple[Update, ...], ...]

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints falsifying examples with this hook (else field by field).
        printer.text(repr(self))

    def __repr__(self) -> str:
        lines = [repr(self.graph).strip(), "tracker, _ = builder.build()"]
        lines += [
            f"tracker.update_iter({list(batch)!r}); tracker.propagate_all()"
            for batch in self.batches
        ]
        return "\n".join(["", *lines, ""])


def is_sound(graph: GraphSpec) -> bool:
    return not find_cycles(graph.nodes(), graph.edges)


@st.composite
def scenarios(draw: st.DrawFn, kind: str) -> Scenario:
    """A graph and batches of pointstamp updates.

    Half of the updates retract (-1) a pointstamp that currently has a positive count, so
    that frontiers move forwards and locations, or the whole scope, become empty again; the
    rest are arbitrary (location, time, diff in {-1, +1, +2}), negative counts included.
    """
    cycles = draw(st.sampled_from(["none", "sound", "any"]), label="cycles")
    # "any" graphs that happen to be sound have cycles advanced anywhere along the loop (by
    # +1, +2 or 2**63 for ints), not only where a loop re-enters a feedback operator.
    graph = draw(graphs(kind, cycles).filter(is_sound), label="graph")
    locations = graph.locations()
    if not locations:
        return Scenario(graph, ())
    arbitrary = st.tuples(st.sampled_from(locations), times_for(kind), st.sampled_from([1, -1, 2]))
    counts: dict[tuple[Source | Target, Hashable], int] = {}
    batches = []
    for _ in range(draw(st.integers(1, 8), label="steps")):
        batch = []
        for _ in range(draw(st.integers(1, 4))):
            held = sorted(key for key, count in counts.items() if count > 0)
            if held and draw(st.booleans()):
                location, time = draw(st.sampled_from(held))
                update: Update = (location, time, -1)
            else:
                update = draw(arbitrary)
            batch.append(update)
            counts[update[:2]] = counts.get(update[:2], 0) + update[2]
        batches.append(tuple(batch))
    return Scenario(graph, tuple(batches))


def is_scope_input(location: Source | Target) -> bool:
    return isinstance(location, Source) and location.node == 0


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_tracker_frontiers_match_reference(kind: str, data: st.DataObject) -> None:
    scenario = data.draw(scenarios(kind), label="scenario")
    graph = scenario.graph
    builder = graph.builder()
    assert find_cycles(graph.nodes(), graph.edges) == set()
    tracker, _ = builder.build()
    # With every connection read as the identity, any cycle at all is reported.
    any_cycle = find_cycles([(t, s, 0) for t, s, _ in graph.nodes()], graph.edges)
    event("cyclic" if any_cycle else "acyclic")

    locations = graph.locations()
    assert tracker.locations() == builder.locations()
    assert set(tracker.locations()) == set(locations)

    counts: dict[tuple[Source | Target, Hashable], int] = {}
    pushed = {loc: MutableAntichain[Hashable]() for loc in locations}
    pushed_net: dict[Source | Target, dict[Hashable, int]] = {loc: {} for loc in locations}
    outputs = [MutableAntichain[Hashable]() for _ in range(graph.scope_outputs)]
    outputs_net: list[dict[Hashable, int]] = [{} for _ in range(graph.scope_outputs)]

    for step, batch in enumerate(scenario.batches):
        # Before propagation: tracking iff a count was already positive or a change is buffered.
        tracking = any(c > 0 for c in counts.values())
        net_batch: dict[tuple[Source | Target, Hashable], int] = {}
        for location, time, diff in batch:
            counts[location, time] = counts.get((location, time), 0) + diff
            net_batch[location, time] = net_batch.get((location, time), 0) + diff
        tracking = tracking or any(net_batch.values())
        if step % 3 == 0:
            tracker.update_iter(batch)
        elif step % 3 == 1:
            for location, time, diff in batch:
                tracker.update(location, time, diff)
        else:
            for location, time, diff in batch:
                if isinstance(location, Source):
                    tracker.update_source(location, time, diff)
                else:
                    tracker.update_target(location, time, diff)
        assert tracker.tracking_anything() == tracking, f"step {step}: before propagate_all"
        tracker.propagate_all()

        for location, time, diff in tracker.drain_pushed():
            assert diff != 0, "drain_pushed reported a zero change"
            pushed[location].update_iter([(time, diff)])
            net = pushed_net[location]
            net[time] = net.get(time, 0) + diff
        drained = tracker.drain_outputs()
        assert len(drained) == graph.scope_outputs
        for output, changes in enumerate(drained):
            outputs[output].update_iter(changes)
            for time, diff in changes:
                outputs_net[output][time] = outputs_net[output].get(time, 0) + diff

        positive = [(loc, t) for (loc, t), c in counts.items() if c > 0]
        expected = frontier(graph.nodes(), graph.edges, positive)
        internal = [(loc, t) for loc, t in positive if not is_scope_input(loc)]
        expected_outside = frontier(graph.nodes(), graph.edges, internal)

        for loc in locations:
            want = expected.get(loc, Antichain())
            where = f"step {step}, {loc}"
            assert pushed[loc].frontier() == want, f"{where}: drain_pushed accumulates wrongly"
            assert {t: c for t, c in pushed_net[loc].items() if c} == dict.fromkeys(want, 1), (
                f"{where}: drained changes do not sum to exactly the frontier"
            )
            assert tracker.frontier(loc) == want, f"{where}: Tracker.frontier"
            at_loc = minimal(t for (here, t) in positive if here == loc)
            assert set(tracker.pointstamp_frontier(loc)) == at_loc, f"{where}: pointstamps"
            index = tracker.index_of(loc)
            assert tracker.frontier_is_empty(index) == (not want), f"{where}: frontier_is_empty"
        for output in range(graph.scope_outputs):
            want = expected_outside.get(Target(0, output), Antichain())
            assert outputs[output].frontier() == want, f"step {step}: scope output {output}"
            assert all(c >= 0 for c in outputs_net[output].values()), (
                f"step {step}: scope output {output} count went negative"
            )
        assert tracker.tracking_anything() == bool(positive), f"step {step}: tracking_anything"


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_scope_summary_matches_reference(kind: str, data: st.DataObject) -> None:
    graph = data.draw(graphs(kind, data.draw(st.sampled_from(["none", "sound"]))), label="graph")
    builder = graph.builder()
    assert find_cycles(graph.nodes(), graph.edges) == set()
    assert builder.find_cycles() == []
    minimised = {
        (Target(op.node, i), Source(op.node, o), summary)
        for op in graph.operators
        for i, row in enumerate(op.connectivity)
        for o, summaries in row
        for summary in Antichain(summaries)
    }
    assert set(builder.nodes()) == minimised
    assert len(builder.nodes()) == len(minimised)

    _, scope_summary = builder.build()
    reference = summarize(graph.nodes(), graph.edges, graph.identity)
    assert len(scope_summary) == graph.scope_inputs
    for p, row in enumerate(scope_summary):
        assert set(row) <= set(range(graph.scope_outputs))
        from_input = reference.get(Source(0, p), {})
        for o in range(graph.scope_outputs):
            got = row.get(o, Antichain())
            assert got == from_input.get(Target(0, o), Antichain()), f"input {p} -> output {o}"


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_cycle_detection_matches_reference(kind: str, data: st.DataObject) -> None:
    plant = data.draw(st.booleans(), label="plant a zero cycle")
    graph = data.draw(graphs(kind, "any", plant_cycle=plant), label="graph")
    builder = graph.builder()
    expected = find_cycles(graph.nodes(), graph.edges)
    event("unsound" if expected else "sound")
    if plant:
        assert expected, "a planted identity loop must be found"
    assert set(builder.find_cycles()) == expected
    if expected:
        with pytest.raises(CycleError) as raised:
            builder.build()
        assert set(raised.value.transitions) == expected
    else:
        builder.build()
