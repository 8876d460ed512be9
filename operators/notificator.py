"""The notificator: run logic for a time once no input can still deliver records at it.

``notify_at(capability)`` asks for a notification at the capability's time, holding the
capability until then. Notifications come out in time order (sorted by the time domain's
total order, which extends the partial order), once no input frontier is ``<=`` the time;
requests for the same time are merged into one notification with their count.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, cast

from operators.capability import Capability
from operators.held import ReadyTimes
from operators.progress import MutableAntichain


class Notificator:
    """Pending notification requests of one operator, and the frontiers that release them."""

    __slots__ = ("_frontiers", "_pending", "_ready")

    def __init__(self, frontiers: list[MutableAntichain[Hashable]]) -> None:
        self._frontiers = frontiers
        self._pending: dict[Hashable, tuple[Capability, int]] = {}
        self._ready = ReadyTimes()

    def notify_at(self, capability: Capability) -> None:
        """Request a notification at ``capability.time``; the notificator keeps it alive."""
        time = capability.time
        held = self._pending.get(time)
        if held is None:
            self._pending[time] = (capability, 1)
            self._ready.added(time)
        else:
            # One capability per time is enough: release the extra one now.
            capability.drop()
            self._pending[time] = (held[0], held[1] + 1)

    def pending(self) -> list[tuple[Hashable, int]]:
        """Requested times not yet delivered, with their request counts, in time order."""
        return sorted(
            ((t, n) for t, (_cap, n) in self._pending.items()),
            key=lambda item: cast(Any, item[0]),
        )

    def __iter__(self) -> Iterator[tuple[Capability, int]]:
        """Deliver every ready time once, in time order, as ``(capability, count)``.

        The capability is the caller's to use and then drop (or keep).
        """
        pending = self._pending
        ready = self._ready.ready(pending, self._frontiers)
        delivered = 0
        try:
            for time in ready:
                capability, count = pending.pop(time)
                delivered += 1
                yield capability, count
        finally:
            # A caller that stops early leaves ready times behind: test them again next time.
            self._ready.not_taken(ready[delivered:])
