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

from service.app import ArrowRecords, Invalid, Limits

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
        check_records(decoded, body_bytes, limits, _row)
        return
    most = min(limits.max_record_depth, MOST_RECORD_DEPTH)
    depth = columns.row_depth()
    if depth > most and len(columns):
        raise Invalid(
            f"record 0 nests {depth} levels deep, beyond max_record_depth ({most}): the "
            "columns' types nest that deep",
            [{"pointer": _row(0), "detail": "beyond max_record_depth"}],
        )
    if body_bytes > limits.max_record_bytes:
        check_records(columns.records(), body_bytes, limits, _row)


def _row(index: int) -> str:
    return f"row {index}"
