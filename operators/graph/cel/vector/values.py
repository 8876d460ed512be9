"""Values of the vector backend: a column of CEL values, with the rows on which it failed.

A :class:`Vec` is what a node of an expression gives on a batch of ``n`` rows: its ``values``
(an Arrow array of ``n``, or one Arrow scalar standing for every row, as literals are) and
its ``errors`` (a boolean mask, true where the row failed; ``None`` when no row did; a
scalar for all rows at once). A null among the values is CEL's ``null`` where the row did not
fail, and means nothing where it did: what a failed row holds is never read, and every
kernel is given inputs on which it cannot raise, whatever a failed row holds (see
``numbers.py``).

Each node's :class:`Shape` is known when the expression is compiled, from the Arrow types of
its variables: its kind (CEL's type: ``int`` in an ``int64`` column, ``uint`` in ``uint64``,
``double`` in ``float64``, ``string``, ``bool``, ``null``, ``list``, ``struct`` for a map
with known keys, ``error`` for a node that fails on every row, ``opaque`` for an Arrow type
CEL has no operation on, which can only be passed along) and its Arrow type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from operators.graph.cel.core import EvaluationError

INT: Final = "int"
UINT: Final = "uint"
DOUBLE: Final = "double"
STRING: Final = "string"
BOOL: Final = "bool"
NULL: Final = "null"
LIST: Final = "list"
STRUCT: Final = "struct"
ERROR: Final = "error"
OPAQUE: Final = "opaque"

NUMERIC: Final = frozenset({INT, UINT, DOUBLE})

INT64: Final = pa.int64()
UINT64: Final = pa.uint64()
FLOAT64: Final = pa.float64()
BOOLEAN: Final = pa.bool_()

Datum = Any
"""An Arrow array, or an Arrow scalar standing for a whole column (pyarrow has no common type
that mypy knows for the two)."""


class NotVectorizedError(Exception):
    """Raised while compiling: the expression has a construct with no vector form."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Shape:
    """What is known of a node's values before any batch: its kind and its Arrow type."""

    kind: str
    type: pa.DataType


@dataclass(slots=True)
class Vec:
    """A node's values on a batch, and the rows on which it failed (see the module)."""

    values: Datum
    errors: Datum | None = None


@dataclass(slots=True)
class Env:
    """A batch: its length, and each variable's column."""

    length: int
    columns: dict[str, pa.Array]


Run = Callable[[Env], Vec]
"""A compiled node: its values on a batch."""


@dataclass(frozen=True, slots=True)
class Compiled:
    """A compiled node: its shape, how to compute it on a batch, and its value if a literal."""

    shape: Shape
    run: Run
    literal: object = None
    """The literal's value (``None`` for any other node, and for ``null``)."""


ERROR_SHAPE: Final = Shape(ERROR, pa.null())
NULL_SHAPE: Final = Shape(NULL, pa.null())
BOOL_SHAPE: Final = Shape(BOOL, BOOLEAN)
INT_SHAPE: Final = Shape(INT, INT64)
UINT_SHAPE: Final = Shape(UINT, UINT64)
DOUBLE_SHAPE: Final = Shape(DOUBLE, FLOAT64)
STRING_SHAPE: Final = Shape(STRING, pa.string())

_NULL: Final = pa.scalar(None, pa.null())
_ZERO_INT64: Final = pa.array([0], INT64)
ALWAYS: Final = pa.scalar(True)
"""The error mask of a node that fails on every row."""


def failing(_env: Env) -> Vec:
    """The run of a node that fails on every row."""
    return Vec(_NULL, ALWAYS)


FAILING: Final = Compiled(ERROR_SHAPE, failing)


def shape_of(arrow: pa.DataType) -> Shape:
    """The shape of a column of type ``arrow``, as the expression sees it (see :func:`conform`).

    Ints of every width are ``int64``, unsigned ints ``uint64``, floats ``float64`` (as the
    row backend sees them all: Python's ``int`` and ``float``), strings ``string``, a
    dictionary its values.
    """
    t = pa.types
    if t.is_dictionary(arrow):
        return shape_of(arrow.value_type)
    if t.is_signed_integer(arrow):
        return INT_SHAPE
    if t.is_unsigned_integer(arrow):
        return UINT_SHAPE
    if t.is_floating(arrow):
        return DOUBLE_SHAPE
    if t.is_string(arrow) or t.is_large_string(arrow) or t.is_string_view(arrow):
        return STRING_SHAPE
    if t.is_boolean(arrow):
        return BOOL_SHAPE
    if t.is_null(arrow):
        return NULL_SHAPE
    if t.is_struct(arrow):
        return Shape(STRUCT, arrow)
    if t.is_list(arrow) or t.is_large_list(arrow) or t.is_fixed_size_list(arrow):
        return Shape(LIST, arrow)
    return Shape(OPAQUE, arrow)


def conform(values: Datum, arrow: pa.DataType) -> Datum:
    """``values`` (a column of type ``arrow``) as :func:`shape_of` says the expression sees it."""
    wanted = shape_of(arrow).type
    if wanted == arrow:
        return values
    if pa.types.is_dictionary(arrow):
        values = values.dictionary_decode() if isinstance(values, pa.Array) else values.value
        return conform(values, arrow.value_type)
    return pc.cast(values, wanted)


def element_shape(shape: Shape) -> Shape:
    """The shape of a list's elements."""
    return shape_of(shape.type.value_type)


