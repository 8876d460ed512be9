"""Recovery: a restarted server builds its stored dataflows again and replays their inputs.

Every stored dataflow is built again in creation order (the order the command plane first
built them in), then each input this process holds replays its log through the same
:class:`~service.app.inputs.ProducerInput` code (:func:`~service.app.inputs.replay`), so
sessions, sequence numbers, transactions and idempotency keys come back as they were, and
the outputs are recomputed (operators are deterministic per time).

In a cluster every process holds the same catalogue (each stored every dataflow as it was
created, and every failure): process 0 issues the creates, in that order, and every process,
once a dataflow runs everywhere, replays the inputs it holds. A dataflow stored here but
not at process 0 (a crash between the two storing it) never ran everywhere, and goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from service.app.commands import CommandPlane
from service.app.dataflow import Dataflow, Identity
from service.app.inputs import Replayed, replay
from service.app.registry import Dataflows
from service.store import StoredDataflow

log = logging.getLogger("frontier.service")


class Recovery:
    """One start's recovery of what the data directory holds."""

    def __init__(
        self,
        dataflows: Dataflows,
        plane: CommandPlane,
        failure: Callable[[], str | None],
    ) -> None:
        self.dataflows = dataflows
        self.plane = plane
        self.failure = failure
        """Why the service stopped meanwhile (``None``: it did not)."""
        self.replayed = Replayed()
        self.rescaled = False
        """This start changes the cluster's shape: process 0 tells every process the
        consumers it kept (a process new to the cluster has none)."""

    def known(self, stored: list[StoredDataflow]) -> list[Dataflow]:
        """Every stored dataflow, known before any command about it arrives."""
        dataflows = []
        for kept in stored:
            identity = Identity(
                kept.id, kept.tenant, kept.name, kept.graph, kept.created_at, kept.holders or {}
            )
            dataflow = self.dataflows.add(identity, self.dataflows.compile(kept.graph))
            dataflow.truncated_before = kept.truncated_before
            if kept.status == "failed":
                dataflow.status, dataflow.error = "failed", kept.error
            dataflows.append(dataflow)
        return dataflows

    async def run(self, stored: list[StoredDataflow]) -> None:
        """Build every stored dataflow again, in creation order, and replay its inputs."""
        leads = self.plane.placement.process == 0
        for dataflow in self.known(stored):
            if dataflow.status == "failed":
                continue
            if leads:
                await self.plane.issue("create", dataflow.id, dataflow.index, payload_of(dataflow))
                if self.rescaled:
                    self._tell_consumers(dataflow)
            elif not await self._until_running(dataflow):
                continue
            dataflow.recovered_outputs()
            for producer in dataflow.inputs.values():
                await replay(producer.parts, producer.journal, self.replayed, self._caught_up)

    def _tell_consumers(self, dataflow: Dataflow) -> None:
        """Send every consumer kept here to the other processes, as if committed now.

        The create is done everywhere: each process has the dataflow's outputs to apply
        them to (a process that kept them already applies the same again).
        """
        placement = self.plane.placement
        for output, consumer, committed in self.dataflows.env.journal.consumers(dataflow.id):
            change = (output, consumer, True, committed, placement.process)
            placement.tell(self.plane, ("consumer", dataflow.id, dataflow.index, change))

    async def until_zero_recovered(self) -> None:
        """Wait until process 0 has issued every create it had (at once on process 0)."""
        if self.plane.placement.process == 0:
            return
        while not self.dataflows.zero_recovered:
            failure = self.failure()
            if failure is not None:
                raise RuntimeError(f"the service stopped: {failure}")
            await asyncio.sleep(0.01)

    def issued(self) -> None:
        """Process 0 has issued every stored create (maybe none): the others may drop theirs."""
        if self.plane.placement.process == 0:
            self.plane.push(("recovered", "", -1, None))

    async def _until_running(self, dataflow: Dataflow) -> bool:
        """Wait until process 0's create of ``dataflow`` is done everywhere.

        ``False`` if process 0 recovered everything it had without it: a crash between the
        processes' storing it left it here alone. It never ran everywhere, and goes.
        """
        while dataflow.status == "creating":
            failure = self.failure()
            if failure is not None:
                raise RuntimeError(f"the service stopped: {failure}")
            if self.dataflows.zero_recovered:
                log.warning(
                    "dataflow %s is stored here but not at process 0: it is dropped", dataflow.id
                )
                self.dataflows.by_id.pop(dataflow.id, None)
                self.dataflows.env.journal.drop(dataflow.id)
                return False
            await asyncio.sleep(0.01)
        return True

    async def _caught_up(self) -> None:
        """Wait until the workers have done what they were given (a pause in a replay)."""
        await asyncio.sleep(0)
        while self.plane.busy:
            await asyncio.sleep(0)


def payload_of(
    dataflow: Dataflow,
) -> tuple[str, str, dict[str, object], float, dict[str, int]]:
    """What a create carries: the dataflow, so every process can build it alike.

    Its holders too: decided by the process that took the request (or kept in process 0's
    catalogue, on recovery), so every process places its inputs, and stores them, alike.
    """
    return (dataflow.tenant, dataflow.name, dataflow.graph, dataflow.created_at, dataflow.holders)
