"""Random typed graphs give the same results on the columnar path as on the row path.

Hypothesis draws a schema (``i``, ``j``, ``s`` always, and maybe ``u`` uint64, ``f``
float64, ``b`` bool, ``xs`` a list of int64; each maybe nullable), typed records for it over
a few times (nulls, zeros, negative ints, ints at the int64 limits), and a graph of the
operators that have a columnar form (map, filter, flat_map, exchange/key_by, count_by,
aggregate, accumulate, join, count, concat, outputs) in chains and branches, whose CEL
expressions come from a small grammar with failing parts: ``/`` and ``%`` by zero, int64
overflow (``* 1000000000000``), missing fields, null arithmetic, ``&&``/``||`` with failing
sides, comparisons, ``?:``, ``size``/``contains``/``startsWith``; each node's ``on_error``
is drop (mostly) or fail. The graph runs with ``compile_graph(columnar=False)`` (the row
path, the reference) and ``columnar=True`` on one worker, two workers in one process and
two processes, and the two must give:

* the same records per output and time (as multisets; a value is compared with its type:
  ``1`` is not ``1.0``), and the same dropped-record counts per node;
* on one worker, the same last message per node, where the order in which the node sees
  its records does not depend on how the upstream operators order their output (only map,
  filter, flat_map and exchange between it and the input);
* under ``on_error: fail``: both fail, or neither; on one worker, with the same message
  where the failing node's order is as above.

Sum folds add ``(E) % 1000`` (``E`` may fail per record), so a sum cannot leave int64 (that
fails the dataflow on columns by design). A fixed example checks that the columnar plan
does run nodes on columns, and :func:`hypothesis.event` records how many did per example.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from operators.graph import EvaluationError, GraphError, compile_graph, parse_graph
from tests.runtime.fabrics import Clusters, Layout
from tests.runtime.typed_graphs import Feeds, Result, run_typed

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# --------------------------------------------------------------------------- records

ints = st.one_of(
    st.sampled_from([0, 0, 1, -1, 2, -2, 3, 7, -7, 1000, 10**12, INT64_MAX, INT64_MIN]),
    st.sampled_from([INT64_MAX - 1, INT64_MIN + 1, 2**62, -(2**62), 9223372]),
    st.integers(-50, 50),
)
uints = st.sampled_from([0, 1, 2, 3, 1000, 2**63 - 1, 2**63, 2**64 - 1])
# -0.0 among them: as a key it is 0.0 on both paths (one key, whichever came first). No NaN:
# NaN is not equal to itself, so a NaN key's groups are the row path's Python objects'.
floats = st.one_of(
    st.sampled_from([0.0, -0.0, 1.5, -2.5, 3.0, 1e300, -1e300, 0.1]),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32),
)
strings = st.sampled_from(["", "a", "ab", "abc", "b", "x", "é", "aé", "ba"])
BASE = {"i": "int64", "j": "int64", "s": "string"}
OPTIONAL = {"u": "uint64", "f": "float64", "b": "bool", "xs": "list"}
VALUES = {
    "int64": ints,
    "uint64": uints,
    "float64": floats,
    "string": strings,
    "bool": st.booleans(),
    "list": st.lists(ints, max_size=3),
}


@st.composite
def schemas(draw: Any) -> dict[str, tuple[str, bool]]:
    """Field -> (kind, nullable)."""
    fields = {**BASE, **{name: kind for name, kind in OPTIONAL.items() if draw(st.booleans())}}
    return {name: (kind, draw(st.booleans())) for name, kind in fields.items()}


def schema_json(schema: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    described: dict[str, Any] = {}
    for name, (kind, nullable) in schema.items():
        if kind == "list":
            described[name] = {"list": "int64", "nullable": nullable}
        else:
            described[name] = kind + ("?" if nullable else "")
    return described


@st.composite
def records(draw: Any, schema: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    record = {}
    for name, (kind, nullable) in schema.items():
        if nullable and draw(st.integers(0, 3)) == 0:
            if draw(st.booleans()):
                record[name] = None
            continue  # left out: null
        record[name] = draw(VALUES[kind])
    return record


# --------------------------------------------------------------------------- expressions

INT_ATOMS = st.sampled_from(
    [
        "r.i",
        "r.j",
        "r.i",
        "0",
        "1",
        "-3",
        "7",
        "1000",
        "9223372036854775807",
        "r.nope",
        "size(r.s)",
        "size(r.xs)",
        "r.xs[0]",
        "int(r.f)",
        "int(r.u)",
    ]
)


def int_exprs(depth: int = 2) -> st.SearchStrategy[str]:
    """Int expressions nested at most ``depth`` deep (atoms are the likeliest)."""
    if depth == 0:
        return INT_ATOMS
    inner = int_exprs(depth - 1)
    return st.one_of(
        INT_ATOMS,
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda a: f"({a} * 1000000000000)"),
        inner.map(lambda a: f"-{a}"),
        st.tuples(bool_atoms(), inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    )


def bool_atoms() -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            "r.b",
            "(r.i > 0)",
            "(r.i == r.j)",
            "(r.j <= 2)",
            "r.s.contains('a')",
            "r.s.startsWith('ab')",
            "(r.s == 'x')",
            "(r.f > 1.5)",
            "(r.u >= 3u)",
            "(r.i == null)",
            "(r.s != null)",
            "r.xs.exists(x, x > 0)",
            "(1 / r.i > 0)",
            "r.nope",
            "(size(r.s) >= 2)",
        ]
    )


def bool_exprs(depth: int = 2) -> st.SearchStrategy[str]:
    """Bool expressions nested at most ``depth`` deep."""
    comparison = st.tuples(
        int_exprs(1), st.sampled_from(["<", "<=", "==", "!=", ">"]), int_exprs(1)
    ).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
    if depth == 0:
        return st.one_of(bool_atoms(), comparison)
    inner = bool_exprs(depth - 1)
    return st.one_of(
        bool_atoms(),
        comparison,
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda a: f"!{a}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    )


def string_exprs() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["r.s", "'lit'", "(r.s + 'x')", "r.nope", "string(r.i)"]),
        st.tuples(
            bool_atoms(), st.sampled_from(["r.s", "'y'"]), st.sampled_from(["'z'", "r.s"])
        ).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    )


def float_exprs() -> st.SearchStrategy[str]:
    # No NaN can come out: only sums of terms of the same sign as r.f, and finite ones.
    return st.sampled_from(
        ["r.f", "(r.f * 2.0)", "(r.f + 1.5)", "(r.f + double(r.i))", "double(r.j)", "0.5"]
    )


def list_exprs() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["r.xs", "r.xs.map(x, x * 2)", "r.xs.filter(x, x > 0)", "[]"]),
        st.tuples(int_exprs(), int_exprs()).map(lambda t: f"[{t[0]}, {t[1]}]"),
    )


KINDS = {
    "i": int_exprs,
    "j": int_exprs,
    "s": string_exprs,
    "u": lambda: st.sampled_from(["r.u", "(r.u + 1u)", "(r.u * 2u)", "(r.u / 0u)"]),
    "f": float_exprs,
    "b": bool_exprs,
    "xs": list_exprs,
}


@st.composite
def map_exprs(draw: Any, fields: list[str]) -> str:
    """A record of the same fields (each kept, recomputed, or now of another kind)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["r.i", "r", "{'k': r.s, 'v': r.i}"]))
    parts = []
    for name in fields:
        how = draw(st.integers(0, 5))
        if how <= 2:
            value = f"r.{name}"
        elif how <= 4:
            value = draw(KINDS[name]())
        else:
            value = draw(st.one_of(int_exprs(), string_exprs()))
        parts.append(f"'{name}': {value}")
    return "{" + ", ".join(parts) + "}"


