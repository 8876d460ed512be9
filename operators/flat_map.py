"""``flat_map``: the records of an iterable for every record, at the same time."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream


def flat_map(stream: Stream, fn: Callable[[Any], Iterable[Any]], name: str = "FlatMap") -> Stream:
    """Replace every record by the records of ``fn(record)``."""
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()

        def logic() -> None:
            for time, records in input.batches():
                output.forward(time, [out for r in records for out in fn(r)])

        return logic

    builder.build(constructor)
    return result
