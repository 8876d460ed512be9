"""Running a graph with typed inputs on the row path and on the columnar path, to compare them.

:func:`typed_program` is a module-level program (``tests/runtime/fabrics.py``): each worker
compiles the graph (``columnar`` on or off), feeds its typed inputs (``scope.new_input``
with the input's Arrow schema; worker 0 sends, every worker advances and closes), and
returns its batches, its record errors and how its plan runs each node. :func:`run_typed`
runs it on a layout and merges the workers' results into a :class:`Result`, whose records
are in :func:`tagged` form: a value with its type, so ``1`` and ``1.0`` differ, as ``True``
and ``1`` do, and a record compares by its JSON text.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import operators  # noqa: F401  (registers the stream-building scope)
from operators.graph import compile_graph, parse_graph
from operators.runtime import Worker
from operators.stream import Stream
from tests.runtime.fabrics import Clusters, Layout

Feeds = dict[str, list[tuple[int, list[Any]]]]
"""Per input node, ``(time, records)`` in time order."""
ONE = Layout(1, 1)
"""One worker in this process."""
Sink = list[tuple[str, Any, list[Any]]]
"""``(output, time, records)`` per batch."""


class TypedContext:
    """Inputs are typed handles (the node's schema, if it has one); outputs are captured."""

    def __init__(self, plan: Any, sink: Sink) -> None:
        self.plan = plan
        self.sink = sink
        self.handles: dict[str, Any] = {}
        self.probes: list[Any] = []

    def input(self, name: str, scope: Any) -> Stream:
        schema = self.plan.spec.nodes[name].schema
        arrow = schema.arrow_schema() if schema is not None else None
        handle, stream = scope.new_input(name, schema=arrow)
        self.handles[name] = handle
        return stream

    def output(self, name: str, stream: Stream) -> None:
        def seen(time: Hashable, records: Any) -> None:
            self.sink.append((name, time, list(records)))

        self.probes.append(stream.inspect_batch(seen).probe())


async def typed_program(
    worker: Worker, document: dict[str, Any], feeds: Feeds, columnar: bool
) -> tuple[Sink, dict[str, int], dict[str, str], dict[str, dict[str, Any]]]:
    """This worker's batches, record errors and plan (``describe`` per node)."""
    plan = compile_graph(parse_graph(document), columnar=columnar)
    sink: Sink = []
    context = TypedContext(plan, sink)
    worker.dataflow(lambda scope: plan.build(scope, context))
    for name, handle in context.handles.items():
        for time, records in feeds.get(name, []):
            handle.advance_to(time)
            if worker.index == 0 and records:
                handle.send_batch(records)
        handle.close()
    await worker.step_while(lambda: not all(p.done() for p in context.probes))
    modes = {name: plan.typing.describe(name) for name in plan.order}
    return sink, dict(plan.errors.counts), dict(plan.errors.last), modes


def tagged(value: Any) -> Any:
    """``value`` with the type of each part (floats by ``repr``: ``-0.0``, ``inf``, ``nan``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", repr(value) if not math.isnan(value) else "nan"]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, list | tuple):
        return ["list", [tagged(v) for v in value]]
    if isinstance(value, dict):
        return ["map", sorted([str(k), tagged(v)] for k, v in value.items())]
    return ["other", repr(value)]


def text(value: Any) -> str:
    """A record's tagged JSON text (what outputs are compared by)."""
    return json.dumps(tagged(value), sort_keys=True)


@dataclass
class Result:
    """One run: each output's records per time (texts, sorted), and the record errors."""

    outputs: dict[str, dict[Any, list[str]]]
    counts: dict[str, int]
    last: dict[str, str]
    """The last message per node (in worker order: meaningful on one worker)."""
    modes: dict[str, dict[str, Any]]
    """How worker 0's plan runs each node (``plan.typing.describe``)."""

    def columnar_nodes(self) -> list[str]:
        """The nodes that ran on columns, inputs, outputs and forwarders included."""
        return [name for name, mode in self.modes.items() if mode["runs"] == "columns"]

    def values(self, output: str) -> dict[Any, list[Any]]:
        """An output's records per time, as values again (sorted by their texts)."""
        return {t: [json.loads(r) for r in rs] for t, rs in self.outputs.get(output, {}).items()}


async def run_typed(
    document: dict[str, Any],
    feeds: Feeds,
    columnar: bool,
    layout: Layout = ONE,
    clusters: Clusters | None = None,
) -> Result:
    """Run ``document`` with ``feeds`` on ``layout``: every worker's results, merged."""
    pools = clusters if clusters is not None else Clusters()
    results = await pools.run(layout, typed_program, document, feeds, columnar)
    outputs: dict[str, dict[Any, list[str]]] = {}
    counts: Counter[str] = Counter()
    last: dict[str, str] = {}
    for sink, counted, lasts, _modes in results:
        for name, time, records in sink:
            outputs.setdefault(name, {}).setdefault(time, []).extend(map(text, records))
        counts.update(counted)
        last.update(lasts)
    merged = {
        name: {t: sorted(rs) for t, rs in sorted(times.items())} for name, times in outputs.items()
    }
    return Result(merged, dict(counts), last, results[0][3])


__all__ = ["Feeds", "Result", "TypedContext", "run_typed", "tagged", "text", "typed_program"]
