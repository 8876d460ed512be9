"""Tracker.explain: the pointstamps that hold a time back at a location, with their paths."""

from operators.progress import Antichain, Builder, Product, Source, Target
from operators.progress.reachability import Holder

S, T, P = Source, Target, Product


def chain():
    """1 (an input) -> 2 -> 3, identity summaries."""
    builder = Builder()
    builder.add_node(1, inputs=0, outputs=1)
    builder.add_node(2, inputs=1, outputs=1)
    builder.add_node(3, inputs=1, outputs=0)
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(3, 0))
    tracker, _ = builder.build()
    return tracker


def loop(identity=0, step=1):
    """1 -> 2 (two inputs) -> 3 (feedback, +step) -> 2's second input; 2 -> 4."""
    builder = Builder(identity=identity)
    builder.add_node(1, inputs=0, outputs=1)
    builder.add_node(2, inputs=2, outputs=1)
    builder.add_node(3, inputs=1, outputs=1, connectivity=[{0: Antichain([step])}])
    builder.add_node(4, inputs=1, outputs=0)
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(3, 0))
    builder.add_edge(S(3, 0), T(2, 1))
    builder.add_edge(S(2, 0), T(4, 0))
    tracker, _ = builder.build()
    return tracker


def test_a_held_capability_holds_every_later_time_downstream() -> None:
    tracker = chain()
    tracker.update_source(S(1, 0), 3, +1)
    tracker.propagate_all()
    path = (S(1, 0), T(2, 0), S(2, 0), T(3, 0))
    assert tracker.explain(T(3, 0), 3) == [Holder(S(1, 0), 3, 1, 0, 3, path, (0,), ())]
    assert tracker.explain(T(3, 0), 2) == []  # 2 is complete there
    assert tracker.explain(T(3, 0), 9)[0].arrives == 3


def test_records_in_flight_are_counted_on_their_edge() -> None:
    tracker = chain()
    tracker.update_target(T(3, 0), 4, +7)
    tracker.update_source(S(2, 0), 6, +1)
    tracker.propagate_all()
    assert tracker.explain(T(3, 0), 5) == [
        Holder(T(3, 0), 4, 7, 0, 4, (T(3, 0),), (0,), (S(2, 0),))
    ]
    assert [(h.location, h.time, h.count) for h in tracker.explain(T(3, 0), 6)] == [
        (S(2, 0), 6, 1),
        (T(3, 0), 4, 7),
    ]
    # Upstream of the records nothing holds them: node 2's input is complete at 4.
    assert tracker.explain(T(2, 0), 4) == []


def test_every_counted_time_is_reported_not_only_the_least() -> None:
    tracker = chain()
    tracker.update_source(S(1, 0), 2, +1)
    tracker.update_source(S(1, 0), 5, +2)
    tracker.update_source(S(1, 0), 8, +1)
    tracker.propagate_all()
    assert [(h.time, h.count) for h in tracker.explain(T(2, 0), 5)] == [(2, 1), (5, 2)]


def test_around_a_loop_the_feedback_summary_is_what_carries_it() -> None:
    tracker = loop()
    tracker.update_source(S(1, 0), 5, +1)
    tracker.propagate_all()
    assert tracker.frontier(T(2, 1)) == Antichain([6])
    assert tracker.explain(T(2, 1), 5) == []
    (held,) = tracker.explain(T(2, 1), 6)
    assert (held.location, held.summary, held.arrives) == (S(1, 0), 1, 6)
    assert held.path == (S(1, 0), T(2, 0), S(2, 0), T(3, 0), S(3, 0), T(2, 1))
    # At node 2's output the identity path is the least (the loop's +1, +2, ... are not).
    (held,) = tracker.explain(S(2, 0), 7)
    assert (held.summary, held.summaries) == (0, (0,))
    # Records circulating in the loop hold its own input back, a round later.
    tracker.update_target(T(3, 0), 6, +3)
    tracker.propagate_all()
    assert [(h.location, h.time, h.count, h.arrives) for h in tracker.explain(T(2, 1), 7)] == [
        (S(1, 0), 5, 1, 6),
        (T(3, 0), 6, 3, 7),
    ]


def test_a_loop_in_product_time_advances_the_inner_coordinate() -> None:
    tracker = loop(identity=P(0, 0), step=P(0, 1))
    tracker.update_target(T(3, 0), P(2, 3), +1)
    tracker.propagate_all()
    (held,) = tracker.explain(T(2, 1), P(2, 4))
    assert (held.summary, held.arrives) == (P(0, 1), P(2, 4))
    assert tracker.explain(T(2, 1), P(2, 3)) == []
    assert tracker.explain(T(2, 1), P(9, 3)) == []


def test_two_incomparable_product_times() -> None:
    builder = Builder(identity=P(0, 0))
    builder.add_node(1, inputs=0, outputs=1)
    builder.add_node(2, inputs=1, outputs=0)
    builder.add_edge(S(1, 0), T(2, 0))
    tracker, _ = builder.build()
    tracker.update_source(S(1, 0), P(1, 0), +1)
    tracker.update_source(S(1, 0), P(0, 1), +1)
    tracker.propagate_all()
    assert tracker.frontier(T(2, 0)) == Antichain([P(1, 0), P(0, 1)])
    assert [h.time for h in tracker.explain(T(2, 0), P(1, 1))] == [P(0, 1), P(1, 0)]
    assert [h.time for h in tracker.explain(T(2, 0), P(1, 0))] == [P(1, 0)]
    assert [h.time for h in tracker.explain(T(2, 0), P(0, 5))] == [P(0, 1)]
    assert tracker.explain(T(2, 0), P(0, 0)) == []


def test_skipped_locations_and_a_general_predicate() -> None:
    tracker = chain()
    tracker.update_source(S(1, 0), 3, +1)
    tracker.update_source(S(2, 0), 4, +1)
    tracker.propagate_all()
    everything = tracker.holders(T(3, 0), lambda t: t <= 4, 0)
    assert [h.location for h in everything] == [S(1, 0), S(2, 0)]
    assert [h.location for h in tracker.holders(T(3, 0), lambda t: t <= 4, 0, skip={S(1, 0)})] == [
        S(2, 0)
    ]
    assert tracker.holders(T(3, 0), lambda t: False, 0) == []


def test_unpropagated_and_negative_counts_hold_nothing() -> None:
    tracker = chain()
    tracker.update_source(S(1, 0), 3, -1)
    tracker.propagate_all()
    tracker.update_source(S(2, 0), 3, +1)  # buffered, not propagated
    assert tracker.explain(T(3, 0), 3) == []
