"""Meaning checks of graphs, the catalogue, and compiled plans."""

import itertools
from typing import Any

import pytest

from operators.graph.cel import compile_expression
from operators.graph.compiler import CATALOGUE, compile_graph, describe_catalogue
from operators.graph.spec import GraphError, parse_graph
from operators.progress import Product

KNOWN = (
    "accumulate, aggregate, branch, concat, count, count_by, delay, exchange, feedback, "
    "filter, flat_map, input, inspect, join, key_by, map, output, partition"
)


def graph(nodes: dict[str, Any], edges: list[Any], **extra: Any) -> dict[str, Any]:
    return {"nodes": nodes, "edges": edges, **extra}


def problems(document: dict[str, Any]) -> list[tuple[str, str]]:
    spec = parse_graph(document)  # shape problems are test_spec's business: none here
    with pytest.raises(GraphError) as caught:
        compile_graph(spec)
    return [(p.pointer, p.message) for p in caught.value.problems]


def through(node: dict[str, Any]) -> dict[str, Any]:
    """in -> node -> out, for a one-input, one-output operator ``node``."""
    return graph(
        {"in": {"op": "input"}, "n": node, "out": {"op": "output"}},
        [["in", "n"], ["n", "out"]],
    )


LOOP: dict[str, Any] = {
    "scopes": {"loop": {"kind": "iterative"}},
    "nodes": {
        "in": {"op": "input"},
        "merge": {"op": "concat", "scope": "loop"},
        "step": {"op": "map", "expr": "r + 1", "scope": "loop"},
        "test": {"op": "branch", "expr": "r >= 10", "scope": "loop"},
        "back": {"op": "feedback", "scope": "loop"},
        "out": {"op": "output"},
    },
    "edges": [
        ["in", "merge:0"],
        ["back", "merge:1"],
        ["merge", "step"],
        ["step", "test"],
        ["test:0", "back"],
        ["test:1", "out"],
    ],
}


# --------------------------------------------------------------------------- valid graphs


def test_every_operator_of_the_catalogue_compiles() -> None:
    nodes: dict[str, Any] = {
        "in": {"op": "input"},
        "in2": {"op": "input"},
        "map": {"op": "map", "expr": "r"},
        "flat_map": {"op": "flat_map", "expr": "[r, r]"},
        "filter": {"op": "filter", "expr": "r > 0"},
        "exchange": {"op": "exchange", "key": "r"},
        "key_by": {"op": "key_by", "key": "r"},
        "concat": {"op": "concat"},
        "partition": {"op": "partition", "parts": 2, "expr": "r % 2"},
        "branch": {"op": "branch", "expr": "r > 1"},
        "count": {"op": "count"},
        "count_by": {"op": "count_by", "key": "r"},
        "accumulate": {"op": "accumulate", "init": "0", "fold": "acc + r"},
        "aggregate": {
            "op": "aggregate",
            "key": "r",
            "init": "0",
            "fold": "acc + 1",
            "emit": "[key, acc]",
        },
        "join": {"op": "join", "key_left": "r", "key_right": "r"},
        "delay": {"op": "delay", "expr": "t + 1"},
        "inspect": {"op": "inspect"},
        "out": {"op": "output"},
    }
    chain = ["map", "flat_map", "filter", "exchange", "key_by", "concat", "partition"]
    edges = [["in", "map"], *[[a, b] for a, b in itertools.pairwise(chain)]]
    edges += [
        ["in2", "concat:1"],
        ["partition:0", "branch"],
        ["partition:1", "count"],
        ["branch:0", "count_by"],
        ["branch:1", "accumulate"],
        ["count_by", "aggregate"],
        ["aggregate", "join:0"],
        ["accumulate", "join:1"],
        ["join", "delay"],
        ["delay", "inspect"],
        ["inspect", "out"],
    ]
    nodes["feedback"] = {"op": "feedback", "scope": "loop"}
    nodes["sink"] = {"op": "output"}
    edges += [["count", "feedback"], ["feedback", "sink"]]
    plan = compile_graph(parse_graph(graph(nodes, edges, scopes={"loop": {}})))
    assert {n.op for n in plan.spec.nodes.values()} == set(CATALOGUE)
    assert plan.outputs_of["partition"] == 2
    assert plan.outputs_of["branch"] == 2
    assert plan.outputs_of["out"] == 0
    assert plan.inputs_of["concat"] == [("key_by", 0), ("in2", 0)]
    assert plan.inputs_of["join"] == [("aggregate", 0), ("accumulate", 0)]
    assert set(plan.expressions["aggregate"]) == {"key", "init", "fold", "emit"}
    for name in plan.order:
        assert all(
            plan.order.index(src) < plan.order.index(name) for src, _ in plan.inputs_of[name]
        )


