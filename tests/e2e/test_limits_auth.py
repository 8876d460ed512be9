"""End to end over real sockets: authentication, tenants, limits, health and shutdown.

One server in a subprocess, with bearer tokens (``a`` is alice, ``b`` is bob; the other
tenants each belong to one test so their dataflow counts do not interact) and small limits
from a ``--config`` YAML file, serves every test but the shutdown ones, which have their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import websockets.exceptions
from websockets.exceptions import InvalidStatus

from api.client import AsyncClient, FrontierError
from tests.e2e.conftest import (
    PASS_THROUGH,
    SHUTDOWN,
    WORDS_COUNT,
    Frames,
    Server,
    WsProducer,
    canonical,
    counted,
    frontier,
    messages,
    metric,
    progress,
    read_to_close,
    running,
    within,
    ws_connect,
    ws_frames,
)

PROBLEM = "application/problem+json"
TENANTS = {
    "a": "alice",
    "b": "bob",
    "c": "carol",
    "d": "dave",
    "e": "erin",
    "f": "frank",
    "g": "grace",
}
LIMITS = {
    "max_body_bytes": 100_000,
    "max_frame_bytes": 4_096,
    "max_batch_records": 5,
    "max_dataflows_per_tenant": 2,
    "max_sessions_per_input": 2,
    "max_subscribers_per_dataflow": 2,
    "subscriber_queue_events": 4,
    "ws_credits": 2,
}
RECORD_CHARS = 60_000
"""A big record (under max_body_bytes) that fills socket buffers quickly."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = [arg for token, tenant in TENANTS.items() for arg in ("--token", f"{token}={tenant}")]
    with running(
        tmp_path_factory.mktemp("limits"),
        "--workers",
        "2",
        *tokens,
        config={"limits": LIMITS},
    ) as started:
        yield started


