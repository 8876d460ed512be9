"""Per-time reductions: ``count``, ``accumulate``, and ``aggregate`` per key.

Each holds a capability for every time it has data for, folds batches as they arrive, and
emits once the input frontier has passed the time (no more records at it can come).
"""

from __future__ import annotations

from collections import Counter
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
