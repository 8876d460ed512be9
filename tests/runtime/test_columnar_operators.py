"""The library's columnar operators beside the row operators, on the same records, per time.

Every test runs one dataflow on every worker: two typed inputs (``left``: ``key`` string
with nulls, ``value`` int64 with negatives; ``right``: ``key``, ``label``), each worker
sending its own records at times 0, 1 and 2. The columnar operator and the row operator it
stands for read the same streams; each output is watched by an operator that takes
containers as they are, so the test sees what travelled as columns and what as lists. The
outputs, merged over workers per time, must be equal, and equal to what plain Python
computes from the data. Each test runs on one worker, on two, and across 2 processes
(``tests/runtime/fabrics.py``).
"""

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker
from operators.columnar.counting import SumOverflow
from operators.runtime import rows_of, stable_hash
from tests.runtime.fabrics import Clusters, Layout

TIMES = 3
LAYOUTS = [
    pytest.param(Layout(1, 1), id="1x1"),
    pytest.param(Layout(1, 2), id="1x2"),
    pytest.param(Layout(2, 1), id="2x1"),
    pytest.param(Layout(2, 2), id="2x2"),
]
LEFT = pa.schema([("key", pa.string()), ("value", pa.int64())])
RIGHT = pa.schema([("key", pa.string()), ("label", pa.int64())])

Event = tuple[Any, ...]
Build = Callable[[Any, Any], dict[str, Any]]


def left_rows(worker: int, time: int) -> list[dict[str, Any]]:
    """Worker ``worker``'s left records at ``time``: keys k0..k4 and null, values of both signs."""
    rows = []
    for i in range(12 + worker * 5 + time):
        n = worker * 1000 + time * 100 + i
        key = None if n % 7 == 3 else f"k{n % 5}"
        rows.append({"key": key, "value": (n * 37) % 101 - 50})
    return rows


def right_rows(worker: int, time: int) -> list[dict[str, Any]]:
    """Worker ``worker``'s right records at ``time``: a few keys (null too), labels."""
    rows = []
    for i in range(3 + worker + time):
        key = None if (worker + i) % 4 == 3 else f"k{(worker * 3 + time + i) % 6}"
        rows.append({"key": key, "label": worker * 100 + time * 10 + i})
    return rows


def all_rows(
    make: Callable[[int, int], list[dict[str, Any]]], peers: int
) -> dict[int, list[dict[str, Any]]]:
    return {t: [r for w in range(peers) for r in make(w, t)] for t in range(TIMES)}


def watch(stream: Any, tag: str, log: Callable[[Event], None]) -> Any:
    """An operator that logs each batch as it arrives (its kind and its rows); returns a probe."""

    def constructor(capability: Any, _info: Any) -> Any:
        capability.drop()

        def logic(input: Any, _output: Any) -> None:
            for time, batch in input.containers():
                log((tag, time, type(batch).__name__, rows_of(batch)))

        return logic

    return stream.unary(constructor, name=f"Watch.{tag}").probe()


async def program(worker: Worker, build: Build) -> list[Event]:
    """One worker: both inputs, the streams ``build`` makes watched; its log of batches."""
    log: list[Event] = []

    def dataflow(scope: Any) -> Any:
        left, left_stream = scope.new_input(schema=LEFT)
        right, right_stream = scope.new_input(schema=RIGHT)
        probes = [watch(s, tag, log.append) for tag, s in build(left_stream, right_stream).items()]
        return left, right, probes

    left, right, probes = worker.dataflow(dataflow)
    for t in range(TIMES):
        left.send_batch(pa.RecordBatch.from_pylist(left_rows(worker.index, t), schema=LEFT))
        right.send_batch(pa.RecordBatch.from_pylist(right_rows(worker.index, t), schema=RIGHT))
        left.advance_to(t + 1)
        right.advance_to(t + 1)
        await worker.step_while(lambda: any(p.less_than(left.time) for p in probes))
    left.close()
    right.close()
    await worker.step_while(lambda: not all(p.done() for p in probes))
    return log


def merged(results: list[list[Event]], tag: str) -> dict[Hashable, list[Any]]:
    """Stream ``tag``'s rows per time over every worker (in arrival order per worker)."""
    out: dict[Hashable, list[Any]] = defaultdict(list)
    for log in results:
        for event in log:
            if event[0] == tag:
                out[event[1]].extend(event[3])
    return dict(out)


def kinds(results: list[list[Event]], tag: str) -> set[str]:
    return {event[2] for log in results for event in log if event[0] == tag}


