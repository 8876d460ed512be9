"""CEL's budget (issue 16): RE2 for ``matches``, the cost estimate, the step limit at run time."""

from __future__ import annotations

from typing import Any

import pytest

from operators.graph import EvaluationError, ExpressionError, compile_expression
from operators.graph.cel import MAX_COST, MAX_RECORD_BYTES, MAX_STEPS
from operators.graph.cel.regex import _cached_pattern
from operators.graph.compiler import compile_graph
from operators.graph.spec import GraphError, parse_graph

B = MAX_RECORD_BYTES


def fails(source: str, record: Any, message: str, **options: Any) -> None:
    """The expression fails on ``record`` with exactly ``message``, in ``fn`` and in batch."""
    options.setdefault("max_cost", None)
    expression = compile_expression(source, batch=("map",), **options)
    with pytest.raises(EvaluationError) as caught:
        expression.fn(record)
    assert str(caught.value) == message
    with pytest.raises(EvaluationError) as caught:
        expression.batch["map"]([record])
    assert str(caught.value) == message


def cost(source: str) -> float:
    return compile_expression(source, max_cost=None).cost


# --------------------------------------------------------------------------- RE2


@pytest.mark.parametrize(
    ("source", "record", "expected"),
    [
        # a pattern that backtracks exponentially in re: RE2 is linear (the 40-character case
        # would take re days; the 100,000-character one, longer than the universe has lasted)
        ('r.matches("^(a+)+$")', "a" * 40 + "b", False),
        ('r.matches("^(a+)+$")', "a" * 100_000 + "b", False),
        ('r.matches("^(a+)+$")', "a" * 100_000, True),
        ('r.matches("(x+x+)+y")', "x" * 5_000, False),
        # RE2 semantics where they differ from Python's re (and PCRE)
        ('r.matches("a$")', "a\n", False),  # re: $ also matches before a final newline
        ('r.matches("a\\\\z")', "a", True),  # \z ends the text (re calls it \Z)
        ('r.matches("^\\\\d$")', "\u0663", False),  # \d is ASCII-only (re: any Unicode digit)
        ('r.matches("^\\\\w+$")', "été", False),  # \w too
        ('r.matches("^.$")', "é", True),  # . is a character, not a byte
        ('r.matches("(?i)^ÉTÉ$")', "été", True),  # case folding is Unicode
        ('r.matches("^a{2,1000}$")', "a" * 1000, True),
        # searched for anywhere in the string, as CEL's matches is
        ('r.matches("b")', "abc", True),
        ('r.matches("^b")', "abc", False),
        ("r.s.matches(r.p)", {"s": "abc", "p": "^a.c$"}, True),
        ("r.s.matches(r.p)", {"s": "abd", "p": "^a.c$"}, False),
        ("matches(r.s, r.p)", {"s": "a" * 40 + "b", "p": "^(a+)+$"}, False),
    ],
)
def test_matches_is_re2(source: str, record: Any, expected: bool) -> None:
    assert compile_expression(source).fn(record) is expected


@pytest.mark.parametrize(
    ("source", "message", "position"),
    [
        # what RE2 does not take: a literal pattern is refused at submission
        ('r.matches("(a)\\\\1")', "invalid regular expression: invalid escape sequence: \\1", 10),
        ('r.matches("(?=a)")', "invalid regular expression: invalid perl operator: (?=", 10),
        ('r.matches("(?<!a)b")', "invalid regular expression: invalid perl operator: (?<!", 10),
        ('r.matches("a\\\\Z")', "invalid regular expression: invalid escape sequence: \\Z", 10),
        ('r.matches("a{1001}")', "invalid regular expression: invalid repetition size: {1001}", 10),
        ('r.matches("a++")', "invalid regular expression: bad repetition operator: ++", 10),
        ('r.matches("(")', "invalid regular expression: missing ): (", 10),
        ("r.matches(1)", "no such overload: string.matches(int)", 10),
        ("1.matches(r)", "no such overload: int.matches(string)", 2),
    ],
)
def test_patterns_re2_does_not_take_are_refused(source: str, message: str, position: int) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source)
    assert (caught.value.message, caught.value.position) == (message, position)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"s": "abab", "p": "(ab)\\1"}, "invalid regular expression: invalid escape sequence: \\1"),
        ({"s": "a", "p": "("}, "invalid regular expression: missing ): ("),
        ({"s": "a", "p": 1}, "no such overload: string.matches(int)"),
        ({"s": 1, "p": "a"}, "no such overload: int.matches(string)"),
        ({"s": "\ud800", "p": "a"}, "matches() on a string that is not valid Unicode"),
    ],
)
def test_a_pattern_from_the_record_that_does_not_compile_fails_the_record(
    record: Any, message: str
) -> None:
    fails("r.s.matches(r.p)", record, message)
    fails("[1].exists(x, r.s.matches(r.p))", record, message)  # counted, in a comprehension