async def request(
    server: Server,
    method: str,
    path: str,
    token: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str, Any, Any]:
    """``(status, content type, headers, body)`` of a request outside the client."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.url + path, data=body, headers=sent) as response,
    ):
        data = await response.read()
        if response.content_type in ("application/json", PROBLEM):
            decoded = orjson.loads(data)
        else:
            decoded = data.decode()
        return response.status, response.content_type, response.headers, decoded


def problem(status: int, slug: str, title: str, detail: str) -> dict[str, Any]:
    """An expected problem document."""
    return {
        "type": f"https://frontier.dev/problems/{slug}",
        "title": title,
        "status": status,
        "detail": detail,
    }


LIMIT = ("limit-exceeded", "Limit exceeded")


# --------------------------------------------------------------------------- auth and tenants


async def test_requests_without_a_valid_token_are_401(server: Server) -> None:
    required = problem(
        401, "unauthorized", "Unauthorized", "an Authorization: Bearer <token> header is required"
    )
    invalid = problem(401, "unauthorized", "Unauthorized", "the bearer token is not valid")
    cases = [
        (None, None, required),
        ("nope", None, invalid),
        (None, {"Authorization": "Basic YTph"}, required),
        (None, {"Authorization": "Bearer"}, required),
    ]
    for token, headers, expected in cases:
        for method, path in (("GET", "/v1/dataflows"), ("POST", "/v1/dataflows")):
            status, content_type, _, body = await request(
                server, method, path, token, orjson.dumps({"graph": WORDS_COUNT}), headers
            )
            assert (status, content_type, body) == (401, PROBLEM, expected), (token, headers)
    async with AsyncClient(server.url, token="nope") as client:
        with pytest.raises(FrontierError) as refused:
            await client.dataflows()
        assert (refused.value.status, refused.value.problem) == (401, invalid)
    # Nothing was created by the refused requests.
    async with AsyncClient(server.url, token="a") as alice:
        assert await alice.dataflows() == []


async def test_websocket_upgrades_are_authenticated_first(server: Server) -> None:
    async with AsyncClient(server.url, token="a") as alice:
        df = (await alice.create_dataflow(WORDS_COUNT))["id"]
        base = f"/v1/dataflows/{df}"
        for path in (
            f"{base}/frontiers",
            f"{base}/outputs/out/events",
            f"{base}/inputs/words/push",
        ):
            for token in (None, "nope"):
                with pytest.raises(InvalidStatus) as refused:
                    async with ws_connect(server, path, token=token):
                        pass
                response = refused.value.response
                assert response.status_code == 401, (path, token)
                assert response.headers["Content-Type"] == PROBLEM
                assert orjson.loads(response.body)["status"] == 401
            # Bob's token is valid, but the dataflow is not his.
            with pytest.raises(InvalidStatus) as hidden:
                async with ws_connect(server, path, token="b"):
                    pass
            assert hidden.value.response.status_code == 404
        # The refused push upgrades opened no session.
        assert (await alice.dataflow(df))["inputs"]["words"]["sessions"] == 0
        async with ws_connect(server, f"{base}/frontiers", token="a") as ws:
            assert orjson.loads(await within(ws.recv())) == frontier("input:words", 0)
        await alice.drop(df)


async def test_401_names_the_bearer_scheme(server: Server) -> None:
    for token in (None, "nope"):
        status, _, headers, _ = await request(server, "GET", "/v1/dataflows", token)
        assert (status, headers.get("WWW-Authenticate")) == (401, 'Bearer realm="frontier"')


async def test_a_tenant_sees_only_its_own_dataflows(server: Server) -> None:
    async with (
        AsyncClient(server.url, token="a") as alice,
        AsyncClient(server.url, token="b") as bob,
    ):
        df = (await alice.create_dataflow(WORDS_COUNT, "alice's"))["id"]
        assert [d["id"] for d in await alice.dataflows()] == [df]
        assert await bob.request("GET", "/v1/dataflows") == {"items": [], "next_cursor": None}
        not_found = problem(404, "not-found", "Not found", f"no dataflow {df!r}")
        base = f"/v1/dataflows/{df}"
        for method, path, body in (
            ("GET", base, None),
            ("DELETE", base, None),
            ("POST", f"{base}/inputs/words/sessions", {}),
            ("POST", f"{base}/inputs/words/close", None),
            ("PUT", f"{base}/inputs/words/transactions/t", {"records": []}),
            ("GET", f"{base}/outputs/out/times", None),
        ):
            with pytest.raises(FrontierError) as hidden:
                await bob.request(method, path, body)
            assert (hidden.value.status, hidden.value.problem) == (404, not_found), (method, path)
        # Alice's dataflow is untouched by all that.
        described = await alice.dataflow(df)
        assert (described["status"], described["inputs"]["words"]["closed"]) == ("running", False)
        await alice.drop(df)
        assert await alice.dataflows() == []


# --------------------------------------------------------------------------- limits


async def test_a_body_over_max_body_bytes_is_413(server: Server) -> None:
    async with AsyncClient(server.url, token="c") as carol:
        df = (await carol.create_dataflow(WORDS_COUNT))["id"]
        session = await carol.session(df, "words")
        path = f"/v1/dataflows/{df}/inputs/words/sessions/{session.id}/push"
        body = orjson.dumps({"seq": 1, "records": [[0, "x" * 100_000]]})
        status, content_type, _, refused = await request(server, "POST", path, "c", body)
        assert (status, content_type) == (413, PROBLEM)
        assert refused == problem(
            413,
            "payload-too-large",
            "Payload too large",
            "Maximum request body size 100000 exceeded.",
        )
        # Just under the limit is fine; nothing of the refused body was applied.
        fits = orjson.dumps({"seq": 1, "records": [[0, "x" * 90_000]]})
        status, _, _, ack = await request(server, "POST", path, "c", fits)
        assert (status, ack["applied"]) == (200, 1)
        assert (await carol.dataflow(df))["inputs"]["words"]["records_in"] == 1
        await carol.drop(df)


async def test_batches_over_max_batch_records_are_429(server: Server) -> None:
    async with AsyncClient(server.url, token="c") as carol:
        df = (await carol.create_dataflow(WORDS_COUNT))["id"]
        session = await carol.session(df, "words")
        six = [[0, str(i)] for i in range(6)]
        too_many = problem(429, *LIMIT, "a batch of 6 records exceeds max_batch_records (5)")
        with pytest.raises(FrontierError) as refused:
            await session.push(six)
        assert (refused.value.status, refused.value.problem) == (429, too_many)
        with pytest.raises(FrontierError) as staged:
            await carol.stage(df, "words", "t", six)
        assert (staged.value.status, staged.value.problem) == (429, too_many)
        assert (await session.push(six[:5]))["applied"] == 5
        # Over the WebSocket: an error frame; the socket stays open.
        async with ws_connect(server, f"/v1/dataflows/{df}/inputs/words/push", token="c") as ws:
            producer = await WsProducer.open(ws)
            error = await producer.call({"type": "push", "seq": 1, "records": six})
            expected = {k: too_many[k] for k in too_many if k != "type"}
            # The refused frame's credit is returned: the client has all its credits again.
            assert error == {"type": "error", **expected, "credits": producer.opened["credits"]}
            ack = await producer.call({"type": "push", "seq": 1, "records": six[:1]})
            assert (ack["type"], ack["applied"]) == ("ack", 1)
            await producer.call({"type": "close"})
            assert await read_to_close(ws) == []
            assert ws.close_code == 1000
        assert (await carol.dataflow(df))["inputs"]["words"]["records_in"] == 6
        await carol.drop(df)


async def test_dataflows_per_tenant_are_limited(server: Server) -> None:
    async with (
        AsyncClient(server.url, token="d") as dave,
        AsyncClient(server.url, token="e") as erin,
    ):
        first = (await dave.create_dataflow(PASS_THROUGH))["id"]
        await dave.create_dataflow(PASS_THROUGH)
        with pytest.raises(FrontierError) as refused:
            await dave.create_dataflow(PASS_THROUGH)
        assert (refused.value.status, refused.value.problem) == (
            429,
            problem(
                429, *LIMIT, "tenant 'dave' has 2 dataflows, the limit (max_dataflows_per_tenant)"
            ),
        )
        assert len(await dave.dataflows()) == 2
        # The limit is per tenant; a dry run creates nothing and is not limited.
        assert "nodes" in await dave.plan(PASS_THROUGH)
        erins = (await erin.create_dataflow(PASS_THROUGH))["id"]
        # Dropping one makes room again.
        await dave.drop(first)
        await dave.create_dataflow(PASS_THROUGH)
        for dataflow in await dave.dataflows():
            await dave.drop(dataflow["id"])
        await erin.drop(erins)


async def test_sessions_per_input_are_limited(server: Server) -> None:
    async with AsyncClient(server.url, token="f") as frank:
        df = (await frank.create_dataflow(PASS_THROUGH))["id"]
        first = await frank.session(df, "words")
        await frank.session(df, "words")
        full = problem(
            429,
            *LIMIT,
            "input 'words' has 2 open sessions, the limit (max_sessions_per_input)",
        )
        with pytest.raises(FrontierError) as refused:
            await frank.session(df, "words")
        assert (refused.value.status, refused.value.problem) == (429, full)
        # The WebSocket push opens a session too: refused before the upgrade.
        with pytest.raises(InvalidStatus) as upgrade:
            async with ws_connect(server, f"/v1/dataflows/{df}/inputs/words/push", token="f"):
                pass
        assert upgrade.value.response.status_code == 429
        assert orjson.loads(upgrade.value.response.body) == full
        await first.close()
        assert (await frank.session(df, "words")).time == 0
        await frank.drop(df)


async def test_output_subscribers_per_dataflow_are_limited(server: Server) -> None:
    async with AsyncClient(server.url, token="f") as frank:
        df = (await frank.create_dataflow(PASS_THROUGH))["id"]
        path = f"/v1/dataflows/{df}/outputs/out/events"
        async with ws_connect(server, path, token="f"), ws_connect(server, path, token="f"):
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(server, path, token="f"):
                    pass
            assert refused.value.response.status_code == 429
            assert orjson.loads(refused.value.response.body) == problem(
                429,
                *LIMIT,
                f"dataflow {df!r} has 2 output subscribers, the limit "
                "(max_subscribers_per_dataflow)",
            )
        await frank.drop(df)


async def test_a_frame_over_max_frame_bytes_closes_with_4413(server: Server) -> None:
    async with AsyncClient(server.url, token="g") as grace:
        df = (await grace.create_dataflow(PASS_THROUGH))["id"]
        async with ws_connect(server, f"/v1/dataflows/{df}/inputs/words/push", token="g") as ws:
            producer = await WsProducer.open(ws)
            await producer.send({"type": "push", "seq": 1, "records": [[0, "x" * 4_096]]})
            assert await read_to_close(ws) == []
            assert (ws.close_code, ws.close_reason) == (4413, "a frame may be at most 4096 bytes")
        described = await grace.dataflow(df)
        assert (
            described["inputs"]["words"]["records_in"],
            described["inputs"]["words"]["sessions"],
        ) == (0, 0)
        await grace.drop(df)


async def test_a_producer_that_follows_its_credits_is_served(server: Server) -> None:
    async with AsyncClient(server.url, token="g") as grace:
        df = (await grace.create_dataflow(PASS_THROUGH))["id"]
        async with ws_connect(server, f"/v1/dataflows/{df}/inputs/words/push", token="g") as ws:
            producer = await WsProducer.open(ws)
            assert producer.credits == 2
            for seq in range(1, 6):
                ack = await producer.call({"type": "push", "seq": seq, "records": [[0, seq]]})
                assert (ack["type"], ack["seq"], ack["applied"], ack["credits"]) == (
                    "ack",
                    seq,
                    1,
                    2,
                )
            # A frame that is not a valid frame: an error, then 4400.
            await producer.send({"type": "push", "seq": 6})
            assert await read_to_close(ws) == [
                {
                    "type": "error",
                    "title": "Unprocessable content",
                    "status": 422,
                    "detail": "the request body has 1 problem(s)",
                    "problems": [{"pointer": "/records", "detail": "required"}],
                }
            ]
            assert (ws.close_code, ws.close_reason) == (4400, "invalid frame")
        assert (await grace.dataflow(df))["inputs"]["words"]["records_in"] == 5
        await grace.drop(df)


CREDITS_BUG = (
    "api/server/websockets.py push_stream takes a credit when it reads a frame and gives it "
    "back before reading the next, so frames a client sends ahead of its acks are never "
    "counted: the 4429 check cannot fire and every ack says credits=ws_credits"
)


async def test_sending_beyond_the_credits_closes_with_4429(server: Server) -> None:
    # A burst far beyond the 2 credits: the server reads frames as they arrive and counts
    # those not yet answered, so it sees the excess and closes the socket.
    async with AsyncClient(server.url, token="g") as grace:
        df = (await grace.create_dataflow(PASS_THROUGH))["id"]
        try:
            path = f"/v1/dataflows/{df}/inputs/words/push"
            async with ws_connect(server, path, token="g") as ws:
                opened = orjson.loads(await within(ws.recv()))
                assert opened["credits"] == 2
                burst = [
                    orjson.dumps({"type": "push", "seq": s, "records": [[0, s]]}).decode()
                    for s in range(1, 41)
                ]
                for frame in burst:  # without waiting for any ack
                    try:
                        await ws.send(frame)
                    except websockets.exceptions.ConnectionClosed:
                        break  # the server closed it mid-burst: the close code says why
                replies = []
                for _ in range(40):
                    try:
                        replies.append(orjson.loads(await within(ws.recv())))
                    except Exception:
                        break
                assert ws.close_code == 4429, replies
                assert ws.close_reason == "sent without credit: wait for acks"
                assert len(replies) < 40
        finally:
            await grace.drop(df)


async def test_a_slow_subscriber_is_closed_with_4408_and_a_resume_point(server: Server) -> None:
    async with AsyncClient(server.url, token="g") as grace:
        df = (await grace.create_dataflow(PASS_THROUGH))["id"]
        session = await grace.session(df, "words")
        await session.advance(5)
        # A subscriber that never reads, with a small receive buffer and no compression (the
        # records would shrink to nothing): the server's sends soon block, and its queue of
        # events for this subscriber grows.
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", server.port))
        path = f"/v1/dataflows/{df}/outputs/out/events"
        pushed: list[str] = []
        limit = LIMITS["subscriber_queue_events"]
        async with ws_connect(
            server, path, token="g", sock=slow, max_queue=1, compression=None
        ) as ws:
            # Flood the output. The queue is seen full twice in a row, with a push between:
            # that push found it full (nothing was taken in between), so it closed it.
            depths: list[float | None] = []
            for i in range(300):
                pushed.append(f"{i:04d}" + "y" * RECORD_CHARS)
                await session.push([[5, pushed[-1]]])
                _, _, _, text = await request(server, "GET", "/metrics", token="g")
                depths.append(
                    metric(text, "frontier_subscriber_queue_depth", dataflow=df, output="out")
                )
                if depths[-2:] == [limit, limit]:
                    break
            else:
                pytest.fail(f"the subscriber's queue was never seen full twice: {depths}")
            # Now read: what was sent before the subscriber fell behind, then the end.
            frames = await read_to_close(ws, timeout=10.0)
            assert (ws.close_code, ws.close_reason) == (4408, '{"resume":[5]}')
        assert frames[0] == progress((5, 1), (0, -1))
        assert frames[-1] == {
            "type": "closed",
            "reason": "slow consumer: the subscriber fell too far behind",
            "resume": [5],
        }
        delivered = [r for f in frames[1:-1] for r in f["records"]]
        assert [f["type"] for f in frames[1:-1]] == ["messages"] * len(delivered)
        assert delivered == pushed[: len(delivered)]  # in order, none lost before the end
        assert 0 < len(delivered) < len(pushed)

        # Resuming from the resume point replays every retained record at 5, then goes on.
        resumed = Frames(grace.events(df, "out", start=5))
        assert canonical([await resumed.next(timeout=10.0), await resumed.next()]) == [
            messages(5, *pushed),
            progress((5, 1), (0, -1)),
        ]
        await session.close()
        await grace.close_input(df, "words")
        assert await resumed.next() == progress((5, -1))
        await resumed.aclose()
        await grace.drop(df)


# --------------------------------------------------------------------------- operating


async def test_health_readiness_and_metrics_need_no_token(server: Server) -> None:
    assert (await request(server, "GET", "/healthz"))[::3] == (200, {"status": "ok"})
    assert (await request(server, "GET", "/readyz"))[::3] == (200, {"status": "ready"})
    async with AsyncClient(server.url, token="a") as alice:
        df = (await alice.create_dataflow(WORDS_COUNT))["id"]
        session = await alice.session(df, "words")
        await session.push([[0, "a"], [0, "b"], [1, "a"]])
        await session.push([[1, "c"]])
        await session.advance(2)
        watch = Frames(alice.frontiers(df))
        await watch.until(lambda e: e == frontier("output:out", 2))
        await watch.aclose()
        status, content_type, _, text = await request(server, "GET", "/metrics")
        assert (status, content_type) == (200, "text/plain")
        assert df not in text  # without a token: no tenant's dataflow ids
        status, content_type, _, text = await request(server, "GET", "/metrics", token="a")
        assert (status, content_type) == (200, "text/plain")
        assert metric(text, "frontier_records_in_total", dataflow=df, input="words") == 4.0
        assert metric(text, "frontier_records_out_total", dataflow=df, output="out") == 4.0
        assert metric(text, "frontier_subscribers", dataflow=df, output="out") == 0.0
        assert metric(text, "frontier_output_lag", dataflow=df, output="out") == 0.0
        assert "# TYPE frontier_records_in_total counter" in text
        await alice.drop(df)
        status, _, _, text = await request(server, "GET", "/metrics", token="a")
        assert metric(text, "frontier_records_in_total", dataflow=df, input="words") is None


async def test_sigterm_closes_sockets_with_going_away_and_exits_0(start_server: Any) -> None:
    server = start_server("--workers", "2")
    async with AsyncClient(server.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        session = await client.session(df, "words")
        await session.push([[0, "a"]])
        await session.advance(1)
        base = f"/v1/dataflows/{df}"
        async with (
            ws_connect(server, f"{base}/outputs/out/events") as events_ws,
            ws_connect(server, f"{base}/frontiers") as frontiers_ws,
            ws_connect(server, f"{base}/inputs/words/push") as push_ws,
        ):
            events = Frames(ws_frames(events_ws))
            assert canonical(await events.until(lambda e: e["type"] == "progress")) == [
                messages(0, *counted(a=1)),
                progress((1, 1), (0, -1)),
            ]
            watch = Frames(ws_frames(frontiers_ws))
            await watch.until(lambda e: e == frontier("output:out", 1))
            await WsProducer.open(push_ws)

            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            reasons = {
                events_ws: '{"resume":[1]}',
                frontiers_ws: "going away: the service is stopping",
                push_ws: "the server is shutting down",
            }
            for ws, reason in reasons.items():
                frames = await read_to_close(ws)
                # No more data; at most a final ``closed`` (see the test below).
                assert [f for f in frames if f["type"] != "closed"] == []
                assert (ws.close_code, ws.close_reason) == (1001, reason)
            code = await asyncio.to_thread(server.process.wait, SHUTDOWN)
        assert code == 0, server.log_tail()
        assert time.monotonic() - started < 5.0
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.request("GET", "/healthz")


async def test_sigterm_sends_subscribers_a_final_closed_frame(start_server: Any) -> None:
    server = start_server("--workers", "1")
    async with AsyncClient(server.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        session = await client.session(df, "words")
        await session.advance(1)
        base = f"/v1/dataflows/{df}"
        async with (
            ws_connect(server, f"{base}/outputs/out/events") as events_ws,
            ws_connect(server, f"{base}/frontiers") as frontiers_ws,
        ):
            assert orjson.loads(await within(events_ws.recv())) == progress((1, 1), (0, -1))
            await Frames(ws_frames(frontiers_ws)).until(lambda e: e["location"] == "output:out")
            server.process.send_signal(signal.SIGTERM)
            events = await read_to_close(events_ws)
            frontiers = await read_to_close(frontiers_ws)
            await asyncio.to_thread(server.process.wait, SHUTDOWN)
        assert [(e["type"], e.get("resume")) for e in events] == [("closed", [1])]
        assert [e["type"] for e in frontiers] == ["closed"]


@pytest.mark.parametrize("limit", ["²", "١٢", "0", "1001", "-1", "1e3"])
async def test_a_limit_that_is_not_ascii_digits_in_range_is_400(
    service: Server, limit: str
) -> None:
    async with (
        aiohttp.ClientSession(service.url) as http,
        http.get("/v1/dataflows", params={"limit": limit}) as response,
    ):
        assert response.status == 400
        assert (await response.json(content_type=None))["detail"] == (
            f"limit must be an integer from 1 to 1000, not {limit!r}"
        )


def orjson_error(body: bytes) -> str:
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError as error:
        return str(error)
    raise AssertionError(f"{body!r} is valid JSON")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
async def test_non_finite_numbers_are_refused_where_they_arrive(
    service: Server, value: str
) -> None:
    not_json = "NaN, Infinity and numbers beyond a double are not JSON"
    async with aiohttp.ClientSession(service.url) as http:
        graph = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}
        df = (await (await http.post("/v1/dataflows", json={"graph": graph})).json())["id"]
        base = f"/v1/dataflows/{df}/inputs/x"
        session = (await (await http.post(f"{base}/sessions", json={})).json())["session"]
        for path, body in [
            (f"{base}/sessions/{session}/push", f'{{"seq": 1, "records": [[0, {value}]]}}'),
            (f"{base}/transactions/t1", f'{{"records": [[0, {{"v": [{value}]}}]]}}'),
        ]:
            method = http.put if path.endswith("/t1") else http.post
            data = body.encode()
            async with method(path, data=data, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400, await r.text()
                assert (await r.json(content_type=None))["detail"] == (
                    f"the request body is not valid JSON ({not_json}): {orjson_error(data)}"
                )
        async with ws_connect(service, f"{base}/push") as ws:
            await ws.recv()  # the session
            frame = f'{{"type": "push", "seq": 1, "records": [[0, {value}]]}}'.encode()
            await ws.send(frame)
            [error] = await read_to_close(ws)
            assert (error["status"], error["detail"]) == (
                400,
                f"the frame is not valid JSON ({not_json}): {orjson_error(frame)}",
            )
            assert (ws.close_code, ws.close_reason) == (4400, "invalid frame")
        state = await (await http.get(base)).json()
        assert (state["records_in"], state["staged"]) == (0, 0)  # nothing of it was applied
        await http.delete(f"/v1/dataflows/{df}")


async def upgrade(server: Server, path: str, token: str) -> tuple[Any, Any]:
    """A raw WebSocket upgrade (so a test can send a frame header without its payload)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    return reader, writer


