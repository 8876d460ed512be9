"""The graph compiler: checks what a graph means, and builds it into a dataflow.

:func:`compile_graph` takes a shape-checked :class:`~operators.graph.spec.GraphSpec` and
checks everything else at once: known operators and their parameters, ports that exist and
are connected exactly once, scopes, expressions (compiled here, once), and cycles that do not
advance time. The resulting :class:`Plan` builds the same dataflow on every worker; inputs and
outputs are supplied by a :class:`GraphContext` (the service attaches producers and captures
there).

What each operator is (its ports, parameters and builder) is its entry in the registry
(:mod:`operators.graph.registry`); this module only checks a graph against those entries and
builds nodes through them.

Records are JSON values. An expression that fails on a record (a missing field, a wrong type)
drops that record and counts it against its node, unless the node says ``"on_error":
"fail"``, in which case the dataflow fails with the error.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from typing import Any

import operators.graph.ops  # noqa: F401 - registers the built-in operators
from operators.graph.cel import MAX_RECORD_BYTES, Expression, ExpressionError, compile_expression
from operators.graph.columnar import Typing, plan_columns
from operators.graph.fusion import build_fused, find_chains
from operators.graph.node import GraphContext, NodeBuilder, RecordErrors
from operators.graph.ops.columnar import BUILDS as COLUMNAR_BUILDS
from operators.graph.registry import (
    CATALOGUE,
    Connect,
    OpKind,
    Param,
    describe_catalogue,
    register_operator,
)
from operators.graph.spec import EdgeSpec, GraphError, GraphSpec, NodeSpec, Problem, escape
from operators.progress import Antichain, Builder, Source, Target
from operators.stream import Stream

Inputs = dict[str, list[tuple[str, int]]]
"""Per node, per input port in order, the ``(node, output port)`` feeding it."""


# --------------------------------------------------------------------------- the plan


ScopePath = tuple[int, ...]
"""A scope's path on its worker (its builder's): the dataflow's index, then child indexes."""


@dataclass(slots=True)
class BuiltGraph:
    """What one worker built: where each node's operators live (for frontiers and counts).

    Besides each node's streams it keeps what names the engine's locations as the graph
    does (:meth:`owner`, :meth:`port_name`, :meth:`input_name`): which node built each
    operator of each scope, and which ``node:port`` each stream a node reads comes from.

    >>> built = BuiltGraph({}, {})
    >>> built.owners[(0,)] = {1: "words"}
    >>> built.owner((0,), 1), built.owner((0,), 2)
    ('words', None)
    """

    streams: dict[str, list[Stream]]
    """Each node's output streams (their ``source`` locates the node's operator)."""
    scopes: dict[str | None, Any]
    """Each scope by name (``None`` is the root)."""
    owners: dict[ScopePath, dict[int, str]] = field(default_factory=dict)
    """Per scope, the node that built each operator (a nested scope is not in it)."""
    inputs: dict[str, list[Stream]] = field(default_factory=dict)
    """Each node's input streams, in port order, as it read them (in its own scope)."""
    sources: dict[tuple[ScopePath, Source], str] = field(default_factory=dict)
    """``node:port`` of the stream leaving each output port, and of each stream carried into
    another scope for a node (its ``Source`` there is the scope's input or output)."""

    def own(self, scope: Any, first: int, name: str) -> None:
        """The operators ``scope`` reserved from index ``first`` on are node ``name``'s."""
        owned = self.owners.setdefault(scope.builder.path, {})
        for index in range(first, scope.builder.reserved):
            owned.setdefault(index, name)

    def scope_name(self, path: ScopePath) -> str | None:
        """The name of the nested scope at ``path`` (``None`` for the root or none)."""
        for name, scope in self.scopes.items():
            if name is not None and scope.builder.path == path:
                return str(name)
        return None

    def owner(self, path: ScopePath, index: int) -> str | None:
        """The node (or, for a nested scope, the scope) at child ``index`` of scope ``path``."""
        name = self.owners.get(path, {}).get(index)
        return name if name is not None else self.scope_name((*path, index))

    def port_name(self, path: ScopePath, source: Source) -> str | None:
        """``node:port`` of the graph's output port whose stream leaves ``source``, if any."""
        return self.sources.get((path, source))

    def input_name(self, path: ScopePath, target: Target, upstream: Sequence[Source]) -> str | None:
        """``node:port`` of the graph's input port an edge from ``upstream`` into ``target`` is.

        ``None`` when ``target`` is not a node's (it is a nested scope's input); just the
        node's name when the edge is inside the node (between operators it built).
        """
        name = self.owners.get(path, {}).get(target.node)
        if name is None:
            return None
        for port, stream in enumerate(self.inputs.get(name, ())):
            if stream.scope.builder.path == path and stream.source in upstream:
                return f"{name}:{port}"
        return name


