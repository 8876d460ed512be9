"""Operators that move records in time: ``delay`` to a later time, ``feedback`` around a loop.

``feedback`` is the one loop operator (:attr:`~operators.graph.registry.OpKind.build_loop`):
its input comes from later in the graph, so it is built first and connected last.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from operators.graph.cel import EvaluationError
from operators.graph.node import DROPPED, NodeBuilder
from operators.graph.registry import ON_ERROR, Connect, OpKind, Param, builtin
from operators.progress import Product, check_time, decode_time, less_equal
from operators.stream import Stream


def _delay(node: NodeBuilder) -> list[Stream]:
    raw = node.expressions["expr"].fn
    later = node.guard(lambda r, t: _later(raw(r, t), t))
    return [node.inputs[0].delay(lambda r, t: None if (u := later(r, t)) is DROPPED else u)]


def _later(value: Any, time: Hashable) -> Hashable:
    """A delay expression's result as a time no earlier than ``time``, or an error."""
    try:
        later = decode_time(value) if isinstance(value, list) else value
        check_time(later)
    except (TypeError, ValueError):
        raise EvaluationError(f"delay needs a time, not {value!r}") from None
    if not less_equal(time, later):
        raise EvaluationError(f"cannot delay a record at {time!r} to the earlier {later!r}")
    return later


builtin(
    OpKind(
        "delay",
        1,
        1,
        {"expr": Param("expr", variables=("r", "t")), "on_error": ON_ERROR},
        spans_times=True,
        build=_delay,
    )
)


def _feedback(node: NodeBuilder) -> tuple[list[Stream], Connect]:
    summary = int(node.params.get("summary", 1))
    handle, stream = node.scope.feedback(_loop_summary(node.scope, summary))

    def connect(inputs: list[Stream]) -> None:
        handle.connect(inputs[0])

    return [stream], connect


def _loop_summary(scope: Any, summary: int) -> Hashable:
    """A loop's summary in an iterative scope: ``summary`` on the innermost coordinate."""
    outer = scope.identity.outer if isinstance(scope.identity, Product) else 0
    return Product(outer, summary)


builtin(
    OpKind(
        "feedback",
        1,
        1,
        {"summary": Param("int", required=False, minimum=1, maximum=2**32)},
        build_loop=_feedback,
    )
)
