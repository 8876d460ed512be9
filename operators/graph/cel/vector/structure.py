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
    DOUBLE,
    ERROR,
    FAILING,
    INT,
    INT64,
    LIST,
    NULL,
    OPAQUE,
    STRUCT,
    UINT,
    UINT64,
    Compiled,
    Datum,
    Env,
    NotVectorizedError,
    Shape,
    Vec,
    bounds,
    column,
    conform,
    either,
    element_shape,
    field_shape,
    found,
    nulls,
    positions,
    shape_of,
    strict,
    typed,
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
    if kind == LIST and index_kind == DOUBLE:
        raise NotVectorizedError("a list indexed by a double")
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


def list_of(items: list[Compiled]) -> Compiled:
    """``[a, b, ...]``: a list column, of items of one Arrow type (or ``null``).

    The items' columns, one after the other, are taken into rows: the row ``r``'s ``j``-th
    element is item ``j``'s ``r``-th value (at ``j * n + r`` of the items' concatenation).
    """
    if any(item.shape.kind == ERROR for item in items):
        return FAILING  # the list is made of every item: one failing fails it
    kinds = {item.shape.type for item in items if item.shape.kind != NULL}
    if len(kinds) > 1:
        raise NotVectorizedError("a list of values of different types")
    element = kinds.pop() if kinds else pa.null()
    arrow = pa.list_(element)
    runs = [item.run for item in items]
    count = len(items)

    def run(env: Env) -> Vec:
        n = env.length
        vecs = [item(env) for item in runs]
        offsets = pc.multiply(positions(n + 1), count)
        if count == 0:
            values = pa.array([], element)
        else:
            columns = [column(typed(vec.values, element), n) for vec in vecs]
            at = positions(n * count)  # row-major: row at // count, item at % count
            source = pc.add(pc.multiply(pc.remainder(at, count), n), pc.divide(at, count))
            values = pc.take(pa.concat_arrays(columns), source)
        lists = pa.ListArray.from_arrays(pc.cast(offsets, pa.int32()), values, type=arrow)
        return Vec(lists, either(*(vec.errors for vec in vecs)))

    return Compiled(Shape(LIST, arrow), run)


def concatenation(a: Compiled, b: Compiled) -> Compiled:
    """``a + b`` on lists: each row's list of ``a`` then of ``b``'s elements.

    The new lists' offsets are the sums of the lengths; each new element is taken from
    ``a``'s values or ``b``'s, at its row's offset in them plus its place in the new list.
    """
    element_a, element_b = a.shape.type.value_type, b.shape.type.value_type
    kinds = {shape_of(t).type for t in (element_a, element_b) if not pa.types.is_null(t)}
    if len(kinds) > 1:
        raise NotVectorizedError("+ on lists of different types")
    element = kinds.pop() if kinds else pa.null()
    arrow = pa.list_(element)
    first, second = a.run, b.run

    def run(env: Env) -> Vec:
        x, y = first(env), second(env)
        left, right = plain(x.values), plain(y.values)
        length_x = pc.fill_null(pc.cast(pc.list_value_length(left), INT64), 0)
        length_y = pc.fill_null(pc.cast(pc.list_value_length(right), INT64), 0)
        lengths = pc.add(length_x, length_y)
        offsets = pa.concat_arrays([pa.array([0], INT64), pc.cumulative_sum(lengths)])
        total = offsets[-1].as_py()
        shell = pa.ListArray.from_arrays(pc.cast(offsets, pa.int32()), pa.nulls(total))
        parents = pc.list_parent_indices(shell)
        local = pc.subtract(positions(total), pc.take(offsets, parents))
        split = pc.take(length_x, parents)
        from_x = pc.less(local, split)
        at_x = pc.add(pc.take(pc.cast(left.offsets[:-1], INT64), parents), local)
        at_y = pc.subtract(
            pc.add(pc.take(pc.cast(right.offsets[:-1], INT64), parents), local), split
        )
        none = pa.scalar(None, INT64)
        mine = typed(
            conform(pc.take(left.values, pc.if_else(from_x, at_x, none)), element_a), element
        )
        other = pc.take(right.values, pc.if_else(from_x, none, at_y))
        values = pc.if_else(from_x, mine, typed(conform(other, element_b), element))
        lists = pa.ListArray.from_arrays(pc.cast(offsets, pa.int32()), values, type=arrow)
        return Vec(lists, strict(x, y))

    return Compiled(Shape(LIST, arrow), run)


def plain(lists: pa.Array) -> pa.Array:
    """A list array with offsets (a fixed-size list cast to a list)."""
    if pa.types.is_fixed_size_list(lists.type):
        return pc.cast(lists, pa.list_(lists.type.value_field))
    return lists
