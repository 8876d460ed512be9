"""Capture and replay keep columns as columns: binary events of Arrow IPC, same boundaries.

A captured batch of :class:`Columns` is written as one binary frame (an Arrow IPC stream)
and replays as the same batch: the replayed stream carries the batches the capture saw, at
their times, with the same lengths, so per-time counts match. Lists are captured as JSON,
as before, and a log written before binary events existed still replays.
``data/capture-format-json.events`` was written by the engine of commit a114c96 (the
parent of this change): a stream of dicts at times 0, 1 and 2 (two batches each), closed.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import operators
from operators import OperatorBuilder, Worker
from operators.capture import (
    CorruptEventLog,
    FileEventReader,
    FileEventWriter,
    Messages,
    Progress,
    StreamEventReader,
    StreamEventWriter,
    decode_event,
    encode_event,
)
from operators.capture.event import COLUMNS_EVENT, EventFormatError
from operators.progress import Product
from operators.runtime import Columns
from tests.runtime.fabrics import Clusters, Layout

OLD_LOG = Path(__file__).resolve().parent / "data" / "capture-format-json.events"


def batches_of(stream: Any, seen: list[Any]) -> Any:
    """Note every batch as ``(time, kind, length, rows)``, columns left as they are."""
    builder = OperatorBuilder(stream.scope, "Look")
    port = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor() -> Any:
        def logic() -> None:
            for time, batch in port.containers():
                rows = batch if isinstance(batch, list) else batch.rows()
                seen.append((time, type(batch).__name__, len(batch), rows))
                output.forward(time, batch)

        return logic

    builder.build_reactive(constructor)
    return result


async def replay_files(worker: Worker, paths: list[str]) -> list[Any]:
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        replayed = scope.replay_into([FileEventReader(p, poll_interval=0.001) for p in paths])
        return batches_of(replayed, seen).probe()

    probe = worker.dataflow(build)
    await worker.step_while(lambda: not probe.done())
    return seen


def test_a_log_written_before_binary_events_still_replays() -> None:
    [seen] = operators.run(lambda worker: replay_files(worker, [str(OLD_LOG)]))
    assert seen == [
        (t, "list", n, rows)
        for t in range(3)
        for n, rows in [
            (3, [{"key": f"k{i % 2}", "value": t * 10 + i} for i in range(3)]),
            (1, [{"key": "z", "value": -t}]),
        ]
    ]


def columns_at(time: int, worker: int) -> Columns:
    keys = [f"w{worker}-{i}" for i in range(time + 2)]
    values = [time * 100 + i for i in range(time + 2)]
    return Columns.of(pa.record_batch({"key": keys, "value": values}))


async def capture_to_files(worker: Worker, paths: list[str]) -> list[Any]:
    """Each worker captures its own stream to its own file: columns and lists, 3 times."""
    writer = FileEventWriter(paths[worker.index])
    sent: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream.capture_into(writer)
        return handle, stream.probe()

    handle, probe = worker.dataflow(build)
    for t in range(3):
        batch = columns_at(t, worker.index)
        tail = [{"key": f"w{worker.index}-list", "value": -t}]
        handle.send_batch(batch)
        handle.send_batch(tail)
        handle.send_batch(batch.slice(1, 1))  # a slice is captured as what it holds
        sent.extend(
            [
                (t, "Columns", len(batch), batch.rows()),
                (t, "list", 1, tail),
                (t, "Columns", 1, batch.rows()[1:2]),
            ]
        )
        handle.advance_to(t + 1)
        await worker.step_while(lambda: probe.less_than(handle.time))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    writer.close()
    return sent


@pytest.mark.parametrize(
    ("capture", "replay"),
    [
        pytest.param(Layout(1, 2), Layout(1, 1), id="1x2-to-1x1"),
        pytest.param(Layout(3, 1), Layout(1, 2), id="3x1-to-1x2"),
        pytest.param(Layout(1, 3), Layout(2, 1), id="1x3-to-2x1"),
    ],
)
async def test_columns_are_captured_as_arrow_and_replayed_as_the_same_batches(
    capture: Layout, replay: Layout, clusters: Clusters, tmp_path: Path
) -> None:
    paths = [str(tmp_path / f"worker-{i}.events") for i in range(capture.peers)]
    sent = await clusters.run(capture, capture_to_files, paths)
    for path in paths:  # batches of columns are binary frames, lists JSON ones
        data = Path(path).read_bytes()
        kinds, position = [], 0
        while position < len(data):
            (length,) = struct.unpack_from("<I", data, position)
            kinds.append(data[position + 4])
            position += 4 + length
        assert kinds.count(COLUMNS_EVENT) == 6 and kinds.count(ord("{")) == len(kinds) - 6
    replayed = await clusters.run(replay, replay_files, paths)
    got = sorted((entry for seen in replayed for entry in seen), key=repr)
    expected = sorted((entry for per_worker in sent for entry in per_worker), key=repr)
    assert got == expected


def test_a_binary_event_round_trips_any_array_and_time() -> None:
    arrays = [
        pa.array([{"a": [1, 2], "b": {"c": None}}, {"a": [], "b": {"c": "x"}}]),
        pa.array(["x", "y", "x"]).dictionary_encode(),
        pa.array([2**64 - 1, 0], pa.uint64()),
        pa.array(range(10)).slice(3, 2),
    ]
    for array in arrays:
        for time in (0, Product(2, 3), Product(Product(1, 0), 4)):
            event = decode_event(encode_event(Messages(time, Columns(array))))
            assert isinstance(event, Messages) and event.time == time
            assert isinstance(event.records, Columns) and event.records.array.equals(array)
    # Lists and progress are JSON, as before.
    assert (
        encode_event(Messages(1, [{"a": 1}])) == b'{"type":"messages","time":1,"records":[{"a":1}]}'
    )
    assert encode_event(Progress([(1, -1)])) == b'{"type":"progress","changes":[[1,-1]]}'


def test_a_corrupt_binary_event_is_refused_naming_why() -> None:
    good = encode_event(Messages(5, Columns(pa.array([1, 2]))))
    with pytest.raises(EventFormatError, match="too short for its header"):
        decode_event(b"\0\1")
    with pytest.raises(EventFormatError, match="too short for its time"):
        decode_event(b"\0" + struct.pack("<I", 99) + b"1")
    with pytest.raises(EventFormatError, match="invalid Arrow IPC in a binary event"):
        decode_event(good[: len(good) // 2])  # cut short in its IPC stream
    with pytest.raises(EventFormatError, match="not a time: -1"):
        decode_event(b"\0" + struct.pack("<I", 2) + b"-1" + good[7:])


def test_a_corrupt_binary_frame_in_a_file_names_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "log.events"
    writer = FileEventWriter(path)
    writer.push(Messages(0, Columns(pa.array([1, 2, 3]))))
    writer.flush()
    good_length = path.stat().st_size
    with open(path, "ab") as file:
        file.write(struct.pack("<I", 9) + b"\0" + struct.pack("<I", 1) + b"0" + b"\0\0\0")
    writer.close()
    reader = FileEventReader(path)
    first = reader.next()
    assert isinstance(first, Messages) and first.records == Columns(pa.array([1, 2, 3]))
    with pytest.raises(
        CorruptEventLog, match=f"corrupt frame at offset {good_length}: invalid Arrow"
    ):
        reader.next()


async def test_columns_over_tcp_arrive_as_columns() -> None:
    """A capture over a real socket on 127.0.0.1 (one process: the test feeds it)."""
    received: asyncio.Queue[StreamEventReader] = asyncio.Queue()
    accepted: list[asyncio.StreamWriter] = []

    async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await received.put(StreamEventReader(reader, "tcp"))

    server = await asyncio.start_server(on_accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        events = StreamEventWriter(writer)
        batch = Columns(pa.array([{"k": i} for i in range(1000)]))
        events.push(Messages(Product(0, 1), batch))
        events.push(Progress([(Product(0, 1), -1)]))
        reader = await received.get()
        woken = asyncio.Event()
        reader.attach(woken.set)
        got: list[Any] = []
        while len(got) < 2:
            await asyncio.wait_for(woken.wait(), 5)
            woken.clear()
            event = reader.next()
            while event is not None:
                got.append(event)
                event = reader.next()
        assert got == [Messages(Product(0, 1), batch), Progress([(Product(0, 1), -1)])]
        events.close()
        await writer.wait_closed()
        await reader.close()
    finally:
        for end in accepted:
            end.close()
            await end.wait_closed()
        server.close()
        await server.wait_closed()
