"""reachability.Builder (graph checks, scope summary) and Tracker (incremental frontiers)."""

import pytest

from operators.progress import reference
from operators.progress.antichain import Antichain
from operators.progress.location import Source, Target, location_key
from operators.progress.reachability import Builder, CycleError, all_to_all
from operators.progress.timestamp import MAX_TIME, Product

S, T = Source, Target
P = Product


def ac(*elements):
    return Antichain(elements)


def drained(tracker):
    """drain_pushed in a canonical order (its own order is not part of the contract)."""
    return sorted(tracker.drain_pushed(), key=lambda c: (location_key(c[0]), c[1], c[2]))


def negated(changes):
    return [(location, time, -diff) for location, time, diff in changes]


# --------------------------------------------------------------------------- graphs


def bc_loop(c_summary):
    """A -> [B -> C -> B] -> D; C's summary decides whether the B/C loop advances."""
    builder = Builder()
    builder.add_node(1, inputs=0, outputs=1)  # A
    builder.add_node(2, inputs=2, outputs=1)  # B
    builder.add_node(3, inputs=1, outputs=1, connectivity=[{0: ac(c_summary)}])  # C
    builder.add_node(4, inputs=1, outputs=0)  # D
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(3, 0))
    builder.add_edge(S(3, 0), T(2, 1))
    builder.add_edge(S(2, 0), T(4, 0))
    return builder


def doc_cycle():
    """TIMELY-NOTES' doc example renumbered (node 0 is the world): 1 -> 2 -> 3 -> 1, 0/0/+1."""
    builder = Builder()
    builder.add_node(1, 1, 1, [{0: ac(0)}])
    builder.add_node(2, 1, 1, [{0: ac(0)}])
    builder.add_node(3, 1, 1, [{0: ac(1)}])
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(3, 0))
    builder.add_edge(S(3, 0), T(1, 0))
    return builder


def chain():
    """1 -> 2 (+1) -> 3."""
    builder = Builder()
    builder.add_node(1, 0, 1)
    builder.add_node(2, 1, 1, [{0: ac(1)}])
    builder.add_node(3, 1, 0)
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(3, 0))
    return builder


def diamond():
    """1 feeds 2 (+1) and 3 (+5); they meet at the two inputs of 4."""
    builder = Builder()
    builder.add_node(1, 0, 1)
    builder.add_node(2, 1, 1, [{0: ac(1)}])
    builder.add_node(3, 1, 1, [{0: ac(5)}])
    builder.add_node(4, 2, 1)
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(1, 0), T(3, 0))
    builder.add_edge(S(2, 0), T(4, 0))
    builder.add_edge(S(3, 0), T(4, 1))
    return builder


def scope_plus_one():
    """Scope input -> node 1 (+1) -> scope output."""
    builder = Builder()
    builder.add_node(0, inputs=1, outputs=1)
    builder.add_node(1, 1, 1, [{0: ac(1)}])
    builder.add_edge(S(0, 0), T(1, 0))
    builder.add_edge(S(1, 0), T(0, 0))
    return builder


def product_loop():
    """An iterative scope: input -> concat (node 1) -> output, with feedback (0, 1) via node 2."""
    builder = Builder(identity=P(0, 0))
    builder.add_node(0, inputs=1, outputs=1)
    builder.add_node(1, 2, 1)
    builder.add_node(2, 1, 1, [{0: ac(P(0, 1))}])
    builder.add_edge(S(0, 0), T(1, 0))
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(1, 1))
    builder.add_edge(S(1, 0), T(0, 0))
    return builder


def sparse():
    """Scope inputs enter node 1 (2 in, 2 out), whose input 0 reaches only output 0."""
    builder = Builder()
    builder.add_node(0, inputs=2, outputs=2)
    builder.add_node(1, 2, 2, [{0: ac(0)}, {0: ac(0), 1: ac(3)}])
    builder.add_edge(S(0, 0), T(1, 0))
    builder.add_edge(S(0, 1), T(1, 1))
    builder.add_edge(S(1, 0), T(0, 0))
    builder.add_edge(S(1, 1), T(0, 1))
    return builder


# --------------------------------------------------------------------------- Builder: checks


