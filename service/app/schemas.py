"""Which records of a dataflow are typed: the schemas of its outputs.

An input with a schema (:mod:`operators.graph.schema`) sends its records as Arrow columns
of that struct type; an output they reach unchanged keeps them so, and Arrow readers get
them as typed columns.
"""

from __future__ import annotations

from operators.graph import GraphSpec
from operators.graph.schema import Schema

FORWARDING = frozenset({"inspect", "concat", "exchange"})
"""Operators that pass their input's records on unchanged: a typed input's records stay of
its type through them."""


def output_schema(spec: GraphSpec, name: str) -> Schema | None:
    """The schema of output ``name``'s records (``None``: untyped, or not known here).

    An output is typed when typed inputs of one schema feed it through operators that
    forward. Until the compiler says what type each operator makes, only these outputs are typed.
    """
    feeding: dict[str, list[str]] = {}
    for edge in spec.edges:
        feeding.setdefault(edge.target.node, []).append(edge.source.node)
    schemas: set[Schema] = set()
    seen: set[str] = set()
    pending = list(feeding.get(name, ()))
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        found = spec.nodes.get(node)
        if found is None:
            return None
        if found.op == "input" and found.schema is not None:
            schemas.add(found.schema)
        elif found.op in FORWARDING:
            pending.extend(feeding.get(node, ()))
        else:
            return None
    return schemas.pop() if len(schemas) == 1 else None
