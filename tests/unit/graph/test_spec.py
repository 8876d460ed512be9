"""Shape checks of graph documents: every problem at once, each with its JSON pointer."""

from typing import Any

import pytest

from operators.graph.spec import (
    MAX_NODES,
    EdgeSpec,
    GraphError,
    NodeSpec,
    PortRef,
    Problem,
    ScopeSpec,
    TimeSpec,
    escape,
    parse_graph,
)

TIME_MESSAGE = 'the time domain must be "u64" or {"product": [<time domain>, "u64"]}'
EDGE_MESSAGE = 'an edge is ["from:port", "to:port"] or {"from": .., "to": ..}'
NODES_MESSAGE = "nodes must be a non-empty object of named nodes"


def pipe(**extra: Any) -> dict[str, Any]:
    """A valid graph (input -> output) with ``extra`` top-level fields merged in."""
    return {
        "nodes": {"in": {"op": "input"}, "out": {"op": "output"}},
        "edges": [["in", "out"]],
        **extra,
    }


def problems(document: Any) -> list[tuple[str, str]]:
    with pytest.raises(GraphError) as caught:
        parse_graph(document)
    return [(p.pointer, p.message) for p in caught.value.problems]


# --------------------------------------------------------------------------- valid graphs


def test_a_valid_graph_becomes_specs() -> None:
    spec = parse_graph(
        {
            "name": "demo",
            "description": "anything",
            "time": "u64",
            "scopes": {
                "loop": {"kind": "iterative"},
                "inner": {"kind": "region", "parent": "loop"},
            },
            "nodes": {
                "words": {"op": "input"},
                "lengths": {"op": "map", "expr": "size(r)", "scope": "inner", "on_error": "fail"},
                "counts": {"op": "output"},
            },
            "edges": [["words", "lengths:0"], {"from": "lengths:0", "to": "counts"}],
        }
    )
    assert spec.time == TimeSpec(0)
    assert spec.scopes == {
        "loop": ScopeSpec("loop", "iterative", None, "/scopes/loop"),
        "inner": ScopeSpec("inner", "region", "loop", "/scopes/inner"),
    }
    assert spec.nodes["lengths"] == NodeSpec(
        "lengths",
        "map",
        {"expr": "size(r)", "on_error": "fail"},
        "inner",
        "/nodes/lengths",
    )
    assert spec.nodes["words"] == NodeSpec("words", "input", {}, None, "/nodes/words")
    assert spec.edges == [
        EdgeSpec(
            PortRef("words", 0), PortRef("lengths", 0), "/edges/0", "/edges/0/0", "/edges/0/1"
        ),
        EdgeSpec(
            PortRef("lengths", 0), PortRef("counts", 0), "/edges/1", "/edges/1/from", "/edges/1/to"
        ),
    ]
    assert spec.inputs() == ["words"]
    assert spec.outputs() == ["counts"]
    assert str(PortRef("lengths", 3)) == "lengths:3"


def test_defaults_time_u64_no_scopes_no_edges_and_iterative_scopes() -> None:
    spec = parse_graph({"scopes": {"s": {}}, "nodes": {"in": {"op": "input"}}})
    assert spec.time == TimeSpec(0)
    assert spec.edges == []
    assert spec.scopes["s"].kind == "iterative"
    assert spec.scopes["s"].parent is None


def test_inputs_and_outputs_keep_declaration_order() -> None:
    spec = parse_graph(
        {
            "nodes": {
                "b": {"op": "input"},
                "z": {"op": "output"},
                "a": {"op": "input"},
                "y": {"op": "output"},
            }
        }
    )
    assert spec.inputs() == ["b", "a"]
    assert spec.outputs() == ["z", "y"]


