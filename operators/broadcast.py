"""``broadcast``: every record to every worker.

As in timely, it is built from an exchange: each record becomes one ``(worker, record)``
pair per worker, the pairs are exchanged on the worker index, and the index is stripped.
Each pair is counted once where it is produced and delivered exactly once, to its worker,
so the progress counts stay exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.builder import OperatorBuilder
from operators.stream import Stream, attach


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


@attach(Stream.broadcast)
def broadcast(stream: Stream, name: str = "Broadcast") -> Stream:
    """Send every record of ``stream`` to every worker.

    With ``peers`` workers each record appears ``peers`` times in the result, once on each
    worker, at its own time. With one worker the result equals the input.

    Args:
        stream: The records to copy.
        name: The name of the operators (suffixed ``.Copy`` and ``.Route``).

    Returns:
        The stream of records as every worker receives them.
    """
    peers = stream.scope.peers
    targets = range(peers)

    copy = OperatorBuilder(stream.scope, f"{name}.Copy")
    copy_input = copy.new_input(stream)
    copy_output, pairs = copy.new_output()

    def copy_constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, records in copy_input.batches():
                copy_output.forward(time, [(w, r) for w in targets for r in records])

        return logic

    copy.build_reactive(copy_constructor)

    route = OperatorBuilder(stream.scope, f"{name}.Route")
    route_input = route.new_input(pairs, exchange=_first)
    route_output, result = route.new_output()

    def route_constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, received in route_input.batches():
                route_output.forward(time, [record for _, record in received])

        return logic

    route.build_reactive(route_constructor)
    return result
