"""The WebSocket endpoints: frontier changes, output events, and streaming producers.

Every socket is authenticated before the upgrade (by the same middleware as HTTP), every
queue behind a socket is bounded, and every way a socket ends has a documented close code
(``docs/api.md``, ``asyncapi.yaml``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web
from pydantic import ValidationError

from api.models import ClientFrame, time_from_json, time_to_json
from api.server.app import MANAGER, SETTINGS, SOCKETS, ack_json, flag, tenant_of
from api.server.problems import BadRequest, invalid_body
from operators.capture.event import event_to_json
from service.app.errors import Gone, LimitExceeded, ServiceError

BAD_FRAME = 4400
NOT_FOUND = 4404
SLOW_CONSUMER = 4408
CONFLICT = 4409
GONE = 4410
TOO_LARGE = 4413
NO_CREDIT = 4429
_CLOSE_FOR_STATUS = {404: NOT_FOUND, 410: GONE}


def _query_time(request: web.Request, name: str) -> Any:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return time_from_json(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValueError, TypeError):
        raise BadRequest(
            f"{name} must be a time (an integer or [outer, inner]), not {raw!r}"
        ) from None


async def _open(request: web.Request) -> web.WebSocketResponse:
    # Frame size is checked by the handlers, so an oversize frame gets our close code (4413)
    # rather than aiohttp's generic one.
    ws = web.WebSocketResponse(heartbeat=30.0, max_msg_size=0)
    await ws.prepare(request)
    request.app[SOCKETS].open.add(ws)
    return ws


async def _send(ws: web.WebSocketResponse, value: Any) -> None:
    await ws.send_bytes(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


async def _close(ws: web.WebSocketResponse, code: int, reason: str) -> None:
    # A close reason must fit in a control frame (123 bytes).
    await ws.close(code=code, message=reason.encode()[:120])


def _stopping(request: web.Request) -> bool:
    return not request.app[MANAGER].running


async def _drain_incoming(ws: web.WebSocketResponse) -> None:
    """Read (and ignore) what a read-only subscriber sends, so close frames are seen."""
    async for _message in ws:
        pass


async def _wait(event: asyncio.Event, reader: asyncio.Future[None]) -> None:
    waiter: asyncio.Future[Any] = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait([waiter, reader], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


async def frontiers(request: web.Request) -> web.WebSocketResponse:
    """Stream frontier changes of a dataflow's inputs, outputs (and operators)."""
    manager = request.app[MANAGER]
    operators = flag(request, "operators")
    watch = manager.watch(tenant_of(request), request.match_info["id"], operators)
    ws = await _open(request)
    reader = asyncio.ensure_future(_drain_incoming(ws))
    try:
        while not ws.closed:
            for location, frontier in watch.take():
                event = {
                    "type": "frontier",
                    "location": location,
                    "frontier": [time_to_json(t) for t in frontier],
                }
                await _send(ws, event)
            if watch.closed is not None:
                await _send(ws, {"type": "closed", "reason": watch.closed})
                code = WSCloseCode.GOING_AWAY if _stopping(request) else GONE
                await _close(ws, code, watch.closed)
                break
            await _wait(watch.wake, reader)
            if reader.done():
                break
    finally:
        manager.unwatch(watch)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return ws


async def output_events(request: web.Request) -> web.WebSocketResponse:
    """Stream an output's captured events, from a resume point if given."""
    manager = request.app[MANAGER]
    tenant = tenant_of(request)
    log = manager.output(tenant, request.match_info["id"], request.match_info["output"])
    start = _query_time(request, "from")
    if start is not None and not log.matches(start):
        raise BadRequest(f"from is not a time of output {log.name!r}'s time domain")
    if start is not None and log.is_forgotten(start):
        raise Gone(f"records at {request.query['from']} are no longer retained by this output")
    limits = request.app[SETTINGS].limits
    record = manager.get(tenant, request.match_info["id"])
    subscribers = sum(len(output.subscribers) for output in record.outputs.values())
    if subscribers >= limits.max_subscribers_per_dataflow:
        raise LimitExceeded(
            f"dataflow {record.id!r} has {subscribers} output subscribers, the limit "
            "(max_subscribers_per_dataflow)"
        )
    subscriber = log.subscribe(start, limit=limits.subscriber_queue_events)
    ws = await _open(request)
    reader = asyncio.ensure_future(_drain_incoming(ws))
    try:
        while not ws.closed:
            for event in subscriber.take():
                await _send(ws, event_to_json(event))
            if subscriber.closed is not None:
                resume = [time_to_json(t) for t in subscriber.resume]
                await _send(ws, {"type": "closed", "reason": subscriber.closed, "resume": resume})
                if _stopping(request):
                    code = int(WSCloseCode.GOING_AWAY)
                elif subscriber.closed.startswith("slow consumer"):
                    code = SLOW_CONSUMER
                else:
                    code = GONE
                await _close(ws, code, orjson.dumps({"resume": resume}).decode())
                break
            await _wait(subscriber.wake, reader)
            if reader.done():
                break
    finally:
        log.unsubscribe(subscriber)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return ws


