"""The frames of the cluster fabric: pickles for most messages, Arrow IPC for columns.

A link (:mod:`operators.runtime.cluster`) writes what its workers queued during one turn of
the event loop. Messages whose batch is a :class:`~operators.runtime.containers.Columns`
travel as Arrow IPC, everything else (list batches, progress) as one pickle per run of
consecutive messages, so the order of the queue is the order of the frames. A frame's
payload says what it is by its first byte:

* byte ``0x80``: a pickle (protocol 5) of a list of ``(channel, worker, message)``;
* ``S``: a schema: a 4-byte id, then the schema as an IPC message. A link sends each Arrow
  type once per connection, before the first batch of it (``S`` then ``A`` frames);
* ``A``: one ``(time, Columns)`` message of a schema sent before: a fixed header (kind,
  schema id, channel, worker, the length of the time), the time (a pickle: ints and
  ``Product`` times), zero padding to a multiple of 8 bytes, then the record batch as one
  IPC message (its flatbuffer and body, as ``RecordBatch.serialize`` writes it);
* ``D``: the same for a type with dictionaries (which a bare record batch message cannot
  carry): the header and time, then a whole IPC stream (schema, dictionaries, batch).

The receiver reads an ``A`` frame in place: ``pyarrow.py_buffer`` over the received bytes,
and the record batch's arrays point into them (no copy, no validation: only a peer that
proved it holds the cluster's secret is read from). The IPC body starts 8-byte aligned
within the payload, as Arrow's buffers want.

The records travel as one column named ``records`` whose type is the container's array
type (a struct for records with fields), so any array a :class:`Columns` can hold crosses.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, cast

from operators.runtime.arrow import use_engine_pool
from operators.runtime.containers import Columns

if TYPE_CHECKING:
    import pyarrow as pa

Item = tuple[int, int, object]
"""``(channel, worker, message)``: one message for one worker's mailbox of a channel."""

PICKLED = 0x80
SCHEMA = ord("S")
COLUMNS = ord("A")
STREAM = ord("D")
_HEADER = struct.Struct("<B3xIqqI4x")
"""Kind, schema id, channel, worker, length of the pickled time (then 4 bytes of padding)."""
_SCHEMA_HEADER = struct.Struct("<B3xI")
LARGEST_BATCH = 256 * 1024 * 1024
"""A batch of columns whose buffers exceed this many bytes goes as several frames (halves,
halved again until each fits): a frame stays far below what a peer reads as corruption,
and the receiver counts the records of the pieces, which sum to the batch's."""


def is_columns(message: object) -> bool:
    """Whether ``message`` is a ``(time, Columns)`` data message (sent as Arrow IPC)."""
    return type(message) is tuple and len(message) == 2 and type(message[1]) is Columns


def _has_dictionary(kind: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return True
    return any(_has_dictionary(kind.field(i).type) for i in range(kind.num_fields))


def _padded(size: int) -> int:
    return (size + 7) & ~7


class Encoder:
    """Turns one link's queued messages into frame payloads (it remembers sent schemas)."""

    __slots__ = ("_schemas",)

    def __init__(self) -> None:
        self._schemas: dict[pa.DataType, int] = {}

    def payloads(self, items: list[Item]) -> list[list[Any]]:
        """Each frame's payload, as the pieces to write one after the other, in order."""
        payloads: list[list[Any]] = []
        pickled: list[Item] = []
        for item in items:
            if is_columns(item[2]):
                if pickled:
                    payloads.append([pickle.dumps(pickled, protocol=5)])
                    pickled = []
                for piece in _pieces(item):
                    payloads.extend(self._columns(piece))
            else:
                pickled.append(item)
        if pickled:
            payloads.append([pickle.dumps(pickled, protocol=5)])
        return payloads

    def _columns(self, item: Item) -> list[list[Any]]:
        import pyarrow as pa

        use_engine_pool()  # each frame's IPC body is a fresh buffer: reuse freed memory
        channel, worker, message = item
        time, batch = cast("tuple[Hashable, Columns]", message)  # as is_columns found it
        array = batch.array
        kind = array.type
        time_bytes = pickle.dumps(time, protocol=5)
        padding = b"\0" * (_padded(_HEADER.size + len(time_bytes)) - _HEADER.size - len(time_bytes))
        records = pa.RecordBatch.from_arrays([array], ["records"])
        if _has_dictionary(kind):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, records.schema) as writer:
                writer.write_batch(records)
            header = _HEADER.pack(STREAM, 0, channel, worker, len(time_bytes))
            return [[header, time_bytes, padding, sink.getvalue()]]
        frames: list[list[Any]] = []
        schema_id = self._schemas.get(kind)
        if schema_id is None:
            schema_id = self._schemas[kind] = len(self._schemas)
            schema = records.schema.serialize()
            frames.append([_SCHEMA_HEADER.pack(SCHEMA, schema_id), schema])
        header = _HEADER.pack(COLUMNS, schema_id, channel, worker, len(time_bytes))
        frames.append([header, time_bytes, padding, records.serialize()])
        return frames


def _pieces(item: Item) -> list[Item]:
    """``item``, or its batch in slices each within :data:`LARGEST_BATCH` (in order)."""
    channel, worker, message = item
    time, batch = cast("tuple[Hashable, Columns]", message)
    if batch.nbytes <= LARGEST_BATCH or len(batch) < 2:
        return [item]
    half = len(batch) // 2
    first = (channel, worker, (time, batch.slice(0, half)))
    rest = (channel, worker, (time, batch.slice(half, len(batch) - half)))
    return [*_pieces(first), *_pieces(rest)]


class Decoder:
    """Turns one link's frame payloads back into messages (it remembers received schemas)."""

    __slots__ = ("_schemas",)

    def __init__(self) -> None:
        self._schemas: dict[int, pa.Schema] = {}

    def items(self, payload: bytes | bytearray) -> list[Item]:
        """The messages of one frame (none for a schema frame)."""
        kind = payload[0]
        if kind == PICKLED:
            items: list[Item] = pickle.loads(payload)  # a peer that proved it holds the secret
            return items
        if kind == SCHEMA:
            return self._schema(payload)
        if kind in (COLUMNS, STREAM):
            return [self._columns(payload)]
        raise ValueError(f"a frame of unknown kind {kind:#x}")

    def _schema(self, payload: bytes | bytearray) -> list[Item]:
        import pyarrow as pa

        _kind, schema_id = _SCHEMA_HEADER.unpack_from(payload)
        body = pa.py_buffer(payload).slice(_SCHEMA_HEADER.size)
        self._schemas[schema_id] = pa.ipc.read_schema(body)
        return []

    def _columns(self, payload: bytes | bytearray) -> Item:
        import pyarrow as pa

        kind, schema_id, channel, worker, time_size = _HEADER.unpack_from(payload)
        start = _HEADER.size
        time = pickle.loads(payload[start : start + time_size])
        body = pa.py_buffer(payload).slice(_padded(start + time_size))
        if kind == STREAM:
            records = pa.ipc.open_stream(body).read_next_batch()
        else:
            records = pa.ipc.read_record_batch(body, self._schemas[schema_id])
        return channel, worker, (time, Columns(records.column(0)))
