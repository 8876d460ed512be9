"""Generic operators whose logic the user writes: ``unary`` and its relatives.

``unary_frontier`` and ``binary_frontier`` are also scheduled on frontier changes, and
``unary_notify`` comes with a notificator.

The constructor receives the operator's initial capability (at the scope's minimum; drop it
if unused) and returns the logic, called each time the operator is scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from operators.builder import OperatorBuilder
from operators.capability import Capability
from operators.core import BinaryLogic, NotifyLogic, OperatorCore, UnaryLogic
from operators.notificator import Notificator
from operators.runtime import Interest
from operators.stream import Stream, attach


@attach(Stream.unary)
def unary(
    stream: Stream,
    constructor: Callable[[Capability, OperatorCore], UnaryLogic],
    name: str = "Unary",
    exchange: Callable[[Any], object] | None = None,
) -> Stream:
    """One input, one output, user logic ``logic(input, output)``."""
    return _unary(stream, constructor, name, exchange, Interest.NEVER)


@attach(Stream.unary_frontier)
def unary_frontier(
    stream: Stream,
    constructor: Callable[[Capability, OperatorCore], UnaryLogic],
    name: str = "UnaryFrontier",
    exchange: Callable[[Any], object] | None = None,
) -> Stream:
    """Like :func:`unary`, also scheduled whenever ``input.frontier`` changes."""
    return _unary(stream, constructor, name, exchange, Interest.ALWAYS)


def _unary(
    stream: Stream,
    constructor: Callable[[Capability, OperatorCore], UnaryLogic],
    name: str,
    exchange: Callable[[Any], object] | None,
    interest: Interest,
) -> Stream:
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=exchange)
    output, result = builder.new_output()

    def build(capabilities: list[Capability]) -> Callable[[], object]:
        logic = constructor(capabilities[0], builder.core)
        return lambda: logic(input, output)

    builder.build(build, interest)
    return result


@attach(Stream.binary_frontier)
def binary_frontier(
    left: Stream,
    other: Stream,
    constructor: Callable[[Capability, OperatorCore], BinaryLogic],
    name: str = "BinaryFrontier",
    exchange_left: Callable[[Any], object] | None = None,
    exchange_right: Callable[[Any], object] | None = None,
) -> Stream:
    """Two inputs, one output, ``logic(input1, input2, output)``, frontier-aware."""
    builder = OperatorBuilder(left.scope, name)
    first = builder.new_input(left, exchange=exchange_left)
    second = builder.new_input(other, exchange=exchange_right)
    output, result = builder.new_output()

    def build(capabilities: list[Capability]) -> Callable[[], object]:
        logic = constructor(capabilities[0], builder.core)
        return lambda: logic(first, second, output)

    builder.build(build, Interest.ALWAYS)
    return result


@attach(Stream.unary_notify)
def unary_notify(
    stream: Stream,
    logic: NotifyLogic,
    name: str = "UnaryNotify",
    exchange: Callable[[Any], object] | None = None,
    notify: Iterable[Hashable] = (),
) -> Stream:
    """One input, one output, ``logic(input, output, notificator)``.

    ``notify`` lists times to be notified at from the start (each must be at least the
    scope's minimum).
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=exchange)
    output, result = builder.new_output()
    notificator = Notificator([input.frontier])

    def build(capabilities: list[Capability]) -> Callable[[], object]:
        initial = capabilities[0]
        for time in notify:
            notificator.notify_at(initial.delayed(time))
        initial.drop()
        return lambda: logic(input, output, notificator)

    builder.build(build, Interest.ALWAYS)
    return result
