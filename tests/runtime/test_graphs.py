"""Every operator of the graph catalogue, built from a graph and run on 1 and 3 workers in
one process, and across processes on 3x1 and 2x2 (``tests/runtime/fabrics.py``).

Inputs are fed by worker 0 (every worker advances and closes its own handle); outputs are
captured on every worker and merged per time, so the expected records per time do not depend
on the number of workers or processes. Every worker compiles the graph (a module-level
program, ``graph_program``, gets the document), so the record errors are each worker's,
summed. Every test and every worked example of ``docs/graphs.md`` (taken from here) runs
on all four layouts: one cluster run takes tens of milliseconds, so the whole file stays
within a few seconds more than it took on one process. The tests of known bugs run on one
worker.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import operators  # noqa: F401  (registers the stream-building scope)
from operators.graph import EvaluationError, GraphError, compile_graph, parse_graph
from operators.progress import Product
from operators.runtime import INTEGERS, Worker
from operators.stream import Stream
from tests.runtime.fabrics import Clusters, Layout

Feeds = dict[str, list[tuple[Hashable, list[Any]]]]
"""Per input node, ``(time, records)`` in time order."""
Sink = list[tuple[str, int, Any, list[Any]]]
"""``(output or observed node, worker index, time, records)`` per batch."""


def plain(time: Hashable) -> Any:
    """Product times as (nested) tuples, for comparisons and readable failures."""
    if isinstance(time, Product):
        return (plain(time.outer), plain(time.inner))
    return time


class Context:
    """Inputs are handles the test feeds; outputs are inspected into the sink and probed."""

    def __init__(self, worker: Worker, sink: Sink) -> None:
        self.worker = worker
        self.sink = sink
        self.handles: dict[str, Any] = {}
        self.probes: list[Any] = []

    def input(self, name: str, scope: Any) -> Stream:
        handle, stream = scope.new_input(name)
        self.handles[name] = handle
        return stream

    def output(self, name: str, stream: Stream) -> None:
        self.probes.append(watch(stream, name, self.worker.index, self.sink).probe())


def watch(stream: Stream, name: str, index: int, sink: Sink) -> Stream:
    return stream.inspect_batch(lambda t, rs: sink.append((name, index, plain(t), list(rs))))


class Ran(list[tuple[str, int, Any, list[Any]]]):
    """A run's :data:`Sink` (every worker's batches), with the record errors it counted."""

    def __init__(self, sink: Sink, counts: dict[str, int], last: dict[str, str]) -> None:
        super().__init__(sink)
        self.errors = Errors(counts, last)


@dataclass
class Errors:
    """Record errors per node, summed over the workers; the last, in worker order."""

    counts: dict[str, int]
    last: dict[str, str]


@dataclass(frozen=True)
class On:
    """Where a test runs its graphs: a layout, and the clusters that run the layouts."""

    layout: Layout
    clusters: Clusters


LOCAL = On(Layout(1, 1), Clusters())
"""One worker in this process (the tests of known bugs)."""


async def graph_program(
    worker: Worker, document: dict[str, Any], feeds: Feeds, observe: tuple[str, ...]
) -> tuple[Sink, dict[str, int], dict[str, str]]:
    """Compile ``document`` (each worker its own plan), run it with ``feeds`` (fed by worker
    0, advanced and closed by every worker); this worker's batches and record errors."""
    plan = compile_graph(parse_graph(document))
    domain = INTEGERS
    for _ in range(plan.spec.time.depth):
        domain = domain.product()
    sink: Sink = []
    context = Context(worker, sink)

    def build(scope: Any) -> None:
        built = plan.build(scope, context)
        for name in observe:
            for port, stream in enumerate(built.streams[name]):
                watch(stream, f"{name}:{port}", worker.index, sink)

    worker.dataflow(build, domain=domain)
    for name, handle in context.handles.items():
        for time, records in feeds.get(name, []):
            handle.advance_to(time)
            if worker.index == 0:
                handle.send_batch(records)
        handle.close()
    await worker.step_while(lambda: not all(p.done() for p in context.probes))
    return sink, dict(plan.errors.counts), dict(plan.errors.last)


