"""Operators that hold state per time until it is complete: counts, folds, joins.

``count`` and ``accumulate`` give one record per time across all workers; ``count_by`` and
``aggregate`` one per key; ``join`` pairs the records of two inputs with equal keys.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from operators.graph.node import DROPPED, NodeBuilder, kept
from operators.graph.registry import ON_ERROR, OpKind, Param, builtin
from operators.stream import Stream


def _json_key(key: Any) -> Any:
    """A key in its JSON form: tuples (the hashable form of lists) back to lists."""
    return [_json_key(k) for k in key] if isinstance(key, tuple) else key


def _count(node: NodeBuilder) -> list[Stream]:
    # Count on each worker, then add the per-worker counts up on one: only the counts cross
    # workers, not the records.
    return [node.inputs[0].count().exchange(lambda _n: 0).accumulate(int, _add_all)]


def _add_all(total: int, counts: list[int]) -> int:
    return total + sum(counts)


builtin(OpKind("count", 1, 1, build=_count))


def _count_by(node: NodeBuilder) -> list[Stream]:
    keys = node.inputs[0].evaluate(node.batched("key", "key"))
    return [keys.count_by().map_batches(_key_counts)]


def _key_counts(pairs: list[tuple[Any, int]]) -> list[dict[str, Any]]:
    """count_by's records: ``{"key", "count"}``, with keys back in their JSON form.

    There is no call for a key that is not a tuple, i.e. for nearly every one.
    """
    return [{"key": _json_key(k) if type(k) is tuple else k, "count": n} for k, n in pairs]


builtin(
    OpKind(
        "count_by",
        1,
        1,
        {"key": Param("expr", batch=("key",)), "on_error": ON_ERROR},
        build=_count_by,
    )
)


def _accumulate(node: NodeBuilder) -> list[Stream]:
    # A failing init has no record to drop: it always fails the dataflow.
    init = node.fn("init", policy="fail")
    fold = node.fn("fold")
    return [
        node.inputs[0]
        .exchange(lambda _r: 0)
        .accumulate(init, lambda acc, records: _fold_all(fold, acc, records))
    ]


def _fold_all(fold: Callable[[Any, Any], Any], acc: Any, records: list[Any]) -> Any:
    for record in records:
        result = fold(acc, record)
        if result is not DROPPED:
            acc = result
    return acc


_FOLD = {"init": Param("expr", variables=()), "fold": Param("expr", variables=("acc", "r"))}
builtin(OpKind("accumulate", 1, 1, {**_FOLD, "on_error": ON_ERROR}, build=_accumulate))


def _aggregate(node: NodeBuilder) -> list[Stream]:
    fold = node.fn("fold")
    init = node.fn("init", policy="fail")
    emit = node.fn("emit") if "emit" in node.expressions else _key_value
    keyed = node.inputs[0].evaluate(node.batched("key", "pairs"))
    aggregated = keyed.aggregate(
        itemgetter(0),
        lambda acc, pair: _keep_acc(acc, fold(acc, pair[1])),
        lambda k, acc: emit(_json_key(k), acc),
        init,
    )
    return [aggregated.filter(kept)]


def _key_value(key: Any, acc: Any) -> dict[str, Any]:
    return {"key": _json_key(key), "value": acc}


def _keep_acc(old: Any, new: Any) -> Any:
    return old if new is DROPPED else new


builtin(
    OpKind(
        "aggregate",
        1,
        1,
        {
            "key": Param("expr", batch=("pairs",)),
            **_FOLD,
            "emit": Param("expr", required=False, variables=("key", "acc")),
            "on_error": ON_ERROR,
        },
        build=_aggregate,
    )
)


def _join(node: NodeBuilder) -> list[Stream]:
    left = node.inputs[0].evaluate(node.batched("key_left", "pairs"))
    right = node.inputs[1].evaluate(node.batched("key_right", "pairs"))
    joined = left.join(right, itemgetter(0), itemgetter(0))
    return [joined.map(lambda lr: {"left": lr[0][1], "right": lr[1][1]})]


builtin(
    OpKind(
        "join",
        2,
        1,
        {
            "key_left": Param("expr", batch=("pairs",)),
            "key_right": Param("expr", batch=("pairs",)),
            "on_error": ON_ERROR,
        },
        build=_join,
    )
)
