"""Why is this time not complete? ``GET /v1/dataflows/{id}/explain?location=&time=``."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from api.codec import explain_json
from api.server.context import manager_of, tenant_of
from api.server.forward import from_holders
from api.server.http import json_response
from service.app import BadRequest


def _required(request: web.Request, name: str, what: str) -> str:
    value = request.query.get(name)
    if value is None:
        raise BadRequest(f"the query parameter {name} is required: {what}")
    return value


async def explain(request: web.Request) -> web.Response:
    """Every pointstamp holding ``time`` back at ``location``, or that it is complete there.

    The time is JSON (``5``, ``[1, 0]``); one that is not JSON at all is handed on as its
    text, so that the answer (422) says which time domain the location expects.
    """
    location = _required(request, "location", "a node's output port (node:port) or an output")
    raw = _required(request, "time", "a time (an integer, or [outer, inner] for products)")
    time: Any
    try:
        time = orjson.loads(raw)
    except orjson.JSONDecodeError:
        time = raw
    manager = manager_of(request)
    record = manager.get(tenant_of(request), request.match_info["id"])
    # In a cluster, the inputs other processes hold are explained as they describe them.
    elsewhere = await from_holders(request, record.id, record.summary().inputs)
    view = manager.explain(tenant_of(request), record.id, location, time, elsewhere)
    return json_response(explain_json(view))