def test_a_loop_through_a_feedback_compiles_and_builds_feedback_early() -> None:
    plan = compile_graph(parse_graph(LOOP))
    assert plan.order == ["in", "back", "merge", "step", "test", "out"]
    assert plan.inputs_of["back"] == [("test", 0)]
    assert plan.inputs_of["out"] == [("test", 1)]


def test_optional_parameters_may_be_given() -> None:
    plan = compile_graph(
        parse_graph(
            {
                **LOOP,
                "nodes": {
                    **LOOP["nodes"],
                    "back": {"op": "feedback", "scope": "loop", "summary": 3},
                    "step": {"op": "map", "expr": "r + 1", "scope": "loop", "on_error": "fail"},
                },
            }
        )
    )
    assert plan.spec.nodes["back"].params == {"summary": 3}


def test_describe_is_the_plan_as_json() -> None:
    document = {
        "time": {"product": ["u64", "u64"]},
        "scopes": {"loop": {"kind": "iterative"}},
        "nodes": {
            "out": {"op": "output"},
            "twice": {"op": "map", "expr": "r * 2"},
            "in": {"op": "input"},
            "big": {"op": "filter", "expr": "r > 10", "scope": "loop"},
        },
        "edges": [["twice", "big"], ["big", "out"], ["in", "twice"]],
    }
    plan = compile_graph(parse_graph(document))
    twice = compile_expression("r * 2")
    big = compile_expression("r > 10")
    assert twice.python.startswith("def _cel(r):\n")
    assert plan.describe() == {
        "time": {"product": ["u64", "u64"]},
        "scopes": {"loop": {"kind": "iterative", "parent": None}},
        "inputs": ["in"],
        "outputs": ["out"],
        "order": ["in", "twice", "big", "out"],
        "nodes": {
            "in": {
                "op": "input",
                "scope": None,
                "inputs": [],
                "outputs": 1,
                "expressions": {},
                "runs": "rows",
                "why": "the input has no schema",
            },
            "twice": {
                "op": "map",
                "scope": None,
                "inputs": ["in:0"],
                "outputs": 1,
                "expressions": {"expr": {"source": "r * 2", "python": twice.python, "type": "int"}},
                "runs": "rows",
                "why": UNTYPED,
            },
            "big": {
                "op": "filter",
                "scope": "loop",
                "inputs": ["twice:0"],
                "outputs": 1,
                "expressions": {"expr": {"source": "r > 10", "python": big.python, "type": "bool"}},
                "runs": "rows",
                "why": UNTYPED,
            },
            "out": {
                "op": "output",
                "scope": None,
                "inputs": ["big:0"],
                "outputs": 0,
                "expressions": {},
                "runs": "rows",
                "why": UNTYPED,
            },
        },
    }
    assert list(plan.describe()["nodes"]) == plan.order


UNTYPED = "its input is not typed (no schema reaches it)"


