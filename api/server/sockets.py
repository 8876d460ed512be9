"""What every WebSocket endpoint shares: close codes, bounded sockets, JSON and raw frames.

Every way a socket ends has a documented close code (``docs/api.md``, ``asyncapi.yaml``);
they are all here. The endpoints are in :mod:`api.server.websockets`, the producers'
protocol in :mod:`api.server.producer_stream`.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import orjson
from aiohttp import WSCloseCode, web

from api.server.auth import WS_PROTOCOL
from api.server.context import SOCKETS, manager_of

BAD_FRAME = 4400
NOT_FOUND = 4404
SLOW_CONSUMER = 4408
GONE = 4410
TOO_LARGE = 4413
NO_CREDIT = 4429

HEARTBEAT = 30.0
FRONTIER_BUFFER_BYTES = 64 * 1024
"""A frontier subscriber whose socket holds more unsent bytes than this is sent nothing
more until it drains; then it gets the latest frontiers of what changed (coalesced).
A producer's acks, written together, wait for the socket to drain past it too."""

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


async def open_socket(request: web.Request, most: int = SUBSCRIBER_FRAME_BYTES) -> BoundedSocket:
    """Upgrade ``request`` to a socket taking frames of up to ``most`` bytes (open: tracked)."""
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


async def send_json(ws: web.WebSocketResponse, value: Any) -> None:
    """Send ``value`` as one binary frame of JSON."""
    await ws.send_bytes(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


async def close_socket(ws: web.WebSocketResponse, code: int, reason: str) -> None:
    """Close with ``code``, and ``reason`` cut to what a close frame can carry."""
    # A close reason must fit in a control frame (123 bytes).
    await ws.close(code=code, message=reason.encode()[:120])


def stopping(request: web.Request) -> bool:
    """Whether the service is stopping (sockets then close with 1001, going away)."""
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
