"""What an input's log holds: one event per operation on the input, and checkpoints.

An input's history is its captured stream of producer operations (``docs/durability.md``):
a session opened, a batch pushed, an advance, a staging request, a commit, ... Each is one
frame of the input's :class:`~service.store.log.Log`, written before it takes effect, and
replaying them in order rebuilds the input: its sessions, sequence numbers, transactions,
idempotency keys, and the records it sent. A :class:`Checkpoint` (the input's state) heads
each segment after the first, so a replay can start there once earlier segments are cut.

A frame (format 2, :func:`encode`, :func:`decode`) is::

    0x02  header length (u32, little-endian)  header (JSON)  batch bytes

The header names the operation and its fields (times in their JSON form, as on the wire);
a batch travels as the bytes it arrived in (``json`` or Arrow IPC, see
:mod:`service.store.batches`), after the header, never encoded a second time. A checkpoint's
open transactions keep their batches the same way, one after another.

Format 1 (the releases before it) pickled each operation; its frames begin with the pickle
protocol byte ``0x80``, so the first byte tells the formats apart and a log may hold both:
:mod:`service.store.legacy` reads the old ones, without unpickling anything it does not
know.
"""

from __future__ import annotations

import struct
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from operators.progress import decode_time, encode_time
from service.store.batches import FORMATS, Batch
from service.store.log import StoreError

FORMAT = 2
"""The frame format this release writes."""

_HEADER = struct.Struct("<BI")


class BadOperation(StoreError):
    """A frame that passed its checksum but is not an operation this release can read."""


@dataclass(frozen=True, slots=True)
class LoggedAck:
    """An acknowledgement as the log keeps it (to answer a retry the same way)."""

    seq: int | None
    session_time: Hashable | None
    input_frontier: list[Hashable]
    applied: int


@dataclass(frozen=True, slots=True)
class SessionState:
    """An open session in a checkpoint."""

    id: str
    time: Hashable
    seq: int
    last_ack: LoggedAck | None


@dataclass(frozen=True, slots=True)
class TransactionState:
    """An open transaction in a checkpoint: when it was last staged into, and its batches.

    ``touched`` is ``None`` in a checkpoint written before transactions expired: its time
    starts at the recovery.
    """

    id: str
    touched: float | None
    chunks: list[Batch]


@dataclass(frozen=True, slots=True)
class ExpiryState:
    """A transaction that expired, kept in a checkpoint until its name is aborted."""

    id: str
    touched: float
    expired_at: float
    records: int


@dataclass(frozen=True, slots=True)
class CommitState:
    """An idempotency key in a checkpoint: what it committed, its answer, the rows' digest.

    ``digest`` is ``None`` for a commit that carried none (and in format 1 checkpoints).
    """

    key: str
    transactions: tuple[str, ...]
    ack: LoggedAck
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """An input's state as producers know it: where a replay starts once earlier frames go."""

    kind: ClassVar[str] = "checkpoint"

    times: list[Hashable] | None
    """The input's own frontier (``None``: closed)."""
    sessions: list[SessionState] = field(default_factory=list)
    transactions: list[TransactionState] = field(default_factory=list)
    commits: list[CommitState] = field(default_factory=list)
    expired: list[ExpiryState] = field(default_factory=list)
    records_in: int = 0
    dropped_late: int = 0
    """Rows producers said they dropped as late (``dropped`` of the commits applied)."""


@dataclass(frozen=True, slots=True)
class Open:
    """A session opened at ``time``."""

    kind: ClassVar[str] = "open"

    session: str
    time: Hashable


@dataclass(frozen=True, slots=True)
class Push:
    """A batch pushed in a session, with its sequence number."""

    kind: ClassVar[str] = "push"

    session: str
    seq: int
    batch: Batch


@dataclass(frozen=True, slots=True)
class Advance:
    """A session moved to ``time`` (with a sequence number when it came as a frame)."""

    kind: ClassVar[str] = "advance"

    session: str
    time: Hashable
    seq: int | None


@dataclass(frozen=True, slots=True)
class CloseSession:
    """A session closed."""

    kind: ClassVar[str] = "close_session"

    session: str


@dataclass(frozen=True, slots=True)
class Stage:
    """Records staged into a transaction at wall-clock ``at`` (``None``: unknown)."""

    kind: ClassVar[str] = "stage"

    transaction: str
    at: float | None
    batch: Batch


