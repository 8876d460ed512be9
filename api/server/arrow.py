"""Arrow IPC stream bodies: pushes and staging from columnar producers (Spark), columnar reads.

A body (``application/vnd.apache.arrow.stream``) has a ``time`` column (integers) and either
a ``record`` column of JSON text, or any other columns: each row then becomes the JSON
object of its columns. A read answers with columns ``time`` (int64) and ``record`` (JSON
text). pyarrow is imported only when an Arrow body arrives: it comes with the ``spark``
extra, and without it such requests get 415.

A staged body stays columnar (:class:`ArrowRecords`): its shape and times are checked in
bulk when it arrives (a JSON ``record`` column is decoded then, so a bad one is refused at
once), and its rows become Python records once, when the transaction is committed, grouped
by time in bulk.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import orjson

from service.app import BadRequest, ServiceError

ARROW_STREAM = "application/vnd.apache.arrow.stream"

MAX_ARROW_TIME = 2**63 - 1
"""The largest time an Arrow read carries: its ``time`` column is int64, as Spark's LONG."""

_WIDEST_BUILDER = 64
"""Rows with more record columns than this become dicts by pyarrow's (slower) ``to_pylist``."""


class UnsupportedMediaType(ServiceError):
    """An Arrow body on a server without pyarrow (install the ``spark`` extra)."""

    status = 415
    slug = "unsupported-media-type"
    title = "Unsupported media type"


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.compute
        import pyarrow.ipc
    except ImportError:
        raise UnsupportedMediaType(
            f"{ARROW_STREAM} bodies need pyarrow on the server (the spark extra)"
        ) from None
    return pa


def _jsonable(pa: Any, kind: Any) -> bool:
    """Whether values of ``kind`` become Python values that are JSON (orjson writes them)."""
    types = pa.types
    if (
        types.is_integer(kind)
        or types.is_floating(kind)
        or types.is_boolean(kind)
        or types.is_string(kind)
        or types.is_large_string(kind)
        or types.is_null(kind)
        or types.is_date(kind)
        or types.is_timestamp(kind)
    ):
        return True
    if types.is_list(kind) or types.is_large_list(kind) or types.is_fixed_size_list(kind):
        return _jsonable(pa, kind.value_type)
    if types.is_struct(kind):
        return all(_jsonable(pa, kind.field(i).type) for i in range(kind.num_fields))
    if types.is_dictionary(kind):
        return bool(_jsonable(pa, kind.value_type))
    return False


def _type_depth(pa: Any, kind: Any) -> int:
    """How many lists and objects a value of ``kind`` nests (a scalar is 0)."""
    types = pa.types
    if types.is_list(kind) or types.is_large_list(kind) or types.is_fixed_size_list(kind):
        return 1 + _type_depth(pa, kind.value_type)
    if types.is_struct(kind):
        return 1 + max(
            (_type_depth(pa, kind.field(i).type) for i in range(kind.num_fields)), default=0
        )
    if types.is_dictionary(kind):
        return _type_depth(pa, kind.value_type)
    return 0


@cache
def _builder(width: int) -> Callable[..., list[dict[str, Any]]]:
    """A function making one dict per row from ``width`` names and ``width`` column lists.

    Generated once per width, because a comprehension building ``{k0: v0, k1: v1}`` is about
    twice as fast as ``dict(zip(names, row))`` or pyarrow's ``to_pylist``. Its source holds
    nothing from a request: only numbered parameter names.
    """
    keys = [f"k{i}" for i in range(width)]
    columns = [f"c{i}" for i in range(width)]
    values = [f"v{i}" for i in range(width)]
    row = "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, values, strict=True)) + "}"
    unpack = "(" + ", ".join(values) + ("," if width == 1 else "") + ")"
    source = (
        f"def build({', '.join(keys + columns)}):\n"
        f"    return [{row} for {unpack} in zip({', '.join(columns)})]\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<arrow rows of {width} columns>", "exec"), namespace)
    return namespace["build"]  # type: ignore[no-any-return]


