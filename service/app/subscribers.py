"""An output's subscribers: each reads the output's events from a bounded queue.

A subscriber that falls more than its budget behind is closed with a resume point (the
frontier up to which it has seen everything), never allowed to hold memory without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from operators.capture import Messages, Progress
from operators.progress import MutableAntichain


class Followed(Protocol):
    """What a subscriber reads (an output's log): it can be left."""

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Stop delivering to ``subscriber``."""
        ...


class Wake:
    """Set while a subscriber has something to take (or was closed).

    ``asyncio.Event``'s ``set``/``clear``/``is_set`` without its queue of waiters, and with
    ``notify``, called when it becomes set: an idle subscriber costs no task or future, its
    socket is written on demand.
    """

    __slots__ = ("_set", "notify")

    def __init__(self) -> None:
        self._set = False
        self.notify: Callable[[], None] | None = None

    def is_set(self) -> bool:
        """Whether it is set."""
        return self._set

    def set(self) -> None:
        """Set it; ``notify()`` if it was not set."""
        if not self._set:
            self._set = True
            if self.notify is not None:
                self.notify()

    def clear(self) -> None:
        """Clear it."""
        self._set = False


@dataclass(slots=True)
class Subscriber:
    """One reader of an output's events, with a bounded queue."""

    queue: list[Messages | Progress] = field(default_factory=list)
    wake: Wake = field(default_factory=Wake)
    limit: int = 1000
    limit_bytes: int | None = None
    """The most encoded bytes of records queued (``None``: only ``limit`` events count)."""
    queued_bytes: int = 0
    closed: str | None = None
    """Why the log closed this subscriber (``None`` while open)."""
    resume: list[Hashable] = field(default_factory=list)
    """Everything before this frontier has been delivered (a resume point)."""
    seen: MutableAntichain[Hashable] = field(default_factory=MutableAntichain)
    output: Followed | None = field(default=None, repr=False)
    """The log it reads (``None`` once it left)."""

    def offer(self, event: Messages | Progress, size: int = 0) -> bool:
        """Queue an event of ``size`` bytes; ``False`` (and closed) if over its limits.

        An event larger than ``limit_bytes`` is still taken into an empty queue: the
        subscriber that reads everything must be able to read it.
        """
        if self.closed is not None:
            return False
        over_bytes = (
            self.limit_bytes is not None
            and self.queue
            and self.queued_bytes + size > self.limit_bytes
        )
        if len(self.queue) >= self.limit or over_bytes:
            self.closed = "slow consumer: the subscriber fell too far behind"
            self.wake.set()
            return False
        self.queue.append(event)
        self.queued_bytes += size
        self.wake.set()
        return True

    def leave(self) -> None:
        """Stop reading: the log delivers nothing more to this subscriber."""
        output, self.output = self.output, None
        if output is not None:
            output.unsubscribe(self)

    def take(self) -> list[Messages | Progress]:
        """Everything queued, in order."""
        events = self.queue
        self.queue = []
        self.queued_bytes = 0
        self.wake.clear()
        for event in events:
            if isinstance(event, Progress):
                self.seen.update_iter(event.changes)
        self.resume = list(self.seen.frontier())
        return events
