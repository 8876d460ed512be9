"""Dataflows: create (or plan), list, describe and drop; and the operator catalogue."""

from __future__ import annotations

from aiohttp import web

from api.codec import dataflow_json, summary_json
from api.graph_model import check_graph_body, graph_spec
from api.models import CreateDataflow
from api.server.context import manager_of, tenant_of
from api.server.forward import from_holders
from api.server.http import flag, json_response, parse, read_body
from api.server.paging import decode_cursor, encode_cursor, limit_param
from service.app import BadRequest, describe_catalogue


async def operators_catalogue(_request: web.Request) -> web.Response:
    """The operators graphs may use."""
    return json_response({"operators": describe_catalogue()})


async def create_dataflow(request: web.Request) -> web.Response:
    """Validate a graph; create it (201) or, with ``dry_run``, return its compiled plan.

    The body's size and nesting are checked before it is parsed, the graph's shape by the
    graph model (:mod:`api.graph_model`), and its meaning by the service, which gets the
    checked ``GraphSpec``.
    """
    manager = manager_of(request)
    check_graph_body(await read_body(request))
    body = await parse(request, CreateDataflow)  # the body read again is aiohttp's cached copy
    dry_run = flag(request, "dry_run")
    graph = graph_spec(body.graph)
    if dry_run:
        return json_response({"plan": manager.plan(graph)})
    record = await manager.create(tenant_of(request), graph, body.name)
    return json_response(
        dataflow_json(manager.describe(record, operators=False)),
        status=201,
        headers={"Location": f"/v1/dataflows/{record.id}"},
    )


async def list_dataflows(request: web.Request) -> web.Response:
    """The tenant's dataflows, a page at a time (with ``name``, only those of that name)."""
    limit = limit_param(request)
    after = None
    if "cursor" in request.query:
        # A cursor is the position (creation time, id) of the last item given.
        created, _, last = decode_cursor(request.query["cursor"]).partition(" ")
        try:
            after = (float(created), last)
        except ValueError:
            raise BadRequest(
                f"cursor {request.query['cursor']!r} is not one this server gave out"
            ) from None
    name = request.query.get("name")
    page = manager_of(request).page(tenant_of(request), after, limit, name)
    last_item = page.items[-1] if page.items else None
    next_cursor = None
    if page.more and last_item is not None:
        next_cursor = encode_cursor(f"{last_item.created_at!r} {last_item.id}")
    return json_response(
        {"items": [summary_json(s) for s in page.items], "next_cursor": next_cursor}
    )


async def get_dataflow(request: web.Request) -> web.Response:
    """One dataflow in full."""
    manager = manager_of(request)
    record = manager.get(tenant_of(request), request.match_info["id"])
    operators = flag(request, "operators")
    # In a cluster, an input another process holds is described as that process sees it.
    elsewhere = await from_holders(request, record.id, record.summary().inputs)
    return json_response(dataflow_json(manager.describe(record, operators, elsewhere)))


async def delete_dataflow(request: web.Request) -> web.Response:
    """Drop a dataflow."""
    await manager_of(request).drop(tenant_of(request), request.match_info["id"])
    return web.Response(status=204)
