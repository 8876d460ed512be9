"""The aiohttp application: routes, authentication, limits and lifecycle.

The workers run as coroutines on the same (uvloop) event loop as the server; the application
starts them on startup and stops them on cleanup, after closing every WebSocket with "going
away".
"""

from __future__ import annotations

import asyncio
import base64
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast

import orjson
from aiohttp import WSCloseCode, web
from pydantic import BaseModel, ValidationError

from api.models import (
    SEQ_MAX,
    Advance,
    Commit,
    ConsumerCommit,
    CreateDataflow,
    InputCommit,
    OpenSession,
    Push,
    Stage,
    plain_push,
    time_from_json,
    time_to_json,
)
from api.server.arrow import (
    ARROW_STREAM,
    MAX_ARROW_TIME,
    arrow_from_times,
    columns_from_arrow,
    records_from_arrow,
)
from api.server.metrics import metrics_handler
from api.server.problems import BadRequest, NotAcceptable, invalid_body, problems_middleware
from operators.graph import describe_catalogue
from service.app import DataflowManager, Gone, LimitExceeded, NotFound, Settings, Unauthorized
from service.app.inputs import Ack, Columns, ProducerInput
from service.app.outputs import OutputLog

MANAGER = web.AppKey("manager", DataflowManager)
SETTINGS = web.AppKey("settings", Settings)


class OpenSockets:
    """The WebSockets currently open, so shutdown can close them with "going away"."""

    def __init__(self) -> None:
        self.open: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()
        self.producers: weakref.WeakSet[web.WebSocketResponse] = weakref.WeakSet()


SOCKETS = web.AppKey("sockets", OpenSockets)
TENANT = web.RequestKey("tenant", str)

M = TypeVar("M", bound=BaseModel)
_PUBLIC = ("/healthz", "/readyz", "/metrics")


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


async def parse(request: web.Request, model: type[M]) -> M:
    """The request body as ``model``: 400 if not JSON, 422 if the wrong shape."""
    body = await request.read()
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as error:
        if any(e.get("type") == "json_invalid" for e in error.errors()):
            raise BadRequest("the request body is not valid JSON") from None
        raise invalid_body(error) from None


def tenant_of(request: web.Request) -> str:
    """The authenticated tenant (set by the auth middleware)."""
    return request[TENANT]


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
    if request.path not in _PUBLIC:
        request[TENANT] = authenticate(request.app[SETTINGS], request.headers.get("Authorization"))
    return await handler(request)


# --------------------------------------------------------------------------- health


async def healthz(request: web.Request) -> web.Response:
    """Liveness: 503 once an error in the engine has stopped the workers (restart me)."""
    failure = request.app[MANAGER].failure
    if failure is not None:
        return json_response({"status": "failed", "error": failure}, status=503)
    return json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Readiness: the workers are running."""
    if request.app[MANAGER].running:
        return json_response({"status": "ready"})
    return json_response({"status": "not ready"}, status=503)


async def operators_catalogue(_request: web.Request) -> web.Response:
    """The operators graphs may use."""
    return json_response({"operators": describe_catalogue()})


# --------------------------------------------------------------------------- dataflows


async def create_dataflow(request: web.Request) -> web.Response:
    """Validate a graph; create it (201) or, with ``dry_run``, return its compiled plan."""
    manager = request.app[MANAGER]
    body = await parse(request, CreateDataflow)
    if flag(request, "dry_run"):
        plan = manager.compile(body.graph)
        return json_response({"plan": plan.describe()})
    record = await manager.create(tenant_of(request), body.graph, body.name)
    return json_response(
        dataflow_json(manager.describe(record, operators=False)),
        status=201,
        headers={"Location": f"/v1/dataflows/{record.id}"},
    )


def dataflow_json(described: dict[str, Any]) -> dict[str, Any]:
    """A described dataflow with times in their JSON form."""
    for entry in described.get("inputs", {}).values():
        entry["frontier"] = [time_to_json(t) for t in entry["frontier"]]
    for entry in described.get("outputs", {}).values():
        entry["frontier"] = [time_to_json(t) for t in entry["frontier"]]
    for entry in described.get("operators", {}).values():
        for output in entry["outputs"]:
            output["frontier"] = [time_to_json(t) for t in output["frontier"]]
    return described


def _cursor(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode()


def flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter: ``true`` or ``false`` (absent: false); anything else is 400.

    Strict on purpose: a misspelt ``dry_run=on`` must not create a dataflow.
    """
    raw = request.query.get(name, "false")
    if raw not in ("true", "false"):
        raise BadRequest(f"{name} must be true or false, not {raw!r}")
    return raw == "true"