async def run_graph(
    document: dict[str, Any], feeds: Feeds, on: On, observe: tuple[str, ...] = ()
) -> Ran:
    """Run ``document`` with ``feeds`` on ``on``'s layout; also record the streams of the
    nodes in ``observe``."""
    results = await on.clusters.run(on.layout, graph_program, document, feeds, observe)
    sink: Sink = []
    counts: Counter[str] = Counter()
    last: dict[str, str] = {}
    for part, counted, lasts in results:
        sink.extend(part)
        counts.update(counted)
        last.update(lasts)
    return Ran(sink, dict(counts), last)


def canonical(record: Any) -> tuple[int, float, str]:
    """Numbers by value, then everything else by its JSON text (keys sorted)."""
    if isinstance(record, int | float) and not isinstance(record, bool):
        return (0, record, "")
    return (1, 0, json.dumps(record, sort_keys=True))


def per_time(sink: Sink, name: str) -> dict[Any, list[Any]]:
    """The records of ``name`` per time, merged over workers (sorted within a time)."""
    merged: dict[Any, list[Any]] = {}
    for node, _worker, time, records in sink:
        if node == name:
            merged.setdefault(time, []).extend(records)
    return {t: sorted(rs, key=canonical) for t, rs in sorted(merged.items())}


def ordered(expected: dict[Any, list[Any]]) -> dict[Any, list[Any]]:
    """``expected`` in :func:`per_time`'s order (the order within a time means nothing)."""
    return {t: sorted(rs, key=canonical) for t, rs in expected.items()}


def through(node: dict[str, Any]) -> dict[str, Any]:
    """in -> n -> out."""
    return {
        "nodes": {"in": {"op": "input"}, "n": node, "out": {"op": "output"}},
        "edges": [["in", "n"], ["n", "out"]],
    }


@pytest.fixture(params=[Layout(1, 1), Layout(1, 3), Layout(3, 1), Layout(2, 2)], ids=str)
def on(request: pytest.FixtureRequest, clusters: Clusters) -> On:
    return On(request.param, clusters)


# --------------------------------------------------------------------------- pipelines


async def test_input_to_output(on: On) -> None:
    document = {
        "nodes": {"in": {"op": "input"}, "out": {"op": "output"}},
        "edges": [["in", "out"]],
    }
    sink = await run_graph(document, {"in": [(0, [1, "a"]), (2, [{"x": None}])]}, on)
    assert per_time(sink, "out") == ordered({0: [1, "a"], 2: [{"x": None}]})


async def test_map(on: On) -> None:
    sink = await run_graph(
        through({"op": "map", "expr": '{"key": r.key, "double": r.value * 2}'}),
        {
            "in": [
                (0, [{"key": "a", "value": 1}, {"key": "b", "value": 5}]),
                (1, [{"key": "a", "value": 7}]),
            ]
        },
        on,
    )
    assert per_time(sink, "out") == ordered(
        {
            0: [{"key": "a", "double": 2}, {"key": "b", "double": 10}],
            1: [{"key": "a", "double": 14}],
        }
    )


async def test_flat_map(on: On) -> None:
    sink = await run_graph(
        through({"op": "flat_map", "expr": "r.tags.map(t, r.id + ':' + t)"}),
        {
            "in": [
                (0, [{"id": "a", "tags": ["x", "y"]}, {"id": "b", "tags": []}]),
                (3, [{"id": "c", "tags": ["z"]}]),
            ]
        },
        on,
    )
    assert per_time(sink, "out") == ordered({0: ["a:x", "a:y"], 3: ["c:z"]})


async def test_filter(on: On) -> None:
    records = [
        {"key": "y", "value": 6},
        {"key": "x", "value": 6},
        {"key": "y", "value": 5},
        {"key": "z", "value": 20},
    ]
    sink = await run_graph(
        through({"op": "filter", "expr": 'r.value * 2 > 10 && r.key != "x"'}),
        {"in": [(0, records), (1, [{"key": "x", "value": 100}])]},
        on,
    )
    assert per_time(sink, "out") == ordered(
        {0: [{"key": "y", "value": 6}, {"key": "z", "value": 20}]}
    )


@pytest.mark.parametrize("op", ["exchange", "key_by"])
async def test_exchange_routes_each_key_to_one_worker(op: str, on: On) -> None:
    records = [{"k": k, "n": n} for n in range(4) for k in ("a", "b", "c", "d", "e", "f")]
    sink = await run_graph(
        through({"op": op, "key": "r.k"}), {"in": [(0, records[:12]), (1, records[12:])]}, on
    )
    assert per_time(sink, "out") == ordered(
        {
            0: sorted(records[:12], key=canonical),
            1: sorted(records[12:], key=canonical),
        }
    )
    placed: dict[str, set[int]] = {}
    for _node, worker, _time, batch in sink:
        for record in batch:
            placed.setdefault(record["k"], set()).add(worker)
    assert all(len(at) == 1 for at in placed.values())
    if on.layout.peers > 1:
        assert len(set().union(*placed.values())) > 1  # six keys do not all hash alike


