"""Where records enter and leave a graph, and operators that only route them.

``input`` and ``output`` attach to the :class:`~operators.graph.node.GraphContext`
(producers and subscribers); ``inspect`` passes records through as a named point to watch;
``concat`` merges any number of streams.
"""

from __future__ import annotations

from operators.graph.node import NodeBuilder
from operators.graph.registry import OpKind, Param, builtin
from operators.stream import Stream


def _input(node: NodeBuilder) -> list[Stream]:
    return [node.context.input(node.name, node.scope)]


# ``schema`` (operators.graph.schema) is read with the graph's shape (spec.py), so its
# problems come with their pointers before the compiler runs.
builtin(
    OpKind("input", 0, 1, {"schema": Param("json", required=False)}, build=_input, in_root=True)
)


def _output(node: NodeBuilder) -> list[Stream]:
    node.context.output(node.name, node.inputs[0])
    return []


builtin(OpKind("output", 1, 0, build=_output, in_root=True))


def _inspect(node: NodeBuilder) -> list[Stream]:
    # A real operator (not the input stream itself), so the node has its own frontier and
    # record count to show.
    return [node.inputs[0].inspect_batch(lambda _t, _r: None)]


builtin(OpKind("inspect", 1, 1, build=_inspect))


def _concat(node: NodeBuilder) -> list[Stream]:
    first, *others = node.inputs
    return [first.concat(*others)] if others else [first]


builtin(OpKind("concat", None, 1, build=_concat))
