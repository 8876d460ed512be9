"""The built operator, as its scope runs it, and the shapes of the logic it runs.

An :class:`OperatorCore` is what :class:`~operators.builder.OperatorBuilder` leaves in its
scope: the operator's ports, connectivity and logic, scheduled by the scope. Its ports and
capabilities know it only through the protocols of :mod:`operators.ports` and
:mod:`operators.capability`, which it satisfies. The shapes of user logic live here, below
:mod:`operators.stream`, whose declarations of ``unary`` and its relatives name them.
"""

from __future__ import annotations

from collections.abc import Callable

from operators.notificator import Notificator
from operators.ports import InputPort, OutputPort
from operators.progress import Connectivity
from operators.runtime import Interest, Scope, SharedProgress

Logic = Callable[[], object]
"""Operator logic: called when scheduled; a truthy result means "still busy, keep me"."""

UnaryLogic = Callable[[InputPort, OutputPort], object]
"""The logic of a custom one-input operator (``stream.unary``): ``logic(input, output)``."""

BinaryLogic = Callable[[InputPort, InputPort, OutputPort], object]
"""The logic of a custom two-input operator: ``logic(input1, input2, output)``."""

NotifyLogic = Callable[[InputPort, OutputPort, Notificator], object]
"""The logic of ``stream.unary_notify``: ``logic(input, output, notificator)``."""


class OperatorCore:
    """A built operator, as its scope sees it (an ``Operate``)."""

    def __init__(self, scope: Scope, index: int, name: str) -> None:
        self.scope = scope
        self.index = index
        self.name = name
        self.input_ports: list[InputPort] = []
        self.output_ports: list[OutputPort] = []
        self.connectivity: Connectivity = []
        self.identity_paths: list[set[int]] = []
        self.interest = Interest.NEVER
        self.external_summary: Connectivity = []
        self.logic: Logic | None = None
        self._shared = SharedProgress()
        self._activate = scope.builder.activator(index)
        self._running = False
        self._again = False

    @property
    def inputs(self) -> int:
        """The number of input ports."""
        return len(self.input_ports)

    @property
    def outputs(self) -> int:
        """The number of output ports."""
        return len(self.output_ports)

    @property
    def local(self) -> bool:
        """Progress of a plain operator is this worker's own: the scope broadcasts it."""
        return True

    def activate(self) -> None:
        """Ask to be scheduled again; called while running, it takes effect after this run.

        Logic that stops early (to let others run) calls this to be woken for the rest.
        """
        if self._running:
            self._again = True
        else:
            self._activate()

    def activate_later(self) -> None:
        """Ask to be scheduled again after the event loop has run what else is ready.

        :meth:`activate` from inside the logic runs the operator again within the same
        worker step (its scope keeps passing until quiet); logic that stops early so that
        others *outside* the dataflow run too (the server's requests, ``/healthz``) uses
        this: the activation is a callback of the next turn of the loop.
        """
        self.scope.worker.call_later(0, self.activate)

    def touch(self) -> None:
        """Note that progress changed outside a run (a capability moved): publish it soon.

        While running this is a no-op: everything is published when the run ends.
        """
        if not self._running:
            self._activate()

    def initialize(self) -> tuple[Connectivity, SharedProgress]:
        """Connectivity, and the initial capabilities: ``peers`` per output at the minimum."""
        shared = SharedProgress.for_ports(len(self.input_ports), len(self.output_ports))
        for batch in shared.internals:
            batch.update(self.scope.minimum, self.scope.peers)
        self._shared = shared
        return self.connectivity, shared

    def set_external_summary(self, summary: Connectivity) -> None:
        """Remember the paths from this operator's outputs back to its inputs."""
        self.external_summary = summary

    def schedule(self) -> bool:
        """Bring input frontiers up to date, run the logic, publish its progress."""
        shared = self._shared
        for port, batch in zip(self.input_ports, shared.frontiers, strict=True):
            if batch:
                changes = port.frontier.update_iter(batch.drain())
                if port.frontier_changes is not None:
                    port.frontier_changes.extend(changes)
        self._running = True
        try:
            busy = self.logic() if self.logic is not None else False
        finally:
            self._running = False
        self.publish()
        if self._again:
            self._again = False
            self._activate()
        return bool(busy) or any(port.queue for port in self.input_ports)

    def publish(self) -> None:
        """Move consumed, produced and capability changes to the scope, all together."""
        shared = self._shared
        for port, out in enumerate(self.output_ports):
            out.flush()
            out.produced.drain_into(shared.produceds[port])
            out.internal.drain_into(shared.internals[port])
        for port, inp in enumerate(self.input_ports):
            inp.consumed.drain_into(shared.consumeds[port])

    def __repr__(self) -> str:
        return f"<{self.name} #{self.index}>"
