"""Where captured events go and where replayed events come from.

A *pusher* takes events (``push``) and may buffer them until ``flush``; a *reader* hands
them out (``next``), returning ``None`` when nothing is available *yet*. Three kinds are
provided: in memory (:class:`EventLink`), files (:class:`FileEventWriter`,
:class:`FileEventReader`), and asyncio streams such as TCP (:class:`StreamEventWriter`,
:class:`StreamEventReader`). A reader can be told how to wake the replay that reads it
(``attach``); readers that cannot notify (files) are polled.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from operators.capture.event import (
    FRAME_HEADER,
    MAX_FRAME,
    Event,
    EventFormatError,
    decode_event,
    frame,
)


class EventPusher(Protocol):
    """Takes the events of a captured stream, in order."""

    def push(self, event: Event) -> None:
        """Record one event."""
        ...

    def flush(self) -> None:
        """Make every pushed event visible to readers."""
        ...


class EventReader(Protocol):
    """Hands out the events of a captured stream, in order, without blocking."""

    poll_interval: float | None
    """Seconds between polls if the reader cannot wake its replay; ``None`` if it can."""

    def next(self) -> Event | None:
        """The next event, or ``None`` if there is none yet."""
        ...

    def attach(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` whenever new events may be available (if the reader can)."""
        ...


class CorruptEventLog(ValueError):
    """A frame in an event file or stream is not valid; ``offset`` is where it starts."""

    def __init__(self, source: str, offset: int, reason: str) -> None:
        self.source = source
        self.offset = offset
        self.reason = reason
        super().__init__(f"{source}: corrupt frame at offset {offset}: {reason}")

    def __reduce__(self) -> tuple[type[CorruptEventLog], tuple[str, int, str]]:
        # Pickled as its fields, not its message (a cluster process sends it on).
        return (type(self), (self.source, self.offset, self.reason))


class EventLink:
    """An in-memory captured stream: push on one side, read with any number of readers.

    >>> from operators.capture.event import Progress
    >>> link = EventLink()
    >>> link.push(Progress([(0, -1)]))
    >>> reader = link.reader()
    >>> reader.next(), reader.next()
    (Progress(changes=[(0, -1)]), None)
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._wakes: list[Callable[[], None]] = []

    def push(self, event: Event) -> None:
        """Append an event."""
        self.events.append(event)

    def flush(self) -> None:
        """Wake the readers that asked to be told."""
        for wake in self._wakes:
            wake()

    def reader(self) -> LinkReader:
        """A reader starting at the first event."""
        return LinkReader(self)

    def _attach(self, wake: Callable[[], None]) -> None:
        self._wakes.append(wake)


class LinkReader:
    """Reads an :class:`EventLink` from the start."""

    poll_interval: float | None = None

    def __init__(self, link: EventLink) -> None:
        self._link = link
        self._position = 0

    def next(self) -> Event | None:
        """The next event, or ``None``."""
        events = self._link.events
        if self._position < len(events):
            event = events[self._position]
            self._position += 1
            return event
        return None

    def attach(self, wake: Callable[[], None]) -> None:
        """Be woken when the link is flushed."""
        self._link._attach(wake)


class FileEventWriter:
    """Appends frames to a file; ``flush`` writes them through so readers can see them."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file = open(self.path, "ab")  # noqa: SIM115 - owned until close()
        self._buffer: list[bytes] = []

    def push(self, event: Event) -> None:
        """Buffer one frame."""
        self._buffer.append(frame(event))

    def flush(self) -> None:
        """Write the buffered frames and flush them to the operating system."""
        if self._buffer:
            self._file.write(b"".join(self._buffer))
            self._buffer.clear()
            self._file.flush()

    def close(self) -> None:
        """Flush and close the file."""
        self.flush()
        self._file.close()