def test_patterns_from_records_are_cached_boundedly() -> None:
    assert _cached_pattern.cache_info().maxsize == 256
    expression = compile_expression("r.s.matches(r.p)")
    before = _cached_pattern.cache_info()
    for _ in range(3):
        assert expression.fn({"s": "x1", "p": "^x[0-9]$"}) is True
    after = _cached_pattern.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 2)


def test_a_search_that_would_cost_more_than_the_step_limit_fails_the_record() -> None:
    # [ab]*a[ab]{20}c: 27 RE2 instructions; worst case, each byte of the string visits them all
    source = 'r.matches("[ab]*a[ab]{20}c")'
    expression = compile_expression(source, max_steps=1000)
    assert expression.fn("ab" * 74) is False  # 148 bytes x 27 / 4 = 999 steps
    message = (
        "matches() would take more than the step limit (1,000): a string of 150 bytes against"
        " a pattern of 27 RE2 instructions"
    )
    fails(source, "ab" * 75, message, max_steps=1000)
    record = {"s": "ab" * 75, "p": "[ab]*a[ab]{20}c"}
    fails("r.s.matches(r.p)", record, message, max_steps=1000)


# --------------------------------------------------------------------------- the estimate


def test_the_estimate_of_a_comprehension_is_its_range_times_its_body() -> None:
    # r.xs: 2 (r, .xs), its size B; x * 2: 3 per element, plus 1; at most B / 2 elements
    assert cost("r.xs.map(x, x * 2)") == 2 + 1 + (1 + 3) * B / 2
    assert cost("r.xs.filter(x, x > 1).map(y, y * 2)") == 2 * (1 + 4 * B / 2) + 2
    # no comprehension: one per node, and half the smaller side of == on a string
    assert cost('r.value * 2 > 10 && r.key != "x"') == 11 + 3 / 2
    # a literal range is as long as it is
    assert cost("[1, 2, 3].map(x, x * 2)") == 4 + 1 + 4 * 3.5


def test_nesting_over_the_same_records_list_multiplies() -> None:
    # inner: 2 + sum over y of (1 + 3 + y / 2) = 2 + 2B + B / 2; outer: B / 2 times that, + 2
    assert cost("r.exists(x, r.exists(y, x == y))") == 2 + (3 + 2.5 * B) * B / 2
    assert cost("r.exists(x, r.exists(y, x == y))") > 1000 * MAX_COST


def test_nesting_over_the_elements_own_lists_is_linear() -> None:
    # o.items: a part of o, so the items of all the orders are at most the record
    # per order o: 3, and 1 + 4 + i / 2 per item i (i.sku == "x" reads at most i); summed
    # over the items of o, at most o / 2 of them with sizes adding up to o: 3 + 3 o; over the
    # orders, at most B / 2 of them with sizes adding up to B: 2 + 1 + 4 B / 2 + 3 B
    nested = cost('r.orders.exists(o, o.items.exists(i, i.sku == "x"))')
    assert nested == 3 + 5 * B
    assert nested < MAX_COST / 10