async def test_concat_of_two_inputs(on: On) -> None:
    document = {
        "nodes": {
            "left": {"op": "input"},
            "right": {"op": "input"},
            "both": {"op": "concat"},
            "out": {"op": "output"},
        },
        "edges": [["left", "both:0"], ["right", "both:1"], ["both", "out"]],
    }
    sink = await run_graph(
        document, {"left": [(0, [1, 2]), (2, [5])], "right": [(0, [3]), (1, [4])]}, on
    )
    assert per_time(sink, "out") == ordered({0: [1, 2, 3], 1: [4], 2: [5]})


async def test_concat_of_three_streams(on: On) -> None:
    document = {
        "nodes": {
            "in": {"op": "input"},
            "small": {"op": "filter", "expr": "r < 10"},
            "tens": {"op": "map", "expr": "r * 10"},
            "all": {"op": "concat"},
            "out": {"op": "output"},
        },
        "edges": [
            ["in", "small"],
            ["in", "tens"],
            ["small", "all:0"],
            ["tens", "all:1"],
            ["in", "all:2"],
            ["all", "out"],
        ],
    }
    sink = await run_graph(document, {"in": [(0, [1, 20]), (4, [3])]}, on)
    assert per_time(sink, "out") == ordered({0: [1, 1, 10, 20, 200], 4: [3, 3, 30]})


async def test_partition(on: On) -> None:
    document = {
        "nodes": {
            "in": {"op": "input"},
            "p": {"op": "partition", "parts": 3, "expr": "r % 3"},
            "zero": {"op": "output"},
            "one": {"op": "output"},
            "two": {"op": "output"},
        },
        "edges": [["in", "p"], ["p:0", "zero"], ["p:1", "one"], ["p:2", "two"]],
    }
    sink = await run_graph(document, {"in": [(0, [0, 1, 2, 3, 4]), (1, [5, 6])]}, on)
    assert per_time(sink, "zero") == ordered({0: [0, 3], 1: [6]})
    assert per_time(sink, "one") == ordered({0: [1, 4]})
    assert per_time(sink, "two") == ordered({0: [2], 1: [5]})


async def test_branch(on: On) -> None:
    document = {
        "nodes": {
            "in": {"op": "input"},
            "big": {"op": "branch", "expr": "r.size > 2"},
            "no": {"op": "output"},
            "yes": {"op": "output"},
        },
        "edges": [["in", "big"], ["big:0", "no"], ["big:1", "yes"]],
    }
    records = [{"size": 1}, {"size": 3}, {"size": 2}, {"size": 9}]
    sink = await run_graph(document, {"in": [(0, records), (1, [{"size": 0}])]}, on)
    assert per_time(sink, "no") == ordered({0: [{"size": 1}, {"size": 2}], 1: [{"size": 0}]})
    assert per_time(sink, "yes") == ordered({0: [{"size": 3}, {"size": 9}]})


async def test_inspect_passes_records_through(on: On) -> None:
    sink = await run_graph(through({"op": "inspect"}), {"in": [(0, ["a", "b"]), (5, ["c"])]}, on)
    assert per_time(sink, "out") == ordered({0: ["a", "b"], 5: ["c"]})


# --------------------------------------------------------------------------- per key, per time


async def test_count(on: On) -> None:
    sink = await run_graph(
        through({"op": "count"}), {"in": [(0, ["a", "b", "c"]), (1, []), (2, ["d"])]}, on
    )
    assert per_time(sink, "out") == ordered({0: [3], 2: [1]})


async def test_count_by(on: On) -> None:
    sink = await run_graph(
        through({"op": "count_by", "key": "r.word"}),
        {
            "in": [
                (0, [{"word": "a"}, {"word": "b"}, {"word": "a"}]),
                (1, [{"word": "b"}, {"word": "c"}]),
            ]
        },
        on,
    )
    assert per_time(sink, "out") == ordered(
        {
            0: [{"count": 2, "key": "a"}, {"count": 1, "key": "b"}],
            1: [{"count": 1, "key": "b"}, {"count": 1, "key": "c"}],
        }
    )