def per_worker(results: list[list[Event]], tag: str) -> list[dict[Hashable, list[Any]]]:
    return [merged([log], tag) for log in results]


def _key(record: Any) -> Any:
    return record["key"]


def _sorted(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=repr)


# ---------------------------------------------------------------------------- map, filter


def double(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.set_column(1, "value", pc.multiply(batch.column("value"), 2))


def positive(batch: pa.RecordBatch) -> pa.Array:
    return pc.greater(batch.column("value"), 0)


def build_map_filter(left: Any, _right: Any) -> dict[str, Any]:
    return {
        "columns": left.map_columns(double).filter_columns(positive),
        "rows": left.map(lambda r: {**r, "value": r["value"] * 2}).filter(lambda r: r["value"] > 0),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_map_and_filter_columns_are_map_and_filter(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, program, build_map_filter)
    assert kinds(results, "columns") == {"Columns"}
    for w, (columns, rows) in enumerate(
        zip(per_worker(results, "columns"), per_worker(results, "rows"), strict=True)
    ):
        expected = {
            t: [{**r, "value": r["value"] * 2} for r in left_rows(w, t) if r["value"] > 0]
            for t in range(TIMES)
        }
        assert columns == rows == expected  # same records, same order, same worker


# ---------------------------------------------------------------------------- exchange


def build_exchange(left: Any, _right: Any) -> dict[str, Any]:
    return {"columns": left.exchange_columns("key"), "rows": left.exchange(_key)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_exchange_columns_routes_as_the_rows_are_routed(
    layout: Layout, clusters: Clusters
) -> None:
    results = await clusters.run(layout, program, build_exchange)
    assert kinds(results, "columns") == {"Columns"}
    data = all_rows(left_rows, layout.peers)
    for w, (columns, rows) in enumerate(
        zip(per_worker(results, "columns"), per_worker(results, "rows"), strict=True)
    ):
        expected = {
            t: _sorted([r for r in data[t] if stable_hash(r["key"]) % layout.peers == w])
            for t in range(TIMES)
        }
        expected = {t: rs for t, rs in expected.items() if rs}
        assert {t: _sorted(rs) for t, rs in columns.items()} == expected
        assert {t: _sorted(rs) for t, rs in rows.items()} == expected


# ---------------------------------------------------------------------------- counting


def _sum_counts(acc: int, counts: list[int]) -> int:
    return acc + sum(counts)


def build_count(left: Any, _right: Any) -> dict[str, Any]:
    rows = left.count().exchange(lambda _n: 0).accumulate(int, _sum_counts)
    return {"columns": left.count_columns(), "rows": rows}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_count_columns_sums_over_workers(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, program, build_count)
    assert kinds(results, "columns") == {"Columns"}
    data = all_rows(left_rows, layout.peers)
    expected = {t: [len(data[t])] for t in range(TIMES)}
    assert merged(results, "columns") == merged(results, "rows") == expected
    assert merged(results[:1], "columns") == expected  # on worker 0


def build_count_by(left: Any, _right: Any) -> dict[str, Any]:
    return {"columns": left.count_by_columns("key"), "rows": left.count_by(_key)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_count_by_columns_is_count_by(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, program, build_count_by)
    assert kinds(results, "columns") == {"Columns"}
    data = all_rows(left_rows, layout.peers)
    expected = {
        t: _sorted([{"key": k, "count": n} for k, n in Counter(map(_key, data[t])).items()])
        for t in range(TIMES)
    }
    columns = {t: _sorted(rs) for t, rs in merged(results, "columns").items()}
    rows = {
        t: _sorted([{"key": k, "count": n} for k, n in rs])
        for t, rs in merged(results, "rows").items()
    }
    assert columns == rows == expected
    for w, mine in enumerate(per_worker(results, "columns")):  # each key on its own worker
        assert all(stable_hash(r["key"]) % layout.peers == w for rs in mine.values() for r in rs)


def _fold(acc: Any, record: dict[str, Any]) -> Any:
    value = record["value"]
    if acc is None:
        return {"total": value, "low": value, "high": value, "n": 1}
    return {
        "total": acc["total"] + value,
        "low": min(acc["low"], value),
        "high": max(acc["high"], value),
        "n": acc["n"] + 1,
    }


def _emit(key: Any, acc: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, **acc}


AGGREGATIONS = {
    "total": ("value", "sum"),
    "low": ("value", "min"),
    "high": ("value", "max"),
    "n": ("value", "count"),
}


def build_aggregate(left: Any, _right: Any) -> dict[str, Any]:
    return {
        "columns": left.aggregate_columns("key", AGGREGATIONS),
        "rows": left.aggregate(_key, _fold, _emit),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_aggregate_columns_is_aggregate(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, program, build_aggregate)
    assert kinds(results, "columns") == {"Columns"}
    data = all_rows(left_rows, layout.peers)
    expected: dict[int, list[Any]] = {}
    for t in range(TIMES):
        groups: dict[Any, list[int]] = defaultdict(list)
        for r in data[t]:
            groups[r["key"]].append(r["value"])
        expected[t] = _sorted(
            [
                {"key": k, "total": sum(v), "low": min(v), "high": max(v), "n": len(v)}
                for k, v in groups.items()
            ]
        )
    columns = {t: _sorted(rs) for t, rs in merged(results, "columns").items()}
    rows = {t: _sorted(rs) for t, rs in merged(results, "rows").items()}
    assert columns == rows == expected


# ---------------------------------------------------------------------------- join


def build_join(left: Any, right: Any) -> dict[str, Any]:
    return {
        "columns": left.join_columns(right, "key", "key"),
        "rows": left.join(right, _key, _key),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_join_columns_is_join(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, program, build_join)
    assert kinds(results, "columns") == {"Columns"}
    lefts, rights = all_rows(left_rows, layout.peers), all_rows(right_rows, layout.peers)
    expected = {
        t: _sorted(
            [{"left": a, "right": b} for a in lefts[t] for b in rights[t] if a["key"] == b["key"]]
        )
        for t in range(TIMES)
    }
    columns = {t: _sorted(rs) for t, rs in merged(results, "columns").items()}
    rows = {
        t: _sorted([{"left": a, "right": b} for a, b in rs])
        for t, rs in merged(results, "rows").items()
    }
    assert columns == rows == expected
    assert sum(len(rs) for rs in expected.values()) >= 27  # not a trivial join
    assert any(p["left"]["key"] is None for rs in expected.values() for p in rs)  # nulls meet


# ---------------------------------------------------------------------------- overflow


BIG = pa.schema([("key", pa.string()), ("value", pa.int64())])


async def overflowing(worker: Worker) -> None:
    def dataflow(scope: Any) -> Any:
        handle, stream = scope.new_input(schema=BIG)
        return handle, stream.aggregate_columns("key", {"total": ("value", "sum")}).probe()

    handle, probe = worker.dataflow(dataflow)
    if worker.index == 0:
        big = 2**62
        handle.send_batch(pa.RecordBatch.from_pylist([{"key": "a", "value": big}] * 2, schema=BIG))
        handle.send_batch(pa.RecordBatch.from_pylist([{"key": "b", "value": -big}], schema=BIG))
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_an_int64_sum_that_overflows_is_an_error(layout: Layout, clusters: Clusters) -> None:
    with pytest.raises(
        SumOverflow,
        match=r"the sum 'total' of key \{'key': 'a'\} at time 0 is 9223372036854775808, "
        "outside int64",
    ):
        await clusters.run(layout, overflowing)


@pytest.mark.parametrize(
    ("values", "kind", "by_bins"),
    [
        ([5, 3, 5, -2, 3, 5], pa.int64(), True),
        ([-128, 127, 127, 0], pa.int8(), True),  # a span wider than int8 holds
        ([2**64 - 1, 2**64 - 3, 2**64 - 1], pa.uint64(), True),
        ([-(2**63), -(2**63) + 2, -(2**63)], pa.int64(), True),
        ([-(2**63), 2**63 - 1], pa.int64(), False),  # too wide
        ([1, None, 1], pa.int64(), False),  # a null
        (["a", "b", "a"], pa.string(), False),  # not integers
    ],
)
def test_count_by_columns_counts_integer_keys_by_bins_as_value_counts_does(
    values: list[Any], kind: pa.DataType, by_bins: bool
) -> None:
    from operators.columnar.counting import _dense_counts

    column = pa.chunked_array([pa.array(values[:2], kind), pa.array(values[2:], kind)])
    counted = _dense_counts(column)
    assert (counted is not None) == by_bins
    if counted is None:
        return  # pc.value_counts counts them
    expected = pc.value_counts(column).flatten()
    assert counted[0].type == kind and counted[1].type == pa.int64()
    pairs = dict(zip(counted[0].to_pylist(), counted[1].to_pylist(), strict=True))
    assert pairs == dict(zip(expected[0].to_pylist(), expected[1].to_pylist(), strict=True))