def _uncursor(value: str) -> str:
    try:
        decoded = base64.urlsafe_b64decode(value.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        decoded = ""
    if not decoded:
        raise BadRequest(f"cursor {value!r} is not one this server gave out")
    return decoded


def _limit(request: web.Request, default: int = 100, most: int = 1000) -> int:
    raw = request.query.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise BadRequest(f"limit must be an integer from 1 to {most}, not {raw!r}")
    return int(raw)


async def list_dataflows(request: web.Request) -> web.Response:
    """The tenant's dataflows, a page at a time."""
    manager = request.app[MANAGER]
    limit = _limit(request)
    records = manager.listing(tenant_of(request))
    start = 0
    if "cursor" in request.query:
        # A cursor is the position (creation time, id) of the last item given: it stays
        # valid even if that dataflow is dropped meanwhile.
        created, _, after = _uncursor(request.query["cursor"]).partition(" ")
        try:
            position = (float(created), after)
        except ValueError:
            raise BadRequest(
                f"cursor {request.query['cursor']!r} is not one this server gave out"
            ) from None
        start = next(
            (i for i, r in enumerate(records) if (r.created_at, r.id) > position), len(records)
        )
    page = records[start : start + limit]
    more = start + limit < len(records)
    return json_response(
        {
            "items": [r.summary() for r in page],
            "next_cursor": _cursor(f"{page[-1].created_at!r} {page[-1].id}")
            if more and page
            else None,
        }
    )


async def get_dataflow(request: web.Request) -> web.Response:
    """One dataflow in full."""
    manager = request.app[MANAGER]
    record = manager.get(tenant_of(request), request.match_info["id"])
    operators = flag(request, "operators")
    return json_response(dataflow_json(manager.describe(record, operators=operators)))


async def delete_dataflow(request: web.Request) -> web.Response:
    """Drop a dataflow."""
    manager = request.app[MANAGER]
    await manager.drop(tenant_of(request), request.match_info["id"])
    return web.Response(status=204)


# --------------------------------------------------------------------------- producing


def _producer(request: web.Request) -> ProducerInput:
    manager = request.app[MANAGER]
    return manager.input(tenant_of(request), request.match_info["id"], request.match_info["input"])


def ack_json(ack: Ack) -> dict[str, Any]:
    """An ack as JSON."""
    return {
        "seq": ack.seq,
        "session_time": None if ack.session_time is None else time_to_json(ack.session_time),
        "input_frontier": [time_to_json(t) for t in ack.input_frontier],
        "applied": ack.applied,
    }


def _check_batch(request: web.Request, size: int) -> None:
    most = request.app[SETTINGS].limits.max_batch_records
    if size > most:
        raise LimitExceeded(f"a batch of {size} records exceeds max_batch_records ({most})")


async def open_session(request: web.Request) -> web.Response:
    """Open a producer session."""
    producer = _producer(request)
    body = await parse(request, OpenSession)
    session = producer.open_session(body.start)
    return json_response(
        {"session": session.id, "time": time_to_json(session.time)},
        status=201,
        headers={"Location": f"{request.path}/{session.id}"},
    )


def _seq_param(request: web.Request) -> int:
    raw = request.query.get("seq", "")
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= SEQ_MAX:
        raise BadRequest(f"an Arrow push needs ?seq= a positive integer, not {raw!r}")
    return int(raw)


async def push(request: web.Request) -> web.Response:
    """Push a batch (whole or nothing): JSON, or Arrow IPC with ``?seq=``."""
    producer = _producer(request)
    session = request.match_info["session"]
    records: list[tuple[Any, Any]]
    if request.content_type == ARROW_STREAM:
        seq = _seq_param(request)
        records = records_from_arrow(await request.read())
    else:
        plain = plain_push(await request.read())
        if plain is not None:  # integer times, the common case: checked in bulk
            ack = producer.push_columns(
                session, plain.seq, plain.times, plain.records, (plain.first, plain.last)
            )
            return json_response(ack_json(ack))
        body = await parse(request, Push)
        seq, records = body.seq, list(body.records)
    # The producer refuses a batch over max_batch_records, before anything is applied.
    ack = producer.push(session, seq, records)
    return json_response(ack_json(ack))


async def advance(request: web.Request) -> web.Response:
    """Advance a session."""
    producer = _producer(request)
    body = await parse(request, Advance)
    ack = producer.advance(request.match_info["session"], body.time, body.seq)
    return json_response(ack_json(ack))


async def commit(request: web.Request) -> web.Response:
    """Commit staged transactions (and advance the session) atomically."""
    producer = _producer(request)
    body = await parse(request, Commit)
    ack = producer.commit(
        request.match_info["session"],
        list(body.transactions),
        body.idempotency_key,
        body.advance_to,
        body.discard,
    )
    return json_response(ack_json(ack))


async def commit_input(request: web.Request) -> web.Response:
    """Commit staged transactions without a session, at the input's time (and advance it)."""
    producer = _producer(request)
    body = await parse(request, InputCommit)
    ack = producer.commit(
        None, list(body.transactions), body.idempotency_key, body.advance_to, body.discard
    )
    return json_response(ack_json(ack))


async def get_input(request: web.Request) -> web.Response:
    """An input: its frontier, open sessions and open transactions (staged records)."""
    producer = _producer(request)
    time = producer.time()
    return json_response(
        {
            "input": producer.name,
            "frontier": [time_to_json(t) for t in producer.frontier()],
            "time": None if time is None else time_to_json(time),
            "closed": producer.closed,
            "records_in": producer.records_in,
            "sessions": [
                {"session": s.id, "time": time_to_json(s.time)} for s in producer.sessions.values()
            ],
            "staged": producer.staged_records,
            "transactions": [
                {"transaction": name, "staged": size} for name, size in producer.staged().items()
            ],
        }
    )


async def close_session(request: web.Request) -> web.Response:
    """Close a session."""
    producer = _producer(request)
    return json_response(ack_json(producer.close_session(request.match_info["session"])))


async def stage(request: web.Request) -> web.Response:
    """Stage records in a transaction (an Arrow body stays columnar until the commit)."""
    producer = _producer(request)
    records: list[tuple[Any, Any]] | Columns
    if request.content_type == ARROW_STREAM:
        records = columns_from_arrow(await request.read())
    else:
        records = list((await parse(request, Stage)).records)
    _check_batch(request, len(records))
    staged = producer.stage(request.match_info["txn"], records)
    return json_response({"staged": staged})


async def abort(request: web.Request) -> web.Response:
    """Abort a transaction."""
    producer = _producer(request)
    return json_response({"discarded": producer.abort(request.match_info["txn"])})


async def close_input(request: web.Request) -> web.Response:
    """Close an input and all of its sessions."""
    producer = _producer(request)
    producer.close()
    return json_response({"input_frontier": []})


# --------------------------------------------------------------------------- consuming


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


async def output_times(request: web.Request) -> web.Response:
    """Completed times of an output in ``[from, to)``, a page at a time.

    With ``counts=true`` each time comes with its number of records instead of them (JSON).
    """
    manager = request.app[MANAGER]
    log_ = manager.output(
        tenant_of(request), request.match_info["id"], request.match_info["output"]
    )
    start = time_param(request, "from")
    end = time_param(request, "to")
    if "cursor" in request.query:
        start = time_param(request, "cursor")
    for name, value in (("from", start), ("to", end)):
        if value is not None and not log_.matches(value):
            raise BadRequest(f"{name} is not a time of output {log_.name!r}'s time domain")
    if start is not None and log_.is_forgotten(start):
        raise Gone(
            f"records at {time_to_json(start)!r} are no longer retained by output "
            f"{log_.name!r}; retained times start after {[time_to_json(e) for e in log_.evicted]}"
        )
    limit = _limit(request)
    counts = flag(request, "counts")
    times = log_.complete_times(start, end)
    page = times[:limit]
    next_cursor = None
    if len(times) > limit:
        next_cursor = orjson.dumps(time_to_json(times[limit])).decode()
    frontier = [time_to_json(t) for t in log_.frontier()]
    if counts:
        return json_response(
            {
                "times": [{"time": time_to_json(t), "count": log_.count_at(t)} for t in page],
                "frontier": frontier,
                "next_cursor": next_cursor,
            }
        )
    accept = request.headers.get("Accept", "")
    if ARROW_STREAM in accept and _arrow_page(log_, page, _accepts_json(accept)):
        entries = [(t, log_.records_at(t)) for t in page]
        headers = {"X-Frontier": orjson.dumps(frontier).decode()}
        if next_cursor is not None:
            headers["X-Next-Cursor"] = next_cursor
        return web.Response(
            body=arrow_from_times(entries), content_type=ARROW_STREAM, headers=headers
        )
    return json_response(
        {
            "times": [{"time": time_to_json(t), "records": log_.records_at(t)} for t in page],
            "frontier": frontier,
            "next_cursor": next_cursor,
        }
    )


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


def _arrow_page(log_: OutputLog, page: list[Any], json_too: bool) -> bool:
    """Whether ``page`` can be answered as Arrow (its times fit int64).

    If not: ``False`` (answer JSON) when the client takes JSON too (``json_too``), else
    :class:`NotAcceptable` naming why.
    """
    if not log_.matches(0):
        if json_too:
            return False
        raise NotAcceptable(
            f"output {log_.name!r} has product times, which an Arrow read (an int64 time "
            f"column) cannot carry: read them as JSON"
        )
    ints = cast("list[int]", page)
    if ints and ints[-1] > MAX_ARROW_TIME:  # the page is in ascending order
        if json_too:
            return False
        first = next(t for t in ints if t > MAX_ARROW_TIME)
        raise NotAcceptable(
            f"time {first} of output {log_.name!r} does not fit the int64 time column of an "
            f"Arrow read (times from 2**63 on, beyond Spark's LONG): read it as JSON, or read "
            f"the times before it (to={first})",
            time=first,
        )
    return True


async def commit_consumer(request: web.Request) -> web.Response:
    """Register a reader of an output and what it has read (retention follows readers)."""
    manager = request.app[MANAGER]
    log_ = manager.output(
        tenant_of(request), request.match_info["id"], request.match_info["output"]
    )
    body = await parse(request, ConsumerCommit)
    log_.commit(request.match_info["consumer"], body.committed)
    committed = log_.consumers[request.match_info["consumer"]]
    return json_response(
        {
            "consumer": request.match_info["consumer"],
            "committed": None if committed is None else time_to_json(committed),
            "frontier": [time_to_json(t) for t in log_.frontier()],
        }
    )


async def forget_consumer(request: web.Request) -> web.Response:
    """Unregister a reader of an output."""
    manager = request.app[MANAGER]
    log_ = manager.output(
        tenant_of(request), request.match_info["id"], request.match_info["output"]
    )
    if not log_.forget_consumer(request.match_info["consumer"]):
        raise NotFound(f"output {log_.name!r} has no consumer {request.match_info['consumer']!r}")
    return web.Response(status=204)


# --------------------------------------------------------------------------- the app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    manager = app[MANAGER]
    await manager.start()
    yield
    await manager.stop()


async def _going_away(app: web.Application) -> None:
    # First let every subscriber's handler send its final event (with a resume point) and
    # close with "going away"; then close whatever is still open (producers).
    app[MANAGER].closing()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2.0
    while any(not ws.closed for ws in app[SOCKETS].open) and loop.time() < deadline:
        await asyncio.sleep(0.01)
        if all(ws.closed or ws in app[SOCKETS].producers for ws in app[SOCKETS].open):
            break
    for ws in list(app[SOCKETS].open):
        if not ws.closed:
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"the server is shutting down")