async def test_count_by_a_list_key(on: On) -> None:
    sink = await run_graph(
        through({"op": "count_by", "key": "[r.a, r.b]"}),
        {"in": [(0, [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, {"a": 2, "b": "x"}])]},
        on,
    )
    assert per_time(sink, "out") == ordered(
        {0: [{"count": 2, "key": [1, "x"]}, {"count": 1, "key": [2, "x"]}]}
    )


async def test_accumulate(on: On) -> None:
    sink = await run_graph(
        through({"op": "accumulate", "init": "0", "fold": "acc + r"}),
        {"in": [(0, [1, 2, 3]), (1, [10]), (3, [4, 5])]},
        on,
    )
    assert per_time(sink, "out") == ordered({0: [6], 1: [10], 3: [9]})


async def test_aggregate_without_emit(on: On) -> None:
    sink = await run_graph(
        through({"op": "aggregate", "key": "r.k", "init": "0", "fold": "acc + r.v"}),
        {
            "in": [
                (0, [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}]),
                (1, [{"k": "a", "v": 5}]),
            ]
        },
        on,
    )
    assert per_time(sink, "out") == ordered(
        {
            0: [{"key": "a", "value": 4}, {"key": "b", "value": 2}],
            1: [{"key": "a", "value": 5}],
        }
    )


async def test_aggregate_with_emit(on: On) -> None:
    sink = await run_graph(
        through(
            {
                "op": "aggregate",
                "key": "[r.k, r.v % 2]",
                "init": "[]",
                "fold": "acc + [r.v]",
                "emit": '{"k": key[0], "odd": key[1] == 1, "n": size(acc)}',
            }
        ),
        {
            "in": [
                (0, [{"k": "a", "v": 1}, {"k": "a", "v": 3}, {"k": "a", "v": 2}]),
                (2, [{"k": "b", "v": 4}]),
            ]
        },
        on,
    )
    assert per_time(sink, "out") == ordered(
        {
            0: [{"k": "a", "n": 1, "odd": False}, {"k": "a", "n": 2, "odd": True}],
            2: [{"k": "b", "n": 1, "odd": False}],
        }
    )


async def test_join(on: On) -> None:
    document = {
        "nodes": {
            "users": {"op": "input"},
            "orders": {"op": "input"},
            "j": {"op": "join", "key_left": "r.id", "key_right": "r.user"},
            "out": {"op": "output"},
        },
        "edges": [["users", "j:0"], ["orders", "j:1"], ["j", "out"]],
    }
    users = [{"id": 1, "name": "ann"}, {"id": 2, "name": "bob"}]
    orders = [{"user": 1, "item": "pen"}, {"user": 1, "item": "ink"}, {"user": 3, "item": "cup"}]
    sink = await run_graph(
        document,
        {
            "users": [(0, users), (1, [{"id": 3, "name": "cy"}])],
            "orders": [(0, orders), (1, [{"user": 2, "item": "mug"}])],
        },
        on,
    )
    # Joined per time: bob's time-1 order does not meet bob, who arrived at time 0.
    assert per_time(sink, "out") == ordered(
        {
            0: [
                {"left": {"id": 1, "name": "ann"}, "right": {"item": "ink", "user": 1}},
                {"left": {"id": 1, "name": "ann"}, "right": {"item": "pen", "user": 1}},
            ],
        }
    )


async def test_delay(on: On) -> None:
    sink = await run_graph(
        through({"op": "delay", "expr": "t + r.after"}),
        {"in": [(0, [{"after": 0}, {"after": 2}, {"after": 5}]), (1, [{"after": 1}])]},
        on,
    )
    assert per_time(sink, "out") == ordered(
        {
            0: [{"after": 0}],
            2: [{"after": 1}, {"after": 2}],
            5: [{"after": 5}],
        }
    )


# --------------------------------------------------------------------------- scopes and loops

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


async def test_feedback_loop_until_ten(on: On) -> None:
    sink = await run_graph(LOOP, {"in": [(0, [7, 3]), (2, [9])]}, on, observe=("step",))
    assert per_time(sink, "out") == ordered({0: [10, 10], 2: [10]})
    assert per_time(sink, "step:0") == ordered(
        {
            (0, 0): [4, 8],
            (0, 1): [5, 9],
            (0, 2): [6, 10],
            (0, 3): [7],
            (0, 4): [8],
            (0, 5): [9],
            (0, 6): [10],
            (2, 0): [10],
        }
    )