@pytest.mark.parametrize(
    ("path", "most"),
    [
        ("/v1/dataflows/{df}/inputs/words/push", 4_096),
        ("/v1/dataflows/{df}/frontiers", 65_536),
        ("/v1/dataflows/{df}/outputs/out/events", 65_536),
    ],
)
async def test_a_huge_frame_is_refused_from_its_header_not_buffered(
    server: Server, path: str, most: int
) -> None:
    async with AsyncClient(server.url, token="g") as grace:
        df = (await grace.create_dataflow(PASS_THROUGH))["id"]
        reader, writer = await upgrade(server, path.format(df=df), "g")
        try:
            # A 512 MiB binary frame: its header, then only its first 64 KiB.
            mask = b"\x01\x02\x03\x04"
            writer.write(bytes([0x82, 0x80 | 127]) + (512 << 20).to_bytes(8, "big") + mask)
            writer.write(bytes(64 * 1024))
            await writer.drain()
            code, reason = await asyncio.wait_for(read_close(reader), timeout=5)
            assert (code, reason) == (4413, f"a frame may be at most {most} bytes")
        finally:
            writer.close()
        await grace.drop(df)


async def read_close(reader: Any) -> tuple[int, str]:
    """Server frames until the close frame (unmasked, server to client): its code and reason."""
    while True:
        first, second = await reader.readexactly(2)
        length = second & 0x7F
        if length == 126:
            length = int.from_bytes(await reader.readexactly(2), "big")
        elif length == 127:
            length = int.from_bytes(await reader.readexactly(8), "big")
        payload = await reader.readexactly(length)
        if first & 0x0F == 0x8:
            return int.from_bytes(payload[:2], "big"), payload[2:].decode()