@pytest.mark.parametrize(
    ("time", "depth"),
    [
        ("u64", 0),
        ({"product": ["u64", "u64"]}, 1),
        ({"product": [{"product": ["u64", "u64"]}, "u64"]}, 2),
    ],
)
def test_time_domains(time: Any, depth: int) -> None:
    spec = parse_graph(pipe(time=time))
    assert spec.time == TimeSpec(depth)
    assert spec.time.describe() == time


def test_ports_name_a_node_and_an_optional_port_number() -> None:
    spec = parse_graph(
        {
            "nodes": {"a.b-c_1": {"op": "input"}, "_x": {"op": "output"}},
            "edges": [["a.b-c_1:0012", "_x:9999"]],
        }
    )
    assert spec.edges[0].source == PortRef("a.b-c_1", 12)
    assert spec.edges[0].target == PortRef("_x", 9999)


def test_escape_follows_rfc_6901() -> None:
    assert escape("a/b~c") == "a~1b~0c"


# --------------------------------------------------------------------------- the document


@pytest.mark.parametrize("document", [[], "graph", None, 3, [["a", "b"]]])
def test_a_graph_must_be_an_object(document: Any) -> None:
    assert problems(document) == [("", "a graph must be a JSON object")]


def test_unknown_top_level_fields_each_reported_with_escaped_pointers() -> None:
    assert problems(pipe(node={}, **{"a/b": 1, "c~d": 2})) == [
        ("/node", "unknown field 'node'"),
        ("/a~1b", "unknown field 'a/b'"),
        ("/c~0d", "unknown field 'c~d'"),
    ]


@pytest.mark.parametrize(
    "time",
    [
        "u32",
        "U64",
        5,
        None,
        ["u64", "u64"],
        {"product": ["u64"]},
        {"product": ["u64", "u64", "u64"]},
        {"product": ["u64", "u32"]},
        {"product": "u64"},
        {"product": ["u64", "u64"], "extra": 1},
        {"products": ["u64", "u64"]},
    ],
)
def test_bad_time_domain_at_time(time: Any) -> None:
    assert problems(pipe(time=time)) == [("/time", TIME_MESSAGE)]


def test_bad_inner_time_domain_points_inside_the_product() -> None:
    assert problems(pipe(time={"product": [{"product": ["u8", "u64"]}, "u64"]})) == [
        ("/time/product/0/product/0", TIME_MESSAGE)
    ]


# --------------------------------------------------------------------------- nodes


@pytest.mark.parametrize("nodes", [None, {}, [], "x", [{"op": "input"}]])
def test_nodes_must_be_a_non_empty_object(nodes: Any) -> None:
    document: dict[str, Any] = {"edges": []}
    if nodes is not None:
        document["nodes"] = nodes
    assert problems(document) == [("/nodes", NODES_MESSAGE)]


def test_at_most_max_nodes() -> None:
    nodes = {f"n{i}": {"op": "input"} for i in range(MAX_NODES + 1)}
    assert problems({"nodes": nodes}) == [("/nodes", f"at most {MAX_NODES} nodes are allowed")]
    parse_graph({"nodes": dict(list(nodes.items())[:MAX_NODES])})


def test_a_node_must_be_an_object_with_a_string_op() -> None:
    assert problems(
        {
            "nodes": {
                "list": ["input"],
                "text": "input",
                "nothing": {},
                "number": {"op": 3},
                "ok": {"op": "no-such-op-is-a-compiler-problem"},
            }
        }
    ) == [
        ("/nodes/list", "a node must be an object with an op"),
        ("/nodes/text", "a node must be an object with an op"),
        ("/nodes/nothing/op", "op must be a string naming an operator"),
        ("/nodes/number/op", "op must be a string naming an operator"),
    ]


