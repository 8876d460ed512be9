"""ChangeBatch: a consolidating list of ``(item, diff)`` updates."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ChangeBatch(Generic[K]):
    """Accumulates signed counts per item; reads see one entry per item with non-zero total.

    Updates are summed eagerly into a dict, so consolidation costs one dict operation per
    update and a read never has to sort. An item whose total reaches zero leaves the dict at
    once: a batch that is never drained (the frontier changes of an operator that is never
    scheduled, say) holds one entry per item still non-zero, not one per item ever seen.
    Entries come out in the order their items (last) appeared, deterministic for a
    deterministic sequence of updates.

    >>> batch = ChangeBatch()
    >>> batch.update("a", 2); batch.update("b", 1); batch.update("a", -2)
    >>> list(batch)
    [('b', 1)]
    >>> batch.extend([("c", 3), ("b", -1)]); batch.drain()
    [('c', 3)]
    >>> batch.is_empty()
    True
    """

    __slots__ = ("_counts",)

    def __init__(self, updates: Iterable[tuple[K, int]] = ()) -> None:
        self._counts: dict[K, int] = {}
        self.extend(updates)

    def update(self, item: K, diff: int) -> None:
        """Add ``diff`` to the count of ``item``."""
        counts = self._counts
        count = counts.get(item, 0) + diff
        if count:
            counts[item] = count
        else:
            counts.pop(item, None)

    def extend(self, updates: Iterable[tuple[K, int]]) -> None:
        """Add every ``(item, diff)`` of ``updates``."""
        counts = self._counts
        get = counts.get
        for item, diff in updates:
            count = get(item, 0) + diff
            if count:
                counts[item] = count
            else:
                counts.pop(item, None)

    def _compact(self) -> dict[K, int]:
        counts = self._counts
        if 0 in counts.values():
            self._counts = counts = {k: v for k, v in counts.items() if v}
        return counts

    def __iter__(self) -> Iterator[tuple[K, int]]:
        return iter(list(self._compact().items()))

    def __len__(self) -> int:
        return len(self._compact())

    def __bool__(self) -> bool:
        # Hot: checked for every port after every schedule. No need to compact to answer.
        return any(self._counts.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeBatch):
            return NotImplemented
        return self._compact() == other._compact()

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __repr__(self) -> str:
        return f"ChangeBatch({list(self)!r})"

    def is_empty(self) -> bool:
        """Whether every item's total is zero."""
        return not any(self._counts.values())

    def count_for(self, item: K) -> int:
        """The current total for ``item`` (zero if absent)."""
        return self._counts.get(item, 0)

    def drain(self) -> list[tuple[K, int]]:
        """Return the consolidated updates and leave the batch empty."""
        counts = self._counts
        self._counts = {}
        return [(k, v) for k, v in counts.items() if v]

    def drain_into(self, other: ChangeBatch[K]) -> None:
        """Move every update into ``other`` and leave this batch empty."""
        if not other._counts:
            other._counts, self._counts = self._counts, other._counts
        else:
            other.extend(self.drain())

    def clear(self) -> None:
        """Forget every update."""
        self._counts = {}
