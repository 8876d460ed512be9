"""The segment log on real files: appends, replay, torn tails, corruption, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.store.log import HEADER_BYTES, CorruptLog, Log, encode_frame


def payloads(n: int, start: int = 0) -> list[bytes]:
    return [f"frame {i} ".encode() * (i % 5 + 1) for i in range(start, start + n)]


def written(directory: Path, frames: list[bytes], segment_bytes: int = 1 << 20) -> Log:
    """A log of ``frames``, the last written after the last sync (as a crash leaves one)."""
    log = Log(directory, segment_bytes=segment_bytes)
    for frame in frames[:-1]:
        log.append([frame])
    log.sync()
    log.append(frames[-1:])
    log.close()
    return log


def test_appended_frames_replay_in_order_after_reopening(tmp_path: Path) -> None:
    frames = payloads(10)
    log = Log(tmp_path)
    assert log.append(frames[:3]) == 0
    assert log.append(frames[3:]) == 3
    log.sync()
    log.close()
    again = Log(tmp_path)
    assert list(again.replay()) == list(enumerate(frames))
    assert list(again.replay(start=7)) == [(7, frames[7]), (8, frames[8]), (9, frames[9])]
    assert (again.next_position, again.torn_bytes) == (10, 0)
    assert again.append([b"more"]) == 10


def test_segments_roll_and_truncation_deletes_whole_segments_only(tmp_path: Path) -> None:
    frames = payloads(40)
    written(tmp_path, frames, segment_bytes=200)
    names = sorted(p.name for p in tmp_path.glob("*.log"))
    assert len(names) > 3
    log = Log(tmp_path, segment_bytes=200)
    assert [p for p, _ in log.replay()] == list(range(40))
    firsts = [int(name.removesuffix(".log")) for name in names]
    # Truncating before a position inside the third segment keeps the third on.
    freed = log.truncate_before(firsts[2] + 1)
    assert freed > 0
    assert sorted(p.name for p in tmp_path.glob("*.log")) == names[2:]
    assert log.first_position == firsts[2]
    assert [p for p, _ in log.replay()] == list(range(firsts[2], 40))
    # The last segment stays, whatever is truncated.
    log.truncate_before(10_000)
    assert sorted(p.name for p in tmp_path.glob("*.log")) == names[-1:]
    log.close()
    reopened = Log(tmp_path, segment_bytes=200)
    assert reopened.next_position == 40
    assert reopened.first_position == firsts[-1]


@pytest.mark.parametrize("cut", [1, 2, 7, HEADER_BYTES - 1, HEADER_BYTES, HEADER_BYTES + 3])
def test_a_torn_last_frame_is_cut_off_and_nothing_else(tmp_path: Path, cut: int) -> None:
    frames = payloads(6)
    written(tmp_path, frames)
    [segment] = tmp_path.glob("*.log")
    size = segment.stat().st_size
    last = len(encode_frame(frames[-1]))
    assert cut < last
    os.truncate(segment, size - cut)
    log = Log(tmp_path)
    assert list(log.replay()) == list(enumerate(frames[:-1]))
    assert log.torn_bytes == last - cut
    assert segment.stat().st_size == size - last  # appends follow the last good frame
    assert log.append([b"after"]) == 5
    log.sync()
    log.close()
    assert list(Log(tmp_path).replay(start=4)) == [(4, frames[4]), (5, b"after")]


def test_a_last_frame_with_a_bad_checksum_or_never_written_is_a_torn_tail(
    tmp_path: Path,
) -> None:
    frames = payloads(4)
    written(tmp_path, frames)
    [segment] = tmp_path.glob("*.log")
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # the last payload byte, as a write cut mid-sector would leave it
    segment.write_bytes(bytes(data) + bytes(100))  # and blocks allocated, never written
    log = Log(tmp_path)
    assert list(log.replay()) == list(enumerate(frames[:-1]))
    assert log.torn_bytes == len(encode_frame(frames[-1])) + 100


@pytest.mark.parametrize("where", ["payload", "header"])
def test_a_flipped_byte_before_the_tail_refuses_to_open_naming_file_and_offset(
    tmp_path: Path, where: str
) -> None:
    frames = payloads(6)
    written(tmp_path, frames)
    [segment] = tmp_path.glob("*.log")
    before = segment.read_bytes()
    third = sum(len(encode_frame(f)) for f in frames[:2])  # the third frame's offset
    flipped = bytearray(before)
    flipped[third + (HEADER_BYTES + 2 if where == "payload" else 5)] ^= 0x01
    segment.write_bytes(bytes(flipped))
    with pytest.raises(CorruptLog) as caught:
        Log(tmp_path)
    assert (caught.value.path, caught.value.offset) == (segment, third)
    assert str(caught.value).startswith(f"{segment}: corrupt frame at byte offset {third}: ")
    assert segment.read_bytes() == bytes(flipped)  # nothing overwritten


def test_a_damaged_frame_in_an_earlier_segment_is_corruption_even_at_its_end(
    tmp_path: Path,
) -> None:
    written(tmp_path, payloads(30), segment_bytes=200)
    first = sorted(tmp_path.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptLog) as caught:
        Log(tmp_path, segment_bytes=200)
    assert caught.value.path == first


def test_a_failed_write_leaves_nothing_of_its_frames(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.append([b"kept"])
    log.sync()
    fd = log._fd
    os.close(fd)  # the next write fails (EBADF), as a full disk's would (ENOSPC)
    read_only = os.open(tmp_path / "00000000000000000000.log", os.O_RDONLY)
    assert read_only == fd  # the same descriptor number, now not writable
    with pytest.raises(OSError):
        log.append([b"lost", b"lost too"])
    os.close(read_only)
    log._fd = -1
    assert log.next_position == 1
    assert log.append([b"next"]) == 1
    log.sync()
    log.close()
    assert list(Log(tmp_path).replay()) == [(0, b"kept"), (1, b"next")]


def test_a_segments_first_frame_does_not_count_toward_its_roll(tmp_path: Path) -> None:
    # A segment after the first is headed by a checkpoint of the input's state, which holds
    # its open transactions' batches: one larger than a segment must not make every append
    # roll and write the whole state again.
    log = Log(tmp_path, segment_bytes=200)
    log.append([b"a" * 150])
    log.append([b"b" * 200])  # the first segment holds 216 bytes after its first frame
    assert log.rolls_next()
    log.append([b"state" * 100, b"c" * 10])  # a new segment, headed by 500 bytes
    assert not log.rolls_next()
    log.append([b"e" * 40, b"f" * 40])
    assert not log.rolls_next()  # 10 + 2 * 40 bytes and 3 frame headers after the head
    log.append([b"d" * 100])
    assert log.rolls_next()
    log.close()
    reopened = Log(tmp_path, segment_bytes=200)
    assert reopened.segment_starts() == [0, 2]
    assert reopened.rolls_next()  # its head is known again from the segment's first frame
    assert [p for p, _ in reopened.replay()] == list(range(7))


def test_a_full_segment_is_synced_off_the_appending_thread_and_a_sync_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import service.store.log as module

    synced: list[tuple[int, str]] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append((fd, threading.current_thread().name))
        real(fd)

    monkeypatch.setattr(module.os, "fdatasync", fdatasync)
    log = Log(tmp_path, segment_bytes=100)
    log.append([b"head"])  # a segment's first frame does not count toward its roll
    log.append([b"a" * 120])
    full = log._fd
    log.append([b"b" * 10])  # rolls: the full segment is synced and closed in another thread
    assert log._fd != full
    log.sync()  # waits for it, then syncs the open segment
    # (The number may be used again once closed: by the sync's duplicate of the open one.)
    assert (full, "frontier-log-retire_0") in synced
    assert log._retiring.begun() == []
    log.close()
    assert [p for p, _ in Log(tmp_path, segment_bytes=100).replay()] == [0, 1, 2]


def test_a_failed_sync_of_a_full_segment_fails_the_next_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service.store.log as module

    log = Log(tmp_path, segment_bytes=100)
    log.append([b"head"])
    log.append([b"a" * 120])
    full = log._fd
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        if fd == full:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(module.os, "fdatasync", fdatasync)
    log.append([b"b" * 10])  # the append itself goes on: the failure is the sync's to tell
    with pytest.raises(OSError, match="Input/output error"):
        log.sync()
    with pytest.raises(OSError):  # and stays told: nothing after it is durable
        log.sync()
    log.close()
