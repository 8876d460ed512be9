"""``capture_into``: record everything a stream shows as events (seed 002)."""

from __future__ import annotations

from collections.abc import Callable

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.capture.event import Messages, Progress
from operators.capture.pushers import EventPusher
from operators.runtime import Interest
from operators.stream import Stream, attach


@attach(Stream.capture_into)
def capture_into(stream: Stream, pusher: EventPusher, name: str = "Capture") -> None:
    """Record ``stream`` into ``pusher``: batches as messages, frontier changes as progress.

    The pusher is flushed after each run of the operator.
    The frontier changes are relative to an implicit start of one capability at the
    minimum, so the captured history never begins with ``+1`` there. Progress seen at the
    start of a run is pushed before the batches taken in that run, which is safe: a
    frontier cannot pass a time while batches at it wait unconsumed.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    changes = input.track_frontier_changes()
    minimum = stream.scope.minimum

    def constructor(_capabilities: list[Capability]) -> Callable[[], None]:
        started = [False]

        def logic() -> None:
            if not started[0]:
                started[0] = True
                changes.update(minimum, -1)  # the implicit starting capability
            if changes:
                pusher.push(Progress(changes.drain()))
            for time, batch in input.containers():  # columns are captured as columns
                pusher.push(Messages(time, batch))  # type: ignore[arg-type]
            pusher.flush()

        return logic

    builder.build(constructor, Interest.ALWAYS)