def key_exprs() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["r.i", "r.s", "r.j % 3", "r.b", "r.i / r.j", "r.nope", "size(r.s)"]),
        int_exprs(),
        string_exprs(),
        st.sampled_from(["r.f", "r.u", "{'a': r.i}"]),
    )


def fold_exprs() -> st.SearchStrategy[str]:
    added = st.one_of(
        st.sampled_from(["1", "size(r.s)"]),
        int_exprs().map(lambda e: f"({e}) % 1000"),
    )
    return added.map(lambda e: f"acc + {e}")


emits = st.sampled_from(
    [
        None,
        None,
        "{'k': key, 'v': acc * 2}",
        "acc / (acc - 3)",
        "acc > 2 ? key : key",
        "[key, acc]",
    ]
)


# --------------------------------------------------------------------------- graphs

STRUCT, OTHER = "struct", "other"


@st.composite
def graphs(draw: Any) -> tuple[dict[str, Any], Feeds, dict[str, tuple[str, bool]]]:
    """A graph document, its feeds, and its input's schema."""
    schema = draw(schemas())
    fields = list(schema)
    nodes: dict[str, Any] = {"in": {"op": "input", "schema": schema_json(schema)}}
    edges: list[list[str]] = []
    streams: dict[str, str] = {"in": STRUCT}  # node -> the kind of its records
    consumed: set[str] = set()

    def source(kind: str | None = STRUCT) -> str:
        names = [n for n, k in streams.items() if kind is None or k == kind]
        if not names or draw(st.integers(0, 9)) == 0:
            names = list(streams)
        return draw(st.sampled_from(names))

    def policy() -> dict[str, Any]:
        choice = draw(st.sampled_from([None, None, "drop", "drop", "drop", "fail"]))
        return {} if choice is None else {"on_error": choice}

    for number in range(draw(st.integers(1, 6))):
        name = f"n{number}"
        op = draw(
            st.sampled_from(
                [
                    *("map", "map", "filter", "filter", "flat_map", "exchange", "key_by"),
                    *("count_by", "aggregate", "accumulate", "join", "join", "count", "concat"),
                ]
            )
        )
        kind = OTHER
        if op == "map":
            node, kind = {"expr": draw(map_exprs(fields))}, STRUCT
        elif op == "filter":
            expr = draw(st.one_of(bool_exprs(), st.sampled_from(["r.i", "r.nope", "r.s"])))
            node = {"expr": expr}
        elif op == "flat_map":
            expr = draw(st.one_of(list_exprs(), st.sampled_from(["[r, r]", "[r]", "r.i"])))
            node = {"expr": expr}
            kind = STRUCT if expr in ("[r, r]", "[r]") else OTHER
        elif op in ("exchange", "key_by", "count_by"):
            node = {"key": draw(key_exprs())}
        elif op == "aggregate":
            node = {"key": draw(key_exprs()), "init": "0", "fold": draw(fold_exprs())}
            emit = draw(emits)
            if emit is not None:
                node["emit"] = emit
        elif op == "accumulate":
            node = {"init": "0", "fold": draw(fold_exprs())}
        elif op == "join":
            same = draw(st.sampled_from(["r.i", "r.s", "r.j % 3", "r.b", "r.i / r.j", "r.u"]))
            left = draw(st.one_of(st.just(same), key_exprs()))
            right = draw(st.one_of(st.just(same), key_exprs()))
            node = {"key_left": left, "key_right": right}
        else:
            node = {}
        if op in ("map", "filter", "flat_map", "exchange", "key_by"):
            first = source()
            if op in ("filter", "exchange", "key_by"):
                kind = streams[first]
            sources = [first]
        elif op == "count":
            sources = [source(None)]
        elif op == "concat":
            first = source(None)
            second = source(streams[first])
            sources = [first] if second == first else [first, second]
            kind = streams[first] if streams[second] == streams[first] else OTHER
        elif op == "join":
            sources = [source(), source()]
        else:
            sources = [source()]
        if node and op not in ("count", "concat"):
            node.update(policy())
        nodes[name] = {"op": op, **node}
        edges += [[s, f"{name}:{port}"] for port, s in enumerate(sources)]
        consumed.update(sources)
        streams[name] = kind
    for name in list(streams):
        if name not in consumed or (name != "in" and draw(st.integers(0, 4)) == 0):
            nodes[f"out_{name}"] = {"op": "output"}
            edges.append([name, f"out_{name}"])
    if not any(n.startswith("out_") for n in nodes):
        nodes["out_in"] = {"op": "output"}
        edges.append(["in", "out_in"])
    times = draw(st.integers(1, 3))
    feeds: Feeds = {"in": [(t, draw(st.lists(records(schema), max_size=7))) for t in range(times)]}
    return {"nodes": nodes, "edges": edges}, feeds, schema


