"""Integer and Product timestamps, their path summaries, and the module-level order functions."""

import pytest

from operators.progress.timestamp import (
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

# --------------------------------------------------------------------------- integers


def test_max_time_is_the_largest_64_bit_unsigned_value():
    assert MAX_TIME == 2**64 - 1 == 18446744073709551615


@pytest.mark.parametrize(
    ("summary", "time", "expected"),
    [
        (5, 3, 8),
        (0, 0, 0),
        (0, MAX_TIME, MAX_TIME),
        (3, MAX_TIME - 3, MAX_TIME),
        (1, MAX_TIME - 1, MAX_TIME),
        (1, MAX_TIME, None),
        (2, MAX_TIME - 1, None),
        (MAX_TIME, 0, MAX_TIME),
        (MAX_TIME, 1, None),
    ],
)
def test_integer_results_in_adds_and_gives_none_past_max_time(summary, time, expected):
    assert results_in(summary, time) == expected


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (2, 3, 5),
        (0, 0, 0),
        (0, 7, 7),
        (MAX_TIME - 1, 1, MAX_TIME),
        (MAX_TIME, 0, MAX_TIME),
        (MAX_TIME, 1, None),
        (2**63, 2**63, None),
    ],
)
def test_integer_followed_by_adds_and_gives_none_past_max_time(first, second, expected):
    assert followed_by(first, second) == expected


@pytest.mark.parametrize("first", [0, 1, 4])
@pytest.mark.parametrize("second", [0, 2])
@pytest.mark.parametrize("time", [0, 10, MAX_TIME - 3, MAX_TIME])
def test_integer_followed_by_equals_applying_both_in_order(first, second, time):
    step = results_in(first, time)
    sequential = None if step is None else results_in(second, step)
    assert results_in(followed_by(first, second), time) == sequential


@pytest.mark.parametrize(
    ("a", "b", "le", "lt"),
    [
        (3, 5, True, True),
        (5, 3, False, False),
        (4, 4, True, False),
        (0, MAX_TIME, True, True),
    ],
)
def test_integer_order(a, b, le, lt):
    assert less_equal(a, b) is le
    assert less_than(a, b) is lt


@pytest.mark.parametrize("time", [0, 1, MAX_TIME, Product(0, MAX_TIME), Product(Product(1, 2), 3)])
def test_check_time_accepts_valid_times(time):
    assert check_time(time) is None


@pytest.mark.parametrize(
    "time",
    [-1, 2**64, Product(1, 2**64), Product(-1, 0), Product(Product(0, -1), 0)],
)
def test_check_time_rejects_out_of_range_integers_with_value_error(time):
    with pytest.raises(ValueError, match=r"is outside \[0, 2\*\*64\)"):
        check_time(time)


def test_check_time_message_names_the_offending_coordinate():
    with pytest.raises(ValueError, match=r"^time 18446744073709551616 is outside \[0, 2\*\*64\)$"):
        check_time(Product(1, 2**64))


@pytest.mark.parametrize("time", [True, False, 1.0, "3", None, (1, 2), Product(1, "x")])
def test_check_time_rejects_non_timestamps_with_type_error(time):
    with pytest.raises(TypeError, match="not a timestamp"):
        check_time(time)


# --------------------------------------------------------------------------- products: order


def test_product_partial_order_is_not_python_sort_order():
    a, b = Product(1, 2), Product(2, 1)
    # The sort order is lexicographic and total ...
    assert a < b
    assert sorted([b, a]) == [a, b]
    # ... but under the product order the two are incomparable.
    assert less_equal(a, b) is False
    assert less_equal(b, a) is False
    assert less_than(a, b) is False
    assert less_than(b, a) is False
    assert a.less_equal(b) is False
    assert a.less_than(b) is False


@pytest.mark.parametrize(
    ("a", "b", "le", "lt"),
    [
        (Product(1, 5), Product(2, 5), True, True),
        (Product(1, 5), Product(2, 4), False, False),
        (Product(0, 4), Product(1, 3), False, False),
        (Product(1, 1), Product(1, 2), True, True),
        (Product(1, 1), Product(1, 1), True, False),
        (Product(2, 2), Product(1, 1), False, False),
        (Product(0, 0), Product(MAX_TIME, MAX_TIME), True, True),
    ],
)
def test_product_order(a, b, le, lt):
    assert less_equal(a, b) is le
    assert less_than(a, b) is lt
    assert a.less_equal(b) is le
    assert a.less_than(b) is lt


@pytest.mark.parametrize(
    ("a", "b", "le", "lt"),
    [
        (Product(Product(1, 2), 3), Product(Product(1, 2), 3), True, False),
        (Product(Product(1, 2), 3), Product(Product(1, 2), 4), True, True),
        (Product(Product(1, 2), 3), Product(Product(1, 3), 3), True, True),
        # Lexicographically smaller, but the inner pairs are incomparable.
        (Product(Product(1, 2), 3), Product(Product(2, 1), 3), False, False),
        (Product(Product(1, 2), 3), Product(Product(2, 2), 2), False, False),
    ],
)
def test_nested_product_order(a, b, le, lt):
    assert less_equal(a, b) is le
    assert less_than(a, b) is lt


