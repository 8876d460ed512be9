"""What a dataflow answers of itself: its description, frontiers, figures and explanations.

Read-only functions of a :class:`~service.app.dataflow.Dataflow`, in the typed views of
:mod:`service.app.views`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from operators import Stream
from operators.graph.spec import NodeSpec
from service.app.dataflow import Dataflow
from service.app.errors import Gone
from service.app.explain import Explainer, ExplainView
from service.app.outputs import sorted_times
from service.app.pace import LoopLag
from service.app.views import (
    DataflowStats,
    DataflowView,
    InputState,
    InputView,
    LiveStats,
    OperatorState,
    OutputState,
    OutputStats,
    PortState,
    RecordErrors,
)


def _operator_frontier(stream: Stream) -> list[Hashable]:
    subgraph = stream.scope.builder.subgraph
    return [] if subgraph is None else sorted_times(subgraph.frontier(stream.source))


def _schema(node: NodeSpec) -> dict[str, Any] | None:
    """An input's schema as its graph declares it (``None``: untyped)."""
    return None if node.schema is None else node.schema.describe()


def describe(
    dataflow: Dataflow, operators: bool = True, elsewhere: Mapping[str, InputView] | None = None
) -> DataflowView:
    """The dataflow in full, with frontiers and record counts.

    Its graph, status, inputs and outputs with their frontiers, and (optionally) every
    operator's output frontiers and record counts. ``elsewhere`` is, in a cluster, the
    inputs other processes hold, as they describe them.
    """
    nodes = dataflow.plan.spec.nodes
    inputs = {
        name: InputState(
            p.applied_frontier(),
            len(p.sessions),
            p.records_in,
            p.closed,
            _schema(nodes[name]),
            dataflow.holder(name),
        )
        for name, p in dataflow.inputs.items()
    }
    for name, view in (elsewhere or {}).items():
        inputs[name] = InputState(
            view.frontier,
            len(view.sessions),
            view.records_in,
            view.closed,
            _schema(nodes[name]),
            dataflow.holder(name),
        )
    order = dataflow.plan.spec.inputs()
    return DataflowView(
        dataflow.id,
        dataflow.name,
        dataflow.status,
        dataflow.created_at,
        dataflow.graph,
        dataflow.error,
        {name: inputs[name] for name in order if name in inputs},
        {
            name: OutputState(list(log.frontier()), log.records_out)
            for name, log in dataflow.outputs.items()
        },
        {
            node: RecordErrors(n, dataflow.plan.errors.last.get(node))
            for node, n in dataflow.plan.errors.counts.items()
        },
        operator_frontiers(dataflow) if operators else None,
        {node: dataflow.plan.typing.describe(node) for node in dataflow.plan.order},
    )


def operator_frontiers(dataflow: Dataflow) -> dict[str, OperatorState]:
    """Per node: the frontier at each output port, and the records sent on it (all workers).

    Frontiers are the same on every worker (each tracks all of them); records are summed.
    """
    first = dataflow.first
    if first is None:
        return {}
    busy = busy_seconds(dataflow)
    result: dict[str, OperatorState] = {}
    for node, streams in first.streams.items():
        outputs = []
        for port, stream in enumerate(streams):
            sent = 0
            for built in dataflow.built.values():
                mine = built.streams[node][port]
                child = mine.scope.builder.child(mine.source.node)
                ports = getattr(child, "output_ports", None)
                if ports:
                    sent += ports[mine.source.port].records_out
            outputs.append(PortState(_operator_frontier(stream), sent))
        result[node] = OperatorState(outputs, busy.get(node, 0.0))
    return result


def busy_seconds(dataflow: Dataflow) -> dict[str, float]:
    """Per node: the seconds spent scheduling its operators, summed over this process's workers.

    Each worker's scopes time their children
    (:meth:`~operators.runtime.subgraph.Subgraph.busy_seconds`); a node's operators are those
    its scopes say it built.
    """
    result: dict[str, float] = {}
    for built in dataflow.built.values():
        subgraphs = {}
        for scope in built.scopes.values():
            builder = scope.builder
            subgraphs[builder.path] = builder.subgraph
        for path, owned in built.owners.items():
            subgraph = subgraphs.get(path)
            if subgraph is None:
                continue
            for index, node in owned.items():
                result[node] = result.get(node, 0.0) + subgraph.busy_seconds(index)
    return result


