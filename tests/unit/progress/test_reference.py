"""The reference fixpoints: find_cycles, frontier and summarize."""

import pytest

from operators.progress.antichain import Antichain
from operators.progress.location import Source, Target
from operators.progress.reference import find_cycles, frontier, summarize
from operators.progress.timestamp import MAX_TIME, Product

S, T = Source, Target
P = Product


def ac(*elements):
    return Antichain(elements)


# --------------------------------------------------------------------------- graphs

# The seed's doc example: node 1 passes times through, node 2 adds one; a loop.
LOOP_NODES = [(T(1, 0), S(1, 0), 0), (T(2, 0), S(2, 0), 1)]
LOOP_EDGES = [(S(1, 0), T(2, 0)), (S(2, 0), T(1, 0))]

# A -> [B -> C -> B] -> D, where B (2 inputs) and C pass times through unchanged.
BC_LOOP_NODES = [
    (T(2, 0), S(2, 0), 0),
    (T(2, 1), S(2, 0), 0),
    (T(3, 0), S(3, 0), 0),
]
BC_LOOP_EDGES = [
    (S(1, 0), T(2, 0)),
    (S(2, 0), T(3, 0)),
    (S(3, 0), T(2, 1)),
    (S(2, 0), T(4, 0)),
]

# Chain: 1 -> 2 (+2) -> 3.
CHAIN_NODES = [(T(2, 0), S(2, 0), 2)]
CHAIN_EDGES = [(S(1, 0), T(2, 0)), (S(2, 0), T(3, 0))]

# Diamond: 1 feeds 2 (+1) and 3 (+5), which meet at the two inputs of 4.
DIAMOND_NODES = [
    (T(2, 0), S(2, 0), 1),
    (T(3, 0), S(3, 0), 5),
    (T(4, 0), S(4, 0), 0),
    (T(4, 1), S(4, 0), 0),
]
DIAMOND_EDGES = [
    (S(1, 0), T(2, 0)),
    (S(1, 0), T(3, 0)),
    (S(2, 0), T(4, 0)),
    (S(3, 0), T(4, 1)),
]

# An iterative scope: the scope input enters node 1 (a concat), node 2 is the feedback.
PRODUCT_LOOP_NODES = [
    (T(1, 0), S(1, 0), P(0, 0)),
    (T(1, 1), S(1, 0), P(0, 0)),
    (T(2, 0), S(2, 0), P(0, 1)),
]
PRODUCT_LOOP_EDGES = [
    (S(0, 0), T(1, 0)),
    (S(1, 0), T(2, 0)),
    (S(2, 0), T(1, 1)),
    (S(1, 0), T(0, 0)),
]

# Node 1 has two inputs and two outputs; input 0 reaches only output 0.
SPARSE_NODES = [
    (T(1, 0), S(1, 0), 0),
    (T(1, 1), S(1, 0), 0),
    (T(1, 1), S(1, 1), 3),
]


# --------------------------------------------------------------------------- find_cycles


def test_find_cycles_seed_example_is_sound():
    assert find_cycles(LOOP_NODES, LOOP_EDGES) == set()


def test_find_cycles_identity_self_loop():
    cycle = find_cycles([(T(1, 0), S(1, 0), 0)], [(S(1, 0), T(1, 0))])
    assert cycle == {(S(1, 0), T(1, 0)), (T(1, 0), S(1, 0))}


def test_find_cycles_reports_only_the_transitions_on_the_cycle():
    assert find_cycles(BC_LOOP_NODES, BC_LOOP_EDGES) == {
        (S(2, 0), T(3, 0)),
        (T(3, 0), S(3, 0)),
        (S(3, 0), T(2, 1)),
        (T(2, 1), S(2, 0)),
    }


def test_find_cycles_accepts_the_same_loop_with_one_increment():
    nodes = [(T(2, 0), S(2, 0), 0), (T(2, 1), S(2, 0), 0), (T(3, 0), S(3, 0), 1)]
    assert find_cycles(nodes, BC_LOOP_EDGES) == set()


