"""The built-in operators, one module per family; importing this package registers them.

Each operator is one entry in its family's module: a builder function and the
:class:`~operators.graph.registry.OpKind` registered right below it, with its ports and
parameters. Adding an operator is adding such an entry (and its test); a new family is a new
module, imported here.
"""

from operators.graph.ops import records, sources, state, times

__all__ = ["records", "sources", "state", "times"]
