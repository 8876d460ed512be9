"""Reading requests and writing JSON responses: bodies, flags, times in query parameters."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from api.codec import time_from_json
from api.server.context import SETTINGS
from api.server.problems import invalid_body
from service.app import BadRequest, ServiceError

M = TypeVar("M", bound=BaseModel)


def dumps(value: Any) -> bytes:
    """JSON bytes with orjson (non-str dict keys allowed)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def json_response(
    value: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response encoded with orjson."""
    return web.Response(
        status=status, body=dumps(value), content_type="application/json", headers=headers
    )


class RequestTimeout(ServiceError):
    """The client did not send its request's body in time."""

    status = 408
    slug = "request-timeout"
    title = "Request timeout"


async def read_body(request: web.Request) -> bytes:
    """The request's body, if it arrives within ``body_timeout_seconds``; else 408.

    A client that sends headers and then a body a byte at a time would otherwise hold its
    connection, and the memory of what it sent, for as long as it likes.
    """
    most = request.app[SETTINGS].limits.body_timeout_seconds
    try:
        async with asyncio.timeout(most):
            return await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"the request's body did not arrive within body_timeout_seconds ({most:g})"
        ) from None


async def parse(request: web.Request, model: type[M]) -> M:
    """The request body as ``model``: 400 if not JSON, 422 if the wrong shape."""
    body = await read_body(request)
    try:
        parsed = model.model_validate_json(body or b"{}")
    except ValidationError as error:
        if any(e.get("type") == "json_invalid" for e in error.errors()):
            raise BadRequest("the request body is not valid JSON") from None
        raise invalid_body(error) from None
    strict_json(body or b"{}", "the request body")
    return parsed


STRICT_JSON = "NaN, Infinity and numbers beyond a double are not JSON"


def strict_json(data: bytes | str, what: str) -> None:
    """:class:`BadRequest` if orjson refuses ``data`` (pydantic takes NaN, Infinity, 1e400).

    Such a value would be read back as ``null``: refused where it arrives, not stored.
    """
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise BadRequest(f"{what} is not valid JSON ({STRICT_JSON}): {error}") from None


def flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter: ``true`` or ``false`` (absent: false); anything else is 400.

    Strict on purpose: a misspelt ``dry_run=on`` must not create a dataflow.
    """
    raw = request.query.get(name, "false")
    if raw not in ("true", "false"):
        raise BadRequest(f"{name} must be true or false, not {raw!r}")
    return raw == "true"


def time_param(request: web.Request, name: str) -> Any:
    """The query parameter ``name`` as a time (``None`` if absent); 400 if it is not one."""
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return time_from_json(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValueError, TypeError):
        raise BadRequest(
            f"{name} must be a time (an integer or [outer, inner]), not {raw!r}"
        ) from None
