"""Communication between the workers of one process: mailboxes per channel and worker.

Every worker builds the same dataflows in the same order, so a channel allocated by the
``k``-th call on one worker is the ``k``-th channel on every worker: channel ids are
per-worker counters that agree. A message for a channel a worker has not built yet waits in
a mailbox created on demand; the worker attaches its activator when it builds the channel.

Pushes are plain appends: all workers run on one event loop, so per-sender FIFO order holds
trivially. Progress travels through :meth:`Fabric.broadcast`, which a test harness may
override to deliver batches late and interleaved (still FIFO per sender).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

M = TypeVar("M")


class Mailbox(Generic[M]):
    """One worker's end of one channel: a queue plus the activator of its consumer."""

    __slots__ = ("activator", "queue")

    def __init__(self) -> None:
        self.queue: deque[M] = deque()
        self.activator: Callable[[], None] | None = None

    def push(self, message: M) -> None:
        """Append ``message`` and wake the consumer (if it exists yet)."""
        self.queue.append(message)
        activator = self.activator
        if activator is not None:
            activator()

    def attach(self, activator: Callable[[], None]) -> None:
        """Set the consumer's activator; wake it at once if messages are already waiting."""
        self.activator = activator
        if self.queue:
            activator()


class Fabric:
    """The mailboxes of every channel on every worker of one process."""

    def __init__(self, peers: int) -> None:
        if peers < 1:
            raise ValueError(f"workers must be at least 1, not {peers}")
        self.peers = peers
        self.local = range(peers)
        """The workers that run in this process (all of them, here)."""
        self._mailboxes: dict[int, list[Mailbox[object]]] = {}
        self._released: dict[int, int] = {}
        """Per channel, how many workers have released it (it goes once all have)."""

    def mailboxes(self, channel: int) -> list[Mailbox[object]]:
        """The mailbox of ``channel`` on every worker, created on first use."""
        boxes = self._mailboxes.get(channel)
        if boxes is None:
            boxes = self._mailboxes[channel] = [Mailbox() for _ in range(self.peers)]
        return boxes

    def mailbox(self, channel: int, worker: int) -> Mailbox[object]:
        """The mailbox of ``channel`` on ``worker``."""
        return self.mailboxes(channel)[worker]

    def broadcast(self, channel: int, sender: int, message: object) -> None:
        """Deliver ``message`` from ``sender`` to every worker's mailbox, its own included."""
        for box in self.mailboxes(channel):
            box.push((sender, message))

    def release(self, channel: int) -> None:
        """One worker is done with ``channel`` (its dataflow completed or was dropped there).

        The channel's mailboxes go once every worker has released it: until then another
        worker may still send on it.
        """
        released = self._released.get(channel, 0) + 1
        if released < len(self.local):
            self._released[channel] = released
            return
        self._released.pop(channel, None)
        self._mailboxes.pop(channel, None)

    def stalled(self) -> bool:
        """Whether the workers should wait before their next step (a full send buffer)."""
        return False

    async def ready(self) -> None:
        """Wait until :meth:`stalled` is false."""

    def failed(self) -> asyncio.Future[None] | None:
        """A future that fails if the fabric breaks (``None``: one process cannot)."""
        return None

    def channel_count(self) -> int:
        """How many channels have mailboxes now (a dataflow that is gone leaves none)."""
        return len(self._mailboxes)
