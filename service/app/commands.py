"""The command plane: every worker of every process applies commands in one order.

Creating or dropping a dataflow is a *command*: it is pushed into a
:class:`~operators.sync.Sequencer`, which every worker runs as its first dataflow, so every
worker sees the commands in one order and builds (and drops) dataflows in the same order,
as the engine requires. The caller awaits the moment every worker has applied the command
(everywhere: the :class:`~service.app.placement.Placement` says when that is).

A :data:`Command` is ``(kind, dataflow id, dataflow index, payload)``:

- ``create``: its payload is the dataflow itself (tenant, name, graph, creation time), so a
  process that does not know it yet (another process of a cluster created it) can build it;
- ``drop``: its payload is the reason when the dataflow failed (every process shows it);
- ``forget``: a failed dataflow, dropped on the workers already, goes;
- ``applied`` (payload ``(kind, process)``): every worker of that process applied the
  dataflow's last ``kind`` (a cluster's processes finish a command once all said so);
- ``consumer`` (payload ``(output, consumer, registered, committed, process)``): a
  consumer's commit or end, made at that process;
- ``recovered``: process 0 has issued the creates of every dataflow it had stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from operators import Worker
from operators.sync import Sequencer
from service.app.errors import Gone
from service.app.placement import Command, Placement

__all__ = ["Command", "CommandPlane", "CommandTarget"]


class CommandTarget(Protocol):
    """What commands act on: the server's dataflows (the manager)."""

    def build(self, worker: Worker, dataflow_id: str, payload: Any) -> bool:
        """Build a dataflow on ``worker`` (made from ``payload`` if unknown); whether known."""
        ...

    def dropped_on(self, worker: Worker, dataflow_id: str, reason: str | None) -> bool:
        """The dataflow was dropped on ``worker`` (it failed, if ``reason``); whether known."""
        ...

    def known(self, dataflow_id: str) -> bool:
        """Whether this process has the dataflow."""
        ...

    def finished(self, dataflow_id: str, kind: str) -> None:
        """Every worker everywhere applied ``kind`` for the dataflow."""
        ...

    def consumer_elsewhere(self, dataflow_id: str, payload: Any) -> None:
        """Another process applied a consumer's commit (or its end)."""
        ...

    def recovered_elsewhere(self) -> None:
        """Process 0 issued the creates of every dataflow it had stored."""
        ...


@dataclass(slots=True)
class _Pending:
    """A dataflow's commands in flight: how many workers (processes) applied each kind."""

    applied: dict[str, int] = field(default_factory=dict)
    acknowledged: dict[str, int] = field(default_factory=dict)
    ready: asyncio.Future[None] | None = None
    """Set once the command this process issued last (``waiting``) is done everywhere."""
    waiting: str = ""


