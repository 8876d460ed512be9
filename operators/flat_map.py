"""``flat_map``: the records of an iterable for every record, at the same time."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from operators.map import per_batch
from operators.stream import Stream, attach


@attach(Stream.flat_map)
def flat_map(stream: Stream, fn: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> Stream:
    """Replace every record by the records of ``fn(record)``."""
    return per_batch(stream, lambda _time, records: [out for r in records for out in fn(r)], name)
