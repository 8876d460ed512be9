"""Producer sessions: each holds a capability at its time and pushes batches in order.

A session pushes batches of ``[time, record]`` pairs, each with a sequence number; a batch
is checked whole before any record is sent, so it is applied entirely or not at all. The
same sequence number again is a retry, answered with the first acknowledgement; a lower one
is stale. As sessions advance or close, the input's own time follows the meet of the open
sessions' times; while no session is open the input stays where it is, until it is closed.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Sequence
from typing import Any

from operators.progress import less_equal
from service.app.errors import Conflict, Invalid, LimitExceeded, NotFound
from service.app.inputs.core import InputCore, Session, holds, minimal, shown
from service.app.inputs.times import all_at_or_after, check
from service.app.views import Ack
from service.store import Advance, Batch, CloseSession, Open, Push
from service.store.typed import TypedRecords


class Sessions:
    """The open sessions of one input, and the sockets attached to them."""

    __slots__ = ("_core", "attached", "detached", "open")

    def __init__(self, core: InputCore) -> None:
        self._core = core
        self.open: dict[str, Session] = {}
        self.attached: set[str] = set()
        """Sessions a producer's socket is attached to (one socket per session)."""
        self.detached: dict[str, float] = {}
        """Sessions whose socket ended, and when (wall-clock seconds): each is closed once
        ``session_grace_seconds`` pass without a socket resuming it."""

    def get(self, session_id: str) -> Session:
        """An open session; :class:`NotFound` if there is none, :class:`Gone` if closed."""
        self._core.check_open()
        session = self.open.get(session_id)
        if session is None:
            raise NotFound(f"input {self._core.name!r} has no open session {session_id!r}")
        return session

    def open_session(self, start: Hashable | None = None, id: str | None = None) -> Session:
        """Open a session at ``start``, at or after a time of the input's frontier.

        ``start`` defaults to the input's time (when its frontier is one time: with several,
        the producer must say which, or a later one). ``id`` is given only when an opening is
        replayed from the log.
        """
        core = self._core
        times = core.check_open()
        if len(self.open) >= core.limits.max_sessions_per_input:
            raise LimitExceeded(
                f"input {core.name!r} has {len(self.open)} open sessions, "
                f"the limit (max_sessions_per_input)"
            )
        if start is None:
            if len(times) > 1:
                raise Conflict(
                    f"input {core.name!r} is at several times {times!r}: give the session's "
                    "start (at or after one of them)"
                )
            time = times[0]
        else:
            check(start, like=core.minimum, pointer="/start")
            if not holds(times, start):
                raise Conflict(
                    f"cannot open a session at {start!r}: input {core.name!r} is already at "
                    f"{shown(times)}"
                )
            time = start
        session_id = id or uuid.uuid4().hex
        core.record(Open(session_id, time))
        session = Session(session_id, core.capabilities.session(time), time)
        self.open[session.id] = session
        return session

    def push(
        self,
        session_id: str,
        seq: int,
        times: Sequence[Hashable],
        records: Sequence[Any],
        bounds: tuple[int, int] | None = None,
        batch: Batch | None = None,
    ) -> Ack:
        """Send a batch given as its times and its records (equally long), whole or not.

        ``bounds`` says the caller checked already that every time is an int in
        ``[bounds[0], bounds[1]]`` (within the time domain), which spares a pass over them.
        ``batch`` is the batch as it arrived, for the journal.
        """
        core = self._core
        session = self.get(session_id)
        repeated = self._repeat(session, seq)
        if repeated is not None:
            return repeated
        self._check_size(len(records))
        time = session.time
        if bounds is None or type(time) is not int or not time <= bounds[0]:
            self._validate(session, times, "push")
        if core.schema is not None:
            # Checked whole against the schema (422 naming the first misfit) before anything
            # is logged; logged as the typed batch it became (Arrow IPC).
            typed = core.typed_values(times, records)
            return self._apply_typed(session, seq, typed, typed.batch())
        core.record(Push(session_id, seq, batch or Batch.of(times, records)))
        if bounds is not None and bounds[0] == bounds[1]:
            core.send_at(bounds[0], records)  # one time: no pass over the times at all
        else:
            core.send(times, records)
        return self._acked(session, seq, len(records))

    def push_typed(
        self, session_id: str, seq: int, typed: TypedRecords, batch: Batch | None = None
    ) -> Ack:
        """Send a typed batch (checked against the schema already), whole or not at all.

        ``batch`` is the batch as it arrived (an Arrow body, logged as it came), or ``None``
        to log the typed batch itself.
        """
        session = self.get(session_id)
        repeated = self._repeat(session, seq)
        if repeated is not None:
            return repeated
        self._check_size(len(typed))
        time = session.time
        if not typed.integer_times or type(time) is not int:
            self._validate(session, _times_of(typed), "push")
        elif len(typed) and typed.least < time:
            index = typed.first_before(time)
            raise Conflict(
                f"record {index} is at {typed.time_at(index)!r}, before the session's time "
                f"{time!r}: the push was refused and nothing of it applied"
            )
        return self._apply_typed(session, seq, typed, batch or typed.batch())

    def _apply_typed(self, session: Session, seq: int, typed: TypedRecords, batch: Batch) -> Ack:
        self._core.record(Push(session.id, seq, batch))
        self._core.send_typed(typed)
        return self._acked(session, seq, len(typed))

    def _acked(self, session: Session, seq: int, applied: int) -> Ack:
        session.seq = seq
        ack = session.last_ack = self._core.ack(session, seq, applied)
        return ack

    def _check_size(self, records: int) -> None:
        most = self._core.limits.max_batch_records
        if records > most:
            raise LimitExceeded(f"a batch of {records} records exceeds max_batch_records ({most})")

    def advance(self, session_id: str, time: Hashable, seq: int | None = None) -> Ack:
        """Move a session to the later ``time``: earlier times are complete as far as it goes."""
        session = self.get(session_id)
        if seq is not None:
            repeated = self._repeat(session, seq)
            if repeated is not None:
                return repeated
        self.check_advance(session, time)
        self._core.record(Advance(session_id, time, seq))
        self.move(session, time)
        if seq is not None:
            session.seq = seq
        ack = self._core.ack(session, seq, 0)
        if seq is not None:
            session.last_ack = ack
        return ack

    def close_session(self, session_id: str) -> Ack:
        """Close a session: it will send nothing more."""
        session = self.get(session_id)
        self._core.record(CloseSession(session_id))
        session.closed = True
        del self.open[session_id]
        self.detached.pop(session_id, None)
        self._core.capabilities.drop(session.capability)
        self.settle()
        return self._core.ack(None, None, 0)

    def on_close(self) -> None:
        """The input closes: every session with it."""
        for session in self.open.values():
            session.closed = True
            self._core.capabilities.drop(session.capability)
        self.open.clear()
        self.detached.clear()

    def check_advance(self, session: Session, time: Hashable, pointer: str = "/time") -> None:
        """:class:`Invalid` or :class:`Conflict` unless ``session`` may advance to ``time``."""
        check(time, like=self._core.minimum, pointer=pointer)
        if not less_equal(session.time, time):
            raise Conflict(
                f"cannot advance the session from {session.time!r} to the earlier {time!r}"
            )

    def move(self, session: Session, time: Hashable) -> None:
        """Move a (checked) session to ``time``; the input follows its sessions' times."""
        session.time = time
        self._core.capabilities.downgrade(session.capability, time)
        self.settle()

    def settle(self) -> None:
        """Move the input's own frontier up to its open sessions' times (their minimal ones).

        Exactly the times a session can still send at: with product times, sessions at
        ``[2, 0]`` and ``[0, 2]`` leave ``[1, 0]`` complete. With no session open the input
        stays where it is.
        """
        core = self._core
        if core.times is None or not self.open:
            return
        least = minimal(s.time for s in self.open.values())
        if least != core.times:
            core.move(least)

    def attach(self, session_id: str) -> Session:
        """Attach a producer's socket to an open session (one at a time): to resume it.

        A producer whose connection broke (or whose server restarted) goes on with the same
        session, retrying what was not acknowledged with the same sequence numbers.
        """
        session = self.get(session_id)
        if session_id in self.attached:
            raise Conflict(
                f"session {session_id} of input {self._core.name!r} has a socket already"
            )
        self.attached.add(session_id)
        self.detached.pop(session_id, None)
        return session

    def detach(self, session_id: str, now: float, grace: bool = True) -> None:
        """The session's socket ended: it stays open for ``session_grace_seconds`` to resume.

        Without ``grace``, or with a grace of 0, it is closed at once.
        """
        self.attached.discard(session_id)
        core = self._core
        if session_id not in self.open or core.times is None or core.dropped:
            return
        if not grace or core.limits.session_grace_seconds <= 0:
            self.close_session(session_id)
        else:
            self.detached[session_id] = now

    def close_abandoned(self, now: float) -> list[str]:
        """Close every session whose socket ended ``session_grace_seconds`` ago; which."""
        core = self._core
        if core.times is None or core.dropped:
            return []
        due = now - core.limits.session_grace_seconds
        gone = [s for s, at in self.detached.items() if at <= due and s in self.open]
        for session_id in gone:
            self.close_session(session_id)
        self.detached = {s: at for s, at in self.detached.items() if s in self.open}
        return gone

    def resent(self, session_id: str, seq: int) -> Ack | None:
        """The answer to a frame sent again that was applied before (``None``: it was not).

        A producer resuming its session sends again every frame it has no ack for: those
        with a sequence number up to the session's last applied one are acknowledged, saying
        ``applied`` 0, and not applied twice.
        """
        session = self.get(session_id)
        if type(seq) is not int or seq < 1 or seq > session.seq:
            return None
        return Ack(seq, session.time, self._core.frontier(), 0)

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
        if all_at_or_after(times, time):
            return
        # Something is wrong: find the first offending record, for a precise message.
        for index, at in enumerate(times):
            check(at, f"record {index}", self._core.minimum, f"/records/{index}/0")
            if not less_equal(time, at):
                raise Conflict(
                    f"record {index} is at {at!r}, before the session's time {time!r}: the "
                    f"{what} was refused and nothing of it applied"
                )


def _times_of(typed: TypedRecords) -> Sequence[Hashable]:
    """A typed batch's times as Python values.

    The slow path: product times, or a domain the times do not belong to.
    """
    times = typed.times
    return times if isinstance(times, list) else times.to_pylist()
