"""The shape checker's limits: each refusal names its limit, and costs no more than the limit.

A graph over a limit is refused before (or while) the part the limit bounds is read: 100,000
nodes are counted, not parsed; a chain of scopes or a time domain nested thousands deep is
walked only as deep as the limit, without recursion.
"""

import time
from typing import Any

import pytest

from operators.graph.spec import (
    MAX_EDGES,
    MAX_NODES,
    MAX_SCOPE_DEPTH,
    MAX_SCOPES,
    MAX_TIME_DEPTH,
    GraphError,
    TimeSpec,
    parse_graph,
)

PIPE: dict[str, Any] = {"nodes": {"in": {"op": "input"}, "out": {"op": "output"}}}


def problems(document: Any) -> list[tuple[str, str]]:
    with pytest.raises(GraphError) as caught:
        parse_graph(document)
    return [(p.pointer, p.message) for p in caught.value.problems]


def chain(length: int) -> dict[str, Any]:
    """Scopes ``s0`` (in the root) to ``s<length - 1>``, each in the one before."""
    return {f"s{i}": ({"parent": f"s{i - 1}"} if i else {}) for i in range(length)}


def products(depth: int) -> Any:
    """A time domain of ``depth`` nested products, built without recursion."""
    return TimeSpec(depth).describe()


def test_100_000_nodes_are_counted_not_parsed() -> None:
    # Every one of them has a bad name and no op: only the limit is reported.
    nodes = {f"{i} bad": [] for i in range(100_000)}
    began = time.perf_counter()
    assert problems({"nodes": nodes}) == [("/nodes", f"at most {MAX_NODES} nodes are allowed")]
    assert time.perf_counter() - began < 1.0  # parsing them all, with a problem each: seconds


def test_at_most_max_edges() -> None:
    edges = [["in", "out"]] * (MAX_EDGES + 1)
    assert problems({**PIPE, "edges": edges}) == [
        ("/edges", f"at most {MAX_EDGES} edges are allowed")
    ]
    assert len(parse_graph({**PIPE, "edges": edges[:MAX_EDGES]}).edges) == MAX_EDGES


def test_at_most_max_scopes() -> None:
    scopes = {f"s{i}": {} for i in range(MAX_SCOPES + 1)}
    assert problems({**PIPE, "scopes": scopes}) == [
        ("/scopes", f"at most {MAX_SCOPES} scopes are allowed")
    ]
    del scopes[f"s{MAX_SCOPES}"]
    assert len(parse_graph({**PIPE, "scopes": scopes}).scopes) == MAX_SCOPES


def test_scopes_nest_at_most_max_scope_depth() -> None:
    assert len(parse_graph({**PIPE, "scopes": chain(MAX_SCOPE_DEPTH)}).scopes) == MAX_SCOPE_DEPTH
    message = f"at most {MAX_SCOPE_DEPTH} scopes may nest in one another"
    assert problems({**PIPE, "scopes": chain(MAX_SCOPE_DEPTH + 2)}) == [
        (f"/scopes/s{MAX_SCOPE_DEPTH}/parent", message),
        (f"/scopes/s{MAX_SCOPE_DEPTH + 1}/parent", message),
    ]


def test_a_long_chain_of_scopes_costs_each_scope_the_limit_not_the_chain() -> None:
    began = time.perf_counter()
    found = problems({**PIPE, "scopes": chain(MAX_SCOPES)})
    assert len(found) == MAX_SCOPES - MAX_SCOPE_DEPTH
    assert time.perf_counter() - began < 1.0  # the whole chain per scope: 500,000 steps


def test_a_circle_longer_than_the_limit_is_too_deep() -> None:
    circle = chain(MAX_SCOPE_DEPTH + 8)
    circle["s0"] = {"parent": f"s{MAX_SCOPE_DEPTH + 7}"}
    message = f"at most {MAX_SCOPE_DEPTH} scopes may nest in one another"
    assert problems({**PIPE, "scopes": circle}) == [
        (f"/scopes/s{i}/parent", message) for i in range(MAX_SCOPE_DEPTH + 8)
    ]


def test_time_domains_nest_at_most_max_time_depth() -> None:
    assert parse_graph({**PIPE, "time": products(MAX_TIME_DEPTH)}).time == TimeSpec(MAX_TIME_DEPTH)
    pointer = "/time" + "/product/0" * MAX_TIME_DEPTH
    message = f"at most {MAX_TIME_DEPTH} products may nest in a time domain"
    assert problems({**PIPE, "time": products(MAX_TIME_DEPTH + 1)}) == [(pointer, message)]


def test_a_time_domain_nested_beyond_the_recursion_limit_is_a_problem() -> None:
    # Parsed recursively, this raised RecursionError.
    found = problems({**PIPE, "time": products(100_000)})
    assert [message for _pointer, message in found] == [
        f"at most {MAX_TIME_DEPTH} products may nest in a time domain"
    ]
    assert TimeSpec(100_000).describe() is not None  # described without recursion too


def test_the_spec_keeps_the_document_it_was_read_from() -> None:
    document = {**PIPE, "name": "kept", "edges": [{"from": "in", "to": "out:0"}]}
    spec = parse_graph(document)
    assert spec.document is document
    # What the spec means is what compares: the document is not part of it.
    assert spec == parse_graph({**PIPE, "edges": [{"from": "in:0", "to": "out"}]})
