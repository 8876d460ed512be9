"""Connections: a cap on how many are open, and a deadline for a request's headers.

aiohttp closes a connection that sends no complete request within its keep-alive timeout
(``idle_timeout_seconds`` here) and bounds the sizes of request lines and headers, but it
keeps any number of connections, and gives a new one as long to send its first request as
an idle one between requests. So a client holding thousands of sockets open, each silent or
sending a header line now and then, used to take every file descriptor, and then the
server could not accept ``/healthz``. Here every connection the listening socket accepts
goes through :class:`Guard`, which

* answers 503 and closes a connection beyond ``max_connections`` (or beyond what the
  process's file-descriptor limit leaves room for), or beyond ``max_connections_per_client``
  from one client address, at once, without parsing anything;
* closes, with a 408, a connection whose request line and headers have not all arrived
  within ``header_timeout_seconds`` of its opening.

Bodies have their own deadline (``body_timeout_seconds``, :func:`api.server.http.read_body`).
What the guard does is public ``asyncio.Protocol`` API around aiohttp's protocol: it passes
every call through, and looks only at whether the bytes so far hold a blank line.
"""

from __future__ import annotations

import asyncio
import resource
import ssl
from collections.abc import Callable
from typing import Any, cast

from aiohttp import web

from api.server.context import SERVER
from api.server.problems import CONTENT_TYPE, problem_body

FD_RESERVE = 256
"""File descriptors kept for everything but client connections (logs, the catalogue,
segment files, the workers' sockets)."""


def _response(status: int, reason: str, detail: str) -> bytes:
    """A whole HTTP response (the connection has no aiohttp request to answer through)."""
    body = problem_body(status, reason.lower().replace(" ", "-"), reason, detail)
    head = (
        f"HTTP/1.1 {status} {reason}\r\nServer: {SERVER}\r\nConnection: close\r\n"
        f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def connection_cap(most: int) -> int:
    """``most``, or fewer if the file-descriptor limit leaves less room (never below 1)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return most
    return max(1, min(most, soft - FD_RESERVE))


class Connections:
    """The open connections of one listening socket, and the rules they are held to."""

    __slots__ = (
        "busy",
        "by_client",
        "client_busy",
        "header_timeout",
        "most",
        "most_per_client",
        "open",
        "refused",
        "timed_out",
    )

    def __init__(self, most: int, header_timeout: float, most_per_client: int = 1 << 62) -> None:
        self.most = connection_cap(most)
        self.most_per_client = most_per_client
        self.header_timeout = header_timeout
        self.open = 0
        self.by_client: dict[str, int] = {}
        """Open connections per client address."""
        self.refused = 0
        """Connections answered 503 because ``most`` were open."""
        self.timed_out = 0
        """Connections closed because their headers took too long."""
        self.busy = _response(
            503,
            "Service Unavailable",
            f"the server holds its most connections ({self.most}): try again shortly",
        )
        self.client_busy = _response(
            503,
            "Service Unavailable",
            f"this client holds the most connections one client may "
            f"({most_per_client}, max_connections_per_client): close some",
        )

    def admit(self, client: str) -> bytes | None:
        """Count a new connection from ``client`` in; or the answer refusing it."""
        held = self.by_client.get(client, 0)
        if held >= self.most_per_client:
            self.refused += 1
            return self.client_busy
        if self.open >= self.most:
            self.refused += 1
            return self.busy
        self.open += 1
        self.by_client[client] = held + 1
        return None

    def leave(self, client: str) -> None:
        """Count a connection from ``client`` out."""
        self.open -= 1
        held = self.by_client[client] - 1
        if held:
            self.by_client[client] = held
        else:
            del self.by_client[client]


CONNECTIONS = web.AppKey("connections", Connections)
"""The served application's :class:`Connections` (absent where no guarded site serves it)."""


class Guard(asyncio.Protocol):
    """One accepted connection: aiohttp's protocol, held to :class:`Connections`' rules."""

    __slots__ = ("_client", "_inner", "_rules", "_tail", "_timer", "_transport", "counted")

    def __init__(self, inner: asyncio.Protocol, rules: Connections) -> None:
        self._inner = inner
        self._rules = rules
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""
        self._client = ""
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Refuse the connection past the caps; else start its header deadline."""
        transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's classes
        self._transport = transport
        rules = self._rules
        peer = transport.get_extra_info("peername")
        self._client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        refusal = rules.admit(self._client)
        if refusal is not None:
            transport.write(refusal)
            transport.close()
            return
        self.counted = True
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(rules.header_timeout, self._too_slow)
        self._inner.connection_made(transport)

    def _too_slow(self) -> None:
        self._timer = None
        if self._transport is None or self._transport.is_closing():
            return
        self._rules.timed_out += 1
        self._transport.write(
            _response(
                408,
                "Request Timeout",
                f"the request's headers did not arrive within header_timeout_seconds "
                f"({self._rules.header_timeout:g})",
            )
        )
        self._transport.close()

    def data_received(self, data: bytes) -> None:
        """Pass the bytes on; the first blank line (the end of the headers) ends the deadline."""
        if not self.counted:
            return
        if self._timer is not None:
            seen = self._tail + data
            if b"\r\n\r\n" in seen:
                self._timer.cancel()
                self._timer = None
                self._tail = b""
            else:
                self._tail = seen[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        """Pass it on."""
        return self._inner.eof_received() if self.counted else None

    def pause_writing(self) -> None:
        """Pass it on."""
        if self.counted:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        """Pass it on."""
        if self.counted:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        """Count the connection out and pass it on."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.counted:
            self.counted = False
            self._rules.leave(self._client)
            self._inner.connection_lost(exc)


class GuardedSite(web.BaseSite):
    """A TCP site whose every connection goes through a :class:`Guard`."""

    __slots__ = ("_host", "_port", "connections")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        connections: Connections,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self.connections = connections

    @property
    def name(self) -> str:
        """The site's URL."""
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        """Listen: every accepted connection's protocol is a guard around aiohttp's."""
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        make: Callable[[], Any] = server
        self._server = await loop.create_server(
            lambda: Guard(make(), self.connections),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=True,
        )
