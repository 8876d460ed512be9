"""Times as the commands handle them: their JSON form, ordered, met, joined and shown.

A time is an integer, or for a product time domain a list ``[outer, inner]`` (nested again
for deeper products), compared coordinate by coordinate (``docs/graphs.md``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


class TimeShapeError(ValueError):
    """A time that is not one of the domain's shape (an integer, or a list of the same shape)."""


def _check(time: Any) -> None:
    if isinstance(time, bool) or not isinstance(time, int | list):
        raise TimeShapeError(f"{text(time)} is not a time (an integer, or [outer, inner])")
    if isinstance(time, int) and time < 0:
        raise TimeShapeError(f"{time} is not a time (times are not negative)")


def _combine(a: Any, b: Any, pick: Any) -> Any:
    _check(a)
    _check(b)
    if isinstance(a, int) and isinstance(b, int):
        return pick(a, b)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_combine(x, y, pick) for x, y in zip(a, b, strict=True)]
    raise TimeShapeError(f"time {text(b)} is not of the shape of {text(a)} (the times before it)")


def meet(times: Iterable[Any]) -> Any:
    """The greatest time at or before every one of ``times`` (coordinate by coordinate).

    >>> meet([3, 1, 2]), meet([[0, 5], [1, 0]])
    (1, [0, 0])
    """
    iterator = iter(times)
    least = next(iterator)
    for time in iterator:
        least = _combine(least, time, min)
    return least


def join(times: Iterable[Any]) -> Any:
    """The least time at or after every one of ``times`` (coordinate by coordinate).

    >>> join([3, 1, 2]), join([[0, 5], [1, 0]])
    (3, [1, 5])
    """
    iterator = iter(times)
    most = next(iterator)
    for time in iterator:
        most = _combine(most, time, max)
    return most


def after(time: Any) -> Any:
    """The time just after ``time``: its last coordinate plus one.

    An input advanced there has passed ``time`` (and every time before it), so those times
    complete; nothing at or after it is passed.

    >>> after(3), after([2, 7])
    (4, [2, 8])
    """
    _check(time)
    if isinstance(time, int):
        return time + 1
    return [*time[:-1], after(time[-1])]


def text(time: Any) -> str:
    """A time (or an antichain of times) as compact JSON.

    >>> text([1, 0]), text(5)
    ('[1,0]', '5')
    """
    return orjson.dumps(time).decode()


def antichain(frontier: list[Any]) -> str:
    """A frontier as people read it: its times, and ``(complete)`` when it is empty.

    >>> antichain([2]), antichain([[1, 0], [0, 3]]), antichain([])
    ('[2]', '[[1, 0], [0, 3]]', '[] (complete)')
    """
    if not frontier:
        return "[] (complete)"
    return "[" + ", ".join(spaced(t) for t in frontier) + "]"


def spaced(time: Any) -> str:
    """A time as people read it: JSON with a space after each comma.

    >>> spaced([[1, 0], 2]), spaced(3)
    ('[[1, 0], 2]', '3')
    """
    if isinstance(time, list):
        return "[" + ", ".join(spaced(t) for t in time) + "]"
    return text(time)


class Frontier:
    """A frontier kept from capture progress events (``changes: [[time, delta], ...]``).

    A subscription starts at the implicit frontier ``{minimum}``: ``start`` is that minimum
    (the first event's times tell its shape), given or learnt from the first change.

    >>> frontier = Frontier()
    >>> frontier.update([[2, 1], [0, -1]])
    [2]
    >>> frontier.update([[2, -1]])
    []
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._started = False

    def update(self, changes: list[list[Any]]) -> list[Any]:
        """Apply the changes; the frontier after them (its times in the domain's order)."""
        if not self._started and changes:
            self._started = True
            self._counts[text(_minimum(changes[0][0]))] = 1
        for time, delta in changes:
            key = text(time)
            count = self._counts.get(key, 0) + delta
            if count:
                self._counts[key] = count
            else:
                self._counts.pop(key, None)
        return sorted((orjson.loads(k) for k, c in self._counts.items() if c > 0), key=_order)


def _minimum(time: Any) -> Any:
    return [_minimum(t) for t in time] if isinstance(time, list) else 0


def _order(time: Any) -> Any:
    return tuple(_order(t) for t in time) if isinstance(time, list) else time
