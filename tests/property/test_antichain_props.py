"""Antichain and MutableAntichain against brute-force models (minimal elements of a set)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from progress_strategies import minimal, naive_le, of_shape, shapes, small_ints

from operators.progress import MAX_TIME, Antichain, MutableAntichain, Product

SETTINGS = settings(max_examples=300, deadline=None)

# Small domains, so that repeats, comparable pairs and incomparable pairs are all common.
tiny_ints = st.integers(0, 5)
pairs = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
nested = st.builds(Product, pairs, st.integers(0, 2))
edge_ints = st.sampled_from([0, 1, 2, MAX_TIME - 1, MAX_TIME])
time_domains = st.sampled_from([tiny_ints, pairs, nested, edge_ints])


def domain_times(data: st.DataObject, max_size: int = 12) -> list[Any]:
    domain = data.draw(time_domains, label="domain")
    return data.draw(st.lists(domain, max_size=max_size), label="times")


def shaped_times(shape: Any) -> st.SearchStrategy[list[Any]]:
    return st.lists(of_shape(shape, small_ints), max_size=10)


@SETTINGS
@given(shapes.flatmap(lambda shape: st.tuples(shaped_times(shape), of_shape(shape, small_ints))))
def test_antichain_is_the_minimal_elements(case: tuple[list[Any], Any]) -> None:
    inserted, probe = case
    chain: Antichain[Any] = Antichain()
    seen: list[Any] = []
    for time in inserted:
        before = set(chain)
        changed = chain.insert(time)
        seen.append(time)
        after = set(chain)
        assert changed == (before != after)
        assert changed == (not any(naive_le(e, time) for e in before))
        assert after == minimal(seen)
        elements = chain.elements()
        assert len(elements) == len(after), "duplicate elements"
        for i, a in enumerate(elements):
            for b in elements[i + 1 :]:
                assert not naive_le(a, b) and not naive_le(b, a), f"{a} and {b} are comparable"
    assert chain.less_equal(probe) == any(naive_le(e, probe) for e in inserted)
    assert chain.less_than(probe) == any(naive_le(e, probe) and e != probe for e in inserted)
    assert chain.is_empty() == (not inserted) == (not chain) == (len(chain) == 0)
    for time in inserted:
        assert (time in chain) == (time in minimal(inserted))


@SETTINGS
@given(st.data())
def test_antichain_equality_ignores_insertion_order(data: st.DataObject) -> None:
    times = domain_times(data)
    shuffled = data.draw(st.permutations(times), label="shuffled")
    first, second = Antichain(times), Antichain(shuffled)
    assert first == second
    assert set(first) == minimal(times)
    grown: Antichain[Any] = Antichain()
    assert grown.extend(shuffled) == bool(times)
    assert grown == first
    assert Antichain.from_elements(sorted(minimal(times))) == first
    other = data.draw(st.lists(st.sampled_from(times), max_size=6) if times else st.just([]))
    assert (Antichain(other) == first) == (minimal(other) == minimal(times))


@SETTINGS
@given(st.data())
def test_antichain_dominates(data: st.DataObject) -> None:
    domain = data.draw(time_domains, label="domain")
    a = Antichain(data.draw(st.lists(domain, max_size=5), label="a"))
    b = Antichain(data.draw(st.lists(domain, max_size=5), label="b"))
    assert a.dominates(b) == all(any(naive_le(x, y) for x in a) for y in b)
    assert a.dominates(a)
    if a.dominates(b) and b.dominates(a):
        assert a == b


# --------------------------------------------------------------------------- MutableAntichain

diffs = st.integers(-2, 2)


@SETTINGS
@given(st.data())
def test_mutable_antichain_matches_a_naive_multiset(data: st.DataObject) -> None:
    domain = data.draw(time_domains, label="domain")
    batches = data.draw(
        st.lists(st.lists(st.tuples(domain, diffs), max_size=5), min_size=1, max_size=10),
        label="batches",
    )
    counts: dict[Hashable, int] = {}
    counted = MutableAntichain[Any]()
    reported: dict[Hashable, int] = {}
    for batch in batches:
        old = minimal(t for t, c in counts.items() if c > 0)
        for time, diff in batch:
            counts[time] = counts.get(time, 0) + diff
        new = minimal(t for t, c in counts.items() if c > 0)

        changes = counted.update_iter(batch)

        expected = {t: 1 for t in new - old} | {t: -1 for t in old - new}
        got: dict[Hashable, int] = {}
        for time, diff in changes:
            got[time] = got.get(time, 0) + diff
        assert {t: d for t, d in got.items() if d} == expected
        assert len({t for t, _ in changes}) == len(changes), f"changes not consolidated: {changes}"
        assert all(d in (1, -1) for _, d in changes), f"changes not +-1: {changes}"

        assert counted.frontier() == Antichain(new)
        assert set(counted.frontier_elements()) == new
        assert len(counted.frontier_elements()) == len(new)
        assert counted.is_empty() == (not new)
        for time in {t for t, _ in batch} | set(counts):
            assert counted.count_for(time) == counts.get(time, 0)
            assert counted.less_equal(time) == any(naive_le(e, time) for e in new)
            assert counted.less_than(time) == any(naive_le(e, time) and e != time for e in new)
        for time, diff in changes:
            reported[time] = reported.get(time, 0) + diff
        assert {t for t, d in reported.items() if d} == new
        assert all(d in (0, 1) for d in reported.values())


@SETTINGS
@given(st.data())
def test_mutable_antichain_update_one_at_a_time(data: st.DataObject) -> None:
    domain = data.draw(time_domains, label="domain")
    nonzero = diffs.filter(bool)  # a zero diff is covered by the test below
    updates = data.draw(st.lists(st.tuples(domain, nonzero), max_size=15), label="updates")
    counts: dict[Hashable, int] = {}
    counted = MutableAntichain[Any]()
    for time, diff in updates:
        old = minimal(t for t, c in counts.items() if c > 0)
        counts[time] = counts.get(time, 0) + diff
        new = minimal(t for t, c in counts.items() if c > 0)
        changes = counted.update(time, diff)
        assert sorted(changes, key=repr) == sorted(
            [(t, 1) for t in new - old] + [(t, -1) for t in old - new], key=repr
        )
        assert set(counted.frontier()) == new
    assert MutableAntichain(updates).frontier() == counted.frontier()


# Regression: update(t, 0) for a time with no count used to raise KeyError (fixed in 5080899).
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_mutable_antichain_zero_update_is_a_no_op(data: st.DataObject) -> None:
    domain = data.draw(time_domains, label="domain")
    updates = data.draw(st.lists(st.tuples(domain, diffs), max_size=8), label="updates")
    probe = data.draw(domain, label="probe")
    counted = MutableAntichain[Any](updates)
    count = counted.count_for(probe)
    before = set(counted.frontier())
    assert list(counted.update(probe, 0)) == []
    assert counted.update_iter([(probe, 0)]) == []
    assert set(counted.frontier()) == before
    assert counted.count_for(probe) == count


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_mutable_antichain_zero_update_of_an_uncounted_time(data: st.DataObject) -> None:
    domain = data.draw(time_domains, label="domain")
    updates = data.draw(st.lists(st.tuples(domain, diffs), max_size=8), label="updates")
    probe = data.draw(domain, label="probe")
    counted = MutableAntichain[Any](updates)
    assume(counted.count_for(probe) == 0)
    assert list(counted.update(probe, 0)) == []
    assert counted.count_for(probe) == 0
