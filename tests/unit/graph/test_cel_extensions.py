# ruff: noqa: RUF001  (Greek letters in CEL strings, as in cel-spec's cases)
"""The strings extension, ``math.greatest``/``math.least``, and the semantics the cel-spec
``simple`` cases hold (issue 23): each as cel-go evaluates it, on the row backend, and on the
vector backend where it has a vector form (else it says so, and the node runs by rows)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from operators.graph import EvaluationError, ExpressionError, compile_expression
from operators.graph.cel.vector import NotVectorized, compile_vector


def evaluate(source: str, record: Any = None) -> Any:
    return compile_expression(source, ["r"]).fn(record)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # split: Go's Split and SplitN
        ("'hello world'.split(' ')", ["hello", "world"]),
        ("'a  b'.split(' ')", ["a", "", "b"]),
        ("''.split(',')", [""]),
        ("'abc'.split('')", ["a", "b", "c"]),
        ("'abc'.split('', 2)", ["a", "bc"]),
        ("'a,b,c'.split(',', 2)", ["a", "b,c"]),
        ("'a,b,c'.split(',', 0)", []),
        ("'a,b,c'.split(',', -1)", ["a", "b", "c"]),
        # join
        ("['a', 'b'].join()", "ab"),
        ("['a', 'b'].join(', ')", "a, b"),
        ("[].join('-')", ""),
        # ASCII case, trim, reverse
        ("'TacoCÆt'.lowerAscii()", "tacocÆt"),
        ("'tacoCαt'.upperAscii()", "TACOCαT"),
        ("' \\t\\u00a0x y\\u3000\\n'.trim()", "x y"),
        ("'\\u200bx\\u200b'.trim()", "\u200bx\u200b"),  # zero-width spaces are not space
        ("'\\x1cx'.trim()", "\x1cx"),  # Python's isspace() says it is; Go's does not
        ("'Ta©oCαt'.reverse()", "tαCo©aT"),
        # replace: Go's Replace
        ("'aaa'.replace('a', 'b')", "bbb"),
        ("'aaa'.replace('a', 'b', 2)", "bba"),
        ("'aaa'.replace('a', 'b', 0)", "aaa"),
        ("'aaa'.replace('a', 'b', -1)", "bbb"),
        ("'ab'.replace('', '-')", "-a-b-"),
        # code points
        ("'ta©o©αT'.charAt(4)", "©"),
        ("'abc'.charAt(3)", ""),
        ("'ta©o©αT'.indexOf('©', 3)", 4),
        ("'abc'.indexOf('')", 0),
        ("'abc'.indexOf('', 2)", 2),
        ("'abc'.indexOf('x')", -1),
        ("'ta©o©αT'.lastIndexOf('©')", 4),
        ("'bananananana'.lastIndexOf('nana', 7)", 6),
        ("'abc'.lastIndexOf('')", 3),
        ("''.lastIndexOf('x')", -1),
        ("'ta©o©αT'.substring(2, 6)", "©o©α"),
        ("'abc'.substring(3)", ""),
        # strings.quote
        ("strings.quote('a\"b\\n')", '"a\\"b\\n"'),
        # math.greatest and math.least: their arguments' own types; a tie keeps the first
        ("math.greatest(1, 2.5, 3u)", 3),
        ("math.greatest(1, 1.0)", 1),
        ("math.least(1.0, 1)", 1.0),
        ("math.least([3, -1.5, 2u])", -1.5),
        ("math.greatest(-5)", -5),
        ("math.greatest(9223372036854775807, 9223372036854775808.0)", 9223372036854775807),
    ],
)
def test_extensions(source: str, expected: Any) -> None:
    value = evaluate(source)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("'abc'.charAt(4)", "index out of range: 4"),
        ("'abc'.charAt(-1)", "index out of range: -1"),
        ("'abc'.indexOf('a', 3)", "index out of range: 3"),
        ("'abc'.indexOf('a', -1)", "index out of range: -1"),
        ("''.indexOf('a')", "index out of range: 0"),
        ("'abc'.lastIndexOf('a', 3)", "index out of range: 3"),
        ("'abc'.substring(4)", "index out of range: 4"),
        ("'abc'.substring(-1, 2)", "index out of range: -1"),
        ("'abc'.substring(2, 1)", "invalid substring range. start: 2, end: 1"),
        ("dyn([1]).join()", "join: the list has an element that is not a string"),
        ("dyn(1).split(',')", "no such overload: int.split(string)"),
        ("'a'.charAt(dyn(true))", "no such overload: string.charAt(bool)"),
        ("math.greatest(dyn('a'))", "no such overload: math.greatest(string)"),
        ("math.least(dyn([]))", "math.least(list) argument must not be empty"),
        ("math.greatest(1, double('NaN'))", "NaN values cannot be ordered"),
    ],
)
def test_extension_errors(source: str, message: str) -> None:
    with pytest.raises(EvaluationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evaluate(source)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("'a'.charAt('b')", "no such overload: string.charAt(string)"),
        ("'a'.split(',', 1, 2)", "no such overload: string.split(string, int, int)"),
        ("1.trim()", "no such overload: int.trim()"),
        ("'a'.substring(1u)", "no such overload: string.substring(uint)"),
        ("math.greatest()", "math.greatest() requires at least one argument"),
        ("math.least('a', 1)", "no such overload: math.least(string, int)"),
        ("r.`a b`()", "a backquoted name cannot be a method's"),
    ],
)
def test_extensions_checked_at_submission(source: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_expression(source, ["r"])


def test_a_word_count_starts_from_text_lines() -> None:
    split = compile_expression("r.split(' ')", ["r"])
    assert split.fn("the cat saw the dog") == ["the", "cat", "saw", "the", "dog"]
    trimmed = compile_expression("r.trim().lowerAscii().split(' ').filter(w, w != '')", ["r"])
    assert trimmed.fn("  The  CAT \n") == ["the", "cat"]


def test_a_hostile_replace_is_refused_at_submission() -> None:
    with pytest.raises(ExpressionError, match="expression too costly"):
        compile_expression("r.s.replace('', r.s)", ["r"])


# --------------------------------------------------------------------------- the semantic misses


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("bool('true')", True),
        ("bool('T')", True),
        ("bool('0')", False),
        ("bool(false)", False),
        ("bool(dyn('False'))", False),
    ],
)
def test_bool_conversion(source: str, expected: bool) -> None:
    assert evaluate(source) is expected


def test_bool_conversion_refuses_other_strings_and_types() -> None:
    with pytest.raises(EvaluationError, match="bool\\(\\) cannot convert the string 'TrUe'"):
        evaluate("bool('TrUe')")
    with pytest.raises(EvaluationError, match="no such overload: bool\\(int\\)"):
        evaluate("bool(dyn(1))")
    with pytest.raises(ExpressionError, match="no such overload: bool\\(int\\)"):
        compile_expression("bool(1)", [])


def test_reserved_words_are_field_names_but_not_variables() -> None:
    assert evaluate("{'as': 1}.as + r.if", {"if": 2}) == 3
    assert evaluate("has(r.while) && !has(r.for)", {"while": 0}) is True
    with pytest.raises(ExpressionError, match="reserved word 'as' cannot be used"):
        compile_expression("as", [])
    with pytest.raises(ExpressionError, match="unknown method 'as'"):  # no such function
        compile_expression("r.as()", ["r"])


def test_backquoted_field_names() -> None:
    assert evaluate("r.`a/b` + {'x.y': 1}.`x.y`", {"a/b": 2}) == 3
    assert evaluate("has(r.`a-b`)", {"a b": 1}) is False


def test_exists_one_evaluates_every_element() -> None:
    with pytest.raises(EvaluationError, match="division by zero"):
        evaluate("[3, 2, 1, 0].exists_one(n, 12 / n > 1)")  # false at the second: still raised
    assert evaluate("[1, 2, 3].exists_one(n, n > 2)") is True
    assert evaluate("[1, 2, 3].exists_one(n, n > 1)") is False


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("dyn(9223372036854775807) < 9223372036854775808.0", False),
        ("dyn(9223372036854775807) >= 9223372036854775808.0", True),
        ("9223372036854775807 >= dyn(9223372036854775808.0)", True),
        ("dyn(9223372036854775808.0) <= dyn(9223372036854775807)", True),
        ("dyn(18446744073709551615u) < 18446744073709551616.0", False),
        ("dyn(9007199254740993) > 9007199254740992.0", False),
        # equality stays exact (no spec case says otherwise)
        ("dyn(9007199254740993) == 9007199254740992.0", False),
    ],
)
def test_ints_and_doubles_order_as_doubles(source: str, expected: bool) -> None:
    assert evaluate(source) is expected


def test_int_of_minus_two_to_the_63_is_out_of_range() -> None:
    with pytest.raises(EvaluationError, match="int\\(\\) out of range"):
        evaluate("int(-9223372036854775808.0)")
    assert evaluate("int(-9223372036854774784.0)") == -9223372036854774784


def test_a_list_is_indexed_by_a_whole_double() -> None:
    assert evaluate("[1, 2][1.0]") == 2
    assert evaluate("[7, 8, 9][dyn(0.0)]") == 7
    with pytest.raises(EvaluationError, match="not a whole number"):
        evaluate("[7, 8, 9][dyn(0.5)]")
    with pytest.raises(EvaluationError, match="index out of range"):
        evaluate("[7][1.0]")


def test_an_unknown_variable_is_refused_at_submission() -> None:
    """``x || true`` with an undeclared ``x``: the checker refuses it, as the spec's checker
    does (its conformance case runs unchecked, ``disable_check``, where it is ``true``)."""
    with pytest.raises(ExpressionError, match="unknown identifier 'x'"):
        compile_expression("x || true", ["r"])


# --------------------------------------------------------------------------- the vector backend


def vector(source: str, column: pa.Array) -> Any:
    expression = compile_expression(source, ["r"])
    return compile_vector(expression, {"r": column.type})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("r.lowerAscii()", ["tacocÆt", None]),
        ("r.upperAscii()", ["TACOCÆT", None]),
        ("r.replace('a', 'o')", ["TocoCÆt", None]),
        ("r.replace('a', 'o', 0)", ["TacoCÆt", None]),
    ],
)
def test_the_vector_backend_runs_what_maps_onto_arrow(source: str, expected: list[Any]) -> None:
    column = pa.array(["TacoCÆt", None], pa.string())
    compiled = vector(source, column)
    assert not isinstance(compiled, NotVectorized)
    values, failed = compiled.evaluate(column, length=2)
    row = compile_expression(source, ["r"]).fn("TacoCÆt")
    assert values[0].as_py() == row == expected[0]
    assert failed is not None and failed.to_pylist() == [False, True]  # null is no string


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("r.split(' ')", "the strings extension's split()"),
        ("r.substring(1)", "the strings extension's substring()"),
        ("r.trim()", "the strings extension's trim()"),
        ("r.replace(r, 'x')", "the strings extension's replace()"),
        ("math.greatest(size(r), 1)", "the function math.greatest"),
        ("bool(r)", "the conversion bool()"),
    ],
)
def test_the_vector_backend_says_what_runs_by_rows(source: str, reason: str) -> None:
    compiled = vector(source, pa.array(["a"], pa.string()))
    assert isinstance(compiled, NotVectorized) and reason in str(compiled)


# --------------------------------------------------------------------------- format


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('"%s: %d".format(["a", 1])', "a: 1"),
        ('"%.2f%%".format([12.5])', "12.50%"),
        ('"%.0f %.0f".format([2.5, 3.5])', "2 4"),  # half to even, as Go
        ('"%f %e".format([2, 3u])', "2.000000 3.000000e+00"),
        ('"%d %f".format([double("NaN"), double("-Infinity")])', "NaN -Infinity"),
        ('"%x %X %o %b %b".format([30, "Hi", 8, 5, false])', "1e 4869 10 101 0"),
        ('"%s".format([[1, "a", 2.5, null, true]])', "[1, a, 2.5, null, true]"),
        ('"%s".format([{"b": 1, "a": [2]}])', "{a: [2], b: 1}"),
        ("r.format([1, 'x'])", "1-x"),
    ],
)
def test_format(source: str, expected: str) -> None:
    assert evaluate(source, "%d-%s") == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('"%a".format([1])', 'unrecognized formatting clause "a"'),
        ('"%d %d".format([1])', "index 1 out of range"),
        ('"%d".format(["x"])', "decimal clause can only be used on integers, was given string"),
        ('"%.101f".format([1.0])', "a precision over 100"),
        ('"%b".format([1.5])', "only integers and bools can be formatted as binary"),
    ],
)
def test_format_errors(source: str, message: str) -> None:
    with pytest.raises(EvaluationError, match=message):
        evaluate(source)


def test_extension_work_repeated_per_element_counts_against_the_step_limit() -> None:
    """A string-extension function on a value that does not depend on the element is paid for
    by the comprehension (its size times the range's), as ``contains`` is."""
    records = {"xs": list(range(20000)), "s": "a " * 20000}
    for source in ("r.xs.map(x, r.s.split(' '))", "r.xs.map(x, 'b'.replace('b', r.s))"):
        with pytest.raises(EvaluationError, match="step limit exceeded"):
            evaluate(source, records)
    assert evaluate("r.tags.map(t, t.replace('a', r.id))", {"tags": ["xa", "b"], "id": "Q"}) == [
        "xQ",
        "b",
    ]


def test_quote_replaces_what_is_not_a_code_point() -> None:
    # JSON can carry a lone surrogate ("\ud800"); cel-go's quote makes it U+FFFD
    assert evaluate("strings.quote(r)", "a\ud800b") == '"a\ufffdb"'