@pytest.mark.parametrize(
    ("time", "minimum"),
    [
        ("u64", 0),
        ({"product": ["u64", "u64"]}, Product(0, 0)),
        ({"product": [{"product": ["u64", "u64"]}, "u64"]}, Product(Product(0, 0), 0)),
    ],
)
def test_minimum_of_the_root_time_domain(time: Any, minimum: Any) -> None:
    plan = compile_graph(parse_graph({**through({"op": "inspect"}), "time": time}))
    assert plan.minimum() == minimum
    assert type(plan.minimum()) is type(minimum)


def test_describe_catalogue_lists_every_operator() -> None:
    catalogue = describe_catalogue()
    assert [entry["op"] for entry in catalogue] == list(CATALOGUE)
    assert sorted(CATALOGUE) == KNOWN.split(", ")
    by_op = {entry["op"]: entry for entry in catalogue}
    assert by_op["input"] == {
        "op": "input",
        "inputs": 0,
        "outputs": 1,
        "params": {"schema": {"kind": "json", "required": False}},
    }
    assert by_op["concat"] == {"op": "concat", "inputs": "1 or more", "outputs": 1, "params": {}}
    assert by_op["partition"]["outputs"] == "parts"
    assert by_op["aggregate"]["params"]["emit"] == {
        "kind": "expr",
        "required": False,
        "variables": ["key", "acc"],
    }
    assert by_op["accumulate"]["params"]["init"]["variables"] == []
    assert by_op["delay"]["params"]["expr"]["variables"] == ["r", "t"]
    assert by_op["join"]["inputs"] == 2


# ----------------------------------------------------------------- operators and parameters


def test_unknown_operator() -> None:
    assert problems(through({"op": "reduce", "expr": "r"})) == [
        ("/nodes/n/op", f"unknown operator 'reduce' ({KNOWN})")
    ]


def test_parameter_problems() -> None:
    document = graph(
        {
            "in": {"op": "input", "size": 3},
            "m": {"op": "map"},
            "f": {"op": "filter", "expr": 42, "predicate": "r"},
            "p": {"op": "partition", "parts": "2", "expr": "0"},
            "q": {"op": "partition", "parts": 0, "expr": "0"},
            "b": {"op": "partition", "parts": True, "expr": "0"},
            "fb": {"op": "feedback", "summary": 0, "scope": "loop"},
            "fc": {"op": "feedback", "summary": 1.5, "scope": "loop"},
            "e": {"op": "map", "expr": "r", "on_error": "ignore"},
            "c": {"op": "count", "on_error": "drop"},
            "ag": {"op": "aggregate", "key": "r", "fold": "acc", "init": 0},
        },
        [
            ["in", "m"],
            ["in", "f"],
            ["in", "p"],
            ["in", "q"],
            ["in", "b"],
            ["in", "fb"],
            ["in", "fc"],
            ["in", "e"],
            ["in", "c"],
            ["in", "ag"],
        ],
        scopes={"loop": {}},
    )
    assert problems(document) == [
        ("/nodes/in/size", "input has no parameter 'size'"),
        ("/nodes/m/expr", "map needs the parameter 'expr'"),
        ("/nodes/f/predicate", "filter has no parameter 'predicate'"),
        ("/nodes/f/expr", "an expression must be a string"),
        ("/nodes/p/parts", "must be an integer from 1 to 1024"),
        ("/nodes/q/parts", "must be an integer from 1 to 1024"),
        ("/nodes/b/parts", "must be an integer from 1 to 1024"),
        ("/nodes/fb/summary", "must be an integer from 1 to 4294967296"),
        ("/nodes/fc/summary", "must be an integer from 1 to 4294967296"),
        ("/nodes/e/on_error", "must be one of drop, fail"),
        ("/nodes/c/on_error", "count has no parameter 'on_error'"),
        ("/nodes/ag/init", "an expression must be a string"),
    ]


def test_missing_required_parameters_each_reported() -> None:
    assert problems(through({"op": "aggregate"})) == [
        ("/nodes/n/key", "aggregate needs the parameter 'key'"),
        ("/nodes/n/init", "aggregate needs the parameter 'init'"),
        ("/nodes/n/fold", "aggregate needs the parameter 'fold'"),
    ]


