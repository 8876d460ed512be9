"""``map``: a new record for every record, at the same time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream


def map_stream(stream: Stream, fn: Callable[[Any], Any], name: str = "Map") -> Stream:
    """Apply ``fn`` to every record; one list comprehension per batch."""
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()

        def logic() -> None:
            for time, records in input.batches():
                # ``map`` runs the loop in C; the only per-record Python call is ``fn``.
                output.forward(time, list(map(fn, records)))

        return logic

    builder.build(constructor)
    return result


def map_batches(
    stream: Stream, fn: Callable[[list[Any]], list[Any]], name: str = "MapBatches"
) -> Stream:
    """Replace every batch by ``fn(batch)``, at the same time (an empty result sends nothing).

    For logic that handles a whole batch at once, e.g. an expression compiled into one list
    comprehension: the engine makes one call per batch, none per record. ``fn`` may return
    fewer or more records than it was given, or the very list it was given, but must not
    modify that list: other consumers of the stream receive the same object.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()

        def logic() -> None:
            for time, records in input.batches():
                output.forward(time, fn(records))

        return logic

    builder.build(constructor)
    return result
