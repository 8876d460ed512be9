"""Request bodies and WebSocket client frames: the service's pydantic models.

A request's graph is checked by its own model, :data:`api.graph_model.GRAPH`; pydantic is used
nowhere else.

These are the edge of the service (``docs/api.md``, ``openapi.yaml``, ``asyncapi.yaml``):
each body is parsed once, from bytes, with ``Model.model_validate_json(body)``, strictly
(``"1"`` is not ``1``, ``true`` is not ``1``, ``1.0`` is not ``1``) and refusing unknown
fields. Everything behind the edge uses plain dataclasses.

Times arrive in their JSON form (an integer, or ``[outer, inner]`` arrays) and leave the
models as engine times (``int`` or :class:`~operators.progress.Product`, see :data:`Time`):
checked and converted once, so a bad one is reported with a pointer to it, and what the
handlers pass on is what the engine takes. Times met elsewhere (query parameters, responses) are
converted by :mod:`api.codec`.
:func:`problem_from_validation_error` turns a :class:`~pydantic.ValidationError` into the
``problems`` of a 422 problem document, each with an RFC 6901 JSON pointer into the body.

>>> Push.model_validate_json(b'{"seq": 1, "records": [[0, "a"], [[1, 2], {"k": 1}]]}').records
[(0, 'a'), (Product(outer=1, inner=2), {'k': 1})]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias, cast

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetPydanticSchema,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from api.codec import time_from_json, time_to_json
from service.app import MAX_TIME, Product

TIME_ERROR = "a time is an integer in [0, 2**64) or an array [outer, inner] of two times"
"""The detail of every problem with a time."""


def _product_time(value: Any) -> Product[Any, Any]:
    """The product time of ``[outer, inner]`` (or of a Product); ``ValueError`` if not one."""
    if isinstance(value, Product):  # only when a model is built in Python, not from JSON
        return cast("Product[Any, Any]", time_from_json(value))
    if type(value) is not list or len(value) != 2:
        raise ValueError("not a product time")
    # Checks both coordinates, recursively (EventFormatError is a ValueError).
    return cast("Product[Any, Any]", time_from_json(value))


# The integer case (nearly every time) is checked by pydantic-core without calling Python;
# one custom error replaces the union's per-branch errors, so the pointer is the time's own.
_TIME_SCHEMA = core_schema.union_schema(
    [
        core_schema.int_schema(ge=0, le=MAX_TIME, strict=True),
        core_schema.no_info_plain_validator_function(_product_time),
    ],
    mode="left_to_right",
    custom_error_type="not_a_time",
    custom_error_message=TIME_ERROR,
    serialization=core_schema.plain_serializer_function_ser_schema(time_to_json, when_used="json"),
)

_TIME_JSON_SCHEMA: dict[str, Any] = {
    "title": "Time",
    "description": TIME_ERROR + " (see schemas/time.json)",
    "anyOf": [
        {"type": "integer", "minimum": 0, "maximum": MAX_TIME},
        {"type": "array", "minItems": 2, "maxItems": 2},
    ],
}

Time: TypeAlias = Annotated[
    int | Product[Any, Any],
    GetPydanticSchema(lambda _source, _handler: _TIME_SCHEMA),
    WithJsonSchema(_TIME_JSON_SCHEMA),
]
"""A time: parsed from an int in ``[0, 2**64)`` or ``[outer, inner]``, an int or a Product."""

TimedRecord: TypeAlias = tuple[Time, Any]
"""``[time, record]``: a record (any JSON value) with the time it is pushed at."""

SEQ_MAX = 2**63 - 1
"""The largest sequence number (it must fit a signed 64-bit integer, as in Spark)."""

TransactionId: TypeAlias = Annotated[str, Field(min_length=1, max_length=200)]
"""A transaction's name, chosen by the producer (also a path segment)."""

MAX_DISCARD = 100_000
"""The most transactions a commit may discard (a Spark job's attempts at every partition)."""

DIGEST_PATTERN = r"^[A-Za-z0-9_.:+/=-]{1,128}$"
"""A commit's ``digest``: up to 128 letters, digits and ``_ . : + / = -`` (hex, base64, a
prefix naming the hash)."""

MAX_DROPPED = 2**63 - 1
"""The most rows a commit may say it dropped."""


