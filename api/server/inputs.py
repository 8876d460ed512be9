"""Inputs and their producer sessions: open, push, advance, close; an input's state."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from aiohttp import web

from api.codec import ack_json, input_json, time_to_json
from api.models import SEQ_MAX, Advance, OpenSession, Push, plain_push
from api.server.arrow import ARROW_STREAM, records_from_arrow
from api.server.context import SETTINGS, manager_of, tenant_of
from api.server.http import json_response, parse, read_body
from api.server.records import check_records, check_typed
from service.app import BadRequest, ProducerInput


def producer_of(request: web.Request) -> ProducerInput:
    """The input the request's path names (404/410 if there is none now)."""
    return manager_of(request).input(
        tenant_of(request), request.match_info["id"], request.match_info["input"]
    )


async def get_input(request: web.Request) -> web.Response:
    """An input: its frontier, open sessions and open transactions (staged records)."""
    return json_response(input_json(producer_of(request).view()))


async def open_session(request: web.Request) -> web.Response:
    """Open a producer session."""
    producer = producer_of(request)
    body = await parse(request, OpenSession)
    session = producer.open_session(body.start)
    await producer.durable()
    return json_response(
        {"session": session.id, "time": time_to_json(session.time)},
        status=201,
        headers={"Location": f"{request.path}/{session.id}"},
    )


def _seq_param(request: web.Request) -> int:
    raw = request.query.get("seq", "")
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= SEQ_MAX:
        raise BadRequest(f"an Arrow push needs ?seq= a positive integer, not {raw!r}")
    return int(raw)


async def push(request: web.Request) -> web.Response:
    """Push a batch (whole or nothing): JSON, or Arrow IPC with ``?seq=``."""
    producer = producer_of(request)
    session = request.match_info["session"]
    records: list[tuple[Any, Any]]
    data = await read_body(request)
    if request.content_type == ARROW_STREAM:
        seq = _seq_param(request)
        raw = ("arrow", data)
        if producer.schema is not None:
            # A typed input: the body's columns are checked against its schema and go
            # into the dataflow as they are (422 naming the column that does not fit).
            typed = producer.typed_arrow(data)
            check_typed(typed, len(data), request.app[SETTINGS].limits)
            ack = producer.push_typed(session, seq, typed, raw)
            await producer.durable()
            return json_response(ack_json(ack))
        records = records_from_arrow(data)
    else:
        raw = ("json", data)
        plain = plain_push(data)
        if plain is not None:  # integer times, the common case: checked in bulk
            check_records(plain.records, len(data), request.app[SETTINGS].limits)
            ack = producer.push_columns(
                session, plain.seq, plain.times, plain.records, (plain.first, plain.last), raw
            )
            await producer.durable()
            return json_response(ack_json(ack))
        body = await parse(request, Push)
        seq, records = body.seq, list(body.records)
    check_records(list(map(itemgetter(1), records)), len(data), request.app[SETTINGS].limits)
    # The producer refuses a batch over max_batch_records, before anything is applied.
    ack = producer.push(session, seq, records, raw)
    await producer.durable()
    return json_response(ack_json(ack))


async def advance(request: web.Request) -> web.Response:
    """Advance a session."""
    producer = producer_of(request)
    body = await parse(request, Advance)
    ack = producer.advance(request.match_info["session"], body.time, body.seq)
    await producer.durable()
    return json_response(ack_json(ack))


async def close_session(request: web.Request) -> web.Response:
    """Close a session."""
    producer = producer_of(request)
    ack = producer.close_session(request.match_info["session"])
    await producer.durable()
    return json_response(ack_json(ack))


async def close_input(request: web.Request) -> web.Response:
    """Close an input and all of its sessions."""
    producer = producer_of(request)
    producer.close()
    await producer.durable()
    return json_response({"input_frontier": []})
