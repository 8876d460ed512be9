"""A producer input: what the service offers producers of one input, by concept.

An input of a dataflow is an operator on one worker (its *owner*). There its
:class:`ProducerInput` takes the producers' operations: :mod:`sessions
<service.app.inputs.sessions>` push and advance, :mod:`transactions
<service.app.inputs.transactions>` stage and commit (and expire), each operation journaled
before it takes effect (:mod:`journaling <service.app.inputs.journaling>`), and its effects
on the dataflow go through the input's :mod:`capabilities <service.app.inputs.capabilities>`.
"""

from __future__ import annotations

import time as wallclock
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeAlias

from operators import Capability, OperatorBuilder, OutputPort, Stream
from operators.graph.schema import Schema
from operators.runtime import Interest
from service.app.inputs import journaling
from service.app.inputs.capabilities import InputCapabilities, InputListener
from service.app.inputs.chunks import Chunk
from service.app.inputs.core import InputCore, Session
from service.app.inputs.sessions import Sessions
from service.app.inputs.times import unzip
from service.app.inputs.transactions import Transaction, Transactions
from service.app.journal import NULL_INPUT, InputJournal
from service.app.settings import Limits
from service.app.views import Ack, InputView, SessionView
from service.store import ARROW, JSON, Batch, Checkpoint, Frame
from service.store.typed import TypedRecords

Raw: TypeAlias = "tuple[str, bytes]"
"""A batch as it arrived: its format (``"json"``, ``"arrow"``, or ``"arrow-columns"`` for an
Arrow staging body kept as columns) and its bytes."""


def _batch(raw: Raw | None) -> Batch | None:
    if raw is None:
        return None
    kind, data = raw
    return Batch(JSON if kind == JSON else ARROW, data)


class _Quiet:
    """The listener of an input nobody follows (built outside a dataflow's service)."""

    def input_moved(self, name: str) -> None:
        """Nothing to tell."""

    def records_arrived(self, name: str, times: Iterable[Hashable]) -> None:
        """Nothing to tell."""