def test_identity_loop_raises_cycle_error_naming_exactly_the_cycle():
    expected = [
        (T(2, 1), S(2, 0)),
        (S(2, 0), T(3, 0)),
        (T(3, 0), S(3, 0)),
        (S(3, 0), T(2, 1)),
    ]
    builder = bc_loop(c_summary=0)
    assert builder.find_cycles() == expected
    with pytest.raises(CycleError) as caught:
        builder.build()
    assert caught.value.transitions == expected
    assert str(caught.value) == (
        "cycle without timestamp increment through: Target(2, 1)->Source(2, 0), "
        "Source(2, 0)->Target(3, 0), Target(3, 0)->Source(3, 0), Source(3, 0)->Target(2, 1)"
    )
    assert isinstance(caught.value, ValueError)


def test_builder_find_cycles_agrees_with_the_reference():
    builder = bc_loop(c_summary=0)
    assert set(builder.find_cycles()) == reference.find_cycles(builder.nodes(), builder.edges())


def test_same_loop_with_one_increment_builds():
    builder = bc_loop(c_summary=1)
    assert builder.find_cycles() == []
    tracker, scope_summary = builder.build()
    assert scope_summary == []
    assert tracker.tracking_anything() is False


def test_self_loop_of_one_operator_is_a_cycle():
    builder = Builder()
    builder.add_node(1, 1, 1)
    builder.add_edge(S(1, 0), T(1, 0))
    with pytest.raises(CycleError) as caught:
        builder.build()
    assert caught.value.transitions == [(T(1, 0), S(1, 0)), (S(1, 0), T(1, 0))]


def test_product_loop_without_increment_is_a_cycle():
    builder = Builder(identity=P(0, 0))
    builder.add_node(1, 1, 1)
    builder.add_node(2, 1, 1, [{0: ac(P(0, 0))}])
    builder.add_edge(S(1, 0), T(2, 0))
    builder.add_edge(S(2, 0), T(1, 0))
    with pytest.raises(CycleError) as caught:
        builder.build()
    assert caught.value.transitions == [
        (T(1, 0), S(1, 0)),
        (S(1, 0), T(2, 0)),
        (T(2, 0), S(2, 0)),
        (S(2, 0), T(1, 0)),
    ]


@pytest.mark.parametrize("make", [doc_cycle, chain, diamond, scope_plus_one, product_loop, sparse])
def test_sound_graphs_have_no_cycles(make):
    assert make().find_cycles() == []


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        (S(1, 0), T(5, 0), "node 5 was not added"),
        (S(5, 0), T(2, 0), "node 5 was not added"),
        (S(1, 1), T(2, 0), r"Source\(1, 1\) does not exist"),
        (S(1, 0), T(2, 1), r"Target\(2, 1\) does not exist"),
        (S(1, 0), T(0, 0), r"Target\(0, 0\) does not exist"),
    ],
)
def test_edges_to_undeclared_nodes_or_ports_are_rejected(source, target, message):
    builder = Builder()
    builder.add_node(1, 0, 1)
    builder.add_node(2, 1, 0)
    builder.add_edge(source, target)
    with pytest.raises(ValueError, match=message):
        builder.build()


def test_connectivity_to_a_missing_output_is_rejected():
    builder = Builder()
    with pytest.raises(ValueError, match="node 1: input 0 connects to missing output 2"):
        builder.add_node(1, 1, 2, [{2: ac(0)}])


@pytest.mark.parametrize(
    ("node", "inputs", "outputs", "connectivity", "message"),
    [
        (1, 2, 1, [{0: ac(0)}], "connectivity has 1 rows for 2 inputs"),
        (-1, 0, 0, None, "must be non-negative"),
        (1, -1, 0, None, "must be non-negative"),
        (0, 1, 1, [{0: ac(0)}], "node 0 stands for the outside world"),
    ],
)
def test_add_node_rejects_bad_declarations(node, inputs, outputs, connectivity, message):
    with pytest.raises(ValueError, match=message):
        Builder().add_node(node, inputs, outputs, connectivity)


