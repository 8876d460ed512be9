"""One server per data directory: an exclusive lock, held as long as the server runs.

``<data dir>/lock`` is locked with ``flock`` (released by the kernel however the process
ends, ``kill -9`` included) and holds who has it: the process id, the host and when it
started, so the second server's refusal names the first.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from service.store.log import StoreError

FILE = "lock"


class DirectoryLocked(StoreError):
    """Another server holds the data directory: this one must not touch it."""


class DirectoryLock:
    """The lock of a data directory, taken when made; :meth:`release` lets it go."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 4096, 0).decode(errors="replace").strip()
            os.close(self._fd)
            raise DirectoryLocked(
                f"{directory} is in use by another server ({holder or 'unknown'}): a data "
                "directory serves one server at a time"
            ) from None

    def claim(self) -> None:
        """Say who holds it.

        Once the directory is known good: a refused start changes nothing, this file included.
        """
        started = datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="seconds")
        holder = f"pid {os.getpid()} on {socket.gethostname()}, since {started}"
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, holder.encode(), 0)

    def release(self) -> None:
        """Let the directory go (closing the file releases the lock).

        What it says stays: it names a holder only while the lock is held.
        """
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
