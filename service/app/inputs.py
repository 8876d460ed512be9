"""Producer inputs: sessions pushing timestamped records, retries and transactions.

An input of a dataflow is an operator on one worker (its *owner*) holding a capability at
the input's time. Each producer *session* holds a capability of its own, at or after the
input's time. As sessions advance or close, the input's time follows the meet of the open
sessions' times (so its frontier is that meet); a new session may start at the input's time
or later, and while no session is open the input stays where it is, until it is closed.

A session pushes batches of ``[time, record]`` pairs, each with a sequence number; a batch
is checked whole before any record is sent, so it is applied entirely or not at all.

A *transaction* stages records on the server; committing it (through the session that holds
the capability for their times) sends them all at once and may advance the session in the
same call; aborting discards them. A commit carries an idempotency key: committing twice
with the same key applies once and answers the same.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from operators import Capability, OperatorBuilder, OutputPort, Stream
from operators.capture.event import encode_time
from service.app.errors import Conflict, Gone, Invalid, LimitExceeded, NotFound
from service.app.settings import Limits
from service.progress import (
    MAX_TIME,
    Product,
    check_time,
    less_equal,
    minimum_like,
    same_domain,
)
from service.runtime import Interest


def meet(a: Hashable, b: Hashable) -> Hashable:
    """The greatest time at or before both ``a`` and ``b`` (``min`` for integers)."""
    if type(a) is int and type(b) is int:
        return min(a, b)
    if isinstance(a, Product) and isinstance(b, Product):
        return Product(meet(a.outer, b.outer), meet(a.inner, b.inner))
    raise TypeError(f"times of different domains: {a!r} and {b!r}")


@dataclass(frozen=True, slots=True)
class Ack:
    """What a push, advance or commit answers: the sequence number and the times now."""

    seq: int | None
    session_time: Hashable | None
    input_frontier: list[Hashable]
    applied: int


@dataclass(slots=True)
class Session:
    """A producer's session: its capability (its time) and its last sequence number."""

    id: str
    capability: Capability
    seq: int = 0
    last_ack: Ack | None = None
    closed: bool = False

    @property
    def time(self) -> Hashable:
        """Records pushed now must be at this time or later."""
        return self.capability.time


@dataclass(slots=True)
class Transaction:
    """Records staged for an atomic commit."""

    id: str
    records: list[tuple[Hashable, Any]] = field(default_factory=list)