@dataclass(frozen=True, slots=True)
class Abort:
    """A transaction aborted (or an expired one's name freed)."""

    kind: ClassVar[str] = "abort"

    transaction: str


@dataclass(frozen=True, slots=True)
class Expire:
    """A transaction expired at wall-clock ``now``."""

    kind: ClassVar[str] = "expire"

    transaction: str
    now: float


@dataclass(frozen=True, slots=True)
class Commit:
    """Transactions committed under an idempotency key, perhaps advancing; leftovers gone.

    ``digest`` is what the producer says its write staged (``None``: it says nothing), and
    ``dropped`` how many rows it dropped as late; format 1 frames have neither.
    """

    kind: ClassVar[str] = "commit"

    session: str | None
    transactions: list[str]
    key: str
    advance_to: Hashable | None
    discard: list[str]
    digest: str | None = None
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class Close:
    """The input closed."""

    kind: ClassVar[str] = "close"


Operation = Open | Push | Advance | CloseSession | Stage | Abort | Expire | Commit | Close
"""One operation on an input, as logged."""

Frame = Operation | Checkpoint
"""What a frame of an input's log holds."""


def _time(value: Hashable | None) -> Any:
    return None if value is None else encode_time(value)


def _ack(ack: LoggedAck | None) -> Any:
    if ack is None:
        return None
    frontier = [encode_time(t) for t in ack.input_frontier]
    return [ack.seq, _time(ack.session_time), frontier, ack.applied]


def _header(frame: Frame) -> tuple[dict[str, Any], list[Batch]]:
    # One branch per kind: a table of encoders would only spread the format over more lines.
    match frame:
        case Open(session, time):
            return {"op": "open", "session": session, "time": encode_time(time)}, []
        case Push(session, seq, batch):
            return {"op": "push", "session": session, "seq": seq, "batch": batch.format}, [batch]
        case Advance(session, time, seq):
            return {"op": "advance", "session": session, "time": encode_time(time), "seq": seq}, []
        case CloseSession(session):
            return {"op": "close_session", "session": session}, []
        case Stage(transaction, at, batch):
            header = {"op": "stage", "transaction": transaction, "at": at, "batch": batch.format}
            return header, [batch]
        case Abort(transaction):
            return {"op": "abort", "transaction": transaction}, []
        case Expire(transaction, now):
            return {"op": "expire", "transaction": transaction, "now": now}, []
        case Commit(session, transactions, key, advance_to, discard, digest, dropped):
            return {
                "op": "commit",
                "session": session,
                "transactions": transactions,
                "key": key,
                "advance_to": _time(advance_to),
                "discard": discard,
                "digest": digest,
                "dropped": dropped,
            }, []
        case Close():
            return {"op": "close"}, []
        case Checkpoint():
            return _checkpoint_header(frame)
    raise TypeError(f"not an operation: {frame!r}")


def _checkpoint_header(checkpoint: Checkpoint) -> tuple[dict[str, Any], list[Batch]]:
    batches = [chunk for t in checkpoint.transactions for chunk in t.chunks]
    return {
        "op": "checkpoint",
        "times": None if checkpoint.times is None else [encode_time(t) for t in checkpoint.times],
        "sessions": [
            [s.id, encode_time(s.time), s.seq, _ack(s.last_ack)] for s in checkpoint.sessions
        ],
        "transactions": [
            [t.id, t.touched, [[c.format, len(c.data)] for c in t.chunks]]
            for t in checkpoint.transactions
        ],
        "commits": [_commit_state(c) for c in checkpoint.commits],
        "expired": [[e.id, e.touched, e.expired_at, e.records] for e in checkpoint.expired],
        "records_in": checkpoint.records_in,
        "dropped_late": checkpoint.dropped_late,
    }, batches


def _commit_state(state: CommitState) -> list[Any]:
    """``[key, transactions, ack]``, and the digest after them when the commit had one."""
    entry = [state.key, list(state.transactions), _ack(state.ack)]
    return entry if state.digest is None else [*entry, state.digest]


def encode(frame: Frame) -> bytes:
    """A frame's payload: the format byte, the header, then the batches' bytes."""
    return b"".join(encode_parts(frame))


