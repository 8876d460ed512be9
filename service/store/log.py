"""An append-only log of checksummed frames in segment files: an input's durable history.

A log is a directory of *segments*, ``<first position>.log`` (20 digits), each a run of
frames; a frame's *position* is its number in the whole log (0, 1, 2, ...). A frame is a
16-byte header, then its payload::

    magic (u32, "FRON")  length (u32)  crc32(payload) (u32)  crc32(the 12 bytes before) (u32)

all little-endian. Appends go to the last segment with one ``write`` per group of frames;
:meth:`Log.sync` makes them durable (``fdatasync``; the directory too when a segment was
created). A new segment starts once the last one holds ``segment_bytes``.

Opening a log checks every frame. A crash mid-append can leave the last frames torn: a
header cut short, a payload cut short, a last frame whose checksum fails, or bytes never
written (zeros). Such a tail was never acknowledged (a frame is acknowledged only once
synced), so it is cut off, and the bytes cut are logged. Any other bad frame, anywhere else,
is corruption: opening refuses with :class:`CorruptLog`, naming the file and the offset, and
changes nothing.

What was synced is recorded beside the segments, in ``synced`` (:class:`SyncRecord`: the
first position kept, and the last synced segment's length and frame count), rewritten after
every sync. So a torn tail can only be what was written after the last sync: a segment that
is shorter than it was when synced, missing, or damaged within its synced bytes refuses to
open. The record is written without a sync of its own (none on the acknowledgement's path):
after a power loss it may say less than was synced, never more, so it can only make the
check weaker for the last writes, never refuse a good log.

The log never interprets payloads. Whole segments below a position are deleted by
:meth:`Log.truncate_before` once nothing needs their frames.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from service.store.checksum import crc32
from service.store.retire import Retiring

log = logging.getLogger("frontier.store")

MAGIC = 0x4E4F5246  # b"FRON" read as a little-endian u32
_HEAD = struct.Struct("<III")
_CHECK = struct.Struct("<I")
HEADER_BYTES = _HEAD.size + _CHECK.size
_MOST_PIECES = 512
"""The most pieces one ``writev`` is given (the system's limit is 1024 or more)."""
MAX_PAYLOAD = 1 << 30
"""The largest payload a frame may carry; a header claiming more is corrupt."""
SEGMENT_BYTES = 64 * 1024 * 1024
RECORD = "synced"
"""The file beside the segments that says what was synced."""
_RECORD = struct.Struct("<4sQQQQ")
_RECORD_MAGIC = b"FSYN"


class StoreError(Exception):
    """The data directory cannot be used as it is: the server refuses to start."""


class CorruptLog(StoreError):
    """A log holds a bad frame that is not a torn tail: the store refuses to open it."""

    def __init__(self, path: Path, offset: int, why: str) -> None:
        super().__init__(f"{path}: corrupt frame at byte offset {offset}: {why}")
        self.path = path
        self.offset = offset
        self.why = why


class SyncRecord(NamedTuple):
    """What a log had synced: what every restart must find again."""

    first: int
    """The first position kept (the log was truncated below it)."""
    segment: int
    """The first position of the segment synced last."""
    length: int
    """How many bytes of that segment were synced."""
    position: int
    """The position of the first frame not synced (every frame before it was)."""

    def encode(self) -> bytes:
        """The record's bytes: its fields and their checksum."""
        body = _RECORD.pack(_RECORD_MAGIC, *self)
        return body + _CHECK.pack(crc32(body))

    @staticmethod
    def decode(data: bytes) -> SyncRecord | None:
        """The record in ``data``, or ``None`` if it holds none (a torn write, say)."""
        size = _RECORD.size + _CHECK.size
        if len(data) < size:
            return None
        (check,) = _CHECK.unpack_from(data, _RECORD.size)
        if crc32(data[: _RECORD.size]) != check:
            return None
        magic, *fields = _RECORD.unpack_from(data)
        return SyncRecord(*fields) if magic == _RECORD_MAGIC else None


Payload = bytes | Sequence[bytes]
"""A frame's payload: its bytes, or its parts in order (written without joining them)."""


def frame_parts(payload: Payload) -> list[bytes]:
    """One frame as the pieces to write: its header, then the payload's parts.

    A payload given in parts (an operation's header, then a batch's bytes as they came) is
    checksummed part by part and written with one ``writev``: never copied into one buffer.
    """
    parts = [payload] if isinstance(payload, bytes) else list(payload)
    check = 0
    for part in parts:
        check = crc32(part, check)
    head = _HEAD.pack(MAGIC, sum(map(len, parts)), check)
    return [head + _CHECK.pack(crc32(head)), *parts]


def encode_frame(payload: Payload) -> bytes:
    """One frame: header and payload."""
    return b"".join(frame_parts(payload))


@dataclass(slots=True)
class _Segment:
    path: Path
    first: int
    """The position of its first frame."""
    frames: int
    size: int
    head: int = 0
    """The bytes of its first frame, which do not count toward the size at which it rolls:
    that frame is the checkpoint heading it (the input's state, its open transactions'
    batches included), and one larger than a segment would otherwise make every append
    roll again and write the whole state again."""


def _segment_name(first: int) -> str:
    return f"{first:020d}.log"


def _scan(path: Path, data: bytes, last: bool) -> tuple[list[tuple[int, int]], int, str]:
    """The frames of a segment, where its good part ends, and why (``""``: at its end).

    The frames are (offset, length) of payloads. Raises :class:`CorruptLog` for a bad frame
    that cannot be a torn tail (one of the last segment's that reaches its end).
    """
    frames: list[tuple[int, int]] = []
    offset = 0
    size = len(data)
    view = memoryview(data)
    while offset < size:
        bad = _bad_frame(view, offset, size)
        if bad is None:
            length = _HEAD.unpack_from(data, offset)[1]
            frames.append((offset + HEADER_BYTES, length))
            offset += HEADER_BYTES + length
            continue
        why, torn = bad
        if last and torn:
            return frames, offset, why
        raise CorruptLog(path, offset, why)
    return frames, offset, ""


def _bad_frame(view: memoryview, offset: int, size: int) -> tuple[str, bool] | None:
    """Why the frame at ``offset`` is bad, and whether it may be a torn tail; None if good."""
    rest = size - offset
    if rest < HEADER_BYTES:
        return "a header cut short", True
    magic, length, crc = _HEAD.unpack_from(view, offset)
    (check,) = _CHECK.unpack_from(view, offset + _HEAD.size)
    if magic != MAGIC or crc32(view[offset : offset + _HEAD.size]) != check:
        # Bytes never written read as zeros; anything else is a damaged header.
        return "a damaged header", not any(view[offset:])
    if length > MAX_PAYLOAD:
        return f"a length of {length} bytes", False
    end = offset + HEADER_BYTES + length
    if end > size:
        return "a payload cut short", True
    if crc32(view[offset + HEADER_BYTES : end]) != crc:
        # Only the last frame written may have been torn mid-payload (perhaps followed by
        # blocks allocated but never written).
        return "a payload whose checksum does not match", not any(view[end:])
    return None


class Log:
    """A log directory: open (checking every frame), replay, append, sync, truncate."""

    def __init__(
        self, directory: Path | str, segment_bytes: int = SEGMENT_BYTES, repair: bool = True
    ) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        self._segments: list[_Segment] = []
        self.torn_bytes = 0
        """How many bytes of a torn tail are (or were) cut off, found when opened."""
        self._torn: tuple[Path, int] | None = None
        self.record = self._read_record()
        """What was synced, as the record beside the segments says (``None``: no record)."""
        self._open_segments()
        if repair:
            self.repair()
        self.synced = self.next_position
        """Every frame before this position is durable (the committer moves it on)."""
        self._fd = -1
        self._record_fd = -1
        self._lock = threading.Lock()
        """Guards the segment's descriptor between the loop (which rolls segments) and the
        committer's thread (which syncs): a sync never uses a descriptor being closed."""
        self._dirty = False
        self._new_segment = False
        self._retiring = Retiring()
        """Full segments being synced and closed in a thread (:mod:`service.store.retire`)."""

    # ----------------------------------------------------------------- opening

    def _read_record(self) -> SyncRecord | None:
        path = self.directory / RECORD
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        record = SyncRecord.decode(data)
        if record is None:
            log.warning("%s: not a sync record: its checks are skipped this time", path)
        return record

    def _open_segments(self) -> None:
        paths = sorted(self.directory.glob("*.log"))
        expected = None
        torn_why = ""
        for index, path in enumerate(paths):
            try:
                first = int(path.stem)
            except ValueError:
                raise CorruptLog(path, 0, "not a segment name") from None
            if expected is not None and first != expected:
                raise CorruptLog(path, 0, f"the segment should start at position {expected}")
            data = path.read_bytes()
            last = index == len(paths) - 1
            frames, good, why = _scan(path, data, last)
            if good < len(data):
                self.torn_bytes = len(data) - good
                self._torn = (path, good)
                torn_why = why
            head = frames[0][0] + frames[0][1] if frames else 0  # the first frame's end
            self._segments.append(_Segment(path, first, len(frames), good, head))
            expected = first + len(frames)
        if self.record is not None:
            self._check_synced(self.record, torn_why)

    def _check_synced(self, record: SyncRecord, torn_why: str) -> None:
        """Refuse a log that lost what its record says was synced (:class:`CorruptLog`)."""
        first = self._segments[0].first if self._segments else self.next_position
        if first > record.first:
            path = self.directory / _segment_name(record.first)
            raise CorruptLog(
                path, 0, f"the segment is missing: frames from position {record.first} were kept"
            )
        if record.segment < first:
            return  # the segment synced last was truncated away since
        segment = next((s for s in self._segments if s.first == record.segment), None)
        path = self.directory / _segment_name(record.segment)
        if segment is None:
            raise CorruptLog(
                path, 0, f"the segment is missing: {record.length} bytes of it were synced"
            )
        if segment.size < record.length:
            if self._torn is not None and self._torn[0] == segment.path:
                why = f"{torn_why}, within the {record.length} bytes synced"
            else:
                why = f"the segment ends here but {record.length} bytes of it were synced"
            raise CorruptLog(path, segment.size, why)

    def repair(self) -> None:
        """Cut off a torn tail found when opening (it was never acknowledged).

        Separate from opening, so that a store can check every log before it changes any.
        """
        if self._torn is not None:
            path, good = self._torn
            with open(path, "r+b") as file:
                file.truncate(good)
                os.fsync(file.fileno())
            log.warning(
                "%s: cut a torn tail of %d bytes at byte offset %d (written after the last "
                "sync: never acknowledged)",
                path,
                self.torn_bytes,
                good,
            )
            self._torn = None

    @property
    def next_position(self) -> int:
        """The position the next frame appended gets."""
        if not self._segments:
            return 0
        last = self._segments[-1]
        return last.first + last.frames

    def rolls_next(self) -> bool:
        """Whether the next append starts a new segment."""
        return not self._segments or self._full(self._segments[-1])

    def _full(self, segment: _Segment) -> bool:
        """Whether ``segment`` holds a segment's worth of frames after its first."""
        return segment.size - segment.head >= self.segment_bytes

    def first_payload(self, start: int) -> bytes | None:
        """The payload of the first frame of the segment starting at ``start`` (if any)."""
        for segment in self._segments:
            if segment.first == start and segment.frames:
                with open(segment.path, "rb") as file:
                    head = file.read(HEADER_BYTES)
                    length = _HEAD.unpack_from(head)[1]
                    return file.read(length)
        return None

    def segment_starts(self) -> list[int]:
        """The position of each segment's first frame, oldest first."""
        return [segment.first for segment in self._segments]

    @property
    def first_position(self) -> int:
        """The position of the oldest frame kept (frames before it were truncated)."""
        return self._segments[0].first if self._segments else 0

    @property
    def size(self) -> int:
        """Bytes held in all segments."""
        return sum(s.size for s in self._segments)

    # ----------------------------------------------------------------- reading

    def replay(self, start: int = 0) -> Iterator[tuple[int, bytes]]:
        """Every frame from position ``start`` on, as ``(position, payload)``, in order."""
        for segment in list(self._segments):
            if segment.first + segment.frames <= start:
                continue
            data = segment.path.read_bytes()[: segment.size]
            frames, _, _ = _scan(segment.path, data, last=False)
            for i, (offset, length) in enumerate(frames):
                position = segment.first + i
                if position >= start:
                    yield position, data[offset : offset + length]

    # ----------------------------------------------------------------- writing

    def append(self, payloads: Sequence[Payload]) -> int:
        """Write frames (not yet durable: see :meth:`sync`); the position of the first.

        One ``write`` for them all. If it fails (a full disk, an I/O error) the segment is
        cut back to where it was, so nothing of these frames stays, and the error is raised.
        """
        if not payloads:
            return self.next_position
        position = self.next_position
        segment = self._writable()
        framed = [frame_parts(payload) for payload in payloads]
        pieces = [piece for parts in framed for piece in parts]
        size = sum(map(len, pieces))
        try:
            written = os.writev(self._fd, pieces[:_MOST_PIECES])
            if written < size:  # a short write (or many pieces): the rest, or its error
                data = b"".join(pieces)
                while written < size:
                    written += os.write(self._fd, data[written:])
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, segment.size)
            raise
        if not segment.frames:
            segment.head = sum(map(len, framed[0]))
        segment.size += size
        segment.frames += len(payloads)
        self._dirty = True
        return position

    def _writable(self) -> _Segment:
        last = self._segments[-1] if self._segments else None
        if last is None or self._full(last):
            first = self.next_position
            path = self.directory / _segment_name(first)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            with self._lock:
                self._retiring.add(self._fd, self._dirty)  # synced and closed off the loop
                self._fd = fd
            last = _Segment(path, first, 0, 0)
            self._segments.append(last)
            self._new_segment = True
        elif self._fd < 0:
            self._fd = os.open(last.path, os.O_WRONLY | os.O_APPEND)
        return last

    def sync(self) -> None:
        """Make every frame appended so far durable, and record what is synced.

        Runs in the committer's thread while the loop may go on appending: what is recorded
        is what was appended before the sync began.
        """
        last = self._segments[-1] if self._segments else None
        synced = (0, 0, 0) if last is None else (last.first, last.size, self.next_position)
        with self._lock:
            fd = os.dup(self._fd) if self._dirty and self._fd >= 0 else -1
            self._dirty = False
            retiring = self._retiring.begun()
        if fd >= 0:
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        self._retiring.wait(retiring)  # the full segments' syncs too (their error, if any)
        with self._lock:
            self._retiring.forget(retiring)
        if self._new_segment:
            # The new segment's name must be durable too.
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._new_segment = False
        if last is not None:
            self._write_record(*synced)

    def _write_record(
        self, segment: int, length: int, position: int, durable: bool = False
    ) -> None:
        """Say what is synced (the first position kept as it is now): see the docstring."""
        with self._lock:
            first = self._segments[0].first if self._segments else 0
            record = SyncRecord(first, segment, length, position)
            if self._record_fd < 0:
                path = self.directory / RECORD
                self._record_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(self._record_fd, record.encode(), 0)
            if durable:
                os.fdatasync(self._record_fd)
            self.record = record

    @property
    def dirty(self) -> bool:
        """Whether frames were appended since the last sync."""
        return self._dirty or self._new_segment

    def truncate_before(self, position: int) -> int:
        """Delete the segments all of whose frames are before ``position``; bytes freed.

        The last segment is kept (appends go there), whatever it holds.
        """
        gone = 0
        while gone + 1 < len(self._segments) and self._segments[gone + 1].first <= position:
            gone += 1
        if not gone:
            return 0
        kept, cut = self._segments[gone:], self._segments[:gone]
        if self.record is not None:
            # The record first, and durable: a crash between the two must not make the
            # segments about to go look lost.
            with self._lock:
                self._segments = kept
            record = self.record
            self._write_record(record.segment, record.length, record.position, durable=True)
        else:
            self._segments = kept
        for segment in cut:
            segment.path.unlink()
        return sum(segment.size for segment in cut)

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Close the open segment (what was appended and not synced may be lost)."""
        with self._lock:
            retiring = self._retiring.begun()
            self._retiring.forget(retiring)
        self._retiring.settle(retiring, self.directory)
        with self._lock:
            self._close_fd()
            if self._record_fd >= 0:
                os.close(self._record_fd)
                self._record_fd = -1
