"""``delay``: move every record to a later time, released once that time is complete.

Each record is held, with a capability at its new time, until no input frontier element is
``<=`` that time; then the held records go out as one batch per time, in time order (the
time domain's sort order, which extends its partial order).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, cast

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.progress import check_time, less_equal
from operators.runtime import Interest
from operators.stream import Stream, attach


@attach(Stream.delay)
def delay(
    stream: Stream, fn: Callable[[Any, Hashable], Hashable | None], name: str = "Delay"
) -> Stream:
    """Move each record to the time ``fn(record, time)``, sent once that time is complete.

    Args:
        stream: The records to delay.
        fn: Given a record and its time, the time to send it at. It must be ``<=``-at least
            the record's own time (an equal time just holds the record until its time is
            complete); ``None`` drops the record.
        name: The operator's name.

    Returns:
        The records at their new times: per time one batch, in arrival order, emitted once
        the input frontier has passed that time.

    Raises:
        ValueError: ``fn`` returned a time earlier than (or incomparable to) the record's.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        pending: dict[Hashable, tuple[Capability, list[Any]]] = {}

        def logic() -> None:
            for capability, records in input:
                time = capability.time
                for record in records:
                    later = fn(record, time)
                    if later is None:
                        continue
                    check_time(later)
                    if not less_equal(time, later):
                        raise ValueError(
                            f"{name}: cannot delay a record at time {time!r} to {later!r}: "
                            "the new time must be later than or equal to the record's time"
                        )
                    held = pending.get(later)
                    if held is None:
                        held = pending[later] = (capability.delayed(later), [])
                    held[1].append(record)
            if not pending:
                return
            frontier = input.frontier
            ready = [t for t in pending if not frontier.less_equal(t)]
            ready.sort(key=lambda t: cast(Any, t))
            for time in ready:
                held_capability, batch = pending.pop(time)
                output.give_batch(held_capability, batch)
                held_capability.drop()

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result
