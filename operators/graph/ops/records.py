"""Operators that work record by record: transform, filter, route, re-key.

``map``, ``flat_map`` and ``filter`` run their expression as one comprehension per batch
(consecutive ones as one operator: :data:`BATCH_FORMS`, :mod:`operators.graph.fusion`);
``exchange`` (and its other name ``key_by``) moves records to the worker their key hashes to;
``partition`` and ``branch`` send each record to the output port its expression names.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from operator import itemgetter
from typing import Any

from operators.graph.cel import EvaluationError
from operators.graph.node import NodeBuilder, RecordErrors, as_bool
from operators.graph.registry import ON_ERROR, OpKind, Param, builtin
from operators.stream import Stream


def map_batch(node: NodeBuilder) -> Callable[[list[Any]], list[Any]]:
    """A ``map`` node as a function of a batch, under its error policy."""
    return node.batched("expr", "map")


def _map(node: NodeBuilder) -> list[Stream]:
    return [node.inputs[0].evaluate(map_batch(node))]


builtin(
    OpKind("map", 1, 1, {"expr": Param("expr", batch=("map",)), "on_error": ON_ERROR}, build=_map)
)


def flat_map_batch(node: NodeBuilder) -> Callable[[list[Any]], list[Any]]:
    """A ``flat_map`` node as a function of a batch, under its error policy."""
    values = node.batched("expr", "map")
    name, policy, errors = node.name, node.policy, node.errors
    return lambda rs: _flatten(values(rs), name, policy, errors)


def _flat_map(node: NodeBuilder) -> list[Stream]:
    return [node.inputs[0].evaluate(flat_map_batch(node))]


def _flatten(values: list[Any], node: str, policy: str, errors: RecordErrors) -> list[Any]:
    """flat_map's records: the lists in ``values`` concatenated; other values fail."""
    if all(type(v) is list for v in values):
        return list(chain.from_iterable(values))
    out: list[Any] = []
    for value in values:
        try:
            out.extend(_as_list(value))
        except EvaluationError as error:
            if policy == "fail":
                raise EvaluationError(f"node {node!r}: {error}") from None
            errors.record(node, error)
    return out


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise EvaluationError(f"flat_map needs a list, not {type(value).__name__}")
    return value


builtin(
    OpKind(
        "flat_map",
        1,
        1,
        {"expr": Param("expr", batch=("map",)), "on_error": ON_ERROR},
        build=_flat_map,
    )
)


def filter_batch(node: NodeBuilder) -> Callable[[list[Any]], list[Any]]:
    """A ``filter`` node as a function of a batch, under its error policy."""
    return node.batched("expr", "filter")


def _filter(node: NodeBuilder) -> list[Stream]:
    return [node.inputs[0].evaluate(filter_batch(node))]


builtin(
    OpKind(
        "filter",
        1,
        1,
        {"expr": Param("expr", result=("bool", "dyn"), batch=("filter",)), "on_error": ON_ERROR},
        build=_filter,
    )
)

BATCH_FORMS: dict[str, Callable[[NodeBuilder], Callable[[list[Any]], list[Any]]]] = {
    "map": map_batch,
    "filter": filter_batch,
    "flat_map": flat_map_batch,
}
"""The operators whose nodes are a function of each batch, record by record, by op: what
the compiler fuses when they follow one another (:mod:`operators.graph.fusion`)."""


def _exchange(node: NodeBuilder) -> list[Stream]:
    # The key is computed once per record, in a batch, and travels with it.
    keyed = node.inputs[0].evaluate(node.batched("key", "pairs"))
    return [keyed.exchange(itemgetter(0)).map_batches(_seconds)]


def _seconds(pairs: list[tuple[Any, Any]]) -> list[Any]:
    return [pair[1] for pair in pairs]


_KEY = {"key": Param("expr", batch=("pairs",)), "on_error": ON_ERROR}
builtin(OpKind("exchange", 1, 1, _KEY, build=_exchange))
builtin(OpKind("key_by", 1, 1, _KEY, build=_exchange))


def _partition(node: NodeBuilder) -> list[Stream]:
    parts = int(node.params["parts"])
    keyed = node.keyed("expr", lambda v: _part(v, parts))
    return keyed.partition(parts, lambda pair: (pair[0], pair[1]))


def _part(value: Any, parts: int) -> int:
    if type(value) is not int or not 0 <= value < parts:
        raise EvaluationError(f"partition expression gave {value!r}, not an int in [0, {parts})")
    return value


builtin(
    OpKind(
        "partition",
        1,
        "parts",
        {
            "parts": Param("int", minimum=1, maximum=1024),
            "expr": Param("expr", result=("int", "dyn")),
            "on_error": ON_ERROR,
        },
        build=_partition,
    )
)


def _branch(node: NodeBuilder) -> list[Stream]:
    keyed = node.keyed("expr", lambda v: as_bool(v, "branch"))
    false, true = keyed.branch(itemgetter(0))
    return [false.map(itemgetter(1)), true.map(itemgetter(1))]


builtin(
    OpKind(
        "branch",
        1,
        2,
        {"expr": Param("expr", result=("bool", "dyn")), "on_error": ON_ERROR},
        build=_branch,
    )
)