async def test_feedback_summary_advances_the_loop_coordinate_by_that_much(on: On) -> None:
    document = {**LOOP, "nodes": {**LOOP["nodes"], "back": {**LOOP["nodes"]["back"], "summary": 3}}}
    sink = await run_graph(document, {"in": [(0, [8])]}, on, observe=("step",))
    assert per_time(sink, "out") == ordered({0: [10]})
    assert per_time(sink, "step:0") == ordered({(0, 0): [9], (0, 3): [10]})


async def test_nested_iterative_scopes_two_levels_deep(on: On) -> None:
    document = {
        "scopes": {"outer": {"kind": "iterative"}, "inner": {"parent": "outer"}},
        "nodes": {
            "in": {"op": "input"},
            "tens": {"op": "map", "expr": "r * 10", "scope": "outer"},
            "merge": {"op": "concat", "scope": "inner"},
            "step": {"op": "map", "expr": "r + 1", "scope": "inner"},
            "test": {"op": "branch", "expr": "r % 10 >= 2", "scope": "inner"},
            "back": {"op": "feedback", "scope": "inner"},
            "out": {"op": "output"},
        },
        "edges": [
            ["in", "tens"],  # enters outer
            ["tens", "merge:0"],  # enters inner
            ["back", "merge:1"],
            ["merge", "step"],
            ["step", "test"],
            ["test:0", "back"],
            ["test:1", "out"],  # leaves inner and outer
        ],
    }
    sink = await run_graph(document, {"in": [(0, [1, 5]), (3, [2])]}, on, observe=("tens", "step"))
    assert per_time(sink, "out") == ordered({0: [12, 52], 3: [22]})
    assert per_time(sink, "tens:0") == ordered({(0, 0): [10, 50], (3, 0): [20]})
    assert per_time(sink, "step:0") == ordered(
        {
            ((0, 0), 0): [11, 51],
            ((0, 0), 1): [12, 52],
            ((3, 0), 0): [21],
            ((3, 0), 1): [22],
        }
    )


async def test_loop_in_an_iterative_scope_inside_a_region(on: On) -> None:
    document = {
        "scopes": {"area": {"kind": "region"}, "loop": {"kind": "iterative", "parent": "area"}},
        "nodes": {
            "in": {"op": "input"},
            "pre": {"op": "map", "expr": "r * 2", "scope": "area"},
            "merge": {"op": "concat", "scope": "loop"},
            "halve": {"op": "map", "expr": "r / 2", "scope": "loop"},
            "test": {"op": "branch", "expr": "r < 3", "scope": "loop"},
            "back": {"op": "feedback", "scope": "loop"},
            "post": {"op": "count", "scope": "area"},
            "out": {"op": "output"},
        },
        "edges": [
            ["in", "pre"],
            ["pre", "merge:0"],
            ["back", "merge:1"],
            ["merge", "halve"],
            ["halve", "test"],
            ["test:0", "back"],
            ["test:1", "post"],
            ["post", "out"],
        ],
    }
    sink = await run_graph(
        document, {"in": [(0, [1, 40, 7]), (1, [2])]}, on, observe=("pre", "halve")
    )
    assert per_time(sink, "out") == ordered({0: [3], 1: [1]})
    assert per_time(sink, "pre:0") == ordered({0: [2, 14, 80], 1: [4]})
    assert per_time(sink, "halve:0") == ordered(
        {
            (0, 0): [1, 7, 40],
            (0, 1): [3, 20],
            (0, 2): [1, 10],
            (0, 3): [5],
            (0, 4): [2],
            (1, 0): [2],
        }
    )


