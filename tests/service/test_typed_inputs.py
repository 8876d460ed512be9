"""Typed inputs in process: their records reach the output as columns, whatever the path.

Every test runs a real DataflowManager and reads what reaches the output log: containers
of columns (one per time) for a typed input fed straight to an output, records when read
as records.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.graph.schema import parse_schema
from operators.progress import Product
from operators.runtime import Columns
from service.app import Conflict, Invalid
from service.app.inputs.chunks import FEW_TIMES, by_time_across
from service.store.typed import from_values
from tests.service.support import Start, until

SCHEMA = {"key": "string", "n": "int64"}
TYPED = {
    "nodes": {"x": {"op": "input", "schema": SCHEMA}, "out": {"op": "output"}},
    "edges": [["x", "out"]],
}
INSPECTED = {
    "nodes": {
        "x": {"op": "input", "schema": SCHEMA},
        "i": {"op": "inspect"},
        "out": {"op": "output"},
    },
    "edges": [["x", "i"], ["i", "out"]],
}
TYPED_PRODUCT = {"time": {"product": ["u64", "u64"]}, **TYPED}


async def typed(start: Start, graph: dict[str, Any] = TYPED, workers: int = 1) -> Any:
    manager = await start(workers)
    record = await manager.create("t", graph, "test")
    return manager.input("t", record.id, "x"), manager.output("t", record.id, "out")


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_typed_push_reaches_the_output_as_columns_one_container_per_time(
    start: Start, workers: int
) -> None:
    x, log = await typed(start, workers=workers)
    assert log.schema is not None and log.schema.describe() == SCHEMA
    session = x.open_session()
    records = [{"key": "a", "n": 1}, {"key": "b", "n": 2}, {"key": "c", "n": 3}]
    ack = x.push_columns(session.id, 1, [2, 1, 2], records)
    assert ack.applied == 3 and x.records_in == 3
    x.close()
    await until(lambda: log.frontier().is_empty(), "the output completes")
    first, second = log.batch_at(1), log.batch_at(2)
    assert isinstance(first, Columns) and isinstance(second, Columns)
    assert first.rows() == [{"key": "b", "n": 2}]
    assert second.rows() == [{"key": "a", "n": 1}, {"key": "c", "n": 3}]
    assert log.records_at(2) == [{"key": "a", "n": 1}, {"key": "c", "n": 3}]
    assert log.retained_bytes == 0  # no sizer here: byte retention is off


async def test_an_output_behind_a_forwarding_operator_is_typed_whatever_its_containers(
    start: Start,
) -> None:
    x, log = await typed(start, INSPECTED)
    assert log.schema is not None and log.schema.describe() == SCHEMA
    session = x.open_session()
    x.push_columns(session.id, 1, [0, 0], [{"key": "a", "n": 1}, {"key": "b", "n": 2}])
    x.close()
    await until(lambda: log.frontier().is_empty(), "the output completes")
    assert log.records_at(0) == [{"key": "a", "n": 1}, {"key": "b", "n": 2}]


async def test_a_misfit_applies_nothing_and_leaves_the_sequence_number(start: Start) -> None:
    x, _log = await typed(start)
    session = x.open_session()
    with pytest.raises(Invalid) as refused:
        x.push_columns(session.id, 1, [0, 0], [{"key": "a", "n": 1}, {"key": "b"}])
    assert refused.value.problems == [
        {"pointer": "/records/1/1/n", "detail": "missing (expected int64)"}
    ]
    assert (x.records_in, x.sessions[session.id].seq) == (0, 0)
    assert x.push_columns(session.id, 1, [0], [{"key": "a", "n": 1}]).applied == 1


async def test_a_typed_push_before_the_session_time_is_a_conflict_naming_the_record(
    start: Start,
) -> None:
    x, _log = await typed(start)
    session = x.open_session(5)
    typed_batch = x.core.typed_values([5, 4], [{"key": "a", "n": 1}, {"key": "b", "n": 2}])
    with pytest.raises(Conflict, match=r"record 1 is at 4, before the session's time 5"):
        x.push_typed(session.id, 1, typed_batch)
    assert x.records_in == 0


async def test_product_times_of_a_typed_input_go_one_container_per_time(start: Start) -> None:
    x, log = await typed(start, TYPED_PRODUCT)
    session = x.open_session()
    times = [Product(1, 0), Product(0, 1), Product(1, 0)]
    records = [{"key": "a", "n": 1}, {"key": "b", "n": 2}, {"key": "c", "n": 3}]
    assert x.push(session.id, 1, list(zip(times, records, strict=True))).applied == 3
    x.close()
    await until(lambda: log.frontier().is_empty(), "the output completes")
    assert log.records_at(Product(0, 1)) == [{"key": "b", "n": 2}]
    assert log.records_at(Product(1, 0)) == [{"key": "a", "n": 1}, {"key": "c", "n": 3}]
    assert isinstance(log.batch_at(Product(1, 0)), Columns)


async def test_staged_chunks_at_one_time_are_concatenated_at_commit(start: Start) -> None:
    x, log = await typed(start)
    x.stage("t1", [(0, {"key": "a", "n": 1})])
    x.stage("t1", [(0, {"key": "b", "n": 2}), (1, {"key": "c", "n": 3})])
    ack = x.commit(None, ["t1"], "k", advance_to=2)
    assert ack.applied == 3
    await until(lambda: list(log.frontier()) == [2], "the output reaches 2")
    zero = log.batch_at(0)
    assert isinstance(zero, Columns) and zero.rows() == [{"key": "a", "n": 1}, {"key": "b", "n": 2}]
    assert log.count_at(0) == 2 and log.count_at(1) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 20), min_size=0, max_size=12), min_size=2, max_size=5))
def test_a_commit_grouped_time_by_time_has_the_containers_of_chunk_by_chunk(
    chunk_times: list[list[int]],
) -> None:
    """by_time_across gives each time the records chunk by chunk grouping would concatenate."""
    schema = parse_schema(SCHEMA, "", [])
    chunks, n = [], 0
    for times in chunk_times:
        records = [{"key": f"k{n + i}", "n": n + i} for i in range(len(times))]
        n += len(times)
        chunks.append(from_values(times, records, schema))
    across = by_time_across(chunks)
    expected: dict[Any, list[Any]] = {}
    for chunk in chunks:
        for time, columns in chunk.by_time():
            expected.setdefault(time, []).extend(columns.rows())
    spanned = [t for times in chunk_times for t in times]
    if sum(1 for times in chunk_times if times) < 2 or max(spanned) - min(spanned) >= FEW_TIMES:
        assert across is None
        return
    assert across is not None
    assert [(time, columns.rows()) for time, columns in across] == sorted(expected.items())
