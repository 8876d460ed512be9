"""ChangeBatch against a dict model, as a stateful test over two batches."""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from operators.progress import ChangeBatch, Product

items = st.one_of(st.integers(0, 4), st.builds(Product, st.integers(0, 1), st.integers(0, 1)))
diffs = st.integers(-3, 3)
updates = st.lists(st.tuples(items, diffs), max_size=6)
which = st.sampled_from([0, 1])

Model = dict[Hashable, int]


def add(model: Model, item: Hashable, diff: int) -> None:
    total = model.get(item, 0) + diff
    if total:
        model[item] = total
    else:
        model.pop(item, None)


class ChangeBatchMachine(RuleBasedStateMachine):
    """Two batches and their models: a dict of the non-zero totals."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[ChangeBatch[Hashable]] = [ChangeBatch(), ChangeBatch()]
        self.models: list[Model] = [{}, {}]

    def teardown(self) -> None:
        self.matches_the_model()

    @rule(k=which, item=items, diff=diffs)
    def update(self, k: int, item: Hashable, diff: int) -> None:
        self.batches[k].update(item, diff)
        add(self.models[k], item, diff)

    @rule(k=which, changes=updates)
    def extend(self, k: int, changes: list[tuple[Hashable, int]]) -> None:
        self.batches[k].extend(changes)
        for item, diff in changes:
            add(self.models[k], item, diff)

    @rule(k=which)
    def drain(self, k: int) -> None:
        drained = self.batches[k].drain()
        assert len({item for item, _ in drained}) == len(drained), "drain is not consolidated"
        assert dict(drained) == self.models[k]
        self.models[k] = {}

    @rule(k=which)
    def drain_into_other(self, k: int) -> None:
        self.batches[k].drain_into(self.batches[1 - k])
        for item, diff in self.models[k].items():
            add(self.models[1 - k], item, diff)
        self.models[k] = {}

    @rule(k=which)
    def clear(self, k: int) -> None:
        self.batches[k].clear()
        self.models[k] = {}

    @precondition(lambda self: self.models[0] or self.models[1])
    @rule(k=which, data=st.data())
    def cancel_an_item(self, k: int, data: st.DataObject) -> None:
        # Bring one item's total back to exactly zero, the case consolidation must drop.
        model = self.models[k] or self.models[1 - k]
        item = data.draw(st.sampled_from(sorted(model, key=repr)))
        diff = -self.models[k].get(item, 0)
        self.batches[k].update(item, diff)
        add(self.models[k], item, diff)

    # A rule, not an invariant: every read consolidates the batch, so checking after each
    # step would hide a drain or drain_into that forgets to drop entries cancelled to zero.
    @rule()
    def matches_the_model(self) -> None:
        for batch, model in zip(self.batches, self.models, strict=True):
            entries = list(batch)
            assert dict(entries) == model
            assert len(entries) == len(model), f"duplicate entries: {entries}"
            assert all(diff != 0 for _, diff in entries), f"zero entries: {entries}"
            assert len(batch) == len(model)
            assert bool(batch) == bool(model)
            assert batch.is_empty() == (not model)
            for item in [*model, 0, 4, Product(0, 0)]:
                assert batch.count_for(item) == model.get(item, 0)
        assert (self.batches[0] == self.batches[1]) == (self.models[0] == self.models[1])


TestChangeBatch = ChangeBatchMachine.TestCase
TestChangeBatch.settings = settings(max_examples=150, stateful_step_count=25, deadline=None)


@settings(max_examples=200, deadline=None)
@given(updates, updates)
def test_construction_and_extend_agree(first: list[tuple[Hashable, int]], more: list) -> None:
    model: Model = {}
    for item, diff in first + more:
        add(model, item, diff)
    built = ChangeBatch(first)
    built.extend(more)
    one_by_one: ChangeBatch[Hashable] = ChangeBatch()
    for item, diff in first + more:
        one_by_one.update(item, diff)
    assert built == one_by_one
    assert dict(built) == model
    assert list(built) == list(one_by_one), "same updates, different order"
    assert built.drain() == list(one_by_one)
    assert built.is_empty()