async def test_tls_serves_https_and_wss_with_the_given_certificate(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    openssl = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    openssl += ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    openssl += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(openssl, check=True, capture_output=True)
    port = socket_port()
    command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += [
        "--data-dir",
        str(tmp_path / "data"),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
    ]
    server = subprocess.Popen(
        command,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    trusted = ssl.create_default_context(cafile=str(cert))
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(200):
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"https://127.0.0.1:{port}/readyz", ssl=trusted) as r:
                        if r.status == 200:
                            break
                await asyncio.sleep(0.05)
            graph = {"graph": PASS_THROUGH}
            async with http.post(
                f"https://127.0.0.1:{port}/v1/dataflows", json=graph, ssl=trusted
            ) as r:
                assert r.status == 201
                df = (await r.json())["id"]
            url = f"wss://127.0.0.1:{port}/v1/dataflows/{df}/frontiers"
            async with http.ws_connect(url, ssl=trusted) as ws:
                first = orjson.loads((await ws.receive(timeout=5)).data)
                assert first == {"type": "frontier", "location": "input:words", "frontier": [0]}
            # Plain HTTP is not spoken on that port.
            with pytest.raises(aiohttp.ClientError):
                async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                    await r.read()
    finally:
        server.terminate()
        server.wait(timeout=15)


def socket_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_what_a_page_of_another_site_could_send_is_refused(service: Server) -> None:
    graph = {"graph": PASS_THROUGH}
    async with aiohttp.ClientSession(service.url) as http:
        before = len((await (await http.get("/v1/dataflows")).json())["items"])
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            headers = {"Content-Type": kind}
            async with http.post("/v1/dataflows", data=orjson.dumps(graph), headers=headers) as r:
                assert r.status == 415
                assert (await r.json(content_type=None))["detail"] == (
                    f"a body of type {kind} is not taken (send application/json): browsers "
                    "send that type from other sites without asking"
                )
        assert len((await (await http.get("/v1/dataflows")).json())["items"]) == before
        df = (await (await http.post("/v1/dataflows", json=graph)).json())["id"]
        path = f"/v1/dataflows/{df}/frontiers"
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(path, origin="http://elsewhere.example")
        assert refused.value.status == 403
        # A page the server serves itself (its own origin) may open one.
        async with http.ws_connect(path, origin=f"http://127.0.0.1:{service.port}") as ws:
            first = orjson.loads((await ws.receive(timeout=5)).data)
            assert first["location"] == "input:words"
        await http.delete(f"/v1/dataflows/{df}")


async def test_stats_subscribers_per_dataflow_are_limited(server: Server) -> None:
    async with AsyncClient(server.url, token="f") as frank:
        df = (await frank.create_dataflow(PASS_THROUGH))["id"]
        path = f"/v1/dataflows/{df}/stats"
        async with ws_connect(server, path, token="f"), ws_connect(server, path, token="f"):
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(server, path, token="f"):
                    pass
            assert refused.value.response.status_code == 429
            assert orjson.loads(refused.value.response.body) == problem(
                429,
                *LIMIT,
                f"dataflow {df!r} has 2 stats subscribers, the limit "
                "(max_subscribers_per_dataflow)",
            )
        # Both closed: their places are free again.
        async with ws_connect(server, path, token="f") as ws:
            assert orjson.loads(await within(ws.recv()))["type"] == "stats"
        await frank.drop(df)
