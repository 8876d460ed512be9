"""Antichain (fixed frontiers) and MutableAntichain (counted frontiers)."""

import pytest

from operators.progress.antichain import Antichain, MutableAntichain
from operators.progress.timestamp import Product

# --------------------------------------------------------------------------- Antichain


def test_empty_antichain_means_everything_is_complete():
    chain = Antichain()
    assert chain.is_empty()
    assert not chain
    assert len(chain) == 0
    assert chain.elements() == ()
    assert list(chain) == []
    assert chain.less_equal(0) is False
    assert chain.less_than(5) is False
    assert repr(chain) == "Antichain([])"


def test_insert_into_empty_antichain():
    chain = Antichain()
    assert chain.insert(5) is True
    assert chain.elements() == (5,)
    assert not chain.is_empty()


@pytest.mark.parametrize(
    ("start", "element", "changed", "after"),
    [
        ([5], 7, False, {5}),  # dominated: rejected
        ([5], 5, False, {5}),  # already present: rejected
        ([5], 3, True, {3}),  # smaller: replaces
        ([Product(0, 3), Product(2, 0)], Product(1, 4), False, {Product(0, 3), Product(2, 0)}),
        ([Product(0, 3), Product(2, 0)], Product(0, 1), True, {Product(0, 1), Product(2, 0)}),
        (
            [Product(0, 3), Product(2, 0)],
            Product(1, 1),
            True,
            {Product(0, 3), Product(2, 0), Product(1, 1)},
        ),
        ([Product(0, 3), Product(2, 0)], Product(0, 0), True, {Product(0, 0)}),
    ],
)
def test_insert_returns_whether_it_changed_and_keeps_the_minimal_elements(
    start, element, changed, after
):
    chain = Antichain(start)
    assert chain.insert(element) is changed
    assert set(chain.elements()) == after
    assert len(chain) == len(after)


def test_constructor_keeps_only_minimal_integers():
    assert Antichain([5, 3, 7, 3]).elements() == (3,)


def test_incomparable_products_form_a_two_element_antichain():
    chain = Antichain([Product(1, 2), Product(2, 1), Product(2, 2)])
    assert sorted(chain) == [Product(1, 2), Product(2, 1)]
    assert Product(1, 2) in chain
    assert Product(2, 2) not in chain
    assert repr(chain) == ("Antichain([Product(outer=1, inner=2), Product(outer=2, inner=1)])")


def test_extend_reports_whether_any_insert_changed():
    chain = Antichain([5])
    assert chain.extend([7, 8, 5]) is False
    assert chain.elements() == (5,)
    assert chain.extend([7, 2, 9]) is True
    assert chain.elements() == (2,)


def test_from_elements_trusts_its_input():
    assert Antichain.from_elements([3, 5]).elements() == (3, 5)


@pytest.mark.parametrize(
    ("elements", "time", "le", "lt"),
    [
        ([3], 3, True, False),
        ([3], 4, True, True),
        ([3], 2, False, False),
        ([Product(0, 3), Product(2, 0)], Product(2, 2), True, True),
        ([Product(0, 3), Product(2, 0)], Product(0, 3), True, False),
        # Incomparable with both elements: complete at this frontier.
        ([Product(0, 3), Product(2, 0)], Product(1, 2), False, False),
        ([Product(0, 3), Product(2, 0)], Product(0, 1), False, False),
    ],
)
def test_less_equal_and_less_than(elements, time, le, lt):
    chain = Antichain(elements)
    assert chain.less_equal(time) is le
    assert chain.less_than(time) is lt


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ([Product(0, 1), Product(1, 0)], [Product(1, 0), Product(0, 1)], True),
        ([Product(0, 1), Product(1, 0)], [Product(0, 1)], False),
        ([], [], True),
        ([3], [4], False),
        ([3, 5], [3], True),
        ([3], [], False),
    ],
)
def test_equality_is_set_equality(a, b, equal):
    assert (Antichain(a) == Antichain(b)) is equal
    assert (Antichain(a) != Antichain(b)) is not equal