def test_find_cycles_reports_every_non_advancing_cycle():
    nodes = [(T(1, 0), S(1, 0), 0), (T(2, 0), S(2, 0), 0), (T(3, 0), S(3, 0), 1)]
    edges = [(S(1, 0), T(1, 0)), (S(2, 0), T(2, 0)), (S(3, 0), T(3, 0))]
    assert find_cycles(nodes, edges) == {
        (S(1, 0), T(1, 0)),
        (T(1, 0), S(1, 0)),
        (S(2, 0), T(2, 0)),
        (T(2, 0), S(2, 0)),
    }


@pytest.mark.parametrize(
    ("nodes", "edges"),
    [
        ([], []),
        (CHAIN_NODES, CHAIN_EDGES),
        (DIAMOND_NODES, DIAMOND_EDGES),
        (PRODUCT_LOOP_NODES, PRODUCT_LOOP_EDGES),
        (SPARSE_NODES, [(S(1, 1), T(1, 0))]),
    ],
)
def test_find_cycles_is_empty_for_sound_graphs(nodes, edges):
    assert find_cycles(nodes, edges) == set()


def test_find_cycles_product_loop_without_increment():
    nodes = [(T(1, 0), S(1, 0), P(0, 0)), (T(2, 0), S(2, 0), P(0, 0))]
    edges = [(S(1, 0), T(2, 0)), (S(2, 0), T(1, 0))]
    assert find_cycles(nodes, edges) == {
        (T(1, 0), S(1, 0)),
        (S(1, 0), T(2, 0)),
        (T(2, 0), S(2, 0)),
        (S(2, 0), T(1, 0)),
    }


def test_find_cycles_sparse_connectivity_breaks_a_would_be_cycle():
    # Output 1 feeds input 0, but input 0 reaches only output 0: no cycle.
    nodes = [(T(1, 0), S(1, 0), 0), (T(1, 1), S(1, 1), 0)]
    assert find_cycles(nodes, [(S(1, 1), T(1, 0))]) == set()
    # Feeding output 0 back into input 0 does close one.
    assert find_cycles(nodes, [(S(1, 0), T(1, 0))]) == {
        (S(1, 0), T(1, 0)),
        (T(1, 0), S(1, 0)),
    }


# --------------------------------------------------------------------------- frontier


def test_frontier_seed_example_loop():
    assert frontier(LOOP_NODES, LOOP_EDGES, [(S(1, 0), 5)]) == {
        S(1, 0): ac(5),
        T(2, 0): ac(5),
        S(2, 0): ac(6),
        T(1, 0): ac(6),
    }


def test_frontier_seed_example_edge_only():
    reach = frontier([], [(S(1, 0), T(2, 0))], [(S(1, 0), 3), (T(2, 0), 1)])
    assert reach == {S(1, 0): ac(3), T(2, 0): ac(1)}


def test_frontier_chain():
    assert frontier(CHAIN_NODES, CHAIN_EDGES, [(S(1, 0), 3)]) == {
        S(1, 0): ac(3),
        T(2, 0): ac(3),
        S(2, 0): ac(5),
        T(3, 0): ac(5),
    }


def test_frontier_from_the_middle_of_a_chain_does_not_flow_upstream():
    assert frontier(CHAIN_NODES, CHAIN_EDGES, [(T(2, 0), 7)]) == {
        T(2, 0): ac(7),
        S(2, 0): ac(9),
        T(3, 0): ac(9),
    }


def test_frontier_diamond_keeps_the_minimum_where_paths_meet():
    assert frontier(DIAMOND_NODES, DIAMOND_EDGES, [(S(1, 0), 3)]) == {
        S(1, 0): ac(3),
        T(2, 0): ac(3),
        T(3, 0): ac(3),
        S(2, 0): ac(4),
        S(3, 0): ac(8),
        T(4, 0): ac(4),
        T(4, 1): ac(8),
        S(4, 0): ac(4),
    }


