"""Fused graph nodes give what unfused ones give: records, dropped-record counts and messages,
per-node figures, failures naming the node; on 1 and 2 workers in one process and on two
processes. "Unfused" is the same plan with no chains (every node its own operator)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators.graph import EvaluationError, compile_graph, parse_graph
from operators.progress import Antichain
from operators.runtime import Worker, execute
from tests.runtime.fabrics import Clusters, Layout
from tests.runtime.harness import within
from tests.runtime.test_graphs import Context, Sink, ordered, per_time

CHAIN = {
    "nodes": {
        "in": {"op": "input"},
        "m": {"op": "map", "expr": '{"q": r.a / r.b, "a": r.a}'},
        "f": {"op": "filter", "expr": "r.q < 100 / (r.a - 3)"},
        "fm": {"op": "flat_map", "expr": "[r.q, r.a * 10 / (r.a - 5)]"},
        "out": {"op": "output"},
    },
    "edges": [["in", "m"], ["m", "f"], ["f", "fm"], ["fm", "out"]],
}
NODES = ("m", "f", "fm")
FEEDS = {
    "in": [
        (0, [{"a": a, "b": b} for a in range(10) for b in (0, 1, 2)]),
        (4, [{"a": a, "b": 3} for a in range(10)] + [{"a": 2}]),
    ]
}


def cdiv(x: int, y: int) -> int:
    """CEL's integer division: truncated toward zero (``ZeroDivisionError`` for 0)."""
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def expected() -> tuple[dict[int, list[Any]], dict[str, int], dict[str, int]]:
    """Per time the output's records, per node the records it dropped and those it sent."""
    out: dict[int, list[Any]] = {}
    dropped: Counter[str] = Counter()
    sent: Counter[str] = Counter()
    for time, records in FEEDS["in"]:
        for r in records:
            if "b" not in r or r["b"] == 0:
                dropped["m"] += 1
                continue
            sent["m"] += 1
            q = cdiv(r["a"], r["b"])
            if r["a"] == 3:
                dropped["f"] += 1
                continue
            if not q < cdiv(100, r["a"] - 3):
                continue
            sent["f"] += 1
            if r["a"] == 5:
                dropped["fm"] += 1
                continue
            sent["fm"] += 2
            out.setdefault(time, []).extend([q, cdiv(r["a"] * 10, r["a"] - 5)])
    return ordered(out), dict(dropped), dict(sent)


async def fusion_program(
    worker: Worker, document: dict[str, Any], fuse: bool
) -> tuple[Sink, dict[str, int], dict[str, str], dict[str, tuple[int, int, int]]]:
    """Run ``document`` with :data:`FEEDS` (fed by worker 0), fused or not: this worker's
    output batches, record errors, and per node ``(operator index, port, records sent)``."""
    plan = compile_graph(parse_graph(document))
    if not fuse:
        plan = dataclasses.replace(plan, chains=[])
    sink: Sink = []
    context = Context(worker, sink)
    built = worker.dataflow(lambda scope: plan.build(scope, context))
    for name, handle in context.handles.items():
        for time, records in FEEDS.get(name, []):
            handle.advance_to(time)
            if worker.index == 0:
                handle.send_batch(records)
        handle.close()
    await worker.step_while(lambda: not all(p.done() for p in context.probes))
    figures = {}
    for name in NODES:
        source = built.streams[name][0].source
        operator = built.streams[name][0].scope.builder.child(source.node)
        figures[name] = (source.node, source.port, operator.output_ports[source.port].records_out)
    return sink, dict(plan.errors.counts), dict(plan.errors.last), figures


@pytest.mark.parametrize("layout", [Layout(1, 1), Layout(1, 2), Layout(2, 1)], ids=str)
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
async def test_fused_nodes_give_the_records_errors_and_figures_of_unfused_ones(
    layout: Layout, fuse: bool, clusters: Clusters
) -> None:
    results = await clusters.run(layout, fusion_program, CHAIN, fuse)
    records, dropped, sent = expected()
    sink: Sink = [batch for part, _counts, _last, _figures in results for batch in part]
    counts: Counter[str] = Counter()
    for _part, counted, _last, _figures in results:
        counts.update(counted)
    assert per_time(sink, "out") == records
    assert dict(counts) == dropped == {"m": 11, "f": 3, "fm": 3}
    # Worker 0 has every record (nothing moves them); "m" last dropped "{a: 2}" (no b).
    last: dict[str, str] = {}
    for _part, _counts, lasts, _figures in results:
        last.update(lasts)
    assert last == {"m": "no such key: b", "f": "division by zero", "fm": "division by zero"}
    per_node = {n: sum(figures[n][2] for *_, figures in results) for n in NODES}
    assert per_node == sent
    places = {n: results[0][3][n][:2] for n in NODES}
    if fuse:  # one operator, a port per node
        assert places == {"m": (2, 0), "f": (2, 1), "fm": (2, 2)}
    else:
        assert places == {"m": (2, 0), "f": (3, 0), "fm": (4, 0)}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
async def test_a_failing_node_in_a_chain_fails_the_dataflow_naming_it(
    workers: int, fuse: bool
) -> None:
    document = {**CHAIN, "nodes": {**CHAIN["nodes"]}}
    document["nodes"]["f"] = {**CHAIN["nodes"]["f"], "on_error": "fail"}

    async def work(worker: Worker) -> Any:
        return await fusion_program(worker, document, fuse)

    with pytest.raises(EvaluationError, match=r"^node 'f': division by zero$"):
        await within(execute(work, workers=workers))


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
async def test_each_fused_node_s_frontier_is_its_own_port_s(fuse: bool) -> None:
    async def work(worker: Worker) -> list[list[int]]:
        plan = compile_graph(parse_graph(CHAIN))
        if not fuse:
            plan = dataclasses.replace(plan, chains=[])
        context = Context(worker, [])
        built = worker.dataflow(lambda scope: plan.build(scope, context))
        handle = context.handles["in"]
        handle.send_batch([{"a": 9, "b": 1}])
        handle.advance_to(3)
        await worker.step_while(lambda: context.probes[0].less_than(3))
        subgraph = built.scopes[None].builder.subgraph
        frontiers = [subgraph.frontier(built.streams[n][0].source) for n in NODES]
        handle.close()
        return frontiers

    assert await within(execute(work, workers=1)) == [[Antichain([3])] * 3]
