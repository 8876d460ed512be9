"""ChangeBatch: consolidated (item, diff) updates."""

import pytest

from operators.progress.change_batch import ChangeBatch


def test_updates_to_one_item_are_summed():
    batch = ChangeBatch()
    batch.update("a", 2)
    batch.update("b", 1)
    batch.update("a", 3)
    assert list(batch) == [("a", 5), ("b", 1)]
    assert batch.count_for("a") == 5


def test_cancelled_items_disappear():
    batch = ChangeBatch()
    batch.update("a", 2)
    batch.update("b", 1)
    batch.update("a", -2)
    assert list(batch) == [("b", 1)]
    assert len(batch) == 1
    assert batch.count_for("a") == 0


def test_entries_come_out_in_order_of_first_appearance():
    batch = ChangeBatch([("b", 1), ("a", 1), ("c", 4), ("b", 1)])
    assert list(batch) == [("b", 2), ("a", 1), ("c", 4)]


def test_lone_zero_entry_disappears():
    batch = ChangeBatch([("x", 0)])
    assert list(batch) == []
    assert len(batch) == 0
    assert not batch
    assert batch.is_empty()
    assert batch.drain() == []


def test_empty_batch():
    batch = ChangeBatch()
    assert batch.is_empty()
    assert not batch
    assert batch.count_for("missing") == 0
    assert repr(batch) == "ChangeBatch([])"


def test_extend_and_repr():
    batch = ChangeBatch()
    batch.extend([(3, 1), (4, 2), (3, 1)])
    assert repr(batch) == "ChangeBatch([(3, 2), (4, 2)])"
    assert bool(batch) is True


def test_drain_returns_consolidated_updates_and_empties():
    batch = ChangeBatch([("c", 3), ("b", 1), ("b", -1)])
    assert batch.drain() == [("c", 3)]
    assert batch.is_empty()
    assert batch.drain() == []
    batch.update("d", 1)
    assert batch.drain() == [("d", 1)]


def test_drain_into_an_empty_batch_moves_everything():
    source = ChangeBatch([("a", 1), ("b", 2)])
    target = ChangeBatch()
    source.drain_into(target)
    assert list(target) == [("a", 1), ("b", 2)]
    assert source.is_empty()
    source.update("z", 1)
    assert list(target) == [("a", 1), ("b", 2)]  # the two batches do not share state


def test_drain_into_a_non_empty_batch_consolidates():
    source = ChangeBatch([("a", -1), ("b", 2)])
    target = ChangeBatch([("a", 1), ("c", 5)])
    source.drain_into(target)
    assert list(target) == [("c", 5), ("b", 2)]
    assert target.count_for("a") == 0
    assert source.is_empty()
    assert list(source) == []


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ([("a", 1), ("b", 2)], [("b", 2), ("a", 1)], True),
        ([("a", 1), ("b", 0)], [("a", 1)], True),
        ([("a", 1), ("a", -1)], [], True),
        ([("a", 1)], [("a", 2)], False),
        ([("a", 1)], [("b", 1)], False),
    ],
)
def test_equality_ignores_order_and_zero_totals(a, b, equal):
    assert (ChangeBatch(a) == ChangeBatch(b)) is equal


def test_change_batch_is_not_equal_to_a_list_and_not_hashable():
    assert ChangeBatch([("a", 1)]) != [("a", 1)]
    with pytest.raises(TypeError):
        hash(ChangeBatch())


def test_clear_forgets_everything():
    batch = ChangeBatch([("a", 1)])
    batch.clear()
    assert batch.is_empty()
    assert batch.count_for("a") == 0
