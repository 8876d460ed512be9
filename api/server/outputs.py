"""Outputs: their completed times (JSON or Arrow), and the consumers that read them."""

from __future__ import annotations

from typing import cast

import orjson
from aiohttp import web

from api.codec import consumer_json, cursor, output_json, page_json, times_json
from api.models import ConsumerCommit
from api.server.arrow import ARROW_STREAM, MAX_ARROW_TIME, arrow_from_batches, arrow_from_times
from api.server.context import manager_of, tenant_of
from api.server.http import flag, json_response, parse, time_param
from api.server.paging import limit_param
from api.server.problems import NotAcceptable
from service.app import NotFound, OutputLog, OutputPage


def output_of(request: web.Request) -> OutputLog:
    """The output the request's path names (404/410 if there is none now)."""
    return manager_of(request).output(
        tenant_of(request), request.match_info["id"], request.match_info["output"]
    )


async def get_output(request: web.Request) -> web.Response:
    """An output: its frontier, records out, subscribers and consumers."""
    return json_response(output_json(output_of(request).view()))


async def output_times(request: web.Request) -> web.Response:
    """Completed times of an output in ``[from, to)``, a page at a time.

    With ``counts=true`` each time comes with its number of records instead of them (JSON).
    """
    log = output_of(request)
    start = time_param(request, "from")
    end = time_param(request, "to")
    if "cursor" in request.query:
        start = time_param(request, "cursor")
    limit = limit_param(request)
    counts = flag(request, "counts")
    accept = request.headers.get("Accept", "")
    arrow = not counts and ARROW_STREAM in accept
    typed = arrow and log.schema is not None
    page = log.page(start, end, limit, counts, columns=typed)
    if arrow and _arrow_page(page, _accepts_json(accept)):
        headers = {"X-Frontier": orjson.dumps(times_json(page.frontier)).decode()}
        next_cursor = cursor(page)
        if next_cursor is not None:
            headers["X-Next-Cursor"] = next_cursor
        if typed:
            # A typed output: its columns as they are kept, not one JSON text column.
            assert log.schema is not None
            batches = list(zip(page.times, page.batches or (), strict=True))
            body = arrow_from_batches(batches, log.schema.arrow_type())
        else:
            body = arrow_from_times(list(zip(page.times, page.records or (), strict=True)))
        return web.Response(body=body, content_type=ARROW_STREAM, headers=headers)
    if typed:  # answered as JSON after all (product times, or times beyond int64)
        page = log.page(start, end, limit)
    return json_response(page_json(page))


def _accepts_json(accept: str) -> bool:
    """Whether an ``Accept`` header admits JSON as well (any q above 0)."""
    for item in accept.split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        if kind not in ("application/json", "application/*", "*/*"):
            continue
        weights = [p[2:] for p in params if p.startswith("q=")]
        try:
            if not weights or float(weights[0]) > 0:
                return True
        except ValueError:
            continue
    return False


def _arrow_page(page: OutputPage, json_too: bool) -> bool:
    """Whether ``page`` can be answered as Arrow (its times fit int64).

    If not: ``False`` (answer JSON) when the client takes JSON too (``json_too``), else
    :class:`NotAcceptable` naming why.
    """
    if not page.integer_times:
        if json_too:
            return False
        raise NotAcceptable(
            f"output {page.output!r} has product times, which an Arrow read (an int64 time "
            f"column) cannot carry: read them as JSON"
        )
    ints = cast("list[int]", page.times)
    if ints and ints[-1] > MAX_ARROW_TIME:  # the page is in ascending order
        if json_too:
            return False
        first = next(t for t in ints if t > MAX_ARROW_TIME)
        raise NotAcceptable(
            f"time {first} of output {page.output!r} does not fit the int64 time column of an "
            f"Arrow read (times from 2**63 on, beyond Spark's LONG): read it as JSON, or read "
            f"the times before it (to={first})",
            time=first,
        )
    return True


async def commit_consumer(request: web.Request) -> web.Response:
    """Register a reader of an output and what it has read (retention follows readers)."""
    body = await parse(request, ConsumerCommit)
    view = manager_of(request).commit_consumer(
        tenant_of(request),
        request.match_info["id"],
        request.match_info["output"],
        request.match_info["consumer"],
        body.committed,
    )
    return json_response(consumer_json(view))


async def forget_consumer(request: web.Request) -> web.Response:
    """Unregister a reader of an output."""
    output, consumer = request.match_info["output"], request.match_info["consumer"]
    manager = manager_of(request)
    if not manager.forget_consumer(tenant_of(request), request.match_info["id"], output, consumer):
        raise NotFound(f"output {output!r} has no consumer {consumer!r}")
    return web.Response(status=204)
