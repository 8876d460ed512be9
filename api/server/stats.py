"""The stats subscription: a dataflow's counts and pace over a WebSocket, every interval.

``GET /v1/dataflows/{id}/stats?interval=SECONDS`` (a WebSocket, ``asyncapi.yaml``): one
``stats`` message at once, then one every ``interval`` seconds (default 1, from 0.25 to
60). Each carries the dataflow's counters now (records per operator port, busy seconds,
inputs with their sessions and transactions, outputs with their subscribers and consumers)
and the samples of its pace taken since the previous message: the first message has every
sample kept (the last five minutes), so a client draws the recent past at once. The event
loop's lateness and last stalls come with each.

What a client is sent is never queued: a message is made when the previous one has been
written, so a slow client gets fewer messages, not a backlog (the samples it missed come
with the next one, up to the five minutes kept).
"""

from __future__ import annotations

import asyncio
import math

from aiohttp import WSCloseCode, web

from api.codec import live_json
from api.server.context import manager_of, tenant_of
from api.server.forward import from_holders
from api.server.sockets import GONE, close_socket, open_socket, send_json, stopping
from service.app import BadRequest, Dataflow, Gone, NotFound, Unavailable

DEFAULT_INTERVAL = 1.0
SHORTEST_INTERVAL = 0.25
LONGEST_INTERVAL = 60.0


def interval_param(request: web.Request) -> float:
    """The ``interval`` query parameter in seconds; 400 unless within the bounds."""
    raw = request.query.get("interval")
    if raw is None:
        return DEFAULT_INTERVAL
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not SHORTEST_INTERVAL <= seconds <= LONGEST_INTERVAL:
        raise BadRequest(
            f"interval must be a number of seconds from {SHORTEST_INTERVAL:g} to "
            f"{LONGEST_INTERVAL:g}, not {raw!r}"
        )
    return seconds


async def _closed(ws: web.WebSocketResponse) -> None:
    """Read the socket until the client closes it (it has nothing else to send)."""
    async for _message in ws:
        pass


async def stats(request: web.Request) -> web.WebSocketResponse:
    """Send a dataflow's stats every interval until the client leaves or the dataflow goes.

    A dataflow unknown to the tenant is a 404 before the upgrade, one with
    ``max_subscribers_per_dataflow`` stats subscribers already a 429; one dropped while
    watched ends the socket with ``closed`` and 4410.
    """
    manager = manager_of(request)
    tenant = tenant_of(request)
    every = interval_param(request)
    dataflow = manager.follow_stats(tenant, request.match_info["id"])  # 404, 410 or 429
    try:
        return await _send(request, dataflow, every)
    finally:
        dataflow.unfollow_stats()


async def _send(request: web.Request, dataflow: Dataflow, every: float) -> web.WebSocketResponse:
    """Upgrade, then send the stats each ``every`` seconds (see :func:`stats`)."""
    manager = manager_of(request)
    tenant = tenant_of(request)
    inputs = dataflow.summary().inputs
    ws = await open_socket(request)
    closed = asyncio.ensure_future(_closed(ws))
    after = -1
    try:
        while not ws.closed:
            try:
                try:
                    # In a cluster, inputs other processes hold are described as they see them.
                    elsewhere = await from_holders(request, dataflow.id, inputs)
                except Unavailable:
                    elsewhere = {}  # a holder out of reach: this round shows the rest
                live = manager.live(tenant, dataflow.id, after, elsewhere)
            except (Gone, NotFound) as error:
                await send_json(ws, {"type": "closed", "reason": str(error)})
                code = int(WSCloseCode.GOING_AWAY) if stopping(request) else GONE
                await close_socket(ws, code, str(error))
                break
            if live.samples:
                after = live.samples[-1].seq
            try:
                await send_json(ws, live_json(live))
            except ConnectionError:
                break  # the client is gone
            await asyncio.wait({closed}, timeout=every)
    finally:
        closed.cancel()
    return ws
