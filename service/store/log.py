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
synced), so it is cut off. Any other bad frame, anywhere else, is corruption: opening
refuses with :class:`CorruptLog`, naming the file and the offset, and changes nothing.

The log never interprets payloads. Whole segments below a position are deleted by
:meth:`Log.truncate_before` once nothing needs their frames.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAGIC = 0x4E4F5246  # b"FRON" read as a little-endian u32
_HEAD = struct.Struct("<III")
_CHECK = struct.Struct("<I")
HEADER_BYTES = _HEAD.size + _CHECK.size
MAX_PAYLOAD = 1 << 30
"""The largest payload a frame may carry; a header claiming more is corrupt."""
SEGMENT_BYTES = 64 * 1024 * 1024


class StoreError(Exception):
    """The data directory cannot be used as it is: the server refuses to start."""


class CorruptLog(StoreError):
    """A log holds a bad frame that is not a torn tail: the store refuses to open it."""

    def __init__(self, path: Path, offset: int, why: str) -> None:
        super().__init__(f"{path}: corrupt frame at byte offset {offset}: {why}")
        self.path = path
        self.offset = offset
        self.why = why


def encode_frame(payload: bytes) -> bytes:
    """One frame: header and payload."""
    head = _HEAD.pack(MAGIC, len(payload), zlib.crc32(payload))
    return head + _CHECK.pack(zlib.crc32(head)) + payload


@dataclass(slots=True)
class _Segment:
    path: Path
    first: int
    """The position of its first frame."""
    frames: int
    size: int


def _segment_name(first: int) -> str:
    return f"{first:020d}.log"


def _scan(path: Path, data: bytes, last: bool) -> tuple[list[tuple[int, int]], int]:
    """The frames of a segment, as (offset, length) of payloads, and where the good part ends.

    Raises :class:`CorruptLog` for a bad frame that cannot be a torn tail (one of the last
    segment's that reaches its end).
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
            return frames, offset
        raise CorruptLog(path, offset, why)
    return frames, offset


def _bad_frame(view: memoryview, offset: int, size: int) -> tuple[str, bool] | None:
    """Why the frame at ``offset`` is bad, and whether it may be a torn tail; None if good."""
    rest = size - offset
    if rest < HEADER_BYTES:
        return "a header cut short", True
    magic, length, crc = _HEAD.unpack_from(view, offset)
    (check,) = _CHECK.unpack_from(view, offset + _HEAD.size)
    if magic != MAGIC or zlib.crc32(view[offset : offset + _HEAD.size]) != check:
        # Bytes never written read as zeros; anything else is a damaged header.
        return "a damaged header", not any(view[offset:])
    if length > MAX_PAYLOAD:
        return f"a length of {length} bytes", False
    end = offset + HEADER_BYTES + length
    if end > size:
        return "a payload cut short", True
    if zlib.crc32(view[offset + HEADER_BYTES : end]) != crc:
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
        self._open_segments()
        if repair:
            self.repair()
        self.synced = self.next_position
        """Every frame before this position is durable (the committer moves it on)."""
        self._fd = -1
        self._dirty = False
        self._new_segment = False

    # ----------------------------------------------------------------- opening

    def _open_segments(self) -> None:
        paths = sorted(self.directory.glob("*.log"))
        expected = None
        for index, path in enumerate(paths):
            try:
                first = int(path.stem)
            except ValueError:
                raise CorruptLog(path, 0, "not a segment name") from None
            if expected is not None and first != expected:
                raise CorruptLog(path, 0, f"the segment should start at position {expected}")
            data = path.read_bytes()
            last = index == len(paths) - 1
            frames, good = _scan(path, data, last)
            if good < len(data):
                self.torn_bytes = len(data) - good
                self._torn = (path, good)
            self._segments.append(_Segment(path, first, len(frames), good))
            expected = first + len(frames)

    def repair(self) -> None:
        """Cut off a torn tail found when opening (it was never acknowledged).

        Separate from opening, so that a store can check every log before it changes any.
        """
        if self._torn is not None:
            path, good = self._torn
            with open(path, "r+b") as file:
                file.truncate(good)
                os.fsync(file.fileno())
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
        return not self._segments or self._segments[-1].size >= self.segment_bytes

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
            frames, _ = _scan(segment.path, data, last=False)
            for i, (offset, length) in enumerate(frames):
                position = segment.first + i
                if position >= start:
                    yield position, data[offset : offset + length]

    # ----------------------------------------------------------------- writing

    def append(self, payloads: list[bytes]) -> int:
        """Write frames (not yet durable: see :meth:`sync`); the position of the first.

        One ``write`` for them all. If it fails (a full disk, an I/O error) the segment is
        cut back to where it was, so nothing of these frames stays, and the error is raised.
        """
        if not payloads:
            return self.next_position
        position = self.next_position
        segment = self._writable()
        data = b"".join(encode_frame(p) for p in payloads)
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # a short write: the rest, or the error it hits
                written += os.write(self._fd, data[written:])
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, segment.size)
            raise
        segment.size += len(data)
        segment.frames += len(payloads)
        self._dirty = True
        return position

    def _writable(self) -> _Segment:
        last = self._segments[-1] if self._segments else None
        if last is None or last.size >= self.segment_bytes:
            first = self.next_position
            path = self.directory / _segment_name(first)
            if self._dirty and self._fd >= 0:
                os.fdatasync(self._fd)  # the full segment's frames before it is closed
            self._close_fd()
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            last = _Segment(path, first, 0, 0)
            self._segments.append(last)
            self._new_segment = True
        elif self._fd < 0:
            self._fd = os.open(last.path, os.O_WRONLY | os.O_APPEND)
        return last

    def sync(self) -> None:
        """Make every frame appended so far durable."""
        if self._dirty and self._fd >= 0:
            os.fdatasync(self._fd)
            self._dirty = False
        if self._new_segment:
            # The new segment's name must be durable too.
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._new_segment = False

    @property
    def dirty(self) -> bool:
        """Whether frames were appended since the last sync."""
        return self._dirty or self._new_segment

    def truncate_before(self, position: int) -> int:
        """Delete the segments all of whose frames are before ``position``; bytes freed.

        The last segment is kept (appends go there), whatever it holds.
        """
        freed = 0
        while len(self._segments) > 1 and self._segments[1].first <= position:
            segment = self._segments.pop(0)
            segment.path.unlink()
            freed += segment.size
        return freed

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Close the open segment (what was appended and not synced may be lost)."""
        self._close_fd()
