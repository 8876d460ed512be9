"""Inputs: how records from outside enter a dataflow.

``scope.new_input()`` returns an :class:`InputHandle` and the stream of what is sent through
it. The handle holds a capability at its current time: records are sent at that time, and
``advance_to`` moves it later, telling the dataflow that earlier times are complete here.

``scope.new_input(schema=pa.schema(...))`` makes a *typed* input (:class:`TypedInputHandle`):
its records are objects with the schema's fields, sent as Arrow columns
(:class:`~operators.runtime.Columns` of one struct type, one container per ``send_batch``),
so the columnar operators (:mod:`operators.columnar`) take them as they are. A batch of
another schema is refused (:class:`SchemaMismatch`, naming the field), before anything of it
is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.ports import OutputPort
from operators.progress import check_time, less_equal
from operators.runtime import Columns, Interest, Scope
from operators.runtime.arrow import use_engine_pool
from operators.stream import Stream

if TYPE_CHECKING:
    import pyarrow as pa

_BATCH = 1024
"""Single records sent with :meth:`InputHandle.send` are buffered into batches of this many."""


class InputClosed(RuntimeError):
    """The input was closed: nothing more can be sent through it."""


class InputHandle:
    """Sends records into a dataflow at its current time, and advances that time."""

    __slots__ = ("_buffer", "_capability", "_output")

    def __init__(self, output: OutputPort, capability: Capability) -> None:
        self._output = output
        self._capability: Capability | None = capability
        self._buffer: list[Any] = []

    @property
    def time(self) -> Hashable:
        """The current time: records sent now carry it."""
        return self._open().time

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._capability is None

    def _open(self) -> Capability:
        if self._capability is None:
            raise InputClosed("the input is closed")
        return self._capability

    def send(self, record: Any) -> None:
        """Send one record at the current time."""
        self._open()
        self._buffer.append(record)
        if len(self._buffer) >= _BATCH:
            self.flush()

    def send_batch(self, records: Iterable[Any] | Columns) -> None:
        """Send many records at the current time (copied: the caller may reuse its list).

        :class:`~operators.runtime.Columns` are sent as they are (they are immutable), and
        travel as columns as far as the operators downstream take them so.
        """
        capability = self._open()
        self.flush()
        batch = records if isinstance(records, Columns) else list(records)
        if batch:
            self._output.give_batch(capability, batch)
            self._output.operator.touch()

    def flush(self) -> None:
        """Send buffered single records now."""
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._output.give_batch(self._open(), batch)
            self._output.operator.touch()

    def advance_to(self, time: Hashable) -> None:
        """Move the current time to ``time``; an error if it is earlier than the current one."""
        capability = self._open()
        check_time(time)
        if not less_equal(capability.time, time):
            raise ValueError(
                f"cannot advance an input from {capability.time!r} to the earlier {time!r}"
            )
        self.flush()
        capability.downgrade(time)

    def close(self) -> None:
        """Send what is buffered and give up the capability: the input is complete."""
        if self._capability is None:
            return
        self.flush()
        self._capability.drop()
        self._capability = None


class SchemaMismatch(ValueError):
    """A batch sent into a typed input does not have the input's schema (the field is named)."""


