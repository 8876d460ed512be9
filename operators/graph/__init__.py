"""Graph specifications and their compiler: declarative dataflows with CEL expressions.

Every node is built with the stream methods of the catalogue, which importing this package
loads.
"""

import operators.catalogue  # noqa: F401 - attaches the Stream methods the nodes are built with
from operators.graph.cel import EvaluationError, Expression, ExpressionError, compile_expression
from operators.graph.compiler import BuiltGraph, GraphContext, Plan, RecordErrors, compile_graph
from operators.graph.node import NodeBuilder
from operators.graph.registry import (
    CATALOGUE,
    OpKind,
    Param,
    describe_catalogue,
    register_operator,
)
from operators.graph.spec import GraphError, GraphSpec, Problem, TimeSpec, parse_graph

__all__ = [
    "CATALOGUE",
    "BuiltGraph",
    "EvaluationError",
    "Expression",
    "ExpressionError",
    "GraphContext",
    "GraphError",
    "GraphSpec",
    "NodeBuilder",
    "OpKind",
    "Param",
    "Plan",
    "Problem",
    "RecordErrors",
    "TimeSpec",
    "compile_expression",
    "compile_graph",
    "describe_catalogue",
    "parse_graph",
    "register_operator",
]
