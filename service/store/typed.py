"""Typed batches: records of a typed input as Arrow columns, checked against its schema.

A push into an input with a schema (:mod:`operators.graph.schema`) becomes a
:class:`TypedRecords`: its times (a uint64 array, or Python times for product domains) and
its records as one struct array of the schema's type. The check is once per batch, on
whole columns (:func:`conform`); only a batch that does not fit is looked at record by
record, to name the first record and field that do not (:func:`check_record`).

JSON records become columns by pyarrow's own conversion with type inference
(``pa.array(records)``), then :func:`conform` casts each column to its declared type where
that is exact: strict (an extra field is an extra column, a float among ints a column of
another type) where a conversion to the declared type is lenient (1.5 becomes 1, extra
fields vanish). ``docs/columnar.md`` (Typed inputs) has the ways measured.

The same code reads a logged typed batch on recovery, so a replay sends the same records.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from operators.graph.schema import Field, FieldType, Schema
from operators.runtime import Columns
from service.store.batches import ARROW, JSON, Batch, BatchError, json_pairs, read_arrow_bounded

_INT_RANGE = {"int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}


class SchemaMismatch(BatchError):
    """Records that do not fit the input's schema: ``pointer`` and ``detail`` say where.

    ``pointer`` is a JSON pointer into the request (``/records/3/1/value``) for a JSON
    body, or the column's path (``value``, ``where.lat``) for an Arrow body.
    """

    def __init__(self, pointer: str, detail: str) -> None:
        super().__init__(f"{pointer}: {detail}")
        self.pointer = pointer
        self.detail = detail


class _Misfit(Exception):
    """A column does not fit (found in bulk); the caller says which record."""

    def __init__(self, where: str, detail: str, row: int | None = None) -> None:
        super().__init__(detail)
        self.where = where
        self.detail = detail
        self.row = row


@dataclass(frozen=True, slots=True)
class TypedRecords:
    """A typed batch: its times and its records as one struct array of the schema's type.

    ``times`` is a uint64 array for integer times, else a list of Python times (product
    domains, JSON bodies only). It offers what a transaction needs of staged columns
    (``least``, :meth:`time_at`, :meth:`first_before`, :meth:`by_time`).
    """

    times: Any
    records: Any
    least: Any
    greatest: Any

    def __len__(self) -> int:
        return len(self.records)

    @property
    def integer_times(self) -> bool:
        """Whether the times are integers (an array)."""
        return not isinstance(self.times, list)

    def time_at(self, index: int) -> Hashable:
        """The time of record ``index``."""
        if isinstance(self.times, list):
            time: Hashable = self.times[index]
            return time
        return int(self.times[index].as_py())

    def first_before(self, time: int) -> int:
        """The index of the first record before ``time`` (-1 if none; integer times)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        earlier = pc.less(self.times, pa.scalar(time, pa.uint64()))
        return int(pc.index(earlier, True).as_py())

    def by_time(self) -> list[tuple[Hashable, Columns]]:
        """The records as containers, one per distinct time, ascending, in arrival order.

        One time (the usual case) costs nothing: the struct array is the container.
        """
        if not len(self):
            return []
        if isinstance(self.times, list):
            return self._by_python_time()
        if self.least == self.greatest:
            return [(self.least, Columns(self.records))]
        import pyarrow.compute as pc

        order = pc.sort_indices(self.times)  # stable: ties keep their order
        runs = pc.run_end_encode(self.times.take(order))
        records = self.records.take(order)
        groups: list[tuple[Hashable, Columns]] = []
        start = 0
        for time, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
            groups.append((time, Columns(records.slice(start, end - start))))
            start = end
        return groups

    def _by_python_time(self) -> list[tuple[Hashable, Columns]]:
        indexes: dict[Hashable, list[int]] = {}
        for index, time in enumerate(self.times):
            indexes.setdefault(time, []).append(index)
        if len(indexes) == 1:
            return [(self.times[0], Columns(self.records))]
        groups = sorted(indexes.items())  # products in their lexicographic (total) order
        return [(time, Columns(self.records.take(rows))) for time, rows in groups]

    def batch(self) -> Batch:
        """The batch as the journal keeps it.

        Arrow IPC (``time`` and the fields) for integer times; JSON pairs for product
        times (an Arrow column cannot hold them).
        """
        if isinstance(self.times, list):
            times, rows = self.times, self.records.to_pylist()
            return Batch.of(times, rows)
        return Batch(ARROW, ipc(self.times, self.records))


