"""Checking the times of what producers send, in bulk where it can be done in C."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, cast

from operators.progress import MAX_TIME, Product, check_time, encode_time, same_domain
from service.app.errors import Invalid


def meet(a: Hashable, b: Hashable) -> Hashable:
    """The greatest time at or before both ``a`` and ``b`` (``min`` for integers).

    >>> meet(3, 5), meet(Product(2, 0), Product(0, 2))
    (3, Product(outer=0, inner=0))
    """
    if type(a) is int and type(b) is int:
        return min(a, b)
    if isinstance(a, Product) and isinstance(b, Product):
        return Product(meet(a.outer, b.outer), meet(a.inner, b.inner))
    raise TypeError(f"times of different domains: {a!r} and {b!r}")


def unzip(batch: list[tuple[Hashable, Any]]) -> tuple[Sequence[Hashable], Sequence[Any]]:
    """The times and the records of ``(time, record)`` pairs, unzipped in C."""
    if not batch:
        return (), ()
    times, records = zip(*batch, strict=True)
    return times, records


def all_at_or_after(times: Sequence[Hashable], time: Hashable) -> bool:
    """Whether every time of an integer-time batch is a valid time at or after ``time``.

    The common case, checked in bulk (the loops run in C): ``False`` does not mean a time
    is bad, only that the time-by-time check must decide.
    """
    if type(time) is not int or not times:
        return not times
    if set(map(type, times)) != {int}:  # bools are not times; products take the long way
        return False
    ints = cast("Sequence[int]", times)
    return time <= min(ints) and max(ints) <= MAX_TIME


def pairs_at_or_after(batch: list[tuple[Hashable, Any]], time: Hashable) -> bool:
    """:func:`all_at_or_after` for ``(time, record)`` pairs."""
    return all_at_or_after(unzip(batch)[0], time)


def check(
    time: Hashable, where: str = "the time", like: Hashable = None, pointer: str = ""
) -> None:
    """:class:`Invalid` unless ``time`` is a time (of the domain of ``like``, if given)."""
    try:
        check_time(time)
    except (TypeError, ValueError) as error:
        raise Invalid(f"{where}: {error}", [{"pointer": pointer, "detail": str(error)}]) from None
    if like is not None and not same_domain(time, like):
        detail = (
            f"{encode_time(time)} is not a time of this input's domain "
            f"({'an integer' if type(like) is int else 'like ' + repr(encode_time(like))})"
        )
        raise Invalid(f"{where}: {detail}", [{"pointer": pointer, "detail": detail}])
