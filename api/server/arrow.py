"""Arrow IPC stream bodies: pushes from columnar producers (Spark), and columnar reads.

A push body (``application/vnd.apache.arrow.stream``) has a ``time`` column (integers) and
either a ``record`` column of JSON text, or any other columns: each row then becomes the
JSON object of its columns. A read answers with columns ``time`` (int64) and ``record``
(JSON text). pyarrow is imported only when an Arrow body arrives: it comes with the
``spark`` extra, and without it such requests get 415.
"""

from __future__ import annotations

from typing import Any

import orjson

from api.server.problems import BadRequest
from service.app.errors import ServiceError
from service.progress import MAX_TIME

ARROW_STREAM = "application/vnd.apache.arrow.stream"


class UnsupportedMediaType(ServiceError):
    """An Arrow body on a server without pyarrow (install the ``spark`` extra)."""

    status = 415
    slug = "unsupported-media-type"
    title = "Unsupported media type"


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.ipc
    except ImportError:
        raise UnsupportedMediaType(
            f"{ARROW_STREAM} bodies need pyarrow on the server (the spark extra)"
        ) from None
    return pa


def records_from_arrow(body: bytes) -> list[tuple[int, Any]]:
    """``(time, record)`` pairs from an Arrow IPC stream; :class:`BadRequest` if malformed."""
    pa = _pyarrow()
    try:
        table = pa.ipc.open_stream(body).read_all()
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as error:
        raise BadRequest(f"the body is not an Arrow IPC stream: {error}") from None
    names = table.column_names
    if "time" not in names:
        raise BadRequest("an Arrow push needs a 'time' column")
    times_column = table.column("time")
    if not pa.types.is_integer(times_column.type):
        raise BadRequest(f"the 'time' column must hold integers, not {times_column.type}")
    if times_column.null_count:
        raise BadRequest("the 'time' column has nulls")
    times = times_column.to_pylist()
    for index, time in enumerate(times):
        if not 0 <= time <= MAX_TIME:
            raise BadRequest(f"row {index}: time {time} is outside [0, 2**64)")
    if "record" in names and len(names) == 2:
        column = table.column("record")
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise BadRequest(f"the 'record' column must hold JSON text, not {column.type}")
        records: list[Any] = []
        for index, text in enumerate(column.to_pylist()):
            try:
                records.append(None if text is None else orjson.loads(text))
            except orjson.JSONDecodeError:
                raise BadRequest(f"row {index}: the record is not valid JSON") from None
    else:
        records = table.drop_columns(["time"]).to_pylist()
    return list(zip(times, records, strict=True))


def arrow_from_times(entries: list[tuple[Any, list[Any]]]) -> bytes:
    """An Arrow IPC stream with one row per record: ``time`` (int64), ``record`` (JSON)."""
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
