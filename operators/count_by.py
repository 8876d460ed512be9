"""``count_by``: how many records had each key, per time, once the time is complete."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream
from service.runtime import Interest


def count_by(stream: Stream, key: Callable[[Any], Hashable], name: str = "CountBy") -> Stream:
    """``(key, n)`` per key per time: how many records had each key, once the time is complete.

    Records are exchanged by key, so each key is counted on exactly one worker. Counting
    runs in ``collections.Counter`` (C code), so the only per-record Python call is ``key``.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=key)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()
        pending: dict[Hashable, tuple[Capability, Counter[Hashable]]] = {}

        def logic() -> None:
            for capability, records in input:
                time = capability.time
                held = pending.get(time)
                if held is None:
                    held = pending[time] = (capability.retain(), Counter())
                held[1].update(map(key, records))
            frontier = input.frontier
            ready = [t for t in pending if not frontier.less_equal(t)]
            for time in sorted(ready):  # type: ignore[type-var]
                held_capability, counts = pending.pop(time)
                output.give_batch(held_capability, list(counts.items()))
                held_capability.drop()

        return logic

    builder.build(constructor, Interest.ALWAYS)
    return result
