"""``count_by``: how many records had each key, per time, once the time is complete."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from operators.builder import OperatorBuilder
from operators.held import HeldTimes
from operators.runtime import Interest
from operators.stream import Stream, attach


@attach(Stream.count_by)
def count_by(
    stream: Stream, key: Callable[[Any], Hashable] | None = None, name: str = "CountBy"
) -> Stream:
    """``(key, n)`` per key per time: how many records had each key, once the time is complete.

    Records are exchanged by key, so each key is counted on exactly one worker. Counting
    runs in ``collections.Counter`` (C code), so the only per-record Python call is ``key``;
    with no ``key`` the records are the keys, and there is none.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=_itself if key is None else key)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        held: HeldTimes[Counter[Hashable]] = HeldTimes()

        def logic() -> None:
            for capability, records in input:
                counts = held.state(capability, Counter)
                counts.update(records if key is None else map(key, records))
            for complete, counts in held.ready(input.frontier):
                output.give_batch(complete, list(counts.items()))
                complete.drop()

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result


def _itself(record: Any) -> Any:
    return record
