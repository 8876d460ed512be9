"""Arrow IPC stream bodies: pushes and staging from columnar producers (Spark), columnar reads.

A body (``application/vnd.apache.arrow.stream``) has a ``time`` column (integers) and either
a ``record`` column of JSON text, or any other columns: each row then becomes the JSON
object of its columns. A read answers with columns ``time`` (int64) and ``record`` (JSON
text). pyarrow is imported only when an Arrow body arrives: it comes with the ``spark``
extra, and without it such requests get 415.

A staged body stays columnar (:class:`~service.store.batches.ArrowRecords`): its shape and
times are checked in bulk when it arrives (a JSON ``record`` column is decoded then, so a
bad one is refused at once), and its rows become Python records once, when the transaction
is committed, grouped by time in bulk. The service reads a logged body again with the same
code (:mod:`service.store.batches`).
"""

from __future__ import annotations

from typing import Any

import orjson

from service.app import (
    ArrowRecords,
    ArrowUnavailable,
    BadRequest,
    BatchError,
    ServiceError,
    arrow_records,
)

ARROW_STREAM = "application/vnd.apache.arrow.stream"

MAX_ARROW_TIME = 2**63 - 1
"""The largest time an Arrow read carries: its ``time`` column is int64, as Spark's LONG."""


class UnsupportedMediaType(ServiceError):
    """An Arrow body on a server without pyarrow (install the ``spark`` extra)."""

    status = 415
    slug = "unsupported-media-type"
    title = "Unsupported media type"


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.compute
        import pyarrow.ipc
    except ImportError:
        raise UnsupportedMediaType(
            f"{ARROW_STREAM} bodies need pyarrow on the server (the spark extra)"
        ) from None
    return pa


def columns_from_arrow(body: bytes) -> ArrowRecords:
    """An Arrow IPC stream's records, checked in bulk; :class:`BadRequest` if malformed.

    Read by the service's own batch reader (:mod:`service.store.batches`), which reads the
    logged batch again on recovery: what is refused here could never be replayed.
    """
    try:
        return arrow_records(body)
    except ArrowUnavailable:
        raise UnsupportedMediaType(
            f"{ARROW_STREAM} bodies need pyarrow on the server (the spark extra)"
        ) from None
    except BatchError as error:
        raise BadRequest(str(error)) from None


def records_from_arrow(body: bytes) -> list[tuple[Any, Any]]:
    """``(time, record)`` pairs from an Arrow IPC stream; :class:`BadRequest` if malformed."""
    pairs: list[tuple[Any, Any]] = columns_from_arrow(body).pairs()
    return pairs


def arrow_from_times(entries: list[tuple[Any, list[Any]]]) -> bytes:
    """An Arrow IPC stream with one row per record: ``time`` (int64), ``record`` (JSON).

    Every time must be at most :data:`MAX_ARROW_TIME` (the caller checks).
    """
    pa = _pyarrow()
    times: list[int] = []
    records: list[str] = []
    for time, batch in entries:
        times.extend([time] * len(batch))
        records.extend(orjson.dumps(r).decode() for r in batch)
    schema = pa.schema(
        [pa.field("time", pa.int64(), False), pa.field("record", pa.string(), False)]
    )
    table = pa.table(
        {"time": pa.array(times, pa.int64()), "record": pa.array(records, pa.string())},
        schema=schema,
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