def test_builder_lists_nodes_edges_and_locations():
    builder = sparse()
    assert builder.nodes() == [
        (T(1, 0), S(1, 0), 0),
        (T(1, 1), S(1, 0), 0),
        (T(1, 1), S(1, 1), 3),
    ]
    assert builder.edges() == [
        (S(0, 0), T(1, 0)),
        (S(0, 1), T(1, 1)),
        (S(1, 0), T(0, 0)),
        (S(1, 1), T(0, 1)),
    ]
    assert builder.locations() == [
        T(0, 0),
        T(0, 1),
        S(0, 0),
        S(0, 1),
        T(1, 0),
        T(1, 1),
        S(1, 0),
        S(1, 1),
    ]


def test_empty_summary_antichain_means_no_path():
    builder = Builder()
    builder.add_node(1, 1, 2, [{0: ac(), 1: ac(2)}])
    assert builder.nodes() == [(T(1, 0), S(1, 1), 2)]


def test_add_node_replaces_an_earlier_declaration():
    builder = Builder()
    builder.add_node(1, 1, 1)
    builder.add_node(1, 2, 1, [{0: ac(4)}, {}])
    assert builder.nodes() == [(T(1, 0), S(1, 0), 4)]
    assert builder.locations() == [T(1, 0), T(1, 1), S(1, 0)]


def test_all_to_all():
    assert all_to_all(2, 2, 3) == [{0: ac(3), 1: ac(3)}, {0: ac(3), 1: ac(3)}]
    assert all_to_all(1, 0) == [{}]


# --------------------------------------------------------------------------- scope summary


def test_scope_summary_input_plus_one_output():
    _, scope_summary = scope_plus_one().build()
    assert scope_summary == [{0: ac(1)}]


def test_scope_summary_sparse():
    _, scope_summary = sparse().build()
    assert scope_summary == [{0: ac(0)}, {0: ac(0), 1: ac(3)}]


def test_scope_summary_input_that_reaches_no_output_is_empty():
    builder = Builder()
    builder.add_node(0, inputs=1, outputs=2)
    builder.add_node(1, 1, 1)
    builder.add_node(2, 1, 0)
    builder.add_edge(S(0, 0), T(1, 0))
    builder.add_edge(S(1, 0), T(0, 0))
    builder.add_edge(S(0, 1), T(2, 0))
    _, scope_summary = builder.build()
    assert scope_summary == [{0: ac(0)}, {}]


def test_scope_summary_parallel_paths_keep_the_smaller():
    builder = Builder()
    builder.add_node(0, inputs=1, outputs=1)
    builder.add_node(1, 1, 1, [{0: ac(0)}])
    builder.add_node(2, 1, 1, [{0: ac(1)}])
    builder.add_node(3, 2, 1)
    builder.add_edge(S(0, 0), T(1, 0))
    builder.add_edge(S(0, 0), T(2, 0))
    builder.add_edge(S(1, 0), T(3, 0))
    builder.add_edge(S(2, 0), T(3, 1))
    builder.add_edge(S(3, 0), T(0, 0))
    _, scope_summary = builder.build()
    assert scope_summary == [{0: ac(0)}]


def test_scope_summary_product_paths_keep_both():
    builder = Builder(identity=P(0, 0))
    builder.add_node(0, inputs=1, outputs=1)
    builder.add_node(1, 1, 1, [{0: ac(P(1, 0))}])
    builder.add_node(2, 1, 1, [{0: ac(P(0, 1))}])
    builder.add_node(3, 2, 1)
    builder.add_edge(S(0, 0), T(1, 0))
    builder.add_edge(S(0, 0), T(2, 0))
    builder.add_edge(S(1, 0), T(3, 0))
    builder.add_edge(S(2, 0), T(3, 1))
    builder.add_edge(S(3, 0), T(0, 0))
    _, scope_summary = builder.build()
    assert scope_summary == [{0: ac(P(1, 0), P(0, 1))}]


def test_scope_summary_product_loop():
    _, scope_summary = product_loop().build()
    assert scope_summary == [{0: ac(P(0, 0))}]


# --------------------------------------------------------------------------- Tracker


DOC_PUSHED = [
    (T(1, 0), 18, 1),
    (S(1, 0), 17, 1),
    (T(2, 0), 17, 1),
    (S(2, 0), 17, 1),
    (T(3, 0), 17, 1),
    (S(3, 0), 18, 1),
]


