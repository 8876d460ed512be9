"""In a cluster, requests for an input go to the process that holds it.

Every process of a cluster builds every dataflow, but each input lives on one worker (a stable
hash of its name picks it among all the cluster's workers), where its sessions, transactions
and log are. Any process takes any request: one for an input another process holds is
forwarded there, as it came (method, path, query, body, the headers that say what it is and
who sends it), and its answer is handed back as it went (status, body, headers). A producer's
WebSocket is relayed frame by frame, both ways, closing as the other side closes. So a push
is applied once, where the input lives, whichever process a client talks to.

A forwarded request carries :data:`FORWARDED`, and is never forwarded again: processes that
disagreed about an owner could otherwise pass a request around forever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import WSMsgType, web

from api.codec import input_from_json
from api.server.context import MANAGER, SETTINGS
from api.server.problems import problem
from service.app import InputView, Unavailable

FORWARDED = "Frontier-Forwarded-By"
"""The header a forwarded request carries: the index of the process that forwarded it."""

CLIENT = web.AppKey("forwarding_client", aiohttp.ClientSession)

_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Transfer-Encoding",
        "Content-Length",
        "Upgrade",
        "Host",
        "TE",
        "Trailer",
        "Proxy-Authorization",
        "Proxy-Authenticate",
        "Sec-WebSocket-Key",
        "Sec-WebSocket-Version",
        "Sec-WebSocket-Extensions",
        "Sec-WebSocket-Accept",
        "Server",
        "Date",
    )
)
"""Headers about one connection, not the request: each hop sets its own."""

MAX_FORWARDED_CONNECTIONS = 100
"""Connections a process keeps open to its peers' APIs, at most (requests past it wait)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_SLUGS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    409: "conflict",
    410: "gone",
}


def _owner(request: web.Request) -> int | None:
    """The process to forward ``request`` to, or ``None`` to answer it here."""
    if FORWARDED in request.headers:
        return None
    name = request.match_info.get("input")
    dataflow = request.match_info.get("id")
    if name is None or dataflow is None:
        return None
    return request.app[MANAGER].input_process(dataflow, name)


@web.middleware
async def forward_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer a request for an input another process holds by forwarding it there."""
    process = _owner(request)
    if process is None:
        return await handler(request)
    address = _api(request, process)
    url = f"http://{address}{request.rel_url}"
    headers = _forwarded_headers(request)
    client = _client(request.app)
    try:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await _relay(request, client, url, headers, process)
        body = await request.read()
        async with client.request(request.method, url, data=body, headers=headers) as answer:
            payload = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
            return web.Response(status=answer.status, body=payload, headers=kept)
    except (TimeoutError, aiohttp.ClientConnectionError) as error:
        raise _unreachable(process, address, request.match_info["input"], error) from None


async def from_holders(
    request: web.Request, dataflow: str, names: list[str]
) -> dict[str, InputView]:
    """What the processes holding a dataflow's inputs ``names`` say of each (``GET`` input).

    Only the inputs another process holds are asked about (none with one process). A
    dataflow's description and explanations at any process show every input as its holder
    sees it; the request's own headers (its token) go with each question.
    """
    manager = request.app[MANAGER]
    asked = {name: manager.input_process(dataflow, name) for name in names}
    remote = {name: process for name, process in asked.items() if process is not None}
    if not remote:
        return {}
    headers = _forwarded_headers(request)
    client = _client(request.app)

    async def ask(name: str, process: int) -> InputView:
        address = _api(request, process)
        url = f"http://{address}/v1/dataflows/{dataflow}/inputs/{name}"
        try:
            async with client.get(url, headers=headers) as answer:
                answer.raise_for_status()
                return input_from_json(orjson.loads(await answer.read()))
        except (TimeoutError, aiohttp.ClientError) as error:
            raise _unreachable(process, address, name, error) from None

    answers = await asyncio.gather(*(ask(name, p) for name, p in remote.items()))
    return dict(zip(remote, answers, strict=True))


def _api(request: web.Request, process: int) -> str:
    """The API address (``host:port``) of ``process`` of this server's cluster."""
    cluster = request.app[SETTINGS].cluster
    assert cluster is not None  # another process to ask means a cluster
    return cluster.apis[process]


def _forwarded_headers(request: web.Request) -> dict[str, str]:
    """The request's own headers (its token among them), marked as forwarded by this process."""
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
    headers[FORWARDED] = str(request.app[MANAGER].process)
    return headers


def _unreachable(process: int, address: str, name: str, error: BaseException) -> Unavailable:
    cause = str(error) or type(error).__name__
    return Unavailable(
        f"process {process} ({address}), which holds input {name!r}, cannot be reached: {cause}",
        retry_after=1,
    )


def _client(app: web.Application) -> aiohttp.ClientSession:
    """The app's one client to its peers (made on first use, closed with the app)."""
    client = app.get(CLIENT)
    if client is None or client.closed:
        connector = aiohttp.TCPConnector(limit=MAX_FORWARDED_CONNECTIONS)
        client = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent",)
        )
        app[CLIENT] = client
    return client


async def close_client(app: web.Application) -> None:
    """Close the client to the peers (on the app's cleanup)."""
    client = app.get(CLIENT)
    if client is not None:
        await client.close()


async def _relay(
    request: web.Request,
    client: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    process: int,
) -> web.StreamResponse:
    """Relay a WebSocket to the process holding the input: frames both ways, and the close.

    The peer's socket is opened first, so a refusal there (a 404, a 401) is the client's
    answer, as it would have been had the client asked the peer itself.
    """
    protocols = [p.strip() for p in headers.pop("Sec-WebSocket-Protocol", "").split(",") if p]
    limit = request.app[SETTINGS].limits.max_frame_bytes
    try:
        upstream = await client.ws_connect(
            url.replace("http://", "ws://", 1),
            headers=headers,
            protocols=protocols,
            max_msg_size=limit,
            autoping=True,
        )
    except aiohttp.WSServerHandshakeError as refused:
        # aiohttp keeps the refusal's status, not its body: say it again, with its status.
        slug = _SLUGS.get(refused.status, "forwarded")
        detail = f"process {process}, which holds the input, refused the socket: {refused.message}"
        return problem(refused.status, slug, refused.message or "Refused", detail)
    ws = web.WebSocketResponse(
        protocols=(upstream.protocol,) if upstream.protocol else (), max_msg_size=limit
    )
    await ws.prepare(request)
    relays = [
        asyncio.ensure_future(_pump(upstream, ws)),
        asyncio.ensure_future(_pump(ws, upstream)),
    ]
    try:
        await asyncio.wait(relays, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for relay in relays:
            relay.cancel()
        for relay in relays:
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await relay
        if not upstream.closed:
            await upstream.close()
        if not ws.closed:
            await ws.close()
    return ws


async def _pump(source: Any, sink: Any) -> None:
    """Send every frame of one socket on to the other, then close it as the first closed.

    Both are aiohttp WebSockets (a server's and a client's), which share these methods.
    """
    async for message in source:
        if message.type is WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type is WSMsgType.BINARY:
            await sink.send_bytes(message.data)
    await sink.close(code=source.close_code or 1000)


__all__ = ["FORWARDED", "close_client", "forward_middleware", "from_holders"]
