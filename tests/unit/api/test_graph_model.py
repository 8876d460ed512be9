"""The graph model at the edge: the shape checker's problems as pydantic errors, exactly.

The model delegates to :func:`parse_graph` (the one shape checker): whatever the document,
the problems a 422 lists are the checker's, pointer for pointer and message for message. The
body's own limits (size, nesting) are measured on its bytes, before it is parsed.
"""

from __future__ import annotations

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
)
from api.models import GRAPH_PROBLEM, problem_from_validation_error
from api.server.records import record_depth
from operators.graph import compile_expression
from operators.graph.spec import MAX_EDGES, MAX_NODES, MAX_SCOPE_DEPTH, MAX_SCOPES, MAX_TIME_DEPTH
from service.app import GraphError, GraphSpec, Invalid, parse_graph

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
