"""The WebSocket endpoints: frontier changes, output events, and streaming producers.

Every socket is authenticated before the upgrade (by the same middleware as HTTP), every
queue behind a socket is bounded, and every way a socket ends has a documented close code
(``docs/api.md``, ``asyncapi.yaml``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from aiohttp import WSCloseCode, web
from aiohttp.abc import AbstractStreamWriter

from api.codec import event_bytes, time_from_json, times_json
from api.server.context import SETTINGS, SOCKETS, manager_of, tenant_of
from api.server.http import flag, time_param
from api.server.producer_stream import ProducerStream, open_or_resume
from api.server.sockets import (
    FRONTIER_BUFFER_BYTES,
    GONE,
    SLOW_CONSUMER,
    SUBSCRIBER_FRAME_BYTES,
    BoundedSocket,
    close_socket,
    open_socket,
    send_json,
    stopping,
    ws_frames,
)
from service.app import BadRequest, Subscriber


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
        code = int(WSCloseCode.GOING_AWAY) if stopping(self.request) else GONE
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
                    await ws.send_bytes(event_bytes(event))
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
        await send_json(self.ws, {"type": "closed", "reason": reason, "resume": resume})
        if stopping(self.request):
            code = int(WSCloseCode.GOING_AWAY)
        elif reason.startswith("slow consumer"):
            code = SLOW_CONSUMER
        else:
            code = GONE
        await close_socket(self.ws, code, orjson.dumps({"resume": resume}).decode())


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
        ws = await open_socket(request)
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
    session = await open_or_resume(request, producer)
    limits = request.app[SETTINGS].limits
    try:
        ws = await open_socket(request, limits.max_frame_bytes)
    except BaseException:
        producer.detach(session.id)  # no socket after all: it can be resumed on another
        raise
    request.app[SOCKETS].producers.add(ws)
    await ProducerStream(request, ws, producer, session, limits).serve()
    return ws
