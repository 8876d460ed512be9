"""``inspect`` and ``inspect_batch``: look at records as they pass, unchanged."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.map import per_batch
from operators.stream import Stream, attach


@attach(Stream.inspect_batch)
def inspect_batch(
    stream: Stream, fn: Callable[[Hashable, list[Any]], object], name: str = "InspectBatch"
) -> Stream:
    """Call ``fn(time, records)`` for every batch, then pass the batch on."""
    return per_batch(stream, _passing(fn), name)


@attach(Stream.inspect)
def inspect(stream: Stream, fn: Callable[[Any], object], name: str = "Inspect") -> Stream:
    """Call ``fn(record)`` for every record, then pass the batch on."""

    def each(_time: Hashable, records: list[Any]) -> None:
        for record in records:
            fn(record)

    return per_batch(stream, _passing(each), name)


def _passing(
    fn: Callable[[Hashable, list[Any]], object],
) -> Callable[[Hashable, list[Any]], list[Any]]:
    """``fn`` as a batch function that returns its batch unchanged."""

    def look(time: Hashable, records: list[Any]) -> list[Any]:
        fn(time, records)
        return records

    return look