def test_parameter_pointers_are_escaped() -> None:
    assert problems(through({"op": "map", "expr": "r", "a/b~c": 1})) == [
        ("/nodes/n/a~1b~0c", "map has no parameter 'a/b~c'")
    ]


# --------------------------------------------------------------------------- expressions


def test_an_expression_that_does_not_compile_gives_line_and_column() -> None:
    assert problems(through({"op": "filter", "expr": "r.value )"})) == [
        ("/nodes/n/expr", "expression does not compile: line 1, column 9: unexpected token ')'")
    ]
    assert problems(through({"op": "map", "expr": "r.a +\n  )"})) == [
        ("/nodes/n/expr", "expression does not compile: line 2, column 3: unexpected token ')'")
    ]


def test_expressions_see_only_their_variables() -> None:
    assert problems(
        through({"op": "aggregate", "key": "acc", "init": "r", "fold": "acc + r", "emit": "t"})
    ) == [
        ("/nodes/n/key", "expression does not compile: line 1, column 1: unknown identifier 'acc'"),
        ("/nodes/n/init", "expression does not compile: line 1, column 1: unknown identifier 'r'"),
        ("/nodes/n/emit", "expression does not compile: line 1, column 1: unknown identifier 't'"),
    ]


def test_expression_type_errors_are_found_at_submission() -> None:
    assert problems(through({"op": "map", "expr": "1 + 2.0"})) == [
        (
            "/nodes/n/expr",
            "expression does not compile: line 1, column 3: no such overload: int + double",
        )
    ]


# --------------------------------------------------------------------------- ports


def test_dangling_ports() -> None:
    document = graph(
        {
            "in": {"op": "input"},
            "m": {"op": "map", "expr": "r"},
            "j": {"op": "join", "key_left": "r", "key_right": "r"},
            "out": {"op": "output"},
        },
        [
            ["in", "m"],
            ["ghost", "j:0"],
            ["m", "phantom:0"],
            ["in:1", "j:1"],
            ["m", "j:2"],
            ["out", "m"],
            ["j", "out"],
        ],
    )
    assert problems(document) == [
        ("/edges/1/0", "no node 'ghost'"),
        ("/edges/2/1", "no node 'phantom'"),
        ("/edges/3/0", "in (input) has no output 1"),
        ("/edges/4/1", "j (join) has no input 2"),
        ("/edges/5/0", "out (output) has no output 0"),
        ("/nodes/j", "input j:0 is not connected"),
        ("/nodes/j", "input j:1 is not connected"),
    ]


def test_both_ends_of_an_edge_can_dangle() -> None:
    assert problems(graph({"in": {"op": "input"}}, [["a", "b"], ["in:3", "in"]])) == [
        ("/edges/0/0", "no node 'a'"),
        ("/edges/0/1", "no node 'b'"),
        ("/edges/1/0", "in (input) has no output 3"),
        ("/edges/1/1", "in (input) has no input 0"),
    ]


def test_partition_outputs_are_its_parts() -> None:
    document = graph(
        {
            "in": {"op": "input"},
            "p": {"op": "partition", "parts": 2, "expr": "0"},
            "a": {"op": "output"},
            "b": {"op": "output"},
        },
        [["in", "p"], ["p:0", "a"], ["p:2", "b"]],
    )
    assert problems(document) == [
        ("/edges/2/0", "p (partition) has no output 2"),
        ("/nodes/b", "input b:0 is not connected"),
    ]


def test_duplicate_port_names_the_first_edge() -> None:
    document = graph(
        {"a": {"op": "input"}, "b": {"op": "input"}, "out": {"op": "output"}},
        [["a", "out"], ["b", "out:0"], ["a:0", "out"]],
    )
    message = "input out:0 is already connected by /edges/0; use a concat to merge"
    assert problems(document) == [("/edges/1/1", message), ("/edges/2/1", message)]


