"""The graph model at the edge: the shape checker's problems as pydantic errors, exactly.

The model delegates the graph's structure to :func:`parse_graph` (the one structure checker):
whatever the document, the problems a 422 lists are the checker's, pointer for pointer and
message for message. Each node's parameters are checked by its operator's pydantic model (a
union on ``op``), whose problems must be the compiler's own for a library user's graph, in
the same place of the same list. The body's own limits (size, nesting) are measured on its
bytes, before it is parsed.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from api.graph_model import (
    GRAPH,
    MAX_GRAPH_BYTES,
    MAX_GRAPH_DEPTH,
    check_graph_body,
    graph_spec,
    json_depth,
    node_params,
)
from api.models import GRAPH_PROBLEM, problem_from_validation_error
from api.server.records import record_depth
from operators.graph import CATALOGUE, OpKind, Param, compile_expression, compile_graph
from operators.graph.compiler import param_problems
from operators.graph.spec import MAX_EDGES, MAX_NODES, MAX_SCOPE_DEPTH, MAX_SCOPES, MAX_TIME_DEPTH
from service.app import GraphError, GraphSpec, Invalid, Problem, parse_graph

OPENAPI = Path(__file__).resolve().parents[3] / "openapi.yaml"

PIPE: dict[str, Any] = {
    "nodes": {"in": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["in", "out"]],
}

BAD_GRAPHS: list[Any] = [
    [],
    None,
    {**PIPE, "node": {}, "a/b": 1, "c~d": 2},
    {**PIPE, "time": {"product": [{"product": ["u8", "u64"]}, "u64"]}},
    {"nodes": {}},
    {"nodes": {"1st": {"op": "input"}, "a/b": {"op": "input"}, "": {}, "[key]": {"op": 3}}},
    {"nodes": {"x" * 129: {"op": "input"}, "in\n": {"op": "input"}}},
    {"scopes": {"a": {"parent": "b"}, "b": {"parent": "a"}, "c": {"kind": "x", "y": 1}}, **PIPE},
    {**PIPE, "edges": [["in"], ["in:", "out:x"], {"from": "in:x", "to": "out:y"}, [1, None]]},
    {
        "time": "u32",
        "scopes": {"loop": {"kind": "spiral"}, "up": {"parent": "down"}},
        "nodes": {"ok": {"op": "input"}, "bad name": {"op": "map"}, "x": {"op": "map", "scope": 1}},
        "edges": [["ok", "x"], ["ok"], ["ok", "x:y"]],
        "extra": True,
    },
    {"scopes": {1: {}}, "nodes": {2: {"op": "input"}, False: {"op": "input"}}},  # YAML keys
]


def checker_problems(document: Any) -> list[dict[str, str]]:
    with pytest.raises(GraphError) as caught:
        parse_graph(document)
    return [{"pointer": p.pointer, "detail": p.message} for p in caught.value.problems]


def model_problems(document: Any) -> list[dict[str, str]]:
    with pytest.raises(ValidationError) as caught:
        GRAPH.validate_python(document)
    assert {e["type"] for e in caught.value.errors()} == {GRAPH_PROBLEM}
    return problem_from_validation_error(caught.value)


@pytest.mark.parametrize("document", BAD_GRAPHS, ids=lambda d: str(d)[:40])
def test_the_model_reports_exactly_the_checkers_problems(document: Any) -> None:
    expected = checker_problems(document)
    assert model_problems(document) == expected
    with pytest.raises(Invalid) as caught:
        graph_spec(document)
    assert caught.value.detail == f"the graph has {len(expected)} problem(s)"
    assert caught.value.extra["problems"] == expected


def test_pointers_keep_escapes_and_names_pydantic_uses_as_marks() -> None:
    found = {p["pointer"] for p in model_problems(BAD_GRAPHS[5])}
    assert {"/nodes/a~1b", "/nodes/", "/nodes/[key]"} <= found


def test_messages_with_braces_are_kept_as_they_are() -> None:
    assert model_problems({**PIPE, "time": "u32"}) == [
        {
            "pointer": "/time",
            "detail": 'the time domain must be "u64" or {"product": [<time domain>, "u64"]}',
        }
    ]


def test_a_valid_graph_becomes_its_spec_with_its_document() -> None:
    document = {**PIPE, "name": "pipe", "description": "kept as given"}
    spec = graph_spec(document)
    assert isinstance(spec, GraphSpec)
    assert spec == parse_graph(document)
    assert spec.document is document
    assert (spec.inputs(), spec.outputs()) == (["in"], ["out"])


def test_meaning_is_left_to_the_compiler() -> None:
    # An unknown operator, a parameter it does not take, an expression that does not compile
    # and a dangling edge are all of the right shape: the compiler lists them together.
    document = {
        "nodes": {"in": {"op": "input"}, "m": {"op": "mapp", "size": 3}, "f": {"op": "filter"}},
        "edges": [["in", "nowhere"]],
    }
    assert graph_spec(document).nodes["m"].params == {"size": 3}


# --------------------------------------------------------------------------- parameters

NODES: list[dict[str, Any]] = [
    {"op": "map", "expr": "r + 1"},
    {"op": "map"},
    {"op": "map", "expr": 3, "size": 3, "a/b~c": None, "on_error": "ignore"},
    {"op": "map", "expr": "r +", "on_error": "fail"},
    {"op": "filter", "expr": "r", "on_error": None},
    {"op": "partition", "parts": 0, "expr": "r"},
    {"op": "partition", "parts": True, "expr": ["r"]},
    {"op": "partition", "parts": 2.0},
    {"op": "aggregate"},
    {"op": "mapp", "expr": "r"},
    {"op": "input", "expr": "r"},
]


def compiled_problems(spec: GraphSpec) -> list[tuple[str, str]]:
    try:
        compile_graph(spec)
    except GraphError as error:
        return [(p.pointer, p.message) for p in error.problems]
    return []


def with_node(node: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": {"in": {"op": "input"}, "n": node}, "edges": [["in", "n"]]}


@pytest.mark.parametrize("node", NODES, ids=lambda n: str(n)[:50])
def test_parameters_are_checked_by_the_operators_model_as_the_compiler_checks_them(
    node: dict[str, Any],
) -> None:
    document = with_node(node)
    at_the_edge, library = graph_spec(document), parse_graph(document)
    kind = CATALOGUE.get(node["op"])
    expected = None if kind is None else param_problems(library.nodes["n"], kind)
    assert at_the_edge.nodes["n"].checked == expected
    assert library.nodes["n"].checked is None
    assert compiled_problems(at_the_edge) == compiled_problems(library)


def test_the_models_problems_are_exact_and_in_the_compilers_order() -> None:
    spec = graph_spec(with_node(NODES[2]))
    assert [(p.pointer, p.message) for p in spec.nodes["n"].checked or ()] == [
        ("/nodes/n/size", "map has no parameter 'size'"),
        ("/nodes/n/a~1b~0c", "map has no parameter 'a/b~c'"),
        ("/nodes/n/expr", "an expression must be a string"),
        ("/nodes/n/on_error", "must be one of drop, fail"),
    ]
    # An expression that compiles wrong is the compiler's: it keeps its place among them.
    assert compiled_problems(graph_spec(with_node({**NODES[3], "on_error": "x"}))) == [
        (
            "/nodes/n/expr",
            "expression does not compile: line 1, column 4: unexpected end of expression",
        ),
        ("/nodes/n/on_error", "must be one of drop, fail"),
    ]


def test_the_compiler_takes_the_edges_word_for_the_parameters() -> None:
    spec = graph_spec(with_node({"op": "map", "expr": "r", "size": 3}))
    assert compiled_problems(spec) == [("/nodes/n/size", "map has no parameter 'size'")]
    node = dataclasses.replace(spec.nodes["n"], checked=())
    assert compiled_problems(dataclasses.replace(spec, nodes={**spec.nodes, "n": node})) == []


def test_the_union_is_discriminated_on_op_and_covers_the_registry() -> None:
    schema = node_params().json_schema()
    assert set(schema["discriminator"]["mapping"]) == set(CATALOGUE)
    assert node_params().validate_python({"op": "partition", "parts": 3, "expr": "r"}).op == (
        "partition"
    )


def test_a_deployers_operator_gets_its_model_when_it_is_registered() -> None:
    kind = OpKind(
        "shout", 1, 1, {"times": Param("int", minimum=1, maximum=3)}, builder=lambda i, p: i
    )
    CATALOGUE["shout"] = kind
    try:
        assert "shout" in node_params().json_schema()["discriminator"]["mapping"]
        checked = graph_spec(with_node({"op": "shout", "times": 4})).nodes["n"].checked
        assert checked == (Problem("/nodes/n/times", "must be an integer from 1 to 3"),)
    finally:
        del CATALOGUE["shout"]
    assert graph_spec(with_node({"op": "shout", "times": 4})).nodes["n"].checked is None


PARAM_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-3, 2**63)
    | st.text(max_size=4)
    | st.lists(st.integers(), max_size=2)
)


@given(
    st.sampled_from(sorted(CATALOGUE)),
    st.dictionaries(
        st.sampled_from(["expr", "parts", "on_error", "key", "x", "by", "n"]),
        PARAM_VALUES,
        max_size=4,
    ),
)
def test_any_parameters_get_the_same_problems_at_the_edge_as_in_the_library(
    op: str, params: dict[str, Any]
) -> None:
    node = {**params, "op": op}
    document = with_node(node)
    expected = param_problems(parse_graph(document).nodes["n"], CATALOGUE[op])
    assert graph_spec(document).nodes["n"].checked == expected


def test_the_json_schema_can_be_generated() -> None:
    schema = GRAPH.json_schema()
    assert (schema["title"], schema["type"], schema["required"]) == ("Graph", "object", ["nodes"])


# --------------------------------------------------------------------------- the body's limits

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab:,é\n'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\a'), children, max_size=3)
    ),
    max_leaves=20,
)


@given(JSON, st.booleans())
def test_json_depth_is_the_parsed_values_depth(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_depth(text) == record_depth(value)


def nested(depth: int) -> bytes:
    """A body whose graph nests ``depth`` levels: its node ``a`` holds lists down to it."""
    lists = depth - 3  # the graph, its nodes and the node are three levels
    return (
        b'{"graph": {"nodes": {"a": {"op": "input", "x": ' + b"[" * lists + b"]" * lists + b"}}}}"
    )


def test_a_body_as_deep_as_the_limit_passes_one_deeper_is_refused() -> None:
    check_graph_body(nested(MAX_GRAPH_DEPTH))
    assert json_depth(nested(MAX_GRAPH_DEPTH)) == MAX_GRAPH_DEPTH + 1  # the body's own object
    with pytest.raises(Invalid) as caught:
        check_graph_body(nested(MAX_GRAPH_DEPTH + 1))
    assert caught.value.detail == "the graph has 1 problem(s)"
    assert caught.value.extra["problems"] == [
        {
            "pointer": "",
            "detail": f"at most {MAX_GRAPH_DEPTH} levels of nesting are allowed in a graph",
        }
    ]


def test_a_body_as_large_as_the_limit_passes_one_byte_more_is_refused() -> None:
    padding = MAX_GRAPH_BYTES - len(orjson.dumps({"graph": PIPE, "name": ""}))
    body = orjson.dumps({"graph": PIPE, "name": "x" * padding})
    assert len(body) == MAX_GRAPH_BYTES
    check_graph_body(body)
    with pytest.raises(Invalid) as caught:
        check_graph_body(body + b" ")
    assert caught.value.extra["problems"] == [
        {
            "pointer": "",
            "detail": f"at most {MAX_GRAPH_BYTES} bytes of JSON are allowed in a graph (this "
            f"request's body has {MAX_GRAPH_BYTES + 1})",
        }
    ]


# --------------------------------------------------------------------------- the contract


def test_openapi_states_the_graph_limits() -> None:
    schema = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))["components"]["schemas"]["Graph"]
    properties = schema["properties"]
    assert properties["nodes"]["maxProperties"] == MAX_NODES
    assert properties["edges"]["maxItems"] == MAX_EDGES
    assert properties["scopes"]["maxProperties"] == MAX_SCOPES
    description = " ".join(schema["description"].split())
    expression = inspect.signature(compile_expression).parameters["max_length"].default
    for stated in (
        f"at most 1 MiB ({MAX_GRAPH_BYTES:,} bytes) of JSON",
        f"nests at most {MAX_GRAPH_DEPTH} levels",
        f"at most {MAX_NODES} nodes, {MAX_EDGES} edges and {MAX_SCOPES} scopes",
        f"scopes nest at most {MAX_SCOPE_DEPTH} deep",
        f"an expression is at most {expression} characters",
    ):
        assert stated in description
    assert MAX_TIME_DEPTH == MAX_SCOPE_DEPTH  # "and so do products in the time domain"
