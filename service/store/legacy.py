"""Format 1 of the inputs' logs: the pickled operations of the releases before format 2.

A format 1 frame is ``pickle((kind, meta, raw, data))``: ``raw`` the batch as it arrived
(``("json" | "arrow" | "arrow-columns", bytes)``) or ``None``, then ``data`` the batch as
Python values. A data directory written by those releases is read as it is (a log may end
in format 2 frames appended since): nothing is rewritten, so nothing can be lost doing it.

The unpickler is restricted: it builds only the few classes those frames held (a product
time, an acknowledgement, an expired transaction), named by their old paths, and refuses
anything else with :class:`~service.store.operations.BadOperation`, so a damaged or foreign
frame is never taken for history, and never runs code.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from operators.progress import Product
from service.store.batches import ARROW, JSON, Batch
from service.store.operations import (
    Abort,
    Advance,
    BadOperation,
    Checkpoint,
    Close,
    CloseSession,
    Commit,
    CommitState,
    Expire,
    ExpiryState,
    Frame,
    LoggedAck,
    Open,
    Push,
    SessionState,
    Stage,
    TransactionState,
)

PICKLE = b"\x80"
"""How a format 1 frame begins: pickle's protocol opcode."""


@dataclass(frozen=True, slots=True)
class _Ack:
    seq: int | None
    session_time: Hashable | None
    input_frontier: list[Hashable]
    applied: int


@dataclass(frozen=True, slots=True)
class _Expiry:
    touched: float
    expired_at: float
    records: int


_CLASSES: dict[tuple[str, str], type] = {
    ("service.progress.timestamp", "Product"): Product,
    ("service.app.views", "Ack"): _Ack,
    ("service.app.inputs", "Expiry"): _Expiry,
}
"""Every class a format 1 frame may name, by the path it was pickled under."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _CLASSES.get((module, name))
        if found is None:
            raise BadOperation(f"a format 1 frame names {module}.{name}, which it may not")
        return found


def _batch(raw: tuple[str, bytes] | None, data: Any) -> Batch:
    if raw is not None:
        kind, body = raw
        if kind not in (JSON, ARROW, "arrow-columns"):
            raise BadOperation(f"unknown batch kind {kind!r}")
        return Batch(JSON if kind == JSON else ARROW, body)
    if isinstance(data, tuple):  # a push: (times, records)
        times, records = data
        return Batch.of(list(times), list(records))
    if isinstance(data, list):  # a stage: (time, record) pairs
        pairs = [(t, r) for t, r in data]
        return Batch.later(lambda: pairs)
    raise BadOperation(f"a batch of {type(data).__name__} cannot be read")


def _ack(ack: _Ack | None) -> LoggedAck | None:
    if ack is None:
        return None
    return LoggedAck(ack.seq, ack.session_time, list(ack.input_frontier), ack.applied)


def _checkpoint(state: dict[str, Any]) -> Checkpoint:
    commits = []
    for key, (ids, ack) in state["commits"]:
        logged = _ack(ack)
        assert logged is not None
        commits.append(CommitState(key, tuple(ids), logged))
    time = state["time"]
    return Checkpoint(
        None if time is None else [time],
        [SessionState(s, t, seq, _ack(ack)) for s, t, seq, ack in state["sessions"]],
        [
            # A checkpoint written before transactions expired has no time for them.
            TransactionState(t, touched[0] if touched else None, [_batch(r, d) for r, d in logged])
            for t, logged, *touched in state["transactions"]
        ],
        commits,
        [
            ExpiryState(name, e.touched, e.expired_at, e.records)
            for name, e in state.get("expired", [])
        ],
        state["records_in"],
    )


def decode_legacy(payload: bytes) -> Frame:
    """The operation of a format 1 frame; :class:`BadOperation` if it is not one."""
    try:
        kind, meta, raw, data = _Unpickler(io.BytesIO(payload)).load()
        return _operation(kind, meta, raw, data)
    except BadOperation:
        raise
    except Exception as error:  # a damaged pickle raises almost anything
        raise BadOperation(f"not a format 1 operation: {type(error).__name__}: {error}") from None


def _operation(kind: str, meta: tuple[Any, ...], raw: Any, data: Any) -> Frame:
    # One branch per kind of the old format, as its writer had them.
    match kind:
        case "checkpoint":
            return _checkpoint(data)
        case "open":
            return Open(*meta)
        case "push":
            return Push(meta[0], meta[1], _batch(raw, data))
        case "advance":
            return Advance(*meta)
        case "close_session":
            return CloseSession(meta[0])
        case "stage":
            transaction, *at = meta  # logs from before expiry have no time
            return Stage(transaction, at[0] if at else None, _batch(raw, data))
        case "abort":
            return Abort(meta[0])
        case "expire":
            return Expire(*meta)
        case "commit":
            session, transactions, key, advance_to, discard = meta
            return Commit(session, list(transactions), key, advance_to, list(discard))
        case "close":
            return Close()
    raise BadOperation(f"unknown operation {kind!r}")
