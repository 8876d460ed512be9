"""Typed inputs: ``scope.new_input(schema=...)`` sends Arrow columns of its schema, or refuses.

A batch of the schema (a record batch, a table, Columns, or a list of dicts) arrives
downstream as one :class:`Columns` container of the schema's struct type; a batch of
another schema is refused, naming the field, and nothing of it is sent. Columns are
allocated from jemalloc once the engine makes them (``operators/runtime/arrow.py``).
"""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, run
from operators.input import SchemaMismatch, TypedInputHandle
from operators.runtime import Columns, rows_of

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("value", pa.int64()),
    ]
)
ROWS = [{"key": "a", "value": 1}, {"key": "b", "value": None}]


def _watched(scope: Any, log: list[Any]) -> Any:
    handle, stream = scope.new_input(schema=SCHEMA)

    def constructor(capability: Any, _info: Any) -> Any:
        capability.drop()

        def logic(input: Any, _output: Any) -> None:
            for time, batch in input.containers():
                log.append((time, batch))

        return logic

    return handle, stream.unary(constructor).probe()


def test_every_kind_of_batch_arrives_as_columns_of_the_schema() -> None:
    log: list[Any] = []

    async def work(worker: Worker) -> None:
        handle, probe = worker.dataflow(lambda scope: _watched(scope, log))
        assert isinstance(handle, TypedInputHandle)
        batch = pa.RecordBatch.from_pylist(ROWS, schema=SCHEMA)
        handle.send_batch(batch)
        handle.send_batch(pa.Table.from_batches([batch.slice(0, 1), batch.slice(1)]))
        handle.send_batch(Columns.of(batch))
        handle.send_batch(ROWS)
        # Fields in another order, and a nullable "key" that holds no null: the same records.
        reordered = pa.record_batch({"value": [3], "key": ["c"]})
        handle.send_batch(reordered)
        handle.send({"key": "d", "value": 4})
        handle.send_batch(pa.RecordBatch.from_pylist([], schema=SCHEMA))  # nothing sent
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))

    run(work)
    assert [type(batch) for _, batch in log] == [Columns] * 6
    assert {batch.type for _, batch in log} == {pa.struct(list(SCHEMA))}
    assert [rows_of(batch) for _, batch in log] == [
        ROWS,
        ROWS,
        ROWS,
        ROWS,
        [{"key": "c", "value": 3}],
        [{"key": "d", "value": 4}],
    ]
    assert [time for time, _ in log] == [0] * 6


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (pa.record_batch({"key": ["a"]}), r"field 'value' is missing \(expected int64\)"),
        (
            pa.record_batch({"key": ["a"], "value": [1], "extra": [True]}),
            r"field 'extra' is not in the input's schema",
        ),
        (
            pa.record_batch({"key": ["a"], "value": ["1"]}),
            r"field 'value': expected int64, got string",
        ),
        (
            pa.record_batch({"key": ["a", None], "value": [1, 2]}),
            r"field 'key' is not nullable, and 1 records have null",
        ),
        (
            Columns(pa.array([1, 2])),
            r"records of type int64, not objects with fields",
        ),
        ([{"key": "a", "value": "x"}], r"record 0, field 'value'"),
    ],
)
def test_a_batch_of_another_schema_is_refused_naming_the_field(batch: Any, message: str) -> None:
    log: list[Any] = []

    async def work(worker: Worker) -> None:
        handle, probe = worker.dataflow(lambda scope: _watched(scope, log))
        handle.send_batch(pa.RecordBatch.from_pylist(ROWS[:1], schema=SCHEMA))
        with pytest.raises(SchemaMismatch, match=message):
            handle.send_batch(batch)
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))

    run(work)
    assert [rows_of(batch) for _, batch in log] == [ROWS[:1]]  # the refused batch sent nothing


POOL = """
import pyarrow as pa
import operators
from operators import run

async def work(worker):
    worker.dataflow(lambda scope: scope.new_input(schema=pa.schema([("a", pa.int64())])))

print(pa.default_memory_pool().backend_name)
run(work)
print(pa.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize(
    ("chosen", "expected"),
    [(None, ["mimalloc", "jemalloc"]), ("system", ["system", "system"])],
)
def test_columns_are_allocated_from_jemalloc_unless_the_user_chose(
    chosen: str | None, expected: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", POOL], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == expected
