"""The server's dataflows: each by id, who owns it, and what the command plane does to them.

:class:`Dataflows` is what commands act on (the plane's
:class:`~service.app.commands.CommandTarget`): a create builds a dataflow on a worker (made
from the command's payload when another process of a cluster created it), a drop fails or
forgets it, and once every worker everywhere applied a command the dataflow is told.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from operators import Worker
from operators.graph import GraphError, GraphSpec, Plan, compile_graph, parse_graph
from service.app.commands import CommandPlane
from service.app.dataflow import Dataflow, Environment, Identity
from service.app.errors import Gone, Invalid, NotFound
from service.app.frontiers import Feeds
from service.app.journal import Journal
from service.app.outputs import Sizer
from service.app.placement import Placement
from service.app.settings import Limits
from service.app.views import DataflowPage

log = logging.getLogger("frontier.service")

DROPPED_KEPT = 10_000
"""Recently dropped dataflows remembered, so their clients get 410, not 404."""


def compile_plan(graph: GraphSpec | Mapping[str, Any], limits: Limits) -> Plan:
    """Check and compile a graph; :class:`Invalid` lists every problem with its pointer.

    ``graph`` is a :class:`GraphSpec` whose shape is checked (what the API hands over, from
    its graph model) or a graph as JSON (from library users, the catalogue on recovery and
    the demo), whose shape :func:`parse_graph` checks here: the same checker either way.
    """
    try:
        spec = graph if isinstance(graph, GraphSpec) else parse_graph(graph)
        return compile_graph(spec, limits.max_record_bytes)
    except GraphError as error:
        problems = [{"pointer": p.pointer, "detail": p.message} for p in error.problems]
        raise Invalid(f"the graph has {len(problems)} problem(s)", problems) from None


class Dataflows:
    """Every dataflow this process knows, in creation order, and the plane that runs them.

    It makes the :class:`~service.app.commands.CommandPlane` (whose commands act on it) and
    the :class:`~service.app.dataflow.Environment` every dataflow is given.
    ``on_failure`` hears of an exception that ended a worker.
    """

    def __init__(
        self,
        limits: Limits,
        journal: Journal,
        placement: Placement,
        feeds: Feeds,
        sizer: Sizer | None,
        on_failure: Callable[[BaseException], None],
    ) -> None:
        self.plane = CommandPlane(placement, self, on_failure)
        self.env = Environment(limits, journal, placement, self.plane, feeds, sizer)
        self.by_id: dict[str, Dataflow] = {}
        self.dropped: OrderedDict[str, str] = OrderedDict()
        """Recently dropped dataflows (id -> tenant)."""
        self.zero_recovered = False
        """Whether process 0 has issued the creates of every dataflow it had stored."""

    def compile(self, graph: GraphSpec | Mapping[str, Any]) -> Plan:
        """Check and compile a graph under the server's limits (see :func:`compile_plan`)."""
        return compile_plan(graph, self.env.limits)

    def add(self, identity: Identity, plan: Plan) -> Dataflow:
        """A dataflow this process knows from now on (not built yet)."""
        dataflow = self.by_id[identity.id] = Dataflow(identity, plan, self.env)
        return dataflow

    def get(self, tenant: str, dataflow_id: str) -> Dataflow:
        """The tenant's dataflow, or :class:`NotFound` (also for other tenants' dataflows)."""
        dataflow = self.by_id.get(dataflow_id)
        if dataflow is None or dataflow.tenant != tenant:
            if self.dropped.get(dataflow_id) == tenant:
                raise Gone(f"dataflow {dataflow_id!r} was dropped")
            raise NotFound(f"no dataflow {dataflow_id!r}")
        return dataflow

    def owned(self, tenant: str) -> int:
        """How many dataflows the tenant has."""
        return sum(1 for d in self.by_id.values() if d.tenant == tenant)

    def listing(self, tenant: str) -> list[Dataflow]:
        """The tenant's dataflows, oldest first."""
        return sorted(
            (d for d in self.by_id.values() if d.tenant == tenant),
            key=lambda d: (d.created_at, d.id),
        )

    def page(
        self, tenant: str, after: tuple[float, str] | None, limit: int, name: str | None = None
    ) -> DataflowPage:
        """Up to ``limit`` of the tenant's dataflows created after ``after`` (creation, id).

        With ``name``, only the dataflows of that name (exactly). A position stays valid even
        if the dataflow it names was dropped meanwhile.
        """
        dataflows = self.listing(tenant)
        if name is not None:
            dataflows = [d for d in dataflows if d.name == name]
        start = 0
        if after is not None:
            start = next(
                (i for i, d in enumerate(dataflows) if (d.created_at, d.id) > after),
                len(dataflows),
            )
        page = dataflows[start : start + limit]
        return DataflowPage([d.summary() for d in page], start + limit < len(dataflows))

    def remove(self, dataflow: Dataflow) -> None:
        """Forget a dataflow that went (a drop, or a create that failed to be done)."""
        self.by_id.pop(dataflow.id, None)
        self.dropped[dataflow.id] = dataflow.tenant
        while len(self.dropped) > DROPPED_KEPT:
            self.dropped.popitem(last=False)

    # ----------------------------------------------------------------- the command target

    def build(self, worker: Worker, dataflow_id: str, payload: Any) -> bool:
        """Build a dataflow on ``worker``; one another process created is made here first."""
        dataflow = self.by_id.get(dataflow_id)
        if dataflow is None and payload is not None:
            tenant, name, document, created_at, holders = payload
            identity = Identity(dataflow_id, tenant, name, document, created_at, holders)
            journal = self.env.journal
            journal.add_dataflow(dataflow_id, tenant, name, document, created_at, holders)
            dataflow = self.add(identity, self.compile(document))
        if dataflow is None:
            return False
        if payload is not None and not dataflow.built and payload[4] != dataflow.holders:
            # Process 0's catalogue decides where inputs live (a move updates it last):
            # this process builds, and keeps, what it says.
            dataflow.identity.holders = dict(payload[4])
            self.env.journal.set_holders(dataflow_id, dataflow.identity.holders)
        dataflow.build(worker)
        return True

    def dropped_on(self, worker: Worker, dataflow_id: str, reason: str | None) -> bool:
        """A dataflow was dropped on a worker; with a reason, it failed on another process."""
        dataflow = self.by_id.get(dataflow_id)
        if dataflow is None:
            return False
        if reason is not None and dataflow.status != "failed":
            dataflow.mark_failed(reason)
        return True

    def known(self, dataflow_id: str) -> bool:
        """Whether this process has the dataflow."""
        return dataflow_id in self.by_id

    def finished(self, dataflow_id: str, kind: str) -> None:
        """Every worker everywhere applied ``kind``: the dataflow runs, or goes."""
        dataflow = self.by_id.get(dataflow_id)
        if dataflow is None:
            return
        if kind == "create":
            dataflow.started()
        elif (kind == "drop" and dataflow.status != "failed") or kind == "forget":
            # A failed dataflow stays, to be seen, until it is dropped.
            dataflow.forget()
            self.remove(dataflow)

    def consumer_elsewhere(self, dataflow_id: str, payload: Any) -> None:
        """A consumer's commit (or its end) made at another process."""
        dataflow = self.by_id.get(dataflow_id)
        if dataflow is not None:
            dataflow.consumer_elsewhere(payload)

    def recovered_elsewhere(self) -> None:
        """Process 0 issued every stored dataflow's create."""
        self.zero_recovered = True