@dataclass(slots=True)
class Plan:
    """A checked, compiled graph, ready to be built on every worker."""

    spec: GraphSpec
    order: list[str]
    """Nodes in build order (every node after the sources of its inputs, feedback first)."""
    inputs_of: Inputs
    """Per node, per input port, the ``(node, output port)`` feeding it."""
    outputs_of: dict[str, int]
    expressions: dict[str, dict[str, Expression]]
    errors: RecordErrors = field(default_factory=RecordErrors)
    chains: list[list[str]] = field(default_factory=list)
    """Runs of ``map``/``filter``/``flat_map`` nodes built as one operator each
    (:mod:`operators.graph.fusion`); empty: every node is its own."""
    typing: Typing = field(default_factory=Typing)
    """Which nodes run on columns, and the Arrow type of each typed stream
    (:mod:`operators.graph.columnar`)."""

    def describe(self) -> dict[str, Any]:
        """The compiled plan as JSON (for ``dry_run``): order, ports and generated code."""
        return {
            "time": self.spec.time.describe(),
            "scopes": {
                name: {"kind": s.kind, "parent": s.parent} for name, s in self.spec.scopes.items()
            },
            "inputs": self.spec.inputs(),
            "outputs": self.spec.outputs(),
            "order": self.order,
            "nodes": {name: self._describe_node(name) for name in self.order},
        }

    def _describe_node(self, name: str) -> dict[str, Any]:
        described = {
            "op": self.spec.nodes[name].op,
            "scope": self.spec.nodes[name].scope,
            "inputs": [f"{n}:{p}" for n, p in self.inputs_of[name]],
            "outputs": self.outputs_of[name],
            "expressions": {
                param: {"source": e.source, "python": e.python, "type": e.result_type}
                for param, e in self.expressions.get(name, {}).items()
            },
        }
        chain = next((chain for chain in self.chains if name in chain), None)
        if chain is not None:
            described["fused"] = chain  # the nodes this one runs in one operator with
        described.update(self.typing.describe(name))
        return described

    def spans_times(self) -> bool:
        """Whether an operator of the graph makes output at other times than its input's."""
        return any(CATALOGUE[node.op].spans_times for node in self.spec.nodes.values())

    def minimum(self) -> Hashable:
        """The least time of the graph's root time domain."""
        return self.spec.time.domain().minimum

    def build(self, root: Any, context: GraphContext) -> BuiltGraph:
        """Build the dataflow in ``root`` (a worker's scope): call inside ``worker.dataflow``.

        Nodes are built in :attr:`order`, each by its registry entry. A loop operator
        (``feedback``) is built before the nodes feeding it exist, so its inputs are
        connected once every node is built.
        """
        built = BuiltGraph({}, self._build_scopes(root))
        loops: dict[str, Connect] = {}
        chains = {chain[0]: chain for chain in self.chains}
        fused = {name for chain in self.chains for name in chain[1:]}
        for name in self.order:
            if name in fused:
                continue  # built with the first node of its chain
            kind = CATALOGUE[self.spec.nodes[name].op]
            scope = built.scopes[self.spec.nodes[name].scope]
            first = scope.builder.reserved
            if name in chains:  # the operator is the first node's; each node has a port of it
                nodes = [self._node(n, [], built, context) for n in chains[name]]
                build_fused(nodes, self._inputs(name, built), built)
            elif kind.build_loop is not None:
                node = self._node(name, [], built, context)
                built.streams[name], loops[name] = kind.build_loop(node)
            else:
                node = self._node(name, self._inputs(name, built), built, context)
                columnar = COLUMNAR_BUILDS.get(node.op) if node.columnar is not None else None
                if columnar is not None:
                    assert node.columnar is not None
                    record = node.types if node.op == "join" else node.types[0]
                    built.streams[name] = columnar(node, node.columnar, record)
                else:
                    built.streams[name] = kind.build_node(node)
            for port, stream in enumerate(built.streams[name]):
                # (Before ``own``: reading ``source`` builds a fused library chain's operator.)
                built.sources.setdefault(
                    (stream.scope.builder.path, stream.source), f"{name}:{port}"
                )
            built.own(scope, first, name)
        for name, connect in loops.items():
            scope = built.scopes[self.spec.nodes[name].scope]
            first = scope.builder.reserved
            connect(self._inputs(name, built))
            built.own(scope, first, name)
        return built

    def _build_scopes(self, root: Any) -> dict[str | None, Any]:
        """Every scope of the graph by name, each made after its parent, in declaration order."""
        scopes: dict[str | None, Any] = {None: root}

        def scope_of(name: str | None) -> Any:
            if name not in scopes:
                info = self.spec.scopes[name]  # type: ignore[index]
                parent = scope_of(info.parent)
                iterative = info.kind == "iterative"
                scopes[name] = parent.iterative(name) if iterative else parent.region(name)
            return scopes[name]

        for name in self.spec.scopes:
            scope_of(name)
        return scopes

    def _inputs(self, name: str, built: BuiltGraph) -> list[Stream]:
        """The streams feeding ``name``, in port order, carried into its scope."""
        target = built.scopes[self.spec.nodes[name].scope]
        streams = []
        for src, port in self.inputs_of[name]:
            stream = _move(built.streams[src][port], target, built.scopes, self.spec)
            built.sources.setdefault((stream.scope.builder.path, stream.source), f"{src}:{port}")
            streams.append(stream)
        built.inputs[name] = streams
        return streams

    def _node(
        self, name: str, inputs: list[Stream], built: BuiltGraph, context: GraphContext
    ) -> NodeBuilder:
        spec = self.spec.nodes[name]
        return NodeBuilder(
            name=name,
            op=spec.op,
            params=spec.params,
            inputs=inputs,
            scope=built.scopes[spec.scope],
            context=context,
            expressions=self.expressions.get(name, {}),
            errors=self.errors,
            columnar=self.typing.columnar(name),
            types=[self.typing.types.get(source) for source in self.inputs_of[name]],
        )


