"""Transactions: stage records, abort, and commit them (through a session or the input)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from aiohttp import web

from api.codec import ack_json
from api.models import Commit, InputCommit, Stage
from api.server.arrow import ARROW_STREAM, columns_from_arrow
from api.server.context import SETTINGS
from api.server.http import json_response, parse, read_body
from api.server.inputs import producer_of
from api.server.records import check_columns, check_records, check_typed, row_pointer
from service.app import Columns, LimitExceeded, TypedRecords


async def stage(request: web.Request) -> web.Response:
    """Stage records in a transaction (an Arrow body stays columnar until the commit)."""
    producer = producer_of(request)
    records: list[tuple[Any, Any]] | Columns | TypedRecords
    data = await read_body(request)
    limits = request.app[SETTINGS].limits
    if request.content_type == ARROW_STREAM:
        raw = ("arrow-columns", data)
        if producer.schema is not None:  # a typed input: checked against its schema
            records = producer.typed_arrow(data)
            check_typed(records, len(data), limits, row_pointer)
        else:
            records = columns_from_arrow(data)
            check_columns(records, len(data), limits)
    else:
        records = list((await parse(request, Stage)).records)
        raw = ("json", data)
        check_records(list(map(itemgetter(1), records)), len(data), limits)
    most = limits.max_batch_records
    if len(records) > most:
        raise LimitExceeded(f"a batch of {len(records)} records exceeds max_batch_records ({most})")
    staged = producer.stage(request.match_info["txn"], records, raw)
    await producer.durable()
    return json_response({"staged": staged})


async def abort(request: web.Request) -> web.Response:
    """Abort a transaction."""
    producer = producer_of(request)
    discarded = producer.abort(request.match_info["txn"])
    await producer.durable()
    return json_response({"discarded": discarded})


async def commit(request: web.Request) -> web.Response:
    """Commit staged transactions (and advance the session) atomically."""
    producer = producer_of(request)
    body = await parse(request, Commit)
    ack = producer.commit(
        request.match_info["session"],
        list(body.transactions),
        body.idempotency_key,
        body.advance_to,
        body.discard,
        body.digest,
        body.dropped,
    )
    await producer.durable()
    return json_response(ack_json(ack))


async def commit_input(request: web.Request) -> web.Response:
    """Commit staged transactions without a session, at the input's time (and advance it)."""
    producer = producer_of(request)
    body = await parse(request, InputCommit)
    ack = producer.commit(
        None,
        list(body.transactions),
        body.idempotency_key,
        body.advance_to,
        body.discard,
        body.digest,
        body.dropped,
    )
    await producer.durable()
    return json_response(ack_json(ack))
