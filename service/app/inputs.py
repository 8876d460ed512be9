"""Producer inputs: sessions pushing timestamped records, retries and transactions.

An input of a dataflow is an operator on one worker (its *owner*) holding a capability at
the input's time. Each producer *session* holds a capability of its own, at or after the
input's time. As sessions advance or close, the input's time follows the meet of the open
sessions' times (so its frontier is that meet); a new session may start at the input's time
or later, and while no session is open the input stays where it is, until it is closed.

A session pushes batches of ``[time, record]`` pairs, each with a sequence number; a batch
is checked whole before any record is sent, so it is applied entirely or not at all.

A *transaction* stages records on the server; committing it (through the session that holds
the capability for their times, or without a session, at the input's own time) sends them
all at once and may advance in the same call; aborting discards them. A commit carries an
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
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeAlias, cast

from operators import Capability, OperatorBuilder, OutputPort, Stream
from operators.progress import (
    MAX_TIME,
    Product,
    check_time,
    encode_time,
    less_equal,
    minimum_like,
    same_domain,
)
from operators.runtime import Interest
from service.app.errors import (
    Conflict,
    Gone,
    IdempotencyKeyReused,
    Invalid,
    LimitExceeded,
    NotFound,
)
from service.app.settings import Limits
from service.app.views import Ack, InputView, SessionView


def meet(a: Hashable, b: Hashable) -> Hashable:
    """The greatest time at or before both ``a`` and ``b`` (``min`` for integers)."""
    if type(a) is int and type(b) is int:
        return min(a, b)
    if isinstance(a, Product) and isinstance(b, Product):
        return Product(meet(a.outer, b.outer), meet(a.inner, b.inner))
    raise TypeError(f"times of different domains: {a!r} and {b!r}")


@dataclass(slots=True)
class Session:
    """A producer's session: its time, its capability, and its last sequence number.

    ``time`` is where the session is as far as its producer knows: records pushed now must
    be at it or later. The capability follows it once the operations that moved it are
    durable (see :class:`ProducerInput`), so it may lag behind, never run ahead.
    """

    id: str
    capability: Capability
    time: Hashable
    seq: int = 0
    last_ack: Ack | None = None
    closed: bool = False


Raw: TypeAlias = "tuple[str, bytes]"
"""A batch as it arrived: its format (``"json"`` or ``"arrow"``) and its bytes."""


class Journal(Protocol):
    """Where an input writes each operation before it takes effect (the input's log).

    ``record`` writes the operation synchronously (not yet durable) or raises, in which case
    nothing of the operation is applied. ``data`` is the operation's batch, decoded, for a
    journal that must encode it itself when ``raw`` (the batch as it arrived) is ``None``.
    """

    position: int
    """The log position of the last operation written."""

    @property
    def synced(self) -> int:
        """Every operation logged before this position is durable."""
        ...

    def record(self, kind: str, meta: tuple[Any, ...], raw: Raw | None, data: Any) -> None:
        """Write one operation."""
        ...

    def wait(self) -> Awaitable[None] | None:
        """What to await until everything written so far is durable (None: nothing)."""
        ...

    def sent(self, times: Iterable[Hashable]) -> None:
        """The operation just written sends records at ``times``.

        The log may be cut below the times every output has forgotten.
        """
        ...


class Columns(Protocol):
    """Records staged as columns (an Arrow body), with integer times.

    The API layer checks such a body's shape; the input checks its times in bulk against
    its own (:attr:`least`, then :meth:`first_before` for the message), and turns the
    records into Python objects once, at commit (:meth:`by_time`).
    """

    least: int
    """The earliest time of a record (any value when there are none)."""

    def __len__(self) -> int:
        """How many records."""
        ...

    def time_at(self, index: int) -> int:
        """The time of record ``index``."""
        ...

    def first_before(self, time: int) -> int:
        """The index of the first record before ``time`` (there is one: ``least < time``)."""
        ...

    def by_time(self) -> list[tuple[int, list[Any]]]:
        """The records grouped by time, each group new and in staging order."""
        ...


def _body_bytes(raw: Raw | None) -> int:
    """The size of a staging request's body (0 for a batch given without one)."""
    return 0 if raw is None else len(raw[1])


Chunk: TypeAlias = "list[tuple[Hashable, Any]] | Columns"
"""What one staging request added to a transaction."""


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
    logged: list[tuple[Raw | None, Any]] = field(default_factory=list)
    """With a journal: each chunk as it was logged (its raw bytes, or the pairs), so a
    checkpoint of the input can hold the open transaction."""


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


def _pairs_at_or_after(batch: list[tuple[Hashable, Any]], time: Hashable) -> bool:
    """Whether every pair of an integer-time batch is at a valid time at or after ``time``.

    Checked in bulk (see :func:`_all_at_or_after`); ``False`` only means one by one must decide.
    """
    return _all_at_or_after(_columns(batch)[0], time)


def _by_time(chunk: Chunk) -> list[tuple[Hashable, list[Any]]]:
    """A chunk's records grouped by time (new lists)."""
    if not isinstance(chunk, list):
        return cast("list[tuple[Hashable, list[Any]]]", chunk.by_time())
    groups: dict[Hashable, list[Any]] = {}
    for at, record in chunk:
        records = groups.get(at)
        if records is None:
            groups[at] = [record]
        else:
            records.append(record)
    return list(groups.items())


class ProducerInput:
    """The sessions, transactions and capability of one input, on its owner worker."""

    def __init__(self, name: str, output: OutputPort, base: Capability, limits: Limits) -> None:
        self.name = name
        self._minimum = minimum_like(base.time)
        self._output = output
        self._base: Capability | None = base
        """The input's own capability, as applied (``None`` once the close is)."""
        self._time: Hashable | None = base.time
        """The input's own time as far as producers know (``None`` once closed)."""
        self._limits = limits
        self.sessions: dict[str, Session] = {}
        self.transactions: dict[str, Transaction] = {}
        self._staged = 0
        self._staged_bytes = 0
        self._commits: OrderedDict[str, tuple[tuple[str, ...], Ack]] = OrderedDict()
        self._expired: OrderedDict[str, Expiry] = OrderedDict()
        """Transactions that expired, until their names are aborted (the latest
        ``idempotency_keys_kept`` of them): a commit of one is told why it is gone."""
        self.records_in = 0
        self.dropped = False
        self.attached: set[str] = set()
        """Sessions a producer's socket is attached to (one socket per session)."""
        self.on_frontier: Callable[[], None] | None = None
        """Called each time the input's frontier moves (its own capability moved)."""
        self.journal: Journal | None = None
        """Where operations are written before they take effect (``None``: nowhere)."""
        self._deferred: deque[tuple[int, Callable[..., Any], tuple[Any, ...]]] | None = None
        """Effects on the dataflow waiting for their operations to be durable, in order, each
        with its operation's log position (``None``: effects happen at once)."""

    # ----------------------------------------------------------------- state

    @property
    def closed(self) -> bool:
        """Whether the input was closed (nothing more can ever arrive)."""
        return self._time is None

    def time(self) -> Hashable | None:
        """The input's own time: the earliest time a new session may start at."""
        return self._time

    def frontier(self) -> list[Hashable]:
        """The times that may still arrive here: the meet of its sessions (or its own time).

        As producers know it: what acknowledgements say.
        """
        return [] if self._time is None else [self._time]

    def applied_frontier(self) -> list[Hashable]:
        """The input's frontier as the dataflow sees it.

        Behind :meth:`frontier` only while operations wait to be durable.
        """
        return [] if self._base is None else [self._base.time]

    def _check_open(self) -> Hashable:
        """The input's time; :class:`Gone` if it is closed or its dataflow dropped."""
        if self.dropped:
            raise Gone(f"the dataflow of input {self.name!r} was dropped")
        if self._time is None:
            raise Gone(f"input {self.name!r} is closed")
        return self._time

    # ----------------------------------------------------------------- durability

    def defer_effects(self) -> None:
        """From now on, hold effects on the dataflow until their operations are durable.

        A record sent, or a capability moved or dropped, must not be seen downstream before
        the operation that made it is durable: an output, or a frontier, would otherwise
        show what a crash could take back. :meth:`durable` applies them.
        """
        if self._deferred is None:
            self._deferred = deque()

    def snapshot(self) -> dict[str, Any]:
        """The input's state as producers know it: what a checkpoint of its log holds."""
        return {
            "time": self._time,
            "sessions": [(s.id, s.time, s.seq, s.last_ack) for s in self.sessions.values()],
            "transactions": [(t.id, t.logged, t.touched) for t in self.transactions.values()],
            "commits": list(self._commits.items()),
            "expired": list(self._expired.items()),
            "records_in": self.records_in,
        }

    def restore(self, state: dict[str, Any], decode: Callable[[Raw], Any]) -> None:
        """Take a checkpoint's state: a fresh input (nothing applied yet) resumes from it.

        What came before the checkpoint is not replayed: the records it carried were at
        times every output has forgotten.
        """
        base = self._base
        assert base is not None and not self.sessions
        for session_id, time, seq, last_ack in state["sessions"]:
            self.sessions[session_id] = Session(session_id, base.delayed(time), time, seq, last_ack)
        for transaction_id, logged, *touched in state["transactions"]:
            # A checkpoint written before transactions expired has no time for them: their
            # time starts now.
            at = touched[0] if touched else wallclock.time()
            transaction = self.transactions[transaction_id] = Transaction(transaction_id, at)
            for raw, data in logged:
                chunk = decode(raw) if raw is not None else data
                transaction.chunks.append(chunk)
                transaction.size += len(chunk)
                transaction.bytes += _body_bytes(raw)
                transaction.logged.append((raw, data))
                self._staged += len(chunk)
                self._staged_bytes += _body_bytes(raw)
        self._commits = OrderedDict(state["commits"])
        self._expired = OrderedDict(state.get("expired", []))
        self.records_in = state["records_in"]
        time = state["time"]
        if time is None:
            self.close()
        elif time != base.time:
            self._move_base(time)

    async def durable(self) -> None:
        """Wait until every operation so far is durable; apply the effects that waited.

        What an acknowledgement awaits (at once when nothing waits: no journal, or a
        durability that does not wait for the disk).
        """
        journal = self.journal
        if journal is None:
            return
        waiter = journal.wait()
        while waiter is not None:
            await waiter
            waiter = journal.wait()
        self._apply_durable(journal.synced)

    def _apply_durable(self, synced: int) -> None:
        """Apply the held effects of operations logged before position ``synced``, in order."""
        deferred = self._deferred
        while deferred and deferred[0][0] < synced:
            _, effect, args = deferred.popleft()
            effect(*args)

    def _effect(self, effect: Callable[..., Any], *args: Any) -> None:
        deferred = self._deferred
        if deferred is None or self.journal is None:
            effect(*args)
        else:
            deferred.append((self.journal.position, effect, args))

    def _record(self, kind: str, meta: tuple[Any, ...], raw: Raw | None, data: Any) -> None:
        if self.journal is not None:
            self.journal.record(kind, meta, raw, data)

    def _move_base(self, time: Hashable) -> None:
        """The input's own time moves to ``time`` (its capability, once durable)."""
        self._time = time
        self._effect(self._downgrade_base, time)

    def _downgrade_base(self, time: Hashable) -> None:
        base = self._base
        if base is not None:
            base.downgrade(time)
            if self.on_frontier is not None:
                self.on_frontier()

    def _session(self, session_id: str) -> Session:
        self._check_open()
        session = self.sessions.get(session_id)
        if session is None:
            raise NotFound(f"input {self.name!r} has no open session {session_id!r}")
        return session

    def _ack(self, session: Session | None, seq: int | None, applied: int) -> Ack:
        return Ack(
            seq,
            None if session is None or session.closed else session.time,
            self.frontier(),
            applied,
        )

    def _settle(self) -> None:
        """Move the input's own time up to the meet of its sessions."""
        if self._time is None or not self.sessions:
            return
        times = [s.time for s in self.sessions.values()]
        least = times[0]
        for time in times[1:]:
            least = meet(least, time)
        if least != self._time:
            self._move_base(least)

    # ----------------------------------------------------------------- sessions

    def open_session(self, start: Hashable | None = None, *, id: str | None = None) -> Session:
        """Open a session at ``start`` (default: the input's time), which must not be earlier.

        ``id`` is given only when an opening is replayed from the log.
        """
        base_time = self._check_open()
        if len(self.sessions) >= self._limits.max_sessions_per_input:
            raise LimitExceeded(
                f"input {self.name!r} has {len(self.sessions)} open sessions, "
                f"the limit (max_sessions_per_input)"
            )
        time = base_time if start is None else start
        if start is not None:
            _check(start, like=self._minimum, pointer="/start")
            if not less_equal(base_time, start):
                raise Conflict(
                    f"cannot open a session at {start!r}: input {self.name!r} is already at "
                    f"{base_time!r}"
                )
        session_id = id or uuid.uuid4().hex
        self._record("open", (session_id, time), None, None)
        base = self._base
        assert base is not None  # the input is open: its close has not been applied either
        # Holding a capability early is safe (it only holds progress back): made at once.
        session = Session(session_id, base.delayed(time), time)
        self.sessions[session.id] = session
        return session

    def push(
        self, session_id: str, seq: int, batch: list[tuple[Hashable, Any]], raw: Raw | None = None
    ) -> Ack:
        """Send a batch of ``(time, record)`` pairs, whole or not at all.

        A batch whose ``seq`` equals the last one applied is acknowledged again without being
        applied (a retry); a lower one is stale. ``raw`` is the batch as it arrived, for the
        journal.
        """
        times, records = _columns(batch)
        return self.push_columns(session_id, seq, times, records, raw=raw)

    def push_columns(
        self,
        session_id: str,
        seq: int,
        times: Sequence[Hashable],
        records: Sequence[Any],
        bounds: tuple[int, int] | None = None,
        raw: Raw | None = None,
    ) -> Ack:
        """:meth:`push` for a batch given as its times and its records (equally long).

        ``bounds`` says the caller checked already that every time is an int in
        ``[bounds[0], bounds[1]]`` (within the time domain), which spares a pass over them.
        """
        session = self._session(session_id)
        repeated = self._repeat(session, seq)
        if repeated is not None:
            return repeated
        if len(records) > self._limits.max_batch_records:
            raise LimitExceeded(
                f"a batch of {len(records)} records exceeds max_batch_records "
                f"({self._limits.max_batch_records})"
            )
        time = session.time
        if bounds is None or type(time) is not int or not time <= bounds[0]:
            self._validate(session, times, "push")
        self._record("push", (session_id, seq), raw, (times, records))
        if bounds is not None and bounds[0] == bounds[1]:
            self._send_at(bounds[0], records)  # one time: no pass over the times at all
        else:
            self._send(times, records)
        session.seq = seq
        ack = session.last_ack = self._ack(session, seq, len(records))
        return ack

    def advance(self, session_id: str, time: Hashable, seq: int | None = None) -> Ack:
        """Move a session to the later ``time``: earlier times are complete as far as it goes."""
        session = self._session(session_id)
        if seq is not None:
            repeated = self._repeat(session, seq)
            if repeated is not None:
                return repeated
        self._check_advance(session, time)
        self._record("advance", (session_id, time, seq), None, None)
        self._advance(session, time)
        if seq is not None:
            session.seq = seq
        ack = self._ack(session, seq, 0)
        if seq is not None:
            session.last_ack = ack
        return ack

    def close_session(self, session_id: str) -> Ack:
        """Close a session: it will send nothing more."""
        session = self._session(session_id)
        self._record("close_session", (session_id,), None, None)
        session.closed = True
        del self.sessions[session_id]
        self._effect(session.capability.drop)
        self._settle()
        return self._ack(None, None, 0)

    def _check_advance(self, session: Session, time: Hashable, pointer: str = "/time") -> None:
        _check(time, like=self._minimum, pointer=pointer)
        if not less_equal(session.time, time):
            raise Conflict(
                f"cannot advance the session from {session.time!r} to the earlier {time!r}"
            )

    def _advance(self, session: Session, time: Hashable) -> None:
        """Move a (checked) session to ``time``."""
        session.time = time
        self._effect(session.capability.downgrade, time)
        self._settle()

    def _repeat(self, session: Session, seq: int) -> Ack | None:
        if type(seq) is not int or seq < 1:
            raise Invalid(f"seq must be a positive integer, not {seq!r}")
        if seq == session.seq and session.last_ack is not None:
            return session.last_ack
        if seq <= session.seq:
            raise Conflict(
                f"seq {seq} is stale: session {session.id} has applied up to {session.seq}"
            )
        return None

    def _validate(self, session: Session, times: Sequence[Hashable], what: str) -> None:
        time = session.time
        if _all_at_or_after(times, time):
            return
        # Something is wrong: find the first offending record, for a precise message.
        for index, at in enumerate(times):
            _check(at, f"record {index}", self._minimum, f"/records/{index}/0")
            if not less_equal(time, at):
                raise Conflict(
                    f"record {index} is at {at!r}, before the session's time {time!r}: the "
                    f"{what} was refused and nothing of it applied"
                )

    def _send_at(self, time: Hashable, records: Sequence[Any]) -> None:
        """Send checked records, all at ``time``."""
        if records:
            if self.journal is not None:
                self.journal.sent((time,))
            self._effect(self._emit, [(time, list(records))])
            self.records_in += len(records)

    def _emit(self, batches: list[tuple[Hashable, list[Any]]]) -> None:
        """Send batches of records, each at its time (the capabilities allow it)."""
        output = self._output
        for at, records in batches:
            output.send_at(at, records)
        output.operator.touch()

    def _send(self, times: Sequence[Hashable], records: Sequence[Any]) -> None:
        """Send checked records, one batch per distinct time."""
        if not records:
            return
        if len(set(times)) == 1:
            # The common case (a producer pushes one time per batch): no loop per record.
            self._send_at(times[0], records)
            return
        by_time: dict[Hashable, list[Any]] = {at: [] for at in times}
        for at, record in zip(times, records, strict=True):
            by_time[at].append(record)
        # The session's capability is at or before each time: checked by _validate.
        if self.journal is not None:
            self.journal.sent(by_time)
        self._effect(self._emit, list(by_time.items()))
        self.records_in += len(records)

    # ----------------------------------------------------------------- transactions

    def stage(
        self,
        transaction_id: str,
        batch: list[tuple[Hashable, Any]] | Columns,
        raw: Raw | None = None,
        at: float | None = None,
    ) -> int:
        """Add records to a transaction (created on first use); returns its size.

        ``batch`` is ``(time, record)`` pairs, or :class:`Columns` (an Arrow body), kept as
        they are: their times are checked in bulk here and the records become Python
        objects only when committed. ``raw`` is the batch as it arrived, for the journal.
        ``at`` is when the request came (wall-clock seconds; now, unless it is replayed):
        the transaction expires ``staged_transaction_seconds`` after its last one. An
        expired transaction is :class:`TransactionExpired` until its name is aborted: its
        earlier records are gone, and more records must not pass for all of them.
        """
        base_time = self._check_open()
        at = wallclock.time() if at is None else at
        self._check_not_expired(transaction_id, at, "nothing was staged")
        if self._staged + len(batch) > self._limits.max_staged_records_per_input:
            raise LimitExceeded(
                f"input {self.name!r} would hold more than max_staged_records_per_input "
                f"({self._limits.max_staged_records_per_input}) staged records"
            )
        size = _body_bytes(raw)
        if self._staged_bytes + size > self._limits.max_staged_bytes_per_input:
            raise LimitExceeded(
                f"input {self.name!r} would hold more than max_staged_bytes_per_input "
                f"({self._limits.max_staged_bytes_per_input}) bytes of staged bodies"
            )
        if isinstance(batch, list):
            self._check_staged_pairs(batch, base_time)
        elif len(batch):
            self._check_staged_columns(batch, base_time)
        self._record("stage", (transaction_id, at), raw, batch)
        transaction = self.transactions.get(transaction_id)
        if transaction is None:
            transaction = self.transactions[transaction_id] = Transaction(transaction_id, at)
        transaction.touched = at
        if len(batch):
            transaction.chunks.append(batch)
            transaction.size += len(batch)
            transaction.bytes += size
            self._staged += len(batch)
            self._staged_bytes += size
            if self.journal is not None:
                transaction.logged.append((raw, batch if raw is None else None))
        return transaction.size

    def _check_staged_pairs(self, batch: list[tuple[Hashable, Any]], time: Hashable) -> None:
        if _pairs_at_or_after(batch, time):
            return
        # Something is wrong: find the first offending record, for a precise message.
        for index, (at, _record) in enumerate(batch):
            _check(at, f"record {index}", self._minimum, f"/records/{index}/0")
            if not less_equal(time, at):
                raise self._refused_stage(index, at, time)

    def _check_staged_columns(self, batch: Columns, time: Hashable) -> None:
        if type(time) is not int:  # a product domain: integer times are not its times
            _check(batch.time_at(0), "record 0", self._minimum, "/records/0/0")
        if batch.least < cast("int", time):
            index = batch.first_before(cast("int", time))
            raise self._refused_stage(index, batch.time_at(index), time)

    def _refused_stage(self, index: int, at: Hashable, time: Hashable) -> Conflict:
        return Conflict(
            f"record {index} is at {at!r}, before input {self.name!r}'s time {time!r}: it "
            f"could never be committed; nothing was staged"
        )

    def staged(self) -> dict[str, int]:
        """The open transactions and how many records each holds, in the order they began."""
        return {t.id: t.size for t in self.transactions.values()}

    def _unstage(self, transaction: Transaction) -> None:
        """Take a transaction that is gone (committed, aborted, expired) off the caps."""
        self._staged -= transaction.size
        self._staged_bytes -= transaction.bytes

    @property
    def staged_records(self) -> int:
        """Records staged in all open transactions (bounded by max_staged_records_per_input)."""
        return self._staged

    def abort(self, transaction_id: str) -> int:
        """Discard a transaction's staged records; returns how many there were (0 if none).

        Aborting a transaction that expired answers 0 (its records were discarded when it
        expired) and frees its name for a new transaction.
        """
        self._check_open()
        if transaction_id not in self.transactions:
            if transaction_id in self._expired:
                self._record("abort", (transaction_id,), None, None)
                del self._expired[transaction_id]
            return 0
        self._record("abort", (transaction_id,), None, None)
        transaction = self.transactions.pop(transaction_id)
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
        if self._time is None or self.dropped:
            return []
        now = wallclock.time() if now is None else now
        due = now - self._limits.staged_transaction_seconds
        stale = [t for t in self.transactions.values() if t.touched <= due]
        for transaction in stale:
            self.expire_transaction(transaction.id, now)
        return [(t.id, t.size) for t in stale]

    def expire_transaction(self, transaction_id: str, now: float) -> None:
        """Expire one transaction at ``now`` (logged): discard its records, keep why."""
        transaction = self.transactions.get(transaction_id)
        if transaction is None:
            return
        self._record("expire", (transaction_id, now), None, None)
        del self.transactions[transaction_id]
        self._unstage(transaction)
        self._expired[transaction_id] = Expiry(transaction.touched, now, transaction.size)
        while len(self._expired) > self._limits.idempotency_keys_kept:
            self._expired.popitem(last=False)

    def _check_not_expired(self, transaction_id: str, now: float, outcome: str) -> None:
        """:class:`TransactionExpired` if the transaction expired (now, if it is due)."""
        transaction = self.transactions.get(transaction_id)
        if (
            transaction is not None
            and transaction.touched <= now - self._limits.staged_transaction_seconds
        ):
            # Due, and the periodic expiry has not come round yet: it expires now, the same
            # way, so what a request finds does not depend on when that runs.
            self.expire_transaction(transaction_id, now)
        expiry = self._expired.get(transaction_id)
        if expiry is None:
            return
        seconds = self._limits.staged_transaction_seconds
        raise TransactionExpired(
            f"transaction {transaction_id!r} of input {self.name!r} expired at "
            f"{rfc3339(expiry.expired_at)}: nothing staged into it, committed it or aborted it "
            f"for {seconds:g} s (staged_transaction_seconds), so its {expiry.records} records "
            f"were discarded; {outcome} (abort it to use its name again)",
            transaction_id,
            rfc3339(expiry.expired_at),
        )

    def commit(
        self,
        session_id: str | None,
        transaction_ids: list[str],
        idempotency_key: str,
        advance_to: Hashable | None = None,
        discard: Iterable[str] = (),
    ) -> Ack:
        """Make the transactions' records visible at once, then advance.

        Everything is checked first; on any problem nothing is applied. The same
        ``idempotency_key`` with the same transactions answers the first commit's ack (even
        once the session that made it is closed); with other transactions it is
        :class:`IdempotencyKeyReused`. Once the commit is done (now, or before under the
        key) the ``discard`` transactions are aborted: a producer's leftovers (for example
        the transactions of failed attempts), cleaned up in the same call.

        With a session, the records must be at or after the session's time and
        ``advance_to`` (not earlier) advances the session. Without one (``None``) the commit
        acts as a session opened at the input's time for this call and closed after it: the
        records must be at or after the input's time, and ``advance_to`` moves the input
        there when no session is open (an open session holds the input at the meet of the
        sessions' times); an ``advance_to`` the input is already at or past is satisfied.
        """
        base_time = self._check_open()
        discard = list(discard)
        meta = (session_id, list(transaction_ids), idempotency_key, advance_to, discard)
        done = self._commits.get(idempotency_key)
        if done is not None:
            if done[0] != tuple(transaction_ids):
                raise IdempotencyKeyReused(
                    f"idempotency key {idempotency_key!r} was used to commit "
                    f"{list(done[0])}, not {transaction_ids}",
                    idempotency_key,
                    list(done[0]),
                )
            if any(t in self.transactions for t in discard):
                self._record("commit", meta, None, None)
                self._discard(discard)
            return done[1]
        session = None if session_id is None else self._session(session_id)
        now = wallclock.time()
        for t in transaction_ids:
            self._check_not_expired(t, now, "nothing was committed")
        missing = [t for t in transaction_ids if t not in self.transactions]
        if missing:
            raise NotFound(f"no staged transaction {missing[0]!r} on input {self.name!r}")
        chunks = [c for t in transaction_ids for c in self.transactions[t].chunks]
        if session is not None:
            time = session.time
            self._check_commit(chunks, time, f"the session's time {time!r}")
        else:
            time = base_time
            self._check_commit(chunks, time, f"input {self.name!r}'s time {time!r}")
        if advance_to is not None:
            _check(advance_to, like=self._minimum, pointer="/advance_to")
            if session is None and less_equal(advance_to, time):
                advance_to = None  # the input is there already
            elif not less_equal(time, advance_to):
                held = "session" if session is not None else f"input {self.name!r}"
                raise Conflict(
                    f"cannot advance the {held} from {time!r} to the earlier {advance_to!r}; "
                    f"nothing was committed"
                )
            if session is not None:
                self._check_advance(session, advance_to, "/advance_to")
        self._record("commit", meta, None, None)
        applied = self._send_staged(chunks)
        for t in transaction_ids:
            self._unstage(self.transactions.pop(t))
        if advance_to is not None:
            if session is not None:
                self._advance(session, advance_to)
            elif not self.sessions:
                self._move_base(advance_to)
        ack = self._ack(session, None, applied)
        self._commits[idempotency_key] = (tuple(transaction_ids), ack)
        while len(self._commits) > self._limits.idempotency_keys_kept:
            self._commits.popitem(last=False)
        self._discard(discard)
        return ack

    def _discard(self, transaction_ids: Iterable[str]) -> None:
        for t in transaction_ids:
            transaction = self.transactions.pop(t, None)
            if transaction is not None:
                self._unstage(transaction)
            self._expired.pop(t, None)  # discarded as a leftover: its name is free again

    def _check_commit(self, chunks: list[Chunk], time: Hashable, what: str) -> None:
        """Every staged record is at or after ``time``; else a precise :class:`Conflict`.

        Their times were checked when staged; the common case is checked in bulk.
        """
        offset = 0
        for chunk in chunks:
            index: int | None = None
            if isinstance(chunk, list):
                if not _pairs_at_or_after(chunk, time):
                    index = next(
                        (i for i, (at, _r) in enumerate(chunk) if not less_equal(time, at)), None
                    )
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
        """Send the records of ``chunks`` with one batch per distinct time; how many."""
        groups: dict[Hashable, list[Any]] = {}
        count = 0
        for chunk in chunks:
            count += len(chunk)
            for at, records in _by_time(chunk):
                have = groups.get(at)
                if have is None:
                    groups[at] = records
                else:
                    have.extend(records)
        if not count:
            return 0
        # The input's capability is at or before each time: checked by _check_commit.
        if self.journal is not None:
            self.journal.sent(groups)
        self._effect(self._emit, list(groups.items()))
        self.records_in += count
        return count

    # ----------------------------------------------------------------- closing

    def close(self) -> None:
        """Close the input and every session: the input is complete."""
        if self._time is None:
            return
        self._record("close", (), None, None)
        for session in list(self.sessions.values()):
            session.closed = True
            self._effect(session.capability.drop)
        self.sessions.clear()
        self.transactions.clear()
        self._expired.clear()
        self._staged = 0
        self._staged_bytes = 0
        self._time = None
        self._effect(self._drop_base)

    def _drop_base(self) -> None:
        base, self._base = self._base, None
        if base is not None:
            base.drop()
            if self.on_frontier is not None:
                self.on_frontier()

    def attach(self, session_id: str) -> Session:
        """Attach a producer's socket to an open session (one at a time): to resume it.

        A producer whose connection broke (or whose server restarted) goes on with the same
        session, retrying what was not acknowledged with the same sequence numbers.
        """
        session = self._session(session_id)
        if session_id in self.attached:
            raise Conflict(f"session {session_id} of input {self.name!r} has a socket already")
        self.attached.add(session_id)
        return session

    def release_session(self, session_id: str) -> None:
        """Close a session if it is still open (its producer went away without closing it)."""
        self.attached.discard(session_id)
        if session_id in self.sessions and self._time is not None and not self.dropped:
            self.close_session(session_id)

    def view(self) -> InputView:
        """The input: frontier, time, open sessions and open transactions."""
        return InputView(
            self.name,
            self.frontier(),
            self.time(),
            self.closed,
            self.records_in,
            [SessionView(s.id, s.time) for s in self.sessions.values()],
            self.staged_records,
            self.staged(),
        )


def _columns(batch: list[tuple[Hashable, Any]]) -> tuple[Sequence[Hashable], Sequence[Any]]:
    """The times and the records of ``(time, record)`` pairs, unzipped in C."""
    if not batch:
        return (), ()
    times, records = zip(*batch, strict=True)
    return times, records


def _all_at_or_after(times: Sequence[Hashable], time: Hashable) -> bool:
    """Whether every time of an integer-time batch is a valid time at or after ``time``.

    The common case, checked in bulk (the loops run in C): ``False`` does not mean a time
    is bad, only that the time-by-time check must decide.
    """
    if type(time) is not int or not times:
        return not times
    if set(map(type, times)) != {int}:  # bools are not times; products take the long way
        return False
    ints = cast("Sequence[int]", times)
    return time <= min(ints) and max(ints) <= MAX_TIME


def _check(
    time: Hashable, where: str = "the time", like: Hashable = None, pointer: str = ""
) -> None:
    try:
        check_time(time)
    except (TypeError, ValueError) as error:
        raise Invalid(f"{where}: {error}", [{"pointer": pointer, "detail": str(error)}]) from None
    if like is not None and not same_domain(time, like):
        detail = (
            f"{encode_time(time)} is not a time of this input's domain "
            f"({'an integer' if type(like) is int else 'like ' + repr(encode_time(like))})"
        )
        raise Invalid(f"{where}: {detail}", [{"pointer": pointer, "detail": detail}])


def producer_input(
    scope: Any,
    name: str,
    owner: int,
    limits: Limits,
    register: Callable[[ProducerInput], None],
) -> Stream:
    """The input operator for ``name``.

    On worker ``owner`` it holds the input's capability and is handed to ``register``; on
    every other worker it holds nothing.
    """
    builder = OperatorBuilder(scope, f"Input[{name}]")
    output, stream = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], bool]:
        capability = capabilities[0]
        if scope.index == owner:
            register(ProducerInput(name, output, capability, limits))
        else:
            capability.drop()
        return lambda: False  # all its work happens in the producers' calls

    builder.build(constructor, Interest.NEVER)
    return stream