def field_shape(shape: Shape, name: str) -> Shape | None:
    """The shape of a struct's field ``name``, or ``None`` if it has none."""
    index = shape.type.get_field_index(name)
    return None if index < 0 else shape_of(shape.type.field(index).type)


# --------------------------------------------------------------------------- masks


def either(*masks: Datum | None) -> Datum | None:
    """The rows failed in any of ``masks`` (``None`` where none can have)."""
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    result = present[0]
    for mask in present[1:]:
        result = pc.or_(result, mask)
    return result


def nulls(values: Datum) -> Datum | None:
    """Where ``values`` are null (``None`` if nowhere)."""
    if isinstance(values, pa.Scalar):
        return None if values.is_valid else ALWAYS
    if values.null_count == 0:
        return None
    return pc.is_null(values)


def strict(*vecs: Vec) -> Datum | None:
    """The rows where an operand failed or is null.

    Both fail an operation that needs values (arithmetic, ordering, a function's argument).
    """
    return either(*(vec.errors for vec in vecs), *(nulls(vec.values) for vec in vecs))


def found(mask: Datum) -> Datum | None:
    """``mask`` (a boolean column, null counted false), or ``None`` if it is true nowhere."""
    if isinstance(mask, pa.Scalar):
        return mask if mask.as_py() else None
    if mask.null_count:
        mask = pc.fill_null(mask, False)
    return mask if pc.any(mask).as_py() else None


def bounds(values: Datum) -> tuple[Any, Any] | None:
    """The least and greatest of ``values`` (nulls aside), or ``None`` if all are null."""
    if isinstance(values, pa.Scalar):
        value = values.as_py()
        return None if value is None else (value, value)
    if values.null_count == len(values):
        return None
    extremes = pc.min_max(values)
    return extremes["min"].as_py(), extremes["max"].as_py()


def where(mask: Datum | None, replacement: Datum, values: Datum) -> Datum:
    """``values`` with ``replacement`` on the rows of ``mask`` (a guard before a kernel)."""
    if mask is None:
        return values
    return pc.if_else(mask, replacement, values)


def column(values: Datum, length: int) -> pa.Array:
    """``values`` as an array of ``length`` (a scalar repeated)."""
    if isinstance(values, pa.Scalar):
        return pa.repeat(values, length)
    return values


def as_mask(errors: Datum | None, length: int) -> pa.Array | None:
    """``errors`` as a boolean array of ``length``, or ``None`` if no row failed."""
    if errors is None:
        return None
    if isinstance(errors, pa.Scalar):
        return pa.repeat(pa.scalar(True), length) if errors.as_py() and length else None
    errors = pc.fill_null(errors, False) if errors.null_count else errors
    return errors if pc.any(errors).as_py() else None


def typed(values: Datum, arrow: pa.DataType) -> Datum:
    """``values`` as ``arrow`` if they are of no type.

    Nulls of no type are a ``null`` or a failing node; lists of them, ``[]``.
    """
    if values.type == arrow or not untyped(values.type):
        return values
    return values.cast(arrow) if isinstance(values, pa.Scalar) else pc.cast(values, arrow)


def untyped(arrow: pa.DataType) -> bool:
    """Whether ``arrow`` is the null type, or lists of it: what an empty list literal is."""
    if pa.types.is_list(arrow):
        return untyped(arrow.value_type)
    return bool(pa.types.is_null(arrow))


def by_distinct(values: Datum, fn: Callable[[Any], Any], arrow: pa.DataType) -> Vec:
    """``fn`` (the row backend's) on each distinct value of ``values``, taken to every row.

    For what Arrow has no kernel for, or none with CEL's semantics: one Python call per
    distinct value, not per row. A value on which ``fn`` raises :class:`EvaluationError`
    fails its rows. Nulls stay null (the caller fails them).
    """
    if isinstance(values, pa.Scalar):
        encoded = pa.array([values.as_py()], values.type).dictionary_encode()
    else:
        encoded = values.dictionary_encode()  # doubles by their bits: -0.0 apart from 0.0
    results: list[Any] = []
    bad: list[bool] = []
    for value in encoded.dictionary.to_pylist():
        if value is None:  # (a column of the null type keeps its null in the dictionary)
            results.append(None)
            bad.append(False)
            continue
        try:
            results.append(fn(value))
            bad.append(False)
        except EvaluationError:
            results.append(None)
            bad.append(True)
    mapped = pc.take(pa.array(results, arrow), encoded.indices)
    errors = pc.take(pa.array(bad, BOOLEAN), encoded.indices) if any(bad) else None
    if isinstance(values, pa.Scalar):
        return Vec(mapped[0], None if errors is None else errors[0])
    return Vec(mapped, None if errors is None else pc.fill_null(errors, False))


def per_row(mask: Datum, lengths: pa.Array) -> pa.Array:
    """How many elements of each row's list ``mask`` (over all elements) holds.

    The difference of ``mask``'s prefix sums at the row's last element and before its first.
    """
    ones = pc.cast(column(mask, int(pc.sum(lengths).as_py() or 0)), INT64)
    prefix = pa.concat_arrays([_ZERO_INT64, pc.cumulative_sum(ones)])
    ends = pc.cumulative_sum(lengths)
    return pc.subtract(pc.take(prefix, ends), pc.take(prefix, pc.subtract(ends, lengths)))


def positions(length: int) -> pa.Array:
    """``0, 1, ..., length - 1`` (an int64 column made by kernels)."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, INT64), length)), 1)
