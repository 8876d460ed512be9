"""``map`` and ``map_batches``: new records for every batch, at the same time.

:func:`per_batch` is the operator behind every stateless one-input operator (``map``,
``filter``, ``flat_map``, ``inspect``, ``exchange``): it takes each arrived batch, calls one
function on it and forwards what that returns at the batch's own time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.core import OperatorBuilder
from operators.stream import Stream


def per_batch(
    stream: Stream,
    fn: Callable[[Hashable, list[Any]], list[Any]],
    name: str,
    exchange: Callable[[Any], object] | None = None,
) -> Stream:
    """Forward ``fn(time, batch)`` for every batch (an empty result sends nothing).

    ``fn`` may return fewer or more records than it was given, or the very list it was
    given, but must not modify that list: other consumers of the stream receive the same
    object. With ``exchange``, records are routed to workers by that key before ``fn``.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=exchange)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, records in input.batches():
                output.forward(time, fn(time, records))

        return logic

    builder.build_reactive(constructor)
    return result


def map_stream(stream: Stream, fn: Callable[[Any], Any], name: str = "Map") -> Stream:
    """Apply ``fn`` to every record; ``map`` runs the loop in C, so ``fn`` is the only call."""
    return per_batch(stream, lambda _time, records: list(map(fn, records)), name)


def map_batches(
    stream: Stream, fn: Callable[[list[Any]], list[Any]], name: str = "MapBatches"
) -> Stream:
    """Replace every batch by ``fn(batch)``, at the same time (an empty result sends nothing).

    For logic that handles a whole batch at once, e.g. an expression compiled into one list
    comprehension: the engine makes one call per batch, none per record. ``fn`` must not
    modify the list it is given (see :func:`per_batch`).
    """
    return per_batch(stream, lambda _time, records: fn(records), name)
