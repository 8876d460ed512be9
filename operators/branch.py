"""``branch``: split a stream in two by a predicate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.builder import OperatorBuilder
from operators.stream import Stream, attach


@attach(Stream.branch)
def branch(
    stream: Stream, predicate: Callable[[Any], bool], name: str = "Branch"
) -> tuple[Stream, Stream]:
    """Split ``stream`` by ``predicate``, as timely's ``branch``: true goes to the second.

    Args:
        stream: The records to split.
        predicate: Decides, per record, which stream it goes to.
        name: The operator's name.

    Returns:
        ``(records where predicate is false, records where it is true)``, each record at its
        own time.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    false_output, false_stream = builder.new_output()
    true_output, true_stream = builder.new_output()

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, records in input.batches():
                yes: list[Any] = []
                no: list[Any] = []
                for record in records:
                    (yes if predicate(record) else no).append(record)
                false_output.forward(time, no)
                true_output.forward(time, yes)

        return logic

    builder.build_reactive(constructor)
    return false_stream, true_stream
