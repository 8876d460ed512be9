"""Authentication: bearer tokens name the tenant every request acts for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from api.server.arrow import UnsupportedMediaType
from api.server.context import MANAGER, SETTINGS, TENANT
from service.app import Forbidden, Settings, Unauthorized

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


CROSS_SITE_TYPES = frozenset(
    ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data")
)
"""The body types a browser sends to another site without asking it first (CORS "simple"
requests): no request of ours takes them, so a page elsewhere cannot make one."""


def same_site(request: web.Request) -> None:
    """Refuse what a page of another site could make a browser send here.

    A body of a type browsers send cross-site without a preflight is 415 everywhere; a
    WebSocket upgrade whose ``Origin`` is another host is 403 on a server without tokens
    (with tokens, a browser has no bearer token to send along).
    """
    if request.body_exists and request.content_type in CROSS_SITE_TYPES:
        raise UnsupportedMediaType(
            f"a body of type {request.content_type} is not taken (send application/json): "
            "browsers send that type from other sites without asking"
        )
    origin = request.headers.get("Origin")
    if (
        origin is not None
        and request.headers.get("Upgrade", "").lower() == "websocket"
        and not request.app[SETTINGS].tokens
        and urlsplit(origin).netloc != request.host
    ):
        raise Forbidden(
            f"a WebSocket from {origin} (another site) is refused: this server has no tokens, "
            "so only pages it serves itself may open one"
        )


@web.middleware
async def auth_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Resolve the tenant before any handler (and before any WebSocket upgrade)."""
    if request.path not in PUBLIC:
        same_site(request)
        request[TENANT] = authenticate(request.app[SETTINGS], request.headers.get("Authorization"))
        request.app[MANAGER].check_ready()  # 503 while the data directory is recovered
    return await handler(request)
