"""State held per time until an input's frontier passes the time.

The pattern behind every operator that emits "once a time is complete" (``accumulate``,
``count_by``, ``aggregate``): records of a time fold into a state kept beside a capability
for that time; when no record at the time can still arrive, the state is emitted with the
capability and both are released. :class:`HeldTimes` keeps the states and finds the ready
times without rescanning them all on every call: the ready set can only grow when the
frontier moves, so while it stands still only the times first seen since the last scan are
checked. (A scan of every held time per call would cost O(times held) per batch: quadratic
when a producer sends many times before advancing.)

>>> from service.progress import MutableAntichain
>>> held: HeldTimes[int] = HeldTimes()
>>> frontier = MutableAntichain([(0, 1)])
>>> held.ready(frontier)
[]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

from operators.capability import Capability, InputCapability
from service.progress import MutableAntichain

S = TypeVar("S")


class HeldTimes(Generic[S]):
    """Per time: a retained capability and a state, released once the frontier passes it."""

    __slots__ = ("_held", "_seen", "_unchecked")

    def __init__(self) -> None:
        self._held: dict[Hashable, list[Any]] = {}  # time -> [capability, state]
        self._unchecked: list[Hashable] = []
        self._seen: list[Hashable] | None = None

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
            self._unchecked.append(time)
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
        if not held:
            self._seen = None
            return []
        elements = frontier.frontier_elements()
        if elements == self._seen:
            candidates = self._unchecked  # the frontier stood still: only new times can be ready
        else:
            candidates = list(held)
            self._seen = list(elements)
        self._unchecked = []
        if elements:
            less_equal = frontier.less_equal
            ready = [t for t in candidates if not less_equal(t)]
        else:
            ready = candidates
        if not ready:
            return []
        cast("list[Any]", ready).sort()  # the total order extends the partial order
        entries = [held.pop(t) for t in ready]
        return [(entry[0], entry[1]) for entry in entries]