async def test_product_root_time_domain(on: On) -> None:
    document = {
        "time": {"product": ["u64", "u64"]},
        "scopes": LOOP["scopes"],
        "nodes": {
            **LOOP["nodes"],
            "double": {"op": "map", "expr": "r * 2"},
            "twice": {"op": "output"},
            "count": {"op": "count"},
            "counts": {"op": "output"},
        },
        "edges": [
            *LOOP["edges"],
            ["in", "double"],
            ["double", "twice"],
            ["in", "count"],
            ["count", "counts"],
        ],
    }
    plan = compile_graph(parse_graph(document))
    assert plan.minimum() == Product(0, 0)
    feeds: Feeds = {
        "in": [(Product(0, 0), [1, 8]), (Product(0, 1), [9]), (Product(2, 1), [3, 4, 5])]
    }
    sink = await run_graph(document, feeds, on, observe=("step",))
    assert per_time(sink, "twice") == ordered({(0, 0): [2, 16], (0, 1): [18], (2, 1): [6, 8, 10]})
    assert per_time(sink, "counts") == ordered({(0, 0): [2], (0, 1): [1], (2, 1): [3]})
    assert per_time(sink, "out") == ordered({(0, 0): [10, 10], (0, 1): [10], (2, 1): [10, 10, 10]})
    step = per_time(sink, "step:0")
    assert step[((0, 0), 0)] == [2, 9]
    assert step[((0, 0), 7)] == [9]
    assert step[((0, 0), 8)] == [10]
    assert step[((0, 1), 0)] == [10]
    assert step[((2, 1), 0)] == [4, 5, 6]
    assert step[((2, 1), 6)] == [10]
    assert len(step) == 9 + 1 + 7


# --------------------------------------------------------------------------- record errors


async def test_failing_records_are_dropped_and_counted(on: On) -> None:
    document = through({"op": "map", "expr": "10 / r.d"})
    feeds: Feeds = {"in": [(0, [{"d": 5}, {"d": 0}, {"d": 2}]), (1, [{"e": 1}, {"d": 10}])]}
    sink = await run_graph(document, feeds, on)
    assert per_time(sink, "out") == ordered({0: [2, 5], 1: [1]})
    assert sink.errors.counts == {"n": 2}
    # Worker 0 feeds the map: every error is its own.
    assert sink.errors.last == {"n": "no such key: d"}


async def test_every_operator_with_expressions_drops_what_fails(on: On) -> None:
    document = {
        "nodes": {
            "in": {"op": "input"},
            "flat": {"op": "flat_map", "expr": "r.list"},
            "keep": {"op": "filter", "expr": "r.ok"},
            "route": {"op": "key_by", "key": "r.key"},
            "split": {"op": "partition", "parts": 2, "expr": "r.part"},
            "side": {"op": "branch", "expr": "r.part == 0"},
            "sum": {"op": "aggregate", "key": "r.part", "init": "0", "fold": "acc + r.n"},
            "both": {"op": "concat"},
            "out": {"op": "output"},
            "rest": {"op": "output"},
        },
        "edges": [
            ["in", "flat"],
            ["flat", "keep"],
            ["keep", "route"],
            ["route", "split"],
            ["split:0", "side"],
            ["split:1", "rest"],
            ["side:1", "sum"],
            ["side:0", "both:0"],
            ["sum", "both:1"],
            ["both", "out"],
        ],
    }
    good = {"ok": True, "key": 1, "part": 0, "n": 5}
    records = [
        {"list": "not a list"},
        {"list": [{"ok": 1}, {"ok": False}, good]},
        {"list": [{**good, "key": {"a": 1}}, {**good, "part": 2}, {**good, "part": 1}]},
        {"list": [{**good, "n": "x"}, {**good, "n": 2}]},
    ]
    sink = await run_graph(document, {"in": [(0, records)]}, on)
    assert per_time(sink, "out") == ordered({0: [{"key": 0, "value": 7}]})
    assert per_time(sink, "rest") == ordered({0: [{**good, "part": 1}]})
    assert sink.errors.counts == {"flat": 1, "keep": 1, "route": 1, "split": 1, "sum": 1}
    assert sink.errors.last == {
        "flat": "flat_map needs a list, not str",
        "keep": "filter needs a bool, not int",
        "route": "a key cannot be a map",
        "split": "partition expression gave 2, not an int in [0, 2)",
        "sum": "no such overload: int + string",
    }


async def test_on_error_fail_raises_naming_the_node(on: On) -> None:
    document = through({"op": "map", "expr": "10 / r", "on_error": "fail"})
    with pytest.raises(EvaluationError) as caught:
        await run_graph(document, {"in": [(0, [5, 0, 2])]}, on)
    assert str(caught.value) == "node 'n': division by zero"


# --------------------------------------------------------------------------- docs/graphs.md

DOCS = Path(__file__).resolve().parents[2] / "docs" / "graphs.md"


