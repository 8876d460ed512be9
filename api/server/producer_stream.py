"""The producer WebSocket protocol: a session's frames in, acks out, flow control by credits.

:func:`~api.server.websockets.push_stream` opens (or resumes) the session
(:func:`open_or_resume`) and the socket; :class:`ProducerStream` then serves it. A reader
task takes frames off the socket as they arrive and counts them against the credits; the
handler applies each frame in order and owes its ack, and :class:`_Acks` sends the acks
owed together once what they acknowledge is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson
from aiohttp import WSMsgType, web
from pydantic import ValidationError

from api.codec import ack_json, time_to_json
from api.models import AdvanceFrame, ClientFrame, CloseFrame, PlainPush, PushFrame, plain_push
from api.server.arrow import ARROW_FRAME, arrow_seq, records_from_arrow
from api.server.http import strict_json, time_param
from api.server.problems import invalid_body
from api.server.records import check_records, check_typed
from api.server.sockets import (
    BAD_FRAME,
    FRONTIER_BUFFER_BYTES,
    GONE,
    NO_CREDIT,
    NOT_FOUND,
    close_socket,
    send_json,
    ws_frames,
)
from service.app import Ack, BadRequest, Limits, ProducerInput, ServiceError

if TYPE_CHECKING:
    from service.app.inputs import Session

_CLOSE_FOR_STATUS = {404: NOT_FOUND, 410: GONE}


Frame: TypeAlias = "bytes | str | tuple[int, str] | None"
"""What the reader hands the handler: a frame's data, a close (code, reason), or the end."""


async def open_or_resume(request: web.Request, producer: ProducerInput) -> Session:
    """The socket's session: ``?session=ID`` resumes an open one, else one is opened.

    A new session starts at ``?start=`` (default: the input's time) and is durable before
    the socket says so.
    """
    resumed = request.query.get("session")
    if resumed is not None:
        if "start" in request.query:
            raise BadRequest("give start (a new session) or session (to resume one), not both")
        return producer.attach(resumed)
    session = producer.open_session(time_param(request, "start"))
    producer.attached.add(session.id)
    await producer.durable()
    return session