LATE_FOLDS = """An aggregate's last message is compared only when the input has one time.

By rows, an aggregate evaluates its key as records arrive, but its fold only when their time
is complete (then its emit); on columns, key and fold are evaluated as records arrive. The
feeds send every time before the dataflow runs, so when a record of time 1 fails its key
and one of time 0 its fold, the row path's last message is the fold's, the columnar path's
the key's (and likewise a fold of time 1 against an emit of time 0). The counts agree; with
one time, the order is the same on both paths (keys, then folds, then emits).
"""

ORDERED = frozenset({"input", "map", "filter", "flat_map", "exchange", "key_by"})
"""Operators that pass their records on in the order they got them (on one worker)."""


def ordered_nodes(document: dict[str, Any]) -> set[str]:
    """The nodes that see their records in the same order on both paths (one worker).

    Those whose every upstream node is an input, map, filter, flat_map or exchange (a
    count_by, join, aggregate or concat orders its output as it likes; an accumulate and a
    count see records in the order they are given, but the join or count_by upstream may
    not give them in the same order).
    """
    nodes = document["nodes"]
    feeding: dict[str, list[str]] = {}
    for source, target in document["edges"]:
        feeding.setdefault(target.split(":")[0], []).append(source)

    def clean(name: str) -> bool:
        return all(nodes[s]["op"] in ORDERED and clean(s) for s in feeding.get(name, []))

    return {name for name in nodes if clean(name)}


# --------------------------------------------------------------------------- running


@pytest.fixture(scope="module")
def clusters() -> Iterator[Clusters]:
    pools = Clusters()
    try:
        yield pools
    finally:
        pools.close()


