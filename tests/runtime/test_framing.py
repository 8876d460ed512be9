"""A link's frames, read by :class:`FrameReader`: whole, in order, however the bytes arrive.

The protocol is fed the way a transport feeds it (``get_buffer`` then ``buffer_updated``, as
many bytes as the chunking gives), with random frames and random chunkings; then it reads
real sockets on 127.0.0.1, taking a connection over from an asyncio stream reader that
already holds bytes.
"""

import asyncio
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.runtime.framing import LARGE, CorruptFrame, FrameReader


class Stream(asyncio.Protocol):
    """The stream protocol the reader passes the connection's end and flow control on to."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def eof_received(self) -> bool:
        self.calls.append("eof")
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.calls.append(("lost", exc))

    def pause_writing(self) -> None:
        self.calls.append("pause")

    def resume_writing(self) -> None:
        self.calls.append("resume")


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(p)) + p for p in payloads)


def feed(reader: FrameReader, data: bytes, chunks: list[int]) -> None:
    """Deliver ``data`` as a transport would, in reads of at most the given sizes."""
    position, turn = 0, 0
    while position < len(data):
        want = chunks[turn % len(chunks)]
        turn += 1
        buffer = reader.get_buffer(want)
        n = min(want, len(buffer), len(data) - position)
        buffer[:n] = data[position : position + n]
        reader.buffer_updated(n)
        position += n


def drain(reader: FrameReader) -> list[bytes]:
    out = []
    while reader._frames:
        out.append(bytes(reader._frames.popleft()))
    return out


PAYLOADS = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.integers(LARGE - 3, 3 * LARGE).map(lambda n: bytes([n % 251]) * n),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(PAYLOADS, st.lists(st.integers(1, 300_000), min_size=1, max_size=5))
def test_frames_come_out_whole_and_in_order(payloads: list[bytes], chunks: list[int]) -> None:
    reader = FrameReader(Stream(), most=1 << 30)
    feed(reader, framed(payloads), chunks)
    assert drain(reader) == payloads
    assert reader._frame is None and not reader._pending


def test_a_large_frame_is_read_into_its_own_buffer() -> None:
    reader = FrameReader(Stream(), most=1 << 30)
    payload = bytes(range(256)) * 1024  # 256 KiB
    data = framed([payload])
    feed(reader, data[:1000], [1000])  # the header and a start: a buffer of its size
    assert reader._frame is not None and len(reader._frame) == len(payload)
    buffer = reader.get_buffer(1 << 20)
    assert len(buffer) == len(payload) - (1000 - 4)  # the socket reads straight into it
    feed(reader, data[1000:], [1 << 20])
    [frame] = reader._frames
    assert type(frame) is bytearray and frame == payload


async def test_an_impossible_length_ends_the_frames_as_corrupt() -> None:
    reader = FrameReader(Stream(), most=100)
    feed(reader, framed([b"ok"]) + struct.pack("<I", 101) + b"x", [64])
    assert await reader.next() == b"ok"
    with pytest.raises(CorruptFrame, match="a frame of 101 bytes: the stream is corrupt"):
        await reader.next()


async def test_the_end_of_the_stream_and_flow_control_pass_on() -> None:
    stream = Stream()
    reader = FrameReader(stream, most=1 << 30)
    feed(reader, framed([b"a"]) + struct.pack("<I", 10) + b"part", [100])
    reader.pause_writing()
    reader.resume_writing()
    assert reader.eof_received() is True
    error = OSError("reset")
    reader.connection_lost(error)
    assert stream.calls == ["pause", "resume", "eof", ("lost", error)]
    assert await reader.next() == b"a"
    with pytest.raises(asyncio.IncompleteReadError) as ended:
        await reader.next()
    assert ended.value.expected == 8  # the partial frame (its length, 4 bytes) was lost


async def test_it_takes_a_real_connection_over_from_a_stream_reader() -> None:
    """Over 127.0.0.1: bytes already in the stream reader come first, then the rest."""
    small = [b"hello", b"", b"x" * 1000]
    large = [bytes([i]) * (LARGE * 4 + i) for i in range(3)]
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
    accepted = asyncio.get_running_loop().create_future()

    async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result((reader, writer))

    server = await asyncio.start_server(on_accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, client = await asyncio.open_connection("127.0.0.1", port)
    try:
        client.write(b"HELLO" + framed(small))
        await client.drain()
        reader, writer = await accepted
        assert await reader.readexactly(5) == b"HELLO"
        while not reader._buffer:  # type: ignore[attr-defined]  # let the frames arrive
            await asyncio.sleep(0.01)
        frames = FrameReader.take_over(reader, writer.transport, most=1 << 30)
        client.write(framed(large))
        await client.drain()
        got = [bytes(await frames.next()) for _ in range(len(small) + len(large))]
        assert got == small + large
        client.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(frames.next(), 5)
        writer.close()
        await writer.wait_closed()  # the stream protocol heard the end
    finally:
        client.close()
        server.close()
        await server.wait_closed()
