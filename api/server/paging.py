"""Pages of listings: the ``limit`` parameter and opaque cursors."""

from __future__ import annotations

import base64

from aiohttp import web

from service.app import BadRequest


def limit_param(request: web.Request, default: int = 100, most: int = 1000) -> int:
    """The ``limit`` query parameter: an integer from 1 to ``most`` (400 otherwise)."""
    raw = request.query.get("limit", str(default))
    # isdigit alone takes "²" (a digit int() refuses): ASCII digits only.
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= most:
        raise BadRequest(f"limit must be an integer from 1 to {most}, not {raw!r}")
    return int(raw)


def encode_cursor(value: str) -> str:
    """An opaque cursor for ``value``."""
    return base64.urlsafe_b64encode(value.encode()).decode()


def decode_cursor(value: str) -> str:
    """What :func:`encode_cursor` made ``value`` from; 400 if it did not make it."""
    try:
        decoded = base64.urlsafe_b64decode(value.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    if not decoded:
        raise BadRequest(f"cursor {value!r} is not one this server gave out")
    return decoded
