"""Capture events on the wire and on disk: encoding, framing, and the readers and writers.

Exact bytes and offsets: a frame is a 4-byte little-endian length and that much JSON; a
reader hands out complete frames, treats a partial last frame as "nothing yet", and names
the byte offset of a corrupt frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from operators.capture import (
    CorruptEventLog,
    Event,
    EventFormatError,
    EventLink,
    FileEventReader,
    FileEventWriter,
    Messages,
    Progress,
    StreamEventReader,
    decode_event,
    encode_event,
    frame,
)
from operators.capture.event import MAX_FRAME
from operators.progress import Product

EVENTS: list[Event] = [
    Messages(0, ["a"]),
    Progress([(0, -1), (1, 1)]),
    Messages(1, ["b", {"k": [1, 2.5, None, True]}, "ü"]),
    Progress([(1, -1)]),
]
"""The history of docs/events.md (with richer records at time 1)."""


def framed(events: list[Event]) -> bytes:
    return b"".join(frame(e) for e in events)


def drain(reader: Any) -> list[Event]:
    """Every event the reader has now (until it says ``None``)."""
    events: list[Event] = []
    while (event := reader.next()) is not None:
        events.append(event)
    return events


# ---------------------------------------------------------------------- encoding

TIMES: list[Hashable] = [
    0,
    7,
    2**64 - 1,
    Product(0, 0),
    Product(3, 1),
    Product(Product(1, 2), 3),
    Product(0, Product(4, 5)),
]


@pytest.mark.parametrize("time", TIMES, ids=repr)
def test_events_round_trip_with_int_and_product_times(time: Hashable) -> None:
    for event in [
        Messages(time, [1, "two", [3, [4]], {"five": 5}, None, 6.5, False]),
        Messages(time, []),
        Progress([(time, -1)]),
        Progress([(time, 1), (time, -1), (time, 3)]),
        Progress([]),
    ]:
        decoded = decode_event(encode_event(event))
        assert decoded == event
        assert type(decoded.time if isinstance(decoded, Messages) else time) is type(time)
        if isinstance(decoded, Progress):
            assert all(type(t) is type(time) for t, _ in decoded.changes)


def test_encoding_is_the_documented_json() -> None:
    assert encode_event(Messages(0, ["a"])) == b'{"type":"messages","time":0,"records":["a"]}'
    assert (
        encode_event(Progress([(Product(1, 2), -1), (Product(Product(0, 1), 4), 1)]))
        == b'{"type":"progress","changes":[[[1,2],-1],[[[0,1],4],1]]}'
    )
    # Tuples in records are JSON arrays: they come back as lists.
    assert decode_event(encode_event(Messages(3, [(1, 2)]))) == Messages(3, [[1, 2]])
    assert decode_event(b'{"type": "progress", "changes": [[0, -1], [3, 1]]}') == Progress(
        [(0, -1), (3, 1)]
    )
    assert decode_event(b'{"records": [], "time": [0, [1, 2]], "type": "messages"}') == (
        Messages(Product(0, Product(1, 2)), [])
    )


def test_a_frame_is_a_little_endian_length_then_the_json() -> None:
    event = Messages(Product(1, 2), ["a"])
    payload = encode_event(event)
    data = frame(event)
    assert data == struct.pack("<I", len(payload)) + payload
    assert data[:4] == len(payload).to_bytes(4, "little")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{nope",
        b'{"type": "messages", "time": 0, "records": ["a"]',
        b"[]",
        b"3",
        b'"messages"',
        b"null",
        b"{}",
        b'{"type": "other"}',
        b'{"type": 1}',
        b'{"type": "messages", "time": 0}',
        b'{"type": "messages", "records": []}',
        b'{"type": "messages", "time": 0, "records": "ab"}',
        b'{"type": "messages", "time": 0, "records": {"a": 1}}',
        b'{"type": "messages", "time": -1, "records": []}',
        b'{"type": "messages", "time": 1.5, "records": []}',
        b'{"type": "messages", "time": true, "records": []}',
        b'{"type": "messages", "time": "1", "records": []}',
        b'{"type": "messages", "time": null, "records": []}',
        b'{"type": "messages", "time": [], "records": []}',
        b'{"type": "messages", "time": [1], "records": []}',
        b'{"type": "messages", "time": [1, 2, 3], "records": []}',
        b'{"type": "messages", "time": [1, [2]], "records": []}',
        b'{"type": "messages", "time": [1, -2], "records": []}',
        b'{"type": "messages", "time": 18446744073709551616, "records": []}',
        b'{"type": "progress"}',
        b'{"type": "progress", "changes": {"0": 1}}',
        b'{"type": "progress", "changes": [0, 1]}',
        b'{"type": "progress", "changes": [[0]]}',
        b'{"type": "progress", "changes": [[0, 1, 2]]}',
        b'{"type": "progress", "changes": [[0, 1.0]]}',
        b'{"type": "progress", "changes": [[0, true]]}',
        b'{"type": "progress", "changes": [[0, "1"]]}',
        b'{"type": "progress", "changes": [[-1, 1]]}',
        b'{"type": "progress", "changes": [[[0, 0, 0], 1]]}',
        b'{"type": "progress", "changes": [[0, -1], [3]]}',
    ],
)
def test_bad_shapes_are_event_format_errors(data: bytes) -> None:
    with pytest.raises(EventFormatError):
        decode_event(data)


@pytest.mark.parametrize("time", ["1", 1.0, True, None, (1, 2), [1, 2]], ids=repr)
def test_encoding_a_time_that_is_not_one_fails(time: Any) -> None:
    with pytest.raises(TypeError):
        encode_event(Messages(time, []))
    with pytest.raises(TypeError):
        encode_event(Progress([(time, 1)]))


# ---------------------------------------------------------------------- files


def test_a_file_that_does_not_exist_yet_reads_as_nothing(tmp_path: Path) -> None:
    path = tmp_path / "later.events"
    reader = FileEventReader(path)
    assert reader.next() is None
    assert reader.next() is None
    assert not path.exists()
    path.write_bytes(framed(EVENTS[:2]))
    assert drain(reader) == EVENTS[:2]


def test_file_writer_makes_events_visible_on_flush_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "s.events"
    writer = FileEventWriter(path)
    reader = FileEventReader(path)
    writer.push(EVENTS[0])
    writer.push(EVENTS[1])
    assert reader.next() is None  # buffered until flush
    writer.flush()
    assert drain(reader) == EVENTS[:2]
    writer.push(EVENTS[2])
    writer.close()  # close flushes
    assert drain(reader) == [EVENTS[2]]
    again = FileEventWriter(path)  # a second writer appends
    again.push(EVENTS[3])
    again.close()
    assert drain(reader) == [EVENTS[3]]
    assert path.read_bytes() == framed(EVENTS)
    assert drain(FileEventReader(path)) == EVENTS


def test_every_truncation_yields_the_complete_events_then_the_rest(tmp_path: Path) -> None:
    # Cut the file at every byte: a reader sees exactly the frames complete before the cut,
    # then None (repeatedly); once the rest is appended, the remaining events.
    data = framed(EVENTS)
    ends = []
    position = 0
    for event in EVENTS:
        position += len(frame(event))
        ends.append(position)
    path = tmp_path / "cut.events"
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        reader = FileEventReader(path)
        complete = sum(1 for end in ends if end <= cut)
        assert drain(reader) == EVENTS[:complete], cut
        assert reader.next() is None
        with open(path, "ab") as file:
            file.write(data[cut:])
        assert drain(reader) == EVENTS[complete:], cut
        assert reader.next() is None


def test_a_frame_written_a_byte_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "slow.events"
    reader = FileEventReader(path)
    got: list[Event] = []
    for byte in framed(EVENTS):
        with open(path, "ab") as file:
            file.write(bytes([byte]))
        got.extend(drain(reader))
    assert got == EVENTS


def header(length: int) -> bytes:
    return struct.pack("<I", length)


CORRUPT = {
    "bad JSON": header(5) + b"{nope",
    "not an object": header(2) + b"[]",
    "wrong shape": header(31) + b'{"type":"messages","time":"0"}' + b" ",
    "unknown type": header(15) + b'{"type":"nope"}',
    "absurd length": header(MAX_FRAME + 1),
    "absurd length with bytes": header(0xFFFFFFFF) + b"{}",
}


@pytest.mark.parametrize("corrupt", list(CORRUPT.values()), ids=list(CORRUPT))
def test_a_corrupt_frame_names_its_offset(tmp_path: Path, corrupt: bytes) -> None:
    path = tmp_path / "bad.events"
    good = framed(EVENTS[:2])
    path.write_bytes(good)
    reader = FileEventReader(path)
    assert drain(reader) == EVENTS[:2]
    with open(path, "ab") as file:
        file.write(corrupt + frame(EVENTS[2]))
    with pytest.raises(CorruptEventLog) as raised:
        reader.next()
    error = raised.value
    assert error.offset == len(good)
    assert str(error).startswith(f"{path}: corrupt frame at offset {len(good)}: ")
    assert error.source == str(path)
    assert isinstance(error, ValueError)
    # It stays corrupt: the reader does not skip the bad frame.
    with pytest.raises(CorruptEventLog) as again:
        reader.next()
    assert again.value.offset == len(good)


def test_an_absurd_length_is_corruption_at_once_but_the_maximum_is_not(tmp_path: Path) -> None:
    path = tmp_path / "big.events"
    path.write_bytes(frame(EVENTS[0]) + header(MAX_FRAME) + b"{")
    reader = FileEventReader(path)
    assert drain(reader) == [EVENTS[0]]  # a 256 MiB frame, still being written
    path.write_bytes(frame(EVENTS[0]) + header(MAX_FRAME + 1))
    reader = FileEventReader(path)
    assert reader.next() == EVENTS[0]  # the good frame before the corruption comes out first
    with pytest.raises(CorruptEventLog, match=f"offset {len(frame(EVENTS[0]))}: ") as raised:
        reader.next()
    assert "too large" in raised.value.reason


def test_a_corrupt_first_frame_is_at_offset_0(tmp_path: Path) -> None:
    path = tmp_path / "bad.events"
    path.write_bytes(header(1) + b"x")
    with pytest.raises(CorruptEventLog, match="corrupt frame at offset 0: ") as raised:
        FileEventReader(path).next()
    assert raised.value.offset == 0


def test_events_before_a_corrupt_frame_in_the_same_read_are_handed_out_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.events"
    good = framed(EVENTS[:2])
    path.write_bytes(good + CORRUPT["bad JSON"])
    reader = FileEventReader(path)
    assert reader.next() == EVENTS[0]
    assert reader.next() == EVENTS[1]
    with pytest.raises(CorruptEventLog) as raised:
        reader.next()
    assert raised.value.offset == len(good)


def test_file_reader_polls() -> None:
    assert FileEventReader("x", poll_interval=0.25).poll_interval == 0.25
    assert FileEventReader("x").poll_interval == 0.01
    FileEventReader("x").attach(lambda: None)  # cannot notify: a no-op


# ---------------------------------------------------------------------- in memory


def test_link_readers_are_independent_and_flush_wakes_them() -> None:
    link = EventLink()
    first, second = link.reader(), link.reader()
    woken: list[str] = []
    first.attach(lambda: woken.append("first"))
    second.attach(lambda: woken.append("second"))
    assert first.poll_interval is None
    link.push(EVENTS[0])
    assert woken == []
    assert drain(first) == [EVENTS[0]]
    link.push(EVENTS[1])
    link.flush()
    assert woken == ["first", "second"]
    assert drain(first) == [EVENTS[1]]
    assert drain(second) == EVENTS[:2]
    assert drain(link.reader()) == EVENTS[:2]


# ---------------------------------------------------------------------- asyncio streams


async def read_stream(chunks: list[bytes], name: str = "conn") -> tuple[list[Event], Any, int]:
    """Feed ``chunks`` (then EOF) to a StreamEventReader; return its events, error, wakes."""
    stream = asyncio.StreamReader()
    reader = StreamEventReader(stream, name=name)
    wakes = [0]

    def wake() -> None:
        wakes[0] += 1

    assert reader.next() is None
    reader.attach(wake)
    events: list[Event] = []
    error: CorruptEventLog | None = None

    def take() -> None:
        # Collect one event at a time, so the good events before a corrupt one are kept.
        while (event := reader.next()) is not None:
            events.append(event)

    try:
        for chunk in chunks:
            stream.feed_data(chunk)
            for _ in range(3):
                await asyncio.sleep(0)
            take()
        stream.feed_eof()
        for _ in range(3):
            await asyncio.sleep(0)
        take()
    except CorruptEventLog as raised:
        error = raised
    finally:
        await reader.close()
    return events, error, wakes[0]


async def test_stream_reader_reassembles_frames_split_anywhere() -> None:
    data = framed(EVENTS)
    events, error, wakes = await read_stream([bytes([b]) for b in data])
    assert (events, error) == (EVENTS, None)
    assert wakes == len(EVENTS)  # one wake per chunk that completed a frame
    events, error, wakes = await read_stream([data[:7], data[7:60], data[60:]])
    assert (events, error) == (EVENTS, None)


async def test_stream_reader_names_the_offset_of_a_corrupt_frame() -> None:
    good = framed(EVENTS[:3])
    events, error, wakes = await read_stream([good[:5], good[5:], CORRUPT["bad JSON"]])
    assert events == EVENTS[:3]
    assert error is not None
    assert error.offset == len(good)
    assert str(error).startswith(f"conn: corrupt frame at offset {len(good)}: invalid JSON")
    assert wakes == 2  # one for the chunk that completed the frames, one for the error


async def test_stream_reader_corrupt_frame_split_across_chunks() -> None:
    good = frame(EVENTS[0])
    bad = CORRUPT["absurd length"]
    events, error, _ = await read_stream([good + bad[:2], bad[2:]])
    assert events == [EVENTS[0]]
    assert error is not None and error.offset == len(good)


async def test_stream_reader_hands_out_events_before_a_corrupt_frame_in_the_same_chunk() -> None:
    good = framed(EVENTS[:2])
    events, error, _ = await read_stream([good + CORRUPT["bad JSON"]])
    assert events == EVENTS[:2]
    assert error is not None and error.offset == len(good)


async def test_stream_reader_close_is_idempotent_and_safe_before_attach() -> None:
    stream = asyncio.StreamReader()
    reader = StreamEventReader(stream)
    await reader.close()  # never attached: nothing to stop
    reader.attach(lambda: None)
    await reader.close()
    await reader.close()
    stream.feed_data(frame(EVENTS[0]))
    await asyncio.sleep(0)
    assert reader.next() is None  # stopped: nothing more is read


async def test_stream_reader_reports_a_read_error_to_its_replay() -> None:
    stream = asyncio.StreamReader()
    reader = StreamEventReader(stream)
    wakes: list[int] = []
    reader.attach(lambda: wakes.append(1))
    try:
        stream.feed_data(frame(EVENTS[0]))
        await asyncio.sleep(0)
        stream.set_exception(ConnectionResetError("reset by peer"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert reader.next() == EVENTS[0]
        assert len(wakes) == 2  # the data, then the error
        with pytest.raises(ConnectionResetError):
            reader.next()
    finally:
        with contextlib.suppress(ConnectionResetError):
            await reader.close()


def test_a_negative_time_cannot_be_encoded() -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_event(Messages(-1, ["a"]))
