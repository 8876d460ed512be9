"""Errors as ``application/problem+json`` (RFC 9457), and the middleware that makes them.

Every error a client can cause is a :class:`~service.app.errors.ServiceError` (or a body that
is not JSON, or one that does not fit the request's model): each becomes a problem document
with the right status. Anything else is logged and becomes a 500 without internals.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from api.models import problem_from_validation_error
from service.app import Invalid, ServiceError

log = logging.getLogger("frontier.api")

PROBLEM_TYPE = "https://frontier.dev/problems/"
CONTENT_TYPE = "application/problem+json"


def problem_body(status: int, slug: str, title: str, detail: str, **extra: Any) -> bytes:
    """A problem+json document's bytes (RFC 9457): ``type``, ``title``, ``status``, ``detail``."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + slug,
        "title": title,
        "status": status,
        "detail": detail,
    }
    body.update({k: v for k, v in extra.items() if v is not None})
    return orjson.dumps(body)


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> web.Response:
    """A problem+json response."""
    body = problem_body(status, slug, title, detail, **extra)
    return web.Response(status=status, body=body, content_type=CONTENT_TYPE)


def problem_for(error: ServiceError) -> web.Response:
    """The problem response for a service error."""
    response = problem(error.status, error.slug, error.title, error.detail, **error.extra)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="frontier"'
    retry_after = getattr(error, "retry_after", None)  # Unavailable, TooManyRequests
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


class NotAcceptable(ServiceError):
    """The answer cannot be given in the representation the ``Accept`` header asks for.

    For example an Arrow read (int64 times) of times from 2**63 on: they are read as JSON.
    """

    status = 406
    slug = "not-acceptable"
    title = "Not acceptable"


def invalid_body(error: ValidationError) -> ServiceError:
    """A body of the wrong shape: 422 with a pointer per problem."""
    problems = problem_from_validation_error(error)
    return Invalid(f"the request body has {len(problems)} problem(s)", problems)


@web.middleware
async def problems_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Turn every error into problem+json; only unexpected ones become 500."""
    try:
        return await handler(request)
    except ServiceError as error:
        return problem_for(error)
    except ValidationError as error:
        return problem_for(invalid_body(error))
    except web.HTTPRequestEntityTooLarge as error:
        return problem(413, "payload-too-large", "Payload too large", error.text or "too large")
    except web.HTTPException as error:
        if error.status < 400:
            raise
        slug = {404: "not-found", 405: "method-not-allowed"}.get(error.status, "http-error")
        response = problem(
            error.status, slug, error.reason, f"{request.method} {request.path}: {error.reason}"
        )
        if "Allow" in error.headers:
            response.headers["Allow"] = error.headers["Allow"]
        return response
    except Exception:
        log.exception("unexpected error in %s %s", request.method, request.path)
        return problem(500, "internal", "Internal server error", "an unexpected error occurred")
