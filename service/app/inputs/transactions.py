"""Transactions: records staged on the server, made visible at once by a commit.

A *transaction* stages records; committing it (through the session that holds the
capability for their times, or without a session, at the input's own time) sends them all at
once and may advance in the same call; aborting discards them. A commit carries an
idempotency key: committing twice with the same key applies once and answers the same. A
transaction keeps each staging request's batch as it came: pairs, or an Arrow body's
columns, whose times are checked in bulk and which become Python records only at commit.

A transaction left ``staged_transaction_seconds`` without a staging request, a commit or an
abort *expires*: its records are discarded (an ``expire`` operation in the input's log, as
durable as a client's abort), and until its name is aborted, committing it or staging into it
is :class:`TransactionExpired`, naming when and why. A writer that died (a Spark driver or
task killed) so stops holding its share of the staging cap for ever.
"""

from __future__ import annotations

import time as wallclock
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from operators.progress import less_equal
from service.app.errors import Conflict, Gone, IdempotencyKeyReused, LimitExceeded, NotFound
from service.app.inputs.chunks import Chunk, Columns, by_time, by_time_across, joined, pairs_of
from service.app.inputs.core import InputCore, Session, holds, shown
from service.app.inputs.sessions import Sessions
from service.app.inputs.times import check, pairs_at_or_after
from service.app.views import Ack
from service.store import Abort, Batch, Commit, Expire, Stage
from service.store.typed import TypedRecords


@dataclass(slots=True)
class Transaction:
    """Records staged for an atomic commit: each staging request's batch, as it came."""

    id: str
    touched: float
    """When the last staging request came (wall-clock seconds): it expires
    ``staged_transaction_seconds`` after that."""
    chunks: list[Chunk] = field(default_factory=list)
    size: int = 0
    """How many records the chunks hold."""
    bytes: int = 0
    """How many bytes the staging requests' bodies held (what the byte cap counts)."""
    batches: list[Batch] = field(default_factory=list)
    """With a journal that writes checkpoints: each chunk as it was logged, so a checkpoint
    of the input can hold the open transaction."""


@dataclass(frozen=True, slots=True)
class Committed:
    """What a commit under an idempotency key did: its transactions, its ack, its digest.

    ``digest`` is what the producer said its write staged (``None``: it said nothing).
    """

    transactions: tuple[str, ...]
    ack: Ack
    digest: str | None = None


@dataclass(frozen=True, slots=True)
class Expiry:
    """A transaction that expired: when it was last staged into, and when it expired."""

    touched: float
    expired_at: float
    records: int
    """How many records were discarded."""


class TransactionExpired(Gone):
    """The transaction expired: nobody staged into, committed or aborted it for too long.

    Its records were discarded (``staged_transaction_seconds``); nothing of the request was
    applied. Aborting the name clears this, and the name can be used again. ``transaction``
    and ``expired_at`` (RFC 3339, UTC) travel as extension members of the problem.
    """

    slug = "transaction-expired"
    title = "Transaction expired"

    def __init__(self, detail: str, transaction: str, expired_at: str) -> None:
        super().__init__(detail, transaction=transaction, expired_at=expired_at)
        self.transaction = transaction
        self.expired_at = expired_at


