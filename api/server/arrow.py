"""Arrow IPC stream bodies: pushes and staging from columnar producers (Spark), columnar reads.

A body (``application/vnd.apache.arrow.stream``) into an untyped input has a ``time`` column
(integers) and either a ``record`` column of JSON text, or any other columns: each row then
becomes the JSON object of its columns. Into a typed input it has ``time`` and the schema's
fields as columns, kept as columns all the way (the service checks them against the schema:
:meth:`~service.app.ProducerInput.typed_arrow`).

A read of an untyped output answers columns ``time`` (int64) and ``record`` (JSON text); of
a typed output, ``time`` and the record's fields, typed (:func:`arrow_from_batches`): the
batches the output kept, concatenated, with no record made into a Python value.

A staged untyped body stays columnar (:class:`~service.store.batches.ArrowRecords`): its
shape and times are checked in bulk when it arrives (a JSON ``record`` column is decoded
then, so a bad one is refused at once), and its rows become Python records once, when the
transaction is committed, grouped by time in bulk. The service reads a logged body again
with the same code (:mod:`service.store.batches`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from service.app import (
    ArrowRecords,
    BadRequest,
    BatchError,
    Container,
    RecordColumns,
    ServiceError,
    arrow_records,
)

ARROW_STREAM = "application/vnd.apache.arrow.stream"

MAX_ARROW_TIME = 2**63 - 1
"""The largest time an Arrow read carries: its ``time`` column is int64, as Spark's LONG."""


class UnsupportedMediaType(ServiceError):
    """A body of a type the route does not take."""

    status = 415
    slug = "unsupported-media-type"
    title = "Unsupported media type"


def columns_from_arrow(body: bytes) -> ArrowRecords:
    """An Arrow IPC stream's records, checked in bulk; :class:`BadRequest` if malformed.

    Read by the service's own batch reader (:mod:`service.store.batches`), which reads the
    logged batch again on recovery: what is refused here could never be replayed.
    """
    try:
        return arrow_records(body)
    except BatchError as error:
        raise BadRequest(str(error)) from None


def records_from_arrow(body: bytes) -> list[tuple[Any, Any]]:
    """``(time, record)`` pairs from an Arrow IPC stream; :class:`BadRequest` if malformed."""
    pairs: list[tuple[Any, Any]] = columns_from_arrow(body).pairs()
    return pairs


ARROW_FRAME = b"\xff\xff\xff\xff"
"""How an Arrow IPC stream begins (its first message's continuation marker): a binary
WebSocket frame that begins so is an Arrow push, not JSON."""


def arrow_seq(frame: bytes) -> int:
    """The ``seq`` of an Arrow push frame: its schema's metadata ``seq`` (a positive integer).

    :class:`BadRequest` if the frame is not an Arrow IPC stream or says no ``seq``.
    """
    try:
        metadata = pa.ipc.open_stream(frame).schema.metadata or {}
    except (pa.ArrowInvalid, OSError) as error:
        raise BadRequest(f"the frame is not an Arrow IPC stream: {error}") from None
    raw = metadata.get(b"seq", b"")
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 2**63 - 1:
        raise BadRequest(
            "an Arrow push frame needs a positive integer seq in its schema's metadata, "
            f"not {raw!r}"
        )
    return int(raw)


def _stream(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def arrow_from_times(entries: list[tuple[Any, list[Any]]]) -> bytes:
    """An Arrow IPC stream with one row per record: ``time`` (int64), ``record`` (JSON).

    Every time must be at most :data:`MAX_ARROW_TIME` (the caller checks).
    """
    times: list[int] = []
    records: list[str] = []
    for time, batch in entries:
        times.extend([time] * len(batch))
        records.extend(orjson.dumps(r).decode() for r in batch)
    schema = pa.schema(
        [pa.field("time", pa.int64(), False), pa.field("record", pa.string(), False)]
    )
    return _stream(
        pa.RecordBatch.from_arrays(
            [pa.array(times, pa.int64()), pa.array(records, pa.string())], schema=schema
        )
    )


def arrow_from_batches(entries: list[tuple[Hashable, Container]], record: pa.StructType) -> bytes:
    """An Arrow IPC stream of a typed output's records: ``time`` (int64) and their fields.

    The batches are columns of ``record`` (a list, which a cluster's output may hold, is
    made into columns of that type once). The ``time`` column is made in bulk (one run per
    time, decoded); every time must be at most :data:`MAX_ARROW_TIME` (the caller checks).
    """
    arrays = [_struct(batch, record) for _time, batch in entries if len(batch)]
    runs = [len(array) for array in arrays]
    times = [time for time, batch in entries if len(batch)]
    fields = [record.field(i) for i in range(record.num_fields)]
    schema = pa.schema([pa.field("time", pa.int64(), False), *fields])
    if not arrays:
        return _stream(_empty(schema))
    ends = pa.array(_cumulative(runs), pa.int64())
    time = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array(times, pa.int64())))
    records = pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]
    columns = pa.RecordBatch.from_struct_array(records).columns
    return _stream(pa.RecordBatch.from_arrays([time, *columns], schema=schema))


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _cumulative(runs: list[int]) -> list[int]:
    total, ends = 0, []
    for run in runs:
        total += run
        ends.append(total)
    return ends


def _struct(batch: Container, record: pa.StructType) -> pa.Array:
    if isinstance(batch, RecordColumns):
        if batch.type == record:
            return batch.array
        return batch.array.cast(record)
    return pa.array(batch, record)
