"""The vector backend (operators.graph.cel.vector): its API, the traps of CEL on columns with
exact expected values, and the int64 edge grid of every pair of edge values through
``+ - * / %`` against an exact oracle (and the row backend)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pyarrow as pa
import pytest

from operators.graph import EvaluationError, compile_expression
from operators.graph.cel.vector import NotVectorized, VectorExpression, compile_vector
from operators.runtime.containers import Columns

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def vector(source: str, types: dict[str, pa.DataType]) -> VectorExpression:
    compiled = compile_vector(compile_expression(source, list(types)), types)
    assert isinstance(compiled, VectorExpression), compiled
    return compiled


def outcomes(source: str, **columns: pa.Array) -> list[Any]:
    """The value of each row, or ``"error"`` where it failed."""
    compiled = vector(source, {name: array.type for name, array in columns.items()})
    values, failed = compiled.evaluate(*columns.values())
    bad = [False] * len(values) if failed is None else failed.to_pylist()
    return ["error" if b else v for v, b in zip(values.to_pylist(), bad, strict=True)]


def column(values: list[Any], arrow: pa.DataType | None = None) -> pa.Array:
    return pa.array(values, arrow or pa.int64())


# --------------------------------------------------------------------------- the API


def test_a_map_literal_gives_a_struct_column_and_failed_rows_are_null() -> None:
    batch = pa.RecordBatch.from_pydict({"key": ["a", "b", "c"], "value": [1, 2**62, -5]})
    compiled = vector('{"key": r.key, "value": r.value * 2}', {"r": Columns.of(batch).type})
    assert compiled.type == pa.struct([("key", pa.string()), ("value", pa.int64())])
    values, failed = compiled.evaluate(Columns.of(batch))
    assert values.to_pylist() == [{"key": "a", "value": 2}, None, {"key": "c", "value": -10}]
    assert failed.to_pylist() == [False, True, False]
    assert compiled.messages([Columns.of(batch)], [1]) == ["integer overflow"]


def test_no_failed_row_gives_no_mask() -> None:
    values, failed = vector("r % 3 != 0", {"r": pa.int64()}).evaluate(column([1, 3, 5]))
    assert values.to_pylist() == [True, False, True]
    assert failed is None


def test_a_predicate_fails_a_row_whose_value_is_not_a_bool() -> None:
    compiled = vector("r.f", {"r": pa.struct([("f", pa.bool_())])})
    records = pa.array([{"f": True}, {"f": None}, {"f": False}], compiled.types["r"])
    keep, failed = compiled.predicate(records)
    assert keep.to_pylist() == [True, False, False]
    assert failed.to_pylist() == [False, True, False]

    def as_filter(value: Any) -> None:
        if type(value) is not bool:
            raise EvaluationError(f"filter needs a bool, not {type(value).__name__}")

    assert compiled.messages([records], [1], check=as_filter) == [
        "filter needs a bool, not NoneType"
    ]
    keep, failed = vector("r.f ? 1 : 2", {"r": compiled.types["r"]}).predicate(records)
    assert keep.to_pylist() == [False] * 3
    assert failed.to_pylist() == [True] * 3


def test_an_expression_with_no_variables_takes_the_batch_length() -> None:
    compiled = vector("1 + 2 == 3", {})
    values, failed = compiled.evaluate(length=4)
    assert values.to_pylist() == [True] * 4
    assert failed is None
    with pytest.raises(TypeError, match="needs the batch's length"):
        compiled.evaluate()


def test_columns_must_be_of_the_compiled_types() -> None:
    compiled = vector("r + 1", {"r": pa.int64()})
    with pytest.raises(TypeError, match="r is string, not int64 as compiled"):
        compiled.evaluate(pa.array(["a"]))
    with pytest.raises(ValueError, match="no Arrow type for the variables"):
        compile_vector(compile_expression("r + 1"), {})


def test_narrow_ints_floats_and_dictionaries_are_seen_as_the_row_backend_sees_them() -> None:
    records = pa.array(
        [{"a": 1, "f": 1.5, "k": "x"}],
        pa.struct(
            [("a", pa.int8()), ("f", pa.float32()), ("k", pa.dictionary(pa.int8(), pa.string()))]
        ),
    )
    compiled = vector('{"a": r.a * 100, "f": r.f, "k": r.k + "y"}', {"r": records.type})
    assert compiled.type == pa.struct([("a", pa.int64()), ("f", pa.float64()), ("k", pa.string())])
    assert compiled.evaluate(records)[0].to_pylist() == [{"a": 100, "f": 1.5, "k": "xy"}]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("r.xs.exists_one(x, x > 1)", "the macro exists_one"),
        ("r.ls.all(l, l.exists(y, y > 0))", "the macro all in an expression whose comprehensions"),
        ("r.ss.exists(s, s.matches('a'))", "the macro exists in an expression whose"),
        ("r.xs.exists(x, r.s.contains('a'))", "a comprehension whose body works on a string"),
        ("r.s.matches(r.s)", "matches with a pattern that is not a literal"),
        ("r.s.contains(r.s)", "contains with an argument that is not a literal string"),
        ("[r.i, r.s]", "a list of values of different types"),
        ("r.xs + ['a']", "+ on lists of different types"),
        ("r.i > 0 ? r.i : r.s", "?: with branches of different types (int64 and string)"),
        ("r.u + 1", "arithmetic on a uint64 value without a uint operand, or on an int value"),
        ("r.ts == r.ts", "== on timestamp[ms]"),
        ("{r.s: 1}", "a map whose keys are not literal strings"),
        ("r.ts.exists(t, true)", "the macro exists over a value of Arrow type timestamp[ms]"),
    ],
)
def test_what_has_no_vector_form_says_why(source: str, reason: str) -> None:
    types = {
        "r": pa.struct(
            [
                ("i", pa.int64()),
                ("u", pa.uint64()),
                ("s", pa.string()),
                ("xs", pa.list_(pa.int64())),
                ("ts", pa.timestamp("ms")),
                ("ls", pa.list_(pa.list_(pa.int64()))),
                ("ss", pa.list_(pa.string())),
            ]
        )
    }
    compiled = compile_vector(compile_expression(source), types)
    assert isinstance(compiled, NotVectorized)
    assert compiled.reason.startswith(reason)
    assert str(compiled) == f"not vectorized: {compiled.reason}"


def test_a_value_of_a_type_cel_has_no_operation_on_can_be_passed_along() -> None:
    records = pa.array(
        [{"ts": 5, "v": 1}], pa.struct([("ts", pa.timestamp("ms")), ("v", pa.int64())])
    )
    compiled = vector('{"at": r.ts, "v": r.v + 1}', {"r": records.type})
    assert compiled.evaluate(records)[0] == pa.array(
        [{"at": 5, "v": 2}], pa.struct([("at", pa.timestamp("ms")), ("v", pa.int64())])
    )


# --------------------------------------------------------------------------- the traps


def test_int64_overflow_fails_the_row_only() -> None:
    r = column([INT64_MAX, 1, INT64_MIN, -1, None])
    assert outcomes("r + 1", r=r) == ["error", 2, INT64_MIN + 1, 0, "error"]
    assert outcomes("r - 1", r=r) == [INT64_MAX - 1, 0, "error", -2, "error"]
    assert outcomes("r * 2", r=r) == ["error", 2, "error", -2, "error"]
    assert outcomes("-1 * r", r=r) == [-INT64_MAX, -1, "error", 1, "error"]
    assert outcomes("r * r", r=r) == ["error", 1, "error", 1, "error"]
    assert outcomes("-r", r=r) == [-INT64_MAX, -1, "error", 1, "error"]


def test_uint64_overflow_fails_the_row_only() -> None:
    r = column([UINT64_MAX, 1, 0], pa.uint64())
    assert outcomes("r + 1u", r=r) == ["error", 2, 1]
    assert outcomes("r - 1u", r=r) == [UINT64_MAX - 1, 0, "error"]
    assert outcomes("r * 2u", r=r) == ["error", 2, 0]
    assert outcomes("r / 0u", r=r) == ["error"] * 3


def test_division_truncates_and_the_remainder_has_the_dividends_sign() -> None:
    a, b = column([-7, 7, -7, 7, INT64_MIN, INT64_MIN, 5]), column([2, -2, -2, 2, -1, -1, 0])
    assert outcomes("a / b", a=a, b=b) == [-3, -3, 3, 3, "error", "error", "error"]
    assert outcomes("a % b", a=a, b=b) == [-1, 1, -1, 1, "error", "error", "error"]


def test_a_remainder_by_a_power_of_two_is_the_low_bits_only_where_no_dividend_is_negative() -> None:
    """``x % 2^k`` is ``x & (2^k - 1)`` for ``x >= 0``; a negative dividend keeps its sign."""
    r = column([0, 1, 7, 8, None, INT64_MAX])
    assert outcomes("r % 1", r=r) == [0, 0, 0, 0, "error", 0]
    assert outcomes("r % 2", r=r) == [0, 1, 1, 0, "error", 1]
    assert outcomes("r % 8 == 0", r=r) == [True, False, False, True, "error", False]
    assert outcomes("r % 6", r=r) == [0, 1, 1, 2, "error", 1]
    signed = column([-7, 7, -8, INT64_MIN])
    assert outcomes("r % 4", r=signed) == [-3, 3, 0, 0]
    u = column([0, 5, UINT64_MAX], pa.uint64())
    assert outcomes("r % 4u", r=u) == [0, 1, 3]
    values, failed = vector("r % 2", {"r": pa.int64()}).evaluate(column([3, 4]))
    assert (values.type, values.to_pylist(), failed) == (pa.int64(), [1, 0], None)


def test_double_arithmetic_follows_ieee_754() -> None:
    d = column([1.0, -1.0, 0.0, math.nan], pa.float64())
    values = outcomes("d / 0.0", d=d)
    assert values[:2] == [math.inf, -math.inf] and math.isnan(values[2]) and math.isnan(values[3])
    assert outcomes("d % d", d=d) == ["error"] * 4  # no % on doubles
    assert [math.copysign(1, v) for v in outcomes("-d", d=column([0.0], pa.float64()))] == [-1]


def test_ints_and_doubles_are_equal_exactly_and_order_as_doubles() -> None:
    i = column([2**53 + 1, 2**53, INT64_MAX, INT64_MIN, 3])
    assert outcomes("i == 9007199254740992.0", i=i) == [False, True, False, False, False]
    # ordered as doubles (cel-go, the spec's cases): 2**53 + 1 is 2.0**53, INT64_MAX 2.0**63
    assert outcomes("i > 9007199254740992.0", i=i) == [False, False, True, False, False]
    assert outcomes("i < 9223372036854775808.0", i=i) == [True, True, False, True, True]
    assert outcomes("i >= -9223372036854775808.0", i=i) == [True] * 5
    u = column([UINT64_MAX, 2**53 + 1], pa.uint64())
    assert outcomes("u > 18446744073709551616.0", u=u) == [False, False]
    assert outcomes("u == 9007199254740992.0", u=u) == [False, False]
    assert outcomes("u > 9223372036854775807", u=u) == [True, False]


def test_strings_size_in_code_points_and_match_literally() -> None:
    s = column(["héé", "a.c", "日本語", None], pa.string())
    assert outcomes("size(s)", s=s) == [3, 3, 3, "error"]
    assert outcomes("s.contains('.')", s=s) == [False, True, False, "error"]
    assert outcomes("s.startsWith('h')", s=s) == [True, False, False, "error"]
    assert outcomes("s.endsWith('語')", s=s) == [False, False, True, "error"]
    assert outcomes("s.matches('^\\\\w+$')", s=s) == [False, False, False, "error"]
    assert outcomes("s.matches('^\\\\d')", s=column(["٣", "3"], pa.string())) == [False, True]
    assert outcomes("s.upper()", s=column(["straße", "abc"], pa.string())) == ["STRASSE", "ABC"]
    assert outcomes("s.lower()", s=column(["İ"], pa.string())) == ["i̇"]


def test_a_matches_over_the_step_limit_fails_as_in_the_row_backend() -> None:
    expression = compile_expression("r.matches('a+b')", max_steps=10)
    compiled = compile_vector(expression, {"r": pa.string()})
    assert isinstance(compiled, VectorExpression)
    text = column(["aab", "a" * 200], pa.string())
    _values, failed = compiled.evaluate(text)
    assert failed.to_pylist() == [False, True]
    assert compiled.messages([text], [1])[0].startswith("matches() would take more than")


def test_the_branch_not_taken_fails_nothing() -> None:
    a, b = column([0, 2, 0]), column([1, 0, 0])
    assert outcomes("b == 0 ? 0 : a / b", a=a, b=b) == [0, 0, 0]
    assert outcomes("a == 0 ? a / b : 1", a=a, b=b) == [0, 1, "error"]
    assert outcomes("b / b == 1 ? 1 : 2", a=a, b=b) == [1, "error", "error"]


def test_and_or_absorb_errors_from_either_side() -> None:
    a, b = column([0, 1, 0, 2]), column([0, 1, 5, 0])
    assert outcomes("a / b > 0 || b == 0", a=a, b=b) == [True, True, False, True]
    assert outcomes("b == 0 || a / b > 0", a=a, b=b) == [True, True, False, True]
    assert outcomes("a / b > 0 && b != 0", a=a, b=b) == [False, True, False, False]
    assert outcomes("a / b > 0 || a == 1", a=a, b=b) == ["error", True, False, "error"]
    assert outcomes("a / b > 0 && a == 0", a=a, b=b) == ["error", False, False, False]


def test_null_fields_are_cel_null() -> None:
    r = pa.array(
        [{"x": 1, "n": {"y": 1}}, {"x": None, "n": None}],
        pa.struct([("x", pa.int64()), ("n", pa.struct([("y", pa.int64())]))]),
    )
    assert outcomes("r.x == null", r=r) == [False, True]
    assert outcomes("r.x != null", r=r) == [True, False]
    assert outcomes("r.x + 1", r=r) == [2, "error"]
    assert outcomes("r.n.y", r=r) == [1, "error"]
    assert outcomes("has(r.n.y)", r=r) == [True, "error"]
    assert outcomes("r.x", r=r) == [1, None]
    assert outcomes("r.missing", r=r) == ["error", "error"]


def test_equality_is_heterogeneous() -> None:
    r = pa.array(
        [{"i": 1, "s": "1", "d": 1.0}, {"i": None, "s": None, "d": None}],
        pa.struct([("i", pa.int64()), ("s", pa.string()), ("d", pa.float64())]),
    )
    assert outcomes("r.i == r.s", r=r) == [False, True]
    assert outcomes("r.i == r.d", r=r) == [True, True]
    assert outcomes("r.i != r.s", r=r) == [True, False]
    assert outcomes("r.i in [1u, 'a']", r=r) == [True, False]
    assert outcomes("r.s in ['1', null]", r=r) == [True, True]
    assert outcomes("r.i < r.s", r=r) == ["error", "error"]


def test_list_elements_by_index() -> None:
    xs = pa.array([[1, 2], [], None, [3, None]], pa.list_(pa.int64())).slice(0)
    assert outcomes("xs[1]", xs=xs) == [2, "error", "error", None]
    assert outcomes("xs[-1]", xs=xs) == ["error"] * 4
    assert outcomes("size(xs)", xs=xs) == [2, 0, "error", 2]
    assert outcomes("xs[0u]", xs=xs.slice(3)) == [3]


# --------------------------------------------------------------------------- the edge grid

EDGES = [INT64_MIN, INT64_MIN + 1, -(2**53) - 1, -(2**32), -3, -2, -1, 0, 1, 2, 3]
EDGES += [2**32, 2**53 + 1, INT64_MAX - 1, INT64_MAX]
UINT_EDGES = [0, 1, 2, 3, 2**32, 2**53 + 1, 2**63 - 1, 2**63, UINT64_MAX - 1, UINT64_MAX]


def exact(op: str, a: int, b: int, low: int, high: int) -> int | str:
    """CEL's ``a op b`` on ints in ``[low, high]``, by Python's unbounded ints."""
    if op in "/%" and b == 0:
        return "error"
    quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) if b else 0
    result = {"+": a + b, "-": a - b, "*": a * b, "/": quotient, "%": a - b * quotient}[op]
    if op == "%" and not low <= quotient <= high:  # MIN % -1: its quotient overflows
        return "error"
    return result if low <= result <= high else "error"


def row_backend(source: str, names: list[str], rows: list[tuple[Any, ...]]) -> list[Any]:
    fn = compile_expression(source, names).fn
    results = []
    for row in rows:
        try:
            results.append(fn(*row))
        except EvaluationError:
            results.append("error")
    return results


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%"])
def test_every_pair_of_int64_edge_values(op: str) -> None:
    pairs = list(itertools.product(EDGES, EDGES))
    a, b = column([p[0] for p in pairs]), column([p[1] for p in pairs])
    expected = [exact(op, x, y, INT64_MIN, INT64_MAX) for x, y in pairs]
    assert outcomes(f"a {op} b", a=a, b=b) == expected
    assert row_backend(f"a {op} b", ["a", "b"], pairs) == expected
    for literal in EDGES:  # a literal operand, on either side (other guards apply)
        right = [exact(op, x, literal, INT64_MIN, INT64_MAX) for x in EDGES]
        assert outcomes(f"a {op} {literal}", a=column(EDGES)) == right, literal
        left = [exact(op, literal, y, INT64_MIN, INT64_MAX) for y in EDGES]
        assert outcomes(f"{literal} {op} b", b=column(EDGES)) == left, literal


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%"])
def test_every_pair_of_uint64_edge_values(op: str) -> None:
    pairs = list(itertools.product(UINT_EDGES, UINT_EDGES))
    a, b = column([p[0] for p in pairs], pa.uint64()), column([p[1] for p in pairs], pa.uint64())
    expected = [exact(op, x, y, 0, UINT64_MAX) for x, y in pairs]
    assert outcomes(f"uint(a) {op} uint(b)", a=a, b=b) == expected
    assert row_backend(f"uint(a) {op} uint(b)", ["a", "b"], pairs) == expected
    for literal in UINT_EDGES:
        right = [exact(op, x, literal, 0, UINT64_MAX) for x in UINT_EDGES]
        assert outcomes(f"a {op} {literal}u", a=column(UINT_EDGES, pa.uint64())) == right


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_every_pair_of_int_and_double_edge_values_compares_as_the_row_backend(op: str) -> None:
    """Equal exactly, ordered as doubles (Python's float(int))."""
    doubles = [-(2.0**63), -(2.0**53), -1.5, -0.0, 0.5, 1.0, 2.0**53, 2.0**63, 2.0**64]
    doubles += [math.inf, -math.inf, math.nan, 9.2e18]
    pairs = list(itertools.product(EDGES, doubles))
    compare = {
        "==": lambda x, y: x == y,
        "!=": lambda x, y: x != y,
        "<": lambda x, y: x < y,
        "<=": lambda x, y: x <= y,
        ">": lambda x, y: x > y,
        ">=": lambda x, y: x >= y,
    }[op]
    # Python's int and float are equal exactly; ordered, the int is made a double first
    as_double = op not in ("==", "!=")
    expected = [compare(float(x) if as_double else x, y) for x, y in pairs]
    a, d = column([p[0] for p in pairs]), column([p[1] for p in pairs], pa.float64())
    assert outcomes(f"a {op} d", a=a, d=d) == expected
    flipped = [compare(y, float(x) if as_double else x) for x, y in pairs]
    assert outcomes(f"d {op} a", a=a, d=d) == flipped
    assert row_backend(f"a {op} d", ["a", "d"], pairs) == expected
    u = [x for x in UINT_EDGES]
    upairs = list(itertools.product(u, doubles))
    ua, ud = (
        column([p[0] for p in upairs], pa.uint64()),
        column([p[1] for p in upairs], pa.float64()),
    )
    uexpected = [compare(float(x) if as_double else x, y) for x, y in upairs]
    assert outcomes(f"a {op} d", a=ua, d=ud) == uexpected


# --------------------------------------------------------------------------- lists, maps, macros

LISTS = pa.array(
    [
        {"xs": [1, 2, 0], "k": 2},
        {"xs": [], "k": 1},
        {"xs": None, "k": 1},
        {"xs": [3, None], "k": 0},
        {"xs": [0, 5], "k": 5},
    ],
    pa.struct([("xs", pa.list_(pa.int64())), ("k", pa.int64())]),
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # an element that decides absorbs the others' errors; a null list fails the row
        ("r.xs.exists(x, 6 / x > r.k)", [True, False, "error", True, "error"]),
        ("r.xs.all(x, 6 / x > r.k)", ["error", True, "error", "error", False]),
        ("r.xs.map(x, x * r.k)", [[2, 4, 0], [], "error", "error", [0, 25]]),
        ("r.xs.filter(x, x > r.k)", [[], [], "error", "error", []]),
        ("r.xs.filter(x, x < 3)", [[1, 2, 0], [], "error", "error", [0]]),
        ("r.xs.map(x, x > 0, 6 / x)", [[6, 3], [], "error", "error", [1]]),
        ("r.xs.map(x, x * 2).exists(y, y == 10)", [False, False, "error", "error", True]),
        ("[r.k, r.k * 2]", [[2, 4], [1, 2], [1, 2], [0, 0], [5, 10]]),
        ("[r.k, 1 / 0]", ["error"] * 5),
        ("size([])", [0] * 5),
        ("r.xs + [r.k]", [[1, 2, 0, 2], [1], "error", [3, None, 0], [0, 5, 5]]),
        ("[] + r.xs", [[1, 2, 0], [], "error", [3, None], [0, 5]]),
        ("r.xs == [1, 2, 0]", [True, False, False, False, False]),
        ("r.xs == [3, null]", [False, False, False, True, False]),
        ("r.xs != []", [True, False, True, True, True]),
        ("r.xs == null", [False, False, True, False, False]),
        ("r.k in r.xs", [True, False, "error", False, True]),
        ("null in r.xs", [False, False, "error", True, False]),
        ("2.0 in r.xs", [True, False, "error", False, False]),
        ("[r.k] == [2.0]", [True, False, False, False, False]),
    ],
)
def test_lists_and_macros(source: str, expected: list[Any]) -> None:
    assert outcomes(source, r=LISTS) == expected