class _Body(BaseModel):
    """Strict, closed and immutable: what every body and frame model shares."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# --------------------------------------------------------------------------- HTTP bodies


class CreateDataflow(_Body):
    """``POST /v1/dataflows``: a graph to check and build, with an optional name.

    The graph is only required to be a JSON object here; its shape is then checked by the
    graph model (:data:`api.graph_model.GRAPH`) and its meaning by the graph compiler, each
    reporting every problem at once (422, pointers relative to the graph).

    >>> body = CreateDataflow.model_validate_json(b'{"graph": {"nodes": {}}, "name": "demo"}')
    >>> body.name, body.graph
    ('demo', {'nodes': {}})
    """

    name: str | None = Field(default=None, max_length=200)
    """A label for people (not unique; the dataflow's ``id`` identifies it)."""
    graph: dict[str, Any]
    """The graph (``docs/graphs.md``): ``time``, ``scopes``, ``nodes``, ``edges``."""


class ConsumerCommit(_Body):
    """``PUT .../outputs/{output}/consumers/{consumer}``: a reader's progress.

    >>> ConsumerCommit.model_validate_json(b'{"committed": 5}').committed
    5
    """

    committed: Time | None = None
    """Everything before this time has been read (``null``: nothing yet)."""


class OpenSession(_Body):
    """``POST .../inputs/{input}/sessions``: open a producer session.

    >>> OpenSession.model_validate_json(b'{"start": [2, 0]}').start
    Product(outer=2, inner=0)
    >>> OpenSession.model_validate_json(b"{}").start is None
    True
    """

    start: Time | None = None
    """The session's first time; by default the input's time (it may not be earlier)."""


class Push(_Body):
    """``POST .../sessions/{session}/push``: a batch of ``[time, record]``, whole or nothing.

    The number of records is not bounded here: the server checks it against its configured
    ``max_batch_records`` after parsing.

    >>> Push.model_validate_json(b'{"seq": 3, "records": [[5, "x"]]}').records
    [(5, 'x')]
    """

    seq: int = Field(ge=1, le=SEQ_MAX)
    """The batch's sequence number in its session (a retry repeats it)."""
    records: list[TimedRecord]
    """The records, each with its time."""


class Advance(_Body):
    """``POST .../sessions/{session}/advance``: move the session to a later time.

    >>> Advance.model_validate_json(b'{"time": 7}')
    Advance(time=7, seq=None)
    """

    time: Time
    """The session's new time (not earlier than its current one)."""
    seq: int | None = Field(default=None, ge=1, le=SEQ_MAX)
    """An optional sequence number, shared with the session's pushes."""


class Stage(_Body):
    """``PUT .../inputs/{input}/transactions/{txn}``: add records to a transaction.

    >>> Stage.model_validate_json(b'{"records": [[0, 1], [0, 2]]}').records
    [(0, 1), (0, 2)]
    """

    records: list[TimedRecord]
    """The records to stage, each with its time."""


class Commit(_Body):
    """``POST .../sessions/{session}/commit``: make transactions visible at once.

    The transactions must be distinct: committing one twice in a call would apply it twice.

    >>> Commit.model_validate_json(
    ...     b'{"transactions": ["t1", "t2"], "idempotency_key": "job-7", "advance_to": 4}'
    ... ).transactions
    ['t1', 't2']
    """

    transactions: list[TransactionId] = Field(min_length=1, max_length=1000)
    """The staged transactions to commit, in order."""
    idempotency_key: str = Field(min_length=1, max_length=200)
    """Committing again with the same key (and transactions) applies once."""
    advance_to: Time | None = None
    """Advance the session to this time in the same step."""
    discard: list[TransactionId] = Field(default_factory=list, max_length=MAX_DISCARD)
    """Transactions to abort once the commit is done (now, or before under the key): the
    producer's leftovers, such as failed attempts' transactions, cleaned up in the same call."""
    digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    """What the producer's write staged, in its own terms (the Spark sink: a SHA-256 of its
    rows). Under a key used before, equal digests answer the first commit's ack whatever
    transactions are named; different ones are 409 ``idempotency-key-reused``."""
    dropped: int = Field(default=0, ge=0, le=MAX_DROPPED)
    """Rows the producer's write dropped as late (before the input's time): added to the
    input's ``dropped_late`` when the commit is applied (once per key)."""

    @field_validator("transactions")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for transaction in value:
            if transaction in seen:
                raise PydanticCustomError(
                    "duplicate_transaction",
                    "transaction {transaction} is listed more than once",
                    {"transaction": repr(transaction)},
                )
            seen.add(transaction)
        return value


class InputCommit(Commit):
    """``POST .../inputs/{input}/commit``: commit without a session, at the input's time.

    As :class:`Commit`, but ``transactions`` may be empty: such a commit only advances the
    input (and, like any commit, uses up its idempotency key).

    >>> InputCommit.model_validate_json(
    ...     b'{"transactions": [], "idempotency_key": "job-7.b3", "advance_to": 4}'
    ... ).advance_to
    4
    """

    transactions: list[TransactionId] = Field(min_length=0, max_length=1000)
    """The staged transactions to commit, in order (none: only advance)."""


# --------------------------------------------------------------------------- WebSocket frames


class PushFrame(_Body):
    """A producer's batch over WebSocket: the :class:`Push` body with ``"type": "push"``.

    >>> PushFrame.model_validate_json(b'{"type": "push", "seq": 1, "records": []}').seq
    1
    """

    type: Literal["push"]
    """The frame's tag."""
    seq: int = Field(ge=1, le=SEQ_MAX)
    """The batch's sequence number in its session."""
    records: list[TimedRecord]
    """The records, each with its time."""


class AdvanceFrame(_Body):
    """A producer's advance over WebSocket: ``seq`` is required (acks are matched to it).

    >>> AdvanceFrame.model_validate_json(b'{"type": "advance", "seq": 2, "time": [1, 0]}').time
    Product(outer=1, inner=0)
    """

    type: Literal["advance"]
    """The frame's tag."""
    seq: int = Field(ge=1, le=SEQ_MAX)
    """The advance's sequence number, shared with the session's pushes."""
    time: Time
    """The session's new time."""


class CloseFrame(_Body):
    """A producer closing its session over WebSocket.

    >>> CloseFrame.model_validate_json(b'{"type": "close"}')
    CloseFrame(type='close')
    """

    type: Literal["close"]
    """The frame's tag."""


AnyClientFrame: TypeAlias = Annotated[
    PushFrame | AdvanceFrame | CloseFrame, Field(discriminator="type")
]
"""What a producer may send on ``/v1/dataflows/{id}/inputs/{input}/push``, tagged by ``type``."""

_CLIENT_FRAME_TITLE = "ClientFrame"
_FRAME_TAGS = frozenset({"push", "advance", "close"})


def plain_push(body: bytes | str, frame: bool = False) -> PlainPush | None:
    """A push whose times are all integers, checked in bulk: the fast path for pushes.

    The body of :class:`Push` (or, with ``frame``, :class:`PushFrame`), decoded by orjson
    and checked with loops that run in C, about a third of what the models' validation
    costs per record. ``None`` for anything else (product times, a wrong shape, a number
    orjson does not take): the caller then validates with the model, which accepts exactly
    the same valid bodies and says precisely what is wrong with the others.

    >>> plain_push(b'{"seq": 3, "records": [[5, "x"], [6, {"k": 1}]]}')
    PlainPush(seq=3, times=(5, 6), records=('x', {'k': 1}), first=5, last=6)
    >>> plain_push(b'{"seq": 3, "records": [[[1, 0], "x"]]}') is None  # a product time
    True
    """
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(document) is not dict or len(document) != (3 if frame else 2):
        return None
    if frame and document.get("type") != "push":
        return None
    seq = document.get("seq")
    records = document.get("records")
    if type(seq) is not int or not 1 <= seq <= SEQ_MAX or type(records) is not list:
        return None
    if not records:
        return PlainPush(seq, (), (), 0, 0)
    try:
        # Unzipping into exactly two columns of equal length proves every record was a pair,
        # except for a record that is a 2-character string or a 2-key object: their first
        # "column" element is a string, which the integer check below refuses.
        times, values = zip(*records, strict=True)
    except (TypeError, ValueError):
        return None
    # All ints, in C: a sum of JSON values is an int only if every one is an int or a bool
    # (a float makes it a float; strings, nulls and arrays raise). Bools are then ruled out
    # by type, which costs a pass, only if the body holds a ``true`` or ``false`` at all.
    try:
        if type(sum(times)) is not int:
            return None
    except TypeError:
        return None
    text = body.encode() if isinstance(body, str) else body
    if (b"true" in text or b"false" in text) and set(map(type, times)) != {int}:
        return None
    first = times[0]
    if times.count(first) == len(times):  # one time for the whole batch: the common case
        last = first
    else:
        first, last = min(times), max(times)
    if first < 0 or last > MAX_TIME:
        return None
    return PlainPush(seq, times, values, first, last)


@dataclass(frozen=True, slots=True)
class PlainPush:
    """A push checked by :func:`plain_push`: every time is an int in ``[first, last]``."""

    seq: int
    times: Sequence[int]
    records: Sequence[Any]
    first: int
    """The least time (0 for an empty batch)."""
    last: int
    """The greatest time (0 for an empty batch)."""


ClientFrame: TypeAdapter[PushFrame | AdvanceFrame | CloseFrame] = TypeAdapter(
    AnyClientFrame, config=ConfigDict(title=_CLIENT_FRAME_TITLE)
)
"""Parses a client frame: ``ClientFrame.validate_json(data)`` is a :data:`AnyClientFrame`."""


# --------------------------------------------------------------------------- problems

GRAPH_PROBLEM = "graph_problem"
"""The error type of a problem the graph's shape checker found (:mod:`api.graph_model`): its
``loc`` is the problem's JSON pointer, token by token, and its message the checker's."""


def _pointer(loc: tuple[int | str, ...], marks: bool = True) -> str:
    """The RFC 6901 JSON pointer of a pydantic ``loc`` (``~`` and ``/`` escaped).

    With ``marks``, pydantic's ``[key]`` tokens are left out; a graph problem's ``loc`` has
    none, so a node named ``[key]`` keeps its place in the pointer.
    """
    return "".join(
        "/" + str(token).replace("~", "~0").replace("/", "~1")
        for token in loc
        if not (marks and token == "[key]")  # pydantic marks a dict key's own error
    )


def problem_from_validation_error(error: ValidationError) -> list[dict[str, str]]:
    """The problems of a rejected body or frame, one per error, each with a JSON pointer.

    Pointers are relative to the body (RFC 6901: ``""`` is the whole body). For a client
    frame, pydantic puts the frame's tag first in ``loc``; it is not part of the frame and is
    dropped, and a missing or unknown tag points at ``/type``.

    Args:
        error: What ``model_validate_json`` (or :data:`ClientFrame`) raised.

    Returns:
        ``[{"pointer": ..., "detail": ...}, ...]``, in the order pydantic found them.

    >>> try:
    ...     Push.model_validate_json(b'{"seq": "1", "records": [[0, 1], [-1, 2]], "x": 0}')
    ... except ValidationError as error:
    ...     for problem in problem_from_validation_error(error):
    ...         print(problem["pointer"], "-", problem["detail"])
    /seq - Input should be a valid integer
    /records/1/0 - a time is an integer in [0, 2**64) or an array [outer, inner] of two times
    /x - unknown field
    """
    frame = error.title == _CLIENT_FRAME_TITLE
    problems: list[dict[str, str]] = []
    for item in error.errors(include_url=False, include_input=False):
        loc = item["loc"]
        kind = item["type"]
        detail = item["msg"]
        if frame and loc and loc[0] in _FRAME_TAGS:
            loc = loc[1:]
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = ("type",)
            detail = "type must be one of " + ", ".join(f'"{t}"' for t in sorted(_FRAME_TAGS))
        elif kind == "extra_forbidden":
            detail = "unknown field"
        elif kind == "missing":
            detail = "required"
        problems.append({"pointer": _pointer(loc, marks=kind != GRAPH_PROBLEM), "detail": detail})
    return problems


__all__ = [
    "GRAPH_PROBLEM",
    "TIME_ERROR",
    "Advance",
    "AdvanceFrame",
    "AnyClientFrame",
    "ClientFrame",
    "CloseFrame",
    "Commit",
    "CreateDataflow",
    "InputCommit",
    "OpenSession",
    "Push",
    "PushFrame",
    "Stage",
    "Time",
    "TimedRecord",
    "TransactionId",
    "problem_from_validation_error",
]