def run(
    document: dict[str, Any], feeds: Feeds, columnar: bool, layout: Layout, clusters: Clusters
) -> Result | EvaluationError:
    try:
        return asyncio.run(run_typed(document, feeds, columnar, layout, clusters))
    except EvaluationError as error:
        return error


IDLE = frozenset({"input", "output"})


def tell(what: str) -> None:
    """A :func:`hypothesis.event` (in ``--hypothesis-show-statistics``), inside a given test."""
    if currently_in_test_context():
        event(what)


def check(
    document: dict[str, Any], feeds: Feeds, layout: Layout, clusters: Clusters
) -> tuple[Result | EvaluationError, Result | EvaluationError]:
    """Run both paths on ``layout`` and assert they agree; both results."""
    try:
        compile_graph(parse_graph(document))
    except GraphError as error:  # refused at submission (a static type): not a test case
        tell(f"refused: {error}"[:60])
        reject()
    rows = run(document, feeds, False, layout, clusters)
    columns = run(document, feeds, True, layout, clusters)
    ordered = ordered_nodes(document)
    if isinstance(rows, EvaluationError) or isinstance(columns, EvaluationError):
        assert isinstance(rows, EvaluationError), f"only the columnar path failed: {columns}"
        assert isinstance(columns, EvaluationError), f"only the row path failed: {rows}"
        fails = [n for n, node in document["nodes"].items() if node.get("on_error") == "fail"]
        tell("both failed")
        if layout.peers == 1 and len(fails) == 1 and fails[0] in ordered:
            assert str(columns) == str(rows)
        return rows, columns
    assert isinstance(columns, Result)
    busy = [n for n in columns.columnar_nodes() if document["nodes"][n]["op"] not in IDLE]
    tell(f"operators on columns: {min(len(busy), 3)}{'+' if len(busy) >= 3 else ''}")
    assert all(mode["runs"] == "rows" for mode in rows.modes.values())
    out = sum(len(rs) for times in rows.outputs.values() for rs in times.values())
    tell(f"records out: {'none' if not out else 'some' if out < 10 else '10+'}")
    tell(f"records dropped: {'none' if not rows.counts else 'some'}")
    assert columns.outputs == rows.outputs
    assert columns.counts == rows.counts
    if layout.peers == 1:
        for name in ordered & set(rows.last):
            if document["nodes"][name]["op"] == "aggregate" and len(feeds["in"]) > 1:
                continue  # see LATE_FOLDS
            assert columns.last.get(name) == rows.last[name], name
    return rows, columns


def test_a_fixed_graph_runs_on_columns_and_as_by_rows(clusters: Clusters) -> None:
    """The comparison is between two paths: the columnar plan runs these nodes on columns."""
    document = {
        "nodes": {
            "in": {"op": "input", "schema": {"i": "int64", "j": "int64?", "s": "string"}},
            "m": {"op": "map", "expr": "{'i': r.i / r.j, 'j': r.j, 's': r.s}"},
            "k": {"op": "count_by", "key": "r.s"},
            "a": {"op": "aggregate", "key": "r.s", "init": "0", "fold": "acc + r.i % 1000"},
            "o1": {"op": "output"},
            "o2": {"op": "output"},
        },
        "edges": [["in", "m"], ["m", "k"], ["k", "o1"], ["m", "a"], ["a", "o2"]],
    }
    feeds: Feeds = {"in": [(0, [{"i": 7, "j": 2, "s": "a"}, {"i": 1, "j": 0, "s": "a"}])]}
    rows, columns = check(document, feeds, Layout(1, 1), clusters)
    assert isinstance(rows, Result) and isinstance(columns, Result)
    assert set(columns.columnar_nodes()) == {"in", "m", "k", "a", "o1", "o2"}
    assert rows.columnar_nodes() == []
    assert columns.values("o2") == {0: [["map", [["key", ["str", "a"]], ["value", ["int", 3]]]]]}
    assert columns.counts == {"m": 1}


SCALE = int(os.environ.get("COLUMNAR_PROPERTY_SCALE", "1"))
"""How many times more examples to run (a longer hunt for differences, by hand)."""


@settings(max_examples=200 * SCALE, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_one_worker(clusters: Clusters, graph: Any) -> None:
    document, feeds, _schema = graph
    note(json.dumps({"graph": document, "feeds": feeds}))
    check(document, feeds, Layout(1, 1), clusters)


@settings(max_examples=100 * SCALE, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_two_workers_in_one_process(clusters: Clusters, graph: Any) -> None:
    document, feeds, _schema = graph
    note(json.dumps({"graph": document, "feeds": feeds}))
    check(document, feeds, Layout(1, 2), clusters)


@settings(max_examples=40 * SCALE, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_two_processes(clusters: Clusters, graph: Any) -> None:
    document, feeds, _schema = graph
    note(json.dumps({"graph": document, "feeds": feeds}))
    check(document, feeds, Layout(2, 1), clusters)
