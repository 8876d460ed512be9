"""The vector backend against the row backend, row by row, on random records and expressions.

Random typed records (int64 with the edge values MIN, MAX, 0, ±1; uint64 up to 2**64 - 1;
float64 with NaN, ±inf, -0.0, 2**53 + 2; strings with non-ASCII characters; bools; nulls
anywhere; a nested struct; a list) as one Arrow struct column, and random well-typed
expressions from a grammar that reaches the failing cases (division by zero, overflow, null
fields, out-of-range indexes, values of the wrong type, ``&&``/``||`` over errors, ``?:``):
on every row, the vector backend's value (or failure) is the row backend's, and the message
of a failed row is the row backend's. No batch falls back to rows (that net is for Arrow
errors no guard foresaw, and none is known).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from operators.graph import EvaluationError, ExpressionError, compile_expression
from operators.graph.cel.vector import NotVectorized, VectorExpression, compile_vector

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

SCHEMA = pa.struct(
    [
        ("i", pa.int64()),
        ("j", pa.int64()),
        ("u", pa.uint64()),
        ("d", pa.float64()),
        ("e", pa.float64()),
        ("s", pa.string()),
        ("t", pa.string()),
        ("b", pa.bool_()),
        ("n", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("xs", pa.list_(pa.int64())),
    ]
)

INT_EDGES = [INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, 0, 1, -1, 2, -2, 3]
INT_EDGES += [2**31, -(2**31), 2**32, 2**53 + 1, -(2**53) - 1, 3037000500, -3037000500]
INTS = st.one_of(st.sampled_from(INT_EDGES), st.integers(-20, 20))
UINTS = st.one_of(
    st.sampled_from([0, 1, 2, 2**32, 2**63 - 1, 2**63, UINT64_MAX]), st.integers(0, 20)
)
FLOATS = st.one_of(
    st.sampled_from(
        [math.nan, math.inf, -math.inf, -0.0, 0.0, 2.0**53 + 2, 2.0**63, -(2.0**63), 1e308]
    ),
    st.sampled_from([0.5, 1.5, -2.5, 3.0, 1.0, -1.0, 9.2e18]),
    st.floats(-100, 100),
)
TEXT = ["", "a", "ab", "abc", "A", "é", "İ", "ß", "日本", "a1", "x\n", "42", "-7", "1e3", "ab c"]
STRINGS = st.one_of(st.sampled_from(TEXT), st.text(max_size=4))


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy, strategy, strategy)


RECORDS = st.fixed_dictionaries(
    {
        "i": nullable(INTS),
        "j": nullable(INTS),
        "u": nullable(UINTS),
        "d": nullable(FLOATS),
        "e": nullable(FLOATS),
        "s": nullable(STRINGS),
        "t": nullable(STRINGS),
        "b": nullable(st.booleans()),
        "n": nullable(st.fixed_dictionaries({"x": nullable(INTS), "y": nullable(STRINGS)})),
        "xs": nullable(st.lists(nullable(INTS), max_size=3)),
    }
)
BATCHES = st.lists(RECORDS, min_size=1, max_size=12)

# --------------------------------------------------------------------------- the grammar

INT_LITERALS = ["0", "1", "-1", "2", "3", "-3", "7", "9223372036854775807"]
INT_LITERALS += ["-9223372036854775808", "4294967296", "3037000500"]
DOUBLE_LITERALS = ["0.0", "-0.0", "1.5", "-2.5", "1e308", "9007199254740993.0", "0.1"]
STRING_LITERALS = ["''", "'a'", "'ab'", "'é'", "'İ'", "'A'", "'42'", "'1.5'"]
PATTERNS = ["'a'", "'^a'", "'b$'", "'[0-9]'", "'\\\\d'", "'\\\\w+'", "'^.$'", "'(a|é)'"]
COUNTED = (
    "a comprehension whose body works on a string, list or map that does not depend on",
    "the macro filter in an expression whose comprehensions count steps per element",
    "the macro map in an expression whose comprehensions count steps per element",
    "the macro all in an expression whose comprehensions count steps per element",
    "the macro exists in an expression whose comprehensions count steps per element",
)
"""A macro whose body works on ``r.s`` (``r.xs.map(x, r.s.contains('a') ? x : 0)``), whose
size the row backend counts against the step limit, or searches it (``matches``, whose cost
it counts), has no vector form."""


def binary(op: str, left: st.SearchStrategy[str], right: st.SearchStrategy[str]) -> Any:
    return st.tuples(left, right).map(lambda pair: f"({pair[0]} {op} {pair[1]})")


def ints(depth: int, element: bool = False) -> st.SearchStrategy[str]:
    """int-typed; ``element``: in a macro's body, where ``x`` is an element of ``r.xs``."""
    names = ["r.i", "r.j", "r.n.x", "r.xs[0]", "r.xs[1]", "size(r.xs)"]
    leaves = st.one_of(
        st.sampled_from(names + ["x"] * 4 if element else names),
        st.sampled_from(INT_LITERALS),
    )
    if depth == 0:
        return leaves
    inner = ints(depth - 1, element)
    return st.one_of(
        leaves,
        st.sampled_from(["+", "-", "*", "/", "%"]).flatmap(lambda op: binary(op, inner, inner)),
        inner.map(lambda x: f"-{x}"),
        strings(depth - 1).map(lambda s: f"size({s})"),
        doubles(depth - 1).map(lambda d: f"int({d})"),
        st.just("int(r.u)"),
        conditional(depth, inner),
        inner.map(lambda x: f"r.xs[{x}]"),
    )


