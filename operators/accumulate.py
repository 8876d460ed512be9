"""``accumulate`` and ``count``: one value per time, emitted once the time is complete.

The operator holds a capability for every time it has data for, folds batches as they
arrive, and emits once the input frontier has passed the time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream
from service.runtime import Interest


def accumulate(
    stream: Stream,
    init: Callable[[], Any],
    fold: Callable[[Any, list[Any]], Any],
    name: str = "Accumulate",
) -> Stream:
    """Per time, ``acc = fold(acc, batch)`` from ``init()``; emit ``acc`` when complete.

    Each worker folds the records it has; exchange first for one result per time.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()
        pending: dict[Hashable, tuple[Capability, Any]] = {}

        def logic() -> None:
            for capability, records in input:
                time = capability.time
                held = pending.get(time)
                if held is None:
                    pending[time] = (capability.retain(), fold(init(), records))
                else:
                    pending[time] = (held[0], fold(held[1], records))
            frontier = input.frontier
            for time in sorted(t for t in pending if not frontier.less_equal(t)):  # type: ignore[type-var]
                held_capability, value = pending.pop(time)
                output.give_batch(held_capability, [value])
                held_capability.drop()

        return logic

    builder.build(constructor, Interest.ALWAYS)
    return result


def count(stream: Stream, name: str = "Count") -> Stream:
    """The number of records per time (per worker), emitted when the time is complete."""
    return accumulate(stream, int, lambda acc, records: acc + len(records), name)
