"""The handles operator logic works with: input ports and output ports.

An :class:`InputPort` yields ``(capability, records)`` pairs, one per arrived batch, and
counts what it hands out as consumed. It hands out batches until the worker's time slice is
spent (at least one per run): the rest wait, still in flight (holding the frontier at their
times), for the operator's next run, which the port asks for. So an operator given many
batches at once (a producer that sent many times before the workers stepped) lets its
worker step, and its output cross to other processes, in slices: the processes of a cluster
work on different batches at once instead of one after another.

Records that travel as columns reach an operator as a list, made once per batch, unless it
takes batches as they are (:meth:`InputPort.containers`: forwarders and the columnar
operators; see :mod:`operators.runtime.containers`). An :class:`OutputPort` sends batches
at the time of a capability for it, counts them as produced, and gives them to every edge
leaving it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from time import perf_counter
from typing import Any, Protocol

from operators.capability import Capability, CapabilityError, InputCapability, Operator
from operators.progress import ChangeBatch, MutableAntichain
from operators.runtime import Batch, Scope, Tee


class PortOperator(Operator, Protocol):
    """What a port needs of its operator: an :class:`~operators.core.OperatorCore`.

    What its capabilities need, and also: which inputs reach which outputs unchanged (to
    forward batches at their own time), and a way to be scheduled again.
    """

    @property
    def identity_paths(self) -> Sequence[set[int]]:
        """Per input, the outputs it reaches with the identity summary."""
        ...

    def activate_later(self) -> None:
        """Ask to be scheduled again once the event loop has run what else is ready."""
        ...

    def activate(self) -> None:
        """Ask to be scheduled again (after this run, if called while running)."""
        ...

    @property
    def scope(self) -> Scope:
        """The scope the operator runs in (its worker keeps the time slice)."""
        ...


class InputPort:
    """One input of an operator: arrived batches, and the frontier of times still to come."""

    __slots__ = (
        "_worker",
        "consumed",
        "frontier",
        "frontier_changes",
        "operator",
        "port",
        "queue",
    )

    def __init__(self, operator: PortOperator, port: int) -> None:
        self.operator = operator
        self._worker = operator.scope.worker
        self.port = port
        self.queue: deque[tuple[Hashable, Batch]] = deque()
        self.consumed: ChangeBatch[Hashable] = ChangeBatch()
        self.frontier: MutableAntichain[Hashable] = MutableAntichain()
        """Times that may still arrive here (kept current before each schedule)."""
        self.frontier_changes: ChangeBatch[Hashable] | None = None
        """If set (by :meth:`track_frontier_changes`), every change to ``frontier``."""

    def track_frontier_changes(self) -> ChangeBatch[Hashable]:
        """Start recording the changes to :attr:`frontier`, as ``(time, ±1)`` updates.

        The operator drains the returned batch itself (capture records them as events).
        """
        if self.frontier_changes is None:
            self.frontier_changes = ChangeBatch()
        return self.frontier_changes

    def __iter__(self) -> Iterator[tuple[InputCapability, list[Any]]]:
        """Take every arrived batch, with a capability for its time."""
        queue = self.queue
        consumed = self.consumed
        operator = self.operator
        port = self.port
        while queue:
            time, records = queue.popleft()
            consumed.update(time, len(records))
            if not isinstance(records, list):
                records = records.rows()
            yield InputCapability(time, port, operator), records
            if queue and self._out_of_time():
                return

    def batches(self) -> Iterator[tuple[Hashable, list[Any]]]:
        """Take every arrived batch as ``(time, records)``, for operators that only forward.

        An operator may send a batch taken this way at its own time on any output this input
        reaches with the identity summary (:meth:`OutputPort.forward` checks that).
        """
        queue = self.queue
        consumed = self.consumed
        while queue:
            time, records = queue.popleft()
            consumed.update(time, len(records))
            if not isinstance(records, list):
                records = records.rows()
            yield time, records
            if queue and self._out_of_time():
                return

    def containers(self) -> Iterator[tuple[Hashable, Batch]]:
        """Take every arrived batch as ``(time, batch)``, columns left as columns.

        For operators that forward batches unchanged (they may send them at their own time,
        as with :meth:`batches`) or work on columns themselves.
        """
        queue = self.queue
        consumed = self.consumed
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            yield time, batch
            if queue and self._out_of_time():
                return

    def held_containers(self) -> Iterator[tuple[InputCapability, Batch]]:
        """Take every arrived batch as it is (columns left as columns), with a capability.

        For columnar operators that hold state per time (as iterating the port does for
        those written record by record).
        """
        queue = self.queue
        consumed = self.consumed
        operator = self.operator
        port = self.port
        while queue:
            time, batch = queue.popleft()
            consumed.update(time, len(batch))
            yield InputCapability(time, port, operator), batch
            if queue and self._out_of_time():
                return

    def _out_of_time(self) -> bool:
        """Whether the worker's slice is spent: if so, ask for another run for the rest."""
        if perf_counter() <= self._worker.slice_deadline:
            return False
        self.operator.activate()
        return True

    def give_back(self, time: Hashable, records: Batch) -> None:
        """Put the unprocessed rest of a batch taken by :meth:`batches` back at the front.

        It counts as not consumed (still in flight, holding the frontier), and the operator
        is activated again to take it once the event loop has run what else was ready:
        logic that stops early to let others run (a batch whose evaluation is slow) uses
        this.
        """
        self.queue.appendleft((time, records))
        self.consumed.update(time, -len(records))
        self.operator.activate_later()

    def is_empty(self) -> bool:
        """Whether no batch is waiting."""
        return not self.queue