class ProducerInput:
    """The sessions, transactions and capabilities of one input, on its owner worker."""

    __slots__ = ("_sessions", "_transactions", "core", "name", "parts")

    def __init__(
        self,
        name: str,
        output: OutputPort,
        base: Capability,
        limits: Limits,
        journal: InputJournal = NULL_INPUT,
        listener: InputListener | None = None,
        schema: Schema | None = None,
    ) -> None:
        self.name = name
        capabilities = InputCapabilities(
            name,
            output,
            base,
            listener or _Quiet(),
            lambda: self.core.journal.position,
            journal.defers_effects,
        )
        self.core = InputCore(name, capabilities, journal, limits, self.snapshot, schema)
        self._sessions = Sessions(self.core)
        self._transactions = Transactions(self.core, self._sessions)
        self.parts = journaling.Parts(self.core, self._sessions, self._transactions)

    # ----------------------------------------------------------------- state

    @property
    def sessions(self) -> dict[str, Session]:
        """The open sessions, by id."""
        return self._sessions.open

    @property
    def attached(self) -> set[str]:
        """Sessions a producer's socket is attached to (one socket per session)."""
        return self._sessions.attached

    @property
    def transactions(self) -> dict[str, Transaction]:
        """The open transactions, by name, in the order they began."""
        return self._transactions.open

    @property
    def schema(self) -> Schema | None:
        """The input's schema: its records are typed (Arrow columns); ``None``: untyped."""
        return self.core.schema

    @property
    def journal(self) -> InputJournal:
        """Where operations are written before they take effect."""
        return self.core.journal

    @property
    def records_in(self) -> int:
        """How many records producers sent into the dataflow."""
        return self.core.records_in

    @property
    def dropped_late(self) -> int:
        """Rows producers dropped as late, as their commits said (``dropped``)."""
        return self.core.dropped_late

    @property
    def dropped(self) -> bool:
        """Whether the dataflow was dropped (or failed): every operation is then 410."""
        return self.core.dropped

    @dropped.setter
    def dropped(self, value: bool) -> None:
        self.core.dropped = value

    @property
    def closed(self) -> bool:
        """Whether the input was closed (nothing more can ever arrive)."""
        return self.core.times is None

    def time(self) -> Hashable | None:
        """The input's own time: the first time of its frontier.

        A new session starts at or after one of the frontier's times (:meth:`frontier`).
        """
        return self.core.time

    def frontier(self) -> list[Hashable]:
        """The times that may still arrive here: the meet of its sessions (or its own time).

        As producers know it: what acknowledgements say.
        """
        return self.core.frontier()

    def applied_frontier(self) -> list[Hashable]:
        """The input's frontier as the dataflow sees it.

        Behind :meth:`frontier` only while operations wait to be durable.
        """
        return self.core.capabilities.applied_frontier()

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
            self.core.dropped_late,
            None if self.core.schema is None else self.core.schema.describe(),
        )

    # ----------------------------------------------------------------- durability

    async def durable(self) -> None:
        """Wait until every operation so far is durable; apply the effects that waited.

        What an acknowledgement awaits (at once when nothing waits: no journal, or a
        durability that does not wait for the disk). "So far" is when it is called: what
        other producers write meanwhile is theirs to wait for. Waiting until the log is
        synced up to its latest frame instead made every acknowledgement wait a sync round
        more under concurrent producers, one of which had always written since.
        """
        journal = self.core.journal
        written = journal.position
        waiter = journal.wait()
        while waiter is not None:
            await waiter
            if journal.synced > written:
                break
            waiter = journal.wait()
        self.core.capabilities.apply_durable(journal.synced)

    def snapshot(self) -> Checkpoint:
        """The input's state as producers know it: what a checkpoint of its log holds."""
        return journaling.checkpoint(self.parts)

    def restore(self, state: Checkpoint) -> None:
        """Take a checkpoint's state: a fresh input (nothing applied yet) resumes from it."""
        journaling.restore(self.parts, state)

    def replay(self, frame: Frame) -> int:
        """Apply one logged operation again (recovery); how many records it carried."""
        return journaling.apply(self.parts, frame)

    # ----------------------------------------------------------------- sessions

    def open_session(self, start: Hashable | None = None, *, id: str | None = None) -> Session:
        """Open a session at ``start`` (default: the input's time), which must not be earlier.

        ``id`` is given only when an opening is replayed from the log.
        """
        return self._sessions.open_session(start, id)

    def push(
        self, session_id: str, seq: int, batch: list[tuple[Hashable, Any]], raw: Raw | None = None
    ) -> Ack:
        """Send a batch of ``(time, record)`` pairs, whole or not at all.

        A batch whose ``seq`` equals the last one applied is acknowledged again without being
        applied (a retry); a lower one is stale. ``raw`` is the batch as it arrived, for the
        journal.
        """
        times, records = unzip(batch)
        return self._sessions.push(session_id, seq, times, records, None, _batch(raw))

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
        return self._sessions.push(session_id, seq, times, records, bounds, _batch(raw))

    def typed_arrow(self, body: bytes) -> TypedRecords:
        """An Arrow IPC body read as this typed input's columns, checked against its schema.

        :class:`~service.app.errors.Invalid` (422) names the column (and row) that does not
        fit; :class:`~service.app.errors.BadRequest` a body that is not a batch. Push it
        with :meth:`push_typed`, or stage it (:meth:`stage`).
        """
        return self.core.typed_arrow(body)

    def push_typed(
        self, session_id: str, seq: int, typed: TypedRecords, raw: Raw | None = None
    ) -> Ack:
        """:meth:`push` for a typed batch (:meth:`typed_arrow`).

        Its columns go into the dataflow as they are; ``raw`` (the body as it came) is what
        the journal keeps.
        """
        return self._sessions.push_typed(session_id, seq, typed, _batch(raw))

    def advance(self, session_id: str, time: Hashable, seq: int | None = None) -> Ack:
        """Move a session to the later ``time``: earlier times are complete as far as it goes."""
        return self._sessions.advance(session_id, time, seq)

    def close_session(self, session_id: str) -> Ack:
        """Close a session: it will send nothing more."""
        return self._sessions.close_session(session_id)

    def attach(self, session_id: str) -> Session:
        """Attach a producer's socket to an open session (one at a time): to resume it."""
        return self._sessions.attach(session_id)

    def detach(self, session_id: str, now: float | None = None, grace: bool = True) -> None:
        """A producer's socket ended: its session stays open for ``session_grace_seconds``.

        A socket that resumes it (:meth:`attach`) within that time goes on with it; after
        it, :meth:`close_abandoned` closes it. ``now`` is the wall clock by default. Without
        ``grace`` (the producer broke the protocol) the session is closed at once.
        """
        self._sessions.detach(session_id, wallclock.time() if now is None else now, grace)

    def close_abandoned(self, now: float | None = None) -> list[str]:
        """Close the sessions whose socket ended ``session_grace_seconds`` ago; which."""
        return self._sessions.close_abandoned(wallclock.time() if now is None else now)

    def resent(self, session_id: str, seq: int) -> Ack | None:
        """The ack of a frame sent again that was applied before (``applied`` 0), else None."""
        return self._sessions.resent(session_id, seq)

    # ----------------------------------------------------------------- transactions

    def stage(
        self,
        transaction_id: str,
        batch: Chunk,
        raw: Raw | None = None,
        at: float | None = None,
        *,
        logged: Batch | None = None,
    ) -> int:
        """Add records to a transaction (created on first use); returns its size.

        ``batch`` is ``(time, record)`` pairs, or :class:`~service.app.inputs.Columns` (an
        Arrow body), kept as they are until committed; ``raw`` is the batch as it arrived
        (``logged``, as it was logged, when it is replayed). ``at`` is when the request came
        (wall-clock seconds; now, unless it is replayed).
        """
        return self._transactions.stage(transaction_id, batch, logged or _batch(raw), at)

    def staged(self) -> dict[str, int]:
        """The open transactions and how many records each holds, in the order they began."""
        return self._transactions.sizes()

    @property
    def staged_records(self) -> int:
        """Records staged in all open transactions (bounded by max_staged_records_per_input)."""
        return self._transactions.staged

    def abort(self, transaction_id: str) -> int:
        """Discard a transaction's staged records; returns how many there were (0 if none)."""
        return self._transactions.abort(transaction_id)

    def expire(self, now: float | None = None) -> list[tuple[str, int]]:
        """Expire every transaction left ``staged_transaction_seconds`` before ``now``."""
        return self._transactions.expire(now)

    def expire_transaction(self, transaction_id: str, now: float) -> None:
        """Expire one transaction at ``now`` (logged): discard its records, keep why."""
        self._transactions.expire_transaction(transaction_id, now)

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

        See :meth:`Transactions.commit <service.app.inputs.transactions.Transactions.commit>`.
        """
        return self._transactions.commit(
            session_id, transaction_ids, idempotency_key, advance_to, discard, digest, dropped
        )

    # ----------------------------------------------------------------- closing

    def close(self) -> None:
        """Close the input and every session: the input is complete."""
        self.parts.close()


def producer_input(
    scope: Any,
    name: str,
    owner: int,
    make: Callable[[OutputPort, Capability], ProducerInput],
) -> Stream:
    """The input operator for ``name``.

    On worker ``owner`` it holds the input's capability, given to ``make`` with the
    operator's output; on every other worker it holds nothing.
    """
    builder = OperatorBuilder(scope, f"Input[{name}]")
    output, stream = builder.new_output()

    def constructor(capabilities: list[Capability]) -> Callable[[], bool]:
        capability = capabilities[0]
        if scope.index == owner:
            make(output, capability)
        else:
            capability.drop()
        return lambda: False  # all its work happens in the producers' calls

    builder.build(constructor, Interest.NEVER)
    return stream
