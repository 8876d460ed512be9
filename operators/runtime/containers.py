"""Containers: what a channel carries at one time.

A message on a channel is ``(time, batch)``, and a batch is a *container*: anything with a
length, which is all that progress tracking counts (as timely's ``Container`` needs only its
``record_count``). There are two kinds:

* a Python ``list`` of records: the library's functions, and every stream without a schema;
* :class:`Columns`: records of one Arrow type held as one Arrow array (a struct array when
  the records are objects, as a typed input's are), so that operators that know columns work
  on whole columns, and the fabric, capture and the input journal move Arrow buffers rather
  than one Python object per record.

A container's length never changes on its way: no channel splits a record, merges two, or
drops one, so what a sender counts as produced its receivers count as consumed. Containers
are never empty on a channel, and never modified once sent (every edge of a port gets the
same object).

Operators written record by record never see :class:`Columns`: an input port hands them a
list, made once per batch by :func:`rows_of`, unless the operator was built to take
containers as they are (``new_input(..., columns=True)``): pipeline forwarders, exchange,
capture, and the columnar operators.

``pyarrow`` is imported only where columns are made or read, so a program that never makes
one does not pay for importing it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import pyarrow as pa


class Columns:
    """Records of one Arrow type, as one Arrow array: a batch that travels as columns.

    The records are the array's elements: ``Columns(pa.array([1, 2])).rows() == [1, 2]``,
    and a struct array's elements are dicts. Immutable, as every container on a channel is.
    """

    __slots__ = ("array",)

    def __init__(self, array: pa.Array) -> None:
        self.array = array

    @classmethod
    def of(cls, table: pa.RecordBatch | pa.Table) -> Columns:
        """The rows of a record batch (or a table's) as records: one dict per row."""
        import pyarrow as pa

        if isinstance(table, pa.Table):
            table = table.combine_chunks().to_batches()[0] if table.num_rows else None
            if table is None:
                raise ValueError("a container is never empty: this table has no rows")
        return cls(table.to_struct_array())

    def __len__(self) -> int:
        return len(self.array)

    @property
    def type(self) -> pa.DataType:
        """The records' Arrow type."""
        return self.array.type

    @property
    def nbytes(self) -> int:
        """The size of the array's buffers."""
        return int(self.array.nbytes)

    def rows(self) -> list[Any]:
        """The records as Python values (dicts for structs): one object per record."""
        return list(self.array.to_pylist())

    def __iter__(self) -> Iterator[Any]:
        # Iterating would give Arrow scalars, which look like records but are not: code that
        # takes a batch record by record calls rows() (or rows_of) instead.
        raise TypeError("Columns are not iterated record by record: call rows() first")

    def record_batch(self) -> pa.RecordBatch:
        """The records as a record batch: one column per field (struct records only)."""
        import pyarrow as pa

        return pa.RecordBatch.from_struct_array(self.array)

    def slice(self, offset: int, length: int) -> Columns:
        """Records ``offset`` to ``offset + length`` (no copy)."""
        return Columns(self.array.slice(offset, length))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Columns) and self.array.equals(other.array)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking containers are not keys

    def __repr__(self) -> str:
        return f"Columns({len(self)} of {self.array.type})"


Batch: TypeAlias = "list[Any] | Columns"
"""What a channel carries at one time: a list of records, or records as columns."""


def rows_of(batch: list[Any] | Columns) -> list[Any]:
    """The batch's records as a list (the list itself, for a list).

    >>> rows_of([1, 2])
    [1, 2]
    """
    return batch if isinstance(batch, list) else batch.rows()


def concat(batches: Sequence[Columns]) -> Columns:
    """One container holding the records of ``batches`` (of one type), in order."""
    import pyarrow as pa

    return Columns(pa.concat_arrays([batch.array for batch in batches]))