def test_doc_example_cycle_pushes_and_retracts():
    tracker, _ = doc_cycle().build()
    tracker.update_source(S(1, 0), 17, +1)
    tracker.propagate_all()
    assert drained(tracker) == DOC_PUSHED
    assert tracker.frontier(T(1, 0)) == ac(18)
    assert tracker.frontier(S(1, 0)) == ac(17)
    assert tracker.frontier(S(3, 0)) == ac(18)

    tracker.update_source(S(1, 0), 17, -1)
    tracker.propagate_all()
    assert drained(tracker) == negated(DOC_PUSHED)
    assert all(tracker.frontier(loc) == ac() for loc in tracker.locations())
    assert tracker.tracking_anything() is False


def test_chain_push_move_and_retract():
    tracker, _ = chain().build()
    tracker.update_source(S(1, 0), 5, +1)
    tracker.propagate_all()
    assert drained(tracker) == [
        (S(1, 0), 5, 1),
        (T(2, 0), 5, 1),
        (S(2, 0), 6, 1),
        (T(3, 0), 6, 1),
    ]

    # The capability moves from 5 to 7 in one batch.
    tracker.update_iter([(S(1, 0), 5, -1), (S(1, 0), 7, +1)])
    tracker.propagate_all()
    assert drained(tracker) == [
        (S(1, 0), 5, -1),
        (S(1, 0), 7, 1),
        (T(2, 0), 5, -1),
        (T(2, 0), 7, 1),
        (S(2, 0), 6, -1),
        (S(2, 0), 8, 1),
        (T(3, 0), 6, -1),
        (T(3, 0), 8, 1),
    ]
    assert tracker.frontier(T(3, 0)) == ac(8)

    tracker.update_source(S(1, 0), 7, -1)
    tracker.propagate_all()
    assert drained(tracker) == [
        (S(1, 0), 7, -1),
        (T(2, 0), 7, -1),
        (S(2, 0), 8, -1),
        (T(3, 0), 8, -1),
    ]


def test_a_later_time_behind_the_frontier_pushes_only_where_it_is_new():
    tracker, _ = chain().build()
    tracker.update_source(S(1, 0), 5, +1)
    tracker.propagate_all()
    tracker.drain_pushed()
    tracker.update_target(T(3, 0), 2, +1)
    tracker.update_source(S(1, 0), 9, +1)  # behind 5 everywhere: invisible
    tracker.propagate_all()
    assert drained(tracker) == [(T(3, 0), 2, 1), (T(3, 0), 6, -1)]
    assert tracker.pointstamp_frontier(T(3, 0)) == ac(2)
    assert tracker.pointstamp_frontier(S(1, 0)) == ac(5)
    assert tracker.pointstamp_frontier(S(2, 0)) == ac()


def test_diamond_keeps_the_minimum_where_paths_meet():
    tracker, _ = diamond().build()
    tracker.update_source(S(1, 0), 3, +1)
    tracker.propagate_all()
    expected = [
        (S(1, 0), 3, 1),
        (T(2, 0), 3, 1),
        (S(2, 0), 4, 1),
        (T(3, 0), 3, 1),
        (S(3, 0), 8, 1),
        (T(4, 0), 4, 1),
        (T(4, 1), 8, 1),
        (S(4, 0), 4, 1),
    ]
    assert drained(tracker) == expected
    assert tracker.frontier(S(4, 0)) == ac(4)

    tracker.update_source(S(1, 0), 3, -1)
    tracker.propagate_all()
    assert drained(tracker) == negated(expected)


def test_multiplicities_move_no_frontier_until_the_last_retraction():
    tracker, _ = chain().build()
    tracker.update_source(S(1, 0), 5, +2)
    tracker.propagate_all()
    first = drained(tracker)
    assert first == [(S(1, 0), 5, 1), (T(2, 0), 5, 1), (S(2, 0), 6, 1), (T(3, 0), 6, 1)]

    tracker.update_source(S(1, 0), 5, -1)
    tracker.propagate_all()
    assert tracker.drain_pushed() == []
    assert tracker.frontier(T(3, 0)) == ac(6)

    tracker.update_source(S(1, 0), 5, -1)
    tracker.propagate_all()
    assert drained(tracker) == negated(first)