def _ancestors(name: str | None, spec: GraphSpec) -> list[str | None]:
    chain: list[str | None] = [name]
    while name is not None:
        name = spec.scopes[name].parent
        chain.append(name)
    return chain


def _move(stream: Stream, target: Any, scopes: dict[str | None, Any], spec: GraphSpec) -> Stream:
    """Carry ``stream`` into the scope ``target`` (leaving and entering scopes as needed)."""
    by_builder = {id(s.builder): n for n, s in scopes.items()}
    here = by_builder[id(stream.scope.builder)]
    there = by_builder[id(target.builder)]
    if here == there:
        return stream
    up = _ancestors(here, spec)
    down = _ancestors(there, spec)
    common = next(s for s in up if s in down)
    for _ in range(up.index(common)):
        stream = stream.leave()
    for name in reversed(down[: down.index(common)]):
        stream = stream.enter(scopes[name])
    return stream


# --------------------------------------------------------------------------- checking


def compile_graph(
    spec: GraphSpec, record_bytes: int = MAX_RECORD_BYTES, columnar: bool = True
) -> Plan:
    """Check everything about ``spec`` and compile its expressions.

    Nodes are checked first (operators, parameters, expressions, placement), then edges
    (ports), then that every input port is connected; cycles only once all that is right.
    ``record_bytes`` is the largest record the server takes (its ``max_record_bytes``): the
    expressions' cost is estimated for it. With ``columnar`` false, every node runs by rows
    (the row path, which the columnar one must match record for record).

    Raises:
        GraphError: listing every problem found, each with a JSON pointer.
    """
    problems: list[Problem] = []
    kinds: dict[str, OpKind] = {}
    expressions: dict[str, dict[str, Expression]] = {}
    outputs_of: dict[str, int] = {}
    for node in spec.nodes.values():
        kind = _kind_of(node, problems)
        if kind is not None:
            kinds[node.name] = kind
            expressions[node.name] = _check_params(node, kind, problems, record_bytes)
            outputs_of[node.name] = _output_count(node, kind)
            problems.extend(_check_placement(node, kind, spec))
    ports = _connect(spec, kinds, outputs_of, problems)
    inputs_of = _ordered_inputs(spec, kinds, ports, problems)
    if not problems:
        problems.extend(_check_cycles(spec, inputs_of))
    if problems:
        raise GraphError(problems)
    order = _build_order(spec, inputs_of)
    typing = plan_columns(spec, order, inputs_of, expressions, enabled=columnar)
    on_columns = {name for name in order if typing.columnar(name) is not None}
    chains = find_chains(spec, inputs_of, on_columns)
    return Plan(spec, order, inputs_of, outputs_of, expressions, chains=chains, typing=typing)