def create_app(settings: Settings, manager: DataflowManager | None = None) -> web.Application:
    """The application for ``settings`` (a manager is created if none is given)."""
    from api.server import websockets

    app = web.Application(
        middlewares=[problems_middleware, auth_middleware],
        client_max_size=settings.limits.max_body_bytes,
    )
    app[SETTINGS] = settings
    app[MANAGER] = manager or DataflowManager(settings)
    app[SOCKETS] = OpenSockets()
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_going_away)
    base = "/v1/dataflows"
    session = f"{base}/{{id}}/inputs/{{input}}/sessions/{{session}}"
    app.router.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/readyz", readyz),
            web.get("/metrics", metrics_handler),
            web.get("/v1/operators", operators_catalogue),
            web.post(base, create_dataflow),
            web.get(base, list_dataflows),
            web.get(f"{base}/{{id}}", get_dataflow),
            web.delete(f"{base}/{{id}}", delete_dataflow),
            web.get(f"{base}/{{id}}/inputs/{{input}}", get_input),
            web.post(f"{base}/{{id}}/inputs/{{input}}/commit", commit_input),
            web.post(f"{base}/{{id}}/inputs/{{input}}/sessions", open_session),
            web.post(f"{session}/push", push),
            web.post(f"{session}/advance", advance),
            web.post(f"{session}/commit", commit),
            web.delete(session, close_session),
            web.put(f"{base}/{{id}}/inputs/{{input}}/transactions/{{txn}}", stage),
            web.delete(f"{base}/{{id}}/inputs/{{input}}/transactions/{{txn}}", abort),
            web.post(f"{base}/{{id}}/inputs/{{input}}/close", close_input),
            web.get(f"{base}/{{id}}/outputs/{{output}}/times", output_times),
            web.put(f"{base}/{{id}}/outputs/{{output}}/consumers/{{consumer}}", commit_consumer),
            web.delete(f"{base}/{{id}}/outputs/{{output}}/consumers/{{consumer}}", forget_consumer),
            web.get(f"{base}/{{id}}/frontiers", websockets.frontiers),
            web.get(f"{base}/{{id}}/outputs/{{output}}/events", websockets.output_events),
            web.get(f"{base}/{{id}}/inputs/{{input}}/push", websockets.push_stream),
        ]
    )
    return app


__all__ = ["MANAGER", "SETTINGS", "SOCKETS", "create_app"]
