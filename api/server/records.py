"""Limits on one record, checked where records arrive: how deeply it nests, how large it is.

A record nested a few hundred levels deep used to be accepted and then poison its output:
orjson, which encodes every answer and event, refuses to go deeper than 254 levels, so the
output's pages answered 500 and its subscribers stalled. Such records (and records larger
than ``max_record_bytes``) are refused with a 422 naming the limit and the record, before
any of the batch is applied.

Both checks cost a fraction of decoding the batch, with no Python call per record on the
way that accepts it (only a refusal looks at records one by one, to name the first):

* depth: orjson encodes the batch wrapped in enough lists that a record deeper than the
  limit reaches orjson's own nesting limit (about a fifth of ``orjson.loads``' time);
* size: only a body larger than ``max_record_bytes`` can hold a record that is; only then
  is each record encoded, by ``map`` over ``orjson.dumps`` (C calls).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from service.app import ArrowRecords, Invalid, Limits, TypedRecords

ORJSON_DEPTH = 254
"""The deepest nesting orjson encodes (its recursion limit refuses 255)."""

DEPTH_HEADROOM = 8
"""Levels an answer wraps around a record (pages, events, frames, arrays of them)."""

MOST_RECORD_DEPTH = ORJSON_DEPTH - DEPTH_HEADROOM
"""The largest ``max_record_depth`` that leaves every answer holding a record encodable."""


def record_depth(record: Any) -> int:
    """How many lists and objects nest in ``record`` (a scalar is 0, ``[1]`` is 1).

    Iterative, so that a record deeper than the interpreter's recursion limit is measured.

    >>> record_depth(5), record_depth([1, {"a": [2]}]), record_depth({})
    (0, 3, 1)
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(record, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def check_records(
    records: Sequence[Any],
    body_bytes: int,
    limits: Limits,
    pointer: Callable[[int], str] = lambda index: f"/records/{index}/1",
) -> None:
    """:class:`Invalid` (422) naming the first record over a limit; nothing if none is.

    The limits are ``max_record_depth`` and ``max_record_bytes``.

    Args:
        records: The batch's records (without their times).
        body_bytes: The size of what carried them: no record is larger.
        limits: The server's limits.
        pointer: The JSON pointer of the ``index``-th record in the request, for the problem.
    """
    most = min(limits.max_record_depth, MOST_RECORD_DEPTH)
    wrapped: Any = records
    for _ in range(ORJSON_DEPTH - 1 - most):
        wrapped = (wrapped,)
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        _refuse_first(records, most, limits, pointer)
    if body_bytes > limits.max_record_bytes:
        sizes = list(map(len, map(orjson.dumps, records)))
        largest = max(sizes, default=0)
        if largest > limits.max_record_bytes:
            index = sizes.index(largest)
            raise Invalid(
                f"record {index} is {largest} bytes, over max_record_bytes "
                f"({limits.max_record_bytes})",
                [{"pointer": pointer(index), "detail": "over max_record_bytes"}],
            )


def _refuse_first(
    records: Sequence[Any], most: int, limits: Limits, pointer: Callable[[int], str]
) -> None:
    for index, record in enumerate(records):
        depth = record_depth(record)
        if depth > most:
            raise Invalid(
                f"record {index} nests {depth} levels deep, beyond max_record_depth ({most})",
                [{"pointer": pointer(index), "detail": "beyond max_record_depth"}],
            )
        try:
            orjson.dumps(record)
        except orjson.JSONEncodeError as error:
            raise Invalid(
                f"record {index} cannot be stored: {error}",
                [{"pointer": pointer(index), "detail": str(error)}],
            ) from None


def check_columns(columns: ArrowRecords, body_bytes: int, limits: Limits) -> None:
    """:func:`check_records` for a staged Arrow body, which stays columnar until its commit.

    Records of JSON text are checked as they were decoded; records made of typed columns
    nest as deeply as the schema says (checked once, not per row), and are made into Python
    values to be sized only if the body is larger than one record may be.
    """
    decoded = columns.decoded
    if decoded is not None:
        check_records(decoded, body_bytes, limits, row_pointer)
        return
    most = min(limits.max_record_depth, MOST_RECORD_DEPTH)
    depth = columns.row_depth()
    if depth > most and len(columns):
        raise Invalid(
            f"record 0 nests {depth} levels deep, beyond max_record_depth ({most}): the "
            "columns' types nest that deep",
            [{"pointer": row_pointer(0), "detail": "beyond max_record_depth"}],
        )
    if body_bytes > limits.max_record_bytes:
        check_records(columns.records(), body_bytes, limits, row_pointer)


def row_pointer(index: int) -> str:
    """How a staged Arrow body names its row ``index`` in a problem (``row 3``)."""
    return f"row {index}"


_SCALAR_JSON_BYTES = {"int64": 20, "uint64": 20, "float64": 25, "bool": 5}
"""The most bytes a value of each fixed-width type encodes to in JSON (``-9223372036854775808``,
``18446744073709551615``, a double's shortest form, ``false``); ``null`` is 4."""


def check_typed(
    records: TypedRecords,
    body_bytes: int,
    limits: Limits,
    pointer: Callable[[int], str] = lambda index: f"/records/{index}/1",
) -> None:
    r""":func:`check_records` for a typed Arrow batch, in bulk: the same refusals, the same record.

    A record's size is its JSON encoding's, as for any other batch; its depth is its
    schema's, checked once (only lists and objects nest). For records of scalar fields, a
    row's JSON is bounded without encoding it: a fixed number of bytes per field for names,
    numbers and bools, and at most 6 bytes per byte of a string (``\u00XX`` for a control
    character) plus its quotes. The usual batch is cleared by the size of its strings' data
    buffers (no row holds more); otherwise each row's string bytes come from the offsets,
    and only rows whose bound is over ``max_record_bytes`` are encoded, to find the largest
    (so the same record is named as :func:`check_records` would). Records with lists or
    objects are encoded, as an untyped body's are, only when the body is large enough that
    one could be over the limit.
    """
    most = limits.max_record_bytes
    if not len(records):
        return
    fields = records.records.type
    bound = _fixed_bytes(fields)
    if bound is None:  # lists or objects: as an untyped body's columns are (check_columns)
        _check_nested(records, body_bytes, limits, pointer)
        return
    base, strings = bound
    # No row holds more string bytes than all the strings' data buffers together.
    text = sum(_data_bytes(records.records.field(index)) for index in strings)
    if base + 6 * min(text, body_bytes) <= most:
        return  # no row's strings are long enough
    import pyarrow.compute as pc

    if not strings:
        over = list(range(len(records)))  # a limit below a record of numbers: each is sized
    else:
        columns = records.records.flatten()
        lengths = _lengths(pc, columns[strings[0]])
        for index in strings[1:]:
            lengths = pc.add(lengths, _lengths(pc, columns[index]))
        if base + 6 * pc.max(lengths).as_py() <= most:
            return
        over = pc.indices_nonzero(pc.greater(lengths, (most - base) // 6)).to_pylist()
    sizes = [len(orjson.dumps(records.records[row].as_py())) for row in over]
    largest = max(sizes)
    if largest > most:
        index = over[sizes.index(largest)]
        raise Invalid(
            f"record {index} is {largest} bytes, over max_record_bytes ({most})",
            [{"pointer": pointer(index), "detail": "over max_record_bytes"}],
        )


def _depth(kind: Any) -> int:
    """How many lists and objects a value of the Arrow type ``kind`` nests (a scalar is 0)."""
    import pyarrow as pa

    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return 1 + _depth(kind.value_type)
    if pa.types.is_struct(kind):
        return 1 + max((_depth(kind.field(i).type) for i in range(kind.num_fields)), default=0)
    return 0


def _fixed_bytes(fields: Any) -> tuple[int, list[int]] | None:
    """The JSON bytes of a record of ``fields`` but its strings' text, and which are strings.

    ``None`` when a field is a list or an object.
    """
    base, strings = 1, []  # "{" (each field adds its comma or the closing "}")
    for index in range(fields.num_fields):
        field = fields.field(index)
        base += len(orjson.dumps(field.name)) + 2  # "name": and the comma
        kind = str(field.type)
        if kind in ("string", "large_string"):
            base += 4  # its quotes (or null)
            strings.append(index)
        elif kind in _SCALAR_JSON_BYTES:
            base += _SCALAR_JSON_BYTES[kind]
        else:
            return None
    return base, strings


def _check_nested(
    records: TypedRecords, body_bytes: int, limits: Limits, pointer: Callable[[int], str]
) -> None:
    """:func:`check_typed` for records with lists or objects: the depth, then the sizes."""
    deepest = min(limits.max_record_depth, MOST_RECORD_DEPTH)
    depth = _depth(records.records.type)
    if depth > deepest:
        raise Invalid(
            f"record 0 nests {depth} levels deep, beyond max_record_depth ({deepest}): "
            "the input's schema nests that deep",
            [{"pointer": pointer(0), "detail": "beyond max_record_depth"}],
        )
    if body_bytes > limits.max_record_bytes:
        check_records(records.records.to_pylist(), body_bytes, limits, pointer)


def _data_bytes(strings: Any) -> int:
    """The size of a string array's data buffer: at least the bytes of all its strings."""
    data = strings.buffers()[2]
    return 0 if data is None else int(data.size)


def _lengths(pc: Any, strings: Any) -> Any:
    """Each string's length in bytes (0 for a null)."""
    lengths = pc.binary_length(strings)
    return lengths.fill_null(0) if lengths.null_count else lengths