def test_frontier_keeps_the_minimum_of_several_times():
    reach = frontier(CHAIN_NODES, CHAIN_EDGES, [(S(1, 0), 3), (S(1, 0), 1), (T(3, 0), 2)])
    assert reach[S(1, 0)] == ac(1)
    assert reach[S(2, 0)] == ac(3)
    assert reach[T(3, 0)] == ac(2)


def test_frontier_product_loop():
    assert frontier(PRODUCT_LOOP_NODES, PRODUCT_LOOP_EDGES, [(S(0, 0), P(3, 0))]) == {
        S(0, 0): ac(P(3, 0)),
        T(1, 0): ac(P(3, 0)),
        S(1, 0): ac(P(3, 0)),
        T(2, 0): ac(P(3, 0)),
        S(2, 0): ac(P(3, 1)),
        T(1, 1): ac(P(3, 1)),
        T(0, 0): ac(P(3, 0)),
    }


def test_frontier_keeps_incomparable_products():
    reach = frontier(
        PRODUCT_LOOP_NODES, PRODUCT_LOOP_EDGES, [(T(2, 0), P(0, 5)), (T(1, 0), P(2, 0))]
    )
    assert reach[S(1, 0)] == ac(P(0, 6), P(2, 0))
    assert reach[T(0, 0)] == ac(P(0, 6), P(2, 0))
    assert reach[S(2, 0)] == ac(P(0, 6), P(2, 1))


def test_frontier_sparse_connectivity():
    assert frontier(SPARSE_NODES, [], [(T(1, 0), 4)]) == {T(1, 0): ac(4), S(1, 0): ac(4)}
    assert frontier(SPARSE_NODES, [], [(T(1, 1), 4)]) == {
        T(1, 1): ac(4),
        S(1, 0): ac(4),
        S(1, 1): ac(7),
    }


def test_frontier_overflow_reaches_nothing_beyond():
    nodes = [(T(2, 0), S(2, 0), 1)]
    assert frontier(nodes, CHAIN_EDGES, [(S(1, 0), MAX_TIME)]) == {
        S(1, 0): ac(MAX_TIME),
        T(2, 0): ac(MAX_TIME),
    }
    assert frontier(nodes, CHAIN_EDGES, [(S(1, 0), MAX_TIME - 1)]) == {
        S(1, 0): ac(MAX_TIME - 1),
        T(2, 0): ac(MAX_TIME - 1),
        S(2, 0): ac(MAX_TIME),
        T(3, 0): ac(MAX_TIME),
    }


def test_frontier_product_overflow_in_the_inner_coordinate():
    reach = frontier(PRODUCT_LOOP_NODES, PRODUCT_LOOP_EDGES, [(T(2, 0), P(0, MAX_TIME))])
    assert reach == {T(2, 0): ac(P(0, MAX_TIME))}


def test_frontier_with_no_times_is_empty():
    assert frontier(LOOP_NODES, LOOP_EDGES, []) == {}


# --------------------------------------------------------------------------- summarize

# Scope input -> node 1 (+1) -> scope output.
PLUS_ONE_NODES = [(T(1, 0), S(1, 0), 1)]
PLUS_ONE_EDGES = [(S(0, 0), T(1, 0)), (S(1, 0), T(0, 0))]


def test_summarize_seed_example():
    assert summarize(PLUS_ONE_NODES, PLUS_ONE_EDGES)[S(0, 0)] == {T(0, 0): ac(1)}


def test_summarize_gives_every_location_its_path_to_the_output():
    assert summarize(PLUS_ONE_NODES, PLUS_ONE_EDGES) == {
        T(0, 0): {T(0, 0): ac(0)},
        S(1, 0): {T(0, 0): ac(0)},
        T(1, 0): {T(0, 0): ac(1)},
        S(0, 0): {T(0, 0): ac(1)},
    }