@pytest.mark.parametrize(
    ("name", "pointer"),
    [
        ("1st", "/nodes/1st"),
        ("a b", "/nodes/a b"),
        ("", "/nodes/"),
        ("a:b", "/nodes/a:b"),
        ("a/b", "/nodes/a~1b"),
        ("é", "/nodes/é"),
        ("x" * 129, "/nodes/" + "x" * 129),
    ],
)
def test_bad_node_names(name: str, pointer: str) -> None:
    document = {"nodes": {name: {"op": "input"}, "out": {"op": "output"}}}
    assert problems(document) == [(pointer, f"{name!r} is not a valid name")]


def test_names_may_be_128_characters() -> None:
    parse_graph({"nodes": {"x" * 128: {"op": "input"}}})


def test_unknown_scope_on_a_node() -> None:
    assert problems(
        {
            "scopes": {"loop": {}},
            "nodes": {
                "a": {"op": "map", "scope": "nowhere"},
                "b": {"op": "map", "scope": 5},
                "c": {"op": "map", "scope": "loop"},
            },
        }
    ) == [
        ("/nodes/a/scope", "no scope 'nowhere'"),
        ("/nodes/b/scope", "no scope 5"),
    ]


# --------------------------------------------------------------------------- scopes


def test_scope_problems() -> None:
    assert problems(
        pipe(
            scopes={
                "9lives": {},
                "text": "iterative",
                "extra": {"kind": "region", "size": 3, "colour": 1},
                "bad_kind": {"kind": "loop"},
                "bad_parent": {"parent": 7},
                "orphan": {"parent": "nobody"},
            }
        )
    ) == [
        ("/scopes/9lives", "'9lives' is not a valid name"),
        ("/scopes/text", "a scope must be an object"),
        ("/scopes/extra/colour", "unknown field 'colour'"),
        ("/scopes/extra/size", "unknown field 'size'"),
        ("/scopes/bad_kind/kind", 'kind must be "iterative" or "region"'),
        ("/scopes/bad_parent/parent", "parent must be a scope name"),
        ("/scopes/orphan/parent", "no scope 'nobody'"),
    ]


@pytest.mark.parametrize("scopes", [[], "loop", 3])
def test_scopes_must_be_an_object(scopes: Any) -> None:
    assert problems(pipe(scopes=scopes)) == [
        ("/scopes", "scopes must be an object of named scopes")
    ]


def test_circular_nesting_is_reported_on_every_scope_of_the_circle() -> None:
    assert problems(
        pipe(
            scopes={
                "a": {"parent": "b"},
                "b": {"parent": "c"},
                "c": {"parent": "a"},
                "self": {"parent": "self"},
                "fine": {"parent": "a"},
            }
        )
    ) == [
        ("/scopes/a/parent", "scopes nest in a circle"),
        ("/scopes/b/parent", "scopes nest in a circle"),
        ("/scopes/c/parent", "scopes nest in a circle"),
        ("/scopes/self/parent", "scopes nest in a circle"),
        ("/scopes/fine/parent", "scopes nest in a circle"),
    ]


# --------------------------------------------------------------------------- edges


@pytest.mark.parametrize("edges", [{}, "in->out", 3, {"from": "in", "to": "out"}])
def test_edges_must_be_a_list(edges: Any) -> None:
    assert problems(pipe(edges=edges)) == [("/edges", "edges must be a list")]


def test_bad_edge_shapes() -> None:
    assert problems(
        pipe(
            edges=[
                ["in", "out"],
                "in:out",
                ["in"],
                ["in", "out", "out"],
                {"from": "in"},
                {"from": "in", "to": "out", "via": "x"},
                None,
            ]
        )
    ) == [
        ("/edges/1", EDGE_MESSAGE),
        ("/edges/2", EDGE_MESSAGE),
        ("/edges/3", EDGE_MESSAGE),
        ("/edges/4", EDGE_MESSAGE),
        ("/edges/5", EDGE_MESSAGE),
        ("/edges/6", EDGE_MESSAGE),
    ]


