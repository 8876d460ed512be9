"""``inspect`` and ``inspect_batch``: look at records as they pass, unchanged."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream


def inspect_batch(
    stream: Stream, fn: Callable[[Hashable, list[Any]], object], name: str = "InspectBatch"
) -> Stream:
    """Call ``fn(time, records)`` for every batch, then pass the batch on."""
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()

        def logic() -> None:
            for time, records in input.batches():
                fn(time, records)
                output.forward(time, records)

        return logic

    builder.build(constructor)
    return result


def inspect(stream: Stream, fn: Callable[[Any], object], name: str = "Inspect") -> Stream:
    """Call ``fn(record)`` for every record, then pass the batch on."""

    def each(_time: Hashable, records: list[Any]) -> None:
        for record in records:
            fn(record)

    return inspect_batch(stream, each, name)
