"""The fabric's frames: batches of columns cross processes as Arrow IPC, everything else as pickles.

The encoder and decoder are checked directly (every kind of array, order kept, schemas
sent once, read in place), then two fabrics of one cluster over real sockets on 127.0.0.1
carry columns, lists and progress between them.
"""

import asyncio
from typing import Any

import pyarrow as pa
import pytest

from operators.progress import Product
from operators.runtime import Columns
from operators.runtime.cluster import ClusterSpec, connect
from operators.runtime.wire import COLUMNS, PICKLED, SCHEMA, STREAM, Decoder, Encoder
from tests.runtime.fabrics import free_ports

ARRAYS = {
    "struct": pa.StructArray.from_arrays(
        [pa.array([1, None, 3]), pa.array(["a", "b", None])], ["k", "v"]
    ),
    "struct, sliced": pa.StructArray.from_arrays(
        [pa.array(range(10)), pa.array([float(i) / 3 for i in range(10)])], ["k", "v"]
    ).slice(3, 4),
    "int64 with nulls": pa.array([1, None, -(2**63)], pa.int64()),
    "uint64": pa.array([2**64 - 1, 0], pa.uint64()),
    "nested": pa.array([{"a": [1, 2], "b": {"c": "x"}}, {"a": [], "b": None}]),
    "dictionary": pa.array(["x", "y", "x"]).dictionary_encode(),
    "struct of a dictionary": pa.StructArray.from_arrays(
        [pa.array(["p", "q", "p"]).dictionary_encode(), pa.array([1, 2, 3])], ["k", "v"]
    ),
}


def payloads(encoder: Encoder, items: list[Any]) -> list[bytes]:
    return [b"".join(bytes(piece) for piece in pieces) for pieces in encoder.payloads(items)]


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_columns_round_trip_as_arrow_frames(name: str) -> None:
    array = ARRAYS[name]
    batch = Columns(array)
    time = Product(3, 4)
    frames = payloads(Encoder(), [(7, 1, (time, batch))])
    decoder = Decoder()
    items = [item for frame in frames for item in decoder.items(frame)]
    assert len(items) == 1
    channel, worker, (got_time, got) = items[0]
    assert (channel, worker, got_time) == (7, 1, time)
    assert type(got) is Columns and got == batch and got.rows() == array.to_pylist()
    kinds = [frame[0] for frame in frames]
    assert kinds == ([STREAM] if "dictionary" in name else [SCHEMA, COLUMNS])


def test_the_order_of_the_queue_is_kept_and_schemas_go_once() -> None:
    encoder, decoder = Encoder(), Decoder()
    ints = Columns(pa.array([1, 2, 3]))
    strings = Columns(pa.array(["a"]))
    items: list[Any] = [
        (1, 0, (0, [1, 2])),  # a list batch
        (2, -1, (0, [((5, 0), 1)])),  # a progress broadcast
        (1, 0, (0, ints)),
        (1, 0, (1, ints.slice(1, 2))),
        (1, 1, (1, [3])),
        (1, 0, (2, strings)),
    ]
    frames = payloads(encoder, items)
    assert [frame[0] for frame in frames] == [
        PICKLED,
        SCHEMA,
        COLUMNS,
        COLUMNS,  # the same type again: no second schema
        PICKLED,
        SCHEMA,
        COLUMNS,
    ]
    decoded = [item for frame in frames for item in decoder.items(frame)]
    assert decoded == items
    # On the same connection, later batches of a known type carry no schema.
    later = payloads(encoder, [(1, 0, (3, ints)), (1, 0, (3, strings))])
    assert [frame[0] for frame in later] == [COLUMNS, COLUMNS]
    assert [item for frame in later for item in decoder.items(frame)] == [
        (1, 0, (3, ints)),
        (1, 0, (3, strings)),
    ]


def test_a_received_batch_is_read_in_place() -> None:
    array = pa.StructArray.from_arrays([pa.array(range(1000)), pa.array(range(1000))], ["a", "b"])
    schema, data = payloads(Encoder(), [(0, 0, (0, Columns(array)))])
    decoder = Decoder()
    decoder.items(schema)
    [(_, _, (_, got))] = decoder.items(data)
    frame = pa.py_buffer(data)
    values = got.array.field("a").buffers()[1]
    assert frame.address <= values.address < frame.address + frame.size  # no copy
    assert values.address % 8 == 0  # aligned for Arrow
    assert got.array.equals(array)


async def test_columns_cross_real_sockets_between_two_fabrics() -> None:
    ports = free_ports(2)
    peers = (("127.0.0.1", ports[0]), ("127.0.0.1", ports[1]))
    specs = [ClusterSpec(2, i, 1, peers, b"secret", 10.0) for i in range(2)]
    zero, one = await asyncio.gather(connect(specs[0]), connect(specs[1]))
    try:
        batches = [
            Columns(pa.array([{"k": i, "v": str(i)} for i in range(t, t + 50)])) for t in range(3)
        ]
        remote = zero.mailboxes(5)[1]  # worker 1 lives in the other process
        arrived = one.mailboxes(5)[1]
        for t, batch in enumerate(batches):
            remote.push((t, batch))
        remote.push((3, ["a list"]))
        zero.broadcast(9, 0, [("progress", 1)])
        while len(arrived.queue) < 4 or not one.mailboxes(9)[1].queue:
            await asyncio.sleep(0.01)
        got = list(arrived.queue)
        assert [t for t, _ in got] == [0, 1, 2, 3]
        assert [type(b).__name__ for _, b in got] == ["Columns"] * 3 + ["list"]
        assert [b for _, b in got[:3]] == batches and got[3][1] == ["a list"]
        assert list(one.mailboxes(9)[1].queue) == [(0, [("progress", 1)])]
        link = zero.links[1]
        # One schema, three batches of columns, one frame of pickles (the list and the
        # broadcast, queued in the same turn of the loop).
        assert link.frames_sent == 5
    finally:
        await asyncio.gather(zero.close(), one.close())


def test_a_frame_of_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="a frame of unknown kind 0x5a"):
        Decoder().items(b"Zzz")


def test_a_batch_too_large_for_one_frame_goes_as_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    import operators.runtime.wire as wire

    monkeypatch.setattr(wire, "LARGEST_BATCH", 10_000)  # bytes: 8 bytes a record here
    array = pa.array(range(5_000), pa.int64())
    frames = payloads(Encoder(), [(3, 1, (9, Columns(array))), (3, 1, (9, [1]))])
    assert [frame[0] for frame in frames] == [SCHEMA] + [COLUMNS] * 4 + [PICKLED]
    decoder = Decoder()
    items = [item for frame in frames for item in decoder.items(frame)]
    pieces = [batch for _, _, (time, batch) in items[:-1]]
    assert [len(piece) for piece in pieces] == [1250] * 4
    assert pa.concat_arrays([piece.array for piece in pieces]).equals(array)
    assert items[-1] == (3, 1, (9, [1]))
