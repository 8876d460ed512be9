"""State held per time until an input's frontier passes the time.

The pattern behind every operator that emits "once a time is complete" (``accumulate``,
``count_by``, ``aggregate``): records of a time fold into a state kept beside a capability
for that time; when no record at the time can still arrive, the state is emitted with the
capability and both are released. :class:`HeldTimes` keeps the states and finds the ready
times without rescanning them all on every call: the ready set can only grow when the
frontier moves, so while it stands still only the times first seen since the last scan are
checked. (A scan of every held time per call would cost O(times held) per batch: quadratic
when a producer sends many times before advancing.)

>>> from operators.progress import MutableAntichain
>>> held: HeldTimes[int] = HeldTimes()
>>> frontier = MutableAntichain([(0, 1)])
>>> held.ready(frontier)
[]
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import Any, Generic, TypeVar, cast

from operators.capability import Capability, InputCapability
from operators.progress import MutableAntichain

S = TypeVar("S")


class ReadyTimes:
    """Which of some pending times no frontier is ``<=`` any more, tested only when needed.

    The ready set can only grow when a frontier moves: while the frontiers stand still, only
    the times added since the last call are tested. :class:`HeldTimes` and the notificator
    keep their pending times in a dict and ask this which of them are ready.
    """

    __slots__ = ("_seen", "_unchecked")

    def __init__(self) -> None:
        self._unchecked: list[Hashable] = []
        self._seen: list[list[Hashable]] | None = None

    def added(self, time: Hashable) -> None:
        """``time`` became pending."""
        self._unchecked.append(time)

    def not_taken(self, times: Iterable[Hashable]) -> None:
        """Ready ``times`` the caller left pending: they are tested again next time."""
        self._unchecked.extend(times)

    def ready(
        self, pending: Collection[Hashable], frontiers: Sequence[MutableAntichain[Hashable]]
    ) -> list[Hashable]:
        """The times of ``pending`` that no frontier is ``<=``, in time order."""
        if not pending:
            self._seen = None
            self._unchecked = []
            return []
        elements = [frontier.frontier_elements() for frontier in frontiers]
        if elements == self._seen:
            candidates = [t for t in self._unchecked if t in pending]
        else:
            candidates = list(pending)
            self._seen = [list(e) for e in elements]
        self._unchecked = []
        ready = [t for t in candidates if not any(f.less_equal(t) for f in frontiers)]
        cast("list[Any]", ready).sort()  # the total order extends the partial order
        return ready


class HeldTimes(Generic[S]):
    """Per time: a retained capability and a state, released once the frontier passes it."""

    __slots__ = ("_held", "_ready")

    def __init__(self) -> None:
        self._held: dict[Hashable, list[Any]] = {}  # time -> [capability, state]
        self._ready = ReadyTimes()

    def __len__(self) -> int:
        """How many times are held."""
        return len(self._held)

    def state(self, capability: InputCapability, init: Callable[[], S]) -> S:
        """The state of ``capability.time``: ``init()`` (and the capability retained) if new."""
        time = capability.time
        entry = self._held.get(time)
        if entry is None:
            state = init()
            self._held[time] = [capability.retain(), state]
            self._ready.added(time)
            return state
        held: S = entry[1]
        return held

    def replace(self, time: Hashable, state: S) -> None:
        """Set the state of a held ``time`` (for states that are values, not containers)."""
        self._held[time][1] = state

    def ready(self, frontier: MutableAntichain[Hashable]) -> list[tuple[Capability, S]]:
        """Take the times ``frontier`` has passed, in time order, with their capabilities.

        The caller emits with each capability and then drops it.
        """
        held = self._held
        entries = [held.pop(t) for t in self._ready.ready(held, [frontier])]
        return [(entry[0], entry[1]) for entry in entries]
