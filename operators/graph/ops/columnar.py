"""Graph operators built on columns: a node the plan runs on columns, built here.

:mod:`operators.graph.columnar` decides which nodes run on columns and gives their
expressions' vector forms; each builder here makes the node's operators from the columnar
operators (:mod:`operators.columnar`), one pyarrow call per batch and step. Failures follow
the row path exactly (:func:`failures`): the rows an expression failed on are dropped and
counted at the node, the last one's message kept (the row backend's message, computed for
that row only), or the first one fails the dataflow under ``"on_error": "fail"``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from operators.columnar.counting import aggregate_columns, count_by_columns
from operators.columnar.join import join_columns
from operators.columnar.stateless import each_batch, exchange_columns
from operators.graph.cel import EvaluationError
from operators.graph.columnar import OnColumns
from operators.graph.node import NodeBuilder, as_bool
from operators.graph.ops.records import _as_list
from operators.runtime import Batch, Columns
from operators.runtime.routing import field_key
from operators.stream import Stream

if TYPE_CHECKING:
    import pyarrow as pa

    from operators.graph.cel.vector import VectorExpression


def failures(
    node: NodeBuilder,
    vector: VectorExpression,
    columns: Sequence[Any],
    failed: pa.Array | None,
    check: Callable[[Any], object] | None = None,
) -> None:
    """Count the rows ``failed`` marks (dropped), or fail the dataflow at the first one.

    The message is the row backend's for that row: the last failed row's when dropping (as
    the row path keeps the last), the first's when failing (where the row path stops).
    """
    if failed is None:
        return
    import pyarrow.compute as pc

    rows = pc.indices_nonzero(failed)
    if not len(rows):  # a mask of no row (an empty batch): nothing failed
        return
    if node.policy == "fail":
        message = vector.messages(columns, rows[:1], check)[0]
        raise EvaluationError(f"node {node.name!r}: {message or 'the expression failed'}")
    message = vector.messages(columns, rows[len(rows) - 1 :], check)[0]
    node.errors.record_many(node.name, len(rows), message or "the expression failed")


def _records(batch: Batch, arrow: pa.DataType) -> Columns:
    """A batch as columns of ``arrow`` (a list batch, which a typed stream rarely carries, once)."""
    if isinstance(batch, Columns):
        return batch
    import pyarrow as pa

    return Columns(pa.array(batch, arrow))


def _one_zero(keys: pa.Array) -> pa.Array:
    """Float keys with ``-0.0`` as ``0.0``: one key, as the row path's (``-0.0 == 0.0``).

    Arrow hashes the two apart (a join would miss the pairs, a count_by count them apart).
    The row path's key is the first it saw of the two; here it is ``0.0``.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_floating(keys.type):
        return keys
    zero = pa.scalar(0.0, keys.type)
    return pc.if_else(pc.equal(keys, zero), zero, keys)


def _kept(values: pa.Array, failed: pa.Array | None) -> pa.Array:
    import pyarrow.compute as pc

    return values if failed is None else values.filter(pc.invert(failed))


def _sent(values: pa.Array) -> Columns | None:
    return Columns(values) if len(values) else None