def test_bad_ports_on_both_ends_are_both_reported() -> None:
    assert problems(
        pipe(
            edges=[
                [1, None],
                ["in:", "out:x"],
                [":0", "9in:0"],
                ["in:12345", "in:-1"],
                ["in:0:0", "in out"],
            ]
        )
    ) == [
        ("/edges/0/0", 'a port is a string "node" or "node:port"'),
        ("/edges/0/1", 'a port is a string "node" or "node:port"'),
        ("/edges/1/0", '"in:" is not a port ("node" or "node:port")'),
        ("/edges/1/1", '"out:x" is not a port ("node" or "node:port")'),
        ("/edges/2/0", '":0" is not a port ("node" or "node:port")'),
        ("/edges/2/1", '"9in:0" is not a port ("node" or "node:port")'),
        ("/edges/3/0", '"in:12345" is not a port ("node" or "node:port")'),
        ("/edges/3/1", '"in:-1" is not a port ("node" or "node:port")'),
        ("/edges/4/0", '"in:0:0" is not a port ("node" or "node:port")'),
        ("/edges/4/1", '"in out" is not a port ("node" or "node:port")'),
    ]


# --------------------------------------------------------------------------- all at once


def test_every_problem_is_reported_at_once_in_document_order() -> None:
    document = {
        "time": "u32",
        "scopes": {"loop": {"kind": "spiral"}, "up": {"parent": "down"}},
        "nodes": {"ok": {"op": "input"}, "bad name": {"op": "map"}, "x": {"op": "map", "scope": 1}},
        "edges": [["ok", "x"], ["ok"], ["ok", "x:y"]],
        "extra": True,
    }
    found = problems(document)
    assert found == [
        ("/extra", "unknown field 'extra'"),
        ("/time", TIME_MESSAGE),
        ("/scopes/loop/kind", 'kind must be "iterative" or "region"'),
        ("/scopes/up/parent", "no scope 'down'"),
        ("/nodes/bad name", "'bad name' is not a valid name"),
        ("/nodes/x/scope", "no scope 1"),
        ("/edges/1", EDGE_MESSAGE),
        ("/edges/2/1", '"x:y" is not a port ("node" or "node:port")'),
    ]


def test_graph_error_message_shows_five_problems_and_counts_the_rest() -> None:
    error = GraphError([Problem(f"/p{i}", f"m{i}") for i in range(7)])
    assert isinstance(error, ValueError)
    assert str(error) == "invalid graph: /p0: m0; /p1: m1; /p2: m2; /p3: m3; /p4: m4 (and 2 more)"
    assert str(GraphError([Problem("", "a graph must be a JSON object")])) == (
        "invalid graph: /: a graph must be a JSON object"
    )


# --------------------------------------------------------------------------- known bugs


def test_non_ascii_digit_port_is_a_problem_not_a_crash() -> None:
    assert problems(pipe(edges=[["in:²", "out"]])) == [
        ("/edges/0/0", '"in:²" is not a port ("node" or "node:port")')
    ]


def test_a_name_with_a_trailing_newline_is_refused() -> None:
    assert problems({"nodes": {"in\n": {"op": "input"}}}) == [
        ("/nodes/in\n", "'in\\n' is not a valid name")
    ]


def test_non_string_keys_from_yaml_are_problems_not_crashes() -> None:
    # yaml.safe_load("nodes: {no: {op: input}}") gives the key False (YAML 1.1 booleans).
    document = {
        "scopes": {1: {}},
        "nodes": {2: {"op": "input"}, False: {"op": "input"}, "out": {"op": "output", 3: "x"}},
    }
    with pytest.raises(GraphError):
        parse_graph(document)


def test_object_edge_port_pointers_name_from_and_to() -> None:
    assert problems(pipe(edges=[{"from": "in:x", "to": "out:y"}])) == [
        ("/edges/0/from", '"in:x" is not a port ("node" or "node:port")'),
        ("/edges/0/to", '"out:y" is not a port ("node" or "node:port")'),
    ]