def test_antichain_is_not_equal_to_a_list_and_not_hashable():
    assert Antichain([3]) != [3]
    with pytest.raises(TypeError):
        hash(Antichain([3]))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1], [3], True),
        ([3], [1], False),
        ([3], [3], True),
        ([3], [], True),  # everything dominates the empty antichain
        ([], [3], False),
        ([], [], True),
        ([Product(0, 1), Product(1, 0)], [Product(1, 1)], True),
        ([Product(0, 1)], [Product(1, 0)], False),
        ([Product(0, 0)], [Product(0, 1), Product(1, 0)], True),
        ([Product(0, 1)], [Product(1, 1), Product(2, 0)], False),
    ],
)
def test_dominates(a, b, expected):
    assert Antichain(a).dominates(Antichain(b)) is expected


# --------------------------------------------------------------------------- MutableAntichain


def test_multiplicity_second_retraction_moves_the_frontier():
    counts = MutableAntichain()
    assert counts.update_iter([(3, 2)]) == [(3, 1)]
    assert counts.count_for(3) == 2
    assert counts.update_iter([(3, -1)]) == []
    assert counts.count_for(3) == 1
    assert counts.frontier() == Antichain([3])
    assert counts.update_iter([(3, -1)]) == [(3, -1)]
    assert counts.count_for(3) == 0
    assert counts.is_empty()
    assert counts.frontier() == Antichain()


def test_multiplicity_retraction_exposes_the_next_time():
    counts = MutableAntichain([(3, 2), (5, 1)])
    assert counts.frontier_elements() == [3]
    assert counts.update_iter([(3, -1)]) == []
    assert counts.update_iter([(3, -1)]) == [(3, -1), (5, 1)]
    assert counts.frontier() == Antichain([5])


def test_raising_a_frontier_count_changes_nothing():
    counts = MutableAntichain([(4, 1)])
    assert counts.update_iter([(4, 1)]) == []
    assert counts.count_for(4) == 2


def test_negative_counts_are_tolerated_and_never_in_the_frontier():
    counts = MutableAntichain()
    assert counts.update_iter([(5, -1)]) == []
    assert counts.count_for(5) == -1
    assert counts.frontier() == Antichain()
    assert counts.update_iter([(5, 1)]) == []  # count back to zero
    assert counts.count_for(5) == 0
    assert counts.is_empty()
    assert counts.update_iter([(5, 1)]) == [(5, 1)]
    assert counts.count_for(5) == 1
    assert counts.frontier() == Antichain([5])


def test_negative_count_below_a_positive_time_does_not_hide_it():
    counts = MutableAntichain()
    assert counts.update_iter([(3, -1), (5, 1)]) == [(5, 1)]
    assert counts.frontier() == Antichain([5])
    assert counts.update_iter([(3, 1)]) == []  # 3 is back to zero, not positive
    assert counts.update_iter([(3, 1)]) == [(3, 1), (5, -1)]
    assert counts.frontier() == Antichain([3])


def test_dominated_time_is_invisible_until_the_frontier_retreats():
    counts = MutableAntichain([(3, 1)])
    assert counts.update_iter([(7, 1)]) == []
    assert counts.frontier() == Antichain([3])
    assert counts.update_iter([(3, -1)]) == [(3, -1), (7, 1)]


def test_smaller_time_displaces_larger_integers():
    counts = MutableAntichain([(5, 1), (8, 1)])
    assert counts.update_iter([(2, 1)]) == [(2, 1), (5, -1)]
    assert counts.frontier() == Antichain([2])


def test_smaller_product_displaces_several_incomparable_elements():
    counts = MutableAntichain([(Product(1, 3), 1), (Product(3, 1), 1)])
    assert counts.frontier() == Antichain([Product(1, 3), Product(3, 1)])
    changes = counts.update_iter([(Product(1, 1), 1)])
    assert sorted(changes) == [
        (Product(1, 1), 1),
        (Product(1, 3), -1),
        (Product(3, 1), -1),
    ]
    assert counts.frontier() == Antichain([Product(1, 1)])


