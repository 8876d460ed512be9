"""``map_columns``, ``filter_columns`` and ``exchange_columns``: one call per batch.

Each takes the batches of its input as they are (:meth:`~operators.ports.InputPort.containers`)
and sends its result at the batch's own time: ``map_columns`` what ``fn`` makes of the
batch, ``filter_columns`` the rows ``fn``'s mask keeps, ``exchange_columns`` the batch
itself on the worker its keys hash to.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from operators.builder import OperatorBuilder
from operators.columnar.batches import columns, key_names, record_batch
from operators.runtime import Batch, Columns
from operators.runtime.arrow import use_engine_pool
from operators.runtime.routing import ColumnKey, field_key
from operators.stream import Stream, attach

if TYPE_CHECKING:
    import pyarrow as pa


def each_batch(
    stream: Stream,
    fn: Callable[[Hashable, Batch], Batch | None],
    name: str,
    exchange: Callable[[Any], object] | None = None,
    key: ColumnKey | None = None,
) -> Stream:
    """Forward ``fn(time, batch)`` for every batch, taken as it is (``None``: nothing)."""
    use_engine_pool()
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=exchange, columns=key)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        def logic() -> None:
            for time, batch in input.containers():
                out = fn(time, batch)
                if out is not None:
                    output.forward(time, out)

        return logic

    builder.build_reactive(constructor)
    return result


@attach(Stream.map_columns)
def map_columns(
    stream: Stream, fn: Callable[[pa.RecordBatch], pa.RecordBatch], name: str = "MapColumns"
) -> Stream:
    """Replace every batch by ``fn(batch)``: a record batch in, a record batch (or table) out.

    One call per batch; an empty result sends nothing.
    """

    def apply(_time: Hashable, batch: Batch) -> Columns | None:
        import pyarrow as pa

        out = fn(record_batch(batch, name))
        if not isinstance(out, pa.RecordBatch | pa.Table):
            raise TypeError(f"{name}: the function must return a record batch, not {type(out)}")
        return columns(out)

    return each_batch(stream, apply, name)


@attach(Stream.filter_columns)
def filter_columns(
    stream: Stream,
    fn: Callable[[pa.RecordBatch], pa.Array | pa.ChunkedArray],
    name: str = "FilterColumns",
) -> Stream:
    """Keep the records where ``fn(batch)``, a boolean array, is true (null drops them too).

    One call per batch; a batch kept whole is forwarded as it is.
    """

    def keep(_time: Hashable, batch: Batch) -> Batch | None:
        import pyarrow as pa

        mask = fn(record_batch(batch, name))
        if isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        if not isinstance(mask, pa.BooleanArray) or len(mask) != len(batch):
            raise TypeError(
                f"{name}: the function must return {len(batch)} booleans, one per record"
            )
        kept = mask.true_count
        if kept == len(batch):
            return batch
        if not kept:
            return None
        if isinstance(batch, list):
            return [r for r, k in zip(batch, mask.to_pylist(), strict=True) if k]
        return Columns(batch.array.filter(mask))

    return each_batch(stream, keep, name)


def _unchanged(_time: Hashable, batch: Batch) -> Batch:
    return batch


def exchange_columns(
    stream: Stream,
    keys: str | Sequence[str] | Callable[[Columns], pa.Array],
    row_key: Callable[[Any], object] | None = None,
    name: str = "ExchangeColumns",
) -> Stream:
    """Send every record to worker ``stable_hash(key) % peers``, its batch kept as columns.

    ``keys`` names the key fields (one: its value is the key; several: their tuple), or is a
    function of a batch giving one key per record; a list batch on the stream goes by
    ``row_key`` (by default, the same fields of each record), to the same worker.
    """
    if callable(keys):
        if row_key is None:
            raise ValueError(f"{name}: a function of the columns needs a row_key for lists")
        column_key: ColumnKey = keys
        by_row = row_key
    else:
        names = key_names(keys, name)
        column_key = names
        by_row = row_key or field_key(names)
    return each_batch(stream, _unchanged, name, exchange=by_row, key=column_key)


# Attached, not decorated: code calling it with ``name`` calls this function (see ``attach``).
attach(Stream.exchange_columns)(exchange_columns)
