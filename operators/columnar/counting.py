"""``count_columns``, ``count_by_columns`` and ``aggregate_columns``: per time, on columns.

Each is two operators. The first pre-aggregates on its own worker: the batches of a time
that one run takes (every batch of the time that has arrived, as far as the worker's time
slice allows: at least one) become partial results, one record per key, with one pyarrow call
(``pc.value_counts`` for a count by one key field, or ``np.bincount`` for integer keys of a
narrow range; ``Table.group_by`` otherwise); it keeps a
time's partial results and sends them, combined, once the time is complete on its worker.
The second exchanges those by key (their columns hashed as the rows' keys would be), keeps
each time's, and combines them with one more ``group_by`` once the time is complete
everywhere. Only partial results cross workers, never the records, and each worker sends one
batch per time, however many batches the time had: a cluster pays per exchanged batch
(``docs/cluster.md``, "Cluster scaling").

Integer sums are exact: a batch's integers are summed as 38-digit decimals, and the merged
sum must fit an ``int64`` (:class:`SumOverflow` otherwise, never a wrapped value).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from operators.builder import OperatorBuilder
from operators.capability import InputCapability
from operators.columnar.batches import check_fields, columns, key_names, record_batch, table_of
from operators.held import HeldTimes
from operators.runtime import Batch, Columns, Interest, rows_of
from operators.runtime.arrow import use_engine_pool
from operators.runtime.routing import ColumnKey, field_key
from operators.stream import Stream, attach

if TYPE_CHECKING:
    import pyarrow as pa

FUNCTIONS = ("sum", "min", "max", "count")
"""What ``aggregate_columns`` computes of a column per key."""

_MERGE = {"sum": "sum", "min": "min", "max": "max", "count": "sum"}
"""How partial results of each function combine."""

_EXACT = (38, 0)
"""The decimal type (precision, scale) partial integer sums are kept in: exact, and it marks
them, as no other aggregation gives a decimal (sums of decimal columns are refused)."""
_INT64 = (-(2**63), 2**63 - 1)


class SumOverflow(OverflowError):
    """An integer sum of ``aggregate_columns`` does not fit an ``int64``."""


Combine: TypeAlias = "Callable[[list[Batch]], Batch | None]"
"""Partial results of one time (each one record per key) as one (each key once)."""


def _partials(stream: Stream, partial: Combine, combine: Combine, name: str) -> Stream:
    """Per time: ``partial`` of the batches each run takes, combined and sent once complete.

    A worker's partial results of a time are sent once, when no more records at the time
    can reach it, so each time crosses to each other worker in one batch, however many
    batches and runs it took.
    """
    use_engine_pool()
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        held: HeldTimes[list[Batch]] = HeldTimes()

        def logic() -> None:
            taken: dict[Hashable, tuple[InputCapability, list[Batch]]] = {}
            for capability, batch in input.held_containers():
                entry = taken.get(capability.time)
                if entry is None:
                    taken[capability.time] = (capability, [batch])
                else:
                    entry[1].append(batch)
            for capability, batches in taken.values():
                out = partial(batches)
                if out is not None:
                    held.state(capability, list).append(out)
            for complete, partials in held.ready(input.frontier):
                out = combine(partials)
                if out is not None:
                    output.give_batch(complete, out)
                complete.drop()

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result


def _merged(
    stream: Stream,
    steps: tuple[Combine, Combine, Callable[[Hashable, Batch], Batch | None]],
    route: tuple[Callable[[Any], object], ColumnKey],
    name: str,
) -> Stream:
    """Partials of each time, exchanged by ``route``, combined and finished once complete.

    ``steps`` are: the partial results of a time's batches on each worker, how partial
    results combine, and what is emitted of a time's combined result.
    """
    partial, combine, finish = steps
    partials = _partials(stream, partial, combine, f"{name}.Partial")
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(partials, exchange=route[0], columns=route[1])
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        held: HeldTimes[list[Batch]] = HeldTimes()

        def logic() -> None:
            for capability, batch in input.held_containers():
                held.state(capability, list).append(batch)
            for complete, batches in held.ready(input.frontier):
                combined = combine(batches)
                out = None if combined is None else finish(complete.time, combined)
                if out is not None:
                    output.give_batch(complete, out)
                complete.drop()

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result


def _as_is(_time: Hashable, batch: Batch) -> Batch:
    return batch


def _to_zero(_record: Any) -> int:
    return 0


def _zeros(batch: Columns) -> pa.Array:
    import pyarrow as pa

    return pa.nulls(len(batch), pa.uint64()).fill_null(0)


@attach(Stream.count_columns)
def count_columns(stream: Stream, name: str = "CountColumns") -> Stream:
    """The number of records at each time, summed over every worker, once the time is complete.

    One record per time (an ``int64``), on worker 0. Each batch counts as its length: no
    record is looked at.
    """

    def partial(batches: list[Batch]) -> list[int]:
        return [sum(map(len, batches))]

    def combine(counts: list[Batch]) -> list[int]:
        return [sum(n for batch in counts for n in rows_of(batch))]

    def finish(_time: Hashable, total: Batch) -> Columns:
        import pyarrow as pa

        return Columns(pa.array(rows_of(total), pa.int64()))

    return _merged(stream, (partial, combine, finish), (_to_zero, _zeros), name)


@attach(Stream.count_by_columns)
def count_by_columns(
    stream: Stream, keys: str | Sequence[str], name: str = "CountByColumns"
) -> Stream:
    """How many records had each key, per time: records ``{key fields..., "count"}``.

    Emitted once the time is complete, each key on the one worker its hash picks.
    """
    names = key_names(keys, name)

    def partial(batches: list[Batch]) -> Columns | None:
        import pyarrow as pa
        import pyarrow.compute as pc

        table = pa.Table.from_batches([record_batch(b, name) for b in batches])
        check_fields(table.schema, names, name)
        if len(names) == 1:
            # A hash kernel, not an Acero plan: its fixed cost is a tenth of group_by's
            # (docs/cluster.md, "Cluster scaling").
            column = table.column(names[0])
            counted = _dense_counts(column)
            if counted is None:
                counted = pc.value_counts(column).flatten()
            return Columns(pa.StructArray.from_arrays(counted, names=[names[0], "count"]))
        grouped = table.group_by(names, use_threads=False).aggregate([([], "count_all")])
        return columns(grouped.select([*names, "count_all"]).rename_columns([*names, "count"]))

    def combine(partials: list[Batch]) -> Columns | None:
        if len(partials) == 1:
            return _as_columns(partials[0])  # one partial: every key once already
        table = table_of([_as_columns(p) for p in partials])
        grouped = table.group_by(names, use_threads=False).aggregate([("count", "sum")])
        return columns(grouped.select([*names, "count_sum"]).rename_columns([*names, "count"]))

    return _merged(stream, (partial, combine, _as_is), (field_key(names), names), name)


DENSE_SLACK = 1024
""":func:`_dense_counts` counts by bins while the keys span at most twice their number plus
this many values (the bins' memory is then of the order of the keys')."""


def _dense_counts(column: pa.ChunkedArray) -> list[pa.Array] | None:
    """Each key once and its count, for integer keys without nulls in a narrow range.

    ``np.bincount`` over the keys less the least is a quarter of ``pc.value_counts``' time
    on the usual batch of small integer keys (0.08 against 0.28 ms for 50,000 of 1,000
    keys), its hash table being the bins' array. ``None`` (use ``pc.value_counts``) for other
    keys: another type, a null, or a range much wider than the keys are many. The keys come
    ascending rather than in the order first seen: a time's counts are a set.
    """
    import pyarrow as pa

    try:
        import numpy as np  # pyarrow's optional companion (``to_numpy``), not a dependency
    except ImportError:
        return None
    kind = column.type
    if not pa.types.is_integer(kind) or column.null_count or not len(column):
        return None
    chunks = [chunk.to_numpy() for chunk in column.chunks if len(chunk)]
    values = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    # 64 bits wide, so that the offsets below cannot wrap (an int8 span may exceed int8).
    values = values.astype(np.uint64 if values.dtype.kind == "u" else np.int64, copy=False)
    least, greatest = values.min(), values.max()
    if int(greatest) - int(least) > 2 * len(values) + DENSE_SLACK:
        return None
    # Within the span checked, the offsets neither overflow nor go negative.
    offsets = (values - least) if least else values
    counts = np.bincount(offsets.astype(np.intp, copy=False))
    present = np.flatnonzero(counts)
    keys = (present.astype(values.dtype) + least) if least else present
    return [pa.array(keys, kind), pa.array(counts[present], pa.int64())]


def _as_columns(batch: Batch) -> Columns:
    return batch if isinstance(batch, Columns) else Columns.of(record_batch(batch, "merge"))


def aggregate_columns(
    stream: Stream,
    keys: str | Sequence[str],
    aggregations: Mapping[str, tuple[str, str]],
    name: str = "AggregateColumns",
) -> Stream:
    """Per key per time, ``{key fields..., output: function(column) ...}`` once complete.

    ``aggregations`` maps each output field to ``(column, function)``, a function of
    :data:`FUNCTIONS`: ``sum``, ``min`` and ``max`` skip nulls (a key whose values are all
    null gets null), ``count`` counts the values that are not null. An integer sum is an
    ``int64``, computed exactly: one that does not fit raises :class:`SumOverflow`.
    """
    names = key_names(keys, name)
    specs = _specs(names, aggregations, name)
    outputs = [out for out, _, _ in specs]

    def partial(batches: list[Batch]) -> Columns | None:
        import pyarrow as pa

        rows = pa.Table.from_batches([record_batch(b, name) for b in batches])
        check_fields(rows.schema, [*names, *(column for _, column, _ in specs)], name)
        arrays = {key: rows.column(key) for key in names}
        for index, (_, column, function) in enumerate(specs):
            arrays[f"__{index}"] = _exact(rows.column(column), function, name)
        table = pa.table(arrays)
        wanted = [(f"__{i}", function) for i, (_, _, function) in enumerate(specs)]
        grouped = table.group_by(names, use_threads=False).aggregate(wanted)
        picked = [*names, *(f"__{i}_{f}" for i, (_, _, f) in enumerate(specs))]
        return columns(grouped.select(picked).rename_columns([*names, *outputs]))

    def combine(partials: list[Batch]) -> Columns | None:
        if len(partials) == 1:
            return _as_columns(partials[0])
        table = table_of([_as_columns(p) for p in partials])
        wanted = [(out, _MERGE[function]) for out, _, function in specs]
        grouped = table.group_by(names, use_threads=False).aggregate(wanted)
        picked = grouped.select([*names, *(f"{out}_{_MERGE[f]}" for out, _, f in specs)])
        return columns(picked.rename_columns([*names, *outputs]))

    def finish(time: Hashable, combined: Batch) -> Columns | None:
        merged = table_of([_as_columns(combined)])
        for out in outputs:
            kind = merged.schema.field(out).type
            if (getattr(kind, "precision", None), getattr(kind, "scale", None)) == _EXACT:
                merged = _checked_int64(merged, out, names, time, name)
        return columns(merged)

    return _merged(stream, (partial, combine, finish), (field_key(names), names), name)


# Attached, not decorated: code calling it with ``name`` calls this function (see ``attach``).
attach(Stream.aggregate_columns)(aggregate_columns)


def _specs(
    names: list[str], aggregations: Mapping[str, tuple[str, str]], operator: str
) -> list[tuple[str, str, str]]:
    specs = []
    for out, (column, function) in aggregations.items():
        if function not in FUNCTIONS:
            raise ValueError(f"{operator}: {out!r}: no function {function!r} (one of {FUNCTIONS})")
        if out in names:
            raise ValueError(f"{operator}: the output {out!r} is also a key field")
        specs.append((out, column, function))
    if not specs:
        raise ValueError(f"{operator}: no aggregations")
    return specs


def _exact(values: pa.Array, function: str, operator: str) -> pa.Array:
    """A column ready for a partial ``function``: integers to sum become exact decimals."""
    import pyarrow as pa

    if function != "sum":
        return values
    if pa.types.is_integer(values.type):
        return values.cast(pa.decimal128(20, 0))  # holds every int64 and uint64
    if pa.types.is_floating(values.type):
        return values
    raise TypeError(f"{operator}: cannot sum a column of {values.type} (integers or floats)")


def _checked_int64(
    table: pa.Table, out: str, names: list[str], time: Hashable, operator: str
) -> pa.Table:
    """``table`` with the exact sums of ``out`` as ``int64``; :class:`SumOverflow` if one is not."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sums = table.column(out)
    exact = pa.decimal128(*_EXACT)
    low, high = _INT64
    outside = pc.or_(pc.less(sums, pa.scalar(low, exact)), pc.greater(sums, pa.scalar(high, exact)))
    if pc.any(outside).as_py():
        row = pc.indices_nonzero(outside.combine_chunks())[0].as_py()
        key = {k: table.column(k)[row].as_py() for k in names}
        raise SumOverflow(
            f"{operator}: the sum {out!r} of key {key} at time {time!r} is "
            f"{sums[row].as_py()}, outside int64"
        )
    index = table.schema.get_field_index(out)
    return table.set_column(index, out, sums.cast(pa.int64()))
