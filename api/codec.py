"""The wire form of what the service answers: times, events, views, as JSON.

The one place in :mod:`api` that knows how a time, a captured event or a view of the
service's state is written: handlers call these and never build such JSON themselves.
Times are integers, or ``[outer, inner]`` arrays for products (nested for deeper scopes),
the format of captured events (``docs/events.md``), which reaches the API through
:mod:`service.app`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, cast

import orjson

from service.app import (
    Ack,
    ConsumerView,
    DataflowSummary,
    DataflowView,
    Event,
    InputState,
    InputView,
    LiveStats,
    Messages,
    OutputPage,
    OutputView,
    Product,
    RecordColumns,
    SessionView,
    check_time,
    decode_time,
    encode_time,
    event_to_json,
)
from service.app.explain import ExplainView, HolderView


def time_from_json(value: object) -> int | Product[Any, Any]:
    """The engine time of a JSON time: an int, or a :class:`Product` for ``[outer, inner]``.

    It is idempotent: an engine time (what the models' ``Time`` fields hold) is checked
    and returned as it is.

    Args:
        value: A decoded JSON value (``orjson.loads``), or an engine time.

    Returns:
        The time, as the engine compares and hashes it.

    Raises:
        ValueError: ``value`` is not a time (a string, a float, a bool, a negative or too
            large integer, or an array that is not two times).

    >>> time_from_json(5), time_from_json([[1, 0], 2])
    (5, Product(outer=Product(outer=1, inner=0), inner=2))
    >>> time_from_json("5")
    Traceback (most recent call last):
    ...
    operators.progress.time_codec.TimeFormatError: not a time: '5'
    """
    if isinstance(value, Product):
        try:
            check_time(value)
        except TypeError as error:
            raise ValueError(f"not a time: {value!r}") from error
        return value
    return cast("int | Product[Any, Any]", decode_time(value))


def time_to_json(time: Hashable) -> int | list[Any]:
    """The JSON form of an engine time: the inverse of :func:`time_from_json`.

    Args:
        time: An int in ``[0, 2**64)`` or a :class:`Product` of times.

    Returns:
        The int, or ``[outer, inner]`` (nested for nested products).

    Raises:
        TypeError: ``time`` is not an int or a product.
        ValueError: an integer coordinate is outside ``[0, 2**64)``.

    >>> time_to_json(Product(Product(1, 0), 2))
    [[1, 0], 2]
    """
    return cast("int | list[Any]", encode_time(time))


def times_json(times: Iterable[Hashable]) -> list[Any]:
    """Times (a frontier, say) in their JSON form."""
    return [encode_time(t) for t in times]


def optional_time_json(time: Hashable | None) -> Any:
    """A time in its JSON form, or ``None``."""
    return None if time is None else encode_time(time)


def event_json(event: Event) -> dict[str, Any]:
    """A captured output event: ``{"type": "messages" | "progress", ...}``."""
    return event_to_json(event)


_ENCODED: OrderedDict[int, tuple[Event, bytes]] = OrderedDict()
"""Columnar events encoded lately, by identity: every subscriber of an output is offered the
same event object, and each is sent the same bytes, encoded once."""

_ENCODED_KEPT = 64


def event_bytes(event: Event) -> bytes:
    """A captured output event as JSON bytes: what every subscriber is sent.

    A ``messages`` event of columns is the same JSON as one of records, encoded in bulk:
    one ``to_pylist`` of the struct array and one ``orjson.dumps`` (measured at 0.17 µs a
    record of two fields, ``docs/columnar.md``), once for all its subscribers.
    """
    columns: Any = event.records if isinstance(event, Messages) else None
    if not isinstance(columns, RecordColumns):
        return orjson.dumps(event_to_json(event), option=orjson.OPT_NON_STR_KEYS)
    kept = _ENCODED.get(id(event))
    if kept is not None and kept[0] is event:
        return kept[1]
    assert isinstance(event, Messages)
    encoded = orjson.dumps(
        {"type": "messages", "time": encode_time(event.time), "records": columns.rows()},
        option=orjson.OPT_NON_STR_KEYS,
    )
    _ENCODED[id(event)] = (event, encoded)  # the event is held, so its id is not reused
    if len(_ENCODED) > _ENCODED_KEPT:
        _ENCODED.popitem(last=False)
    return encoded


def frontier_event(location: str, frontier: list[Hashable]) -> bytes:
    """The ``frontier`` event of one location, encoded: what every frontier watch is sent.

    >>> frontier_event("output:out", [3])
    b'{"type":"frontier","location":"output:out","frontier":[3]}'
    """
    return orjson.dumps(
        {"type": "frontier", "location": location, "frontier": times_json(frontier)}
    )


def summary_json(summary: DataflowSummary) -> dict[str, Any]:
    """A dataflow as listings show it."""
    return {
        "id": summary.id,
        "name": summary.name,
        "status": summary.status,
        "created_at": summary.created_at,
        "inputs": summary.inputs,
        "outputs": summary.outputs,
    }


def dataflow_json(view: DataflowView) -> dict[str, Any]:
    """A dataflow in full (``operators`` only when the view has them)."""
    result: dict[str, Any] = {
        "id": view.id,
        "name": view.name,
        "status": view.status,
        "created_at": view.created_at,
        "inputs": {name: _input_state(i) for name, i in view.inputs.items()},
        "outputs": {
            name: {"frontier": times_json(o.frontier), "records_out": o.records_out}
            for name, o in view.outputs.items()
        },
        "graph": view.graph,
        "error": view.error,
    }
    if view.operators is not None:
        result["operators"] = {
            node: {
                "outputs": [
                    {"frontier": times_json(p.frontier), "records": p.records}
                    for p in state.outputs
                ],
                "busy_seconds": state.busy_seconds,
            }
            for node, state in view.operators.items()
        }
    result["record_errors"] = {
        node: {"count": e.count, "last": e.last} for node, e in view.record_errors.items()
    }
    result["execution"] = view.execution
    return result


def _input_state(state: InputState) -> dict[str, Any]:
    """An input as a dataflow's description shows it (its schema, if it is typed)."""
    shown = {
        "frontier": times_json(state.frontier),
        "sessions": state.sessions,
        "records_in": state.records_in,
        "closed": state.closed,
        "process": state.process,
    }
    if state.schema is not None:
        shown["schema"] = state.schema
    return shown


def ack_json(ack: Ack) -> dict[str, Any]:
    """What a push, advance, commit or close answers."""
    return {
        "seq": ack.seq,
        "session_time": optional_time_json(ack.session_time),
        "input_frontier": times_json(ack.input_frontier),
        "applied": ack.applied,
    }


def input_json(view: InputView) -> dict[str, Any]:
    """An input with its sessions and open transactions (and its schema, if it is typed)."""
    shown = {
        "input": view.name,
        "frontier": times_json(view.frontier),
        "time": optional_time_json(view.time),
        "closed": view.closed,
        "records_in": view.records_in,
        "dropped_late": view.dropped_late,
        "sessions": [{"session": s.id, "time": encode_time(s.time)} for s in view.sessions],
        "staged": view.staged,
        "transactions": [
            {"transaction": name, "staged": size} for name, size in view.transactions.items()
        ],
    }
    if view.schema is not None:
        shown["schema"] = view.schema
    return shown


def input_from_json(document: dict[str, Any]) -> InputView:
    """An input as :func:`input_json` wrote it (what a cluster's other process says of it)."""
    time = document["time"]
    return InputView(
        document["input"],
        [time_from_json(t) for t in document["frontier"]],
        None if time is None else time_from_json(time),
        document["closed"],
        document["records_in"],
        [SessionView(s["session"], time_from_json(s["time"])) for s in document["sessions"]],
        document["staged"],
        {t["transaction"]: t["staged"] for t in document["transactions"]},
        document.get("dropped_late", 0),  # a process of an earlier release says nothing
        document.get("schema"),
    )


def page_json(page: OutputPage) -> dict[str, Any]:
    """A page of an output's completed times, with their records or their counts."""
    if page.counts is not None:
        times = [
            {"time": encode_time(t), "count": n}
            for t, n in zip(page.times, page.counts, strict=True)
        ]
    else:
        times = [
            {"time": encode_time(t), "records": records}
            for t, records in zip(page.times, page.records or (), strict=True)
        ]
    return {"times": times, "frontier": times_json(page.frontier), "next_cursor": cursor(page)}


def cursor(page: OutputPage) -> str | None:
    """Where the next page of times starts (its first time as JSON text), if there is one."""
    return None if page.next is None else orjson.dumps(encode_time(page.next)).decode()


def consumer_json(view: ConsumerView) -> dict[str, Any]:
    """A consumer of an output and what it has committed."""
    return {
        "consumer": view.consumer,
        "committed": optional_time_json(view.committed),
        "frontier": times_json(view.frontier),
    }


def live_json(view: LiveStats) -> dict[str, Any]:
    """A stats subscription's message: the dataflow's counts now and its new samples."""
    return {
        "type": "stats",
        "id": view.id,
        "status": view.status,
        "at": view.at,
        "operators": {
            node: {
                "records": [port.records for port in state.outputs],
                "busy_seconds": state.busy_seconds,
            }
            for node, state in view.operators.items()
        },
        "inputs": {name: input_json(i) for name, i in view.inputs.items()},
        "outputs": {name: output_json(o) for name, o in view.outputs.items()},
        "samples": [
            {
                "seq": s.seq,
                "at": s.at,
                "seconds": s.seconds,
                "records_in": s.records_in,
                "records_out": s.records_out,
                "latency": {
                    name: {"completed": lat.completed, "mean": lat.mean, "max": lat.max}
                    for name, lat in s.latency.items()
                },
                "loop_lag": s.loop_lag,
            }
            for s in view.samples
        ],
        "loop": {
            "lag": view.loop_lag,
            "stalls": [{"at": stall.at, "seconds": stall.seconds} for stall in view.stalls],
        },
    }


def output_json(view: OutputView) -> dict[str, Any]:
    """An output with its live subscribers and consumers (and its schema, if it is typed)."""
    shown = {
        "output": view.name,
        "frontier": times_json(view.frontier),
        "records_out": view.records_out,
        "retained": view.retained,
        "subscribers": [
            {"queued": s.queued, "resume": times_json(s.resume)} for s in view.subscribers
        ],
        "consumers": [
            {"consumer": c.consumer, "committed": optional_time_json(c.committed)}
            for c in view.consumers
        ],
    }
    if view.schema is not None:
        shown["schema"] = view.schema
    return shown


def holder_json(holder: HolderView) -> dict[str, Any]:
    """One pointstamp holding a time back, with what is behind it (``holders``)."""
    return {
        "kind": holder.kind,
        "operator": holder.operator,
        "port": holder.port,
        "edge": None if holder.edge is None else list(holder.edge),
        "time": encode_time(holder.time),
        "count": holder.count,
        "summary": holder.summary,
        "arrives": encode_time(holder.arrives),
        "path": holder.path,
        "session": holder.session,
        "transaction": holder.transaction,
        "holders": [holder_json(h) for h in holder.holders or ()],
    }


def explain_json(view: ExplainView) -> dict[str, Any]:
    """Why a time is not complete at a location: the frontier there and every holder."""
    return {
        "dataflow": view.dataflow,
        "location": view.location,
        "time": encode_time(view.time),
        "complete": view.complete,
        "frontier": times_json(view.frontier),
        "holders": [holder_json(h) for h in view.holders],
    }


def encoded_size(records: Sequence[Any]) -> int:
    """The bytes of ``records`` as the API sends them (what byte limits count).

    A record orjson cannot encode counts as its ``repr``'s length: sizing must not fail
    inside a worker's step (the answer that carries it reports the encoding error).

    >>> encoded_size(["ab", {"k": 1}])  # ["ab",{"k":1}]
    14
    """
    try:
        return len(orjson.dumps(records, option=orjson.OPT_NON_STR_KEYS))
    except orjson.JSONEncodeError:
        return len(repr(records))
