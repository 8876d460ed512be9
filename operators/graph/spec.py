"""Graph specifications: the declarative form of a dataflow, and its shape checks.

A graph is a JSON object (see ``docs/graphs.md``)::

    {
      "time": "u64",
      "scopes": {"loop": {"kind": "iterative"}},
      "nodes": {
        "words": {"op": "input"},
        "lengths": {"op": "map", "expr": "size(r)"},
        "counts": {"op": "output"}
      },
      "edges": [["words", "lengths"], ["lengths:0", "counts:0"]]
    }

:func:`parse_graph` checks its shape and returns plain dataclasses; every problem found is
reported at once, each with a JSON pointer (RFC 6901) to the offending part. Meaning (known
operators, parameters, ports, cycles, expressions) is checked by the compiler; the API's graph
model checks the parameters' shape before it does, and hands it what it found on each node
(:attr:`NodeSpec.checked`).

It is the one shape checker: the API's graph model (``api/graph_model.py``) delegates to it,
and so do library users and recovery, who hand the service a graph as JSON. Its limits
(:data:`MAX_NODES`, :data:`MAX_EDGES`, :data:`MAX_SCOPES`, :data:`MAX_SCOPE_DEPTH`,
:data:`MAX_TIME_DEPTH`) are checked before the parts they bound are read, or bound the walks
that read them, so a graph over one costs no more than the limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.graph.schema import Schema, parse_schema
from operators.runtime import INTEGERS, TimeDomain

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
MAX_NODES = 1000
"""The most nodes a graph may have."""
MAX_EDGES = 10_000
"""The most edges a graph may have: ten per node at the most nodes (an edge costs the build
about a tenth of a millisecond; a concat of 9,999 inputs, the most ports a node has, 1.3 s)."""
MAX_SCOPES = 1000
"""The most scopes a graph may declare (each is built, even without nodes)."""
MAX_SCOPE_DEPTH = 32
"""How deeply scopes may nest: each iterative scope adds a coordinate to its times, and the
engine's times and frontiers recurse through the coordinates (a few hundred levels raise
RecursionError, which stopped the whole service)."""
MAX_TIME_DEPTH = 32
"""How deeply the root time domain's products may nest (times recurse as scopes' do)."""
TIME_MESSAGE = 'the time domain must be "u64" or {"product": [<time domain>, "u64"]}'
"""The problem of a value that is not a time domain."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a submitted graph: where (a JSON pointer) and what."""

    pointer: str
    message: str


class GraphError(ValueError):
    """A graph that cannot be built; ``problems`` lists everything found, not just the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        shown = "; ".join(f"{p.pointer or '/'}: {p.message}" for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"invalid graph: {shown}{more}")


@dataclass(frozen=True, slots=True)
class TimeSpec:
    """A time domain: ``u64`` (``depth`` 0), or products of u64s nested ``depth`` deep."""

    depth: int = 0

    def describe(self) -> Any:
        """The JSON form (built without recursion: a depth is not bounded here)."""
        described: Any = "u64"
        for _ in range(self.depth):
            described = {"product": [described, "u64"]}
        return described

    def domain(self) -> TimeDomain:
        """The engine's time domain: its least time and identity summary.

        The one place a depth becomes a domain (the compiler's least time, the manager's
        dataflows).
        """
        domain = INTEGERS
        for _ in range(self.depth):
            domain = domain.product()
        return domain


@dataclass(frozen=True, slots=True)
class PortRef:
    """``node:port``."""

    node: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"


@dataclass(frozen=True, slots=True)
class EdgeSpec:
    """An edge from an output port to an input port; the pointers locate it and its ends."""

    source: PortRef
    target: PortRef
    pointer: str
    source_pointer: str = ""
    target_pointer: str = ""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A named operator: its kind, its parameters, and the scope it lives in (None = root)."""

    name: str
    op: str
    params: Mapping[str, Any]
    scope: str | None
    pointer: str
    checked: tuple[Problem, ...] | None = field(default=None, compare=False)
    """The problems of its parameters, when they were checked before the compiler (by the
    API's graph model, against each operator's parameter model); ``None``: not checked yet,
    and the compiler checks them. Either way the compiler lists them in node order, with the
    graph's other problems."""
    schema: Schema | None = field(default=None, compare=False)
    """An ``input``'s schema (its ``"schema"`` parameter, :mod:`operators.graph.schema`):
    its records are then typed and travel as Arrow columns; ``None``: untyped."""


