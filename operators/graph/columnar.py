"""Which nodes of a graph run on columns, and the Arrow type of every stream.

A typed input (``"schema"``) sends its records as :class:`~operators.runtime.Columns` of its
struct type. From there the compiler follows the types through the graph, in build order: a
node whose inputs are typed and whose expressions compile to kernels on columns
(:func:`~operators.graph.cel.vector.compile_vector`) runs on columns, and its outputs' type
is known before any record arrives; every other node runs by rows, for a reason the plan
states (:class:`ByRows`), and its outputs are untyped. Nothing here runs a record: the
operators are built by :mod:`operators.graph.ops.columnar`.

What runs on columns, with a typed input:

* ``map``, ``filter``, ``flat_map`` (a list-typed expression): their expression on the
  batch;
* ``exchange`` / ``key_by``, ``count_by``, ``join``: a key of one scalar type (``int64``,
  ``uint64``, ``float64``, ``string``, ``bool``; a join's two keys of the same one);
* ``aggregate`` and ``accumulate`` whose fold is a sum: ``init`` the int ``0`` and ``fold``
  ``acc + E`` with ``E`` an int expression of the record (``acc + 1`` counts), summed
  exactly; an ``aggregate``'s ``emit``, if any, on columns too;
* ``count``, ``concat``, ``inspect`` and ``output``, which never look at a record (their
  batches pass as they are).

The rules for failures are the row path's, row for row: a record on which an expression
fails is dropped and counted at its node (the last message kept), or fails the dataflow
under ``"on_error": "fail"``, with the same message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from operators.graph.cel import EvaluationError, Expression
from operators.graph.spec import GraphSpec, NodeSpec

if TYPE_CHECKING:
    import pyarrow as pa

    from operators.graph.cel.vector import VectorExpression

Inputs = dict[str, list[tuple[str, int]]]
"""Per node, per input port in order, the ``(node, output port)`` feeding it."""


@dataclass(frozen=True, slots=True)
class OnColumns:
    """A node that runs on columns: its expressions' vector forms, by parameter."""

    vectors: Mapping[str, VectorExpression] = field(default_factory=dict)
    how: str = ""
    """What it computes on columns, for the plan (``"sum"`` of a fold, ...)."""


@dataclass(frozen=True, slots=True)
class ByRows:
    """A node that runs by rows, and why."""

    reason: str


Mode: TypeAlias = OnColumns | ByRows
"""How a node runs."""


@dataclass(slots=True)
class Typing:
    """The graph's columnar plan: how each node runs, and each stream's Arrow type."""

    modes: dict[str, Mode] = field(default_factory=dict)
    types: dict[tuple[str, int], pa.DataType] = field(default_factory=dict)
    """The Arrow type of the records on ``(node, output port)``, where known (typed)."""

    def columnar(self, name: str) -> OnColumns | None:
        """``name``'s columnar form, or ``None`` if it runs by rows."""
        mode = self.modes.get(name)
        return mode if isinstance(mode, OnColumns) else None

    def describe(self, name: str) -> dict[str, Any]:
        """How node ``name`` runs, as the plan shows it."""
        mode = self.modes.get(name, ByRows("not planned"))
        if isinstance(mode, ByRows):
            return {"runs": "rows", "why": mode.reason}
        described: dict[str, Any] = {"runs": "columns"}
        if mode.how:
            described["how"] = mode.how
        return described


SCALAR_KEYS = ("int64", "uint64", "double", "string", "bool")
"""The Arrow types (by ``str``) a key may have to be hashed, counted and joined on columns."""

FORWARDERS = frozenset({"inspect", "output", "count"})
"""Operators that pass a batch on (or count its length) without looking at a record."""

SAME_RECORDS = frozenset({"filter", "exchange", "key_by", "inspect"})
"""Operators whose records out are records in: run by rows, their output is still typed
(a later node on columns takes their lists as columns of that type, once per batch)."""


def plan_columns(
    spec: GraphSpec,
    order: Sequence[str],
    inputs_of: Inputs,
    expressions: Mapping[str, Mapping[str, Expression]],
    enabled: bool = True,
) -> Typing:
    """How each node of the graph runs, following the types from the typed inputs.

    ``order`` is the build order (every node after what feeds it, loop operators first: a
    loop's output is untyped, as its type would depend on what it feeds back). Not
    ``enabled``: every node runs by rows (typed inputs still send columns).
    """
    typing = Typing()
    if not enabled or not any(node.schema is not None for node in spec.nodes.values()):
        # No typed input: nothing is typed (and pyarrow is not needed).
        for name in order:
            untyped = _NO_SCHEMA if spec.nodes[name].op == "input" else _UNTYPED
            typing.modes[name] = ByRows(untyped if enabled else "columnar execution is off")
        return typing
    for name in order:
        node = spec.nodes[name]
        found = [typing.types.get(source) for source in inputs_of.get(name, [])]
        rule = _RULES.get(node.op)
        if node.op == "input":
            mode, types = _input(node)
        elif rule is None:
            mode, types = ByRows(f"{node.op} has no columnar form"), []
        elif not found or any(t is None for t in found):
            mode, types = ByRows(_UNTYPED), []
        else:
            mode, types = rule(node, found, expressions.get(name, {}))
        if isinstance(mode, ByRows) and node.op in SAME_RECORDS and found and found[0]:
            types = found[:1]  # by rows, but the records are the input's: still typed
        typing.modes[name] = mode
        for port, arrow in enumerate(types):
            if arrow is not None:
                typing.types[(name, port)] = arrow
    return typing