class ArrowRecords:
    """An Arrow body's records as columns: the :class:`~service.app.inputs.Columns` of a stage.

    ``times`` is a uint64 array (every time checked to be in ``[0, 2**64)``); the records
    are either ``decoded`` (a ``record`` column of JSON text, decoded when the body arrived)
    or the body's other columns (``table``), made into dicts only by :meth:`records` and
    :meth:`by_time`.
    """

    __slots__ = ("_decoded", "_pa", "_table", "greatest", "least", "times")

    def __init__(self, pa: Any, times: Any, table: Any, decoded: list[Any] | None) -> None:
        self._pa = pa
        self.times = times
        self._table = table
        self._decoded = decoded
        if len(times):
            bounds = pa.compute.min_max(times)
            self.least: int = bounds["min"].as_py()
            self.greatest: int = bounds["max"].as_py()
        else:
            self.least = self.greatest = 0

    def __len__(self) -> int:
        return len(self.times)

    @property
    def decoded(self) -> list[Any] | None:
        """The records, if they came as a column of JSON text (else ``None``: columns)."""
        return self._decoded

    def row_depth(self) -> int:
        """How deeply a record (an object of the columns) nests: 1 + its deepest column's."""
        if self._decoded is not None or self._table.num_columns == 0:
            return 1
        return 1 + max(_type_depth(self._pa, f.type) for f in self._table.schema)

    def time_at(self, index: int) -> int:
        """The time of record ``index``."""
        return int(self.times[index].as_py())

    def first_before(self, time: int) -> int:
        """The index of the first record before ``time`` (-1 if none)."""
        pa = self._pa
        earlier = pa.compute.less(self.times, pa.scalar(time, pa.uint64()))
        return int(pa.compute.index(earlier, True).as_py())

    def records(self, order: Any = None) -> list[Any]:
        """The records as Python values, in staging order or in the order of ``order``."""
        if self._decoded is not None:
            if order is None:
                return list(self._decoded)
            decoded = self._decoded
            return [decoded[i] for i in order.to_pylist()]
        if self._table.num_columns == 0:  # only times: every record is {}
            return [{} for _ in range(len(self.times))]
        table = self._table if order is None else self._table.take(order)
        width = table.num_columns
        if width > _WIDEST_BUILDER:
            return list(table.to_pylist())
        names = table.column_names
        return _builder(width)(*names, *(column.to_pylist() for column in table.columns))

    def by_time(self) -> list[tuple[int, list[Any]]]:
        """The records grouped by time, ascending, each group in staging order (new lists).

        A stable sort of the times in bulk, then one conversion to Python of the sorted rows,
        cut at the boundaries between times.
        """
        if not len(self):
            return []
        if self.least == self.greatest:
            return [(self.least, self.records())]
        compute = self._pa.compute
        order = compute.sort_indices(self.times)  # stable: ties keep their order
        runs = compute.run_end_encode(self.times.take(order))  # one run per distinct time
        records = self.records(order)
        groups: list[tuple[int, list[Any]]] = []
        start = 0
        for time, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
            groups.append((time, records[start:end]))
            start = end
        return groups

    def pairs(self) -> list[tuple[Any, Any]]:
        """``(time, record)`` pairs in staging order."""
        return list(zip(self.times.to_pylist(), self.records(), strict=True))


def columns_from_arrow(body: bytes) -> ArrowRecords:
    """An Arrow IPC stream's records, checked in bulk; :class:`BadRequest` if malformed."""
    pa = _pyarrow()
    compute = pa.compute
    try:
        table = pa.ipc.open_stream(body).read_all()
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as error:
        raise BadRequest(f"the body is not an Arrow IPC stream: {error}") from None
    names = table.column_names
    if "time" not in names:
        raise BadRequest("an Arrow push needs a 'time' column")
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise BadRequest(f"the Arrow body has more than one column named {twice!r}")
    times = table.column("time").combine_chunks()
    if not pa.types.is_integer(times.type):
        raise BadRequest(f"the 'time' column must hold integers, not {times.type}")
    if times.null_count:
        raise BadRequest("the 'time' column has nulls")
    if pa.types.is_signed_integer(times.type) and len(times):
        negative = compute.less(times, 0)
        if compute.any(negative).as_py():
            index = compute.index(negative, True).as_py()
            raise BadRequest(f"row {index}: time {times[index].as_py()} is outside [0, 2**64)")
    times = times.cast(pa.uint64())
    rest = table.drop_columns(["time"]).combine_chunks()
    if rest.column_names == ["record"]:
        column = rest.column("record")
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise BadRequest(f"the 'record' column must hold JSON text, not {column.type}")
        decoded: list[Any] = []
        for index, text in enumerate(column.to_pylist()):
            try:
                decoded.append(None if text is None else orjson.loads(text))
            except orjson.JSONDecodeError:
                raise BadRequest(f"row {index}: the record is not valid JSON") from None
        return ArrowRecords(pa, times, None, decoded)
    for field in rest.schema:
        if not _jsonable(pa, field.type):
            raise BadRequest(
                f"column {field.name!r} holds {field.type}, which has no JSON form: send "
                f"such rows as JSON text in a 'record' column"
            )
    return ArrowRecords(pa, times, rest, None)


def records_from_arrow(body: bytes) -> list[tuple[Any, Any]]:
    """``(time, record)`` pairs from an Arrow IPC stream; :class:`BadRequest` if malformed."""
    return columns_from_arrow(body).pairs()


def arrow_from_times(entries: list[tuple[Any, list[Any]]]) -> bytes:
    """An Arrow IPC stream with one row per record: ``time`` (int64), ``record`` (JSON).

    Every time must be at most :data:`MAX_ARROW_TIME` (the caller checks).
    """
    pa = _pyarrow()
    times: list[int] = []
    records: list[str] = []
    for time, batch in entries:
        times.extend([time] * len(batch))
        records.extend(orjson.dumps(r).decode() for r in batch)
    schema = pa.schema(
        [pa.field("time", pa.int64(), False), pa.field("record", pa.string(), False)]
    )
    table = pa.table(
        {"time": pa.array(times, pa.int64()), "record": pa.array(records, pa.string())},
        schema=schema,
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
