"""When an append is durable: the ``durability`` setting, and group commit.

``fsync`` (the default): an append is acknowledged once it is on disk. Appends made while a
sync is running wait for the next one, which syncs every log written since in one round: many
producers share each ``fdatasync`` (group commit) instead of each paying for one. Nothing
acknowledged is lost, whatever the crash.

``group``: an append is acknowledged once it is written to the operating system (it survives
the process being killed), and synced within ``window`` seconds. An operating-system crash or
a power loss can lose what was acknowledged in the last window.

``none``: never synced (tests, benchmarks). A process crash loses nothing acknowledged; an
operating-system crash or power loss can lose anything not yet written back by the OS.

A failed sync cannot be retried safely (the OS may have dropped the dirty pages): the
committer calls ``on_failure`` (the server stops, fail-stop) and every waiter gets the error.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable

from service.store.log import Log


class Durability(enum.Enum):
    """How far an append goes before it is acknowledged (see the module docstring)."""

    FSYNC = "fsync"
    GROUP = "group"
    NONE = "none"


class Committer:
    """Syncs the logs appended to, in rounds, and says when an append is durable."""

    def __init__(
        self,
        durability: Durability,
        window: float = 0.01,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.durability = durability
        self.window = window
        self.on_failure = on_failure
        self._dirty: set[Log] = set()
        self._waiting: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self.syncs = 0
        """Sync rounds done."""
        self.sync_seconds = 0.0
        """Time spent in them, in all."""
        self.last_sync_seconds = 0.0

    def written(self, log: Log) -> Awaitable[None] | None:
        """``log`` was appended to: what to await before acknowledging (None: nothing).

        Raises the sync failure if one already happened: nothing is durable any more.
        """
        if self.failure is not None:
            raise self.failure
        if self.durability is Durability.NONE:
            return None
        self._dirty.add(log)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush())
        if self.durability is Durability.GROUP:
            return None
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return future

    async def _flush(self) -> None:
        try:
            if self.durability is Durability.GROUP:
                await asyncio.sleep(self.window)
            while self._dirty:
                logs, self._dirty = self._dirty, set()
                waiting, self._waiting = self._waiting, []
                # What this round makes durable: every frame appended before it began.
                marks = {log: log.next_position for log in logs}
                began = time.perf_counter()
                try:
                    # In a thread: the event loop goes on taking appends for the next round.
                    await asyncio.to_thread(_sync_all, logs)
                except Exception as error:  # an I/O error: nothing is durable any more
                    self._failed(error, waiting)
                    return
                for log, mark in marks.items():
                    log.synced = max(log.synced, mark)
                self.last_sync_seconds = time.perf_counter() - began
                self.sync_seconds += self.last_sync_seconds
                self.syncs += 1
                for future in waiting:
                    if not future.done():
                        future.set_result(None)
        finally:
            self._task = None

    def _failed(self, error: BaseException, waiting: list[asyncio.Future[None]]) -> None:
        self.failure = error
        for future in [*waiting, *self._waiting]:
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()
        if self.on_failure is not None:
            self.on_failure(error)

    async def close(self) -> None:
        """Sync what is left (a clean stop loses nothing, whatever the durability)."""
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        if self.failure is None and self._dirty:
            logs, self._dirty = self._dirty, set()
            marks = {log: log.next_position for log in logs}
            _sync_all(logs)
            for log, mark in marks.items():
                log.synced = max(log.synced, mark)


def _sync_all(logs: set[Log]) -> None:
    for log in logs:
        log.sync()