_UNTYPED = "its input is not typed (no schema reaches it)"
_NO_SCHEMA = "the input has no schema"

Rule = Callable[[NodeSpec, list[Any], Mapping[str, Expression]], tuple[Mode, list[Any]]]
"""A node, its inputs' Arrow types and its expressions -> its mode and outputs' types."""


def _input(node: NodeSpec) -> tuple[Mode, list[Any]]:
    if node.schema is None:
        return ByRows(_NO_SCHEMA), []
    return OnColumns(how="records as columns of its schema"), [node.schema.arrow_type()]


def _vector(expression: Expression, types: Mapping[str, Any]) -> VectorExpression | ByRows:
    from operators.graph.cel.vector import NotVectorized, compile_vector

    vector = compile_vector(expression, types)
    return ByRows(str(vector)) if isinstance(vector, NotVectorized) else vector


def _key(
    expressions: Mapping[str, Expression], param: str, record: Any
) -> VectorExpression | ByRows:
    """A key expression's vector form, if it gives one scalar type (hashed like the rows')."""
    vector = _vector(expressions[param], {"r": record})
    if isinstance(vector, ByRows):
        return vector
    if str(vector.type) not in SCALAR_KEYS:
        return ByRows(f"the key {param!r} gives {vector.type}, not a scalar")
    return vector


def _map(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    vector = _vector(expressions["expr"], {"r": found[0]})
    if isinstance(vector, ByRows):
        return vector, []
    return OnColumns({"expr": vector}), [vector.type]


def _filter(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    vector = _vector(expressions["expr"], {"r": found[0]})
    if isinstance(vector, ByRows):
        return vector, []
    return OnColumns({"expr": vector}), [found[0]]


def _flat_map(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    import pyarrow as pa

    vector = _vector(expressions["expr"], {"r": found[0]})
    if isinstance(vector, ByRows):
        return vector, []
    if not pa.types.is_list(vector.type):
        return ByRows(f"the expression gives {vector.type}, not a list"), []
    return OnColumns({"expr": vector}), [vector.type.value_type]


def _exchange(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    vector = _key(expressions, "key", found[0])
    if isinstance(vector, ByRows):
        return vector, []
    return OnColumns({"key": vector}), [found[0]]


def _count_by(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    import pyarrow as pa

    vector = _key(expressions, "key", found[0])
    if isinstance(vector, ByRows):
        return vector, []
    return OnColumns({"key": vector}), [pa.struct([("key", vector.type), ("count", pa.int64())])]


def _join(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    import pyarrow as pa

    left = _key(expressions, "key_left", found[0])
    if isinstance(left, ByRows):
        return left, []
    right = _key(expressions, "key_right", found[1])
    if isinstance(right, ByRows):
        return right, []
    if left.type != right.type:
        return ByRows(f"the keys are of two types ({left.type} and {right.type})"), []
    pair = pa.struct([("left", found[0]), ("right", found[1])])
    return OnColumns({"key_left": left, "key_right": right}), [pair]


def _sum_fold(
    expressions: Mapping[str, Expression], record: Any
) -> tuple[VectorExpression | ByRows, Any]:
    """A fold that sums an int of each record from ``0``: what it adds, on columns."""
    import pyarrow as pa

    from operators.graph.cel.vector import NotVectorized, compile_added

    init = expressions["init"]
    try:
        start = init.fn()
    except EvaluationError:  # it fails the dataflow when built, by rows
        start = None
    if type(start) is not int or start != 0:
        return ByRows("the fold does not start from the int 0 (init), so it is not a sum"), None
    added = compile_added(expressions["fold"], {"acc": pa.int64(), "r": record})
    if isinstance(added, NotVectorized):
        return ByRows(str(added)), None
    if added.type != pa.int64():
        return ByRows(f"the fold adds {added.type}, not an int (only int sums are exact)"), None
    return added, pa.int64()


def _accumulate(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    added, total = _sum_fold(expressions, found[0])
    if isinstance(added, ByRows):
        return added, []
    return OnColumns({"fold": added}, how="sum"), [total]


def _aggregate(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    import pyarrow as pa

    key = _key(expressions, "key", found[0])
    if isinstance(key, ByRows):
        return key, []
    added, total = _sum_fold(expressions, found[0])
    if isinstance(added, ByRows):
        return added, []
    vectors = {"key": key, "fold": added}
    out = pa.struct([("key", key.type), ("value", total)])
    if "emit" in expressions:
        emit = _vector(expressions["emit"], {"key": key.type, "acc": total})
        if isinstance(emit, ByRows):
            return emit, []
        vectors["emit"] = emit
        out = emit.type
    return OnColumns(vectors, how="sum"), [out]


def _concat(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    if any(t != found[0] for t in found[1:]):
        return ByRows("its inputs are of different types"), []
    return OnColumns(), [found[0]]


def _forward(node: NodeSpec, found: list[Any], expressions: Mapping[str, Expression]) -> Any:
    if node.op == "count":
        return OnColumns(how="counts batch lengths"), []
    if node.op == "output":
        return OnColumns(), []
    return OnColumns(), list(found[:1])


_RULES: dict[str, Rule] = {
    "map": _map,
    "filter": _filter,
    "flat_map": _flat_map,
    "exchange": _exchange,
    "key_by": _exchange,
    "count_by": _count_by,
    "join": _join,
    "accumulate": _accumulate,
    "aggregate": _aggregate,
    "concat": _concat,
    **{op: _forward for op in FORWARDERS},
}
"""The operators with a columnar form, by op."""


__all__: Sequence[str] = ["ByRows", "Mode", "OnColumns", "Typing", "plan_columns"]
