"""Channels: how batches of records move from an output port to the input ports it feeds.

A message is ``(time, batch)`` with ``batch`` a non-empty container
(:mod:`operators.runtime.containers`): a list, or records as columns. An output port owns a
:class:`Tee` of pushers, one per edge leaving it. A :class:`PipelinePusher` hands the batch
to the consumer on the same worker; an :class:`ExchangePusher` splits it by a stable hash of a
key so each record goes to worker ``hash(key) % peers``. Counting is done by the output
port, once per batch, in records, so no pusher counts; a pusher must therefore deliver
every record exactly once, and never an empty batch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

from operators.runtime.containers import Batch, rows_of
from operators.runtime.fabric import Mailbox
from operators.runtime.routing import MASK, ColumnKey, route_columns, stable_hash

__all__ = [
    "ExchangePusher",
    "Message",
    "PipelinePusher",
    "Pusher",
    "RetimingPusher",
    "Tee",
    "route",
    "stable_hash",
]

Message = tuple[Hashable, Batch]
"""A batch of records at one time."""


class Pusher(Protocol):
    """Something that accepts batches of records at a time."""

    def push(self, time: Hashable, records: Batch) -> None:
        """Deliver ``records`` (non-empty) at ``time``."""
        ...


class Tee:
    """The pushers of every edge leaving one output port, on one worker.

    Every pusher gets the same list object: consumers must not mutate a batch they did not
    create (operators build new lists), which spares a copy per extra edge.
    """

    __slots__ = ("pushers",)

    def __init__(self) -> None:
        self.pushers: list[Pusher] = []

    def push(self, time: Hashable, records: Batch) -> None:
        """Give ``records`` to every edge."""
        for pusher in self.pushers:
            pusher.push(time, records)


class PipelinePusher:
    """An edge within one worker: the batch goes straight into the consumer's mailbox."""

    __slots__ = ("_mailbox",)

    def __init__(self, mailbox: Mailbox[Message]) -> None:
        self._mailbox = mailbox

    def push(self, time: Hashable, records: Batch) -> None:
        """Append the batch to the consumer's queue and wake it."""
        self._mailbox.push((time, records))


def route(records: list[Any], key: Callable[[Any], object], peers: int) -> list[list[Any]]:
    """``records`` split into ``peers`` parts: record ``r`` in part ``stable_hash(key(r)) % peers``.

    An int key in ``[0, 2**64)`` is its own hash, taken inline; any other key is hashed once
    per distinct key in the batch (keys repeat: words, user ids), not once per record.

    >>> route([3, 4, 5, 6], lambda r: r, 2)
    [[4, 6], [3, 5]]
    """
    parts: list[list[Any]] = [[] for _ in range(peers)]
    hashed: dict[Any, int] = {}
    for record in records:
        k = key(record)
        if type(k) is int and 0 <= k <= MASK:
            parts[k % peers].append(record)
            continue
        try:
            part = hashed.get(k)
        except TypeError:  # unhashable: stable_hash says which type is the problem
            part = stable_hash(k)
        if part is None:
            part = hashed[k] = stable_hash(k) % peers
        parts[part].append(record)
    return parts


class ExchangePusher:
    """An edge across workers: each record goes to worker ``stable_hash(key(r)) % peers``.

    With ``columns`` (:data:`~operators.runtime.routing.ColumnKey`: the same key, as columns),
    a :class:`~operators.runtime.containers.Columns` batch is split by vectorized kernels
    into :class:`Columns` parts, each record to the worker its row would go to by ``key``
    (:func:`~operators.runtime.routing.route_columns`); without it, such a batch is routed
    by its rows (correct, slow) and arrives as lists.
    """

    __slots__ = ("_columns", "_key", "_mailboxes", "_peers")

    def __init__(
        self,
        mailboxes: list[Mailbox[Message]],
        key: Callable[[Any], object],
        columns: ColumnKey | None = None,
    ) -> None:
        self._mailboxes = mailboxes
        self._peers = len(mailboxes)
        self._key = key
        self._columns = columns

    def push(self, time: Hashable, records: Batch) -> None:
        """Split the batch by destination and push each non-empty part."""
        peers = self._peers
        if peers == 1:
            self._mailboxes[0].push((time, records))
            return
        parts: list[Any]
        if isinstance(records, list):
            parts = route(records, self._key, peers)
        elif self._columns is not None:
            parts = route_columns(records, self._columns, peers)
        else:
            parts = route(rows_of(records), self._key, peers)
        for mailbox, part in zip(self._mailboxes, parts, strict=True):
            if part:
                mailbox.push((time, part))


class RetimingPusher:
    """Crosses a scope boundary: converts each batch's time, then pushes to a tee.

    ``count`` is told ``(time, n)`` in the new scope's times: a scope counts the records that
    enter it at its inputs (to report them consumed) and nothing at its outputs (inner
    producers count those).
    """

    __slots__ = ("_convert", "_count", "_tee")

    def __init__(
        self,
        convert: Callable[[Hashable], Hashable],
        tee: Tee,
        count: Callable[[Hashable, int], None] | None = None,
    ) -> None:
        self._convert = convert
        self._tee = tee
        self._count = count

    def push(self, time: Hashable, records: Batch) -> None:
        """Convert the time and forward the same batch."""
        converted = self._convert(time)
        if self._count is not None:
            self._count(converted, len(records))
        self._tee.push(converted, records)
