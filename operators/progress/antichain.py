"""Antichains: sets of mutually incomparable times, fixed and counted.

An :class:`Antichain` is what a frontier *is*: the minimal times that may still appear.
A time ``t`` is complete at a frontier when no element is ``less_equal`` to it; the empty
antichain means every time is complete. A :class:`MutableAntichain` is a multiset of times
with counts that maintains the antichain of its minimal positively-counted times and reports
how that antichain changes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast

from operators.progress.timestamp import less_equal, less_than

T = TypeVar("T", bound=Hashable)


class Antichain(Generic[T]):
    """A set of mutually incomparable elements (times or summaries), kept minimal.

    >>> from operators.progress import Product
    >>> frontier = Antichain([Product(0, 3), Product(2, 0)])
    >>> frontier.insert(Product(1, 4))  # dominated by (0, 3): rejected
    False
    >>> frontier.insert(Product(0, 1))  # dominates (0, 3): replaces it
    True
    >>> sorted(frontier)
    [Product(outer=0, inner=1), Product(outer=2, inner=0)]
    >>> frontier.less_equal(Product(2, 2)), frontier.less_than(Product(0, 1))
    (True, False)
    """

    __slots__ = ("_elements",)

    def __init__(self, elements: Iterable[T] = ()) -> None:
        self._elements: list[T] = []
        for element in elements:
            self.insert(element)

    @classmethod
    def from_elements(cls, elements: Iterable[T]) -> Antichain[T]:
        """Build from elements already known to be mutually incomparable (not checked)."""
        chain: Antichain[T] = cls()
        chain._elements = list(elements)
        return chain

    def insert(self, element: T) -> bool:
        """Add ``element`` unless some element is ``<=`` it; drop elements it is ``<=`` to.

        Returns whether the antichain changed.
        """
        elements = self._elements
        for existing in elements:
            if less_equal(existing, element):
                return False
        self._elements = [e for e in elements if not less_equal(element, e)]
        self._elements.append(element)
        return True

    def extend(self, elements: Iterable[T]) -> bool:
        """Insert each element; return whether any insertion changed the antichain."""
        changed = False
        for element in elements:
            changed |= self.insert(element)
        return changed

    def less_than(self, time: T) -> bool:
        """Whether some element is strictly less than ``time``."""
        return any(less_than(e, time) for e in self._elements)

    def less_equal(self, time: T) -> bool:
        """Whether some element is ``<= time``: ``time`` may still appear (is not complete)."""
        return any(less_equal(e, time) for e in self._elements)

    def dominates(self, other: Antichain[T]) -> bool:
        """Antichain order: every element of ``other`` is ``>=`` some element of ``self``."""
        return all(self.less_equal(t) for t in other._elements)

    def elements(self) -> tuple[T, ...]:
        """The elements, in insertion order."""
        return tuple(self._elements)

    def is_empty(self) -> bool:
        """Whether there are no elements (as a frontier: everything is complete)."""
        return not self._elements

    def __iter__(self) -> Iterator[T]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __contains__(self, element: object) -> bool:
        return element in self._elements

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        # Set equality; elements are hashable, and an antichain has no duplicates.
        return len(self._elements) == len(other._elements) and set(self._elements) == set(
            other._elements
        )

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __repr__(self) -> str:
        try:
            shown = sorted(self._elements)  # type: ignore[type-var]
        except TypeError:
            shown = list(self._elements)
        return f"Antichain({shown!r})"


class MutableAntichain(Generic[T]):
    """Counts per time, and the frontier: the minimal times whose count is positive.

    Counts may go negative ("transient negativity", as when a retraction overtakes its
    matching increment); a time with a non-positive count never enters the frontier.

    :meth:`update_iter` returns the net changes to the frontier. Most updates are decided
    against the frontier alone (O(frontier) work); only an update that removes a frontier
    element forces a rebuild from the positive counts.

    >>> counts = MutableAntichain()
    >>> counts.update_iter([(3, 2)])
    [(3, 1)]
    >>> counts.update_iter([(3, -1)])  # 2 -> 1: the frontier does not move
    []
    >>> counts.update_iter([(5, 1), (3, -1)])
    [(3, -1), (5, 1)]
    >>> counts.frontier()
    Antichain([5])
    """

    __slots__ = ("_ahead", "_counts", "_frontier")

    def __init__(self, updates: Iterable[tuple[T, int]] = ()) -> None:
        self._counts: dict[T, int] = {}
        self._frontier: list[T] = []
        self._ahead: list[T] | None = None
        """Integer times: the positive times above the frontier, sorted greatest first, as of
        the last time the least one was removed; ``None`` once a time has newly become
        positive since (the list might miss it). Releasing many held times in order then
        costs one sort, not one scan of every count per release."""
        self.update_iter(updates)

    def frontier(self) -> Antichain[T]:
        """The minimal times with positive count, as a fresh antichain."""
        return Antichain.from_elements(self._frontier)

    def frontier_elements(self) -> list[T]:
        """The frontier's elements (the live list: do not modify)."""
        return self._frontier

    def count_for(self, time: T) -> int:
        """The accumulated count of ``time`` (possibly negative)."""
        return self._counts.get(time, 0)

    def positive(self) -> list[tuple[T, int]]:
        """Every time with a positive count, with its count, in sort order.

        >>> MutableAntichain([(5, 2), (3, 1), (4, -1)]).positive()
        [(3, 1), (5, 2)]
        """
        return sorted((t, c) for t, c in self._counts.items() if c > 0)

    def is_empty(self) -> bool:
        """Whether the frontier is empty (no time has a positive count)."""
        return not self._frontier

    def less_than(self, time: T) -> bool:
        """Whether some frontier element is strictly less than ``time``."""
        return any(less_than(e, time) for e in self._frontier)

    def less_equal(self, time: T) -> bool:
        """Whether some frontier element is ``<= time``."""
        return any(less_equal(e, time) for e in self._frontier)

    def update_iter(self, updates: Iterable[tuple[T, int]]) -> list[tuple[T, int]]:
        """Apply ``(time, diff)`` updates; return the net frontier changes ``(time, ±1)``."""
        changes: list[tuple[T, int]] = []
        for time, diff in updates:
            if diff:
                changes.extend(self.update(time, diff))
        if len(changes) > 1:
            # Several updates may add and then remove the same element: report the net.
            net: dict[T, int] = {}
            for time, diff in changes:
                net[time] = net.get(time, 0) + diff
            changes = [(t, d) for t, d in net.items() if d]
        return changes

    def update(self, time: T, diff: int) -> Sequence[tuple[T, int]]:
        """Apply one update; return the frontier changes it causes (often none).

        This is the hot path of the tracker, hence the case analysis instead of a rebuild,
        and a branch of its own for integer times, whose frontier has at most one element:
        all of it is here, as a call costs as much as one of its cases (see
        :meth:`_update_partial` for the other times).
        """
        if not diff:
            return ()
        counts = self._counts
        count = counts.get(time, 0) + diff
        if count:
            counts[time] = count
        else:
            del counts[time]
        if type(time) is not int:
            return self._update_partial(time, diff, count)
        # The frontier list is updated in place: no allocation per change.
        frontier = self._frontier
        if diff > 0:
            if count <= 0:
                return ()
            if count <= diff:  # newly positive: the sorted times above may miss it
                self._ahead = None
            if not frontier:
                frontier.append(time)
                return [(time, 1)]
            least = frontier[0]
            if least <= time:  # type: ignore[operator]
                return ()
            frontier[0] = time
            return [(time, 1), (least, -1)]
        if count > 0 or not frontier or frontier[0] != time:
            return ()
        ahead = self._ahead
        if ahead is not None:
            while ahead:
                least = ahead.pop()
                if counts.get(least, 0) > 0:
                    frontier[0] = least
                    return [(time, -1), (least, 1)]
        positive = [t for t, c in counts.items() if c > 0]
        if not positive:
            frontier.clear()
            self._ahead = None
            return [(time, -1)]
        cast("list[Any]", positive).sort(reverse=True)
        least = positive.pop()
        self._ahead = positive
        frontier[0] = least
        return [(time, -1), (least, 1)]

    def _update_partial(self, time: T, diff: int, count: int) -> Sequence[tuple[T, int]]:
        """:meth:`update` for partially ordered times, once ``time``'s count is ``count``."""
        frontier = self._frontier
        if diff > 0:
            if time in frontier:
                return ()
            for element in frontier:
                if less_equal(element, time):
                    return ()  # strictly beyond the frontier: invisible
            if count <= 0:
                return ()
            # ``time`` is a new minimal element; it displaces the elements above it.
            changes = [(time, 1)]
            kept = []
            for element in frontier:
                if less_equal(time, element):
                    changes.append((element, -1))
                else:
                    kept.append(element)
            kept.append(time)
            self._frontier = kept
            return changes
        if count > 0 or time not in frontier:
            # A decrement leaves the frontier alone unless it zeroes a frontier element:
            # any other positive-count time is already beyond some frontier element.
            return ()
        return self._rebuild()

    def _rebuild(self) -> list[tuple[T, int]]:
        old = self._frontier
        positive = [t for t, c in self._counts.items() if c > 0]
        if len(positive) > 1:
            # Sorting by the total order lets one pass find the minimal elements: an element
            # can only be dominated by one that sorts before it.
            cast("list[Any]", positive).sort()
            new: list[T] = []
            for time in positive:
                for chosen in new:
                    if less_equal(chosen, time):
                        break
                else:
                    new.append(time)
        else:
            new = positive
        self._frontier = new
        changes: list[tuple[T, int]] = [(t, -1) for t in old if t not in new]
        changes.extend((t, 1) for t in new if t not in old)
        return changes

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self.frontier()!r})"
