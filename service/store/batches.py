"""Batches as they arrive and as the inputs' logs keep them: their bytes, and what they hold.

A producer's batch is kept as the bytes it came in (no second encoding on the way to the
disk): ``json``, a JSON object whose ``records`` member is ``[time, record]`` pairs (a push
body, a WebSocket push frame, a staging body), or ``arrow``, an Arrow IPC stream with a
``time`` column (integers) and either a ``record`` column of JSON text or any other columns
(each row then becomes the JSON object of its columns). A batch given as Python values (a
library user's push) is encoded as ``json`` once, when it is logged.

The same code reads a batch when it arrives (the API checks it) and when a log is replayed
(recovery), so both see the same records. A typed input's batches are read by
:mod:`service.store.typed`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson

from operators.progress import decode_time, encode_time

_WIDEST_BUILDER = 64
"""Rows with more record columns than this become dicts by pyarrow's (slower) ``to_pylist``."""

JSON = "json"
ARROW = "arrow"
FORMATS = (JSON, ARROW)


class BatchError(ValueError):
    """A batch's bytes are not what their format says (the message says what is wrong)."""


def pyarrow_module() -> Any:
    """pyarrow, with its ``compute`` and ``ipc`` modules (imported when first needed)."""
    import pyarrow as pa
    import pyarrow.compute
    import pyarrow.ipc

    return pa


Pairs = list[tuple[Hashable, Any]]
"""``(time, record)`` pairs, in arrival order."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch as it is logged: its format (``json`` or ``arrow``) and its bytes.

    A batch given as Python values carries ``values``, which makes its ``(time, record)``
    pairs: encoded as ``json`` only when :attr:`data` is first needed (a journal that keeps
    nothing never pays for it).
    """

    format: str
    raw: bytes | None = None
    values: Callable[[], Pairs] | None = None

    @staticmethod
    def of(times: Sequence[Hashable], records: Sequence[Any]) -> Batch:
        """A batch of Python values (equally long times and records)."""
        return Batch(JSON, None, lambda: list(zip(times, records, strict=True)))

    @staticmethod
    def later(pairs: Callable[[], Pairs]) -> Batch:
        """A batch of Python values made only if it is needed (by ``pairs()``)."""
        return Batch(JSON, None, pairs)

    @property
    def data(self) -> bytes:
        """The batch's bytes in its format."""
        if self.raw is not None:
            return self.raw
        assert self.values is not None
        pairs = [[encode_time(t), r] for t, r in self.values()]
        return orjson.dumps({"records": pairs}, option=orjson.OPT_NON_STR_KEYS)

    @property
    def size(self) -> int:
        """How many bytes the batch came as (0 for one given as Python values)."""
        return 0 if self.raw is None else len(self.raw)

    def pairs(self) -> Pairs:
        """The batch's ``(time, record)`` pairs; :class:`BatchError` if malformed."""
        if self.values is not None:
            return self.values()
        if self.format == JSON:
            return json_pairs(self.data)
        return arrow_records(self.data).pairs()

    def staged(self) -> Pairs | ArrowRecords:
        """What a staging request keeps of it: pairs, or an Arrow batch's columns."""
        if self.format == ARROW and self.values is None:
            return arrow_records(self.data)
        return self.pairs()


def json_pairs(data: bytes) -> Pairs:
    """The ``[time, record]`` pairs of a JSON object's ``records``, times decoded.

    Integer times (the common case) are taken as they are, in bulk.
    """
    try:
        document = orjson.loads(data)
        pairs = document["records"]
    except (orjson.JSONDecodeError, TypeError, KeyError) as error:
        raise BatchError(f"not a JSON batch with records: {error}") from None
    if not pairs:
        return []
    try:
        times, records = zip(*pairs, strict=True)
    except (TypeError, ValueError):
        raise BatchError("a JSON batch's records must be [time, record] pairs") from None
    if set(map(type, times)) != {int}:
        try:
            times = tuple(decode_time(t) for t in times)
        except ValueError as error:
            raise BatchError(str(error)) from None
    return list(zip(times, records, strict=True))


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
    """An Arrow batch's records as columns: what a staging request keeps until its commit.

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


def _one_batch(pa: Any, schema: Any, batches: list[Any]) -> Any:
    """The stream's rows as one record batch (the usual body is one already: no copy)."""
    if len(batches) == 1:
        return batches[0]
    combined = pa.Table.from_batches(batches, schema).combine_chunks().to_batches()
    if combined:
        return combined[0]
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def read_arrow(body: bytes) -> tuple[Any, Any, Any]:
    """pyarrow, an Arrow IPC stream's times (uint64, checked) and its other columns.

    The columns are one record batch.

    :class:`BatchError` if the body is not an IPC stream with a ``time`` column of
    integers in ``[0, 2**64)``, or has two columns of one name.
    """
    pa, times, _bounds, rest = read_arrow_bounded(body)
    return pa, times, rest


def read_arrow_bounded(body: bytes) -> tuple[Any, Any, tuple[int, int], Any]:
    """:func:`read_arrow`, with the least and greatest time (``(0, 0)`` for no rows).

    The times' least and greatest (a negative least is refused), then the column seen as
    uint64 without a copy (int64 and uint64 share their layout, and no time is negative).
    """
    pa = pyarrow_module()
    compute = pa.compute
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(body))
        batches = list(reader)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as error:
        raise BatchError(f"the body is not an Arrow IPC stream: {error}") from None
    table = _one_batch(pa, reader.schema, batches)
    names = table.column_names
    if "time" not in names:
        raise BatchError("an Arrow push needs a 'time' column")
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise BatchError(f"the Arrow body has more than one column named {twice!r}")
    times = table.column("time")
    kind = times.type
    if not pa.types.is_integer(kind):
        raise BatchError(f"the 'time' column must hold integers, not {kind}")
    if times.null_count:
        raise BatchError("the 'time' column has nulls")
    bounds = (0, 0)
    if len(times):
        values = times.to_numpy()  # no nulls: a view, and numpy's min and max are quicker
        bounds = (int(values.min()), int(values.max()))
        if bounds[0] < 0:
            index = compute.index(compute.less(times, 0), True).as_py()
            raise BatchError(f"row {index}: time {times[index].as_py()} is outside [0, 2**64)")
    if kind == pa.int64():
        times = times.view(pa.uint64())  # checked: no negative time
    elif kind != pa.uint64():
        times = times.cast(pa.uint64(), safe=False)  # checked: no negative time
    return pa, times, bounds, table.drop_columns(["time"])


def arrow_records(body: bytes) -> ArrowRecords:
    """An Arrow IPC stream's records, checked in bulk; :class:`BatchError` if malformed."""
    pa, times, rest = read_arrow(body)
    if rest.column_names == ["record"]:
        column = rest.column("record")
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise BatchError(f"the 'record' column must hold JSON text, not {column.type}")
        decoded: list[Any] = []
        for index, text in enumerate(column.to_pylist()):
            try:
                decoded.append(None if text is None else orjson.loads(text))
            except orjson.JSONDecodeError:
                raise BatchError(f"row {index}: the record is not valid JSON") from None
        return ArrowRecords(pa, times, None, decoded)
    for field in rest.schema:
        if not _jsonable(pa, field.type):
            raise BatchError(
                f"column {field.name!r} holds {field.type}, which has no JSON form: send "
                f"such rows as JSON text in a 'record' column"
            )
    return ArrowRecords(pa, times, rest, None)
