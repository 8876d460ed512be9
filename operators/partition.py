"""``partition``: split one stream into a fixed number of streams, record by record."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from operators.builder import OperatorBuilder
from operators.stream import Stream, attach


@attach(Stream.partition)
def partition(
    stream: Stream,
    parts: int,
    fn: Callable[[Any], tuple[int, Any]],
    name: str = "Partition",
) -> list[Stream]:
    """Split ``stream`` into ``parts`` streams.

    ``fn(record)`` returns ``(part, value)``: ``value`` is sent on stream ``part`` at the
    record's time. One operator with ``parts`` outputs does the split; records stay on
    their worker.

    Args:
        stream: The records to split.
        parts: The number of output streams, at least 1.
        fn: Maps a record to its part index (``0 <= part < parts``) and the value to send.
        name: The operator's name.

    Returns:
        The ``parts`` streams, in part order.

    Raises:
        ValueError: If ``parts`` is less than 1 (when building), or if ``fn`` returns a
            part index out of range (when running).
    """
    if parts < 1:
        raise ValueError(f"{name}: parts must be at least 1, not {parts}")
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    outputs = []
    results = []
    for _ in range(parts):
        output, result = builder.new_output()
        outputs.append(output)
        results.append(result)

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, records in input.batches():
                buckets: list[list[Any]] = [[] for _ in range(parts)]
                for record in records:
                    part, value = fn(record)
                    if not 0 <= part < parts:
                        raise ValueError(
                            f"{name}: part index {part!r} is out of range for {parts} parts"
                        )
                    buckets[part].append(value)
                for output, bucket in zip(outputs, buckets, strict=True):
                    if bucket:
                        output.forward(time, bucket)

        return logic

    builder.build_reactive(constructor)
    return results