def frontiers(dataflow: Dataflow, operators: bool = False) -> dict[str, list[Any]]:
    """The current frontier of each input and output (and operator output, on request).

    Only frontiers: unlike :func:`operator_frontiers`, no record counts.
    """
    result: dict[str, list[Any]] = {}
    first = dataflow.first
    for name in dataflow.plan.spec.inputs():
        if name in dataflow.inputs or first is not None:
            result[f"input:{name}"] = dataflow.input_frontier(name)
    for name, log in dataflow.outputs.items():
        result[f"output:{name}"] = sorted_times(log.frontier())
    if operators and first is not None:
        for node, streams in first.streams.items():
            for port, stream in enumerate(streams):
                result[f"operator:{node}:{port}"] = _operator_frontier(stream)
    return result


def stats(dataflow: Dataflow) -> DataflowStats:
    """What the metrics show of a dataflow."""
    least = [t for p in dataflow.inputs.values() for t in p.applied_frontier() if type(t) is int]
    outputs: dict[str, OutputStats] = {}
    for name, log in dataflow.outputs.items():
        frontier = [t for t in log.frontier() if type(t) is int]
        lag = max(0, min(least) - min(frontier)) if frontier and least else None
        outputs[name] = OutputStats(
            log.records_out,
            lag,
            len(log.subscribers),
            sum(len(s.queue) for s in log.subscribers),
        )
    records_in = {name: p.records_in for name, p in dataflow.inputs.items()}
    dropped_late = {name: p.dropped_late for name, p in dataflow.inputs.items()}
    return DataflowStats(dataflow.id, dataflow.status, records_in, outputs, dropped_late)


def live(
    dataflow: Dataflow,
    after: int,
    loop: LoopLag,
    at: float,
    elsewhere: Mapping[str, InputView] | None = None,
) -> LiveStats:
    """A dataflow's state and the samples of its pace numbered after ``after``.

    Inputs in the graph's order, those other processes hold (``elsewhere``) as they
    describe them.
    """
    inputs = {name: producer.view() for name, producer in dataflow.inputs.items()}
    inputs.update(elsewhere or {})
    return LiveStats(
        dataflow.id,
        dataflow.status,
        at,
        operator_frontiers(dataflow),
        {name: inputs[name] for name in dataflow.plan.spec.inputs() if name in inputs},
        {name: log.view() for name, log in dataflow.outputs.items()},
        dataflow.pace.samples_after(after),
        loop.last,
        list(loop.stalls),
    )


def explain(
    dataflow: Dataflow,
    location: str,
    time: Any,
    elsewhere: Mapping[str, InputView] | None = None,
) -> ExplainView:
    """Why ``time`` is not complete at ``location`` of a dataflow (or that it is).

    ``time`` is as decoded from the request (an int or nested lists), or its text when it
    was not even that; ``location`` is ``node:port`` (an output port) or an output's name.
    ``elsewhere`` is, in a cluster, the inputs other processes hold, as they describe them
    (so their sessions are named too). :class:`NotFound` for another location (naming the
    dataflow's), :class:`Invalid` for a time of another domain, :class:`Gone` for a
    dataflow that failed or was dropped.
    """
    if dataflow.status in ("failed", "dropped") or not dataflow.built:
        raise Gone(f"dataflow {dataflow.id!r} is {dataflow.status}: nothing runs to explain")
    # Any worker's trackers count every worker's pointstamps: this process's first.
    built = dataflow.built[min(dataflow.built)]
    inputs = {name: producer.view() for name, producer in dataflow.inputs.items()}
    inputs.update(elsewhere or {})
    return Explainer(dataflow.id, dataflow.plan, built, inputs).explain(location, time)