class TypedInputHandle(InputHandle):
    """An :class:`InputHandle` whose records have a schema, and travel as Arrow columns.

    ``send_batch`` takes a ``pa.RecordBatch``, a ``pa.Table`` or
    :class:`~operators.runtime.Columns` of the schema (fields in any order; a nullable field
    of the batch is fine where the schema's is not, as long as it holds no null), or a list
    of dicts (converted with ``pa.RecordBatch.from_pylist``: keys outside the schema are
    ignored, a missing one is null). Each is sent as one container of the schema's struct
    type, the same type for every batch of the input.
    """

    __slots__ = ("schema", "type")

    def __init__(self, output: OutputPort, capability: Capability, schema: pa.Schema) -> None:
        import pyarrow as pa

        use_engine_pool()
        super().__init__(output, capability)
        self.schema = schema
        self.type = pa.struct(list(schema))
        """The records' Arrow type: a struct of the schema's fields."""

    def send_batch(self, records: Iterable[Any] | Columns | pa.RecordBatch | pa.Table) -> None:
        """Send a batch of the input's schema at the current time (nothing if it is empty).

        Raises:
            SchemaMismatch: a field is missing, extra, of another type, or null where the
                schema says it is not nullable; nothing of the batch is sent.
        """
        capability = self._open()
        self.flush()
        batch = self._columns(records)
        if batch is not None:
            self._output.give_batch(capability, batch)
            self._output.operator.touch()

    def flush(self) -> None:
        """Send buffered single records now (as one batch of columns)."""
        if self._buffer:
            records, self._buffer = self._buffer, []
            batch = self._columns(records)
            if batch is not None:
                self._output.give_batch(self._open(), batch)
                self._output.operator.touch()

    def _columns(self, records: Any) -> Columns | None:
        import pyarrow as pa

        if isinstance(records, Columns):
            if not pa.types.is_struct(records.type):
                raise SchemaMismatch(f"records of type {records.type}, not objects with fields")
            records = records.record_batch()
        elif isinstance(records, pa.Table):
            records = records.combine_chunks()
        elif not isinstance(records, pa.RecordBatch):
            rows = list(records)
            if not rows:
                return None
            try:
                records = pa.RecordBatch.from_pylist(rows, schema=self.schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as error:
                raise SchemaMismatch(_first_bad_field(self.schema, rows) or str(error)) from None
        if not records.num_rows:
            return None
        arrays = conform(self.schema, records)
        return Columns(pa.StructArray.from_arrays(arrays, fields=list(self.schema)))


def conform(schema: pa.Schema, batch: pa.RecordBatch | pa.Table) -> list[Any]:
    """The columns of ``batch`` in ``schema``'s order, checked against it.

    Raises:
        SchemaMismatch: naming the first field that is missing, not in the schema, of
            another type, or holds nulls where the schema's field is not nullable.
    """
    names = set(schema.names)
    for name in batch.schema.names:
        if name not in names:
            raise SchemaMismatch(f"field {name!r} is not in the input's schema ({schema.names})")
    arrays = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            raise SchemaMismatch(f"field {field.name!r} is missing (expected {field.type})")
        column = batch.column(index)
        if not column.type.equals(field.type):
            raise SchemaMismatch(f"field {field.name!r}: expected {field.type}, got {column.type}")
        if column.null_count and not field.nullable:
            raise SchemaMismatch(
                f"field {field.name!r} is not nullable, and {column.null_count} records have null"
            )
        arrays.append(column.combine_chunks() if hasattr(column, "combine_chunks") else column)
    return arrays


def _first_bad_field(schema: pa.Schema, rows: list[Any]) -> str | None:
    """Which field of which record of a list does not convert (the list path only)."""
    import pyarrow as pa

    for number, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"record {number}: not an object with fields, but {type(row).__name__}"
        for field in schema:
            try:
                pa.array([row.get(field.name)], field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as error:
                return f"record {number}, field {field.name!r}: {error}"
    return None


def new_input(
    scope: Scope, name: str = "Input", schema: pa.Schema | None = None
) -> tuple[InputHandle, Stream]:
    """An input operator in ``scope``: the handle to send with, and its stream.

    With ``schema``, the input is typed (:class:`TypedInputHandle`): its records travel as
    Arrow columns of the schema's fields.
    """
    builder = OperatorBuilder(scope, name)
    output, stream = builder.new_output()
    handles: list[InputHandle] = []

    def constructor(capabilities: list[Capability]) -> Callable[[], bool]:
        if schema is None:
            handles.append(InputHandle(output, capabilities[0]))
        else:
            handles.append(TypedInputHandle(output, capabilities[0], schema))
        return lambda: False  # all its work happens in the handle's calls

    builder.build(constructor, Interest.NEVER)
    handle = handles[0]
    scope.worker.on_finish(handle.close)
    return handle, stream
