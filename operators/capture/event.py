"""Capture events, and their wire format.

A captured stream is a sequence of two kinds of event (seed 002):

* :class:`Messages` ``(time, records)``: records that appeared on the stream at ``time``;
* :class:`Progress` ``(changes)``: changes ``(time, diff)`` to the stream's frontier.

The history is relative to an implicit starting frontier of one capability at the minimum
time, so a captured stream never begins with ``+1`` at the minimum. Progress may only add
counts at or beyond a time that is held; messages only use held times.

On the wire and on disk each event is one JSON object (encoded with orjson)::

    {"type": "messages", "time": T, "records": [R, ...]}
    {"type": "progress", "changes": [[T, D], ...]}

where a time ``T`` is an integer, or for ``Product(outer, inner)`` the array
``[outer, inner]`` (nested for deeper scopes), and records are any JSON values. In files and
on TCP, events are *frames*: a 4-byte little-endian length, then that many bytes of JSON.

A messages event whose records are :class:`~operators.runtime.Columns` is written as a
*binary* frame instead (:func:`encode_event`), so that columns are never turned into one
JSON value per record: a zero byte (no JSON text begins so), the length of the time's JSON
(4 bytes, little-endian), the time as JSON, zero padding to a multiple of 8 bytes, then an
Arrow IPC stream (its schema, any dictionaries, and one record batch with the records as
one column named ``records``). It decodes to a :class:`Messages` of the same
:class:`Columns` (read in place from the frame's bytes), so a replay sends the batches a
capture saw, boundaries and all. Frames of JSON, as every log written before binary frames
existed holds, decode as before.

>>> from operators.progress import Product
>>> decode_event(encode_event(Messages(Product(1, 2), ["a"])))
Messages(time=Product(outer=1, inner=2), records=['a'])
>>> decode_event(b'{"type": "progress", "changes": [[0, -1], [3, 1]]}')
Progress(changes=[(0, -1), (3, 1)])
"""

from __future__ import annotations

import struct
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import orjson

from operators.progress import TimeFormatError, decode_time, encode_time
from operators.runtime.containers import Batch, Columns, rows_of

FRAME_HEADER = struct.Struct("<I")
"""The length prefix of a frame."""

MAX_FRAME = 256 * 1024 * 1024
"""The largest frame accepted; a larger length is taken as corruption."""

COLUMNS_EVENT = 0
"""The first byte of a binary event (a messages event of columns)."""
_TIME_LENGTH = struct.Struct("<xI")


@dataclass(frozen=True, slots=True)
class Messages:
    """Records that appeared on the stream at ``time``."""

    time: Hashable
    records: Batch


@dataclass(frozen=True, slots=True)
class Progress:
    """Changes ``(time, diff)`` to the stream's frontier."""

    changes: list[tuple[Hashable, int]]


Event = Messages | Progress
"""One step of a captured stream's history."""


class EventFormatError(ValueError):
    """Bytes that are not a valid event (bad JSON, or JSON of the wrong shape)."""


def _time(value: Any) -> Hashable:
    try:
        return decode_time(value)
    except TimeFormatError as error:
        raise EventFormatError(str(error)) from None


def event_to_json(event: Event) -> dict[str, Any]:
    """The JSON object of an event."""
    if isinstance(event, Messages):
        records = rows_of(event.records)
        return {"type": "messages", "time": encode_time(event.time), "records": records}
    return {"type": "progress", "changes": [[encode_time(t), d] for t, d in event.changes]}


def event_from_json(value: Any) -> Event:
    """The event of a JSON object; :class:`EventFormatError` if it is not one."""
    if not isinstance(value, dict):
        raise EventFormatError(f"an event must be a JSON object, not {type(value).__name__}")
    kind = value.get("type")
    if kind == "messages":
        records = value.get("records")
        if not isinstance(records, list):
            raise EventFormatError("a messages event needs a list of records")
        return Messages(_time(value.get("time")), records)
    if kind == "progress":
        changes = value.get("changes")
        if not isinstance(changes, list):
            raise EventFormatError("a progress event needs a list of changes")
        decoded: list[tuple[Hashable, int]] = []
        for change in changes:
            if not (isinstance(change, list) and len(change) == 2 and type(change[1]) is int):
                raise EventFormatError(f"not a change [time, diff]: {change!r}")
            decoded.append((_time(change[0]), change[1]))
        return Progress(decoded)
    raise EventFormatError(f"unknown event type {kind!r}")


def encode_event(event: Event) -> bytes:
    """An event as bytes: JSON, or a binary event for a batch of columns."""
    if isinstance(event, Messages) and isinstance(event.records, Columns):
        return _encode_columns(event.time, event.records)
    return orjson.dumps(event_to_json(event))


def decode_event(data: bytes) -> Event:
    """An event from bytes (JSON or binary); :class:`EventFormatError` if they are not one."""
    if data[:1] == bytes([COLUMNS_EVENT]):
        return _decode_columns(data)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise EventFormatError(f"invalid JSON: {error}") from None
    return event_from_json(value)


def _padded(size: int) -> int:
    return (size + 7) & ~7


def _encode_columns(time: Hashable, batch: Columns) -> bytes:
    import pyarrow as pa

    encoded_time = orjson.dumps(encode_time(time))
    head = _TIME_LENGTH.size + len(encoded_time)
    records = pa.RecordBatch.from_arrays([batch.array], ["records"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, records.schema) as writer:
        writer.write_batch(records)
    return b"".join(
        (
            _TIME_LENGTH.pack(len(encoded_time)),
            encoded_time,
            bytes(_padded(head) - head),
            sink.getvalue(),
        )
    )


def _decode_columns(data: bytes) -> Messages:
    import pyarrow as pa

    if len(data) < _TIME_LENGTH.size:
        raise EventFormatError("a binary event too short for its header")
    (size,) = _TIME_LENGTH.unpack_from(data)
    head = _TIME_LENGTH.size + size
    if len(data) < head:
        raise EventFormatError("a binary event too short for its time")
    try:
        time = _time(orjson.loads(data[_TIME_LENGTH.size : head]))
    except orjson.JSONDecodeError as error:
        raise EventFormatError(f"invalid JSON time in a binary event: {error}") from None
    try:
        body = pa.py_buffer(data).slice(_padded(head))
        reader = pa.ipc.open_stream(body)
        batch = reader.read_next_batch()
    except (pa.ArrowException, StopIteration) as error:
        raise EventFormatError(f"invalid Arrow IPC in a binary event: {error}") from None
    if batch.num_columns != 1:
        raise EventFormatError(f"a binary event holds one column, not {batch.num_columns}")
    return Messages(time, Columns(batch.column(0)))


def frame(event: Event) -> bytes:
    """An event as a frame: length prefix and JSON."""
    payload = encode_event(event)
    return FRAME_HEADER.pack(len(payload)) + payload
