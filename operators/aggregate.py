"""``aggregate``: fold records per key per time; emit per key once the time is complete."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.builder import OperatorBuilder
from operators.held import HeldTimes
from operators.runtime import Interest
from operators.stream import Stream, attach


@attach(Stream.aggregate)
def aggregate(
    stream: Stream,
    key: Callable[[Any], Hashable],
    fold: Callable[[Any, Any], Any],
    emit: Callable[[Hashable, Any], Any],
    init: Callable[[], Any] = lambda: None,
    name: str = "Aggregate",
) -> Stream:
    """Fold records per key per time; emit ``emit(key, acc)`` for each key once complete.

    Records are exchanged by key first, so each key is folded on exactly one worker.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=key)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        held: HeldTimes[dict[Hashable, Any]] = HeldTimes()

        def logic() -> None:
            for capability, records in input:
                state = held.state(capability, dict)
                for record in records:
                    k = key(record)
                    state[k] = fold(state[k] if k in state else init(), record)
            for complete, state in held.ready(input.frontier):
                output.give_batch(complete, [emit(k, v) for k, v in state.items()])
                complete.drop()

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result
