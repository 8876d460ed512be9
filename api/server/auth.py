"""Authentication: bearer tokens name the tenant every request acts for."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from api.server.arrow import ARROW_STREAM, UnsupportedMediaType
from api.server.context import MANAGER, SETTINGS, TENANT
from service.app import Forbidden, Settings, Unauthorized

PUBLIC = ("/healthz", "/readyz", "/metrics")
"""Paths served without a token (and the page's files, under :data:`PAGE`)."""

PAGE = "/ui/"
"""The dataflow page's files: public, they hold no data (:mod:`api.server.ui`)."""

WS_PROTOCOL = "frontier"
"""The WebSocket subprotocol every socket selects when a client offers it."""

WS_BEARER = "frontier.bearer."
"""A browser's WebSocket cannot send headers, so it offers its token as a subprotocol:
``frontier.bearer.<the token in base64url, without padding>``, beside :data:`WS_PROTOCOL`
(which the server selects: the token is never echoed)."""


def socket_bearer(request: web.Request) -> str | None:
    """The ``Bearer`` credentials a WebSocket upgrade offers as a subprotocol, if any.

    >>> from aiohttp.test_utils import make_mocked_request
    >>> offer = "frontier, frontier.bearer.czNjcmV0"
    >>> socket_bearer(make_mocked_request(
    ...     "GET", "/", headers={"Upgrade": "websocket", "Sec-WebSocket-Protocol": offer}))
    'Bearer s3cret'
    """
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return None
    for header in request.headers.getall("Sec-WebSocket-Protocol", ()):
        for offered in header.split(","):
            offered = offered.strip()
            if offered.startswith(WS_BEARER):
                encoded = offered.removeprefix(WS_BEARER)
                try:
                    token = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
                    return "Bearer " + token.decode()
                except (binascii.Error, ValueError):
                    raise Unauthorized(
                        "the frontier.bearer. subprotocol must carry the token in base64url"
                    ) from None
    return None


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

    A body without a ``Content-Type``, or of a type browsers send cross-site without a
    preflight, is 415 everywhere; a WebSocket upgrade whose ``Origin`` is another host is
    403 on a server without tokens (with tokens, a page of another site has no token to
    offer).
    """
    if request.body_exists and "Content-Type" not in request.headers:
        raise UnsupportedMediaType(
            f"a {request.method} body needs its Content-Type (application/json, or "
            f"{ARROW_STREAM} where Arrow is taken): a page of another site can send one "
            "without, unasked"
        )
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


LOOPBACK_NAMES = frozenset(("localhost", "localhost.localdomain"))


def own_host(request: web.Request) -> None:
    """On a server without tokens, answer only requests naming this server as their Host.

    A page of another site can make a browser reach a tokenless server on loopback or a
    private network by pointing a name of its own at the server's address (DNS rebinding):
    the ``Host`` is then that name. An address literal, a loopback name, the listen address
    and ``allowed_hosts`` are this server's; any other name is 403.
    """
    settings = request.app[SETTINGS]
    if settings.tokens:
        return
    host = urlsplit(f"//{request.host}").hostname or ""
    if host in LOOPBACK_NAMES or host == settings.host or host in settings.allowed_hosts:
        return
    try:
        ipaddress.ip_address(host)  # an address: no name was pointed at it
    except ValueError:
        raise Forbidden(
            f"Host {host!r} is not this server's: without tokens, a server answers only its "
            "own address, localhost and the names in allowed_hosts (a name of another site "
            "pointed at it is DNS rebinding)"
        ) from None


@web.middleware
async def auth_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Resolve the tenant before any handler (and before any WebSocket upgrade).

    A WebSocket's token comes in its ``Authorization`` header or, from a browser, as a
    subprotocol (:func:`socket_bearer`).
    """
    own_host(request)
    if request.path not in PUBLIC and not request.path.startswith(PAGE):
        same_site(request)
        header = request.headers.get("Authorization") or socket_bearer(request)
        request[TENANT] = authenticate(request.app[SETTINGS], header)
        request.app[MANAGER].check_ready()  # 503 while the data directory is recovered
    return await handler(request)
