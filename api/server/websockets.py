"""The WebSocket endpoints: frontier changes, output events, and streaming producers.

Every socket is authenticated before the upgrade (by the same middleware as HTTP), every
queue behind a socket is bounded, and every way a socket ends has a documented close code
(``docs/api.md``, ``asyncapi.yaml``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from collections.abc import Callable, Coroutine
from operator import itemgetter
from typing import Any

import orjson
from aiohttp import WSCloseCode, WSMsgType, web
from aiohttp.abc import AbstractStreamWriter
from pydantic import ValidationError

from api.codec import ack_json, event_json, time_from_json, time_to_json, times_json
from api.models import ClientFrame, plain_push
from api.server.auth import WS_PROTOCOL
from api.server.context import SETTINGS, SOCKETS, manager_of, tenant_of
from api.server.http import flag, strict_json, time_param
from api.server.problems import invalid_body
from api.server.records import check_records
from service.app import BadRequest, ProducerInput, ServiceError, Subscriber

BAD_FRAME = 4400
NOT_FOUND = 4404
SLOW_CONSUMER = 4408
GONE = 4410
TOO_LARGE = 4413
NO_CREDIT = 4429
_CLOSE_FOR_STATUS = {404: NOT_FOUND, 410: GONE}

HEARTBEAT = 30.0
FRONTIER_BUFFER_BYTES = 64 * 1024
"""A frontier subscriber whose socket holds more unsent bytes than this is sent nothing
more until it drains; then it gets the latest frontiers of what changed (coalesced)."""


def _resume_point(request: web.Request) -> list[Any] | None:
    """Where an output subscription starts: ``from`` (a time) or ``frontier`` (an antichain).

    A closed subscription's ``resume`` is a frontier; with partially ordered times it may
    have several elements, and only all of them together say where the subscriber stopped.
    """
    start = time_param(request, "from")
    raw = request.query.get("frontier")
    if raw is None:
        return None if start is None else [start]
    if start is not None:
        raise BadRequest("give from (a time) or frontier (an array of times), not both")
    try:
        elements = orjson.loads(raw)
        if type(elements) is not list:
            raise TypeError("not an array")
        return [time_from_json(element) for element in elements]
    except (orjson.JSONDecodeError, ValueError, TypeError):
        raise BadRequest(
            f"frontier must be a JSON array of times (integers or [outer, inner]), not {raw!r}"
        ) from None


SUBSCRIBER_FRAME_BYTES = 64 * 1024
"""The largest frame a subscriber may send (it has nothing to send but pings and a close)."""


class BoundedSocket(web.WebSocketResponse):
    """A WebSocket whose frames are bounded by the protocol reader itself.

    A frame over the bound is refused as it arrives, never buffered whole; aiohttp then
    closes with 1009, which becomes our documented 4413 with the bound in the reason.
    """

    def __init__(self, most: int) -> None:
        super().__init__(heartbeat=_heartbeat(), max_msg_size=most, protocols=(WS_PROTOCOL,))
        self.most = most

    async def close(
        self, *, code: int = WSCloseCode.OK, message: bytes = b"", drain: bool = True
    ) -> bool:
        """Close; a frame over the bound closes with 4413 and says the bound."""
        if code == WSCloseCode.MESSAGE_TOO_BIG:
            code = TOO_LARGE
            message = f"a frame may be at most {self.most} bytes".encode()
        return await super().close(code=code, message=message, drain=drain)


async def _open(request: web.Request, most: int = SUBSCRIBER_FRAME_BYTES) -> BoundedSocket:
    ws = BoundedSocket(most)
    await ws.prepare(request)
    request.app[SOCKETS].open.add(ws)
    return ws


def _heartbeat() -> float:
    """Seconds of silence from the client before a ping: 30 to 45, at random.

    aiohttp rounds a ping's deadline up to a whole second, so sockets opened together with
    one interval would all be pinged (and answer) in the same turn of the loop, every time:
    with many subscribers, a burst that holds up everything else (frontier events too).
    """
    return HEARTBEAT + random.random() * HEARTBEAT / 2


async def _send(ws: web.WebSocketResponse, value: Any) -> None:
    await ws.send_bytes(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


async def _close(ws: web.WebSocketResponse, code: int, reason: str) -> None:
    # A close reason must fit in a control frame (123 bytes).
    await ws.close(code=code, message=reason.encode()[:120])


def _stopping(request: web.Request) -> bool:
    return not manager_of(request).running


def ws_frames(payloads: list[bytes]) -> bytes:
    """``payloads`` as consecutive binary WebSocket frames (unmasked: server to client)."""
    parts: list[bytes] = []
    for payload in payloads:
        size = len(payload)
        if size < 126:
            parts.append(_HEADER_SHORT(0x82, size))
        elif size < 65536:
            parts.append(_HEADER_MEDIUM(0x82, 126, size))
        else:
            parts.append(_HEADER_LONG(0x82, 127, size))
        parts.append(payload)
    return b"".join(parts)


_HEADER_SHORT = struct.Struct("!BB").pack
_HEADER_MEDIUM = struct.Struct("!BBH").pack
_HEADER_LONG = struct.Struct("!BBQ").pack


class FrontierSocket:
    """A frontier subscriber's socket, written to directly by the dataflow's feed.

    The feed encodes each change once (:func:`ws_frames` of the JSON events) and writes the
    same bytes to every subscriber's transport from the one callback that noticed the
    change: no task, queue or future per subscriber. Whole frames are written at once, so
    they never interleave with aiohttp's own (ping, pong, close); they are never compressed
    (permessage-deflate allows uncompressed messages).

    Backpressure: the transport's high-water mark is :data:`FRONTIER_BUFFER_BYTES`. A socket
    whose unsent bytes are over it is written nothing more; one task waits for it to drain
    (aiohttp's drain), and the feed then writes what changed meanwhile, coalesced.
    """

    __slots__ = ("request", "transport", "writer", "ws")

    @staticmethod
    def encode(payloads: list[bytes]) -> bytes:
        """The events as binary frames (the same function for every socket)."""
        return ws_frames(payloads)

    def __init__(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        writer: AbstractStreamWriter,
        transport: asyncio.Transport,
    ) -> None:
        self.request = request
        self.ws = ws
        self.writer = writer
        self.transport = transport
        transport.set_write_buffer_limits(high=FRONTIER_BUFFER_BYTES)

    def _open(self) -> bool:
        return not (self.ws.closed or self.transport.is_closing())

    def writable(self) -> bool:
        """Whether the transport's unsent bytes are within the bound."""
        return self.transport.get_write_buffer_size() <= FRONTIER_BUFFER_BYTES

    def write(self, data: bytes) -> None:
        """Write whole frames (dropped once the socket is closing)."""
        if self._open():
            self.transport.write(data)

    @staticmethod
    def write_all(sinks: list[FrontierSocket], data: bytes) -> list[int]:
        """Write the same frames to every socket within its bound; the indexes of the others.

        The one loop a change costs per subscriber: a buffer check and a write.
        """
        full: list[int] = []
        for index, sink in enumerate(sinks):
            transport = sink.transport
            if transport.get_write_buffer_size() > FRONTIER_BUFFER_BYTES:
                full.append(index)
            elif not (sink.ws.closed or transport.is_closing()):
                transport.write(data)
        return full

    def when_writable(self, then: Callable[[], None]) -> None:
        """Call ``then`` once the socket has drained below its bound (not if it closes)."""
        _background(self._drained(then))

    async def _drained(self, then: Callable[[], None]) -> None:
        while self._open() and not self.writable():
            try:
                await self.writer.drain()
            except ConnectionError:
                return
            if not self.writable() and not self.request.protocol.writing_paused:
                await asyncio.sleep(0.01)  # over the bound but not paused: rare, poll
        if self._open():
            then()

    def finish(self, reason: str) -> None:
        """Send ``closed`` and close: 4410 (1001 when the service is stopping)."""
        if not self._open():
            return
        self.transport.write(ws_frames([orjson.dumps({"type": "closed", "reason": reason})]))
        code = int(WSCloseCode.GOING_AWAY) if _stopping(self.request) else GONE
        # Not drained: a subscriber that stopped reading must not hold the close.
        _background(self.ws.close(code=code, message=reason.encode()[:120], drain=False))


_BACKGROUND: set[asyncio.Task[Any]] = set()


def _background(coroutine: Coroutine[Any, Any, Any]) -> None:
    task = asyncio.ensure_future(coroutine)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def frontiers(request: web.Request) -> web.WebSocketResponse:
    """Stream frontier changes of a dataflow's inputs, outputs (and operators).

    The handler only reads (so the client's close and pings are seen); the dataflow's feed
    writes the events (:class:`FrontierSocket`).
    """
    manager = manager_of(request)
    operators = flag(request, "operators")
    watch = manager.watch(tenant_of(request), request.match_info["id"], operators)
    try:
        ws = BoundedSocket(SUBSCRIBER_FRAME_BYTES)
        writer = await ws.prepare(request)
        request.app[SOCKETS].open.add(ws)
        transport = request.transport
        if transport is None:  # the client left during the upgrade
            return ws
        watch.attach(FrontierSocket(request, ws, writer, transport))
        async for _message in ws:
            pass
    finally:
        manager.unwatch(watch)
    return ws


class _EventsSender:
    """Sends an output subscriber's events: a task only while there is something to send.

    The log sets the subscriber's ``wake`` (and so calls this) when it queues an event or
    closes the subscriber; an idle subscriber has no task of its own beyond its handler.
    """

    __slots__ = ("request", "subscriber", "task", "ws")

    def __init__(
        self, request: web.Request, ws: web.WebSocketResponse, subscriber: Subscriber
    ) -> None:
        self.request = request
        self.ws = ws
        self.subscriber = subscriber
        self.task: asyncio.Task[None] | None = None

    def __call__(self) -> None:
        if self.task is None and not self.ws.closed:
            self.task = asyncio.ensure_future(self._run())
            _BACKGROUND.add(self.task)
            self.task.add_done_callback(_BACKGROUND.discard)

    async def _run(self) -> None:
        ws, subscriber = self.ws, self.subscriber
        try:
            while not ws.closed:
                for event in subscriber.take():
                    await _send(ws, event_json(event))
                if subscriber.closed is not None:
                    await self._closed(subscriber.closed)
                    return
                if not subscriber.wake.is_set():
                    return
        except ConnectionError:
            return  # the client is gone; its handler unsubscribes
        finally:
            self.task = None

    async def _closed(self, reason: str) -> None:
        resume = times_json(self.subscriber.resume)
        await _send(self.ws, {"type": "closed", "reason": reason, "resume": resume})
        if _stopping(self.request):
            code = int(WSCloseCode.GOING_AWAY)
        elif reason.startswith("slow consumer"):
            code = SLOW_CONSUMER
        else:
            code = GONE
        await _close(self.ws, code, orjson.dumps({"resume": resume}).decode())


async def output_events(request: web.Request) -> web.WebSocketResponse:
    """Stream an output's captured events, from a resume point if given.

    The handler only reads (so the client's close and pings are seen); events are sent by
    a task started when there are some (:class:`_EventsSender`).
    """
    subscriber = manager_of(request).subscribe(
        tenant_of(request),
        request.match_info["id"],
        request.match_info["output"],
        _resume_point(request),
    )
    try:
        ws = await _open(request)
        sender = _EventsSender(request, ws, subscriber)
        subscriber.wake.notify = sender
        if subscriber.wake.is_set():  # the backlog (or the log was closed already)
            sender()
        async for _message in ws:
            pass
    finally:
        subscriber.wake.notify = None
        subscriber.leave()
    return ws


async def push_stream(request: web.Request) -> web.WebSocketResponse:
    """A producer session over one socket, with credit-based flow control.

    The server grants ``ws_credits`` frames up front: a client may have that many frames
    sent and not yet answered. A reader takes frames off the socket as they arrive and counts
    them; one more than the credits closes the socket with 4429 (the client ignored the flow
    control). Each answer returns a credit and says how many the client has now.

    ``?session=ID`` resumes an open session instead of opening one (after a broken
    connection or a restart of the server): frames not acknowledged are sent again with
    their sequence numbers, and are applied once.
    """
    producer = manager_of(request).input(
        tenant_of(request), request.match_info["id"], request.match_info["input"]
    )
    resumed = request.query.get("session")
    if resumed is not None:
        if "start" in request.query:
            raise BadRequest("give start (a new session) or session (to resume one), not both")
        session = producer.attach(resumed)
    else:
        session = producer.open_session(time_param(request, "start"))
        producer.attached.add(session.id)
        await producer.durable()
    limits = request.app[SETTINGS].limits
    credits = limits.ws_credits
    ws = await _open(request, limits.max_frame_bytes)
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
                    continue  # a frame over max_frame_bytes never arrives: the reader closes
                unanswered += 1
                if unanswered > credits:
                    frames.put_nowait((NO_CREDIT, "sent without credit: wait for acks"))
                    return
                frames.put_nowait(message.data)
        finally:
            frames.put_nowait(None)

    reader = asyncio.ensure_future(read())
    acks = _Acks(ws, request, producer)
    try:
        while True:
            if frames.empty():
                await acks.flush()  # nothing else to answer now: send what is owed
            data = await frames.get()
            if data is None or ws.closed:
                break
            # Acks wait while frames are waiting (they go out together, after one wait for
            # durability); whatever else is sent goes after the acks owed before it.
            if isinstance(data, tuple):
                await acks.flush()
                await _close(ws, *data)
                break
            raw = ("json", data if isinstance(data, bytes) else data.encode())
            plain = plain_push(data, frame=True)
            if plain is None:
                try:
                    frame = ClientFrame.validate_json(data)
                    strict_json(data, "the frame")
                except (ValidationError, BadRequest) as error:
                    problem = error if isinstance(error, BadRequest) else invalid_body(error)
                    await acks.flush()
                    await _send(ws, _error_frame(problem))
                    await _close(ws, BAD_FRAME, "invalid frame")
                    break
            try:
                if plain is not None:  # a push with integer times, checked in bulk
                    check_records(plain.records, len(raw[1]), limits)
                    bounds = (plain.first, plain.last)
                    ack = producer.push_columns(
                        session.id, plain.seq, plain.times, plain.records, bounds, raw
                    )
                elif frame.type == "push":
                    check_records(list(map(itemgetter(1), frame.records)), len(raw[1]), limits)
                    ack = producer.push(session.id, frame.seq, list(frame.records), raw)
                elif frame.type == "advance":
                    ack = producer.advance(session.id, frame.time, frame.seq)
                else:
                    ack = producer.close_session(session.id)
                    unanswered -= 1
                    await acks.flush()
                    await producer.durable()
                    await _send(ws, {"type": "ack", **ack_json(ack), "credits": 0})
                    await ws.close()
                    break
            except ServiceError as error:
                unanswered -= 1
                await acks.flush()
                await _send(ws, {**_error_frame(error), "credits": credits - unanswered})
                code = _CLOSE_FOR_STATUS.get(error.status)
                if code is not None:
                    await _close(ws, code, error.detail)
                    break
                continue
            unanswered -= 1
            acks.add({"type": "ack", **ack_json(ack), "credits": credits - unanswered})
        await acks.flush()
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
        # A producer that disconnects without closing must not hold the input forever.
        producer.release_session(session.id)
    return ws


class _Acks:
    """A producer's acks, sent together: one write for every frame answered in a row.

    A client that pipelines frames up to its credits has several waiting when the handler
    gets to them; their acks go out in one write (one system call) once no frame is left
    waiting, or before anything else is sent. Past 64 KiB unsent, it waits for the socket
    to drain, as ``send_bytes`` does past aiohttp's limit.
    """

    __slots__ = ("payloads", "producer", "request", "ws")

    def __init__(
        self, ws: web.WebSocketResponse, request: web.Request, producer: ProducerInput
    ) -> None:
        self.ws = ws
        self.request = request
        self.producer = producer
        self.payloads: list[bytes] = []

    def add(self, frame: dict[str, Any]) -> None:
        """Owe ``frame``."""
        self.payloads.append(orjson.dumps(frame))

    async def flush(self) -> None:
        """Send every owed ack, in order, once what they acknowledge is durable.

        The frames answered in a row share one wait (and, with other producers' appends,
        one sync).
        """
        payloads = self.payloads
        if not payloads:
            return
        await self.producer.durable()
        self.payloads = []
        transport = self.request.transport
        if len(payloads) == 1 or transport is None or self.ws.closed:
            for payload in payloads:
                await self.ws.send_bytes(payload)
            return
        transport.write(ws_frames(payloads))
        if transport.get_write_buffer_size() > FRONTIER_BUFFER_BYTES:
            await self.request.writer.drain()  # a client that does not read holds us here


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