def test_unconnected_inputs() -> None:
    document = graph(
        {
            "in": {"op": "input"},
            "m": {"op": "map", "expr": "r"},
            "c": {"op": "concat"},
            "gap": {"op": "concat"},
            "out": {"op": "output"},
        },
        [["in", "gap:0"], ["in", "gap:2"], ["gap", "out"]],
    )
    assert problems(document) == [
        ("/nodes/m", "input m:0 is not connected"),
        ("/nodes/c", "input c:0 is not connected"),
        ("/nodes/gap", "input gap:1 is not connected"),
    ]


def test_concat_takes_any_number_of_inputs() -> None:
    nodes = {f"in{i}": {"op": "input"} for i in range(4)}
    document = graph(
        {**nodes, "c": {"op": "concat"}, "out": {"op": "output"}},
        [*[[f"in{i}", f"c:{i}"] for i in range(4)], ["c", "out"]],
    )
    plan = compile_graph(parse_graph(document))
    assert plan.inputs_of["c"] == [(f"in{i}", 0) for i in range(4)]


# --------------------------------------------------------------------------- scopes and cycles


def test_a_cycle_without_feedback_is_refused_naming_its_nodes() -> None:
    document = graph(
        {
            "in": {"op": "input"},
            "merge": {"op": "concat"},
            "step": {"op": "map", "expr": "r + 1"},
            "back": {"op": "filter", "expr": "r < 10"},
            "after": {"op": "inspect"},
            "out": {"op": "output"},
        },
        [
            ["in", "merge:0"],
            ["back", "merge:1"],
            ["merge", "step"],
            ["step", "back"],
            ["step", "after"],
            ["after", "out"],
        ],
    )
    assert problems(document) == [
        (
            "/edges",
            "the cycle through back, merge, step does not pass a feedback of the root scope, "
            "so records could return at the same time",
        )
    ]


def test_a_self_loop_is_a_cycle() -> None:
    document = graph(
        {"in": {"op": "input"}, "c": {"op": "concat"}, "out": {"op": "output"}},
        [["in", "c:0"], ["c", "c:1"], ["c", "out"]],
    )
    assert problems(document) == [
        (
            "/edges",
            "the cycle through c does not pass a feedback of the root scope, so records could "
            "return at the same time",
        )
    ]


def test_feedback_only_in_an_iterative_scope() -> None:
    document = graph(
        {
            "in": {"op": "input"},
            "root": {"op": "feedback"},
            "reg": {"op": "feedback", "scope": "r"},
            "ok": {"op": "feedback", "scope": "i"},
            "out": {"op": "output"},
        },
        [["in", "root"], ["root", "reg"], ["reg", "ok"], ["ok", "out"]],
        scopes={"r": {"kind": "region"}, "i": {"kind": "iterative", "parent": "r"}},
    )
    assert problems(document) == [
        ("/nodes/root", "a feedback must be inside an iterative scope"),
        ("/nodes/reg", "a feedback must be inside an iterative scope"),
    ]


def test_inputs_and_outputs_must_be_in_the_root_scope() -> None:
    document = graph(
        {"in": {"op": "input", "scope": "s"}, "out": {"op": "output", "scope": "t"}},
        [["in", "out"]],
        scopes={"s": {}, "t": {"kind": "region"}},
    )
    assert problems(document) == [
        ("/nodes/in/scope", "an input must be in the root"),
        ("/nodes/out/scope", "an output must be in the root"),
    ]


