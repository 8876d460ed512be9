"""Counting steps at run time (see :data:`MAX_STEPS`).

``steps`` is the record's counter: ``[steps left, the limit]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Final, NoReturn, cast

from operators.graph.cel.core import EvaluationError


def _exceeded(steps: list[int]) -> NoReturn:
    raise EvaluationError(f"step limit exceeded: the record needs more than {steps[1]:,} steps")


def _charge(steps: list[int], count: int) -> None:
    left = steps[0] - count
    steps[0] = left
    if left < 0:
        _exceeded(steps)


_SMALL_RANGE: Final = 16
"""A comprehension nested in another over at most this many elements is not counted."""

_FREE_WORK: Final = 2560
"""Work on a string that does not depend on the element, per comprehension, is not counted
under this many characters (its size times the range's): 256 steps, a bounded amount."""


def _charge_items(steps: list[int], items: Sized, weight: int) -> None:
    """Pay for a nested comprehension as it starts: its range's size times its body's nodes."""
    left = steps[0] - len(items) * weight
    steps[0] = left
    if left < 0:
        _exceeded(steps)


def _elements(value: object) -> int:
    """The elements of a list or map, all levels down (of anything else, none)."""
    if isinstance(value, list | tuple):
        return len(value) + sum(_elements(item) for item in value)
    if isinstance(value, Mapping):
        return len(value) + sum(_elements(item) for item in value.values())
    return 0


def _pay_repeated(
    steps: list[int] | None, limit: int, value: object, items: Sized, factor: int, deep: bool
) -> None:
    """Pay for work on ``value`` done once per element of ``items`` (a comprehension's range).

    A tenth of a step per character of a string (or per element of a list copied) times
    ``factor``; or, ``deep``, a step per element of a list or map, all levels down. Into the
    record's counter, or, without one (a comprehension not nested in another), against the
    limit on its own.
    """
    if type(value) is str or not deep:
        work = len(cast("Sized", value)) * len(items) * factor // 10
    else:
        work = _elements(value) * len(items) * factor
    if steps is not None:
        _charge(steps, work)
    elif work > limit:
        _exceeded([limit - work, limit])