def uints(depth: int) -> st.SearchStrategy[str]:
    """uint-typed as the row backend checks it: uint literals, uint(), arithmetic on them."""
    leaves = st.sampled_from(["uint(r.u)", "0u", "1u", "7u", "18446744073709551615u", "uint(r.i)"])
    if depth == 0:
        return leaves
    inner = uints(depth - 1)
    return st.one_of(
        leaves,
        st.sampled_from(["+", "-", "*", "/", "%"]).flatmap(lambda op: binary(op, inner, inner)),
        doubles(depth - 1).map(lambda d: f"uint({d})"),
        conditional(depth, inner),
    )


def doubles(depth: int) -> st.SearchStrategy[str]:
    leaves = st.one_of(st.sampled_from(["r.d", "r.e"]), st.sampled_from(DOUBLE_LITERALS))
    if depth == 0:
        return leaves
    inner = doubles(depth - 1)
    return st.one_of(
        leaves,
        st.sampled_from(["+", "-", "*", "/"]).flatmap(lambda op: binary(op, inner, inner)),
        inner.map(lambda x: f"-{x}"),
        ints(depth - 1).map(lambda i: f"double({i})"),
        st.just("double(r.u)"),
        strings(0).map(lambda s: f"double({s})"),
        conditional(depth, inner),
    )


def strings(depth: int) -> st.SearchStrategy[str]:
    leaves = st.one_of(st.sampled_from(["r.s", "r.t", "r.n.y"]), st.sampled_from(STRING_LITERALS))
    if depth == 0:
        return leaves
    inner = strings(depth - 1)
    return st.one_of(
        leaves,
        binary("+", inner, inner),
        ints(depth - 1).map(lambda i: f"string({i})"),
        doubles(0).map(lambda d: f"string({d})"),
        st.sampled_from(["string(r.u)", "string(r.b)"]),
        inner.map(lambda s: f"{s}.lower()"),
        inner.map(lambda s: f"{s}.upper()"),
        conditional(depth, inner),
    )


def conditional(depth: int, branch: st.SearchStrategy[str]) -> Any:
    parts = st.tuples(bools(depth - 1), branch, branch)
    return parts.map(lambda p: f"({p[0]} ? {p[1]} : {p[2]})")