class ProducerInput:
    """The sessions, transactions and capability of one input, on its owner worker."""

    def __init__(self, name: str, output: OutputPort, base: Capability, limits: Limits) -> None:
        self.name = name
        self._minimum = minimum_like(base.time)
        self._output = output
        self._base: Capability | None = base
        self._limits = limits
        self.sessions: dict[str, Session] = {}
        self.transactions: dict[str, Transaction] = {}
        self._staged = 0
        self._commits: OrderedDict[str, tuple[tuple[str, ...], Ack]] = OrderedDict()
        self.records_in = 0
        self.dropped = False

    # ----------------------------------------------------------------- state

    @property
    def closed(self) -> bool:
        """Whether the input was closed (nothing more can ever arrive)."""
        return self._base is None

    def time(self) -> Hashable | None:
        """The input's own time: the earliest time a new session may start at."""
        return None if self._base is None else self._base.time

    def frontier(self) -> list[Hashable]:
        """The times that may still arrive here: the meet of its sessions (or its own time)."""
        return [] if self._base is None else [self._base.time]

    def _check_open(self) -> Capability:
        if self.dropped:
            raise Gone(f"the dataflow of input {self.name!r} was dropped")
        if self._base is None:
            raise Gone(f"input {self.name!r} is closed")
        return self._base

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
        """Move the input's own capability up to the meet of its sessions."""
        base = self._base
        if base is None or not self.sessions:
            return
        times = [s.time for s in self.sessions.values()]
        least = times[0]
        for time in times[1:]:
            least = meet(least, time)
        if least != base.time:
            base.downgrade(least)

    # ----------------------------------------------------------------- sessions

    def open_session(self, start: Hashable | None = None) -> Session:
        """Open a session at ``start`` (default: the input's time), which must not be earlier."""
        base = self._check_open()
        if len(self.sessions) >= self._limits.max_sessions_per_input:
            raise LimitExceeded(
                f"input {self.name!r} has {len(self.sessions)} open sessions, "
                f"the limit (max_sessions_per_input)"
            )
        time = base.time if start is None else start
        if start is not None:
            _check(start, like=self._minimum, pointer="/start")
            if not less_equal(base.time, start):
                raise Conflict(
                    f"cannot open a session at {start!r}: input {self.name!r} is already at "
                    f"{base.time!r}"
                )
        session = Session(uuid.uuid4().hex, base.delayed(time))
        self.sessions[session.id] = session
        return session

    def push(self, session_id: str, seq: int, batch: list[tuple[Hashable, Any]]) -> Ack:
        """Send a batch of ``(time, record)`` pairs, whole or not at all.

        A batch whose ``seq`` equals the last one applied is acknowledged again without being
        applied (a retry); a lower one is stale.
        """
        session = self._session(session_id)
        repeated = self._repeat(session, seq)
        if repeated is not None:
            return repeated
        if len(batch) > self._limits.max_batch_records:
            raise LimitExceeded(
                f"a batch of {len(batch)} records exceeds max_batch_records "
                f"({self._limits.max_batch_records})"
            )
        times, records = _columns(batch)
        self._validate(session, times, "push")
        self._send(times, records)
        session.seq = seq
        ack = session.last_ack = self._ack(session, seq, len(batch))
        return ack

    def advance(self, session_id: str, time: Hashable, seq: int | None = None) -> Ack:
        """Move a session to the later ``time``: earlier times are complete as far as it goes."""
        session = self._session(session_id)
        if seq is not None:
            repeated = self._repeat(session, seq)
            if repeated is not None:
                return repeated
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
        session.closed = True
        del self.sessions[session_id]
        session.capability.drop()
        self._settle()
        return self._ack(None, None, 0)

    def _advance(self, session: Session, time: Hashable, pointer: str = "/time") -> None:
        _check(time, like=self._minimum, pointer=pointer)
        if not less_equal(session.time, time):
            raise Conflict(
                f"cannot advance the session from {session.time!r} to the earlier {time!r}"
            )
        session.capability.downgrade(time)
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

    def _send(self, times: Sequence[Hashable], records: Sequence[Any]) -> None:
        """Send checked records, one batch per distinct time."""
        if not records:
            return
        output = self._output
        distinct = set(times)
        if len(distinct) == 1:
            # The common case (a producer pushes one time per batch): no loop per record.
            output.send_at(times[0], list(records))
        else:
            by_time: dict[Hashable, list[Any]] = {at: [] for at in times}
            for at, record in zip(times, records, strict=True):
                by_time[at].append(record)
            for at, batch in by_time.items():
                # The session's capability is at or before ``at``: checked by _validate.
                output.send_at(at, batch)
        output.operator.touch()
        self.records_in += len(records)

    # ----------------------------------------------------------------- transactions

    def stage(self, transaction_id: str, batch: list[tuple[Hashable, Any]]) -> int:
        """Add records to a transaction (created on first use); returns its size."""
        base = self._check_open()
        if self._staged + len(batch) > self._limits.max_staged_records_per_input:
            raise LimitExceeded(
                f"input {self.name!r} would hold more than max_staged_records_per_input "
                f"({self._limits.max_staged_records_per_input}) staged records"
            )
        for index, (at, _record) in enumerate(batch):
            _check(at, f"record {index}", self._minimum, f"/records/{index}/0")
            if not less_equal(base.time, at):
                raise Conflict(
                    f"record {index} is at {at!r}, before input {self.name!r}'s time "
                    f"{base.time!r}: it could never be committed; nothing was staged"
                )
        transaction = self.transactions.get(transaction_id)
        if transaction is None:
            transaction = self.transactions[transaction_id] = Transaction(transaction_id)
        transaction.records.extend(batch)
        self._staged += len(batch)
        return len(transaction.records)

    def abort(self, transaction_id: str) -> int:
        """Discard a transaction's staged records; returns how many there were (0 if none)."""
        self._check_open()
        transaction = self.transactions.pop(transaction_id, None)
        if transaction is None:
            return 0
        self._staged -= len(transaction.records)
        return len(transaction.records)

    def commit(
        self,
        session_id: str,
        transaction_ids: list[str],
        idempotency_key: str,
        advance_to: Hashable | None = None,
    ) -> Ack:
        """Make the transactions' records visible at once, then advance the session.

        Everything is checked first; on any problem nothing is applied. The same
        ``idempotency_key`` with the same transactions answers the first commit's ack.
        """
        session = self._session(session_id)
        done = self._commits.get(idempotency_key)
        if done is not None:
            if done[0] != tuple(transaction_ids):
                raise Conflict(
                    f"idempotency key {idempotency_key!r} was used to commit "
                    f"{list(done[0])}, not {transaction_ids}"
                )
            return done[1]
        missing = [t for t in transaction_ids if t not in self.transactions]
        if missing:
            raise NotFound(f"no staged transaction {missing[0]!r} on input {self.name!r}")
        batch = [r for t in transaction_ids for r in self.transactions[t].records]
        times, records = _columns(batch)
        self._validate(session, times, "commit")
        if advance_to is not None:
            _check(advance_to, like=self._minimum, pointer="/advance_to")
            if not less_equal(session.time, advance_to):
                raise Conflict(
                    f"cannot advance the session from {session.time!r} to the earlier "
                    f"{advance_to!r}; nothing was committed"
                )
        self._send(times, records)
        for t in transaction_ids:
            self._staged -= len(self.transactions.pop(t).records)
        if advance_to is not None:
            self._advance(session, advance_to, "/advance_to")
        ack = self._ack(session, None, len(batch))
        self._commits[idempotency_key] = (tuple(transaction_ids), ack)
        while len(self._commits) > self._limits.idempotency_keys_kept:
            self._commits.popitem(last=False)
        return ack

    # ----------------------------------------------------------------- closing

    def close(self) -> None:
        """Close the input and every session: the input is complete."""
        if self._base is None:
            return
        for session in list(self.sessions.values()):
            session.closed = True
            session.capability.drop()
        self.sessions.clear()
        self.transactions.clear()
        self._staged = 0
        self._base.drop()
        self._base = None


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
