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
operators, parameters, ports, cycles, expressions) is checked by the compiler.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from service.runtime import INTEGERS, TimeDomain

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
MAX_NODES = 1000
"""The most nodes a graph may have."""


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
        """The JSON form."""
        if self.depth == 0:
            return "u64"
        return {"product": [TimeSpec(self.depth - 1).describe(), "u64"]}

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
    if value == "u64":
        return TimeSpec(0)
    if isinstance(value, dict) and set(value) == {"product"}:
        parts = value["product"]
        if isinstance(parts, list) and len(parts) == 2 and parts[1] == "u64":
            inner = _parse_time(parts[0], f"{pointer}/product/0", problems)
            return TimeSpec(inner.depth + 1)
    problems.append(
        Problem(
            pointer,
            'the time domain must be "u64" or {"product": [<time domain>, "u64"]}',
        )
    )
    return TimeSpec(0)


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
    """Check a graph's shape and return it; :class:`GraphError` lists every problem."""
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

    scopes: dict[str, ScopeSpec] = {}
    raw_scopes = document.get("scopes", {})
    if not isinstance(raw_scopes, dict):
        problems.append(Problem("/scopes", "scopes must be an object of named scopes"))
        raw_scopes = {}
    for name, scope in raw_scopes.items():
        pointer = f"/scopes/{escape(str(name))}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(Problem(pointer, f"{name!r} is not a valid name"))
            continue
        if not isinstance(scope, dict):
            problems.append(Problem(pointer, "a scope must be an object"))
            continue
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
        scopes[name] = ScopeSpec(name, kind, parent, pointer)
    for scope in scopes.values():
        if scope.parent is not None and scope.parent not in scopes:
            problems.append(Problem(f"{scope.pointer}/parent", f"no scope {scope.parent!r}"))
        seen = {scope.name}
        parent = scope.parent
        while parent is not None and parent in scopes:
            if parent in seen:
                problems.append(Problem(f"{scope.pointer}/parent", "scopes nest in a circle"))
                break
            seen.add(parent)
            parent = scopes[parent].parent

    nodes: dict[str, NodeSpec] = {}
    raw_nodes = document.get("nodes")
    if not isinstance(raw_nodes, dict) or not raw_nodes:
        problems.append(Problem("/nodes", "nodes must be a non-empty object of named nodes"))
        raw_nodes = {}
    if len(raw_nodes) > MAX_NODES:
        problems.append(Problem("/nodes", f"at most {MAX_NODES} nodes are allowed"))
    for name, node in raw_nodes.items():
        pointer = f"/nodes/{escape(str(name))}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(Problem(pointer, f"{name!r} is not a valid name"))
            continue
        if not isinstance(node, dict):
            problems.append(Problem(pointer, "a node must be an object with an op"))
            continue
        op = node.get("op")
        if not isinstance(op, str):
            problems.append(Problem(f"{pointer}/op", "op must be a string naming an operator"))
            continue
        scope = node.get("scope")
        if scope is not None and (not isinstance(scope, str) or scope not in scopes):
            problems.append(Problem(f"{pointer}/scope", f"no scope {scope!r}"))
            scope = None
        bad_keys = [k for k in node if not isinstance(k, str)]
        problems.extend(
            Problem(f"{pointer}/{escape(str(k))}", f"unknown field {k!r}") for k in bad_keys
        )
        params = {k: v for k, v in node.items() if isinstance(k, str) and k not in ("op", "scope")}
        nodes[name] = NodeSpec(name, op, params, scope, pointer)

    edges: list[EdgeSpec] = []
    raw_edges = document.get("edges", [])
    if not isinstance(raw_edges, list):
        problems.append(Problem("/edges", "edges must be a list"))
        raw_edges = []
    for index, edge in enumerate(raw_edges):
        pointer = f"/edges/{index}"
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
            continue
        source = _parse_port(pair[0], ends[0], problems)
        target = _parse_port(pair[1], ends[1], problems)
        if source is not None and target is not None:
            edges.append(EdgeSpec(source, target, pointer, ends[0], ends[1]))
    if problems:
        raise GraphError(problems)
    return GraphSpec(time, nodes, edges, scopes)