class OutputPort:
    """One output of an operator: sends batches to every edge and counts them."""

    __slots__ = (
        "_buffer",
        "_buffer_time",
        "internal",
        "operator",
        "port",
        "produced",
        "records_out",
        "tee",
    )

    def __init__(self, operator: PortOperator, port: int, tee: Tee) -> None:
        self.operator = operator
        self.port = port
        self.tee = tee
        self.produced: ChangeBatch[Hashable] = ChangeBatch()
        self.internal: ChangeBatch[Hashable] = ChangeBatch()
        self._buffer: list[Any] = []
        self._buffer_time: Hashable = None
        self.records_out = 0
        """Records sent on this port so far (for diagnostics)."""

    def _check(self, capability: Capability) -> Hashable:
        if capability.output is not self:
            raise CapabilityError(
                f"{self.operator.name}: a capability for output {capability.output.port} of "
                f"{capability.output.operator.name} cannot send on output {self.port}"
            )
        return capability.time

    def give_batch(self, capability: Capability, records: Batch) -> None:
        """Send ``records`` at the capability's time (empty lists are skipped).

        The list is handed on as it is: do not modify it afterwards.
        """
        time = self._check(capability)
        if records:
            self._send(time, records)

    def give(self, capability: Capability, record: Any) -> None:
        """Send one record at the capability's time (buffered into batches)."""
        time = self._check(capability)
        if self._buffer and self._buffer_time != time:
            self.flush()
        self._buffer_time = time
        self._buffer.append(record)
        if len(self._buffer) >= 1024:
            self.flush()

    def session(self, capability: Capability) -> Session:
        """A session that sends at the capability's time."""
        self._check(capability)
        return Session(self, capability)

    def send_at(self, time: Hashable, records: Batch) -> None:
        """Send at ``time`` with no capability check.

        Only for operators that keep their capabilities as counts in :attr:`internal`
        themselves, such as replay, whose event streams guarantee that a capability at or
        before ``time`` is held.
        """
        if records:
            self._send(time, records)

    def forward(self, time: Hashable, records: Batch, input_port: int = 0) -> None:
        """Send a batch taken from ``input_port`` at its own time.

        Allowed only when that input reaches this output with the identity summary, which
        is what lets pass-through operators skip creating capabilities per batch.
        """
        if self.port not in self.operator.identity_paths[input_port]:
            raise CapabilityError(
                f"{self.operator.name}: input {input_port} does not reach output {self.port} "
                "unchanged, so its batches cannot be forwarded at their own time"
            )
        if records:
            self._send(time, records)

    def _send(self, time: Hashable, records: Batch) -> None:
        if self._buffer:
            self.flush()
        self.produced.update(time, len(records))
        self.records_out += len(records)
        self.tee.push(time, records)

    def flush(self) -> None:
        """Send any buffered single records."""
        buffer = self._buffer
        if buffer:
            self._buffer = []
            self.produced.update(self._buffer_time, len(buffer))
            self.records_out += len(buffer)
            self.tee.push(self._buffer_time, buffer)


class Session:
    """Sends records at one capability's time on one output."""

    __slots__ = ("_capability", "_output")

    def __init__(self, output: OutputPort, capability: Capability) -> None:
        self._output = output
        self._capability = capability

    def give(self, record: Any) -> None:
        """Send one record."""
        self._output.give(self._capability, record)

    def give_batch(self, records: Batch) -> None:
        """Send a list of records (handed on as it is)."""
        self._output.give_batch(self._capability, records)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._output.flush()
