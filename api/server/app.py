"""The aiohttp application: middlewares, routes, and the workers' lifecycle.

The workers run as coroutines on the same (uvloop) event loop as the server; the application
starts them on startup and stops them on cleanup, after closing every WebSocket with "going
away". Each resource has a module of its own (dataflows, inputs and sessions, transactions,
outputs and consumers, WebSockets); this one only routes to them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import WSCloseCode, web

from api.codec import encoded_size, frontier_event
from api.server import dataflows, explain, inputs, outputs, stats, transactions, ui, websockets
from api.server.auth import auth_middleware
from api.server.context import MANAGER, SERVER, SETTINGS, SOCKETS, OpenSockets
from api.server.forward import close_client, forward_middleware
from api.server.health import healthz, readyz
from api.server.metrics import metrics_handler
from api.server.problems import problems_middleware
from api.server.quotas import RATES, TenantRates, rate_middleware
from service.app import DataflowManager, Settings


async def _server_header(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    manager = app[MANAGER]
    await manager.start()
    yield
    await manager.stop()


async def _going_away(app: web.Application) -> None:
    # First let every subscriber's handler send its final event (with a resume point) and
    # close with "going away"; then close whatever is still open (producers).
    app[MANAGER].closing()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2.0
    while any(not ws.closed for ws in app[SOCKETS].open) and loop.time() < deadline:
        await asyncio.sleep(0.01)
        if all(ws.closed or ws in app[SOCKETS].producers for ws in app[SOCKETS].open):
            break
    for ws in list(app[SOCKETS].open):
        if not ws.closed:
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"the server is shutting down")


def create_app(settings: Settings, manager: DataflowManager | None = None) -> web.Application:
    """The application for ``settings`` (a manager is created if none is given)."""
    app = web.Application(
        middlewares=[problems_middleware, auth_middleware, rate_middleware, forward_middleware],
        client_max_size=settings.limits.max_body_bytes,
    )
    app[SETTINGS] = settings
    app[MANAGER] = manager or DataflowManager(
        settings,
        frontier_codec=frontier_event,
        record_sizer=encoded_size,
    )
    app[SOCKETS] = OpenSockets()
    app[RATES] = TenantRates(settings.limits)
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_going_away)
    app.on_cleanup.append(close_client)
    app.on_response_prepare.append(_server_header)
    base = "/v1/dataflows"
    one = f"{base}/{{id}}"
    an_input = f"{one}/inputs/{{input}}"
    session = f"{an_input}/sessions/{{session}}"
    an_output = f"{one}/outputs/{{output}}"
    app.router.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/readyz", readyz),
            web.get("/metrics", metrics_handler),
            web.get("/v1/operators", dataflows.operators_catalogue),
            web.post(base, dataflows.create_dataflow),
            web.get(base, dataflows.list_dataflows),
            web.get(one, dataflows.get_dataflow),
            web.delete(one, dataflows.delete_dataflow),
            web.get(f"{one}/explain", explain.explain),
            web.get(an_input, inputs.get_input),
            web.post(f"{an_input}/commit", transactions.commit_input),
            web.post(f"{an_input}/sessions", inputs.open_session),
            web.post(f"{session}/push", inputs.push),
            web.post(f"{session}/advance", inputs.advance),
            web.post(f"{session}/commit", transactions.commit),
            web.delete(session, inputs.close_session),
            web.put(f"{an_input}/transactions/{{txn}}", transactions.stage),
            web.delete(f"{an_input}/transactions/{{txn}}", transactions.abort),
            web.post(f"{an_input}/close", inputs.close_input),
            web.get(an_output, outputs.get_output),
            web.get(f"{an_output}/times", outputs.output_times),
            web.put(f"{an_output}/consumers/{{consumer}}", outputs.commit_consumer),
            web.delete(f"{an_output}/consumers/{{consumer}}", outputs.forget_consumer),
            web.get(f"{one}/frontiers", websockets.frontiers),
            web.get(f"{one}/stats", stats.stats),
            web.get(f"{an_output}/events", websockets.output_events),
            web.get(f"{an_input}/push", websockets.push_stream),
            web.get("/ui/", ui.page),
            web.get("/ui/{asset}", ui.asset),
        ]
    )
    return app


__all__ = ["MANAGER", "SETTINGS", "SOCKETS", "create_app"]