def test_churn_that_cancels_within_one_propagate_yields_nothing():
    tracker, _ = chain().build()
    tracker.update_source(S(1, 0), 5, +1)
    tracker.update_source(S(1, 0), 5, -1)
    tracker.update_target(T(2, 0), 4, +3)
    tracker.update_target(T(2, 0), 4, -3)
    tracker.propagate_all()
    assert tracker.drain_pushed() == []
    assert tracker.drain_outputs() == []
    assert tracker.tracking_anything() is False


def test_capability_moving_between_sources_leaves_the_shared_target_alone():
    tracker, _ = diamond().build()
    tracker.update_source(S(2, 0), 4, +1)
    tracker.propagate_all()
    tracker.drain_pushed()
    # Node 4's output sees 4 either way: through input 0, or from its own capability.
    tracker.update_source(S(2, 0), 4, -1)
    tracker.update_source(S(4, 0), 4, +1)
    tracker.propagate_all()
    assert drained(tracker) == [(S(2, 0), 4, -1), (T(4, 0), 4, -1)]
    assert tracker.frontier(S(4, 0)) == ac(4)


def test_overflow_at_max_time_reaches_nothing_beyond():
    tracker, _ = chain().build()
    tracker.update_source(S(1, 0), MAX_TIME, +1)
    tracker.propagate_all()
    assert drained(tracker) == [(S(1, 0), MAX_TIME, 1), (T(2, 0), MAX_TIME, 1)]
    assert tracker.frontier(S(2, 0)) == ac()
    assert tracker.frontier(T(3, 0)) == ac()


def test_overflow_ends_a_loop():
    tracker, _ = doc_cycle().build()
    tracker.update_source(S(1, 0), MAX_TIME, +1)
    tracker.propagate_all()
    assert drained(tracker) == [
        (S(1, 0), MAX_TIME, 1),
        (T(2, 0), MAX_TIME, 1),
        (S(2, 0), MAX_TIME, 1),
        (T(3, 0), MAX_TIME, 1),
    ]


def test_product_loop_tracker():
    tracker, _ = product_loop().build()
    tracker.update_source(S(0, 0), P(3, 0), +1)
    tracker.propagate_all()
    assert drained(tracker) == [
        (T(0, 0), P(3, 0), 1),
        (S(0, 0), P(3, 0), 1),
        (T(1, 0), P(3, 0), 1),
        (T(1, 1), P(3, 1), 1),
        (S(1, 0), P(3, 0), 1),
        (T(2, 0), P(3, 0), 1),
        (S(2, 0), P(3, 1), 1),
    ]


def test_product_tracker_keeps_incomparable_times_and_exposes_dominated_ones():
    tracker, _ = product_loop().build()
    tracker.update_source(S(1, 0), P(0, 2), +1)
    tracker.update_source(S(1, 0), P(2, 0), +1)
    tracker.update_source(S(1, 0), P(1, 3), +1)
    tracker.propagate_all()
    assert tracker.frontier(T(0, 0)) == ac(P(0, 2), P(2, 0))
    assert tracker.frontier(T(1, 1)) == ac(P(0, 3), P(2, 1))
    tracker.drain_pushed()

    tracker.update_source(S(1, 0), P(0, 2), -1)
    tracker.propagate_all()
    assert drained(tracker) == [
        (T(0, 0), P(0, 2), -1),
        (T(0, 0), P(1, 3), 1),
        (T(1, 1), P(0, 3), -1),
        (T(1, 1), P(1, 4), 1),
        (S(1, 0), P(0, 2), -1),
        (S(1, 0), P(1, 3), 1),
        (T(2, 0), P(0, 2), -1),
        (T(2, 0), P(1, 3), 1),
        (S(2, 0), P(0, 3), -1),
        (S(2, 0), P(1, 4), 1),
    ]
    assert tracker.frontier(T(0, 0)) == ac(P(1, 3), P(2, 0))


def test_sparse_connectivity_in_the_tracker():
    tracker, _ = sparse().build()
    tracker.update_target(T(1, 0), 4, +1)
    tracker.propagate_all()
    assert drained(tracker) == [(T(0, 0), 4, 1), (T(1, 0), 4, 1), (S(1, 0), 4, 1)]
    assert tracker.frontier(S(1, 1)) == ac()
    assert tracker.frontier(T(0, 1)) == ac()
    assert tracker.drain_outputs() == [[(4, 1)], []]

    tracker.update_target(T(1, 1), 4, +1)
    tracker.propagate_all()
    assert drained(tracker) == [(T(0, 1), 7, 1), (T(1, 1), 4, 1), (S(1, 1), 7, 1)]
    assert tracker.drain_outputs() == [[(4, 1)], [(7, 1)]]


