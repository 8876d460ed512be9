"""What an input journals, and how its journal is read back: checkpoints and replay.

Every operation is written as it is asked for (:mod:`service.store.operations`), before it
takes effect; replaying the frames through the same input code, in order, rebuilds its
sessions, sequence numbers, transactions and idempotency keys, and sends its records again
(operators are deterministic per time, so the outputs are recomputed). A checkpoint is the
input's state as producers know it; a replay that starts at one restores it first.
"""

from __future__ import annotations

import math
import time as wallclock
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from service.app.inputs.chunks import Chunk
from service.app.inputs.core import InputCore, Session
from service.app.inputs.sessions import Sessions
from service.app.inputs.transactions import Committed, Expiry, Transaction, Transactions
from service.app.journal import InputJournal
from service.app.settings import Limits
from service.app.views import Ack
from service.store import (
    Abort,
    Advance,
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
    Operation,
    Push,
    SessionState,
    Stage,
    StoreError,
    TransactionState,
)


@dataclass(frozen=True, slots=True)
class Parts:
    """An input's parts, as journaling reads and replays them."""

    core: InputCore
    sessions: Sessions
    transactions: Transactions

    def close(self) -> None:
        """Close the input (logged)."""
        self.core.close((self.sessions, self.transactions))


REPLAY_LIMITS = Limits(
    max_batch_records=1 << 62,
    max_sessions_per_input=1 << 62,
    max_staged_records_per_input=1 << 62,
    max_staged_bytes_per_input=1 << 62,
    idempotency_keys_kept=Limits().idempotency_keys_kept,
    staged_transaction_seconds=math.inf,
)
"""Replay re-applies what was accepted once: no size limit may refuse it the second time,
and no transaction expires by the clock (only the expiries the log holds are applied)."""


def _logged(ack: Ack | None) -> LoggedAck | None:
    if ack is None:
        return None
    return LoggedAck(ack.seq, ack.session_time, list(ack.input_frontier), ack.applied)


def _ack(ack: LoggedAck | None) -> Ack | None:
    if ack is None:
        return None
    return Ack(ack.seq, ack.session_time, list(ack.input_frontier), ack.applied)


def checkpoint(parts: Parts) -> Checkpoint:
    """The input's state as producers know it: what heads each new segment of its log."""
    core, transactions = parts.core, parts.transactions
    commits = []
    for key, done in transactions.commits.items():
        logged = _logged(done.ack)
        assert logged is not None
        commits.append(CommitState(key, done.transactions, logged, done.digest))
    return Checkpoint(
        None if core.times is None else list(core.times),
        [
            SessionState(s.id, s.time, s.seq, _logged(s.last_ack))
            for s in parts.sessions.open.values()
        ],
        [TransactionState(t.id, t.touched, list(t.batches)) for t in transactions.open.values()],
        commits,
        [
            ExpiryState(name, e.touched, e.expired_at, e.records)
            for name, e in transactions.expired.items()
        ],
        core.records_in,
        core.dropped_late,
    )


def restore(parts: Parts, state: Checkpoint) -> None:
    """Take a checkpoint's state: a fresh input (nothing applied yet) resumes from it.

    What came before the checkpoint is not replayed: the records it carried were at times
    every output has forgotten.
    """
    core, sessions, transactions = parts.core, parts.sessions, parts.transactions
    assert not sessions.open and core.times is not None
    for s in state.sessions:
        capability = core.capabilities.session(s.time)
        sessions.open[s.id] = Session(s.id, capability, s.time, s.seq, _ack(s.last_ack))
    for t in state.transactions:
        # A checkpoint written before transactions expired has no time for them: their
        # time starts now.
        touched = wallclock.time() if t.touched is None else t.touched
        transaction = transactions.open[t.id] = Transaction(t.id, touched)
        for batch in t.chunks:
            chunk: Chunk = batch.staged() if core.schema is None else core.typed_batch(batch)
            transactions.add(transaction, chunk, batch)
    for done in state.commits:
        restored = _ack(done.ack)
        assert restored is not None
        transactions.commits[done.key] = Committed(done.transactions, restored, done.digest)
    for e in state.expired:
        transactions.expired[e.id] = Expiry(e.touched, e.expired_at, e.records)
    core.records_in = state.records_in
    core.dropped_late = state.dropped_late
    if state.times is None:
        parts.close()
    elif state.times != core.times:
        core.move(state.times)


REPLAY_CHUNK = 32
"""Operations replayed between two pauses for the workers."""


class ReplayError(StoreError):
    """An input's log does not replay (a bug, or a log from another graph): fail-stop."""


