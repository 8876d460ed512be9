"""``replay_into``: turn captured streams back into one live stream (seed 002).

With ``k`` captured streams and ``m`` workers, worker ``i`` replays the streams ``i``,
``i + m``, ... (possibly none). Every worker starts from the convention that each of the
``m`` workers holds one capability at the minimum; each adds ``(streams it replays - 1)``,
so ``k`` are held in all, one per captured stream, and each stream's history retracts its
own. The replayed frontier therefore passes a time only when every captured stream has.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.capture.event import Messages
from operators.capture.pushers import EventReader
from operators.progress import MutableAntichain
from operators.runtime import Interest, Scope
from operators.stream import Stream


def replay_into(scope: Scope, streams: Sequence[EventReader], name: str = "Replay") -> Stream:
    """Replay this worker's share of ``streams`` (all workers pass the same list)."""
    builder = OperatorBuilder(scope, name)
    output, result = builder.new_output()
    mine = list(streams[scope.index :: scope.peers])
    minimum = scope.minimum
    worker = scope.worker
    core = builder.core

    def constructor(capabilities: list[Capability]) -> Callable[[], bool]:
        # Hold one capability per replayed stream, as counts: the streams' own progress
        # events move them, and the capability objects are no longer needed.
        capabilities[0].drop()
        output.internal.update(minimum, len(mine))
        frontiers: list[MutableAntichain[Hashable]] = [
            MutableAntichain([(minimum, 1)]) for _ in mine
        ]
        done = [False] * len(mine)
        timer: list[object] = [None]
        attached = [False]

        def wake_later() -> None:
            timer[0] = None
            core.activate()

        def logic() -> bool:
            if not attached[0]:
                attached[0] = True
                for reader in mine:
                    reader.attach(core.activate)
            polling: float | None = None
            for index, reader in enumerate(mine):
                if done[index]:
                    continue
                event = reader.next()
                while event is not None:
                    if isinstance(event, Messages):
                        output.send_at(event.time, event.records)
                    else:
                        output.internal.extend(event.changes)
                        frontiers[index].update_iter(event.changes)
                    event = reader.next()
                if frontiers[index].is_empty():
                    done[index] = True
                elif reader.poll_interval is not None:
                    interval = reader.poll_interval
                    polling = interval if polling is None else min(polling, interval)
            if polling is not None and timer[0] is None:
                timer[0] = worker.call_later(polling, wake_later)
            return not all(done)

        return logic

    builder.build(constructor, Interest.NEVER)
    return result