def _kind_of(node: NodeSpec, problems: list[Problem]) -> OpKind | None:
    """The node's registry entry, or ``None`` (and a problem) for an unknown operator."""
    kind = CATALOGUE.get(node.op)
    if kind is None:
        known = ", ".join(sorted(CATALOGUE))
        problems.append(Problem(f"{node.pointer}/op", f"unknown operator {node.op!r} ({known})"))
    return kind


def _check_params(
    node: NodeSpec, kind: OpKind, problems: list[Problem], record_bytes: int
) -> dict[str, Expression]:
    """Report the node's parameter problems and compile its expressions (in node order).

    The parameters' shape was checked by the API's graph model where it reached the compiler
    from there (:attr:`NodeSpec.checked`), and is checked here (:func:`param_problems`)
    otherwise; either way the problems come in the same order: parameters the operator does
    not take, then each parameter in the operator's order, its expression compiled in place.
    """
    checked = node.checked if node.checked is not None else param_problems(node, kind)
    at: dict[str, list[Problem]] = {}
    for problem in checked:
        at.setdefault(problem.pointer, []).append(problem)
    pointers = {key: f"{node.pointer}/{escape(key)}" for key in kind.params}
    taken = set(pointers.values())
    problems.extend(p for p in checked if p.pointer not in taken)
    compiled: dict[str, Expression] = {}
    for key, param in kind.params.items():
        pointer = pointers[key]
        if pointer in at:
            problems.extend(at[pointer])
        elif param.kind == "expr" and key in node.params:
            expression = _check_expression(node.params[key], param, pointer, problems, record_bytes)
            if expression is not None:
                compiled[key] = expression
    return compiled


def param_problems(node: NodeSpec, kind: OpKind) -> tuple[Problem, ...]:
    """The problems of the node's parameters' shape, against its operator's entry.

    Parameters it does not take, then each one in the operator's order: missing, or not of
    its kind (an expression that is not a string, an int out of its range, a choice not
    among its choices). What an expression means is the compiler's to check.
    The API's graph model finds the same problems with pydantic (one model per operator,
    a union on ``op``); ``tests/unit/api/test_graph_model.py`` holds them to each other.
    """
    found = [
        Problem(f"{node.pointer}/{escape(key)}", f"{node.op} has no parameter {key!r}")
        for key in node.params
        if key not in kind.params
    ]
    for key, param in kind.params.items():
        pointer = f"{node.pointer}/{escape(key)}"
        if key not in node.params:
            if param.required:
                found.append(Problem(pointer, f"{node.op} needs the parameter {key!r}"))
        else:
            found.extend(_check_value(node.params[key], param, pointer))
    return tuple(found)


def _check_expression(
    value: Any, param: Param, pointer: str, problems: list[Problem], record_bytes: int
) -> Expression | None:
    """Compile an expression parameter; ``None`` (and a problem) if it is not one.

    An expression that compiles but gives a type the parameter does not accept is still
    returned (with its problem), as it was before.
    """
    if not isinstance(value, str):  # reported by param_problems
        return None
    try:
        expression = compile_expression(
            value, param.variables, batch=param.batch, max_record_bytes=record_bytes
        )
    except ExpressionError as error:
        problems.append(Problem(pointer, f"expression does not compile: {error}"))
        return None
    found = expression.result_type
    if param.result and found not in param.result:
        wanted = " or ".join(t for t in param.result if t != "dyn")
        problems.append(Problem(pointer, f"the expression gives {found}, not {wanted}"))
    return expression


