"""Full log segments synced and closed in a thread of their own, not on the event loop.

When a segment fills, the next append starts another (:class:`~service.store.log.Log`). The
full one must still be made durable: its ``fdatasync`` writes back up to a whole segment
(about 25 ms for 64 MiB), which used to stop the event loop at every roll. Its descriptor is
handed to :class:`Retiring` instead, which syncs and closes full segments in the order they
filled while the loop goes on appending. A sync round waits for them (:meth:`Retiring.wait`)
and raises a failure of theirs, so a frame of the new segment is acknowledged under ``fsync``
or ``group`` only once every earlier segment is durable; under ``none`` nothing waits.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("frontier.store")

_RETIRER = ThreadPoolExecutor(1, thread_name_prefix="frontier-log-retire")
"""The one thread that syncs and closes full segments, in the order they filled."""


def _sync_close(fd: int, dirty: bool) -> None:
    try:
        if dirty:
            os.fdatasync(fd)
    finally:
        os.close(fd)


class Retiring:
    """A log's full segments being synced and closed. Not thread-safe: the log's lock guards it."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[Future[None]] = []

    def add(self, fd: int, dirty: bool) -> None:
        """Sync ``fd`` (if written to since its last sync) and close it, in the thread."""
        # A failed one is kept: every later sync round must fail too (nothing is durable).
        self._pending = [f for f in self._pending if not f.done() or f.exception()]
        if fd >= 0:
            self._pending.append(_RETIRER.submit(_sync_close, fd, dirty))

    def begun(self) -> list[Future[None]]:
        """Those begun so far: what a sync round starting now must wait for."""
        return list(self._pending)

    def wait(self, begun: list[Future[None]]) -> None:
        """Wait for ``begun`` (:meth:`begun`); the ``OSError`` of one that failed.

        Called outside the lock (it blocks); :meth:`forget` then drops them.
        """
        for future in begun:
            future.result()

    def forget(self, done: list[Future[None]]) -> None:
        """Drop ``done``, waited for by :meth:`wait` without error."""
        self._pending = [f for f in self._pending if f not in done]

    @staticmethod
    def settle(begun: list[Future[None]], directory: Path) -> None:
        """Wait for ``begun`` when the log closes; a failure is only logged (none waits)."""
        for future in begun:
            error = future.exception()
            if error is not None:
                log.warning("%s: syncing a full segment failed: %s", directory, error)


__all__ = ["Retiring"]