@pytest.mark.parametrize(
    "source",
    [
        "r.xs.map(x, x * 2)",
        'r.tags.exists(t, t == "b")',
        "r.tags.map(t, r.id + ':' + t)",  # per-element string work is counted when evaluated
        "r.xs.filter(x, x % 2 == 1).map(x, x * x).exists(x, x > 100)",
        'r.orders.map(o, o.items.filter(i, i.qty > 0).map(i, i.sku + "/" + o.id))',
        "r.xs.exists(x, x.name == r.name)",  # the element's side bounds the comparison
        'r.items.map(i, {"sku": i.sku, "qty": i.qty * 2, "total": i.qty * i.price})',
        "[1, 2, 3].exists(k, r.xs.exists(x, x == k))",  # a literal times a record's list
        'r.s.matches("^[a-z0-9._%+-]+@[a-z0-9.-]+\\\\.[a-z]{2,}$") && r.s.size() < 100',
        "r.s.contains('x') || r.s.lower().startsWith(r.t) || int(r.n) > 2",
        " + ".join(f"r.f{i}" for i in range(40)),  # a chain of + as deep as may be
    ],
)
def test_ordinary_expressions_are_under_the_limit(source: str) -> None:
    assert compile_expression(source).cost <= MAX_COST


@pytest.mark.parametrize(
    ("source", "position"),
    [
        ("r.exists(x, r.exists(y, x == y))", 2),
        ("r.a.all(x, r.b.exists(y, y == x))", 4),
        ("r.a.map(x, r.b.map(y, [x, y]))", 4),
        ("r.a.exists(x, x in r.b)", 4),  # in visits every element of r.b, per element of r.a
        ("r.a.exists(x, r.b == r.c)", 4),  # the same two lists compared per element
        ("r.a.map(x, r.a).exists(l, r.a.exists(y, y == l))", 16),
    ],
)
def test_quadratic_expressions_are_refused(source: str, position: int) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source)
    assert caught.value.position == position
    estimate = cost(source)
    assert caught.value.message == (
        f"expression too costly: its estimated cost on a record of 1,048,576 bytes is"
        f" {estimate:,.0f}, over the limit of 100,000,000 (this comprehension's range times its"
        " body's cost)"
    )


def test_the_limit_and_the_record_size_are_parameters() -> None:
    source = "r.xs.map(x, x * 2)"
    compile_expression(source, max_cost=2 * B + 3)
    with pytest.raises(ExpressionError, match="is 2,097,155, over the limit of 2,097,154"):
        compile_expression(source, max_cost=2 * B + 2)
    assert compile_expression(source, max_record_bytes=1000).cost == 3 + 2 * 1000
    assert compile_expression("r.exists(x, r.exists(y, x == y))", max_record_bytes=1000).cost < 1e7


def test_a_costly_expression_without_a_costly_comprehension_points_nowhere() -> None:
    source = " || ".join(f"r.s{i}.matches(r.p{i})" for i in range(11))  # each up to MAX_STEPS
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source)
    assert caught.value.position == 0
    assert caught.value.message.endswith("over the limit of 100,000,000")


def test_the_cost_refusal_is_a_graph_problem() -> None:
    spec = parse_graph(
        {
            "nodes": {
                "in": {"op": "input"},
                "f": {"op": "filter", "expr": "r.exists(x, r.exists(y, x == y))"},
                "out": {"op": "output"},
            },
            "edges": [["in", "f"], ["f", "out"]],
        }
    )
    with pytest.raises(GraphError) as caught:
        compile_graph(spec)
    [problem] = caught.value.problems
    assert problem.pointer == "/nodes/f/expr"
    assert problem.message == (
        "expression does not compile: line 1, column 3: expression too costly: its estimated"
        " cost on a record of 1,048,576 bytes is 1,374,391,107,586, over the limit of"
        " 100,000,000 (this comprehension's range times its body's cost)"
    )


# --------------------------------------------------------------------------- steps at run time

LIMIT = "step limit exceeded: the record needs more than {:,} steps"


def test_a_nested_comprehension_pays_its_range_times_its_body_as_it_starts() -> None:
    # l.exists(y, y == -1): 4 nodes and 1 per element; 20 lists of 20: 20 x 20 x 4 steps
    source = "r.exists(l, l.exists(y, y == -1))"
    shared = list(range(20))
    assert compile_expression(source, max_steps=1600).fn([shared] * 20) is False
    fails(source, [shared] * 20, LIMIT.format(1599), max_steps=1599)
    # the limit is per record: a batch of many records each within it passes
    expression = compile_expression(source, max_steps=1600, batch=("filter",))
    assert expression.batch["filter"]([[shared] * 20] * 1000) == []
    # a nested range of at most 16 elements is not counted (its work per element is bounded)
    assert compile_expression(source, max_steps=0).fn([shared[:16]] * 1000) is False


