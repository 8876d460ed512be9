"""Selection and indexing on columns: a map's field (a struct's), a list's element.

A struct's field is its child column (no copy); a row whose struct is null fails (CEL's
``null`` has no fields), and a field the struct does not have fails every row (``no such
key``), as in the row backend, whose records all have the same keys. A list's element is
taken from the list's values at its offset plus the index; a row whose index is out of the
list (or negative, or whose list is null) fails, ``index out of range``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.vector.values import (
    FAILING,
    INT,
    INT64,
    LIST,
    OPAQUE,
    STRUCT,
    UINT,
    UINT64,
    Compiled,
    Datum,
    Env,
    NotVectorizedError,
    Vec,
    bounds,
    conform,
    either,
    element_shape,
    field_shape,
    found,
    nulls,
    strict,
)


def field(container: Compiled, name: str) -> Compiled:
    """``container.name`` (or ``container["name"]``)."""
    kind = container.shape.kind
    if kind == OPAQUE:
        raise NotVectorizedError(f"field selection on a value of Arrow type {container.shape.type}")
    if kind != STRUCT:
        return FAILING  # no such overload: field selection on an int, a list...
    shape = field_shape(container.shape, name)
    if shape is None:
        return FAILING  # no such key, on every row
    arrow = container.shape.type.field(name).type
    operand = container.run

    def run(env: Env) -> Vec:
        x = operand(env)
        child = _child(x.values, name)
        return Vec(conform(child, arrow), either(x.errors, nulls(x.values)))

    return Compiled(shape, run)


def _child(values: Datum, name: str) -> Datum:
    """The field ``name`` of a struct array (its rows: the child sliced as the parent is)."""
    if isinstance(values, pa.Scalar):
        return values[name] if values.is_valid else pa.scalar(None, values.type.field(name).type)
    return values.field(name)


def element(container: Compiled, index: Compiled) -> Compiled:
    """``container[index]`` for a list and an int (or uint) index."""
    kind, index_kind = container.shape.kind, index.shape.kind
    if OPAQUE in (kind, index_kind):
        raise NotVectorizedError("indexing a value of an Arrow type CEL has no operation on")
    if kind != LIST or index_kind not in (INT, UINT):
        return FAILING  # no such overload: list[double], string[int]...
    shape = element_shape(container.shape)
    arrow = container.shape.type.value_type
    lists, positions = container.run, index.run

    def run(env: Env) -> Vec:
        x, i = lists(env), positions(env)
        values = x.values  # an array: lists come from columns (list literals have no vector form)
        if pa.types.is_fixed_size_list(values.type):
            values = pc.cast(values, pa.list_(values.type.value_field))
        lengths = pc.list_value_length(values)
        outside = _outside(i.values, lengths, index_kind == UINT)
        start = pc.cast(values.offsets[:-1], INT64)
        at = pc.add(start, pc.cast(i.values, INT64, safe=False))
        if outside is not None:
            at = pc.if_else(outside, pa.scalar(None, INT64), at)
        taken = pc.take(values.values, at)
        return Vec(conform(taken, arrow), either(strict(x, i), outside))

    return Compiled(shape, run)


def _outside(index: Datum, lengths: Datum, unsigned: bool) -> Datum | None:
    """Where ``index`` is not within ``[0, length)`` (a null length or index counted out)."""
    span = bounds(index)
    if span is not None and span[0] >= 0 and lengths.null_count == 0:
        shortest = bounds(lengths)
        if shortest is not None and span[1] < shortest[0]:
            return None  # every index within every list
    if unsigned:  # compared as uint64: a uint64 index beyond int64 is outside every list
        outside = pc.greater_equal(index, pc.cast(lengths, UINT64))
    else:
        outside = pc.or_(pc.less(index, 0), pc.greater_equal(index, pc.cast(lengths, INT64)))
    return found(pc.fill_null(outside, True))
