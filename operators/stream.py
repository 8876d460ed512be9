"""Streams: the fluent, typed handle on an operator output within one scope.

Each method adds one operator (defined in its own module of this package) and returns the
stream(s) it produces.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from operators.progress import Source
from operators.runtime import Scope, Tee

if TYPE_CHECKING:
    from operators.capability import Capability
    from operators.capture.pushers import EventPusher
    from operators.core import OperatorCore
    from operators.generic import BinaryLogic, NotifyLogic, UnaryLogic
    from operators.probe import ProbeHandle


class Stream:
    """Records at times, leaving one output port of one operator in ``scope``."""

    __slots__ = ("scope", "source", "tee")

    def __init__(self, scope: Scope, source: Source, tee: Tee) -> None:
        self.scope = scope
        self.source = source
        self.tee = tee

    def map(self, fn: Callable[[Any], Any]) -> Stream:
        """Apply ``fn`` to every record."""
        from operators.map import map_stream

        return map_stream(self, fn)

    def map_batches(self, fn: Callable[[list[Any]], list[Any]]) -> Stream:
        """Replace every batch of records by ``fn(batch)`` (one call per batch)."""
        from operators.map import map_batches

        return map_batches(self, fn)

    def evaluate(self, fn: Callable[[list[Any]], list[Any]]) -> Stream:
        """Like :meth:`map_batches` for a function of each record: a slow one is sliced."""
        from operators.map import evaluate_batches

        return evaluate_batches(self, fn)

    def flat_map(self, fn: Callable[[Any], Any]) -> Stream:
        """Replace every record by the records of the iterable ``fn(record)``."""
        from operators.flat_map import flat_map

        return flat_map(self, fn)

    def filter(self, predicate: Callable[[Any], bool]) -> Stream:
        """Keep the records for which ``predicate`` is true."""
        from operators.filter import filter_stream

        return filter_stream(self, predicate)

    def inspect(self, fn: Callable[[Any], object]) -> Stream:
        """Call ``fn(record)`` on every record and pass the stream on unchanged."""
        from operators.inspect import inspect

        return inspect(self, fn)

    def inspect_batch(self, fn: Callable[[Hashable, list[Any]], object]) -> Stream:
        """Call ``fn(time, records)`` on every batch and pass the stream on unchanged."""
        from operators.inspect import inspect_batch

        return inspect_batch(self, fn)

    def exchange(self, key: Callable[[Any], object]) -> Stream:
        """Send every record to worker ``stable_hash(key(record)) % peers``."""
        from operators.exchange import exchange

        return exchange(self, key)

    def concat(self, *others: Stream) -> Stream:
        """This stream's records and those of ``others`` (same scope), as one stream."""
        from operators.concat import concat

        return concat([self, *others])

    def broadcast(self) -> Stream:
        """Every record to every worker."""
        from operators.broadcast import broadcast

        return broadcast(self)

    def partition(self, parts: int, fn: Callable[[Any], tuple[int, Any]]) -> list[Stream]:
        """Split into ``parts`` streams: ``fn(record)`` gives ``(part, value)``."""
        from operators.partition import partition

        return partition(self, parts, fn)

    def branch(self, predicate: Callable[[Any], bool]) -> tuple[Stream, Stream]:
        """Split by ``predicate``: ``(records where false, records where true)``."""
        from operators.branch import branch

        return branch(self, predicate)

    def ok_err(self, fn: Callable[[Any], Any]) -> tuple[Stream, Stream]:
        """Split by ``fn(record)``, an ``Ok(value)`` or an ``Err(error)``: ``(oks, errs)``."""
        from operators.ok_err import ok_err

        return ok_err(self, fn)

    def delay(self, fn: Callable[[Any, Hashable], Hashable | None]) -> Stream:
        """Move each record to the later time ``fn(record, time)``, sent once that is complete."""
        from operators.delay import delay

        return delay(self, fn)

    def join(
        self,
        other: Stream,
        key_left: Callable[[Any], Hashable],
        key_right: Callable[[Any], Hashable],
    ) -> Stream:
        """Pairs ``(left, right)`` with equal keys at the same time (an equijoin per time)."""
        from operators.join import join

        return join(self, other, key_left, key_right)

    def capture_into(self, pusher: EventPusher) -> None:
        """Record this stream's batches and frontier changes as events into ``pusher``."""
        from operators.capture.capture import capture_into

        capture_into(self, pusher)

    def probe(self) -> ProbeHandle:
        """Watch this stream's frontier: which times may still appear on it."""
        from operators.probe import probe

        return probe(self)

    def enter(self, scope: Scope) -> Stream:
        """Bring this stream into ``scope``, a scope nested directly in this one."""
        from operators.enter_leave import enter

        return enter(self, scope)

    def leave(self) -> Stream:
        """Take this stream out of its nested scope into the parent scope."""
        from operators.enter_leave import leave

        return leave(self)

    def connect_loop(self, handle: Any) -> None:
        """Feed this stream into the feedback ``handle`` made by ``scope.feedback``."""
        handle.connect(self)

    def count(self) -> Stream:
        """The number of records at each time, emitted once the time is complete."""
        from operators.accumulate import count

        return count(self)

    def count_by(self, key: Callable[[Any], Hashable] | None = None) -> Stream:
        """``(key, n)`` per key per time, emitted once the time is complete.

        With no ``key``, the records are the keys.
        """
        from operators.count_by import count_by

        return count_by(self, key)

    def accumulate(self, init: Callable[[], Any], fold: Callable[[Any, list[Any]], Any]) -> Stream:
        """Fold each time's batches into one value, emitted once the time is complete."""
        from operators.accumulate import accumulate

        return accumulate(self, init, fold)

    def aggregate(
        self,
        key: Callable[[Any], Hashable],
        fold: Callable[[Any, Any], Any],
        emit: Callable[[Hashable, Any], Any],
        init: Callable[[], Any] = lambda: None,
    ) -> Stream:
        """Fold records per key per time; emit ``emit(key, acc)`` once the time is complete."""
        from operators.aggregate import aggregate

        return aggregate(self, key, fold, emit, init)

    def unary(
        self,
        constructor: Callable[[Capability, OperatorCore], UnaryLogic],
        name: str = "Unary",
        exchange: Callable[[Any], object] | None = None,
    ) -> Stream:
        """A custom operator: ``constructor(capability, info)`` returns ``logic(input, output)``."""
        from operators.generic import unary

        return unary(self, constructor, name, exchange)

    def unary_frontier(
        self,
        constructor: Callable[[Capability, OperatorCore], UnaryLogic],
        name: str = "UnaryFrontier",
        exchange: Callable[[Any], object] | None = None,
    ) -> Stream:
        """Like :meth:`unary`, and also scheduled when the input frontier changes."""
        from operators.generic import unary_frontier

        return unary_frontier(self, constructor, name, exchange)

    def binary_frontier(
        self,
        other: Stream,
        constructor: Callable[[Capability, OperatorCore], BinaryLogic],
        name: str = "BinaryFrontier",
        exchange_left: Callable[[Any], object] | None = None,
        exchange_right: Callable[[Any], object] | None = None,
    ) -> Stream:
        """A custom two-input operator; ``logic(input1, input2, output)``."""
        from operators.generic import binary_frontier

        return binary_frontier(self, other, constructor, name, exchange_left, exchange_right)

    def unary_notify(
        self,
        logic: NotifyLogic,
        name: str = "UnaryNotify",
        exchange: Callable[[Any], object] | None = None,
        notify: Iterable[Hashable] = (),
    ) -> Stream:
        """A custom operator with a notificator: ``logic(input, output, notificator)``."""
        from operators.generic import unary_notify

        return unary_notify(self, logic, name, exchange, notify)

    def __repr__(self) -> str:
        return f"Stream({self.source!r})"
