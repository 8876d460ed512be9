"""``flat_map``: the records of an iterable for every record, at the same time."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from operators.fused import FLAT_MAP, Stage, chained
from operators.stream import Stream, attach


@attach(Stream.flat_map)
def flat_map(stream: Stream, fn: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> Stream:
    """Replace every record by the records of ``fn(record)``.

    The stream is chained with the ``map``, ``filter`` and ``flat_map`` around it: they run
    as one operator (see :mod:`operators.fused`).
    """
    return chained(stream, Stage(FLAT_MAP, fn, name))
