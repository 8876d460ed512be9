"""Which nodes the compiler fuses, and what the plan says of them."""

from itertools import pairwise
from typing import Any

from operators.graph.compiler import compile_graph
from operators.graph.spec import parse_graph


def chains(document: dict[str, Any]) -> list[list[str]]:
    return compile_graph(parse_graph(document)).chains


def line(*ops: dict[str, Any], scope: dict[str, str] | None = None) -> dict[str, Any]:
    """in -> n0 -> n1 -> ... -> out; ``scope`` puts named nodes in the iterative scope ``s``."""
    names = [f"n{i}" for i in range(len(ops))]
    nodes: dict[str, Any] = {"in": {"op": "input"}, "out": {"op": "output"}}
    for name, op in zip(names, ops, strict=True):
        nodes[name] = {**op, **({"scope": "s"} if scope and name in scope else {})}
    path = ["in", *names, "out"]
    document: dict[str, Any] = {"nodes": nodes, "edges": [list(e) for e in pairwise(path)]}
    if scope:
        document["scopes"] = {"s": {"kind": "region"}}
    return document


MAP = {"op": "map", "expr": "r + 1"}
FILTER = {"op": "filter", "expr": "r > 2"}
FLAT_MAP = {"op": "flat_map", "expr": "[r, r]"}
COUNT = {"op": "count_by", "key": "r"}


def test_consecutive_record_nodes_are_one_chain() -> None:
    assert chains(line(MAP, FILTER, FLAT_MAP, MAP)) == [["n0", "n1", "n2", "n3"]]


def test_a_node_of_another_kind_ends_a_chain() -> None:
    assert chains(line(MAP, FILTER, COUNT, MAP, MAP)) == [["n0", "n1"], ["n3", "n4"]]
    assert chains(line(MAP, COUNT, FILTER)) == []


def test_a_stream_read_twice_ends_its_chain() -> None:
    document = line(MAP, FILTER, MAP)
    document["nodes"]["side"] = {"op": "output"}
    document["edges"].append(["n1", "side"])  # n1's stream has two readers: n2 and side
    assert chains(document) == [["n0", "n1"]]


def test_nodes_in_different_scopes_are_not_fused() -> None:
    assert chains(line(MAP, FILTER, MAP, scope={"n1": "s"})) == []
    assert chains(line(MAP, FILTER, MAP, MAP, scope={"n2": "s", "n3": "s"})) == [
        ["n0", "n1"],
        ["n2", "n3"],
    ]


def test_a_loop_body_fuses_up_to_the_stream_the_loop_reads() -> None:
    document = {
        "scopes": {"loop": {"kind": "iterative"}},
        "nodes": {
            "in": {"op": "input"},
            "merge": {"op": "concat", "scope": "loop"},
            "step": {"op": "map", "expr": "r + 1", "scope": "loop"},
            "big": {"op": "filter", "expr": "r < 10", "scope": "loop"},
            "back": {"op": "feedback", "scope": "loop"},
            "exit": {"op": "filter", "expr": "r >= 10", "scope": "loop"},
            "out": {"op": "output"},
        },
        "edges": [
            ["in", "merge:0"],
            ["back", "merge:1"],
            ["merge", "step"],
            ["step", "big"],
            ["big", "back"],
            ["step", "exit"],
            ["exit", "out"],
        ],
    }
    assert chains(document) == []  # step has two readers
    document["nodes"]["twice"] = {"op": "map", "expr": "r * 2", "scope": "loop"}
    document["edges"][3:4] = [["step", "twice"], ["twice", "big"]]
    document["edges"][-2] = ["twice", "exit"]
    assert chains(document) == [["step", "twice"]]


def test_the_plan_says_which_nodes_were_fused() -> None:
    described = compile_graph(parse_graph(line(MAP, FILTER, COUNT))).describe()
    assert described["nodes"]["n0"]["fused"] == ["n0", "n1"]
    assert described["nodes"]["n1"]["fused"] == ["n0", "n1"]
    assert "fused" not in described["nodes"]["n2"]
    assert "fused" not in described["nodes"]["in"]