def test_maps_compare_key_by_key_and_macros_range_over_their_keys() -> None:
    r = pa.array(
        [{"n": {"x": 1, "y": "a"}}, {"n": {"x": None, "y": "a"}}, {"n": None}],
        pa.struct([("n", pa.struct([("x", pa.int64()), ("y", pa.string())]))]),
    )
    assert outcomes('r.n == {"x": 1, "y": "a"}', r=r) == [True, False, False]
    assert outcomes('r.n == {"y": "a", "x": 1.0}', r=r) == [True, False, False]
    assert outcomes('r.n == {"x": 1}', r=r) == [False, False, False]
    assert outcomes('r.n == {"x": null, "y": "a"}', r=r) == [False, True, False]
    assert outcomes("r.n == null", r=r) == [False, False, True]
    assert outcomes('r.n.exists(k, k == "y")', r=r) == [True, True, "error"]
    assert outcomes("r.n.map(k, k + k)", r=r) == [["xx", "yy"], ["xx", "yy"], "error"]
    assert outcomes('"x" in r.n', r=r) == [True, True, "error"]
    assert outcomes("size({})", r=r) == [0, 0, 0]


def test_not_equal_to_a_value_that_always_fails_fails_without_falling_back() -> None:
    """``!=`` with an operand that fails on every row (``r.s < r.i``: no such overload) fails
    every row: its failing values (nulls of no type) are not inverted (found by the property
    test)."""
    s, i = column(["a", ""], pa.string()), column([1, 2])
    assert outcomes("1 != ((s < i) ? s : s)", s=s, i=i) == ["error", "error"]
