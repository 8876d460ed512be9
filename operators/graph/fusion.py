"""Fused nodes: consecutive ``map``, ``filter`` and ``flat_map`` nodes run as one operator.

A *chain* is a run of such nodes in one scope, each reading output 0 of the one before it and
being its only reader (no other node, output or loop reads the streams in between). It is
built as one operator (:func:`~operators.fused.build_chain`) whose logic calls, per batch,
each node's batch form in turn (its expression as one comprehension, under that node's own
``on_error`` policy): no channel, no scheduling and no progress accounting between them.

What the service shows of fused nodes stays each node's own: the operator has one output
port per node, so each node's records out and frontier are its own port's; a record whose
expression fails at a node is dropped and counted for that node (or fails the dataflow naming
it). The operator's input is the first node's, so records waiting to enter a chain are
named at its first node, and a route through the chain names that node only (see
``docs/graphs.md``). The plan says which nodes were fused (``"fused"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence, Set
from typing import Protocol

from operators.fused import BATCH, Stage, build_chain
from operators.graph.node import NodeBuilder
from operators.graph.ops.records import BATCH_FORMS
from operators.graph.spec import GraphSpec
from operators.progress import Source
from operators.stream import Stream

Inputs = dict[str, list[tuple[str, int]]]
"""Per node, per input port in order, the ``(node, output port)`` feeding it."""


def find_chains(
    spec: GraphSpec, inputs_of: Inputs, on_columns: Set[str] = frozenset()
) -> list[list[str]]:
    """The graph's chains of two or more nodes, each in order, by their first node's place.

    Nodes ``on_columns`` (run on columns, one pyarrow call per batch) are in no chain.

    >>> from operators.graph.spec import parse_graph
    >>> graph = parse_graph({
    ...     "nodes": {"in": {"op": "input"}, "a": {"op": "map", "expr": "r + 1"},
    ...               "b": {"op": "filter", "expr": "r > 2"}, "out": {"op": "output"}},
    ...     "edges": [["in", "a"], ["a", "b"], ["b", "out"]]})
    >>> find_chains(graph, {"in": [], "a": [("in", 0)], "b": [("a", 0)], "out": [("b", 0)]})
    [['a', 'b']]
    """
    readers = Counter(source for sources in inputs_of.values() for source in sources)
    follower: dict[str, str] = {}
    for name, node in spec.nodes.items():
        sources = inputs_of.get(name, [])
        if node.op not in BATCH_FORMS or len(sources) != 1 or name in on_columns:
            continue
        above, port = sources[0]
        fused = (
            spec.nodes[above].op in BATCH_FORMS
            and above not in on_columns
            and port == 0
            and readers[(above, 0)] == 1
            and spec.nodes[above].scope == node.scope
        )
        if fused:
            follower[above] = name
    followed = set(follower.values())
    chains = []
    for name in spec.nodes:
        if name in follower and name not in followed:
            chain = [name]
            while chain[-1] in follower:
                chain.append(follower[chain[-1]])
            chains.append(chain)
    return chains


class Built(Protocol):
    """Where a built graph keeps each node's streams (a :class:`~operators.graph.BuiltGraph`)."""

    streams: dict[str, list[Stream]]
    inputs: dict[str, list[Stream]]
    sources: dict[tuple[tuple[int, ...], Source], str]


def build_fused(nodes: Sequence[NodeBuilder], inputs: list[Stream], built: Built) -> None:
    """Build ``nodes`` (a chain, in order) as one operator reading ``inputs[0]``, into ``built``.

    Each node's stream is its own output port of the operator, which counts its records
    (``counted``); a slow batch is evaluated in slices (every node's batch form is a function
    of each record). The first node reads ``inputs``; each other node, the stream before it.
    """
    stages = [Stage(BATCH, BATCH_FORMS[node.op](node), node.name) for node in nodes]
    name = " -> ".join(node.name for node in nodes)
    taps = build_chain(inputs[0], stages, counted=True, sliceable=True, name=name)
    streams = inputs
    for node, tap in zip(nodes, taps, strict=True):
        if node is not nodes[0]:
            built.inputs[node.name] = streams
            built.sources.setdefault((tap.scope.builder.path, tap.source), f"{node.name}:0")
        built.streams[node.name] = streams = [tap]


__all__: Sequence[str] = ["Built", "build_fused", "find_chains"]