def test_drain_outputs_reports_internal_pointstamps_only():
    tracker, _ = scope_plus_one().build()
    tracker.update_source(S(0, 0), 5, +1)  # the scope input: the world outside
    tracker.propagate_all()
    assert tracker.frontier(T(1, 0)) == ac(5)
    assert tracker.frontier(T(0, 0)) == ac(6)
    assert drained(tracker) == [(T(0, 0), 6, 1), (S(0, 0), 5, 1), (T(1, 0), 5, 1), (S(1, 0), 6, 1)]
    assert tracker.drain_outputs() == [[]]

    tracker.update_source(S(1, 0), 7, +1)  # a capability inside the scope
    tracker.propagate_all()
    assert tracker.drain_outputs() == [[(7, 1)]]
    tracker.update_target(T(1, 0), 3, +1)  # a record in flight inside the scope
    tracker.propagate_all()
    assert tracker.drain_outputs() == [[(4, 1)]]
    assert tracker.drain_outputs() == [[]]

    tracker.update_source(S(1, 0), 7, -1)
    tracker.update_target(T(1, 0), 3, -1)
    tracker.propagate_all()
    assert tracker.drain_outputs() == [[(7, -1), (4, -1)]]


def test_drain_outputs_follows_the_pointstamp_frontier_not_every_count():
    tracker, _ = scope_plus_one().build()
    tracker.update_target(T(1, 0), 3, +2)
    tracker.update_target(T(1, 0), 9, +1)  # behind 3 at the same location
    tracker.propagate_all()
    assert tracker.drain_outputs() == [[(4, 1)]]
    tracker.update_target(T(1, 0), 3, -2)
    tracker.propagate_all()
    assert tracker.drain_outputs() == [[(4, -1), (10, 1)]]


def test_tracking_anything():
    tracker, _ = chain().build()
    assert tracker.tracking_anything() is False
    tracker.update_source(S(1, 0), 5, +1)
    assert tracker.tracking_anything() is True  # buffered
    tracker.propagate_all()
    assert tracker.tracking_anything() is True  # held
    tracker.update_source(S(1, 0), 5, -1)
    tracker.propagate_all()
    assert tracker.tracking_anything() is False


def test_tracking_anything_counts_a_scope_input_pointstamp():
    tracker, _ = scope_plus_one().build()
    tracker.update_source(S(0, 0), 0, +1)
    tracker.propagate_all()
    assert tracker.tracking_anything() is True


def test_tracking_anything_ignores_buffered_changes_that_cancel():
    tracker, _ = chain().build()
    tracker.update_source(S(1, 0), 5, +1)
    tracker.update_source(S(1, 0), 5, -1)
    assert tracker.tracking_anything() is False


def test_update_by_either_kind_of_location_and_index():
    tracker, _ = chain().build()
    assert tracker.locations() == [S(1, 0), T(2, 0), S(2, 0), T(3, 0)]
    assert tracker.index_of(T(2, 0)) == 1
    tracker.update(T(2, 0), 1, +1)
    tracker.update_at(tracker.index_of(S(1, 0)), 0, +1)
    tracker.propagate_all()
    assert tracker.frontier(T(2, 0)) == ac(0)
    assert tracker.pointstamp_frontier(T(2, 0)) == ac(1)
    assert tracker.frontier(T(3, 0)) == ac(1)


@pytest.mark.parametrize("make", [doc_cycle, chain, diamond, scope_plus_one, sparse])
def test_tracker_frontiers_match_the_reference(make):
    builder = make()
    tracker, _ = builder.build()
    times = [(location, 2 + i) for i, location in enumerate(builder.locations())][::3]
    tracker.update_iter((location, time, +1) for location, time in times)
    tracker.propagate_all()
    expected = reference.frontier(builder.nodes(), builder.edges(), times)
    for location in builder.locations():
        assert tracker.frontier(location) == expected.get(location, Antichain())
