"""``exchange``: route every record to the worker its key hashes to."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.map import per_batch
from operators.stream import Stream, attach


@attach(Stream.exchange)
def exchange(stream: Stream, key: Callable[[Any], object], name: str = "Exchange") -> Stream:
    """Send every record to worker ``stable_hash(key(record)) % peers``, unchanged."""
    return per_batch(stream, _unchanged, name, exchange=key)


def _unchanged(_time: Hashable, records: list[Any]) -> list[Any]:
    return records