def test_incomparable_products_coexist_and_removing_one_exposes_a_dominated_one():
    counts = MutableAntichain()
    assert counts.update_iter([(Product(0, 2), 1)]) == [(Product(0, 2), 1)]
    assert counts.update_iter([(Product(2, 0), 1)]) == [(Product(2, 0), 1)]
    assert counts.update_iter([(Product(1, 3), 1)]) == []  # above (0, 2)
    assert counts.frontier() == Antichain([Product(0, 2), Product(2, 0)])
    assert counts.update_iter([(Product(0, 2), -1)]) == [
        (Product(0, 2), -1),
        (Product(1, 3), 1),
    ]
    assert counts.frontier() == Antichain([Product(1, 3), Product(2, 0)])


def test_update_iter_reports_the_net_change_of_one_batch():
    counts = MutableAntichain([(4, 1)])
    assert counts.update_iter([(2, 1), (2, -1)]) == []
    assert counts.count_for(2) == 0
    assert counts.frontier() == Antichain([4])
    assert counts.update_iter([(4, -1), (6, 1)]) == [(4, -1), (6, 1)]
    assert counts.update_iter([(6, -1), (6, 1)]) == []
    assert counts.frontier() == Antichain([6])


def test_zero_diffs_are_ignored():
    counts = MutableAntichain()
    assert counts.update_iter([(5, 0)]) == []
    assert counts.count_for(5) == 0
    assert counts.is_empty()


def test_mutable_antichain_queries():
    counts = MutableAntichain([(Product(0, 3), 1), (Product(2, 0), 2)])
    assert counts.less_equal(Product(2, 0)) is True
    assert counts.less_than(Product(2, 0)) is False
    assert counts.less_than(Product(2, 1)) is True
    assert counts.less_equal(Product(1, 2)) is False
    assert counts.count_for(Product(2, 0)) == 2
    assert counts.count_for(Product(9, 9)) == 0
    assert repr(MutableAntichain([(3, 1)])) == "MutableAntichain(frontier=Antichain([3]))"


def test_frontier_returns_a_fresh_antichain():
    counts = MutableAntichain([(3, 1)])
    snapshot = counts.frontier()
    snapshot.insert(0)
    assert counts.frontier() == Antichain([3])
    assert counts.frontier_elements() == [3]


def test_releasing_held_int_times_in_order_with_new_ones_arriving() -> None:
    counts: MutableAntichain[int] = MutableAntichain([(t, 1) for t in range(0, 100, 10)])
    # Release 0, 10, 20, 30, 40 in order.
    seen = [counts.update_iter([(t, -1)]) for t in range(0, 50, 10)]
    assert seen == [
        [(0, -1), (10, 1)],
        [(10, -1), (20, 1)],
        [(20, -1), (30, 1)],
        [(30, -1), (40, 1)],
        [(40, -1), (50, 1)],
    ]
    # A time that becomes positive after the sorted release order was taken is not missed,
    # nor is one that was released and comes back, nor a negative count made positive.
    assert counts.update_iter([(55, 1)]) == []
    assert counts.update_iter([(50, -1)]) == [(50, -1), (55, 1)]
    assert counts.update_iter([(70, -1), (65, -1)]) == []
    assert counts.update_iter([(65, 2)]) == []  # -1 + 2: positive again
    assert counts.update_iter([(70, 1)]) == []
    assert counts.update_iter([(55, -1)]) == [(55, -1), (60, 1)]
    assert counts.update_iter([(60, -1)]) == [(60, -1), (65, 1)]
    assert counts.update_iter([(65, -1)]) == [(65, -1), (70, 1)]
    assert [counts.update_iter([(t, -1)]) for t in (70, 80)] == [
        [(70, -1), (80, 1)],
        [(80, -1), (90, 1)],
    ]
    assert counts.update_iter([(90, -1)]) == [(90, -1)]
    assert counts.frontier() == Antichain([])
