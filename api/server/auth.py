"""Authentication: bearer tokens name the tenant every request acts for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from api.server.context import MANAGER, SETTINGS, TENANT
from service.app import Settings, Unauthorized

PUBLIC = ("/healthz", "/readyz", "/metrics")
"""Paths served without a token."""


def authenticate(settings: Settings, header: str | None) -> str:
    """The tenant a bearer token belongs to; :class:`Unauthorized` otherwise."""
    if not settings.tokens:
        return "default"
    if header is None or not header.startswith("Bearer "):
        raise Unauthorized("an Authorization: Bearer <token> header is required")
    tenant = settings.tokens.get(header.removeprefix("Bearer ").strip())
    if tenant is None:
        raise Unauthorized("the bearer token is not valid")
    return tenant


@web.middleware
async def auth_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Resolve the tenant before any handler (and before any WebSocket upgrade)."""
    if request.path not in PUBLIC:
        request[TENANT] = authenticate(request.app[SETTINGS], request.headers.get("Authorization"))
        request.app[MANAGER].check_ready()  # 503 while the data directory is recovered
    return await handler(request)
