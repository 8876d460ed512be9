"""``exchange``: route every record to the worker its key hashes to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream


def exchange(stream: Stream, key: Callable[[Any], object], name: str = "Exchange") -> Stream:
    """Send every record to worker ``stable_hash(key(record)) % peers``, unchanged."""
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=key)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()

        def logic() -> None:
            for time, records in input.batches():
                output.forward(time, records)

        return logic

    builder.build(constructor)
    return result