class CommandPlane:
    """The workers, their sequencers, and the commands in flight.

    ``on_failure`` hears of an exception that ended a worker (a bug in the engine): every
    request waiting for a command is then answered :class:`Gone`.
    """

    def __init__(
        self,
        placement: Placement,
        target: CommandTarget,
        on_failure: Callable[[BaseException], None],
    ) -> None:
        self.placement = placement
        self.target = target
        self.on_failure = on_failure
        self.workers: list[Worker] = []
        self._sequencers: list[Sequencer[Command]] = []
        self.tasks: list[asyncio.Task[None]] = []
        self._pending: dict[str, _Pending] = {}

    def start(self) -> None:
        """Start a worker per local index of the fabric, each running the sequencer first."""
        fabric = self.placement.fabric
        assert fabric is not None
        self.workers = [Worker(i, fabric.peers, fabric) for i in fabric.local]
        clock = self.placement.clock
        self._sequencers = [Sequencer[Command](worker, clock) for worker in self.workers]
        loop = asyncio.get_running_loop()
        self.tasks = [
            loop.create_task(self._run(worker, sequencer), name=f"frontier-worker-{worker.index}")
            for worker, sequencer in zip(self.workers, self._sequencers, strict=True)
        ]

    @property
    def busy(self) -> bool:
        """Whether some worker still has work."""
        return any(worker.busy for worker in self.workers)

    def push(self, command: Command) -> None:
        """Order ``command`` after every command pushed before (on every process)."""
        self._sequencers[0].push(command)

    async def issue(self, kind: str, dataflow_id: str, index: int, payload: Any = None) -> None:
        """Push a command about a dataflow and wait until it is done everywhere."""
        pending = self._pending.setdefault(dataflow_id, _Pending())
        pending.ready = asyncio.get_running_loop().create_future()
        pending.waiting = kind
        pending.applied.pop(kind, None)
        pending.acknowledged.pop(kind, None)
        self.push((kind, dataflow_id, index, payload))
        await pending.ready

    def fail_pending(self, reason: str) -> None:
        """Answer every request still waiting for its command to be applied everywhere."""
        for pending in self._pending.values():
            ready = pending.ready
            if ready is not None and not ready.done():
                ready.set_exception(Gone(reason))

    def forget(self, dataflow_id: str) -> None:
        """Nothing more will be asked of a dataflow that went."""
        self._pending.pop(dataflow_id, None)

    async def stop(self) -> None:
        """Cancel the workers and wait for them to end."""
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except Exception:  # the engine failed earlier: on_failure heard of it
                pass
        self.tasks.clear()

    async def _run(self, worker: Worker, sequencer: Sequencer[Command]) -> None:
        try:
            while True:
                command = sequencer.next()
                while command is not None:
                    self._apply(worker, command)
                    command = sequencer.next()
                await worker.step()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a bug in the engine: fail every request clearly
            self.on_failure(error)
            raise

    def _apply(self, worker: Worker, command: Command) -> None:
        kind, dataflow_id, _index, payload = command
        first = worker is self.workers[0]
        if kind == "applied":
            if first:
                self._acknowledged(dataflow_id, payload)
        elif kind == "consumer":
            if first:
                self.target.consumer_elsewhere(dataflow_id, payload)
        elif kind == "recovered":
            # Heard by the first worker, which applied every consumer command before it.
            if first:
                self.target.recovered_elsewhere()
        elif self._on_worker(worker, command):
            pending = self._pending.setdefault(dataflow_id, _Pending())
            applied = pending.applied[kind] = pending.applied.get(kind, 0) + 1
            if applied == len(self.workers):
                self.placement.applied(self, command)

    def _on_worker(self, worker: Worker, command: Command) -> bool:
        """Apply a dataflow's command on one worker; whether this process has the dataflow."""
        kind, dataflow_id, index, payload = command
        if kind == "create":
            return self.target.build(worker, dataflow_id, payload)
        if kind == "drop":
            # The index travels with the command: the dataflow may be gone here already.
            worker.drop_dataflow(index)
            return self.target.dropped_on(worker, dataflow_id, payload)
        return self.target.known(dataflow_id)

    def _acknowledged(self, dataflow_id: str, payload: tuple[str, int]) -> None:
        """A process applied a command on all its workers; once all have, it is done."""
        kind, _process = payload
        if not self.target.known(dataflow_id):
            return
        pending = self._pending.setdefault(dataflow_id, _Pending())
        count = pending.acknowledged[kind] = pending.acknowledged.get(kind, 0) + 1
        if count == self.placement.processes:
            self.finish(dataflow_id, kind)

    def finish(self, dataflow_id: str, kind: str) -> None:
        """Every worker of every process applied ``kind``: finish it, answer who waits."""
        pending = self._pending.get(dataflow_id)
        self.target.finished(dataflow_id, kind)
        if pending is None:
            return
        ready = pending.ready
        if ready is not None and not ready.done() and pending.waiting == kind:
            ready.set_result(None)