def rfc3339(seconds: float) -> str:
    """A wall-clock time as RFC 3339 in UTC, to the millisecond.

    >>> rfc3339(1_700_000_000.5)
    '2023-11-14T22:13:20.500Z'
    """
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Transactions:
    """One input's open transactions, its idempotency keys, and the expired names."""

    __slots__ = ("_core", "_sessions", "commits", "expired", "open", "staged", "staged_bytes")

    def __init__(self, core: InputCore, sessions: Sessions) -> None:
        self._core = core
        self._sessions = sessions
        self.open: dict[str, Transaction] = {}
        self.staged = 0
        """Records staged in all open transactions (bounded by max_staged_records_per_input)."""
        self.staged_bytes = 0
        self.commits: OrderedDict[str, Committed] = OrderedDict()
        """The latest ``idempotency_keys_kept`` commits, by key."""
        self.expired: OrderedDict[str, Expiry] = OrderedDict()
        """Transactions that expired, until their names are aborted (the latest
        ``idempotency_keys_kept`` of them): a commit of one is told why it is gone."""

    def sizes(self) -> dict[str, int]:
        """The open transactions and how many records each holds, in the order they began."""
        return {t.id: t.size for t in self.open.values()}

    def add(self, transaction: Transaction, chunk: Chunk, batch: Batch | None) -> None:
        """Add a chunk (and the batch it was logged as, if kept) to a transaction."""
        size = 0 if batch is None else batch.size
        transaction.chunks.append(chunk)
        transaction.size += len(chunk)
        transaction.bytes += size
        self.staged += len(chunk)
        self.staged_bytes += size
        if batch is not None and self._core.journal.checkpoints:
            transaction.batches.append(batch)

    def on_close(self) -> None:
        """The input closes: its transactions go, expired names too."""
        self.open.clear()
        self.expired.clear()
        self.staged = 0
        self.staged_bytes = 0

    # ----------------------------------------------------------------- staging

    def stage(
        self,
        transaction_id: str,
        chunk: Chunk,
        batch: Batch | None = None,
        at: float | None = None,
    ) -> int:
        """Add records to a transaction (created on first use); returns its size.

        ``chunk`` is ``(time, record)`` pairs, or :class:`Columns` (an Arrow body), kept as
        they are: their times are checked in bulk here and the records become Python
        objects only when committed. ``batch`` is the batch as it arrived, for the journal.
        ``at`` is when the request came (wall-clock seconds; now, unless it is replayed):
        the transaction expires ``staged_transaction_seconds`` after its last one. An
        expired transaction is :class:`TransactionExpired` until its name is aborted: its
        earlier records are gone, and more records must not pass for all of them.
        """
        core = self._core
        times = core.check_open()
        at = wallclock.time() if at is None else at
        self._check_not_expired(transaction_id, at, "nothing was staged")
        self._check_caps(len(chunk), 0 if batch is None else batch.size)
        if isinstance(chunk, list):
            self._check_staged_pairs(chunk, times)
            if core.schema is not None and chunk:
                # Typed: checked whole against the schema, kept (and logged) as columns.
                typed = core.typed_values([t for t, _ in chunk], [r for _, r in chunk])
                chunk, batch = typed, typed.batch()
        elif isinstance(chunk, TypedRecords) and not chunk.integer_times:
            self._check_staged_pairs([(t, None) for t in chunk.times], times)
        elif len(chunk):
            self._check_staged_columns(chunk, times)
        if batch is None:
            batch = Batch.later(lambda: pairs_of(chunk))
        core.record(Stage(transaction_id, at, batch))
        transaction = self.open.get(transaction_id)
        if transaction is None:
            transaction = self.open[transaction_id] = Transaction(transaction_id, at)
        transaction.touched = at
        if len(chunk):
            self.add(transaction, chunk, batch)
        return transaction.size

    def _check_caps(self, records: int, size: int) -> None:
        limits, name = self._core.limits, self._core.name
        if self.staged + records > limits.max_staged_records_per_input:
            raise LimitExceeded(
                f"input {name!r} would hold more than max_staged_records_per_input "
                f"({limits.max_staged_records_per_input}) staged records"
            )
        if self.staged_bytes + size > limits.max_staged_bytes_per_input:
            raise LimitExceeded(
                f"input {name!r} would hold more than max_staged_bytes_per_input "
                f"({limits.max_staged_bytes_per_input}) bytes of staged bodies"
            )

    def _check_staged_pairs(self, batch: list[tuple[Hashable, Any]], times: list[Hashable]) -> None:
        if len(times) == 1 and pairs_at_or_after(batch, times[0]):
            return
        # Something is wrong (or the frontier has several times): record by record, for a
        # precise message.
        for index, (at, _record) in enumerate(batch):
            check(at, f"record {index}", self._core.minimum, f"/records/{index}/0")
            if not holds(times, at):
                raise self._refused_stage(index, at, times)

    def _check_staged_columns(self, batch: Columns | TypedRecords, times: list[Hashable]) -> None:
        time = times[0]
        if type(time) is not int:  # a product domain: integer times are not its times
            check(batch.time_at(0), "record 0", self._core.minimum, "/records/0/0")
        if batch.least < cast("int", time):
            index = batch.first_before(cast("int", time))
            raise self._refused_stage(index, batch.time_at(index), times)

    def _refused_stage(self, index: int, at: Hashable, times: list[Hashable]) -> Conflict:
        return Conflict(
            f"record {index} is at {at!r}, before input {self._core.name!r}'s time "
            f"{shown(times)}: it could never be committed; nothing was staged"
        )

    def _unstage(self, transaction: Transaction) -> None:
        """Take a transaction that is gone (committed, aborted, expired) off the caps."""
        self.staged -= transaction.size
        self.staged_bytes -= transaction.bytes

    def abort(self, transaction_id: str) -> int:
        """Discard a transaction's staged records; returns how many there were (0 if none).

        Aborting a transaction that expired answers 0 (its records were discarded when it
        expired) and frees its name for a new transaction.
        """
        self._core.check_open()
        if transaction_id not in self.open:
            if transaction_id in self.expired:
                self._core.record(Abort(transaction_id))
                del self.expired[transaction_id]
            return 0
        self._core.record(Abort(transaction_id))
        transaction = self.open.pop(transaction_id)
        self._unstage(transaction)
        return transaction.size

    # ----------------------------------------------------------------- expiry

    def expire(self, now: float | None = None) -> list[tuple[str, int]]:
        """Expire every transaction left ``staged_transaction_seconds`` before ``now``.

        Each expiry is logged (``expire``) before it takes effect, so a restart does not
        bring the transaction back; its records leave the staging cap at once. Returns the
        expired transactions and how many records each held. An input closed or dropped
        has nothing staged.
        """
        core = self._core
        if core.times is None or core.dropped:
            return []
        now = wallclock.time() if now is None else now
        due = now - core.limits.staged_transaction_seconds
        stale = [t for t in self.open.values() if t.touched <= due]
        for transaction in stale:
            self.expire_transaction(transaction.id, now)
        return [(t.id, t.size) for t in stale]

    def expire_transaction(self, transaction_id: str, now: float) -> None:
        """Expire one transaction at ``now`` (logged): discard its records, keep why."""
        transaction = self.open.get(transaction_id)
        if transaction is None:
            return
        self._core.record(Expire(transaction_id, now))
        del self.open[transaction_id]
        self._unstage(transaction)
        self.expired[transaction_id] = Expiry(transaction.touched, now, transaction.size)
        while len(self.expired) > self._core.limits.idempotency_keys_kept:
            self.expired.popitem(last=False)

    def _check_not_expired(self, transaction_id: str, now: float, outcome: str) -> None:
        """:class:`TransactionExpired` if the transaction expired (now, if it is due)."""
        seconds = self._core.limits.staged_transaction_seconds
        transaction = self.open.get(transaction_id)
        if transaction is not None and transaction.touched <= now - seconds:
            # Due, and the periodic expiry has not come round yet: it expires now, the same
            # way, so what a request finds does not depend on when that runs.
            self.expire_transaction(transaction_id, now)
        expiry = self.expired.get(transaction_id)
        if expiry is None:
            return
        raise TransactionExpired(
            f"transaction {transaction_id!r} of input {self._core.name!r} expired at "
            f"{rfc3339(expiry.expired_at)}: nothing staged into it, committed it or aborted it "
            f"for {seconds:g} s (staged_transaction_seconds), so its {expiry.records} records "
            f"were discarded; {outcome} (abort it to use its name again)",
            transaction_id,
            rfc3339(expiry.expired_at),
        )

    # ----------------------------------------------------------------- commits

    def commit(
        self,
        session_id: str | None,
        transaction_ids: list[str],
        idempotency_key: str,
        advance_to: Hashable | None = None,
        discard: Iterable[str] = (),
        digest: str | None = None,
        dropped: int = 0,
    ) -> Ack:
        """Make the transactions' records visible at once, then advance.

        Everything is checked first; on any problem nothing is applied. A commit under an
        ``idempotency_key`` used before applies nothing and answers the first commit's ack
        (even once its session is closed) when both carry a ``digest`` (of the rows the
        producer's write staged) and they are equal, whatever transactions they name, or,
        when either has none, when they name the same transactions; otherwise it is
        :class:`IdempotencyKeyReused`. Once the commit is done (now, or before under the
        key) the ``discard`` transactions are aborted: a producer's leftovers, in the same
        call. ``dropped`` (rows dropped as late) adds to the input's count when applied.

        With a session, the records must be at or after the session's time and
        ``advance_to`` (not earlier) advances the session. Without one (``None``) the commit
        acts as a session opened at the input's time for this call and closed after it: the
        records must be at or after a time of the input's frontier, and ``advance_to`` moves
        the input there when no session is open (open sessions hold the input at their
        times); an ``advance_to`` the input is already at or past is satisfied.
        """
        times = self._core.check_open()
        discard = list(discard)
        operation = Commit(
            session_id, list(transaction_ids), idempotency_key, advance_to, discard, digest, dropped
        )
        done = self.commits.get(idempotency_key)
        if done is not None:
            return self._committed_before(operation, done)
        session = None if session_id is None else self._sessions.get(session_id)
        chunks = self._committable(transaction_ids)
        if session is not None:
            times = [session.time]
        what = f"input {self._core.name!r}'s time" if session is None else "the session's time"
        self._check_commit(chunks, times, f"{what} {shown(times)}")
        if advance_to is not None:
            advance_to = self._check_advance_to(session, times, advance_to)
        self._core.record(operation)  # as asked: a replay derives the same advance
        applied = self._send_staged(chunks)
        self._core.dropped_late += dropped
        for t in transaction_ids:
            self._unstage(self.open.pop(t))
        if advance_to is not None:
            if session is not None:
                self._sessions.move(session, advance_to)
            elif not self._sessions.open:
                self._core.move([advance_to])
        ack = self._core.ack(session, None, applied)
        self.commits[idempotency_key] = Committed(tuple(transaction_ids), ack, digest)
        while len(self.commits) > self._core.limits.idempotency_keys_kept:
            self.commits.popitem(last=False)
        self._discard(discard)
        return ack

    def _committed_before(self, operation: Commit, done: Committed) -> Ack:
        """A commit under a key used before: the first answer, or the key was misused."""
        key = operation.key
        if operation.digest is not None and done.digest is not None:
            if operation.digest != done.digest:
                raise IdempotencyKeyReused(
                    f"idempotency key {key!r} committed other rows (digest {done.digest!r}) "
                    f"than this commit's (digest {operation.digest!r}): nothing was applied",
                    key,
                    list(done.transactions),
                    done.digest,
                )
        elif done.transactions != tuple(operation.transactions):
            raise IdempotencyKeyReused(
                f"idempotency key {key!r} was used to commit "
                f"{list(done.transactions)}, not {operation.transactions}",
                key,
                list(done.transactions),
                done.digest,
            )
        if any(t in self.open for t in operation.discard):
            self._core.record(operation)
            self._discard(operation.discard)
        return done.ack

    def _committable(self, transaction_ids: list[str]) -> list[Chunk]:
        """The chunks of the transactions to commit; :class:`NotFound` if one is missing."""
        now = wallclock.time()
        for t in transaction_ids:
            self._check_not_expired(t, now, "nothing was committed")
        missing = [t for t in transaction_ids if t not in self.open]
        if missing:
            raise NotFound(f"no staged transaction {missing[0]!r} on input {self._core.name!r}")
        return [c for t in transaction_ids for c in self.open[t].chunks]

    def _check_advance_to(
        self, session: Session | None, times: list[Hashable], advance_to: Hashable
    ) -> Hashable | None:
        """The time a commit advances to (``None``: nowhere); checked against ``times``."""
        check(advance_to, like=self._core.minimum, pointer="/advance_to")
        if session is None and all(less_equal(advance_to, t) for t in times):
            return None  # the input is there already
        if not holds(times, advance_to):
            held = "session" if session is not None else f"input {self._core.name!r}"
            raise Conflict(
                f"cannot advance the {held} from {shown(times)} to the earlier "
                f"{advance_to!r}; nothing was committed"
            )
        if session is not None:
            self._sessions.check_advance(session, advance_to, "/advance_to")
        return advance_to

    def _discard(self, transaction_ids: Iterable[str]) -> None:
        for t in transaction_ids:
            transaction = self.open.pop(t, None)
            if transaction is not None:
                self._unstage(transaction)
            self.expired.pop(t, None)  # discarded as a leftover: its name is free again

    def _check_commit(self, chunks: list[Chunk], times: list[Hashable], what: str) -> None:
        """Every staged record is at or after a time of ``times``; else a :class:`Conflict`.

        Their times were checked when staged; the common case is checked in bulk.
        """
        offset = 0
        time = times[0]
        for chunk in chunks:
            index: int | None = None
            if isinstance(chunk, list):
                if len(times) > 1 or not pairs_at_or_after(chunk, time):
                    index = next(
                        (i for i, (at, _r) in enumerate(chunk) if not holds(times, at)), None
                    )
            elif isinstance(chunk, TypedRecords) and not chunk.integer_times:
                index = next((i for i, at in enumerate(chunk.times) if not holds(times, at)), None)
            elif type(time) is int and chunk.least < time:
                index = chunk.first_before(time)
            if index is not None:
                at = chunk[index][0] if isinstance(chunk, list) else chunk.time_at(index)
                raise Conflict(
                    f"record {offset + index} is at {at!r}, before {what}: the commit was "
                    f"refused and nothing of it applied"
                )
            offset += len(chunk)

    def _send_staged(self, chunks: list[Chunk]) -> int:
        """Send the records of ``chunks`` with one batch per distinct time; how many.

        A typed input's chunks are columns: the containers at one time are concatenated
        (one Arrow copy), never made into Python records.
        """
        if chunks and all(isinstance(chunk, TypedRecords) for chunk in chunks):
            typed = cast("list[TypedRecords]", chunks)
            across = by_time_across(typed)
            if across is not None:
                count = sum(map(len, typed))
                self._core.send_groups(dict(across), count)
                return count
        groups: dict[Hashable, list[Any]] = {}
        count = 0
        for chunk in chunks:
            count += len(chunk)
            for at, records in by_time(chunk):
                groups.setdefault(at, []).append(records)
        # The input's capability is at or before each time: checked by _check_commit.
        self._core.send_groups({at: joined(parts) for at, parts in groups.items()}, count)
        return count