def _check_value(value: Any, param: Param, pointer: str) -> list[Problem]:
    """Problems of a parameter's value against its kind (an expression's is only its type)."""
    if param.kind == "expr":
        if not isinstance(value, str):
            return [Problem(pointer, "an expression must be a string")]
    elif param.kind == "int":
        if type(value) is not int or not param.minimum <= value <= param.maximum:
            message = f"must be an integer from {param.minimum} to {param.maximum}"
            return [Problem(pointer, message)]
    elif param.kind == "choice" and value not in param.choices:
        return [Problem(pointer, f"must be one of {', '.join(param.choices)}")]
    return []  # a "json" parameter is any JSON value: the operator's builder checks it


def _output_count(node: NodeSpec, kind: OpKind) -> int:
    """How many output ports the node has (a bad count parameter, reported already, is 1)."""
    outputs = kind.outputs
    count = outputs if isinstance(outputs, int) else node.params.get(outputs, 1)
    return count if type(count) is int and count >= 0 else 1


def _check_placement(node: NodeSpec, kind: OpKind, spec: GraphSpec) -> list[Problem]:
    """Operators that must be in the root, and loop operators outside an iterative scope."""
    problems: list[Problem] = []
    if kind.in_root and node.scope is not None:
        problems.append(Problem(f"{node.pointer}/scope", f"an {node.op} must be in the root"))
    if kind.is_loop and (node.scope is None or spec.scopes[node.scope].kind != "iterative"):
        problems.append(Problem(node.pointer, f"a {node.op} must be inside an iterative scope"))
    return problems


def _connect(
    spec: GraphSpec, kinds: dict[str, OpKind], outputs_of: dict[str, int], problems: list[Problem]
) -> dict[str, dict[int, tuple[str, int, str]]]:
    """Each node's connected input ports: port -> ``(node, output port, edge pointer)``."""
    ports: dict[str, dict[int, tuple[str, int, str]]] = {n: {} for n in spec.nodes}
    for edge in spec.edges:
        found = _check_ends(edge, spec, kinds, outputs_of)
        if found:
            problems.extend(found)
            continue
        target = edge.target
        taken = ports[target.node].get(target.port)
        if taken is not None:
            message = f"input {target} is already connected by {taken[2]}; use a concat to merge"
            problems.append(Problem(edge.target_pointer, message))
            continue
        ports[target.node][target.port] = (edge.source.node, edge.source.port, edge.pointer)
    return ports


def _check_ends(
    edge: EdgeSpec, spec: GraphSpec, kinds: dict[str, OpKind], outputs_of: dict[str, int]
) -> list[Problem]:
    """Problems of an edge's two ends: a node that does not exist, a port it does not have."""
    problems: list[Problem] = []
    source, target = edge.source, edge.target
    if source.node not in spec.nodes:
        problems.append(Problem(edge.source_pointer, f"no node {source.node!r}"))
    elif source.node in outputs_of and source.port >= outputs_of[source.node]:
        op = spec.nodes[source.node].op
        message = f"{source.node} ({op}) has no output {source.port}"
        problems.append(Problem(edge.source_pointer, message))
    if target.node not in spec.nodes:
        problems.append(Problem(edge.target_pointer, f"no node {target.node!r}"))
    elif target.node in kinds:
        arity = kinds[target.node].inputs
        if arity is not None and target.port >= arity:
            op = spec.nodes[target.node].op
            message = f"{target.node} ({op}) has no input {target.port}"
            problems.append(Problem(edge.target_pointer, message))
    return problems


def _ordered_inputs(
    spec: GraphSpec,
    kinds: dict[str, OpKind],
    ports: dict[str, dict[int, tuple[str, int, str]]],
    problems: list[Problem],
) -> Inputs:
    """Each known node's inputs in port order; every port it has must be connected."""
    ordered: Inputs = {}
    for name, kind in kinds.items():
        connected = ports[name]
        arity = kind.inputs if kind.inputs is not None else max(len(connected), 1)
        problems.extend(
            Problem(spec.nodes[name].pointer, f"input {name}:{port} is not connected")
            for port in range(arity)
            if port not in connected
        )
        ordered[name] = [connected[p][:2] for p in sorted(connected)]
    return ordered


