"""What an input's sessions and transactions share: its time, its journal, what it sent."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from operators import Capability
from operators.graph.schema import Schema
from operators.progress import Antichain, less_equal, minimum_like
from operators.runtime import Batch
from service.app.errors import BadRequest, Gone, Invalid
from service.app.inputs.capabilities import InputCapabilities
from service.app.journal import InputJournal
from service.app.settings import Limits
from service.app.views import Ack
from service.store import Batch as Logged
from service.store import BatchError, Checkpoint, Close, Operation
from service.store.typed import SchemaMismatch, TypedRecords, from_arrow, from_batch, from_values


class Closing(Protocol):
    """A part of an input that lets go of what it holds when the input closes."""

    def on_close(self) -> None:
        """The input closed: nothing more can ever arrive."""
        ...


@dataclass(slots=True)
class Session:
    """A producer's session: its time, its capability, and its last sequence number.

    ``time`` is where the session is as far as its producer knows: records pushed now must
    be at it or later. The capability follows it once the operations that moved it are
    durable, so it may lag behind, never run ahead.
    """

    id: str
    capability: Capability
    time: Hashable
    seq: int = 0
    last_ack: Ack | None = None
    closed: bool = False


class InputCore:
    """One input's shared state: its own time as producers know it, its journal, its counts.

    Every operation is written to the journal (:meth:`record`) before anything of it is
    applied; a refused write raises and applies nothing.
    """

    def __init__(
        self,
        name: str,
        capabilities: InputCapabilities,
        journal: InputJournal,
        limits: Limits,
        checkpoint: Callable[[], Checkpoint],
        schema: Schema | None = None,
    ) -> None:
        self.name = name
        self.schema = schema
        """The input's schema (its records are then typed: Arrow columns); ``None``: untyped."""
        self.capabilities = capabilities
        self.journal = journal
        self.limits = limits
        self.checkpoint = checkpoint
        """The input's state now: what heads a new segment of its log."""
        [start] = capabilities.applied_frontier()
        self.minimum = minimum_like(start)
        self.times: list[Hashable] | None = [start]
        """The input's own frontier as far as producers know, in the domain's order: one time,
        or with product times several incomparable ones (``None`` once closed)."""
        self.records_in = 0
        self.dropped_late = 0
        """Rows producers dropped as late, as their commits said (``dropped``), once a key."""
        self.dropped = False
        """Set when the dataflow is dropped (or failed): every operation is then 410."""

    def check_open(self) -> list[Hashable]:
        """The input's frontier; :class:`Gone` if it is closed or its dataflow dropped."""
        if self.dropped:
            raise Gone(f"the dataflow of input {self.name!r} was dropped")
        if self.times is None:
            raise Gone(f"input {self.name!r} is closed")
        return self.times

    @property
    def time(self) -> Hashable | None:
        """The first time of the input's frontier (``None`` once closed)."""
        return None if self.times is None else self.times[0]

    def frontier(self) -> list[Hashable]:
        """The times that may still arrive here, as producers know it (what acks say)."""
        return [] if self.times is None else list(self.times)

    def record(self, operation: Operation) -> None:
        """Write ``operation`` to the journal before it takes effect."""
        self.journal.record(operation, self.checkpoint)

    def move(self, times: list[Hashable]) -> None:
        """The input's own frontier moves to ``times`` (its capabilities, once durable)."""
        self.times = times
        self.capabilities.move_base(times)

    def close(self, parts: Iterable[Closing]) -> None:
        """Close the input (logged): every part lets go, then its own capability goes."""
        if self.times is None:
            return
        self.record(Close())
        for part in parts:
            part.on_close()
        self.times = None
        self.capabilities.close()

    def ack(self, session: Session | None, seq: int | None, applied: int) -> Ack:
        """What an operation answers: the sequence number and the times now."""
        return Ack(
            seq,
            None if session is None or session.closed else session.time,
            self.frontier(),
            applied,
        )

    def send_at(self, time: Hashable, records: Sequence[Any]) -> None:
        """Send checked records, all at ``time``."""
        if records:
            self.journal.sent((time,))
            self.capabilities.emit([(time, list(records))])
            self.records_in += len(records)

    def send_groups(self, groups: Mapping[Hashable, Batch], count: int) -> None:
        """Send checked records grouped by time (``count`` of them in all).

        Lists of records, or columns for a typed input.
        """
        if count:
            self.journal.sent(groups)
            self.capabilities.emit(list(groups.items()))
            self.records_in += count

    def send_typed(self, typed: TypedRecords) -> None:
        """Send a checked typed batch: one container of columns per distinct time."""
        if len(typed):
            groups = typed.by_time()
            self.journal.sent([time for time, _ in groups])
            self.capabilities.emit(groups)
            self.records_in += len(typed)

    # ----------------------------------------------------------------- typed records

    def typed_values(self, times: Sequence[Hashable], records: Sequence[Any]) -> TypedRecords:
        """Python records (a JSON body's) as the schema's columns.

        :class:`Invalid` (422) names the first record and field that do not fit.
        """
        assert self.schema is not None
        try:
            return from_values(times, records, self.schema)
        except SchemaMismatch as mismatch:
            raise self.misfit(mismatch) from None

    def typed_arrow(self, body: bytes) -> TypedRecords:
        """An Arrow IPC body as the schema's columns.

        :class:`Invalid` names the column that does not fit, :class:`BadRequest` a body
        that is not a batch.
        """
        assert self.schema is not None
        try:
            return from_arrow(body, self.schema)
        except SchemaMismatch as mismatch:
            raise self.misfit(mismatch) from None
        except BatchError as error:
            raise BadRequest(str(error)) from None

    def typed_batch(self, batch: Logged) -> TypedRecords:
        """A logged typed batch read again (recovery): the records it was."""
        assert self.schema is not None
        return from_batch(batch, self.schema)

    def misfit(self, mismatch: SchemaMismatch) -> Invalid:
        """The 422 of records that do not fit the schema: where, and what."""
        return Invalid(
            f"the batch does not fit input {self.name!r}'s schema: {mismatch}; nothing of it "
            "was applied",
            [{"pointer": mismatch.pointer, "detail": mismatch.detail}],
        )

    def send(self, times: Sequence[Hashable], records: Sequence[Any]) -> None:
        """Send checked records, one batch per distinct time."""
        if not records:
            return
        if len(set(times)) == 1:
            # The common case (a producer pushes one time per batch): no loop per record.
            self.send_at(times[0], records)
            return
        by_time: dict[Hashable, list[Any]] = {at: [] for at in times}
        for at, record in zip(times, records, strict=True):
            by_time[at].append(record)
        self.send_groups(by_time, len(records))


def holds(times: list[Hashable], time: Hashable) -> bool:
    """Whether ``time`` is at or after one of ``times`` (a frontier): it may still be sent."""
    return any(less_equal(t, time) for t in times)


def minimal(times: Iterable[Hashable]) -> list[Hashable]:
    """The minimal elements of ``times`` (an antichain), in the domain's order.

    >>> from operators.progress import Product
    >>> minimal([Product(2, 0), Product(0, 2), Product(2, 2)])
    [Product(outer=0, inner=2), Product(outer=2, inner=0)]
    """
    elements: list[Any] = list(Antichain(times).elements())
    return sorted(elements)  # ints, or products in their lexicographic (total) order


def shown(times: list[Hashable]) -> str:
    """A frontier as messages name it: its one time, or the list of them."""
    return repr(times[0]) if len(times) == 1 else repr(times)


def group_by_time(pairs: Iterable[tuple[Hashable, Any]]) -> dict[Hashable, list[Any]]:
    """Records grouped by time (new lists), in order."""
    groups: dict[Hashable, list[Any]] = {}
    for at, record in pairs:
        records = groups.get(at)
        if records is None:
            groups[at] = [record]
        else:
            records.append(record)
    return groups
