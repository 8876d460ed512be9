"""Batches as the columnar operators see them: record batches of struct records.

A channel's :class:`~operators.runtime.Columns` holds records as one struct array (a typed
input's records); pyarrow's functions work on record batches and tables, one column per
field. These helpers go between the two, and convert a list batch (an untyped stream) once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from operators.runtime import Batch, Columns

if TYPE_CHECKING:
    import pyarrow as pa


def record_batch(batch: Batch, operator: str) -> pa.RecordBatch:
    """``batch`` as a record batch: one column per field of its records.

    A list of dicts is converted with ``pa.RecordBatch.from_pylist`` (one call per batch).

    Raises:
        TypeError: the records are not objects with fields (``operator`` names the caller).
    """
    import pyarrow as pa

    if isinstance(batch, list):
        try:
            return pa.RecordBatch.from_pylist(batch)
        except (pa.ArrowInvalid, pa.ArrowTypeError, AttributeError, TypeError) as error:
            raise TypeError(f"{operator}: records must be objects with fields ({error})") from None
    if not pa.types.is_struct(batch.type):
        raise TypeError(f"{operator}: records must be objects with fields, not {batch.type}")
    return batch.record_batch()


def columns(table: pa.RecordBatch | pa.Table) -> Columns | None:
    """The rows of ``table`` as a container (``None`` if it has none: never sent)."""
    if not table.num_rows:
        return None
    return Columns.of(table)


def table_of(batches: Sequence[Columns]) -> pa.Table:
    """One table of the records of ``batches`` (all of one struct type), without copying."""
    import pyarrow as pa

    return pa.Table.from_batches([batch.record_batch() for batch in batches])


def check_fields(schema: pa.Schema, names: Sequence[str], operator: str) -> None:
    """Raise naming the first of ``names`` that is not a field of ``schema``."""
    for name in names:
        if schema.get_field_index(name) < 0:
            raise KeyError(f"{operator}: the records have no field {name!r} ({schema.names})")


def key_names(keys: str | Sequence[str], operator: str) -> list[str]:
    """Key field names as a list (one name may be given alone)."""
    names = [keys] if isinstance(keys, str) else list(keys)
    if not names:
        raise ValueError(f"{operator}: at least one key field is needed")
    return names