def doc_examples() -> list[Any]:
    """Each ``json``/``yaml`` graph of the docs with the ``text`` or ``problems`` block after it."""
    text = DOCS.read_text()
    examples: list[Any] = []
    graph: Any = None
    heading = ""
    for match in re.finditer(r"^(#+ [^\n]*)$|^```(\w+)\n(.*?)^```$", text, flags=re.M | re.S):
        if match.group(1):
            heading = match.group(1).lstrip("# ").split(":")[0]
            continue
        lang, body = match.group(2), match.group(3)
        if lang in ("json", "yaml"):
            graph = json.loads(body) if lang == "json" else yaml.safe_load(body)
        elif lang in ("text", "problems"):
            assert graph is not None, f"a {lang} block with no graph before it"
            count = sum(1 for e in examples if e.id.startswith(heading))
            examples.append(pytest.param(graph, lang, body, id=f"{heading} {count + 1}"))
            graph = None
    return examples


def time_of(value: Any) -> Hashable:
    if isinstance(value, list):
        outer, inner = value
        return Product(time_of(outer), time_of(inner))
    assert isinstance(value, int)
    return value


def parse_lines(body: str) -> list[tuple[str, Hashable, list[Any]]]:
    """``node @time: r1, r2`` lines."""
    decoder = json.JSONDecoder()
    lines = []
    for line in body.splitlines():
        name, _, rest = line.partition(" @")
        time, end = decoder.raw_decode(rest)
        assert rest[end] == ":", line
        lines.append((name, time_of(time), json.loads(f"[{rest[end + 1 :]}]")))
    return lines


def test_the_docs_have_an_example_per_operator() -> None:
    examples = doc_examples()
    assert len(examples) >= 22
    ops = {node["op"] for e in examples for node in e.values[0]["nodes"].values()}
    assert ops == {
        "input", "output", "map", "flat_map", "filter", "exchange", "concat", "partition",
        "branch", "count", "count_by", "accumulate", "aggregate", "join", "delay", "feedback",
        "inspect",
    } | {"mapp"}  # fmt: skip


@pytest.mark.parametrize(("document", "kind", "body"), doc_examples())
async def test_docs_example(document: dict[str, Any], kind: str, body: str, on: On) -> None:
    if kind == "problems":
        with pytest.raises(GraphError) as caught:
            compile_graph(parse_graph(document))
        found = [f"{p.pointer}: {p.message}" for p in caught.value.problems]
        assert found == body.splitlines()
        return
    plan = compile_graph(parse_graph(document))
    feeds: Feeds = {}
    expected: dict[str, dict[Any, list[Any]]] = {name: {} for name in plan.spec.outputs()}
    for name, time, records in parse_lines(body):
        if name in plan.spec.inputs():
            feeds.setdefault(name, []).append((time, records))
        else:
            expected[name][plain(time)] = records
    sink = await run_graph(document, feeds, on)
    for name, per_name in expected.items():
        assert per_time(sink, name) == ordered(per_name), name
    assert sink.errors.counts == ({"n": 2} if "10 / r.d" in json.dumps(document) else {})


# --------------------------------------------------------------------------- known bugs


async def test_delay_drops_records_whose_expression_fails() -> None:
    document = through({"op": "delay", "expr": "t + r"})
    sink = await run_graph(document, {"in": [(0, [1, "x"])]}, LOCAL)
    assert sink.errors.counts == {"n": 1}
    assert per_time(sink, "out") == ordered({1: [1]})


async def test_delay_to_an_earlier_time_follows_the_error_policy() -> None:
    document = through({"op": "delay", "expr": "t - 1"})
    sink = await run_graph(document, {"in": [(1, [1])]}, LOCAL)
    assert per_time(sink, "out") == ordered({})
    assert sink.errors.counts == {"n": 1}


async def test_a_failing_init_names_the_node() -> None:
    document = through({"op": "accumulate", "init": "[1][3]", "fold": "acc", "on_error": "fail"})
    with pytest.raises(EvaluationError, match="node 'n'"):
        await run_graph(document, {"in": [(0, [1])]}, LOCAL)


async def test_delay_in_a_product_time_domain() -> None:
    document = {
        "time": {"product": ["u64", "u64"]},
        **through({"op": "delay", "expr": "[t[0], t[1] + 1]"}),
    }
    sink = await run_graph(document, {"in": [(Product(0, 0), [1])]}, LOCAL)
    assert per_time(sink, "out") == {(0, 1): [1]}