def comparisons(depth: int) -> st.SearchStrategy[str]:
    op = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    equality = st.sampled_from(["==", "!="])
    pairs = [
        (ints(depth), ints(depth)),
        (ints(depth), doubles(depth)),
        (doubles(depth), doubles(depth)),
        (strings(depth), strings(depth)),
        (uints(depth), uints(depth)),
        (st.just("r.u"), ints(depth)),
        (st.just("r.u"), doubles(depth)),
        (st.sampled_from(["r.b", "true"]), st.sampled_from(["r.b", "false"])),
    ]
    ordered = [op.flatmap(lambda o, p=p: binary(o, p[0], p[1])) for p in pairs]
    mixed = [  # values of different kinds: unequal, and an error to order
        (ints(depth), strings(depth)),
        (st.sampled_from(["r.n", "r.xs", "r.s", "r.i", "r.b"]), st.just("null")),
        (st.just("r.b"), ints(depth)),
    ]
    hetero = [equality.flatmap(lambda o, p=p: binary(o, p[0], p[1])) for p in mixed]
    return st.one_of(*ordered, *hetero, binary("<", st.just("r.s"), ints(0)))


def lists(depth: int) -> st.SearchStrategy[str]:
    """list-of-int-typed: fields, list literals, ``+``, and the macros ``map`` and ``filter``."""
    leaves = st.sampled_from(["r.xs", "[]", "[1, 2]", "[r.i, r.j]", "[r.n.x, 3, -1]"])
    if depth == 0:
        return leaves
    inner = lists(depth - 1)
    body, test = ints(1, element=True), element_tests()
    return st.one_of(
        leaves,
        binary("+", inner, inner),
        st.tuples(inner, body).map(lambda p: f"{p[0]}.map(x, {p[1]})"),
        st.tuples(inner, test).map(lambda p: f"{p[0]}.filter(x, {p[1]})"),
        st.tuples(inner, test, body).map(lambda p: f"{p[0]}.map(x, {p[1]}, {p[2]})"),
        conditional(depth, inner),
    )


def element_tests() -> st.SearchStrategy[str]:
    """bool-typed, in a macro's body (no macro: a nested one counts steps, see macros.py)."""
    body = ints(1, element=True)
    op = st.sampled_from(["==", "!=", "<", ">", "<="])
    test = op.flatmap(lambda o: binary(o, body, body))
    return st.one_of(test, binary("||", test, test), binary("&&", test, test))


def bools(depth: int) -> st.SearchStrategy[str]:
    leaves = st.one_of(
        st.sampled_from(["r.b", "true", "false", "has(r.n.x)", "has(r.n.z)"]),
        comparisons(0),
        strings(0).flatmap(
            lambda s: st.sampled_from(["contains", "startsWith", "endsWith"]).flatmap(
                lambda m: st.sampled_from(STRING_LITERALS).map(lambda lit: f"{s}.{m}({lit})")
            )
        ),
        st.tuples(strings(0), st.sampled_from(PATTERNS)).map(lambda p: f"{p[0]}.matches({p[1]})"),
        ints(0).map(lambda i: f"({i} in [1, 2, -1, 9223372036854775807])"),
        strings(0).map(lambda s: f"({s} in ['a', 'é', ''])"),
        doubles(0).map(lambda d: f"({d} in [1, 1.5, 2u])"),
    )
    if depth <= 0:
        return leaves
    inner = bools(depth - 1)
    macros = st.tuples(lists(depth - 1), st.sampled_from(["all", "exists"]), element_tests())
    equal = st.sampled_from(["==", "!="])
    maps = st.tuples(ints(0), strings(0)).map(lambda p: f'{{"x": {p[0]}, "y": {p[1]}}}')
    return st.one_of(
        leaves,
        comparisons(depth - 1),
        macros.map(lambda p: f"{p[0]}.{p[1]}(x, {p[2]})"),
        equal.flatmap(lambda o: binary(o, lists(depth - 1), lists(depth - 1))),
        equal.flatmap(lambda o: binary(o, st.sampled_from(["r.n", "{}"]), maps)),
        lists(depth - 1).map(lambda xs: f"size({xs}) > 1"),
        st.tuples(ints(0), lists(depth - 1)).map(lambda p: f"({p[0]} in {p[1]})"),
        binary("&&", inner, inner),
        binary("||", inner, inner),
        inner.map(lambda b: f"!{b}"),
        conditional(depth, inner),
        st.just("(r.i + r.d > 0.0)"),  # no such overload on every row
    )