@dataclass(slots=True)
class Replayed:
    """What a recovery replayed."""

    frames: int = 0
    records: int = 0


async def replay(
    parts: Parts,
    journal: InputJournal,
    replayed: Replayed,
    pause: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Apply every operation ``journal`` kept to an input again, in order.

    ``parts`` are a fresh input's (nothing applied yet). Effects happen at once, nothing is
    logged again and no limit refuses what was accepted
    once. Every :data:`REPLAY_CHUNK` operations it awaits ``pause()`` (the workers catch
    up), so a long log is never all in flight in the dataflow at once.
    """
    with _replaying(parts.core, journal) as replaying:
        first = True
        for position, segment, frame in journal.frames():
            if pause is not None and replayed.frames % REPLAY_CHUNK == REPLAY_CHUNK - 1:
                await pause()
            replaying.segment = segment
            if isinstance(frame, Checkpoint):
                # Only a first frame kept matters: what came before it is gone.
                if first and position > 0:
                    restore(parts, frame)
                first = False
                continue
            first = False
            try:
                replayed.records += apply(parts, frame)
            except Exception as error:
                raise ReplayError(
                    f"{journal.describe()}: frame {position} ({frame.kind}) of input "
                    f"{parts.core.name!r} does not replay: {type(error).__name__}: {error}"
                ) from error
            replayed.frames += 1


@contextmanager
def _replaying(core: InputCore, journal: InputJournal) -> Iterator[_Replaying]:
    limits, core.limits = core.limits, REPLAY_LIMITS
    replaying = _Replaying(journal)
    core.journal = replaying
    deferred = core.capabilities.deferring(False)
    try:
        yield replaying
    finally:
        core.limits = limits
        core.journal = journal
        core.capabilities.deferring(deferred)


class _Replaying:
    """The journal an input has while its log is replayed.

    It writes nothing, and notes the latest time of each segment's records (for truncation
    after a restart).
    """

    __slots__ = ("journal", "segment")

    defers_effects = False
    position = -1
    synced = 0

    def __init__(self, journal: InputJournal) -> None:
        self.journal = journal
        self.segment = 0

    @property
    def checkpoints(self) -> bool:
        """As the journal replayed: open transactions keep their batches if it needs them."""
        return self.journal.checkpoints

    def record(self, operation: Operation, state: Callable[[], Checkpoint]) -> None:
        """Nothing to write: the operation is in the log already."""

    def wait(self) -> None:
        """Nothing to wait for."""

    def sent(self, times: Iterable[Hashable]) -> None:
        """Note the replayed operation's times in its segment's latest time."""
        self.journal.replayed(self.segment, times)

    def frames(self) -> Iterator[tuple[int, int, Frame]]:
        """Nothing more to replay."""
        return iter(())

    def replayed(self, segment: int, times: Iterable[Hashable]) -> None:
        """Noted already."""

    def describe(self) -> str:
        """The journal replayed."""
        return self.journal.describe()


def apply(parts: Parts, frame: Frame) -> int:
    """Apply one logged operation again; how many records it carried.

    One branch per kind of operation, each the call that made it.
    """
    sessions, transactions = parts.sessions, parts.transactions
    typed = parts.core.schema is not None
    match frame:
        case Push(session, seq, batch) if typed:
            columns = parts.core.typed_batch(batch)
            sessions.push_typed(session, seq, columns, batch)
            return len(columns)
        case Push(session, seq, batch):
            pairs = batch.pairs()
            times = [t for t, _ in pairs]
            records = [r for _, r in pairs]
            sessions.push(session, seq, times, records, None, batch)
            return len(records)
        case Stage(transaction, at, batch):
            chunk: Chunk = parts.core.typed_batch(batch) if typed else batch.staged()
            transactions.stage(transaction, chunk, batch, at)
            return len(chunk)
        case Open(session, time):
            sessions.open_session(time, session)
        case Advance(session, time, seq):
            sessions.advance(session, time, seq)
        case CloseSession(session):
            sessions.close_session(session)
        case Abort(transaction):
            transactions.abort(transaction)
        case Expire(transaction, now):
            transactions.expire_transaction(transaction, now)
        case Commit(session, ids, key, advance_to, discard, digest, dropped):
            transactions.commit(session, ids, key, advance_to, discard, digest, dropped)
        case Close():
            parts.close()
        case Checkpoint():
            raise TypeError("a checkpoint is restored, not applied")
    return 0


__all__ = [
    "REPLAY_LIMITS",
    "Parts",
    "ReplayError",
    "Replayed",
    "apply",
    "checkpoint",
    "replay",
    "restore",
]