class ProducerStream:
    """One producer session served over its socket, with credit-based flow control.

    The client may have ``ws_credits`` frames sent and not yet answered (``unanswered``);
    the reader counts each frame as it arrives, and one more than the credits closes the
    socket with 4429. Each answer returns a credit and says how many the client has now.
    """

    def __init__(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        producer: ProducerInput,
        session: Session,
        limits: Limits,
    ) -> None:
        self.ws = ws
        self.producer = producer
        self.session = session
        self.limits = limits
        self.credits = limits.ws_credits
        # Bounded by the credits: the reader stops before it would hold more.
        self.frames: asyncio.Queue[Frame] = asyncio.Queue(maxsize=self.credits + 2)
        self.unanswered = 0
        """Frames read and not answered yet: the credits the client has used."""
        self.acks = _Acks(ws, request, producer)
        self.refused = False
        """Whether the producer broke the protocol (a bad frame, one too large, one without
        credit): its session is then closed with the socket, not kept to be resumed."""

    async def serve(self) -> None:
        """Say the session and the credits, then answer frames until either side ends.

        However it ends, the session is released: it can be resumed on another socket.
        """
        session = self.session
        await send_json(
            self.ws,
            {
                "type": "session",
                "session": session.id,
                "time": time_to_json(session.time),
                "credits": self.credits,
            },
        )
        reader = asyncio.ensure_future(self._read())
        try:
            await self._answer_all()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            if self.refused:
                # The producer broke the protocol: its session goes with the socket.
                self.producer.detach(session.id, grace=False)
            else:
                # The connection broke (or the producer left without `close`): the session
                # outlives the socket for session_grace_seconds, for the producer to resume
                # it; then it is closed (it must not hold the input for ever).
                self.producer.detach(session.id)

    async def _read(self) -> None:
        """Take frames off the socket as they arrive, counting them against the credits.

        It only reads; closing is left to the handler, so the close handshake completes
        normally (the socket drains what the client still sends) and the client sees the
        close code.
        """
        try:
            async for message in self.ws:
                if message.type is WSMsgType.ERROR:
                    self.refused = True  # a frame over max_frame_bytes: the reader closes
                if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                    continue
                self.unanswered += 1
                if self.unanswered > self.credits:
                    self.refused = True
                    self.frames.put_nowait((NO_CREDIT, "sent without credit: wait for acks"))
                    return
                self.frames.put_nowait(message.data)
        finally:
            self.frames.put_nowait(None)

    async def _answer_all(self) -> None:
        """Answer the frames the reader hands over, in order, until the socket ends."""
        while True:
            if self.frames.empty():
                await self.acks.flush()  # nothing else to answer now: send what is owed
            data = await self.frames.get()
            if data is None or self.ws.closed:
                break
            # Acks wait while frames are waiting (they go out together, after one wait for
            # durability); whatever else is sent goes after the acks owed before it.
            if isinstance(data, tuple):
                await self.acks.flush()
                await close_socket(self.ws, *data)
                break
            if not await self._answer(data):
                break
        await self.acks.flush()

    async def _answer(self, data: bytes | str) -> bool:
        """Apply one frame and owe its ack (a refusal is sent at once); whether to go on.

        A frame sent again that was applied before (a producer resuming its session sends
        every frame it has no ack for) is acknowledged with ``applied`` 0, not applied twice.
        """
        if isinstance(data, bytes) and data[:4] == ARROW_FRAME:
            return await self._answer_arrow(data)
        raw = ("json", data if isinstance(data, bytes) else data.encode())
        frame: PlainPush | PushFrame | AdvanceFrame | CloseFrame | None
        frame = plain_push(data, frame=True)
        if frame is None:
            frame = await self._parse(data)
            if frame is None:
                return False
        try:
            if isinstance(frame, CloseFrame):
                await self._close_session()
                return False
            resent = self.producer.resent(self.session.id, frame.seq)
            ack = self._apply(frame, raw) if resent is None else resent
        except ServiceError as error:
            return await self._refused(error)
        self.unanswered -= 1
        self.acks.add({"type": "ack", **ack_json(ack), "credits": self.credits - self.unanswered})
        return True

    async def _answer_arrow(self, data: bytes) -> bool:
        """Apply an Arrow push frame (its ``seq`` in its schema's metadata); whether to go on.

        A frame that is not an Arrow push (no stream, no ``seq``) is a bad frame (4400); a
        batch the input refuses (a typed input's misfit, 422) is answered with ``error``.
        """
        try:
            seq = arrow_seq(data)
        except BadRequest as error:
            self.refused = True
            await self.acks.flush()
            await send_json(self.ws, _error_frame(error))
            await close_socket(self.ws, BAD_FRAME, "invalid frame")
            return False
        session, raw = self.session.id, ("arrow", data)
        try:
            ack = self.producer.resent(session, seq)
            if ack is None and self.producer.schema is not None:
                typed = self.producer.typed_arrow(data)
                check_typed(typed, len(data), self.limits)
                ack = self.producer.push_typed(session, seq, typed, raw)
            elif ack is None:
                records = records_from_arrow(data)
                check_records([r for _, r in records], len(data), self.limits)
                ack = self.producer.push(session, seq, records, raw)
        except ServiceError as error:
            return await self._refused(error)
        self.unanswered -= 1
        self.acks.add({"type": "ack", **ack_json(ack), "credits": self.credits - self.unanswered})
        return True

    async def _parse(self, data: bytes | str) -> PushFrame | AdvanceFrame | CloseFrame | None:
        """A frame that is not a plain push, validated; ``None`` when invalid.

        An invalid frame is answered with an error frame, and the socket closed with 4400.
        """
        try:
            frame = ClientFrame.validate_json(data)
            strict_json(data, "the frame")
        except (ValidationError, BadRequest) as error:
            self.refused = True
            problem = error if isinstance(error, BadRequest) else invalid_body(error)
            await self.acks.flush()
            await send_json(self.ws, _error_frame(problem))
            await close_socket(self.ws, BAD_FRAME, "invalid frame")
            return None
        return frame

    def _apply(self, frame: PlainPush | PushFrame | AdvanceFrame, raw: tuple[str, bytes]) -> Ack:
        """A push or an advance, applied to the session; its ack (owed once durable)."""
        session = self.session.id
        if isinstance(frame, PlainPush):  # a push with integer times, checked in bulk
            check_records(frame.records, len(raw[1]), self.limits)
            bounds = (frame.first, frame.last)
            return self.producer.push_columns(
                session, frame.seq, frame.times, frame.records, bounds, raw
            )
        if frame.type == "push":
            check_records(list(map(itemgetter(1), frame.records)), len(raw[1]), self.limits)
            return self.producer.push(session, frame.seq, list(frame.records), raw)
        return self.producer.advance(session, frame.time, frame.seq)

    async def _close_session(self) -> None:
        """Close the session as the client asks: its ack (no credits left), then the socket."""
        ack = self.producer.close_session(self.session.id)
        self.unanswered -= 1
        await self.acks.flush()
        await self.producer.durable()
        await send_json(self.ws, {"type": "ack", **ack_json(ack), "credits": 0})
        await self.ws.close()

    async def _refused(self, error: ServiceError) -> bool:
        """Answer a refused frame with an error frame; whether to go on.

        A session or input that is gone (404, 410) also closes the socket.
        """
        self.unanswered -= 1
        await self.acks.flush()
        await send_json(self.ws, {**_error_frame(error), "credits": self.credits - self.unanswered})
        code = _CLOSE_FOR_STATUS.get(error.status)
        if code is not None:
            await close_socket(self.ws, code, error.detail)
            return False
        return True


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
    """The ``error`` frame answering a refused frame: the problem's title, status, detail."""
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
