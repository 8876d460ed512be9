"""Times as JSON values: the one codec every layer above shares (wire, catalogue, logs).

A time is an integer in ``[0, 2**64)``; a :class:`~operators.progress.Product` is the array
``[outer, inner]``, nested for deeper scopes. Pure: values in, values out (whoever writes
them as bytes picks the JSON library).

>>> encode_time(Product(Product(1, 0), 2))
[[1, 0], 2]
>>> decode_time([[1, 0], 2])
Product(outer=Product(outer=1, inner=0), inner=2)
>>> decode_time("5")
Traceback (most recent call last):
...
operators.progress.time_codec.TimeFormatError: not a time: '5'
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from operators.progress.timestamp import MAX_TIME, Product, check_time


class TimeFormatError(ValueError):
    """A JSON value that is not a time (a string, a float, a bool, out of range, ...)."""


def encode_time(time: Hashable) -> Any:
    """A time as JSON: an int, or ``[outer, inner]`` for a product (recursively).

    A negative or too large integer is refused (:class:`ValueError`): it would make a frame
    nobody can read. Anything else that is not a time is a :class:`TypeError`.
    """
    if type(time) is int:
        check_time(time)
        return time
    if isinstance(time, Product):
        return [encode_time(time.outer), encode_time(time.inner)]
    raise TypeError(f"cannot encode the time {time!r}")


def decode_time(value: Any) -> Hashable:
    """The inverse of :func:`encode_time`; :class:`TimeFormatError` if ``value`` is not one."""
    if type(value) is int and 0 <= value <= MAX_TIME:
        return value
    if isinstance(value, list) and len(value) == 2:
        return Product(decode_time(value[0]), decode_time(value[1]))
    raise TimeFormatError(f"not a time: {value!r}")
