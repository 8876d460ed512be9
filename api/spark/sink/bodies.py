"""A task's rows as request bodies: Spark's Arrow batches in the server's Arrow push shape.

Each body is an Arrow IPC stream of up to ``batchSize`` rows: a ``time`` column (from
``timeColumn``, or one time for every row) and the record, either the row's columns as they
are (the server turns them into JSON objects, or, into a typed input, checks them against
its schema and keeps them as columns) or one ``record`` column of JSON text.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from api.spark.options import SinkOptions
from api.spark.sink.common import SinkError


def _find(batch: pa.RecordBatch, name: str) -> str:
    names: list[str] = batch.schema.names
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise SinkError(f"the DataFrame has no column {name!r} (its columns: {names})")


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _plain(kind: pa.DataType) -> bool:
    """Whether the server turns values of ``kind`` into JSON as Spark's ``to_json`` would."""
    if (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_null(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    ):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _plain(kind.value_type)
    if pa.types.is_struct(kind):
        return all(_plain(kind.field(i).type) for i in range(kind.num_fields))
    return False


def record_columns(batch: pa.RecordBatch, options: SinkOptions) -> pa.RecordBatch:
    """The record part of a body: the columns to send beside ``time``.

    Either a single ``record`` column of JSON text (``valueColumn``, or rows the server would
    misread: a lone column named ``record``, a column named ``time``, maps, binary, nested
    decimals) or the row's columns as they are, which the server turns into JSON objects.
    """
    if options.value_column is not None:
        column = batch.column(_find(batch, options.value_column))
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column = pc.cast(column, pa.string())
        elif not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise SinkError(
                f"option 'valueColumn' names a column of {column.type}: it must hold JSON text"
            )
        return pa.RecordBatch.from_arrays([pc.cast(column, pa.string())], names=["record"])
    drop = None if options.time_column is None else _find(batch, options.time_column)
    names = [n for n in batch.schema.names if n != drop]
    columns = [batch.column(n) for n in names]
    columns = [pc.cast(c, pa.float64()) if pa.types.is_decimal(c.type) else c for c in columns]
    passthrough = (
        names
        and names != ["record"]
        and "time" not in names
        and len(set(names)) == len(names)
        and all(_plain(c.type) for c in columns)
    )
    if passthrough:
        return pa.RecordBatch.from_arrays(columns, names=names)
    rows = pa.RecordBatch.from_arrays(columns, names=names).to_pylist() if names else []
    maps = [n for n, c in zip(names, columns, strict=True) if pa.types.is_map(c.type)]
    for row in rows:  # a map is a JSON object, as Spark's to_json writes it
        for name in maps:
            if row[name] is not None:
                row[name] = {str(k): v for k, v in row[name]}
    texts = (
        [orjson.dumps(r, default=_json_default).decode() for r in rows]
        if names
        else ["{}"] * batch.num_rows
    )
    return pa.RecordBatch.from_arrays([pa.array(texts, pa.string())], names=["record"])


def time_column(batch: pa.RecordBatch, options: SinkOptions, fixed: int | None) -> pa.Array:
    """The rows' times as int64: from ``timeColumn``, else ``fixed`` (or ``time``) for all."""
    if options.time_column is None:
        fixed = options.time if fixed is None else fixed
        if fixed is None:
            raise SinkError("no time for the rows: give option 'timeColumn' or 'time'")
        # In bulk: no Python int per row (a 10 M-row write is 10 M rows of one time).
        return pa.nulls(batch.num_rows, pa.int64()).fill_null(fixed)
    name = _find(batch, options.time_column)
    column = batch.column(name)
    if not pa.types.is_integer(column.type):
        raise SinkError(f"the time column {name!r} must hold integers, not {column.type}")
    if column.null_count:
        raise SinkError(f"the time column {name!r} has nulls: every record needs a time")
    column = pc.cast(column, pa.int64())
    if len(column) and pc.min(column).as_py() < 0:
        raise SinkError(f"the time column {name!r} has negative times")
    return column


def frontier_batch(
    batch: pa.RecordBatch, options: SinkOptions, fixed: int | None
) -> pa.RecordBatch:
    """One Spark batch as the server's Arrow push shape: ``time`` and the record columns."""
    times = time_column(batch, options, fixed)
    records = record_columns(batch, options)
    return pa.RecordBatch.from_arrays(
        [times, *records.columns], names=["time", *records.schema.names]
    )


def ipc_body(batches: Sequence[pa.RecordBatch]) -> bytes:
    """An Arrow IPC stream of ``batches`` (all of one schema), as one record batch.

    The slices of Spark's batches a body gathers are concatenated here, in the task: the
    server keeps a one-batch body's columns as they came (no copy) until the commit, where
    several batches would be concatenated into new memory on the server's one thread.
    """
    batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


@dataclass(frozen=True, slots=True)
class Body:
    """One staging request: an Arrow IPC stream and what it holds."""

    data: bytes
    rows: int
    max_time: int


@dataclass(slots=True)
class Tally:
    """What a task was given (how many rows, and their digest), and what it dropped.

    The digest is a SHA-256 of the options that make records of the rows (``timeColumn``,
    ``valueColumn``, the fixed time) and then of every batch Spark handed the task, in order:
    its columns' names and types and its Arrow IPC serialisation. It is taken before
    anything is dropped, so a run of the write again (whose rows are late by then) has the
    same digest as long as each partition is given the same rows, in the same order and the
    same batches (Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``).
    """

    seen: int = 0
    dropped: int = 0
    hash: Any = field(default_factory=hashlib.sha256)

    @classmethod
    def of(cls, options: SinkOptions, fixed: int | None) -> Tally:
        """A tally of a task's rows, whose records ``options`` and ``fixed`` time make."""
        tally = cls()
        shape = [options.time_column, options.value_column, fixed]
        tally.hash.update(orjson.dumps(shape))
        return tally

    def given(self, raw: pa.RecordBatch) -> None:
        """Count a batch the task was given, and add it to the digest."""
        self.seen += raw.num_rows
        if raw.num_rows:
            columns = [[f.name, str(f.type)] for f in raw.schema]
            self.hash.update(orjson.dumps(columns))
            self.hash.update(raw.serialize())

    @property
    def digest(self) -> str:
        """The rows' digest so far (hex)."""
        return str(self.hash.hexdigest())


def bodies(
    batches: Iterable[pa.RecordBatch],
    options: SinkOptions,
    fixed: int | None = None,
    floor: int | None = None,
    tally: Tally | None = None,
) -> Iterator[Body]:
    """The rows of ``batches`` as request bodies of up to ``options.batch_size`` rows each.

    Rows at times before ``floor`` are dropped. ``tally`` counts the rows given (and takes
    their digest, before any is dropped) and the rows dropped.
    """
    tally = Tally() if tally is None else tally
    pending: list[pa.RecordBatch] = []
    size = 0
    limit = options.batch_size

    def flush() -> Body:
        nonlocal pending, size
        schema = pending[0].schema
        same = [b if b.schema == schema else b.cast(schema) for b in pending]
        top = max(pc.max(b.column(0)).as_py() for b in same if b.num_rows)
        body = Body(ipc_body(same), size, top)
        pending, size = [], 0
        return body

    for raw in batches:
        tally.given(raw)
        if raw.num_rows == 0:
            continue
        batch = frontier_batch(raw, options, fixed)
        if floor is not None and pc.min(batch.column(0)).as_py() < floor:
            kept = batch.filter(pc.greater_equal(batch.column(0), floor))
            tally.dropped += batch.num_rows - kept.num_rows
            batch = kept
            if batch.num_rows == 0:
                continue
        if pending and batch.schema != pending[0].schema:
            yield flush()
        offset = 0
        while offset < batch.num_rows:
            take = min(limit - size, batch.num_rows - offset)
            pending.append(batch.slice(offset, take))
            size += take
            offset += take
            if size >= limit:
                yield flush()
    if size:
        yield flush()
