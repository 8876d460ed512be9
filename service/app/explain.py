"""Why is this time not complete? The pointstamps that hold it back, named as the graph is.

The engine answers in locations and pointstamps (:mod:`operators.runtime.explain`); this module
names them as the graph does and as the rest of the API does: operators by their node's name,
ports as ``node:port`` (an output port; an edge goes ``["from node:port", "to node:port"]``),
and says what each one is:

* ``records``: records in flight on the edge into an input port, ``count`` of them;
* ``capability``: a capability an operator holds at an output port (for an input, its own
  time, with the open transactions that would commit there as its ``holders``);
* ``session``: a producer session of an input, holding its capability at its time;
* ``scope``: a nested scope's capability at one of its outputs; its ``holders`` are the
  pointstamps inside the scope behind it (inner times, inner summaries to the scope output);
* ``outside``: inside a nested scope, the parent's frontier at one of the scope's inputs;
  its ``holders`` are the parent's pointstamps behind it.

One worker's trackers answer (the first of this process's, worker 0 in a single process):
every worker's trackers count every worker's pointstamps, since progress is broadcast, so any
one of them sees the whole dataflow. An input's sessions and transactions are read where the
input lives (its owner worker); in a cluster that may be another process, which the API asks
(what it says comes in as the input's :class:`~service.app.views.InputView`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.graph import BuiltGraph, Plan
from operators.progress import (
    Location,
    Product,
    Source,
    Target,
    check_time,
    decode_time,
    encode_time,
    same_domain,
)
from operators.runtime import Subgraph
from operators.runtime.explain import Blocker, explain, is_complete
from service.app.errors import Invalid, NotFound
from service.app.outputs import sorted_times
from service.app.views import InputView


@dataclass(frozen=True, slots=True)
class HolderView:
    """One thing that holds a time back (see the module docstring for the kinds)."""

    kind: str
    operator: str | None
    """The node (or the scope, for ``scope`` and ``outside``) it is at."""
    port: str | None
    """``node:port`` of the output port a capability is held at (``None`` inside a node)."""
    edge: tuple[str | None, str | None] | None
    """For records in flight: the edge's ``(from, to)`` ports."""
    time: Hashable
    count: int
    summary: str
    """The path summary that carries ``time`` to the location, as ``+k`` or ``(+a, +b)``."""
    arrives: Hashable
    """The time it reaches the location with (``summary`` applied to ``time``)."""
    path: list[str]
    """The operators it passes on the way, its own first."""
    session: str | None = None
    transaction: str | None = None
    holders: list[HolderView] | None = None


@dataclass(frozen=True, slots=True)
class ExplainView:
    """Why ``time`` is (or is not) complete at ``location``."""

    dataflow: str
    location: str
    time: Hashable
    complete: bool
    frontier: list[Hashable]
    holders: list[HolderView]


def render_summary(summary: Hashable) -> str:
    """A path summary as the docs write it: ``+k``, or ``(+a, +b)`` for products.

    >>> render_summary(0), render_summary(Product(Product(0, 2), 1))
    ('+0', '((+0, +2), +1)')
    """
    if isinstance(summary, Product):
        return f"({render_summary(summary.outer)}, {render_summary(summary.inner)})"
    return f"+{summary}"


def _domain_text(like: Hashable) -> str:
    if type(like) is int:
        return "an integer 0 <= t < 2^64"
    return f"a time like {encode_time(like)} (nested [outer, inner] arrays of integers)"


@dataclass(frozen=True, slots=True)
class _Place:
    """A location the API can name, as the engine knows it."""

    name: str
    scope: Any
    location: Location