def encode_parts(frame: Frame) -> list[bytes]:
    """:func:`encode` as its parts.

    The format byte and the header, then each batch's bytes as they are: the log writes
    them without copying them into one buffer.
    """
    header, batches = _header(frame)
    head = orjson.dumps(header)
    return [_HEADER.pack(FORMAT, len(head)) + head, *(b.data for b in batches)]


def decode(payload: bytes) -> Frame:
    """The frame of a format 2 payload; :class:`BadOperation` if it is not one."""
    if len(payload) < _HEADER.size:
        raise BadOperation(f"a frame of {len(payload)} bytes is too short for an operation")
    version, length = _HEADER.unpack_from(payload)
    if version != FORMAT:
        raise BadOperation(
            f"frame format {version} is not one this release reads (it reads 1 and {FORMAT}): "
            f"was the directory written by a newer release?"
        )
    start = _HEADER.size
    try:
        header = orjson.loads(payload[start : start + length])
        return _frame(header, payload[start + length :])
    except BadOperation:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise BadOperation(f"not an operation: {type(error).__name__}: {error}") from None


def _batch(header: dict[str, Any], data: bytes) -> Batch:
    format = header["batch"]
    if format not in FORMATS:
        raise BadOperation(f"unknown batch format {format!r}")
    return Batch(format, data)


def _optional_time(value: Any) -> Hashable | None:
    return None if value is None else decode_time(value)


def _frame(header: dict[str, Any], data: bytes) -> Frame:
    # One branch per kind, mirroring _header.
    match header["op"]:
        case "open":
            return Open(header["session"], decode_time(header["time"]))
        case "push":
            return Push(header["session"], header["seq"], _batch(header, data))
        case "advance":
            return Advance(header["session"], decode_time(header["time"]), header["seq"])
        case "close_session":
            return CloseSession(header["session"])
        case "stage":
            return Stage(header["transaction"], header["at"], _batch(header, data))
        case "abort":
            return Abort(header["transaction"])
        case "expire":
            return Expire(header["transaction"], header["now"])
        case "commit":
            return Commit(
                header["session"],
                list(header["transactions"]),
                header["key"],
                _optional_time(header["advance_to"]),
                list(header["discard"]),
                header.get("digest"),  # frames written before digests have none
                header.get("dropped", 0),
            )
        case "close":
            return Close()
        case "checkpoint":
            return _checkpoint(header, data)
    raise BadOperation(f"unknown operation {header['op']!r}")


def _logged_ack(value: Any) -> LoggedAck | None:
    if value is None:
        return None
    seq, session_time, frontier, applied = value
    return LoggedAck(seq, _optional_time(session_time), [decode_time(t) for t in frontier], applied)


def _checkpoint(header: dict[str, Any], data: bytes) -> Checkpoint:
    offset = 0
    transactions = []
    for transaction, touched, chunks in header["transactions"]:
        batches = []
        for format, length in chunks:
            if format not in FORMATS:
                raise BadOperation(f"unknown batch format {format!r}")
            batches.append(Batch(format, data[offset : offset + length]))
            offset += length
        transactions.append(TransactionState(transaction, touched, batches))
    if offset != len(data):
        raise BadOperation(f"a checkpoint's batches take {offset} bytes, not {len(data)}")
    times = header["times"]
    return Checkpoint(
        None if times is None else [decode_time(t) for t in times],
        [
            SessionState(session, decode_time(time), seq, _logged_ack(ack))
            for session, time, seq, ack in header["sessions"]
        ],
        transactions,
        [_committed(entry) for entry in header["commits"]],
        [ExpiryState(*expiry) for expiry in header["expired"]],
        header["records_in"],
        header.get("dropped_late", 0),  # checkpoints written before it have none
    )


def _committed(entry: list[Any]) -> CommitState:
    """A checkpoint's idempotency key: ``[key, transactions, ack]`` and perhaps a digest."""
    key, ids, ack, *digest = entry
    if len(digest) > 1:
        raise BadOperation(f"idempotency key {key!r} has {len(entry)} fields, not 3 or 4")
    return CommitState(key, tuple(ids), _acked(ack), digest[0] if digest else None)


def _acked(value: Any) -> LoggedAck:
    ack = _logged_ack(value)
    if ack is None:
        raise BadOperation("a commit's acknowledgement is missing")
    return ack
