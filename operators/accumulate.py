"""``accumulate`` and ``count``: one value per time, emitted once the time is complete.

The operator holds a capability for every time it has data for, folds batches as they
arrive, and emits once the input frontier has passed the time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.builder import OperatorBuilder
from operators.held import HeldTimes
from operators.runtime import Interest
from operators.stream import Stream, attach


@attach(Stream.accumulate)
def accumulate(
    stream: Stream,
    init: Callable[[], Any],
    fold: Callable[[Any, list[Any]], Any],
    name: str = "Accumulate",
) -> Stream:
    """Per time, ``acc = fold(acc, batch)`` from ``init()``; emit ``acc`` when complete.

    Each worker folds the records it has; exchange first for one result per time.
    """
    return _accumulate(stream, init, fold, name)


@attach(Stream.count)
def count(stream: Stream, name: str = "Count") -> Stream:
    """The number of records per time (per worker), emitted when the time is complete."""
    # Only the batches' lengths are read, so columns are never turned into rows.
    return _accumulate(stream, int, lambda acc, batch: acc + len(batch), name, containers=True)


def _accumulate(
    stream: Stream,
    init: Callable[[], Any],
    fold: Callable[[Any, Any], Any],
    name: str,
    containers: bool = False,
) -> Stream:
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        held: HeldTimes[Any] = HeldTimes()

        def logic() -> None:
            batches = input.held_containers() if containers else iter(input)
            for capability, records in batches:
                held.replace(capability.time, fold(held.state(capability, init), records))
            for complete, value in held.ready(input.frontier):
                output.give_batch(complete, [value])
                complete.drop()

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result