def ipc(times: Any, records: Any) -> bytes:
    """An Arrow IPC stream of one record batch: ``time`` then the records' fields."""
    import pyarrow as pa

    batch = pa.RecordBatch.from_struct_array(records)
    table = pa.RecordBatch.from_arrays(
        [times, *batch.columns],
        schema=pa.schema([pa.field("time", pa.uint64(), False), *batch.schema]),
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_batch(table)
    return bytes(sink.getvalue().to_pybytes())


def typed(times: Any, records: Any) -> TypedRecords:
    """A typed batch of ``times`` (uint64 array or Python times) and a struct array."""
    if isinstance(times, list):
        one = times[0] if times and len(set(times)) == 1 else None
        return TypedRecords(times, records, one, one)
    if not len(times):
        return TypedRecords(times, records, 0, 0)
    import pyarrow.compute as pc

    bounds = pc.min_max(times)
    return TypedRecords(times, records, bounds["min"].as_py(), bounds["max"].as_py())


# --------------------------------------------------------------------------- JSON records


def from_values(times: Sequence[Hashable], records: Sequence[Any], schema: Schema) -> TypedRecords:
    """A typed batch of Python records (a JSON body's).

    :class:`SchemaMismatch` names the first record (``/records/{i}/1/...``) that does not
    fit.
    """
    import pyarrow as pa

    array = _json_columns(records, schema)
    if all(type(t) is int for t in times):
        try:
            return typed(pa.array(times, pa.uint64()), array)
        except (OverflowError, pa.ArrowInvalid):
            pass  # checked against the domain by the session, which says which
    return typed(list(times), array)


def _json_columns(records: Sequence[Any], schema: Schema) -> Any:
    """The records as a struct array of the schema's type, or :class:`SchemaMismatch`."""
    import pyarrow as pa

    record = FieldType("object", False, fields=schema.fields)
    try:
        inferred = pa.array(records)
        array = conform(inferred, record, "")
        if array.null_count:
            raise _Misfit("", "a record is null")
        return array
    except (_Misfit, pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        pass
    # Something does not fit, or pyarrow's inference could not take it (an int beyond
    # int64 for a uint64 field, ints and doubles beyond 2**53 in one column): record by
    # record, naming the first that does not fit, else converting exact Python values.
    coerced = [check_record(r, record, f"/records/{i}/1") for i, r in enumerate(records)]
    return pa.array(coerced, schema.arrow_type()) if coerced else pa.nulls(0, record.arrow())


def _shown(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_record(value: Any, kind: FieldType, pointer: str) -> Any:
    """``value`` as an exact Python value of ``kind``, or :class:`SchemaMismatch` at ``pointer``.

    The record by record definition of what fits: whole numbers in int fields (within
    the type's range), any finite number in float64 fields, exactly the declared fields in
    objects (a nullable one may be left out), nulls only where nullable.
    """
    if value is None:
        if kind.nullable:
            return None
        raise SchemaMismatch(pointer, f"expected {_name(kind)}, got null")
    match kind.kind:
        case "object":
            return _check_object(value, kind, pointer)
        case "list":
            if not isinstance(value, list):
                raise SchemaMismatch(pointer, f"expected a list, got {_shown(value)}")
            assert kind.item is not None
            item = kind.item
            return [check_record(v, item, f"{pointer}/{i}") for i, v in enumerate(value)]
        case "int64" | "uint64":
            return _check_int(value, kind.kind, pointer)
        case "float64":
            if type(value) in (int, float) and math.isfinite(value):
                return float(value)
        case "string":
            if type(value) is str:
                return value
        case "bool":
            if type(value) is bool:
                return value
    raise SchemaMismatch(pointer, f"expected {_name(kind)}, got {_shown(value)}")


def _check_object(value: Any, kind: FieldType, pointer: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SchemaMismatch(pointer, f"expected an object, got {_shown(value)}")
    declared = {f.name for f in kind.fields}
    for name in value:
        if name not in declared:
            raise SchemaMismatch(f"{pointer}/{_escape(str(name))}", "unexpected field")
    checked: dict[str, Any] = {}
    for field in kind.fields:
        at = f"{pointer}/{_escape(field.name)}"
        if field.name not in value and not field.type.nullable:
            raise SchemaMismatch(at, f"missing (expected {_name(field.type)})")
        checked[field.name] = check_record(value.get(field.name), field.type, at)
    return checked


def _check_int(value: Any, kind: str, pointer: str) -> int:
    if type(value) is float and math.isfinite(value) and value == int(value):
        value = int(value)
    if type(value) is not int:
        raise SchemaMismatch(pointer, f"expected {kind}, got {_shown(value)}")
    low, high = _INT_RANGE[kind]
    if not low <= value <= high:
        raise SchemaMismatch(pointer, f"expected {kind}, got {value} (out of range)")
    return value


def _name(kind: FieldType) -> str:
    return {"list": "a list", "object": "an object"}.get(kind.kind, kind.kind)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# --------------------------------------------------------------------------- Arrow bodies


def from_arrow(body: bytes, schema: Schema) -> TypedRecords:
    """A typed batch of an Arrow IPC body: ``time`` and the schema's fields as columns.

    A column is cast to its declared type only where that is exact (integers within
    range, whole floats into ints, integers that a double holds exactly into float64,
    other string encodings into string); otherwise :class:`SchemaMismatch` names the
    column (and the first row, for a value out of range or a null where none may be). A
    scalar column of its field's exact type (the usual body) is only checked for nulls.
    """
    import pyarrow as pa

    _pa, times, (least, greatest), table = read_arrow_bounded(body)
    declared, fields, arrow_fields = _plan(schema)
    names = table.column_names
    for name in names:
        if name not in declared:
            raise SchemaMismatch(name, "unexpected column (not a field of the input's schema)")
    columns = []
    for field, arrow, scalar in fields:
        if field.name in names:
            column = table.column(field.name)
            if scalar and column.type == arrow and (field.type.nullable or not column.null_count):
                columns.append(column)  # exact already: nothing to cast or check
                continue
        elif field.type.nullable:
            column = pa.nulls(table.num_rows, arrow)
        else:
            raise SchemaMismatch(field.name, f"missing column (expected {_name(field.type)})")
        columns.append(_column(column, field.type, field.name))
    records = pa.StructArray.from_arrays(columns, fields=arrow_fields)
    return TypedRecords(times, records, least, greatest)


_Plan = tuple[frozenset[str], tuple[tuple[Field, Any, bool], ...], list[Any]]
_PLANS: dict[int, tuple[Schema, _Plan]] = {}


def _plan(schema: Schema) -> _Plan:
    """Names; (field, Arrow type, scalar?) each; Arrow fields. Kept by identity, with it."""
    kept = _PLANS.get(id(schema))
    if kept is not None and kept[0] is schema:
        return kept[1]
    fields = tuple(
        (f, f.type.arrow(), f.type.kind not in ("list", "object")) for f in schema.fields
    )
    plan = (frozenset(f.name for f in schema.fields), fields, [f.arrow() for f in schema.fields])
    if len(_PLANS) >= 256:
        _PLANS.clear()
    _PLANS[id(schema)] = (schema, plan)
    return plan


def _column(column: Any, kind: FieldType, name: str) -> Any:
    try:
        conformed = conform(column, kind, name)
        if not kind.nullable:
            _no_nulls(conformed, None, name)
        return conformed
    except _Misfit as misfit:
        row = "" if misfit.row is None else f"row {misfit.row}: "
        raise SchemaMismatch(misfit.where, f"{row}{misfit.detail}") from None


def from_batch(batch: Batch, schema: Schema) -> TypedRecords:
    """A logged typed batch read again (recovery): the same records as when it came."""
    if batch.format == JSON:
        pairs = batch.values() if batch.values is not None else json_pairs(batch.data)
        return from_values([t for t, _ in pairs], [r for _, r in pairs], schema)
    return from_arrow(batch.data, schema)


# --------------------------------------------------------------------------- columns


def conform(array: Any, kind: FieldType, where: str) -> Any:
    """``array`` as an array of ``kind``'s Arrow type, cast only where exact.

    Else :class:`_Misfit`. Nulls inside lists and objects are checked against their
    fields; the array's own nulls are the caller's to check.
    """
    import pyarrow as pa

    types = pa.types
    source = array.type
    if types.is_dictionary(source):
        return conform(array.dictionary_decode(), kind, where)
    if types.is_null(source):
        return pa.nulls(len(array), kind.arrow())
    if kind.kind == "object":
        return _conform_object(array, kind, where)
    if kind.kind == "list":
        return _conform_list(array, kind, where)
    allowed = {
        "int64": types.is_integer(source) or types.is_floating(source),
        "uint64": types.is_integer(source) or types.is_floating(source),
        "float64": types.is_integer(source) or types.is_floating(source),
        "string": types.is_string(source) or types.is_large_string(source),
        "bool": types.is_boolean(source),
    }[kind.kind]
    if not allowed:
        raise _Misfit(where, f"expected {kind.kind}, got a column of {source}")
    target = kind.arrow()
    if source == target:
        return array
    try:
        return array.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        row = _first_inexact(array, target)
        raise _Misfit(where, f"expected {kind.kind}: {error}", row) from None


def _first_inexact(array: Any, target: Any) -> int | None:
    """The first row whose value does not cast exactly (found by halves, in bulk)."""
    import pyarrow as pa

    low, high = 0, len(array)
    if high == 0:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        try:
            array.slice(low, middle - low).cast(target, safe=True)
            low = middle
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            high = middle
    return low


def _conform_object(array: Any, kind: FieldType, where: str) -> Any:
    import pyarrow as pa

    source = array.type
    if not pa.types.is_struct(source):
        raise _Misfit(where, f"expected an object, got a column of {source}")
    names = [source.field(i).name for i in range(source.num_fields)]
    declared = {f.name for f in kind.fields}
    for name in names:
        if name not in declared:
            raise _Misfit(_join(where, name), "unexpected field")
    if len(set(names)) < len(names):
        raise _Misfit(where, "a field appears twice")
    children = []
    for field in kind.fields:
        at = _join(where, field.name)
        if field.name in names:
            child = conform(array.field(field.name), field.type, at)
        elif field.type.nullable:
            child = pa.nulls(len(array), field.type.arrow())
        else:
            raise _Misfit(at, f"missing (expected {_name(field.type)})")
        if not field.type.nullable:
            _no_nulls(child, array, at)
        children.append(child)
    mask = array.is_null() if array.null_count else None
    fields = [f.arrow() for f in kind.fields]
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _conform_list(array: Any, kind: FieldType, where: str) -> Any:
    import pyarrow as pa

    source = array.type
    types = pa.types
    lists = (types.is_list, types.is_large_list, types.is_fixed_size_list)
    if not any(is_list(source) for is_list in lists):
        raise _Misfit(where, f"expected a list, got a column of {source}")
    if not types.is_list(source):
        array = array.cast(pa.list_(source.value_type))
    assert kind.item is not None
    values = conform(array.values, kind.item, f"{where}[]")
    if not kind.item.nullable and values.null_count:
        used = array.flatten()  # only the items of the rows' lists (a slice may share more)
        if used.null_count:
            import pyarrow.compute as pc

            item = int(pc.index(used.is_null(), True).as_py())
            row = int(pc.list_parent_indices(array)[item].as_py())
            raise _Misfit(f"{where}[]", f"expected {_name(kind.item)}, got null", row)
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(array.offsets, values, type=kind.arrow(), mask=mask)


def _no_nulls(child: Any, parent: Any, where: str) -> None:
    """:class:`_Misfit` if ``child`` is null where its (valid) parent row is not."""
    if not child.null_count:
        return
    import pyarrow.compute as pc

    nulls = child.is_null()
    if parent is not None and parent.null_count:
        nulls = pc.and_(nulls, parent.is_valid())
    if not pc.any(nulls).as_py():
        return
    row = int(pc.index(nulls, True).as_py())
    raise _Misfit(where, "null where the field is not nullable", row)


def _join(where: str, name: str) -> str:
    return name if not where else f"{where}.{name}"


__all__ = [
    "SchemaMismatch",
    "TypedRecords",
    "check_record",
    "conform",
    "from_arrow",
    "from_batch",
    "from_values",
    "ipc",
    "typed",
]
