"""``map`` and ``map_batches``: new records for every batch, at the same time.

:func:`per_batch` is the operator behind every stateless one-input operator (``map``,
``filter``, ``flat_map``, ``inspect``, ``exchange``): it takes each arrived batch, calls one
function on it and forwards what that returns at the batch's own time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from time import perf_counter
from typing import Any

from operators.builder import OperatorBuilder
from operators.stream import Stream, attach


def per_batch(
    stream: Stream,
    fn: Callable[[Hashable, list[Any]], list[Any]],
    name: str,
    exchange: Callable[[Any], object] | None = None,
    sliceable: bool = False,
) -> Stream:
    """Forward ``fn(time, batch)`` for every batch (an empty result sends nothing).

    ``fn`` may return fewer or more records than it was given, or the very list it was
    given, but must not modify that list: other consumers of the stream receive the same
    object. With ``exchange``, records are routed to workers by that key before ``fn``.
    With ``sliceable`` (``fn`` of a slice of a batch is that slice's part of ``fn`` of
    the batch: an expression evaluated per record), a slow ``fn`` is called on slices and a
    run stops after :data:`STEP_SECONDS`, leaving the rest for its next run.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=exchange)
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        pace = Pace()

        def whole() -> None:
            for time, records in input.batches():
                output.forward(time, fn(time, records))

        def logic() -> None:
            deadline = perf_counter() + STEP_SECONDS
            for time, records in input.batches():
                out, done = sliced(fn, time, records, pace, deadline)
                output.forward(time, out)
                if done < len(records):
                    input.give_back(time, records[done:])  # the rest waits for the next run
                    return
                if perf_counter() > deadline and not input.is_empty():
                    input.operator.activate_later()
                    return

        return logic if sliceable else whole

    builder.build_reactive(constructor)
    return result


STEP_SECONDS = 0.02
"""How long one run of a batch operator may evaluate before it lets the others run.

An expression has a step limit per record (``operators.graph.cel``), but a batch of many
records each near it would still hold the event loop (every tenant, ``/healthz``) for their
sum. A run stops once past this, puts the rest of its batch back (still in flight: the
frontier waits for it) and asks to run again after the others."""


class Pace:
    """Records per second an operator's function was last seen to take, to size slices."""

    __slots__ = ("per_second",)

    def __init__(self) -> None:
        self.per_second = 0.0
        """0 until measured: the first batch starts with a slice of one record."""

    def saw(self, records: int, seconds: float) -> None:
        """Record that ``records`` took ``seconds``."""
        self.per_second = records / max(seconds, 1e-7)


def sliced(
    fn: Callable[[Hashable, list[Any]], list[Any]],
    time: Hashable,
    records: list[Any],
    pace: Pace,
    deadline: float,
) -> tuple[list[Any], int]:
    """``fn``'s results for a prefix of ``records``, and how many records that prefix has.

    When the pace says the whole batch fits in a quarter of the time left, it is one call
    (the usual case: no slicing, no copy). Otherwise slices grow from what fits (at least
    one record), doubling while the deadline is not passed: a run takes at most about
    three times the time left plus one record's worst (which the step limit bounds).
    """
    count = len(records)
    started = perf_counter()
    fits = int(pace.per_second * max(deadline - started, 0.0) / 4)
    if fits >= count:
        whole = fn(time, records)
        pace.saw(count, perf_counter() - started)
        return whole, count
    size = max(1, fits)
    out: list[Any] = []
    done = 0
    while done < count:
        piece = records[done : done + size]
        began = perf_counter()
        out.extend(fn(time, piece))
        ended = perf_counter()
        pace.saw(len(piece), ended - began)
        done += len(piece)
        if ended > deadline:
            break
        size *= 2
    return out, done


@attach(Stream.map)
def map_stream(stream: Stream, fn: Callable[[Any], Any], name: str = "Map") -> Stream:
    """Apply ``fn`` to every record; ``map`` runs the loop in C, so ``fn`` is the only call."""
    return per_batch(stream, lambda _time, records: list(map(fn, records)), name)


@attach(Stream.evaluate)
def evaluate_batches(
    stream: Stream, fn: Callable[[list[Any]], list[Any]], name: str = "Evaluate"
) -> Stream:
    """:func:`map_batches` for a function of each record (a compiled expression's batch form).

    ``fn`` of part of a batch must give that part's records, so a slow one is called on
    slices and lets the other operators (and the server) run between them (see
    :func:`per_batch`).
    """
    return per_batch(stream, lambda _time, records: fn(records), name, sliceable=True)


@attach(Stream.map_batches)
def map_batches(
    stream: Stream, fn: Callable[[list[Any]], list[Any]], name: str = "MapBatches"
) -> Stream:
    """Replace every batch by ``fn(batch)``, at the same time (an empty result sends nothing).

    For logic that handles a whole batch at once, e.g. an expression compiled into one list
    comprehension: the engine makes one call per batch, none per record. ``fn`` must not
    modify the list it is given (see :func:`per_batch`).
    """
    return per_batch(stream, lambda _time, records: fn(records), name)