def _check_cycles(spec: GraphSpec, inputs_of: Inputs) -> list[Problem]:
    """Refuse cycles along which time does not advance.

    Only a loop operator (a feedback) advances time, and only within its own iterative
    scope: leaving the scope drops the coordinate it advanced. So every cycle must pass a
    feedback that lives in the innermost scope holding the whole cycle. Checked by strongly
    connected components: each component needs such a feedback; cutting through those
    feedbacks, whatever cycles remain (deeper in nested scopes) are checked the same way.
    """
    successors: dict[str, set[str]] = {name: set() for name in spec.nodes}
    for name, sources in inputs_of.items():
        for src, _port in sources:
            successors[src].add(name)
    problems: list[Problem] = []
    _check_component(spec, set(spec.nodes), successors, problems)
    return problems


def _scope_chain(spec: GraphSpec, scope: str | None) -> list[str | None]:
    chain: list[str | None] = []
    while scope is not None:
        chain.append(scope)
        scope = spec.scopes[scope].parent
    chain.append(None)
    return chain[::-1]  # root first


def _innermost_common(spec: GraphSpec, nodes: set[str]) -> str | None:
    chains = [_scope_chain(spec, spec.nodes[n].scope) for n in nodes]
    common: str | None = None
    for level in zip(*chains, strict=False):
        if len(set(level)) != 1:
            break
        common = level[0]
    return common


def _is_loop(spec: GraphSpec, name: str) -> bool:
    return CATALOGUE[spec.nodes[name].op].is_loop


def _check_component(
    spec: GraphSpec, nodes: set[str], successors: dict[str, set[str]], problems: list[Problem]
) -> None:
    for component in _components(nodes, successors):
        scope = _innermost_common(spec, component)
        feedbacks = {n for n in component if _is_loop(spec, n) and spec.nodes[n].scope == scope}
        if not feedbacks:
            members = ", ".join(sorted(component))
            where = "the root scope" if scope is None else f"scope {scope!r}"
            problems.append(
                Problem(
                    "/edges",
                    f"the cycle through {members} does not pass a feedback of {where}, so "
                    "records could return at the same time",
                )
            )
            continue
        cut = {n: (set() if n in feedbacks else successors[n] & component) for n in component}
        _check_component(spec, component, cut, problems)


def _components(nodes: set[str], successors: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``nodes`` that contain a cycle."""
    ordered = sorted(nodes)
    index = {name: i + 1 for i, name in enumerate(ordered)}
    reach = Builder()
    for name in ordered:
        reach.add_node(index[name], 1, 1, [{0: Antichain([0])}])
    for name in ordered:
        for follower in sorted(successors.get(name, set()) & nodes):
            reach.add_edge(Source(index[name], 0), Target(index[follower], 0))
    transitions = reach.find_cycles()
    # Group the cyclic nodes by component: nodes joined by a cyclic transition.
    groups: dict[str, set[str]] = {}
    for start, end in transitions:
        a, b = ordered[start.node - 1], ordered[end.node - 1]
        group = groups.get(a, {a}) | groups.get(b, {b})
        for member in group:
            groups[member] = group
    unique: list[set[str]] = []
    for group in groups.values():
        if group not in unique:
            unique.append(group)
    return unique


def _build_order(spec: GraphSpec, inputs_of: Inputs) -> list[str]:
    """Every node after the nodes feeding it; loop operators (feedback) are ready at once.

    The edges into loop operators are left out: they are connected after every node is
    built, and without them the graph has no cycle (:func:`_check_cycles` made sure every
    cycle passes one). :class:`graphlib.TopologicalSorter` keeps the count of what each node
    waits for; the order is sweeps over the nodes in declaration order, each taking every
    node ready by then (one taken early in a sweep can make a later one ready in the same
    sweep). So a graph declared in a buildable order is built in that order, and a feedback
    comes where it is declared, or earlier if what it feeds is declared before it.
    """
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for name in spec.nodes:
        waits = () if _is_loop(spec, name) else (src for src, _port in inputs_of[name])
        sorter.add(name, *waits)
    sorter.prepare()
    ready = set(sorter.get_ready())
    order: list[str] = []
    pending = list(spec.nodes)
    while pending:  # each sweep takes at least the first ready node: the graph is acyclic
        for name in pending:
            if name in ready:
                order.append(name)
                sorter.done(name)
                ready.update(sorter.get_ready())
        taken = set(order)
        pending = [name for name in pending if name not in taken]
    return order


__all__: Sequence[str] = [
    "CATALOGUE",
    "BuiltGraph",
    "GraphContext",
    "OpKind",
    "Param",
    "Plan",
    "RecordErrors",
    "compile_graph",
    "describe_catalogue",
    "register_operator",
]