def test_summarize_chain_composes_summaries():
    nodes = [(T(1, 0), S(1, 0), 2), (T(2, 0), S(2, 0), 3)]
    edges = [(S(0, 0), T(1, 0)), (S(1, 0), T(2, 0)), (S(2, 0), T(0, 0))]
    result = summarize(nodes, edges)
    assert result[S(0, 0)] == {T(0, 0): ac(5)}
    assert result[S(1, 0)] == {T(0, 0): ac(3)}


def test_summarize_parallel_paths_keep_the_smaller_summary():
    nodes = [(T(1, 0), S(1, 0), 0), (T(2, 0), S(2, 0), 1)]
    edges = [
        (S(0, 0), T(1, 0)),
        (S(0, 0), T(2, 0)),
        (S(1, 0), T(0, 0)),
        (S(2, 0), T(0, 0)),
    ]
    assert summarize(nodes, edges)[S(0, 0)] == {T(0, 0): ac(0)}


def test_summarize_product_paths_keep_incomparable_summaries():
    nodes = [(T(1, 0), S(1, 0), P(1, 0)), (T(2, 0), S(2, 0), P(0, 1))]
    edges = [
        (S(0, 0), T(1, 0)),
        (S(0, 0), T(2, 0)),
        (S(1, 0), T(0, 0)),
        (S(2, 0), T(0, 0)),
    ]
    result = summarize(nodes, edges, identity=P(0, 0))
    assert result[S(0, 0)] == {T(0, 0): ac(P(1, 0), P(0, 1))}


def test_summarize_product_loop_uses_the_shortest_path():
    result = summarize(PRODUCT_LOOP_NODES, PRODUCT_LOOP_EDGES, identity=P(0, 0))
    assert result[S(0, 0)] == {T(0, 0): ac(P(0, 0))}
    assert result[T(2, 0)] == {T(0, 0): ac(P(0, 1))}
    assert result[T(1, 1)] == {T(0, 0): ac(P(0, 0))}


def test_summarize_integer_loop_through_feedback():
    nodes = [(T(1, 0), S(1, 0), 0), (T(1, 1), S(1, 0), 0), (T(2, 0), S(2, 0), 1)]
    edges = [
        (S(0, 0), T(1, 0)),
        (S(1, 0), T(2, 0)),
        (S(2, 0), T(1, 1)),
        (S(1, 0), T(0, 0)),
    ]
    result = summarize(nodes, edges)
    assert result[S(0, 0)] == {T(0, 0): ac(0)}
    assert result[S(2, 0)] == {T(0, 0): ac(0)}
    assert result[T(2, 0)] == {T(0, 0): ac(1)}


def test_summarize_sparse_connectivity_and_several_outputs():
    # Scope inputs 0 and 1 enter node 1's inputs 0 and 1; its outputs leave as outputs 0, 1.
    edges = [
        (S(0, 0), T(1, 0)),
        (S(0, 1), T(1, 1)),
        (S(1, 0), T(0, 0)),
        (S(1, 1), T(0, 1)),
    ]
    result = summarize(SPARSE_NODES, edges)
    assert result[S(0, 0)] == {T(0, 0): ac(0)}
    assert result[S(0, 1)] == {T(0, 0): ac(0), T(0, 1): ac(3)}


def test_summarize_omits_an_input_that_reaches_no_output():
    nodes = [(T(1, 0), S(1, 0), 0)]
    edges = [(S(0, 0), T(1, 0)), (S(1, 0), T(0, 0)), (S(0, 1), T(2, 0))]
    result = summarize(nodes, edges)
    assert result[S(0, 0)] == {T(0, 0): ac(0)}
    assert S(0, 1) not in result
    assert T(2, 0) not in result


def test_summarize_drops_paths_whose_composition_overflows():
    nodes = [(T(1, 0), S(1, 0), MAX_TIME), (T(2, 0), S(2, 0), 1)]
    edges = [(S(0, 0), T(1, 0)), (S(1, 0), T(2, 0)), (S(2, 0), T(0, 0))]
    result = summarize(nodes, edges)
    assert result[S(1, 0)] == {T(0, 0): ac(1)}
    assert T(1, 0) not in result
    assert S(0, 0) not in result