def maps(depth: int) -> st.SearchStrategy[str]:
    fields = st.tuples(ints(depth), strings(depth), bools(depth - 1))
    return fields.map(lambda f: f'{{"i": {f[0]}, "s": {f[1]}, "b": {f[2]}}}')


EXPRESSIONS = st.one_of(ints(2), uints(2), doubles(2), strings(2), bools(2), maps(1), lists(2))

# --------------------------------------------------------------------------- the property


def same(actual: Any, expected: Any) -> bool:
    """Equal values of the same Python types, NaN equal to NaN, -0.0 apart from 0.0."""
    if type(actual) is not type(expected):
        return False
    if isinstance(actual, float):
        if math.isnan(expected):
            return math.isnan(actual)
        return actual == expected and math.copysign(1, actual) == math.copysign(1, expected)
    if isinstance(actual, list):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            same(actual[k], expected[k]) for k in actual
        )
    return bool(actual == expected)


def row_outcomes(fn: Callable[[Any], Any], records: list[Any]) -> list[tuple[str, Any]]:
    outcomes: list[tuple[str, Any]] = []
    for record in records:
        try:
            outcomes.append(("value", fn(record)))
        except EvaluationError as error:
            outcomes.append(("error", str(error)))
    return outcomes


@pytest.fixture(autouse=True)
def no_fallback_to_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_args: Any) -> Any:
        raise AssertionError("the batch fell back to rows: a kernel raised")

    monkeypatch.setattr(VectorExpression, "_by_rows", fail)


def check(source: str, records: list[dict[str, Any]]) -> None:
    try:
        expression = compile_expression(source)
    except ExpressionError:
        assume(False)  # a constant the checker folds and refuses (-(-9223372036854775808))
        return
    vector = compile_vector(expression, {"r": SCHEMA})
    if isinstance(vector, NotVectorized):  # the one construct of the grammar with no vector form
        assert vector.reason.startswith(COUNTED), (source, vector)
        assume(False)
        return
    array = pa.array([{}, *records], SCHEMA).slice(1)  # an offset, as a sliced batch has
    expected = row_outcomes(expression.fn, array.to_pylist())
    values, failed = vector.evaluate(array)
    assert values.type == vector.type
    failed_rows = [] if failed is None else [i for i, bad in enumerate(failed.to_pylist()) if bad]
    messages = iter(vector.messages([array], failed_rows))
    for row, (kind, value) in enumerate(expected):
        if row in failed_rows:
            assert kind == "error", (source, records[row], value)
            assert next(messages) == value
        else:
            assert kind == "value", (source, records[row], value, values[row])
            assert same(values[row].as_py(), value), (source, records[row], values[row], value)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS, BATCHES)
def test_the_vector_backend_agrees_with_the_row_backend_row_by_row(
    source: str, records: list[dict[str, Any]]
) -> None:
    check(source, records)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bools(2), BATCHES)
def test_a_predicate_keeps_the_rows_whose_value_is_true(
    source: str, records: list[dict[str, Any]]
) -> None:
    try:
        expression = compile_expression(source)
    except ExpressionError:
        assume(False)  # literals of kinds the checker sees cannot compare ('a' < 1)
        return
    vector = compile_vector(expression, {"r": SCHEMA})
    assert isinstance(vector, VectorExpression)
    array = pa.array(records, SCHEMA)
    keep, failed = vector.predicate(array)
    outcomes = row_outcomes(expression.fn, records)
    assert keep.to_pylist() == [kind == "value" and value is True for kind, value in outcomes]
    # a filter fails on a row whose expression fails, or whose value is not a bool (a null)
    bad = [kind == "error" or type(value) is not bool for kind, value in outcomes]
    assert (failed.to_pylist() if failed is not None else [False] * len(records)) == bad
