"""``map`` and ``map_batches``: new records for every batch, at the same time.

``map`` (like ``filter`` and ``flat_map``) returns a chained stream: consecutive ones run as
one operator (:mod:`operators.fused`). :func:`per_batch` is the operator behind the other
stateless one-input operators (``map_batches``, ``evaluate``, ``inspect``, ``exchange``): it
takes each arrived batch, calls one function on it and forwards what that returns at the
batch's own time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from time import perf_counter
from typing import Any

from operators import fused
from operators.builder import OperatorBuilder
from operators.fused import MAP, STEP_SECONDS, Pace, Stage, chained, pieces
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
    run stops after :data:`~operators.fused.STEP_SECONDS`, leaving the rest for its next run.
    A run stops once it has taken :data:`~operators.fused.RUN_RECORDS` records (whole
    batches) and lets the operators reading it run first.
    """
    builder = OperatorBuilder(stream.scope, name)
    input = builder.new_input(stream, exchange=exchange)
    output, result = builder.new_output()
    core = builder.core

    def constructor() -> Callable[[], None]:
        pace = Pace()

        def whole() -> None:
            left = fused.RUN_RECORDS
            for time, records in input.batches():
                left -= len(records)
                output.forward(time, fn(time, records))
                if left <= 0 and not input.is_empty():
                    core.activate()  # the rest after the readers, in the scope's next pass
                    return

        def logic() -> None:
            deadline = perf_counter() + STEP_SECONDS
            left = fused.RUN_RECORDS
            for time, records in input.batches():
                out, done = sliced(fn, time, records, pace, deadline)
                output.forward(time, out)
                left -= done
                if done < len(records):
                    input.give_back(time, records[done:])  # the rest waits for the next run
                    return
                if perf_counter() > deadline and not input.is_empty():
                    input.operator.activate_later()
                    return
                if left <= 0 and not input.is_empty():
                    core.activate()  # the rest after the readers, in the scope's next pass
                    return

        return logic if sliceable else whole

    builder.build_reactive(constructor)
    return result


def sliced(
    fn: Callable[[Hashable, list[Any]], list[Any]],
    time: Hashable,
    records: list[Any],
    pace: Pace,
    deadline: float,
) -> tuple[list[Any], int]:
    """``fn``'s results for a prefix of ``records``, and how many records that prefix has.

    The prefix is what :func:`~operators.fused.pieces` gives before the deadline: the whole
    batch in one call when the pace says it fits (no copy), else growing slices.
    """
    started = perf_counter()
    if pace.fitting(deadline - started) >= len(records):  # the usual case, without pieces
        whole = fn(time, records)
        pace.saw(len(records), perf_counter() - started)
        return whole, len(records)
    out: list[Any] | None = None
    done = 0
    for piece in pieces(records, pace, deadline):
        part = fn(time, piece)
        if out is None:
            out = part if piece is records else list(part)
        else:
            out.extend(part)
        done += len(piece)
    return out if out is not None else [], done


@attach(Stream.map)
def map_stream(stream: Stream, fn: Callable[[Any], Any], name: str = "Map") -> Stream:
    """Apply ``fn`` to every record; ``map`` runs the loop in C, so ``fn`` is the only call.

    The stream is chained: with the ``map``, ``filter`` and ``flat_map`` after it (and
    before it) it runs as one operator (see :mod:`operators.fused`).
    """
    return chained(stream, Stage(MAP, fn, name))


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
