"""``aggregate``: fold records per key per time; emit per key once the time is complete."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.capability import Capability
from operators.core import OperatorBuilder
from operators.stream import Stream
from service.runtime import Interest


def aggregate(
    stream: Stream,
    key: Callable[[Any], Hashable],
    fold: Callable[[Any, Any], Any],
    emit: Callable[[Hashable, Any], Any],
    init: Callable[[], Any],
    name: str = "Aggregate",
) -> Stream:
    """Fold records per key per time; emit ``emit(key, acc)`` for each key once complete.

    Records are exchanged by key first, so each key is folded on exactly one worker.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=key)
    output, result = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()
        pending: dict[Hashable, tuple[Capability, dict[Hashable, Any]]] = {}

        def logic() -> None:
            for capability, records in input:
                time = capability.time
                held = pending.get(time)
                if held is None:
                    held = pending[time] = (capability.retain(), {})
                state = held[1]
                for record in records:
                    k = key(record)
                    state[k] = fold(state[k] if k in state else init(), record)
            frontier = input.frontier
            ready = [t for t in pending if not frontier.less_equal(t)]
            for time in sorted(ready):  # type: ignore[type-var]
                held_capability, state = pending.pop(time)
                output.give_batch(held_capability, [emit(k, v) for k, v in state.items()])
                held_capability.drop()

        return logic

    builder.build(constructor, Interest.ALWAYS)
    return result
