"""``exchange``: route every record to the worker its key hashes to.

The operator only forwards: batches reach it as they travel (a list, or
:class:`~operators.runtime.Columns`), and leave as they came. With a column key beside the
row key, columns are routed by vectorized kernels and stay columns; without one they are
routed by their rows and arrive as lists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.builder import OperatorBuilder
from operators.runtime.routing import ColumnKey
from operators.stream import Stream, attach


@attach(Stream.exchange)
def exchange(
    stream: Stream,
    key: Callable[[Any], object],
    columns: ColumnKey | None = None,
    name: str = "Exchange",
) -> Stream:
    """Send every record to worker ``stable_hash(key(record)) % peers``, unchanged.

    ``columns`` is the same key for batches of columns (field names, or a function of the
    batch giving its keys, :data:`~operators.runtime.routing.ColumnKey`): each of their
    records goes where ``key`` would send its row.
    """
    return forward(stream, name, key, columns)


def forward(
    stream: Stream,
    name: str,
    key: Callable[[Any], object] | None = None,
    columns: ColumnKey | None = None,
) -> Stream:
    """An operator that forwards every batch as it is (routed by ``key`` first, if given)."""
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=key, columns=columns)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, batch in input.containers():
                output.forward(time, batch)

        return logic

    builder.build_reactive(constructor)
    return result