class Explainer:
    """Answers for one dataflow, as one of its workers built it.

    ``inputs`` are the dataflow's inputs as their holders see them (their sessions and
    transactions): this process's own, and in a cluster the others' as their processes said.
    """

    def __init__(
        self,
        dataflow: str,
        plan: Plan,
        built: BuiltGraph,
        inputs: Mapping[str, InputView],
    ) -> None:
        self.dataflow = dataflow
        self.plan = plan
        self.built = built
        self.inputs = inputs
        self.subgraphs: dict[tuple[int, ...], Subgraph] = {}
        for scope in built.scopes.values():
            subgraph = scope.builder.subgraph
            if subgraph is not None:
                self.subgraphs[subgraph.path] = subgraph

    # ------------------------------------------------------------------ the question

    def explain(self, location: str, time: Any) -> ExplainView:
        """Why ``time`` (a decoded JSON time) is not complete at ``location``, or that it is.

        Raises:
            NotFound: no such location (the message lists the dataflow's locations).
            Invalid: ``time`` is not a time of the location's domain.
        """
        place = self._place(location)
        subgraph = place.scope.builder.subgraph
        chain = [self.subgraphs[subgraph.path[:n]] for n in range(1, len(subgraph.path) + 1)]
        engine_time = self._time(time, subgraph.domain.minimum, place.name)
        blockers = explain(chain, place.location, engine_time)
        return ExplainView(
            self.dataflow,
            place.name,
            engine_time,
            is_complete(subgraph, place.location, engine_time),
            sorted_times(subgraph.frontier(place.location)),
            [view for b in blockers for view in self._views(b)],
        )

    def _time(self, value: Any, like: Hashable, location: str) -> Hashable:
        try:
            time = value if isinstance(value, Product) else decode_time(value)
            check_time(time)
        except (TypeError, ValueError):
            time = None
        if time is None or not same_domain(time, like):
            shown = value if isinstance(value, str) else repr(encode_or_raw(value))
            detail = f"time {shown} is not a time at {location}: expected {_domain_text(like)}"
            raise Invalid(detail, [{"pointer": "/time", "detail": detail}])
        return time

    # ------------------------------------------------------------------ locations

    def locations(self) -> list[str]:
        """Every name a location can be given by, in node order."""
        names: list[str] = []
        for node in self.plan.order:
            outputs = self.built.streams.get(node, [])
            if outputs:
                names.extend(f"{node}:{port}" for port in range(len(outputs)))
            elif self.built.inputs.get(node):
                names.append(node)
        return names

    def _place(self, location: str) -> _Place:
        node, port = self._parse(location)
        streams = self.built.streams.get(node)
        if streams is not None:
            if port is None and not streams and self.built.inputs.get(node):
                return self._input_place(node)
            index = 0 if port is None else port
            if 0 <= index < len(streams):
                stream = streams[index]
                return _Place(f"{node}:{index}", stream.scope, stream.source)
        shown = ", ".join(self.locations())
        raise NotFound(
            f"dataflow {self.dataflow!r} has no location {location!r}; its locations are: "
            f"{shown} (a node's output port as node:port, or an output's name)"
        )

    @staticmethod
    def _parse(location: str) -> tuple[str, int | None]:
        """Node and port of ``node``, ``node:port``, or an events' ``operator:node:port``.

        The frontier events' ``input:x`` and ``output:y`` are taken too.
        """
        kind, _, rest = location.partition(":")
        if kind in ("input", "output", "operator") and rest:
            location = rest
        node, colon, port = location.rpartition(":")
        if not colon or not port.isdigit():
            return location, None
        return node, int(port)

    def _input_place(self, node: str) -> _Place:
        """A node without outputs (an output): its first input port, where it reads."""
        stream = self.built.inputs[node][0]
        path = stream.scope.builder.path
        for source, target in self.subgraphs[path].edges():
            if source == stream.source and self.built.owners.get(path, {}).get(target.node) == node:
                return _Place(node, stream.scope, target)
        raise NotFound(f"output {node!r} of dataflow {self.dataflow!r} reads nothing yet")

    # ------------------------------------------------------------------ naming

    def _path(self, blocker: Blocker) -> list[str]:
        names: list[str] = []
        for location in blocker.holder.path:
            if location.node == 0:
                continue
            name = self.built.owner(blocker.path, location.node)
            if name is not None and (not names or names[-1] != name):
                names.append(name)
        return names

    def _from(self, path: tuple[int, ...], source: Source) -> str | None:
        named = self.built.port_name(path, source)
        if named is not None or source.node == 0:
            return named
        return self.built.owner(path, source.node)

    def _to(self, path: tuple[int, ...], target: Target, upstream: Sequence[Source]) -> str | None:
        named = self.built.input_name(path, target, upstream)
        if named is not None:
            return named
        inner = self.subgraphs.get((*path, target.node))
        if inner is None:
            return None
        # Records into a nested scope's input: named by the port inside that reads them.
        entry = Source(0, target.port)
        for source, there in inner.edges():
            if source == entry:
                return self._to(inner.path, there, (entry,))
        return self.built.scope_name(inner.path)

    def _views(self, blocker: Blocker) -> list[HolderView]:
        holder = blocker.holder
        at = holder.location
        path = blocker.path
        view = _Viewer(
            holder.time, holder.arrives, render_summary(holder.summary), self._path(blocker)
        )
        inner = [v for b in blocker.inner for v in self._views(b)]
        if isinstance(at, Target):
            upstream = holder.upstream
            edge = (
                self._from(path, upstream[0]) if upstream else None,
                self._to(path, at, upstream),
            )
            operator = self.built.owner(path, at.node)
            return [view("records", operator, None, holder.count, edge=edge)]
        if at.node == 0:
            scope = self.built.scope_name(path)
            return [view("outside", scope, None, holder.count, holders=inner)]
        operator = self.built.owner(path, at.node)
        port = self.built.port_name(path, at)
        if (*path, at.node) in self.subgraphs:
            return [view("scope", operator, port, holder.count, holders=inner)]
        producer = self.inputs.get(operator or "")
        if producer is not None and self.plan.spec.nodes[producer.name].op == "input":
            return _input_views(producer, holder.count, port, view)
        return [view("capability", operator, port, holder.count)]


@dataclass(frozen=True, slots=True)
class _Viewer:
    """What every view of one holder shares: its time, where it arrives, how and by where."""

    time: Hashable
    arrives: Hashable
    summary: str
    route: list[str]

    def __call__(
        self,
        kind: str,
        operator: str | None,
        port: str | None,
        count: int,
        edge: tuple[str | None, str | None] | None = None,
        **extra: Any,
    ) -> HolderView:
        return HolderView(
            kind,
            operator,
            port,
            edge,
            self.time,
            count,
            self.summary,
            self.arrives,
            self.route,
            **extra,
        )


def _input_views(
    producer: InputView, count: int, port: str | None, view: _Viewer
) -> list[HolderView]:
    """An input's ``count`` capabilities at a time: its sessions', and its own for the rest."""
    name = producer.name
    views = [
        view("session", name, port, 1, session=session.id)
        for session in producer.sessions
        if session.time == view.time
    ]
    rest = count - len(views)
    if rest > 0:
        staged = [
            view("transaction", name, port, size, transaction=transaction)
            for transaction, size in producer.transactions.items()
        ]
        views.insert(0, view("capability", name, port, rest, holders=staged))
    return views


def encode_or_raw(value: Any) -> Any:
    """``value`` as the API would write it back, or as it is when it is no time at all."""
    try:
        return encode_time(value)
    except (TypeError, ValueError):
        return value
