"""Group commit on real files: appends share syncs; a failed sync stops everything."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from service.store import Committer, Durability, Log


async def test_concurrent_appends_share_one_sync(tmp_path: Path) -> None:
    committer = Committer(Durability.FSYNC)
    logs = [Log(tmp_path / str(i)) for i in range(3)]
    waits = []
    for i in range(12):
        log = logs[i % 3]
        log.append([b"record %d" % i])
        waits.append(committer.written(log))
    await asyncio.gather(*waits)  # type: ignore[arg-type]
    assert committer.syncs == 1
    assert not any(log.dirty for log in logs)
    # Appends made while a sync runs wait for the next round, which takes them all.
    logs[0].append([b"a"])
    first = committer.written(logs[0])
    await asyncio.sleep(0)  # the round has started
    logs[1].append([b"b"])
    logs[2].append([b"c"])
    second = [committer.written(logs[1]), committer.written(logs[2])]
    await asyncio.gather(first, *second)  # type: ignore[arg-type]
    assert committer.syncs == 3
    for log in logs:
        log.close()
    assert [len(list(Log(tmp_path / str(i)).replay())) for i in range(3)] == [5, 5, 5]


async def test_group_acknowledges_at_once_and_syncs_within_the_window(tmp_path: Path) -> None:
    committer = Committer(Durability.GROUP, window=0.02)
    log = Log(tmp_path)
    log.append([b"x"])
    assert committer.written(log) is None
    assert (committer.syncs, log.dirty) == (0, True)
    await asyncio.sleep(0.1)
    assert (committer.syncs, log.dirty) == (1, False)


async def test_none_never_syncs(tmp_path: Path) -> None:
    committer = Committer(Durability.NONE)
    log = Log(tmp_path)
    log.append([b"x"])
    assert committer.written(log) is None
    await asyncio.sleep(0.01)
    assert (committer.syncs, log.dirty) == (0, True)


async def test_a_failed_sync_fails_every_waiter_and_every_later_append(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    committer = Committer(Durability.FSYNC, on_failure=failures.append)
    log = Log(tmp_path)
    log.append([b"x"])
    os.close(log._fd)  # the sync will fail (EBADF), as a disk's I/O error would (EIO)
    waiter = committer.written(log)
    with pytest.raises(OSError):
        await waiter  # type: ignore[misc]
    assert len(failures) == 1
    assert isinstance(failures[0], OSError)
    with pytest.raises(OSError):
        committer.written(log)
    log._fd = -1
