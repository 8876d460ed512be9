"""Reading a link's frames: large ones straight into their own buffers.

A cluster link (:mod:`operators.runtime.cluster`) is length-prefixed frames, some of them
megabytes of Arrow IPC. asyncio's stream reader copies every byte three times on its way to
a frame: from the event loop's read buffer into a new ``bytes``, into the reader's buffer,
and out of it by ``readexactly``. Once the hello is done, :class:`FrameReader` takes the
connection over as a :class:`asyncio.BufferedProtocol`: small frames are cut out of a
scratch buffer as before, but a large frame gets a ``bytearray`` of its own size the moment
its length is known, and the socket reads the rest of it there directly. That buffer is the
frame handed on: the columns decoded from it point into it (:mod:`operators.runtime.wire`).

The stream writer keeps working: its flow control (``drain``) and its closing are the
stream protocol's, to which this one passes them on.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque

HEADER = struct.Struct("<I")
"""A frame's length (the payload follows)."""
SCRATCH = 256 * 1024
"""Bytes read at a time while no large frame is being filled."""
LARGE = 64 * 1024
"""A frame at least this long is read into a buffer of its own."""


class CorruptFrame(Exception):
    """A frame longer than the most a peer may send: the stream is corrupt."""


class FrameReader(asyncio.BufferedProtocol):
    """The frames arriving on one connection, in order (see the module docstring)."""

    def __init__(self, stream: asyncio.BaseProtocol, most: int) -> None:
        self._stream = stream
        self._most = most
        self._scratch = bytearray(SCRATCH)
        self._pending = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._end: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    @classmethod
    def take_over(
        cls, reader: asyncio.StreamReader, transport: asyncio.BaseTransport, most: int
    ) -> FrameReader:
        """Read ``transport``'s frames from now on, starting with what ``reader`` holds."""
        frames = cls(transport.get_protocol(), most)
        # asyncio's StreamReader offers no way to hand its buffered bytes to another
        # protocol: they are taken from its buffer (bytes the peer sent after its hello).
        buffered: bytearray = reader._buffer  # type: ignore[attr-defined]
        if buffered:
            frames._received(bytes(buffered))
            buffered.clear()
        transport.set_protocol(frames)
        error = reader.exception()
        if error is not None:
            frames._finish(error)
        elif reader.at_eof():
            frames._finish(asyncio.IncompleteReadError(b"", None))
        return frames

    async def next(self) -> bytes | bytearray:
        """The next frame, in order.

        Raises :class:`asyncio.IncompleteReadError` at the end of the stream, the
        connection's error if it broke, :class:`CorruptFrame` on an impossible length.
        """
        while not self._frames:
            if self._end is not None:
                raise self._end
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._frames.popleft()

    # ---------------------------------------------------------------- the protocol

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next bytes go: the large frame being filled, or the scratch buffer."""
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` arrived in the buffer :meth:`get_buffer` gave."""
        frame = self._frame
        if frame is None:
            self._received(memoryview(self._scratch)[:nbytes])
            return
        self._filled += nbytes
        if self._filled == len(frame):
            self._frame = None
            self._frames.append(frame)
            self._wake()

    def _received(self, data: bytes | memoryview) -> None:
        """Cut every complete frame out of what is pending; start a large one if it began."""
        pending = self._pending
        pending += data
        start = 0
        size = len(pending)
        while size - start >= HEADER.size:
            (length,) = HEADER.unpack_from(pending, start)
            if length > self._most:
                self._finish(CorruptFrame(f"a frame of {length} bytes: the stream is corrupt"))
                return
            begin = start + HEADER.size
            if size - begin >= length:
                self._frames.append(bytes(pending[begin : begin + length]))
                start = begin + length
                continue
            if length >= LARGE:
                frame = bytearray(length)
                frame[: size - begin] = pending[begin:]
                self._frame, self._filled = frame, size - begin
                start = size
            break
        del pending[:start]
        if self._frames:
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _finish(self, end: BaseException) -> None:
        if self._end is None:
            self._end = end
        self._wake()

    def eof_received(self) -> bool | None:
        """The peer closed its side: frames end here (a partial one is lost)."""
        partial = len(self._pending) + (self._filled if self._frame is not None else 0)
        self._finish(asyncio.IncompleteReadError(b"", partial or None))
        return self._stream.eof_received()  # type: ignore[attr-defined, no-any-return]

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone: its error (or the end) ends the frames."""
        self._finish(exc if exc is not None else asyncio.IncompleteReadError(b"", None))
        self._stream.connection_lost(exc)

    def pause_writing(self) -> None:
        """The writer's flow control is the stream protocol's."""
        self._stream.pause_writing()

    def resume_writing(self) -> None:
        """The writer's flow control is the stream protocol's."""
        self._stream.resume_writing()