def _split_frames(
    data: bytes | bytearray, start: int, source: str, base: int
) -> tuple[list[Event], int, CorruptEventLog | None]:
    """Decode the complete frames in ``data[start:]``.

    Returns the events, the offset just past the last complete frame, and the corruption
    that stopped decoding (if any), so callers hand out the good events before raising. A
    partial last frame is left for later. ``base`` is the offset of ``data[0]`` in the whole
    stream, for error messages.
    """
    events: list[Event] = []
    position = start
    size = len(data)
    header = FRAME_HEADER.size
    while size - position >= header:
        (length,) = FRAME_HEADER.unpack_from(data, position)
        if length > MAX_FRAME:
            reason = f"frame length {length} is too large"
            return events, position, CorruptEventLog(source, base + position, reason)
        end = position + header + length
        if end > size:
            break
        try:
            events.append(decode_event(bytes(data[position + header : end])))
        except EventFormatError as error:
            return events, position, CorruptEventLog(source, base + position, str(error))
        position = end
    return events, position, None


class FileEventReader:
    """Reads frames from a file that may still be being written.

    A partial last frame means "nothing yet", not an error; a corrupt frame raises
    :class:`CorruptEventLog` naming its offset. A file that does not exist yet reads as
    empty.
    """

    def __init__(self, path: str | os.PathLike[str], poll_interval: float = 0.01) -> None:
        self.path = Path(path)
        self.poll_interval: float | None = poll_interval
        self._offset = 0
        self._pending: deque[Event] = deque()
        self._error: CorruptEventLog | None = None

    def next(self) -> Event | None:
        """The next complete event, or ``None``; corruption raises once the good events are out."""
        if not self._pending and self._error is None:
            self._read()
        if self._pending:
            return self._pending.popleft()
        if self._error is not None:
            raise self._error
        return None

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as file:
                file.seek(self._offset)
                data = file.read()
        except FileNotFoundError:
            return
        events, used, error = _split_frames(data, 0, str(self.path), self._offset)
        self._offset += used
        self._pending.extend(events)
        self._error = error

    def attach(self, wake: Callable[[], None]) -> None:
        """Files cannot notify: the replay polls every ``poll_interval`` seconds."""


class StreamEventWriter:
    """Writes frames to an asyncio stream (a TCP connection, say)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def push(self, event: Event) -> None:
        """Queue one frame on the transport."""
        self._writer.write(frame(event))

    def flush(self) -> None:
        """Frames are handed to the transport as they are pushed: nothing to do."""

    def close(self) -> None:
        """Close the stream (the reader sees the end)."""
        self._writer.close()


class StreamEventReader:
    """Reads frames from an asyncio stream as they arrive, waking its replay on each.

    A task reads the stream in the background from the moment a replay attaches; it ends
    at the end of the stream, on a corrupt frame (raised from the next ``next``), or when
    :meth:`close` is called.
    """

    poll_interval: float | None = None

    def __init__(self, reader: asyncio.StreamReader, name: str = "stream") -> None:
        self._reader = reader
        self._name = name
        self._events: deque[Event] = deque()
        self._error: Exception | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: Callable[[], None] | None = None

    def attach(self, wake: Callable[[], None]) -> None:
        """Start reading, and call ``wake`` when events arrive."""
        self._wake = wake
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        buffer = bytearray()
        consumed = 0
        try:
            while True:
                chunk = await self._reader.read(1 << 16)
                if not chunk:
                    return
                buffer += chunk
                events, used, error = _split_frames(buffer, 0, self._name, consumed)
                if used:
                    del buffer[:used]
                    consumed += used
                self._events.extend(events)
                if error is not None:
                    self._error = error
                if (events or error is not None) and self._wake is not None:
                    self._wake()
                if error is not None:
                    return
        except (OSError, EOFError, asyncio.IncompleteReadError) as error:
            # A broken connection is reported through ``next`` like corruption is, so the
            # replay that reads this stream fails instead of waiting forever.
            self._error = error
            if self._wake is not None:
                self._wake()

    def next(self) -> Event | None:
        """The next event that has arrived, or ``None``."""
        if self._events:
            return self._events.popleft()
        if self._error is not None:
            raise self._error
        return None

    async def close(self) -> None:
        """Stop reading."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