def test_several_problems_are_all_returned() -> None:
    document = graph(
        {
            "in": {"op": "input", "scope": "loop"},
            "m": {"op": "mapp", "expr": "r"},
            "f": {"op": "filter", "expr": "r >"},
            "k": {"op": "count_by"},
            "fb": {"op": "feedback"},
            "out": {"op": "output"},
        },
        [["in", "f"], ["f", "k"], ["in", "f:0"], ["k", "nowhere"], ["f:1", "fb"]],
        scopes={"loop": {}},
    )
    assert problems(document) == [
        ("/nodes/in/scope", "an input must be in the root"),
        ("/nodes/m/op", f"unknown operator 'mapp' ({KNOWN})"),
        (
            "/nodes/f/expr",
            "expression does not compile: line 1, column 4: unexpected end of expression",
        ),
        ("/nodes/k/key", "count_by needs the parameter 'key'"),
        ("/nodes/fb", "a feedback must be inside an iterative scope"),
        ("/edges/2/1", "input f:0 is already connected by /edges/0; use a concat to merge"),
        ("/edges/3/1", "no node 'nowhere'"),
        ("/edges/4/0", "f (filter) has no output 1"),
        ("/nodes/fb", "input fb:0 is not connected"),
        ("/nodes/out", "input out:0 is not connected"),
    ]


# --------------------------------------------------------------------------- known bugs


def test_a_cycle_leaving_the_feedbacks_scope_is_refused() -> None:
    document = graph(
        {
            "in": {"op": "input"},
            "merge": {"op": "concat"},
            "step": {"op": "map", "expr": "r + 1", "scope": "loop"},
            "back": {"op": "feedback", "scope": "loop"},
            "out": {"op": "output"},
        },
        [
            ["in", "merge:0"],
            ["back", "merge:1"],
            ["merge", "step"],
            ["step", "back"],
            ["merge", "out"],
        ],
        scopes={"loop": {}},
    )
    found = problems(document)
    assert [pointer for pointer, _ in found] == ["/edges"]


def test_partition_parts_are_bounded() -> None:
    # Another problem (an unconnected output) keeps the cycle check from running here.
    document = graph(
        {
            "in": {"op": "input"},
            "p": {"op": "partition", "parts": 10**9, "expr": "0"},
            "out": {"op": "output"},
        },
        [["in", "p"]],
    )
    assert "/nodes/p/parts" in [pointer for pointer, _ in problems(document)]


def test_describe_catalogue_describes_choice_and_int_parameters() -> None:
    by_op = {entry["op"]: entry for entry in describe_catalogue()}
    on_error = by_op["map"]["params"]["on_error"]
    parts = by_op["partition"]["params"]["parts"]
    assert "variables" not in on_error
    assert on_error["choices"] == ["drop", "fail"]
    assert "variables" not in parts
    assert parts["minimum"] == 1


# --------------------------------------------------------------------------- build order


def test_a_graph_declared_in_a_buildable_order_is_built_in_that_order() -> None:
    # Not in waves (graphlib's static order would build both inputs first): sweeps in
    # declaration order, each taking every node ready by then.
    document = graph(
        {
            "a": {"op": "input"},
            "twice": {"op": "map", "expr": "r * 2"},
            "b": {"op": "input"},
            "both": {"op": "concat"},
            "out": {"op": "output"},
        },
        [["a", "twice"], ["twice", "both:0"], ["b", "both:1"], ["both", "out"]],
    )
    assert compile_graph(parse_graph(document)).order == ["a", "twice", "b", "both", "out"]


def test_the_build_order_sweeps_until_every_node_is_built() -> None:
    document = graph(
        {
            "out": {"op": "output"},
            "last": {"op": "map", "expr": "r"},
            "first": {"op": "map", "expr": "r"},
            "in": {"op": "input"},
        },
        [["in", "first"], ["first", "last"], ["last", "out"]],
    )
    assert compile_graph(parse_graph(document)).order == ["in", "first", "last", "out"]


def test_a_feedback_is_built_in_the_first_sweep_wherever_declared() -> None:
    # Declared last, the feedback is still ready at once: built before the concat it feeds.
    nodes = dict(LOOP["nodes"])
    back = nodes.pop("back")
    plan = compile_graph(parse_graph({**LOOP, "nodes": {**nodes, "back": back}}))
    assert plan.order == ["in", "back", "merge", "step", "test", "out"]
