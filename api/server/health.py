"""Liveness and readiness."""

from __future__ import annotations

from aiohttp import web

from api.server.context import manager_of
from api.server.http import json_response


async def healthz(request: web.Request) -> web.Response:
    """Liveness: 503 once an error in the engine has stopped the workers (restart me)."""
    failure = manager_of(request).failure
    if failure is not None:
        return json_response({"status": "failed", "error": failure}, status=503)
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Readiness: the workers are running and the data directory is recovered."""
    manager = manager_of(request)
    if manager.running and manager.ready:
        problem = manager.write_problem()
        if problem is not None:  # reads and subscriptions go on; writes are refused
            return json_response({"status": "unavailable", "error": problem}, status=503)
        return json_response({"status": "ready"})
    if manager.running:
        return json_response({"status": "recovering"}, status=503)
    return json_response({"status": "not ready"}, status=503)
