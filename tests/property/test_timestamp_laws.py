"""Laws of timestamps and path summaries: ints, Products, and nested Products."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from progress_strategies import (
    BIG,
    leaves,
    naive_add,
    naive_le,
    of_shape,
    shapes,
    small_ints,
    wide_ints,
)

from operators.progress import (
    MAX_TIME,
    Product,
    check_time,
    followed_by,
    identity_like,
    is_identity,
    less_equal,
    less_than,
    minimum_like,
    results_in,
)

SETTINGS = settings(max_examples=200, deadline=None)


def same_shape(count: int, leaf: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[Any, ...]]:
    """``count`` values of one randomly chosen domain."""
    return shapes.flatmap(lambda shape: st.tuples(*[of_shape(shape, leaf)] * count))


def at_least(time: Any) -> st.SearchStrategy[Any]:
    """Times ``>=`` ``time`` in the product order: each leaf raised a little, or a lot."""
    if isinstance(time, Product):
        return st.builds(Product, at_least(time.outer), at_least(time.inner))
    return st.one_of(st.integers(time, min(time + 2, MAX_TIME)), st.integers(time, MAX_TIME))


# --------------------------------------------------------------------------- the order


@SETTINGS
@given(st.tuples(small_ints, small_ints, small_ints, small_ints))
def test_product_order_is_its_definition_over_ints(abcd: tuple[int, int, int, int]) -> None:
    a, b, c, d = abcd
    assert Product(a, b).less_equal(Product(c, d)) == (a <= c and b <= d)
    assert less_equal(Product(a, b), Product(c, d)) == (a <= c and b <= d)
    assert Product(a, b).less_than(Product(c, d)) == (a <= c and b <= d and (a, b) != (c, d))


@SETTINGS
@given(same_shape(2, small_ints))
def test_order_is_its_definition_at_any_depth(pair: tuple[Any, Any]) -> None:
    a, b = pair
    assert less_equal(a, b) == naive_le(a, b)
    assert less_than(a, b) == (naive_le(a, b) and a != b)
    if isinstance(a, Product):
        assert a.less_equal(b) == naive_le(a, b)
        assert a.less_than(b) == (naive_le(a, b) and a != b)


@SETTINGS
@given(same_shape(3, small_ints))
def test_less_equal_is_a_partial_order(triple: tuple[Any, Any, Any]) -> None:
    a, b, c = triple
    assert less_equal(a, a)
    assert not less_than(a, a)
    if less_equal(a, b) and less_equal(b, a):
        assert a == b
    if less_equal(a, b) and less_equal(b, c):
        assert less_equal(a, c)
    assert less_than(a, b) == (less_equal(a, b) and not less_equal(b, a))


@SETTINGS
@given(st.data())
def test_less_equal_is_transitive_along_chains(data: st.DataObject) -> None:
    (a,) = data.draw(same_shape(1, wide_ints))
    b = data.draw(at_least(a))
    c = data.draw(at_least(b))
    assert less_equal(a, b) and less_equal(b, c) and less_equal(a, c)
    assert (a <= b) and (b <= c) and (a <= c)


@SETTINGS
@given(same_shape(2, small_ints))
def test_sort_order_extends_the_partial_order(pair: tuple[Any, Any]) -> None:
    a, b = pair
    if less_equal(a, b):
        assert a <= b
    if less_than(a, b):
        assert a < b
    if a == b:
        assert hash(a) == hash(b)


@SETTINGS
@given(st.data())
def test_minimum_is_below_everything(data: st.DataObject) -> None:
    (t,) = data.draw(same_shape(1, wide_ints))
    bottom = minimum_like(t)
    assert less_equal(bottom, t)
    assert leaves(bottom) == [0] * len(leaves(t))
    check_time(t)
    check_time(bottom)


# --------------------------------------------------------------------------- summaries


@SETTINGS
@given(same_shape(2, wide_ints))
def test_results_in_adds_leafwise_and_is_none_exactly_past_max(pair: tuple[Any, Any]) -> None:
    summary, time = pair
    moved = results_in(summary, time)
    overflows = any(s + t > MAX_TIME for s, t in zip(leaves(summary), leaves(time), strict=True))
    assert (moved is None) == overflows
    assert moved == naive_add(summary, time)
    if isinstance(summary, Product):
        assert summary.results_in(time) == moved


@SETTINGS
@given(same_shape(2, wide_ints))
def test_results_in_never_moves_backwards(pair: tuple[Any, Any]) -> None:
    summary, time = pair
    moved = results_in(summary, time)
    if moved is not None:
        assert less_equal(time, moved)
        assert (moved == time) == is_identity(summary)


@SETTINGS
@given(st.data())
def test_results_in_is_monotone_in_the_time(data: st.DataObject) -> None:
    summary, early = data.draw(same_shape(2, wide_ints))
    late = data.draw(at_least(early))
    moved_late = results_in(summary, late)
    moved_early = results_in(summary, early)
    if moved_late is not None:
        # A smaller time survives wherever a larger one does, and stays smaller.
        assert moved_early is not None
        assert less_equal(moved_early, moved_late)


@SETTINGS
@given(st.data())
def test_results_in_is_monotone_in_the_summary(data: st.DataObject) -> None:
    small, time = data.draw(same_shape(2, wide_ints))
    large = data.draw(at_least(small))
    moved_large = results_in(large, time)
    if moved_large is not None:
        moved_small = results_in(small, time)
        assert moved_small is not None
        assert less_equal(moved_small, moved_large)


def apply_both(first: Any, second: Any, time: Any) -> Any:
    once = results_in(first, time)
    return None if once is None else results_in(second, once)


@SETTINGS
@given(same_shape(3, wide_ints))
def test_followed_by_is_composition(triple: tuple[Any, Any, Any]) -> None:
    first, second, time = triple
    both = followed_by(first, second)
    overflows = any(a + b > MAX_TIME for a, b in zip(leaves(first), leaves(second), strict=True))
    assert (both is None) == overflows
    if both is None:
        assert apply_both(first, second, time) is None
    else:
        assert leaves(both) == [a + b for a, b in zip(leaves(first), leaves(second), strict=True)]
        assert results_in(both, time) == apply_both(first, second, time)
    if isinstance(first, Product):
        assert first.followed_by(second) == both


@SETTINGS
@given(
    st.integers(0, MAX_TIME),
    st.integers(0, MAX_TIME),
    st.integers(-3, 3),
    st.integers(-3, 3),
)
def test_int_composition_at_the_overflow_boundary(
    first: int, time: int, slack: int, split: int
) -> None:
    # Choose ``second`` so that ``time + first + second`` lands within 3 of MAX_TIME, and
    # ``first + second`` near the top too when ``time`` is small.
    second = min(max(MAX_TIME - first - time + slack, 0), MAX_TIME)
    both = followed_by(first, second)
    assert (both is None) == (first + second > MAX_TIME)
    expected = time + first + second if time + first + second <= MAX_TIME else None
    assert apply_both(first, second, time) == expected
    if both is not None:
        assert results_in(both, time) == expected
    near = min(max(MAX_TIME - first + split, 0), MAX_TIME)
    assert (followed_by(first, near) is None) == (first + near > MAX_TIME)
    assert (results_in(first, near) is None) == (first + near > MAX_TIME)


@SETTINGS
@given(same_shape(3, wide_ints))
def test_followed_by_is_associative(triple: tuple[Any, Any, Any]) -> None:
    a, b, c = triple
    ab = followed_by(a, b)
    bc = followed_by(b, c)
    left = None if ab is None else followed_by(ab, c)
    right = None if bc is None else followed_by(a, bc)
    assert left == right


@SETTINGS
@given(same_shape(2, wide_ints))
def test_identity_summary(pair: tuple[Any, Any]) -> None:
    summary, time = pair
    identity = identity_like(summary)
    assert is_identity(identity)
    assert is_identity(summary) == (summary == identity)
    assert results_in(identity, time) == time
    assert followed_by(identity, summary) == summary
    assert followed_by(summary, identity) == summary
    assert less_equal(identity, summary)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("bad", [-1, MAX_TIME + 1, BIG * 4])
@SETTINGS
@given(st.data())
def test_check_time_refuses_out_of_range_leaves(bad: int, data: st.DataObject) -> None:
    (time,) = data.draw(same_shape(1, wide_ints))
    count = len(leaves(time))
    position = data.draw(st.integers(0, count - 1))

    def replace(t: Any, index: list[int]) -> Any:
        if isinstance(t, Product):
            return Product(replace(t.outer, index), replace(t.inner, index))
        index[0] += 1
        return bad if index[0] - 1 == position else t

    with pytest.raises(ValueError):
        check_time(replace(time, [0]))
