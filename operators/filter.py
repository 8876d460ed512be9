"""``filter``: keep the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.fused import FILTER, Stage, chained
from operators.stream import Stream, attach


@attach(Stream.filter)
def filter_stream(stream: Stream, predicate: Callable[[Any], bool], name: str = "Filter") -> Stream:
    """Keep the records for which ``predicate`` is true (an empty result sends nothing).

    The stream is chained with the ``map``, ``filter`` and ``flat_map`` around it: they run
    as one operator (see :mod:`operators.fused`).
    """
    return chained(stream, Stage(FILTER, predicate, name))
