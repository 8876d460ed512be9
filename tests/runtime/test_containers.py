"""Containers on channels: records as Arrow columns travel with lists through any operator.

Progress counts a container's length, whatever it is; an operator written record by record
gets a list; exchange routes each record as it would route the same record in a list. Every
test runs in one process and across processes, with the same exact values expected.
"""

from typing import Any

import pyarrow as pa
import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker
from operators.runtime import Columns, rows_of
from tests.runtime.fabrics import Clusters, Layout, layouts


def _columns(start: int) -> Columns:
    keys = [f"k{i % 5}" for i in range(start, start + 10)]
    return Columns.of(pa.record_batch({"key": keys, "value": list(range(start, start + 10))}))


async def columns_through_rows(worker: Worker) -> list[Any]:
    out: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = (
            stream.exchange(lambda r: r["key"])
            .inspect_batch(lambda t, rs: out.append((t, worker.index, type(rs).__name__)))
            .map(lambda r: r["key"])
            .count_by()
            .inspect_batch(lambda t, rs: out.append((t, sorted(rs))))
        )
        return handle, counted.probe()

    handle, probe = worker.dataflow(build)
    for t in range(2):
        if worker.index == 0:
            handle.send_batch(_columns(t * 10))
            handle.send_batch([{"key": "k0", "value": -1}])
        handle.advance_to(t + 1)
        await worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    return out


@pytest.mark.parametrize("layout", layouts(1, 3))
async def test_columns_and_lists_share_a_stream(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, columns_through_rows)
    counts: dict[int, list[Any]] = {}
    kinds: set[str] = set()
    for result in results:
        for event in result:
            if len(event) == 3:
                kinds.add(event[2])
            else:
                counts.setdefault(event[0], []).extend(event[1])
    assert kinds == {"list"}  # operators written record by record see lists only
    assert {t: sorted(c) for t, c in counts.items()} == {
        0: [("k0", 3), ("k1", 2), ("k2", 2), ("k3", 2), ("k4", 2)],
        1: [("k0", 3), ("k1", 2), ("k2", 2), ("k3", 2), ("k4", 2)],
    }


def test_columns_are_a_container() -> None:
    batch = _columns(0)
    assert len(batch) == 10 and bool(batch)
    assert rows_of(batch)[:2] == [{"key": "k0", "value": 0}, {"key": "k1", "value": 1}]
    assert rows_of([1, 2]) == [1, 2]
    assert batch.slice(8, 2).rows() == [{"key": "k3", "value": 8}, {"key": "k4", "value": 9}]
    assert batch == _columns(0) and batch != _columns(10)
    with pytest.raises(TypeError, match="call rows\\(\\) first"):
        list(batch)
