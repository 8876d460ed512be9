"""``broadcast``: every record to every worker.

As in timely, it is built from an exchange: each record becomes one ``(worker, record)``
pair per worker, the pairs are exchanged on the worker index, and the index is stripped.
Each pair is counted once where it is produced and delivered exactly once, to its worker,
so the progress counts stay exact. A batch of :class:`~operators.runtime.Columns` is paired
whole: one batch of records ``{"worker": w, "record": r}`` per worker (a constant column
beside the records' own array, no copy of the records), routed by that column to ``w`` as
one piece, and unwrapped there: columns stay columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.builder import OperatorBuilder
from operators.runtime import Batch, Columns
from operators.stream import Stream, attach


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


def _workers(batch: Columns) -> Any:
    return batch.array.field(0)


def _copies(batch: Batch, peers: int) -> list[Batch]:
    """One batch of ``(worker, record)`` pairs per worker (as columns, for columns)."""
    if isinstance(batch, list):
        return [[(w, r) for w in range(peers) for r in batch]]
    import pyarrow as pa

    n = len(batch)
    return [
        Columns(
            pa.StructArray.from_arrays(
                [pa.repeat(pa.scalar(w, pa.int64()), n), batch.array], ["worker", "record"]
            )
        )
        for w in range(peers)
    ]


def _unwrapped(batch: Batch) -> Batch:
    if isinstance(batch, list):
        return [record for _, record in batch]
    return Columns(batch.array.field(1))


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

    copy = OperatorBuilder(stream.scope, f"{name}.Copy")
    copy_input = copy.new_input(stream)
    copy_output, pairs = copy.new_output()

    def copy_constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, batch in copy_input.containers():
                for copied in _copies(batch, peers):
                    copy_output.forward(time, copied)

        return logic

    copy.build_reactive(copy_constructor)

    route = OperatorBuilder(stream.scope, f"{name}.Route")
    route_input = route.new_input(pairs, exchange=_first, columns=_workers)
    route_output, result = route.new_output()

    def route_constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, received in route_input.containers():
                route_output.forward(time, _unwrapped(received))

        return logic

    route.build_reactive(route_constructor)
    return result