async def push_stream(request: web.Request) -> web.WebSocketResponse:
    """A producer session over one socket, with credit-based flow control.

    The server grants ``ws_credits`` frames up front: a client may have that many frames
    sent and not yet answered. A reader takes frames off the socket as they arrive and counts
    them; one more than the credits closes the socket with 4429 (the client ignored the flow
    control). Each answer returns a credit and says how many the client has now.
    """
    manager = request.app[MANAGER]
    producer = manager.input(
        tenant_of(request), request.match_info["id"], request.match_info["input"]
    )
    session = producer.open_session(_query_time(request, "start"))
    limits = request.app[SETTINGS].limits
    credits = limits.ws_credits
    ws = await _open(request)
    request.app[SOCKETS].producers.add(ws)
    await _send(
        ws,
        {
            "type": "session",
            "session": session.id,
            "time": time_to_json(session.time),
            "credits": credits,
        },
    )
    # Bounded by the credits: the reader stops before it would hold more. It only reads;
    # closing is left to the loop below, so the close handshake completes normally (the
    # socket drains what the client still sends) and the client sees the close code.
    frames: asyncio.Queue[bytes | str | tuple[int, str] | None] = asyncio.Queue(maxsize=credits + 2)
    unanswered = 0

    async def read() -> None:
        nonlocal unanswered
        try:
            async for message in ws:
                if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                    continue
                if len(message.data) > limits.max_frame_bytes:
                    reason = f"a frame may be at most {limits.max_frame_bytes} bytes"
                    frames.put_nowait((TOO_LARGE, reason))
                    return
                unanswered += 1
                if unanswered > credits:
                    frames.put_nowait((NO_CREDIT, "sent without credit: wait for acks"))
                    return
                frames.put_nowait(message.data)
        finally:
            frames.put_nowait(None)

    reader = asyncio.ensure_future(read())
    try:
        while True:
            data = await frames.get()
            if data is None or ws.closed:
                break
            if isinstance(data, tuple):
                await _close(ws, *data)
                break
            try:
                frame = ClientFrame.validate_json(data)
            except ValidationError as error:
                await _send(ws, _error_frame(invalid_body(error)))
                await _close(ws, BAD_FRAME, "invalid frame")
                break
            try:
                if frame.type == "push":
                    ack = producer.push(session.id, frame.seq, list(frame.records))
                elif frame.type == "advance":
                    ack = producer.advance(session.id, frame.time, frame.seq)
                else:
                    ack = producer.close_session(session.id)
                    unanswered -= 1
                    await _send(ws, {"type": "ack", **ack_json(ack), "credits": 0})
                    await ws.close()
                    break
            except ServiceError as error:
                unanswered -= 1
                await _send(ws, {**_error_frame(error), "credits": credits - unanswered})
                code = _CLOSE_FOR_STATUS.get(error.status)
                if code is not None:
                    await _close(ws, code, error.detail)
                    break
                continue
            unanswered -= 1
            await _send(ws, {"type": "ack", **ack_json(ack), "credits": credits - unanswered})
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        if session.id in producer.sessions and not producer.closed and not producer.dropped:
            # A producer that disconnects without closing must not hold the input forever.
            producer.close_session(session.id)
    return ws


def _error_frame(error: ServiceError) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "type": "error",
        "title": error.title,
        "status": error.status,
        "detail": error.detail,
    }
    problems = error.extra.get("problems")
    if problems:
        frame["problems"] = problems
    return frame