def test_a_list_shared_by_every_element_fails_on_the_default_limit() -> None:
    xs = list(range(20_000))
    fails("r.exists(l, l.exists(y, y == -1))", [xs] * 20_000, LIMIT.format(MAX_STEPS))


def test_comprehensions_not_nested_are_not_counted() -> None:
    # linear in the value, bounded by the estimate: no counter at all in the code
    expression = compile_expression('r.tags.exists(t, t == "b") || r.xs.map(x, x * 2) == []')
    assert "_k" not in expression.python
    assert expression.fn({"tags": ["a"] * 100_000, "xs": [1] * 100_000}) is False
    assert "_k" not in compile_expression('r.value * 2 > 10 && r.key != "x"').python


@pytest.mark.parametrize(
    ("source", "record", "steps"),
    [
        # a string copied into a result per element, not depending on it: a tenth per
        # character and per + of the chain, paid as the comprehension starts, for all elements
        ("r.tags.map(t, r.id + t)", {"id": "x" * 300, "tags": ["a"] * 10}, 10 * 30),
        ("r.tags.map(t, r.id + ':' + t)", {"id": "x" * 300, "tags": ["a"] * 10}, 10 * 60),
        ("r.tags.map(t, t == 'b' ? r.id + t : t)", {"id": "x" * 300, "tags": ["a"] * 10}, 300),
        ("r.tags.map(t, r.id.upper())", {"id": "x" * 300, "tags": ["a"] * 10}, 10 * 30),
        # ... under 2,560 characters in all (here 255 x 10), nothing
        ("r.tags.map(t, r.id + t)", {"id": "x" * 255, "tags": ["a"] * 10}, 0),
        # a list copied: a tenth per element
        ("r.tags.map(t, r.xs + [t])", {"xs": [0] * 100, "tags": ["a"] * 10}, 10 * 10),
        # strings read through per element: a tenth per character
        ("r.tags.filter(t, r.id.contains(t))", {"id": "x" * 300, "tags": ["a"] * 10}, 10 * 30),
        ("r.tags.map(t, int(r.n))", {"n": "0" * 298 + "12", "tags": ["a"] * 10}, 10 * 30),
        # matches: the string's bytes times the pattern's program (5 instructions) / 4, per
        # element, whatever the string depends on
        ('r.tags.map(t, r.id.matches("x$"))', {"id": "x" * 100, "tags": ["a"] * 10}, 10 * 125),
        # elements of lists and maps visited per element: one each, all levels down
        ("r.tags.filter(t, t in r.xs)", {"xs": [0] * 100, "tags": [1] * 10}, 10 * 100),
        ("r.tags.filter(t, t in r.xs)", {"xs": [[0, 0]] * 50, "tags": [1] * 10}, 10 * 150),
        ("r.tags.filter(t, r.xs == r.ys)", {"xs": [0] * 10, "ys": [0] * 10, "tags": [1]}, 10),
        # ... but what depends on the element adds up to at most the range: not counted
        ("r.tags.filter(t, t == r.id)", {"id": "x" * 1000, "tags": ["x" * 1000] * 10}, 0),
        ("r.tags.filter(t, t.startsWith(r.id))", {"id": "x" * 1000, "tags": ["x"] * 10}, 0),
        ("r.tags.map(t, t + t + ':')", {"tags": ["x" * 1000] * 10}, 0),
        ("r.tags.map(t, t.upper().contains(t))", {"tags": ["x" * 1000] * 10}, 0),
        ("r.tags.filter(t, 1 in t)", {"tags": [[0] * 1000] * 10}, 0),
    ],
)
def test_work_inside_comprehensions_is_counted(source: str, record: Any, steps: int) -> None:
    compile_expression(source, max_steps=steps, max_cost=None).fn(record)
    if steps:
        fails(source, record, LIMIT.format(steps - 1), max_steps=steps - 1)
