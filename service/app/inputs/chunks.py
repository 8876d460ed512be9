"""What a staging request adds to a transaction: ``(time, record)`` pairs, or columns.

An untyped input's Arrow body is kept as its columns (:class:`Columns`, made into records
once, at commit); a typed input's batch as its typed columns
(:class:`~service.store.typed.TypedRecords`), which stay columns into the dataflow.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol, TypeAlias, cast

from operators.runtime import Batch as Container
from operators.runtime import Columns as ArrowColumns
from operators.runtime.containers import concat
from service.app.inputs.core import group_by_time
from service.store.typed import TypedRecords


class Columns(Protocol):
    """Records staged as columns (an Arrow body), with integer times.

    The input checks their times in bulk against its own (:attr:`least`, then
    :meth:`first_before` for the message), and turns the records into Python objects
    once, at commit (:meth:`by_time`).
    """

    least: int
    """The earliest time of a record (any value when there are none)."""

    def __len__(self) -> int:
        """How many records."""
        ...

    def time_at(self, index: int) -> int:
        """The time of record ``index``."""
        ...

    def first_before(self, time: int) -> int:
        """The index of the first record before ``time`` (there is one: ``least < time``)."""
        ...

    def by_time(self) -> list[tuple[int, list[Any]]]:
        """The records grouped by time, each group new and in staging order."""
        ...


Chunk: TypeAlias = "list[tuple[Hashable, Any]] | Columns | TypedRecords"
"""What one staging request added to a transaction (a typed input's: its columns)."""


def pairs_of(chunk: Chunk) -> list[tuple[Hashable, Any]]:
    """A chunk's ``(time, record)`` pairs (grouped by time, for columns)."""
    if isinstance(chunk, list):
        return list(chunk)
    return [(t, r) for t, records in chunk.by_time() for r in records]


def by_time(chunk: Chunk) -> list[tuple[Hashable, list[Any]]]:
    """A chunk's records grouped by time (new lists)."""
    if not isinstance(chunk, list):
        return cast("list[tuple[Hashable, list[Any]]]", chunk.by_time())
    return list(group_by_time(chunk).items())


def joined(parts: list[Any]) -> Container:
    """One container of the batches at one time (lists of records, or columns)."""
    if len(parts) == 1:
        return cast("Container", parts[0])
    if isinstance(parts[0], list):
        return [record for part in parts for record in part]
    return concat(parts)


FEW_TIMES = 16
"""The most times a commit's typed chunks may span for :func:`by_time_across` to group them
a time at a time (one filter per time over every chunk) rather than chunk by chunk."""


def by_time_across(chunks: Sequence[TypedRecords]) -> list[tuple[Hashable, ArrowColumns]] | None:
    """The records of ``chunks`` as one container per time, ascending; ``None``: not so.

    The same containers as the chunks' own ``by_time`` groups concatenated per time
    (a time's records in chunk order, and in staging order within a chunk), for chunks of
    integer times spanning at most :data:`FEW_TIMES` values (a Spark write's, say): each
    time's records are filtered out of all the chunks and concatenated, where grouping
    chunk by chunk sorts and copies every chunk and then copies every record again.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = [chunk for chunk in chunks if len(chunk)]
    if len(chunks) < 2 or not all(chunk.integer_times for chunk in chunks):
        return None
    least = min(chunk.least for chunk in chunks)
    greatest = max(chunk.greatest for chunk in chunks)
    if greatest - least >= FEW_TIMES:
        return None
    if least == greatest:  # one time: the chunks' records as they are, concatenated
        return [(least, ArrowColumns(pa.concat_arrays([chunk.records for chunk in chunks])))]
    times = pa.chunked_array([chunk.times for chunk in chunks], pa.uint64())
    records = pa.chunked_array([chunk.records for chunk in chunks])
    groups: list[tuple[Hashable, ArrowColumns]] = []
    for time in range(least, greatest + 1):
        at = records.filter(pc.equal(times, pa.scalar(time, pa.uint64())))
        if len(at):
            groups.append((time, ArrowColumns(at.combine_chunks())))
    return groups
