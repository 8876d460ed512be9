"""What the service answers: typed, immutable views of its state.

The service core speaks in these values; :mod:`api` alone turns them into JSON, Arrow or
WebSocket frames. Times in them are engine times (``int`` or
:class:`~operators.progress.Product`), never their wire form.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from operators.runtime import Batch
from service.app.pace import Sample, Stall


@dataclass(frozen=True, slots=True)
class Ack:
    """What a push, advance or commit answers: the sequence number and the times now."""

    seq: int | None
    session_time: Hashable | None
    input_frontier: list[Hashable]
    applied: int


@dataclass(frozen=True, slots=True)
class SessionView:
    """An open producer session: its id and its time."""

    id: str
    time: Hashable


@dataclass(frozen=True, slots=True)
class InputView:
    """An input: its frontier and time, sessions, and what its open transactions staged."""

    name: str
    frontier: list[Hashable]
    time: Hashable | None
    closed: bool
    records_in: int
    sessions: list[SessionView]
    staged: int
    transactions: dict[str, int]
    """Records staged per open transaction."""
    dropped_late: int = 0
    """Rows producers dropped as late (before the input's time), as their commits said."""
    schema: dict[str, Any] | None = None
    """The input's schema as the graph declares it (``None``: untyped)."""


@dataclass(frozen=True, slots=True)
class InputState:
    """An input as a dataflow's description shows it."""

    frontier: list[Hashable]
    sessions: int
    records_in: int
    closed: bool
    schema: dict[str, Any] | None = None
    """The input's schema as the graph declares it (``None``: untyped)."""
    process: int = 0
    """The process of the cluster holding it (where its log is)."""


@dataclass(frozen=True, slots=True)
class OutputState:
    """An output as a dataflow's description shows it."""

    frontier: list[Hashable]
    records_out: int


@dataclass(frozen=True, slots=True)
class PortState:
    """One output port of an operator: its frontier and the records sent on it (all workers)."""

    frontier: list[Hashable]
    records: int


@dataclass(frozen=True, slots=True)
class OperatorState:
    """One operator (graph node): its output ports, and the time spent running it."""

    outputs: list[PortState]
    busy_seconds: float = 0.0
    """Seconds this process's workers have spent scheduling the node's operators, so far
    (a counter: it only increases)."""


@dataclass(frozen=True, slots=True)
class RecordErrors:
    """Records an operator dropped because its expression failed on them."""

    count: int
    last: str | None


@dataclass(frozen=True, slots=True)
class DataflowSummary:
    """A dataflow as a listing shows it."""

    id: str
    name: str
    status: str
    created_at: float
    inputs: list[str]
    outputs: list[str]


@dataclass(frozen=True, slots=True)
class DataflowView:
    """A dataflow in full: its graph, status, inputs and outputs with their frontiers."""

    id: str
    name: str
    status: str
    created_at: float
    graph: Any
    error: str | None
    inputs: dict[str, InputState]
    outputs: dict[str, OutputState]
    record_errors: dict[str, RecordErrors]
    operators: dict[str, OperatorState] | None = None
    """Per node, when asked for (``None`` otherwise)."""
    execution: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per node, how it runs: ``{"runs": "columns" | "rows"}``, with ``"how"`` or ``"why"``
    (:meth:`operators.graph.columnar.Typing.describe`)."""


@dataclass(frozen=True, slots=True)
class DataflowPage:
    """A page of a tenant's dataflows, oldest first."""

    items: list[DataflowSummary]
    more: bool
    """Whether dataflows follow the last item (ask again after it)."""


@dataclass(frozen=True, slots=True)
class OutputPage:
    """Completed times of an output, a page at a time.

    ``records`` (one list per time), ``counts`` (one count per time) or ``batches`` (one
    batch per time) is set, as asked.
    """

    output: str
    integer_times: bool
    """Whether the output's times are integers (not products)."""
    times: list[Hashable]
    frontier: list[Hashable]
    next: Hashable | None
    """The first time of the next page (``None``: this is the last)."""
    records: list[list[Any]] | None = None
    counts: list[int] | None = None
    batches: list[Batch] | None = None
    """With ``columns``: each time's batch as the output keeps it (columns stay columns)."""


@dataclass(frozen=True, slots=True)
class ConsumerView:
    """A registered reader of an output: the time before which it has read everything."""

    consumer: str
    committed: Hashable | None
    frontier: list[Hashable]


@dataclass(frozen=True, slots=True)
class SubscriberView:
    """A subscriber to an output's events: what it has queued and where it would resume."""

    queued: int
    """Events waiting to be sent to it."""
    resume: list[Hashable]
    """Everything before this frontier has been delivered."""


@dataclass(frozen=True, slots=True)
class OutputView:
    """An output: its frontier, records, subscribers (live readers) and consumers."""

    name: str
    frontier: list[Hashable]
    records_out: int
    retained: int
    """Records retained (readable with a read of the output's times)."""
    subscribers: list[SubscriberView]
    consumers: list[ConsumerView]
    schema: dict[str, Any] | None = None
    """The records' schema when the output is typed (its Arrow reads are typed columns)."""


@dataclass(frozen=True, slots=True)
class DataflowStats:
    """What the metrics show of one dataflow."""

    id: str
    status: str
    records_in: dict[str, int]
    """Per input."""
    outputs: dict[str, OutputStats]
    dropped_late: dict[str, int] = field(default_factory=dict)
    """Per input: rows producers dropped as late, as their commits said."""


@dataclass(frozen=True, slots=True)
class LiveStats:
    """What a stats subscription sends of a dataflow each interval: its state and pace."""

    id: str
    status: str
    at: float
    """When it was read (wall clock, seconds since the epoch)."""
    operators: dict[str, OperatorState]
    """Per node: records sent per output port and busy seconds so far (counters)."""
    inputs: dict[str, InputView]
    outputs: dict[str, OutputView]
    samples: list[Sample]
    """The samples of its pace taken since those already sent (all kept, the first time)."""
    loop_lag: float
    """The event loop's worst lateness in its last sample (seconds)."""
    stalls: list[Stall]
    """The event loop's last stalls, oldest first."""


@dataclass(frozen=True, slots=True)
class OutputStats:
    """What the metrics show of one output."""

    records_out: int
    lag: int | None
    """How far the output's frontier is behind its inputs' (integer times; None if unknown)."""
    subscribers: int
    queued: int


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What the metrics show of the data directory."""

    log_bytes: int
    syncs: int
    sync_seconds: float
    """Time spent in syncs, in all."""
    last_sync_seconds: float
    recovery_seconds: float | None
    """How long the last start's recovery took (``None`` until it is done)."""
    records_replayed: int
