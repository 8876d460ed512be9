"""Hostile expressions in a submitted graph: a problem naming the limit, never a crash or a hang.

Deep nesting, huge literals and long inputs are refused by ``compile_graph`` (a 422 at the
API, pointing at the parameter) before anything is built: the lexer and parser stop at the
expression's limits (``max_length`` 4,096 characters, ``max_depth`` 48 levels), so none of
these recurses without bound or reads megabytes token by token.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from operators.graph import GraphError, compile_graph, parse_graph

TOO_DEEP = "expression nested too deeply (more than 48 levels)"


def graph(expr: str) -> dict[str, Any]:
    nodes = {"i": {"op": "input"}, "f": {"op": "map", "expr": expr}, "o": {"op": "output"}}
    return {"nodes": nodes, "edges": [["i", "f"], ["f", "o"]]}


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("(" * 49 + "r" + ")" * 49, f"line 1, column 49: {TOO_DEEP}"),
        ("[" * 1_000 + "r" + "]" * 1_000, f"line 1, column 49: {TOO_DEEP}"),
        # The column is where the parser passed the limit (unary chains count differently).
        ("!" * 60 + "true", f"line 1, column 13: {TOO_DEEP}"),
        ("-" * 100 + "r", f"line 1, column 53: {TOO_DEEP}"),
        (
            '"' + "x" * 10_000_000 + '"',
            "line 1, column 4097: expression too long (10000002 characters, the limit is 4096)",
        ),
        (
            "r + " * 250_000 + "1",
            "line 1, column 4097: expression too long (1000001 characters, the limit is 4096)",
        ),
        (
            "(" * 10_000 + "r" + ")" * 10_000,
            "line 1, column 4097: expression too long (20001 characters, the limit is 4096)",
        ),
    ],
    ids=["parens", "lists", "nots", "negations", "10MB-literal", "1MB-expression", "10k-deep"],
)
def test_hostile_expressions_are_a_problem_naming_the_limit(expr: str, message: str) -> None:
    started = time.monotonic()
    with pytest.raises(GraphError) as refused:
        compile_graph(parse_graph(graph(expr)))
    assert [(p.pointer, p.message) for p in refused.value.problems] == [
        ("/nodes/f/expr", f"expression does not compile: {message}")
    ]
    assert time.monotonic() - started < 5.0  # refused before it is read, not after