def test_nested_product_sort_order_does_not_leak_into_partial_order():
    a, b = Product(Product(1, 2), 3), Product(Product(2, 1), 3)
    assert a < b
    assert not less_equal(a, b)
    assert not less_equal(b, a)


def test_products_are_equal_by_value_and_hashable():
    a, b = Product(1, 2), Product(1, 2)
    assert a == b
    assert hash(a) == hash(b)
    assert a != Product(2, 1)
    assert {a, b, Product(2, 1)} == {Product(1, 2), Product(2, 1)}
    assert len({a, b, Product(2, 1)}) == 2
    table = {Product(1, 2): "a", Product(Product(0, 1), 2): "nested"}
    assert table[Product(1, 2)] == "a"
    assert table[Product(Product(0, 1), 2)] == "nested"


def test_product_fields():
    time = Product(3, Product(4, 5))
    assert time.outer == 3
    assert time.inner == Product(4, 5)
    assert time.inner.inner == 5


# --------------------------------------------------------------------------- products: summaries


@pytest.mark.parametrize(
    ("summary", "time", "expected"),
    [
        (Product(0, 1), Product(5, 3), Product(5, 4)),
        (Product(1, 0), Product(5, 3), Product(6, 3)),
        (Product(2, 7), Product(1, 1), Product(3, 8)),
        (Product(0, 0), Product(MAX_TIME, MAX_TIME), Product(MAX_TIME, MAX_TIME)),
        (Product(Product(1, 0), 2), Product(Product(1, 1), 1), Product(Product(2, 1), 3)),
    ],
)
def test_product_results_in_applies_coordinate_wise(summary, time, expected):
    assert results_in(summary, time) == expected
    assert summary.results_in(time) == expected


@pytest.mark.parametrize(
    ("summary", "time"),
    [
        (Product(1, 0), Product(MAX_TIME, 0)),
        (Product(0, 1), Product(0, MAX_TIME)),
        (Product(1, 1), Product(MAX_TIME, MAX_TIME)),
        (Product(Product(0, 1), 0), Product(Product(0, MAX_TIME), 0)),
    ],
)
def test_product_results_in_is_none_if_either_coordinate_overflows(summary, time):
    assert results_in(summary, time) is None


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (Product(1, 0), Product(0, 2), Product(1, 2)),
        (Product(1, 1), Product(2, 3), Product(3, 4)),
        (Product(0, 0), Product(0, 0), Product(0, 0)),
        (Product(Product(1, 0), 1), Product(Product(0, 2), 3), Product(Product(1, 2), 4)),
        (Product(MAX_TIME, 0), Product(1, 0), None),
        (Product(0, MAX_TIME), Product(0, 1), None),
    ],
)
def test_product_followed_by_composes_coordinate_wise(first, second, expected):
    assert followed_by(first, second) == expected
    assert first.followed_by(second) == expected


@pytest.mark.parametrize("first", [Product(0, 0), Product(1, 0), Product(0, 2)])
@pytest.mark.parametrize("second", [Product(0, 1), Product(3, 0)])
@pytest.mark.parametrize("time", [Product(0, 0), Product(4, 9), Product(MAX_TIME - 1, 5)])
def test_product_followed_by_equals_applying_both_in_order(first, second, time):
    step = results_in(first, time)
    sequential = None if step is None else results_in(second, step)
    assert results_in(followed_by(first, second), time) == sequential


# --------------------------------------------------------------------------- identity, minimum


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        (0, True),
        (1, False),
        (MAX_TIME, False),
        (Product(0, 0), True),
        (Product(0, 1), False),
        (Product(1, 0), False),
        (Product(Product(0, 0), 0), True),
        (Product(Product(0, 1), 0), False),
    ],
)
def test_is_identity(summary, expected):
    assert is_identity(summary) is expected


@pytest.mark.parametrize("summary", ["0", 0.0, None])
def test_is_identity_rejects_non_summaries(summary):
    with pytest.raises(TypeError, match="not a path summary"):
        is_identity(summary)


@pytest.mark.parametrize(
    ("time", "expected"),
    [
        (17, 0),
        (0, 0),
        (Product(3, 4), Product(0, 0)),
        (Product(3, Product(1, 2)), Product(0, Product(0, 0))),
        (Product(Product(5, 5), 9), Product(Product(0, 0), 0)),
    ],
)
def test_minimum_like_and_identity_like(time, expected):
    assert minimum_like(time) == expected
    assert identity_like(time) == expected
    assert less_equal(expected, time)


@pytest.mark.parametrize("time", ["x", 1.5, None])
def test_minimum_like_rejects_non_timestamps(time):
    with pytest.raises(TypeError, match="not a timestamp"):
        minimum_like(time)


@pytest.mark.parametrize("time", [0, 9, Product(2, 3), Product(Product(1, 2), 3)])
def test_identity_summary_leaves_times_unchanged(time):
    assert results_in(identity_like(time), time) == time
