"""Rows as Spark takes them: Arrow record batches of exactly the declared schema.

A page of an untyped output is ``time`` and ``record`` (JSON text): passed on as it is for
``time LONG, record STRING``, or parsed per record into ``recordSchema``'s columns. A page
of a typed output is ``time`` and the records' fields as typed columns: cast in bulk to
Spark's Arrow types (:func:`convert_typed`), never made into Python values.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)


class SourceError(RuntimeError):
    """The source cannot read what was asked (the message says why)."""


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects of batches of ``schema`` (types and nullability)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def _is_plain(schema: StructType) -> bool:
    return [f.name for f in schema.fields] == ["time", "record"]


def _typed(
    times: list[int], records: list[str], schema: StructType, target: pa.Schema
) -> pa.RecordBatch:
    names = schema.fieldNames()
    rows: list[dict[str, Any]] = []
    for time, text in zip(times, records, strict=True):
        value = orjson.loads(text)
        row = dict(value) if isinstance(value, dict) else {}
        if "record" in names:
            row["record"] = text
        row["time"] = time
        rows.append(row)
    try:
        return pa.RecordBatch.from_pylist(rows, schema=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise SourceError(
            f"a record does not fit recordSchema ({schema.simpleString()}): {error}"
        ) from None


_SCALARS: dict[str, Any] = {
    "int64": LongType,
    "uint64": lambda: DecimalType(20, 0),  # Spark has no unsigned LONG: all of u64 fits
    "float64": DoubleType,
    "string": StringType,
    "bool": BooleanType,
}


def _spark_type(kind: Any) -> tuple[DataType, bool]:
    """The Spark type of a schema type (its JSON form) and whether it is nullable."""
    if isinstance(kind, str):
        return _SCALARS[kind.rstrip("?")](), kind.endswith("?")
    nullable = bool(kind.get("nullable", False))
    if "list" in kind:
        item, item_nullable = _spark_type(kind["list"])
        return ArrayType(item, item_nullable), nullable
    return typed_struct(kind["object"], time=False), nullable


def typed_struct(schema: dict[str, Any], time: bool = True) -> StructType:
    """The Spark schema of a typed output's rows: ``time LONG`` and the records' fields.

    >>> typed_struct({"key": "string", "n": "int64?"}).simpleString()
    'struct<time:bigint,key:string,n:bigint>'
    """
    fields = [StructField("time", LongType(), True)] if time else []
    for name, kind in schema.items():
        spark, nullable = _spark_type(kind)
        fields.append(StructField(name, spark, nullable))
    return StructType(fields)


def convert_typed(batch: pa.RecordBatch, schema: StructType, target: pa.Schema) -> Any:
    """A record batch of exactly ``target`` from a typed page's columns, cast in bulk.

    A declared field the output does not have is :class:`SourceError` (a nullable one is
    null); so is ``record``, which a typed output does not carry as JSON text.
    """
    names = batch.schema.names
    columns = []
    for field in target:
        if field.name in names:
            column = batch.column(field.name)
            columns.append(column if column.type == field.type else column.cast(field.type))
        elif field.nullable and field.name != "record":
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            raise SourceError(
                f"the output is typed ({', '.join(names[1:])}): it has no column "
                f"{field.name!r} to read as {schema.simpleString()}"
            )
    return pa.RecordBatch.from_arrays(columns, schema=target)


def convert(times: pa.Array, records: pa.Array, schema: StructType, target: pa.Schema) -> Any:
    """A record batch of exactly ``target`` from time and JSON-text columns."""
    if _is_plain(schema):
        return pa.RecordBatch.from_arrays(
            [times.cast(target.field(0).type), records.cast(target.field(1).type)],
            schema=target,
        )
    return _typed(times.to_pylist(), records.to_pylist(), schema, target)
