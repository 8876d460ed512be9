"""``filter``: keep the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.map import per_batch
from operators.stream import Stream, attach


@attach(Stream.filter)
def filter_stream(stream: Stream, predicate: Callable[[Any], bool], name: str = "Filter") -> Stream:
    """Keep the records for which ``predicate`` is true (an empty result sends nothing)."""
    return per_batch(stream, lambda _time, records: list(filter(predicate, records)), name)
