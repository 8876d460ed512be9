"""Operators that forward batches unchanged keep columns as columns.

concat, exchange (with a column key), enter and leave, feedback, broadcast, count and
capture never look at a record, so a batch of :class:`Columns` leaves them as it came (or,
through an exchange, as columns split by key): no operator turns it into rows. Each test
runs in one process and across processes, with the same exact values.
"""

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import operators
from operators import OperatorBuilder, Worker
from operators.capture import EventLink, Messages
from operators.progress import Product
from operators.runtime import Columns, stable_hash
from operators.runtime.routing import field_key
from tests.runtime.fabrics import Clusters, Layout, layouts

LAYOUTS = [*layouts(1, 3), pytest.param(Layout(2, 1), id="2x1")]


def look(
    stream: Any, seen: list[Any], name: str, keep: Callable[[Any], bool] = lambda _t: True
) -> Any:
    """A forwarder that notes every batch's time, kind and rows (and drops those not kept)."""
    builder = OperatorBuilder(stream.scope, name)
    port = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor() -> Any:
        def logic() -> None:
            for time, batch in port.containers():
                rows = batch if isinstance(batch, list) else batch.rows()
                seen.append((name, time, type(batch).__name__, rows))
                if keep(time):
                    output.forward(time, batch)

        return logic

    builder.build_reactive(constructor)
    return result


def columns(keys: list[str], start: int) -> Columns:
    values = list(range(start, start + len(keys)))
    return Columns.of(pa.record_batch({"k": keys, "v": values}))


async def through_forwarders(worker: Worker) -> list[Any]:
    """concat -> exchange -> enter -> loop twice -> leave -> broadcast -> count."""
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        first, one = scope.new_input()
        second, two = scope.new_input()
        routed = one.concat(two).exchange(field_key(["k"]), columns=["k"])
        routed = look(routed, seen, "routed")
        inner = scope.iterative()
        loop_handle, loop = inner.feedback(Product(0, 1))
        body = routed.enter(inner).concat(loop)
        look(body, seen, "body", keep=lambda t: t.inner < 2).connect_loop(loop_handle)
        left = look(body, seen, "body-out", keep=lambda t: t.inner == 2).leave()
        everywhere = look(left.broadcast(), seen, "broadcast")
        counted = look(everywhere.count(), seen, "count")
        return first, second, counted.probe()

    first, second, probe = worker.dataflow(build)
    if worker.index == 0:
        first.send_batch(columns(["a", "b", "c"], 0))
        second.send_batch(columns(["a", "d"], 10))
    for handle in (first, second):
        handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    return seen


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_columns_pass_the_forwarders_as_columns(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, through_forwarders)
    peers = layout.peers
    kinds = {(name, kind) for seen in results for name, _t, kind, _rows in seen}
    assert kinds == {
        ("routed", "Columns"),
        ("body", "Columns"),
        ("body-out", "Columns"),
        ("broadcast", "Columns"),
        ("count", "list"),  # count's own output: one number per time
    }
    records = {"a": 0, "b": 1, "c": 2, "d": 11}
    for index, seen in enumerate(results):
        routed = sorted(r["k"] for name, t, _k, rows in seen if name == "routed" for r in rows)
        assert routed == sorted(
            k for k in ["a", "b", "c", "a", "d"] if stable_hash(k) % peers == index
        )
        left = sorted(
            (t.inner, r["k"]) for name, t, _k, rows in seen if name == "body-out" for r in rows
        )
        assert left == sorted((i, k) for i in range(3) for k in routed)  # twice around
        # Every worker gets all five records from the broadcast, and counts them at time 0.
        got = sorted(
            (t, r["k"], r["v"]) for name, t, _k, rows in seen if name == "broadcast" for r in rows
        )
        assert got == sorted((0, k, v) for k, v in [*records.items(), ("a", 10)])
        assert [(t, rows) for name, t, _k, rows in seen if name == "count"] == [(0, [5])]


async def captured(worker: Worker) -> list[Any]:
    link = EventLink()

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream.capture_into(link)
        return handle, stream.probe()

    handle, probe = worker.dataflow(build)
    batch = columns(["x", "y"], 5)
    handle.send_batch(batch)
    handle.send_batch([{"k": "z", "v": 7}])
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    messages = [e for e in link.events if isinstance(e, Messages)]
    return [(m.time, type(m.records).__name__, m.records == batch) for m in messages]


def test_capture_keeps_columns() -> None:
    assert operators.run(captured) == [[(0, "Columns", True), (0, "list", False)]]