def _map(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    vector = plan.vectors["expr"]

    def apply(_time: Hashable, batch: Batch) -> Columns | None:
        records = _records(batch, record)
        values, failed = vector.evaluate(records)
        failures(node, vector, [records], failed)
        return _sent(_kept(values, failed))

    return [each_batch(node.inputs[0], apply, node.name)]


def _filter_check(value: Any) -> object:
    return as_bool(value, "filter")


def _filter(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    vector = plan.vectors["expr"]

    def keep(_time: Hashable, batch: Batch) -> Batch | None:
        records = _records(batch, record)
        mask, failed = vector.predicate(records)
        failures(node, vector, [records], failed, _filter_check)
        kept = mask.true_count
        if kept == len(records):
            return records
        return Columns(records.array.filter(mask)) if kept else None

    return [each_batch(node.inputs[0], keep, node.name)]


def _flat_map(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    import pyarrow.compute as pc

    vector = plan.vectors["expr"]

    def flatten(_time: Hashable, batch: Batch) -> Columns | None:
        records = _records(batch, record)
        values, failed = vector.evaluate(records)
        if values.null_count:  # a null is no list: it fails as the row path's check says
            failed = pc.is_null(values)  # (a failed row's value is null too)
        failures(node, vector, [records], failed, _as_list)
        return _sent(pc.list_flatten(_kept(values, failed)))

    return [each_batch(node.inputs[0], flatten, node.name)]


def keyed(
    node: NodeBuilder, stream: Stream, vector: VectorExpression, record: pa.DataType, key: str
) -> Stream:
    """The stream's records as ``{"k": key, "r": record}`` (rows whose key failed dropped)."""
    import pyarrow as pa

    def pair(_time: Hashable, batch: Batch) -> Columns | None:
        records = _records(batch, record)
        keys, failed = vector.evaluate(records)
        failures(node, vector, [records], failed)
        rows = _kept(records.array, failed)
        return _sent(pa.StructArray.from_arrays([_one_zero(_kept(keys, failed)), rows], ["k", "r"]))

    return each_batch(stream, pair, f"{node.name}: {key}")


def _second(_time: Hashable, batch: Batch) -> Columns:
    import pyarrow.compute as pc

    assert isinstance(batch, Columns)
    return Columns(pc.struct_field(batch.array, "r"))


def _exchange(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    pairs = keyed(node, node.inputs[0], plan.vectors["key"], record, "key")
    moved = exchange_columns(pairs, "k", row_key=field_key(["k"]), name=node.name)
    return [each_batch(moved, _second, f"{node.name}: records")]


def _count_by(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    import pyarrow as pa

    vector = plan.vectors["key"]

    def keys(_time: Hashable, batch: Batch) -> Columns | None:
        records = _records(batch, record)
        values, failed = vector.evaluate(records)
        failures(node, vector, [records], failed)
        return _sent(pa.StructArray.from_arrays([_one_zero(_kept(values, failed))], ["key"]))

    return [count_by_columns(each_batch(node.inputs[0], keys, f"{node.name}: keys"), "key")]


def _join(node: NodeBuilder, plan: OnColumns, records: Sequence[pa.DataType]) -> list[Stream]:
    import pyarrow as pa
    import pyarrow.compute as pc

    left = keyed(node, node.inputs[0], plan.vectors["key_left"], records[0], "key_left")
    right = keyed(node, node.inputs[1], plan.vectors["key_right"], records[1], "key_right")

    def unpaired(_time: Hashable, batch: Batch) -> Columns:
        assert isinstance(batch, Columns)
        array = batch.array
        sides = [pc.struct_field(pc.struct_field(array, side), "r") for side in ("left", "right")]
        return Columns(pa.StructArray.from_arrays(sides, ["left", "right"]))

    joined = join_columns(left, right, "k", "k", name=node.name)
    return [each_batch(joined, unpaired, f"{node.name}: pairs")]


def _zeros(length: int) -> pa.Array:
    import pyarrow as pa

    return pa.repeat(pa.scalar(0, pa.int64()), length)


def _added(
    node: NodeBuilder, vector: VectorExpression, records: Columns, zeros: pa.Array
) -> pa.Array:
    """What each record adds to its sum: a failed row adds 0 (dropped, counted).

    ``zeros`` (one per record) stand for the accumulator, which the added part never reads.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values, failed = vector.evaluate(zeros, records)
    if failed is not None:
        # The row path leaves the accumulator as it was: the key still has its sum.
        failures(node, vector, [zeros, records], failed)
        values = pc.if_else(failed, pa.scalar(0, pa.int64()), values)
    return values


def _accumulate(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    import pyarrow as pa
    import pyarrow.compute as pc

    vector = plan.vectors["fold"]

    def adds(_time: Hashable, batch: Batch) -> Columns | None:
        records = _records(batch, record)
        zeros = _zeros(len(records))  # the accumulator's stand-in, then the one key
        values = _added(node, vector, records, zeros)
        return _sent(pa.StructArray.from_arrays([zeros, values], ["k", "v"]))

    def total(_time: Hashable, batch: Batch) -> Columns:
        assert isinstance(batch, Columns)
        return Columns(pc.struct_field(batch.array, "value"))

    adding = each_batch(node.inputs[0], adds, f"{node.name}: adds")
    sums = aggregate_columns(adding, "k", {"value": ("v", "sum")}, name=f"node {node.name!r}")
    return [each_batch(sums, total, f"{node.name}: total")]


def _aggregate(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    import pyarrow as pa

    key, fold = plan.vectors["key"], plan.vectors["fold"]
    emit = plan.vectors.get("emit")

    def adds(_time: Hashable, batch: Batch) -> Columns | None:
        records = _records(batch, record)
        keys, failed = key.evaluate(records)
        failures(node, key, [records], failed)
        if failed is not None:
            records = Columns(_kept(records.array, failed))
            keys = _kept(keys, failed)
            if not len(records):
                return None  # every key failed: no record reaches the fold
        values = _added(node, fold, records, _zeros(len(records)))
        return _sent(pa.StructArray.from_arrays([_one_zero(keys), values], ["key", "value"]))

    adding = each_batch(node.inputs[0], adds, f"{node.name}: adds")
    sums = aggregate_columns(adding, "key", {"value": ("value", "sum")}, name=f"node {node.name!r}")
    if emit is None:
        return [sums]

    def emitted(_time: Hashable, batch: Batch) -> Columns | None:
        assert isinstance(batch, Columns)
        import pyarrow.compute as pc

        keys, sums = (pc.struct_field(batch.array, field) for field in ("key", "value"))
        values, failed = emit.evaluate(keys, sums)
        failures(node, emit, [keys, sums], failed)
        return _sent(_kept(values, failed))

    return [each_batch(sums, emitted, f"{node.name}: emit")]


def _unchanged(_time: Hashable, batch: Batch) -> Batch:
    return batch


def _inspect(node: NodeBuilder, plan: OnColumns, record: pa.DataType) -> list[Stream]:
    return [each_batch(node.inputs[0], _unchanged, node.name)]


Build = Callable[[NodeBuilder, OnColumns, Any], "list[Stream]"]
"""A node, its columnar form and its input's Arrow type (a join's: both) -> its outputs."""

BUILDS: dict[str, Build] = {
    "map": _map,
    "filter": _filter,
    "flat_map": _flat_map,
    "exchange": _exchange,
    "key_by": _exchange,
    "count_by": _count_by,
    "join": _join,
    "accumulate": _accumulate,
    "aggregate": _aggregate,
    "inspect": _inspect,
}
"""The columnar builders by op. Other nodes planned on columns (``count``, ``concat``,
``output``) are built by their registry entries: those already pass batches as they are."""


__all__: Sequence[str] = ["BUILDS", "failures", "keyed"]
