"""``filter``: keep the records a predicate accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream


def filter_stream(stream: Stream, predicate: Callable[[Any], bool], name: str = "Filter") -> Stream:
    """Keep the records for which ``predicate`` is true (an empty result sends nothing)."""
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()

        def logic() -> None:
            for time, records in input.batches():
                output.forward(time, list(filter(predicate, records)))

        return logic

    builder.build(constructor)
    return result
