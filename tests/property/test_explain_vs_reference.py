"""Tracker.explain against the reference fixpoint: exactly the pointstamps that reach ≤ t.

A positive pointstamp holds time ``t`` back at a location exactly when the reference
frontier computed from that pointstamp alone has an element at or before ``t`` there.
"""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from progress_strategies import graphs, times_for
from test_tracker_vs_reference import KINDS, is_sound

from operators.progress import Source, Target, frontier, less_equal, results_in


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_explain_finds_exactly_the_pointstamps_that_reach(kind: str, data: st.DataObject) -> None:
    graph = data.draw(graphs(kind, data.draw(st.sampled_from(["none", "sound"]))).filter(is_sound))
    locations = graph.locations()
    if not locations:
        return
    tracker, _ = graph.builder().build()
    counts: dict[tuple[Source | Target, Hashable], int] = {}
    for _ in range(data.draw(st.integers(0, 6))):
        location = data.draw(st.sampled_from(locations))
        time = data.draw(times_for(kind))
        diff = data.draw(st.sampled_from([1, 2, -1]))
        tracker.update(location, time, diff)
        counts[location, time] = counts.get((location, time), 0) + diff
    tracker.propagate_all()
    where = data.draw(st.sampled_from(locations))
    when = data.draw(times_for(kind))

    held = tracker.explain(where, when)

    def reaches(location: Source | Target, time: Hashable) -> bool:
        alone = frontier(graph.nodes(), graph.edges, [(location, time)])
        return any(less_equal(f, when) for f in alone.get(where, []))

    expected = {(loc, t, c) for (loc, t), c in counts.items() if c > 0 and reaches(loc, t)}
    assert {(h.location, h.time, h.count) for h in held} == expected
    complete = not any(less_equal(f, when) for f in tracker.frontier(where))
    assert complete == (not held)
    for h in held:
        assert h.path[0] == h.location and h.path[-1] == where
        assert h.summary in h.summaries
        assert results_in(h.summary, h.time) == h.arrives
        assert less_equal(h.arrives, when)
