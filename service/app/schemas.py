"""Which records of a dataflow are typed: the schemas of its outputs.

An input with a schema (:mod:`operators.graph.schema`) sends its records as Arrow columns
of that struct type, and the compiler follows the types through the graph
(:mod:`operators.graph.columnar`): an output fed by a stream of a known struct type keeps
its records so, and Arrow readers get them as typed columns.
"""

from __future__ import annotations

from operators.graph import Plan
from operators.graph.schema import Schema, schema_of


def output_schema(plan: Plan, name: str) -> Schema | None:
    """The schema of output ``name``'s records (``None``: untyped).

    An output is typed when the stream feeding it is of a struct type the schema language
    can say: a typed input's, or what the nodes in between make of it, as the plan knows.
    """
    sources = plan.inputs_of.get(name, [])
    arrow = plan.typing.types.get(sources[0]) if len(sources) == 1 else None
    return None if arrow is None else schema_of(arrow)