@dataclass(frozen=True, slots=True)
class ScopeSpec:
    """A nested scope: ``iterative`` (adds a loop coordinate) or ``region``."""

    name: str
    kind: str
    parent: str | None
    pointer: str


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """A graph whose shape is valid."""

    time: TimeSpec
    nodes: dict[str, NodeSpec]
    edges: list[EdgeSpec]
    scopes: dict[str, ScopeSpec] = field(default_factory=dict)
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The JSON document the spec was read from, as given: what the service stores (and reads
    again on recovery) and shows. :func:`parse_graph` always sets it."""

    def inputs(self) -> list[str]:
        """The names of the input nodes, in declaration order."""
        return [n.name for n in self.nodes.values() if n.op == "input"]

    def outputs(self) -> list[str]:
        """The names of the output nodes, in declaration order."""
        return [n.name for n in self.nodes.values() if n.op == "output"]


def escape(token: str) -> str:
    """A JSON pointer token for ``token`` (``~`` and ``/`` escaped)."""
    return token.replace("~", "~0").replace("/", "~1")


def _parse_time(value: Any, pointer: str, problems: list[Problem]) -> TimeSpec:
    """A time domain: ``"u64"``, or products nested at most :data:`MAX_TIME_DEPTH` deep.

    A loop, not a recursion, so that a domain nested beyond the interpreter's recursion limit
    is a problem, not a RecursionError.
    """
    depth = 0
    while value != "u64":
        product = (
            value.get("product") if isinstance(value, dict) and set(value) == {"product"} else None
        )
        if not (isinstance(product, list) and len(product) == 2 and product[1] == "u64"):
            problems.append(Problem(pointer, TIME_MESSAGE))
            return TimeSpec(0)
        if depth == MAX_TIME_DEPTH:
            message = f"at most {MAX_TIME_DEPTH} products may nest in a time domain"
            problems.append(Problem(pointer, message))
            return TimeSpec(0)
        depth += 1
        value = product[0]
        pointer = f"{pointer}/product/0"
    return TimeSpec(depth)


def _parse_port(value: Any, pointer: str, problems: list[Problem]) -> PortRef | None:
    if not isinstance(value, str):
        problems.append(Problem(pointer, 'a port is a string "node" or "node:port"'))
        return None
    name, _, port = value.rpartition(":") if ":" in value else (value, "", "0")
    if not _NAME.fullmatch(name) or not (port.isascii() and port.isdigit()) or len(port) > 4:
        problems.append(Problem(pointer, f'"{value}" is not a port ("node" or "node:port")'))
        return None
    return PortRef(name, int(port))


def parse_graph(document: Any) -> GraphSpec:
    """Check a graph's shape and return it; :class:`GraphError` lists every problem.

    >>> spec = parse_graph({"nodes": {"in": {"op": "input"}, "out": {"op": "output"}},
    ...                     "edges": [["in", "out"]]})
    >>> spec.inputs(), spec.edges[0].target
    (['in'], PortRef(node='out', port=0))
    """
    problems: list[Problem] = []
    if not isinstance(document, dict):
        raise GraphError([Problem("", "a graph must be a JSON object")])
    known = {"time", "scopes", "nodes", "edges", "name", "description"}
    problems.extend(
        Problem(f"/{escape(str(key))}", f"unknown field {key!r}")
        for key in document
        if not isinstance(key, str) or key not in known
    )
    time = _parse_time(document.get("time", "u64"), "/time", problems)
    scopes = _parse_scopes(document.get("scopes", {}), problems)
    nodes = _parse_nodes(document.get("nodes"), scopes, problems)
    edges = _parse_edges(document.get("edges", []), problems)
    if problems:
        raise GraphError(problems)
    return GraphSpec(time, nodes, edges, scopes, document)


def _parse_scopes(raw: Any, problems: list[Problem]) -> dict[str, ScopeSpec]:
    if not isinstance(raw, dict):
        problems.append(Problem("/scopes", "scopes must be an object of named scopes"))
        raw = {}
    if len(raw) > MAX_SCOPES:
        problems.append(Problem("/scopes", f"at most {MAX_SCOPES} scopes are allowed"))
        return {}
    scopes: dict[str, ScopeSpec] = {}
    for name, scope in raw.items():
        parsed = _parse_scope(name, scope, problems)
        if parsed is not None:
            scopes[name] = parsed
    for scope in scopes.values():
        _check_parent(scope, scopes, problems)
    return scopes


def _parse_scope(name: Any, scope: Any, problems: list[Problem]) -> ScopeSpec | None:
    pointer = f"/scopes/{escape(str(name))}"
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        problems.append(Problem(pointer, f"{name!r} is not a valid name"))
        return None
    if not isinstance(scope, dict):
        problems.append(Problem(pointer, "a scope must be an object"))
        return None
    extra = {str(k) for k in scope} - {"kind", "parent"}
    problems.extend(
        Problem(f"{pointer}/{escape(key)}", f"unknown field {key!r}") for key in sorted(extra)
    )
    kind = scope.get("kind", "iterative")
    if kind not in ("iterative", "region"):
        problems.append(Problem(f"{pointer}/kind", 'kind must be "iterative" or "region"'))
    parent = scope.get("parent")
    if parent is not None and not isinstance(parent, str):
        problems.append(Problem(f"{pointer}/parent", "parent must be a scope name"))
        parent = None
    return ScopeSpec(name, kind, parent, pointer)


def _check_parent(scope: ScopeSpec, scopes: dict[str, ScopeSpec], problems: list[Problem]) -> None:
    """The scope's parent exists, and following parents never comes back to it.

    The scope is at most :data:`MAX_SCOPE_DEPTH` deep, which also bounds the walk: a chain of
    thousands of scopes costs each of them :data:`MAX_SCOPE_DEPTH` steps, not the chain.
    """
    if scope.parent is not None and scope.parent not in scopes:
        problems.append(Problem(f"{scope.pointer}/parent", f"no scope {scope.parent!r}"))
    seen = {scope.name}
    parent = scope.parent
    while parent is not None and parent in scopes:
        if parent in seen:
            problems.append(Problem(f"{scope.pointer}/parent", "scopes nest in a circle"))
            break
        if len(seen) == MAX_SCOPE_DEPTH:
            message = f"at most {MAX_SCOPE_DEPTH} scopes may nest in one another"
            problems.append(Problem(f"{scope.pointer}/parent", message))
            break
        seen.add(parent)
        parent = scopes[parent].parent


def _parse_nodes(
    raw: Any, scopes: dict[str, ScopeSpec], problems: list[Problem]
) -> dict[str, NodeSpec]:
    if not isinstance(raw, dict) or not raw:
        problems.append(Problem("/nodes", "nodes must be a non-empty object of named nodes"))
        raw = {}
    if len(raw) > MAX_NODES:
        problems.append(Problem("/nodes", f"at most {MAX_NODES} nodes are allowed"))
        return {}
    nodes: dict[str, NodeSpec] = {}
    for name, node in raw.items():
        parsed = _parse_node(name, node, scopes, problems)
        if parsed is not None:
            nodes[name] = parsed
    return nodes


def _parse_node(
    name: Any, node: Any, scopes: dict[str, ScopeSpec], problems: list[Problem]
) -> NodeSpec | None:
    pointer = f"/nodes/{escape(str(name))}"
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        problems.append(Problem(pointer, f"{name!r} is not a valid name"))
        return None
    if not isinstance(node, dict):
        problems.append(Problem(pointer, "a node must be an object with an op"))
        return None
    op = node.get("op")
    if not isinstance(op, str):
        problems.append(Problem(f"{pointer}/op", "op must be a string naming an operator"))
        return None
    scope = node.get("scope")
    if scope is not None and (not isinstance(scope, str) or scope not in scopes):
        problems.append(Problem(f"{pointer}/scope", f"no scope {scope!r}"))
        scope = None
    problems.extend(
        Problem(f"{pointer}/{escape(str(k))}", f"unknown field {k!r}")
        for k in node
        if not isinstance(k, str)
    )
    params = {k: v for k, v in node.items() if isinstance(k, str) and k not in ("op", "scope")}
    schema = None
    if op == "input" and "schema" in params:
        found: list[tuple[str, str]] = []
        schema = parse_schema(params["schema"], f"{pointer}/schema", found)
        problems.extend(Problem(at, message) for at, message in found)
    return NodeSpec(name, op, params, scope, pointer, schema=schema)


def _parse_edges(raw: Any, problems: list[Problem]) -> list[EdgeSpec]:
    if not isinstance(raw, list):
        problems.append(Problem("/edges", "edges must be a list"))
        raw = []
    if len(raw) > MAX_EDGES:
        problems.append(Problem("/edges", f"at most {MAX_EDGES} edges are allowed"))
        return []
    edges: list[EdgeSpec] = []
    for index, edge in enumerate(raw):
        parsed = _parse_edge(f"/edges/{index}", edge, problems)
        if parsed is not None:
            edges.append(parsed)
    return edges


def _parse_edge(pointer: str, edge: Any, problems: list[Problem]) -> EdgeSpec | None:
    if isinstance(edge, dict) and set(edge) == {"from", "to"}:
        pair = [edge["from"], edge["to"]]
        ends = (f"{pointer}/from", f"{pointer}/to")
    elif isinstance(edge, list) and len(edge) == 2:
        pair = edge
        ends = (f"{pointer}/0", f"{pointer}/1")
    else:
        problems.append(
            Problem(pointer, 'an edge is ["from:port", "to:port"] or {"from": .., "to": ..}')
        )
        return None
    source = _parse_port(pair[0], ends[0], problems)
    target = _parse_port(pair[1], ends[1], problems)
    if source is None or target is None:
        return None
    return EdgeSpec(source, target, pointer, ends[0], ends[1])
