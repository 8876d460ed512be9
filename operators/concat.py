"""``concat``: merge several streams of one scope into one."""

from __future__ import annotations

from collections.abc import Callable

from operators.builder import OperatorBuilder
from operators.stream import Stream, attach


def concat(streams: list[Stream], name: str = "Concat") -> Stream:
    """All records of all ``streams``, at their own times."""
    if not streams:
        raise ValueError("concat needs at least one stream")
    builder = OperatorBuilder(streams[0].scope, name)
    inputs = [builder.new_input(stream) for stream in streams]
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for port, input in enumerate(inputs):
                for time, batch in input.containers():  # columns stay columns
                    output.forward(time, batch, port)

        return logic

    builder.build_reactive(constructor)
    return result


@attach(Stream.concat)
def concat_with(stream: Stream, *others: Stream) -> Stream:
    """The records of ``stream`` and those of ``others``, as one stream (``stream.concat``)."""
    return concat([stream, *others])
