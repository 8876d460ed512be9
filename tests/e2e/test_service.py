"""End to end over real sockets: submit, produce, watch and read a dataflow.

One server in a subprocess (two workers) serves every test of this module; each test makes
dataflows of its own. HTTP goes through the Python client (``api.client.AsyncClient``) and
WebSockets through it or, as a second and independent client, the ``websockets`` package.

The producers move in lock step with what is watched: each step waits for the frontier and
capture events it causes before the next, so the expected sequences are exact.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from websockets.exceptions import InvalidStatus

from api.client import AsyncClient, FrontierError
from tests.e2e.conftest import (
    PASS_THROUGH,
    WORDS_COUNT,
    Frames,
    Server,
    WsProducer,
    canonical,
    counted,
    frontier,
    is_progress,
    messages,
    progress,
    read_to_close,
    ws_connect,
    ws_frames,
)

PROBLEM = "application/problem+json"


def output_reached(*times: Any) -> Any:
    """Accept the frontier event that moves ``output:out`` to ``times``."""
    expected = frontier("output:out", *times)
    return lambda event: event == expected


async def raw(server: Server, method: str, path: str, body: bytes | None = None) -> Any:
    """A request outside the client: ``(status, content type, headers, decoded body)``."""
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.url + path, data=body) as response,
    ):
        data = await response.read()
        decoded = orjson.loads(data) if data else None
        return response.status, response.content_type, response.headers, decoded


# --------------------------------------------------------------------------- the whole path


UNTYPED = {"runs": "rows", "why": "its input is not typed (no schema reaches it)"}


async def test_two_producers_frontiers_events_reads(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        created = await client.create_dataflow(WORDS_COUNT, "word counts")
        df = created["id"]
        assert created == {
            "id": df,
            "name": "word counts",
            "status": "running",
            "created_at": created["created_at"],
            "inputs": {
                "words": {
                    "frontier": [0],
                    "sessions": 0,
                    "records_in": 0,
                    "closed": False,
                    "process": 0,
                }
            },
            "outputs": {"out": {"frontier": [0], "records_out": 0}},
            "graph": WORDS_COUNT,
            "error": None,
            "record_errors": {},
            "execution": {
                "words": {"runs": "rows", "why": "the input has no schema"},
                "count": UNTYPED,
                "out": UNTYPED,
            },
        }
        base = f"/v1/dataflows/{df}"
        watch = Frames(client.frontiers(df))
        # The current frontiers come first.
        assert [await watch.next(), await watch.next()] == [
            frontier("input:words", 0),
            frontier("output:out", 0),
        ]
        async with (
            ws_connect(service, f"{base}/outputs/out/events") as events_ws,
            ws_connect(service, f"{base}/inputs/words/push?start=0") as push_ws,
        ):
            # The subscription exists once the upgrade is done; nothing is complete yet.
            events = Frames(ws_frames(events_ws))
            b = await WsProducer.open(push_ws)
            assert b.opened == {"type": "session", "session": b.session, "time": 0, "credits": 16}
            a = await client.session(df, "words")
            assert (a.time, len(a.id), len(b.session)) == (0, 32, 32)

            # Producer A (HTTP) and producer B (WebSocket) push at times 0 to 3.
            assert await a.push([[0, "a"], [0, "b"], [1, "a"]]) == {
                "seq": 1,
                "session_time": 0,
                "input_frontier": [0],
                "applied": 3,
            }
            ack = {"type": "ack", "session_time": 0, "input_frontier": [0], "applied": 1}
            push = {"type": "push", "seq": 1, "records": [[0, "b"]]}
            assert await b.call(push) == {**ack, "seq": 1, "credits": 16}
            push = {"type": "push", "seq": 2, "records": [[2, "c"]]}
            assert await b.call(push) == {**ack, "seq": 2, "credits": 16}

            # A moves on; the input waits for B (the meet of the sessions).
            assert await a.advance(1) == {
                "seq": None,
                "session_time": 1,
                "input_frontier": [0],
                "applied": 0,
            }
            assert await b.call({"type": "advance", "seq": 3, "time": 1}) == {
                "type": "ack",
                "seq": 3,
                "session_time": 1,
                "input_frontier": [1],
                "applied": 0,
                "credits": 16,
            }
            assert await watch.until(output_reached(1)) == [
                frontier("input:words", 1),
                frontier("output:out", 1),
            ]
            assert canonical(await events.until(is_progress)) == [
                messages(0, *counted(a=1, b=2)),
                progress((0, -1), (1, 1)),
            ]

            assert (await a.push([[1, "c"], [3, "a"]]))["applied"] == 2
            assert (await a.advance(3))["input_frontier"] == [1]
            ack = await b.call({"type": "advance", "seq": 4, "time": 2})
            assert (ack["session_time"], ack["input_frontier"]) == (2, [2])
            assert await watch.until(output_reached(2)) == [
                frontier("input:words", 2),
                frontier("output:out", 2),
            ]
            assert canonical(await events.until(is_progress)) == [
                messages(1, *counted(a=1, c=1)),
                progress((1, -1), (2, 1)),
            ]

            ack = await b.call({"type": "advance", "seq": 5, "time": 3})
            assert (ack["session_time"], ack["input_frontier"]) == (3, [3])
            assert await watch.until(output_reached(3)) == [
                frontier("input:words", 3),
                frontier("output:out", 3),
            ]
            assert canonical(await events.until(is_progress)) == [
                messages(2, *counted(c=1)),
                progress((2, -1), (3, 1)),
            ]

            # Closing both sessions leaves the input where it is (no frontier event) ...
            assert await a.close() == {
                "seq": None,
                "session_time": None,
                "input_frontier": [3],
                "applied": 0,
            }
            await b.send({"type": "close"})
            assert await b.reply() == {
                "type": "ack",
                "seq": None,
                "session_time": None,
                "input_frontier": [3],
                "applied": 0,
                "credits": 0,
            }
            assert await read_to_close(push_ws) == []
            assert push_ws.close_code == 1000
            with pytest.raises(FrontierError) as refused:
                await a.push([[3, "late"]])
            assert refused.value.status == 404

            # ... until the input is closed: then everything completes.
            await client.close_input(df, "words")
            assert await watch.until(output_reached()) == [
                frontier("input:words"),
                frontier("output:out"),
            ]
            assert canonical(await events.until(is_progress)) == [
                messages(3, *counted(a=1)),
                progress((3, -1)),
            ]
        await watch.aclose()

        # The dataflow in full: per-operator frontiers and record counts (both workers).
        described = await client.dataflow(df, operators=True)
        busy = {node: state.pop("busy_seconds") for node, state in described["operators"].items()}
        assert all(type(seconds) is float and seconds >= 0 for seconds in busy.values())
        assert busy["count"] > 0  # it counted the words
        assert described == {
            **created,
            "status": "completed",
            "inputs": {
                "words": {
                    "frontier": [],
                    "sessions": 0,
                    "records_in": 7,
                    "closed": True,
                    "process": 0,
                }
            },
            "outputs": {"out": {"frontier": [], "records_out": 6}},
            "operators": {
                "words": {"outputs": [{"frontier": [], "records": 7}]},
                "count": {"outputs": [{"frontier": [], "records": 6}]},
                "out": {"outputs": []},
            },
        }
        assert "operators" not in await client.dataflow(df, operators=False)

        # Completed times [from, to), one per page, following next_cursor.
        path = f"{base}/outputs/out/times"
        page = await client.request("GET", path, params={"from": "1", "to": "3", "limit": "1"})
        assert page == {
            "times": [{"time": 1, "records": page["times"][0]["records"]}],
            "frontier": [],
            "next_cursor": "2",
        }
        assert sorted(page["times"][0]["records"], key=orjson.dumps) == sorted(
            counted(a=1, c=1), key=orjson.dumps
        )
        page = await client.request(
            "GET", path, params={"from": "1", "to": "3", "limit": "1", "cursor": "2"}
        )
        assert page == {
            "times": [{"time": 2, "records": counted(c=1)}],
            "frontier": [],
            "next_cursor": None,
        }
        read = [(t, sorted(r, key=orjson.dumps)) async for t, r in client.times(df, "out", page=1)]
        assert read == [
            (0, sorted(counted(a=1, b=2), key=orjson.dumps)),
            (1, sorted(counted(a=1, c=1), key=orjson.dumps)),
            (2, counted(c=1)),
            (3, counted(a=1)),
        ]
        assert [t async for t, _ in client.times(df, "out", start=2)] == [2, 3]
        assert [t async for t, _ in client.times(df, "out", end=1)] == [0]


async def test_resume_from_a_time_replays_retained_then_live(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        watch = Frames(client.frontiers(df))
        await watch.until(output_reached(0))
        session = await client.session(df, "words")
        await session.push([[0, "x"], [1, "y"], [1, "y"], [2, "z"], [3, "w"]])
        await session.advance(3)
        await watch.until(output_reached(3))

        resumed = Frames(client.events(df, "out", start=1))
        # Retained records from time 1 on, then the current frontier relative to the start.
        assert canonical(await resumed.until(is_progress)) == [
            messages(1, *counted(y=2)),
            messages(2, *counted(z=1)),
            progress((3, 1), (0, -1)),
        ]
        # Then live events.
        await session.push([[3, "y"], [4, "v"]])
        await session.advance(4)
        assert canonical(await resumed.until(is_progress)) == [
            messages(3, *counted(w=1, y=1)),
            progress((3, -1), (4, 1)),
        ]
        await resumed.aclose()

        # A malformed time: 400, before any upgrade.
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(service, f"/v1/dataflows/{df}/outputs/out/events?from=x"):
                pass
        assert refused.value.response.status_code == 400
        await watch.aclose()


async def test_resume_from_a_frontier_of_product_times(service: Server) -> None:
    graph = {**PASS_THROUGH, "time": {"product": ["u64", "u64"]}}
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(graph))["id"]
        session = await client.session(df, "words")
        pushed = [[[0, 4], "a"], [[0, 5], "b"], [[1, 1], "c"], [[1, 2], "d"], [[1, 3], "e"]]
        await session.push([*pushed, [[2, 0], "f"], [[0, 9], "g"]])
        # A subscriber that stopped at the frontier {(0, 5), (1, 2)} has had (0, 4) and
        # (1, 1). Replayed: every time some element is <=, so (0, 5), (0, 9), (1, 2) and
        # (1, 3), but not (2, 0) (its inner 0 is below both elements' inner coordinates).
        resumed = Frames(client.events(df, "out", frontier=[[0, 5], [1, 2]]))
        replayed = [await resumed.next() for _ in range(4)]
        assert replayed == [
            messages([0, 5], "b"),
            messages([0, 9], "g"),
            messages([1, 2], "d"),
            messages([1, 3], "e"),
        ]
        # The session still holds (0, 0): no progress yet. Advancing it is the next event.
        await session.advance([3, 0])
        assert await resumed.next() == progress(([0, 0], -1), ([3, 0], 1))
        await resumed.aclose()
        # One time alone cannot say it: from (0, 5) misses (1, 2) and (1, 3).
        single = Frames(client.events(df, "out", start=[0, 5]))
        assert [await single.next() for _ in range(2)] == [
            messages([0, 5], "b"),
            messages([0, 9], "g"),
        ]
        await single.aclose()
        base = f"/v1/dataflows/{df}/outputs/out/events"
        for query, detail in [
            ("from=[0,5]&frontier=[[0,5]]", "give from (a time) or frontier"),
            ("frontier=[0,5]", "0 is not a time of output 'out'"),
            ("frontier={}", "frontier must be a JSON array of times"),
            ("frontier=[[0,5],7]", "7 is not a time of output 'out'"),
        ]:
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(service, f"{base}?{query}"):
                    pass
            assert refused.value.response.status_code == 400, query
            assert detail in refused.value.response.body.decode(), query


async def test_pipelined_frames_are_all_acked_in_order(service: Server) -> None:
    # A producer that spends all its credits at once: the acks of the frames answered in a
    # row go out together, each still its own message, in order, with the credits back.
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(PASS_THROUGH))["id"]
        async with ws_connect(service, f"/v1/dataflows/{df}/inputs/words/push") as push_ws:
            producer = await WsProducer.open(push_ws)
            granted = producer.credits
            for seq in range(1, granted + 1):
                await producer.send({"type": "push", "seq": seq, "records": [[seq, f"w{seq}"]]})
            acks = [await producer.reply() for _ in range(granted)]
            assert [(a["type"], a["seq"], a["applied"]) for a in acks] == [
                ("ack", seq, 1) for seq in range(1, granted + 1)
            ]
            assert all(1 <= a["credits"] <= granted for a in acks)
            assert acks[-1]["credits"] == granted
            closed = await producer.call({"type": "close"})
            assert (closed["type"], closed["credits"]) == ("ack", 0)
        watch = Frames(client.frontiers(df))
        await client.close_input(df, "words")
        await watch.until(output_reached())
        await watch.aclose()
        times = [t async for t, _ in client.times(df, "out")]
        assert times == list(range(1, granted + 1))


async def test_output_event_subscription_sees_records_as_they_come(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(PASS_THROUGH))["id"]
        async with ws_connect(service, f"/v1/dataflows/{df}/outputs/out/events") as ws:
            events = Frames(ws_frames(ws))
            session = await client.session(df, "words")
            await session.push([[0, "a"]])
            assert await events.next() == messages(0, "a")
            await session.push([[0, "b"], [2, "c"]])
            # One worker owns the input: one event per time, in the order pushed.
            assert [await events.next(), await events.next()] == [
                messages(0, "b"),
                messages(2, "c"),
            ]
            await session.advance(2)
            assert await events.next() == progress((0, -1), (2, 1))
            await session.close()
            await client.close_input(df, "words")
            assert await events.next() == progress((2, -1))


# --------------------------------------------------------------------------- retries, transactions


async def test_retried_push_is_acknowledged_again_and_applied_once(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        base = f"/v1/dataflows/{df}"
        session = await client.session(df, "words")
        first = await session.push([[0, "x"], [0, "y"]], seq=1)
        assert first == {"seq": 1, "session_time": 0, "input_frontier": [0], "applied": 2}
        assert await session.push([[0, "x"], [0, "y"]], seq=1) == first
        assert await session.push([[0, "x"]], seq=2) == {**first, "seq": 2, "applied": 1}
        assert await session.push([[0, "x"]], seq=2) == {**first, "seq": 2, "applied": 1}
        with pytest.raises(FrontierError) as stale:
            await session.push([[0, "x"]], seq=1)
        assert stale.value.status == 409
        assert stale.value.problem["detail"] == (
            f"seq 1 is stale: session {session.id} has applied up to 2"
        )

        # Over the WebSocket a frame sent again is acknowledged saying it applied nothing
        # (issue 22: a resuming producer resends every frame it has no ack for).
        async with ws_connect(service, f"{base}/inputs/words/push") as ws:
            producer = await WsProducer.open(ws)
            frame = {"type": "push", "seq": 7, "records": [[0, "y"], [1, "z"]]}
            ack = await producer.call(frame)
            assert ack == {
                "type": "ack",
                "seq": 7,
                "session_time": 0,
                "input_frontier": [0],
                "applied": 2,
                "credits": 16,
            }
            assert await producer.call(frame) == {**ack, "applied": 0}
            assert await producer.call({"type": "close"}) == {
                "type": "ack",
                "seq": None,
                "session_time": None,
                "input_frontier": [0],
                "applied": 0,
                "credits": 0,
            }
            assert await read_to_close(ws) == []
        await session.close()
        await client.close_input(df, "words")
        read = {t: sorted(r, key=orjson.dumps) async for t, r in client.times(df, "out")}
        assert read == {
            0: sorted(counted(x=2, y=2), key=orjson.dumps),
            1: counted(z=1),
        }
        described = await client.dataflow(df, operators=False)
        assert described["inputs"]["words"]["records_in"] == 5


async def test_transactions_commit_once_and_abort(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        watch = Frames(client.frontiers(df))
        await watch.until(output_reached(0))
        session = await client.session(df, "words")
        assert await client.stage(df, "words", "t1", [[0, "x"], [1, "y"]]) == 2
        assert await client.stage(df, "words", "t1", [[1, "x"]]) == 3
        assert await client.stage(df, "words", "t2", [[0, "gone"]]) == 1
        assert await client.abort(df, "words", "t2") == 1
        assert await client.abort(df, "words", "t2") == 0

        # Staged records are invisible: time 0 completes without them.
        await session.push([[0, "seen"]])
        await session.advance(1)
        await watch.until(output_reached(1))
        read = [(t, r) async for t, r in client.times(df, "out")]
        assert read == [(0, counted(seen=1))]
        assert (await client.dataflow(df))["inputs"]["words"]["records_in"] == 1

        # t1 has a record at 0, before the session's time 1: nothing is committed.
        with pytest.raises(FrontierError) as conflict:
            await session.commit(["t1"], "job-1", advance_to=2)
        assert conflict.value.status == 409
        assert conflict.value.problem["detail"] == (
            "record 0 is at 0, before the session's time 1: the commit was refused and "
            "nothing of it applied"
        )
        # A second session still at time 0 commits it, advancing in the same call.
        early = await client.session(df, "words", start=1)
        assert early.time == 1
        await client.abort(df, "words", "t1")
        assert await client.stage(df, "words", "t3", [[1, "x"], [1, "y"], [2, "x"]]) == 3
        ack = await early.commit(["t3"], "job-1", advance_to=2)
        assert ack == {"seq": None, "session_time": 2, "input_frontier": [1], "applied": 3}
        # The same key again: the same answer, applied once.
        assert await early.commit(["t3"], "job-1", advance_to=2) == ack
        with pytest.raises(FrontierError) as reused:
            await early.commit(["t4"], "job-1")
        assert reused.value.status == 409
        assert reused.value.problem["detail"] == (
            "idempotency key 'job-1' was used to commit ['t3'], not ['t4']"
        )
        with pytest.raises(FrontierError) as missing:
            await early.commit(["t4"], "job-2")
        assert missing.value.status == 404

        await session.close()
        await early.close()
        await client.close_input(df, "words")
        await watch.until(output_reached())
        read = [(t, sorted(r, key=orjson.dumps)) async for t, r in client.times(df, "out")]
        assert read == [
            (0, counted(seen=1)),
            (1, sorted(counted(x=1, y=1), key=orjson.dumps)),
            (2, counted(x=1)),
        ]
        assert (await client.dataflow(df))["inputs"]["words"]["records_in"] == 4
        await watch.aclose()


# --------------------------------------------------------------------------- refusals

INVALID_GRAPH = {
    "nodes": {
        "in": {"op": "input"},
        "twice": {"op": "mapp", "expr": "r * 2"},
        "big": {"op": "filter", "expr": "r >"},
        "out": {"op": "output"},
        "m": {"op": "map", "size": 3},
    },
    "edges": [["in", "big"], ["big", "out"], ["in", "out"], ["big:1", "nowhere"]],
}

CATALOGUE = (
    "accumulate, aggregate, branch, concat, count, count_by, delay, exchange, feedback, "
    "filter, flat_map, input, inspect, join, key_by, map, output, partition"
)


async def test_a_graph_with_several_problems_gets_every_one(service: Server) -> None:
    body = orjson.dumps({"graph": INVALID_GRAPH})
    status, content_type, _, problem = await raw(service, "POST", "/v1/dataflows", body)
    assert (status, content_type) == (422, PROBLEM)
    assert problem == {
        "type": "https://frontier.dev/problems/invalid",
        "title": "Unprocessable content",
        "status": 422,
        "detail": "the graph has 8 problem(s)",
        "problems": [
            {"pointer": "/nodes/twice/op", "detail": f"unknown operator 'mapp' ({CATALOGUE})"},
            {
                "pointer": "/nodes/big/expr",
                "detail": "expression does not compile: line 1, column 4: unexpected end of "
                "expression",
            },
            {"pointer": "/nodes/m/size", "detail": "map has no parameter 'size'"},
            {"pointer": "/nodes/m/expr", "detail": "map needs the parameter 'expr'"},
            {
                "pointer": "/edges/2/1",
                "detail": "input out:0 is already connected by /edges/1; use a concat to merge",
            },
            {"pointer": "/edges/3/0", "detail": "big (filter) has no output 1"},
            {"pointer": "/edges/3/1", "detail": "no node 'nowhere'"},
            {"pointer": "/nodes/m", "detail": "input m:0 is not connected"},
        ],
    }
    # The same with dry_run: nothing is created either way.
    status, content_type, _, dry = await raw(service, "POST", "/v1/dataflows?dry_run=true", body)
    assert (status, content_type, dry) == (422, PROBLEM, problem)


async def test_other_graph_problems(service: Server) -> None:
    cycle = {
        "nodes": {
            "in": {"op": "input"},
            "merge": {"op": "concat"},
            "step": {"op": "map", "expr": "r + 1"},
            "out": {"op": "output"},
        },
        "edges": [["in", "merge:0"], ["step", "merge:1"], ["merge", "step"], ["step", "out"]],
    }
    cases = [
        (
            cycle,
            [
                {
                    "pointer": "/edges",
                    "detail": "the cycle through merge, step does not pass a feedback of the "
                    "root scope, so records could return at the same time",
                }
            ],
        ),
        (
            {"time": "u32", "nodes": {}},
            [
                {
                    "pointer": "/time",
                    "detail": 'the time domain must be "u64" or {"product": [<time domain>, '
                    '"u64"]}',
                },
                {"pointer": "/nodes", "detail": "nodes must be a non-empty object of named nodes"},
            ],
        ),
    ]
    async with AsyncClient(service.url) as client:
        for graph, problems in cases:
            with pytest.raises(FrontierError) as invalid:
                await client.create_dataflow(graph)
            assert invalid.value.status == 422
            assert invalid.value.problem["problems"] == problems
            assert invalid.value.problem["detail"] == f"the graph has {len(problems)} problem(s)"


async def test_bodies_that_are_not_json_or_not_the_right_shape(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        session = await client.session(df, "words")
    push = f"/v1/dataflows/{df}/inputs/words/sessions/{session.id}/push"
    for path in ("/v1/dataflows", push):
        status, content_type, _, problem = await raw(service, "POST", path, b"{not json")
        assert (status, content_type) == (400, PROBLEM)
        assert problem == {
            "type": "https://frontier.dev/problems/bad-request",
            "title": "Bad request",
            "status": 400,
            "detail": "the request body is not valid JSON",
        }
    body = b'{"seq": "1", "records": [[0, 1], [-1, 2]], "x": 0}'
    status, content_type, _, problem = await raw(service, "POST", push, body)
    assert (status, content_type) == (422, PROBLEM)
    assert problem == {
        "type": "https://frontier.dev/problems/invalid",
        "title": "Unprocessable content",
        "status": 422,
        "detail": "the request body has 3 problem(s)",
        "problems": [
            {"pointer": "/seq", "detail": "Input should be a valid integer"},
            {
                "pointer": "/records/1/0",
                "detail": "a time is an integer in [0, 2**64) or an array [outer, inner] of "
                "two times",
            },
            {"pointer": "/x", "detail": "unknown field"},
        ],
    }
    status, _, _, problem = await raw(service, "POST", "/v1/dataflows", b'{"graph": []}')
    assert (status, problem["problems"]) == (
        422,
        [{"pointer": "/graph", "detail": "Input should be an object"}],
    )


async def test_pushing_before_the_session_time_is_409_and_nothing_applied(
    service: Server,
) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        session = await client.session(df, "words")
        await session.push([[2, "kept"]])
        await session.advance(2)
        with pytest.raises(FrontierError) as conflict:
            await session.push([[2, "no"], [3, "no"], [1, "late"], [4, "no"]])
        assert conflict.value.status == 409
        assert conflict.value.problem == {
            "type": "https://frontier.dev/problems/conflict",
            "title": "Conflict",
            "status": 409,
            "detail": "record 2 is at 1, before the session's time 2: the push was refused "
            "and nothing of it applied",
        }
        with pytest.raises(FrontierError) as backwards:
            await session.advance(1)
        assert backwards.value.status == 409
        # Nor over the WebSocket: an error frame (no ack), and the socket stays usable.
        base = f"/v1/dataflows/{df}/inputs/words"
        async with ws_connect(service, f"{base}/push") as ws:
            producer = await WsProducer.open(ws)
            assert producer.opened["time"] == 2
            error = await producer.call({"type": "push", "seq": 1, "records": [[1, "late"]]})
            assert error == {
                "type": "error",
                "title": "Conflict",
                "status": 409,
                "detail": "record 0 is at 1, before the session's time 2: the push was "
                "refused and nothing of it applied",
                "credits": 16,  # its credit is returned
            }
            await producer.call({"type": "close"})
            await read_to_close(ws)
        # Nor a session that starts before the input's time (409 before the upgrade too).
        with pytest.raises(FrontierError) as early:
            await client.session(df, "words", start=1)
        assert early.value.status == 409
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(service, f"{base}/push?start=1"):
                pass
        assert refused.value.response.status_code == 409
        await session.push([[3, "after"]])
        await session.close()
        await client.close_input(df, "words")
        read = [(t, r) async for t, r in client.times(df, "out")]
        assert read == [(2, counted(kept=1)), (3, counted(after=1))]
        assert (await client.dataflow(df))["inputs"]["words"]["records_in"] == 2


async def test_unknown_dataflow_input_output_session_are_404(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        session = await client.session(df, "words")
        nope = "0" * 32
        cases = [
            ("GET", f"/v1/dataflows/{nope}", None, f"no dataflow {nope!r}"),
            ("DELETE", f"/v1/dataflows/{nope}", None, f"no dataflow {nope!r}"),
            (
                "POST",
                f"/v1/dataflows/{nope}/inputs/words/sessions",
                {},
                f"no dataflow {nope!r}",
            ),
            (
                "POST",
                f"/v1/dataflows/{df}/inputs/nope/sessions",
                {},
                f"dataflow {df!r} has no input 'nope'",
            ),
            (
                "POST",
                f"/v1/dataflows/{df}/inputs/words/sessions/{nope}/push",
                {"seq": 1, "records": []},
                f"input 'words' has no open session {nope!r}",
            ),
            (
                "GET",
                f"/v1/dataflows/{df}/outputs/nope/times",
                None,
                f"dataflow {df!r} has no output 'nope'",
            ),
        ]
        for method, path, body, detail in cases:
            with pytest.raises(FrontierError) as missing:
                await client.request(method, path, body)
            assert (missing.value.status, missing.value.problem) == (
                404,
                {
                    "type": "https://frontier.dev/problems/not-found",
                    "title": "Not found",
                    "status": 404,
                    "detail": detail,
                },
            ), (method, path)
        for path in (
            f"/v1/dataflows/{nope}/frontiers",
            f"/v1/dataflows/{df}/outputs/nope/events",
            f"/v1/dataflows/{df}/inputs/nope/push",
        ):
            with pytest.raises(InvalidStatus) as refused:
                async with ws_connect(service, path):
                    pass
            response = refused.value.response
            assert response.status_code == 404, path
            assert response.headers["Content-Type"].startswith(PROBLEM)
            assert orjson.loads(response.body)["status"] == 404
        await session.close()


async def test_dry_run_returns_the_plan_and_creates_nothing(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        before = await client.dataflows()
        plan = await client.plan(WORDS_COUNT)
        key = plan["nodes"]["count"]["expressions"]["key"]
        assert key["python"].startswith("def _cel(r):")
        key["python"] = "..."
        assert plan == {
            "time": "u64",
            "scopes": {},
            "inputs": ["words"],
            "outputs": ["out"],
            "order": ["words", "count", "out"],
            "nodes": {
                "words": {
                    "op": "input",
                    "scope": None,
                    "inputs": [],
                    "outputs": 1,
                    "expressions": {},
                    "runs": "rows",
                    "why": "the input has no schema",
                },
                "count": {
                    "op": "count_by",
                    "scope": None,
                    "inputs": ["words:0"],
                    "outputs": 1,
                    "expressions": {"key": {"source": "r", "python": "...", "type": "dyn"}},
                    **UNTYPED,
                },
                "out": {
                    "op": "output",
                    "scope": None,
                    "inputs": ["count:0"],
                    "outputs": 0,
                    "expressions": {},
                    **UNTYPED,
                },
            },
        }
        assert await client.dataflows() == before
    status, _, headers, body = await raw(
        service, "POST", "/v1/dataflows?dry_run=true", orjson.dumps({"graph": WORDS_COUNT})
    )
    assert (status, list(body), "Location" in headers) == (200, ["plan"], False)


async def test_create_answers_201_with_location(service: Server) -> None:
    body = orjson.dumps({"graph": PASS_THROUGH, "name": "located"})
    status, content_type, headers, created = await raw(service, "POST", "/v1/dataflows", body)
    assert (status, content_type) == (201, "application/json")
    assert headers["Location"] == f"/v1/dataflows/{created['id']}"
    status, _, _, fetched = await raw(service, "GET", headers["Location"])
    assert (status, fetched["id"], fetched["name"]) == (200, created["id"], "located")


async def test_list_is_paginated(start_server: Any) -> None:
    server = start_server("--workers", "1")
    async with AsyncClient(server.url) as client:
        assert await client.request("GET", "/v1/dataflows") == {"items": [], "next_cursor": None}
        ids = [(await client.create_dataflow(PASS_THROUGH, f"df{i}"))["id"] for i in range(5)]
        seen: list[str] = []
        pages: list[int] = []
        params = {"limit": "2"}
        while True:
            page = await client.request("GET", "/v1/dataflows", params=params)
            pages.append(len(page["items"]))
            seen += [item["id"] for item in page["items"]]
            if page["next_cursor"] is None:
                break
            params = {"limit": "2", "cursor": page["next_cursor"]}
        assert (seen, pages) == (ids, [2, 2, 1])
        first = (await client.request("GET", "/v1/dataflows", params={"limit": "1"}))["items"]
        assert first == [
            {
                "id": ids[0],
                "name": "df0",
                "status": "running",
                "created_at": first[0]["created_at"],
                "inputs": ["words"],
                "outputs": ["out"],
            }
        ]
        assert [d["id"] for d in await client.dataflows(page=3)] == ids
        for bad in ("0", "1001", "x"):
            with pytest.raises(FrontierError) as refused:
                await client.request("GET", "/v1/dataflows", params={"limit": bad})
            assert refused.value.status == 400
        await client.drop(ids[1])
        assert [d["id"] for d in await client.dataflows(page=1)] == [ids[0], *ids[2:]]


async def test_a_cursor_survives_dropping_the_dataflow_it_follows(start_server: Any) -> None:
    server = start_server("--workers", "1")
    async with AsyncClient(server.url) as client:
        ids = [(await client.create_dataflow(PASS_THROUGH))["id"] for _ in range(3)]
        page = await client.request("GET", "/v1/dataflows", params={"limit": "1"})
        assert [d["id"] for d in page["items"]] == ids[:1]
        await client.drop(ids[0])
        try:
            page = await client.request(
                "GET", "/v1/dataflows", params={"limit": "1", "cursor": page["next_cursor"]}
            )
        except FrontierError as error:
            raise AssertionError(f"the cursor was refused: {error}") from None
        assert [d["id"] for d in page["items"]] == ids[1:2]


# --------------------------------------------------------------------------- dropping


async def test_drop_closes_subscribers_with_4410_and_refuses_producers(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        base = f"/v1/dataflows/{df}"
        session = await client.session(df, "words")
        await session.push([[0, "a"]])
        await session.advance(1)
        async with (
            ws_connect(service, f"{base}/frontiers") as frontiers_ws,
            ws_connect(service, f"{base}/frontiers?operators=true") as operators_ws,
            ws_connect(service, f"{base}/outputs/out/events") as events_ws,
            ws_connect(service, f"{base}/inputs/words/push") as push_ws,
        ):
            watch = Frames(ws_frames(frontiers_ws))
            await watch.until(output_reached(1))
            events = Frames(ws_frames(events_ws))
            assert canonical(await events.until(is_progress)) == [
                messages(0, *counted(a=1)),
                progress((1, 1), (0, -1)),
            ]
            ops = Frames(ws_frames(operators_ws))
            assert await ops.until(lambda e: e["location"] == "operator:count:0") == [
                frontier("input:words", 1),
                frontier("output:out", 1),
                frontier("operator:words:0", 1),
                frontier("operator:count:0", 1),
            ]
            producer = await WsProducer.open(push_ws)

            assert await client.request("DELETE", base) is None

            closed = {"type": "closed", "reason": "the dataflow was dropped"}
            assert await read_to_close(frontiers_ws) == [closed]
            assert (frontiers_ws.close_code, frontiers_ws.close_reason) == (
                4410,
                "the dataflow was dropped",
            )
            assert await read_to_close(operators_ws) == [closed]
            assert operators_ws.close_code == 4410
            assert await read_to_close(events_ws) == [{**closed, "resume": [1]}]
            assert (events_ws.close_code, events_ws.close_reason) == (4410, '{"resume":[1]}')

            # A WebSocket producer's next frame: an error, then 4410.
            await producer.send({"type": "push", "seq": 1, "records": [[1, "b"]]})
            assert await read_to_close(push_ws) == [
                {
                    "type": "error",
                    "title": "Gone",
                    "status": 410,
                    "detail": "the dataflow of input 'words' was dropped",
                    "credits": 16,
                }
            ]
            assert push_ws.close_code == 4410
        assert df not in [d["id"] for d in await client.dataflows()]


async def test_http_producer_of_a_dropped_dataflow_gets_410(service: Server) -> None:
    async with AsyncClient(service.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        session = await client.session(df, "words")
        await client.drop(df)
        with pytest.raises(FrontierError) as gone:
            await session.push([[0, "a"]])
        assert gone.value.status == 410


async def test_the_server_header_names_the_product_and_nothing_else(service: Server) -> None:
    # Every kind of answer: a body, a problem, a 404 of the router, a WebSocket upgrade.
    async with aiohttp.ClientSession(service.url) as http:
        for method, path in [
            ("GET", "/healthz"),
            ("GET", "/v1/dataflows"),
            ("GET", "/v1/dataflows/nope"),
            ("GET", "/no/such/route"),
            ("POST", "/v1/dataflows"),
        ]:
            async with http.request(method, path, data=b"{") as response:
                assert response.headers.getall("Server") == ["frontier"], (method, path)
        created = await (await http.post("/v1/dataflows", json={"graph": WORDS_COUNT})).json()
        async with http.ws_connect(f"/v1/dataflows/{created['id']}/frontiers") as ws:
            assert ws._response.headers.getall("Server") == ["frontier"]
        await http.delete(f"/v1/dataflows/{created['id']}")


async def test_a_producer_socket_whose_session_is_closed_elsewhere_ends_with_4404(
    service: Server,
) -> None:
    async with aiohttp.ClientSession(service.url) as http:
        created = await (await http.post("/v1/dataflows", json={"graph": WORDS_COUNT})).json()
        df = created["id"]
        async with ws_connect(service, f"/v1/dataflows/{df}/inputs/words/push") as ws:
            opened = orjson.loads(await ws.recv())
            session = opened["session"]
            # The session is closed over HTTP while its socket is open ...
            closing = await http.delete(f"/v1/dataflows/{df}/inputs/words/sessions/{session}")
            assert closing.status == 200
            # ... so the socket's next push finds no session: an error, then 4404.
            await ws.send(orjson.dumps({"type": "push", "seq": 1, "records": [[0, "a"]]}))
            detail = f"input 'words' has no open session {session!r}"
            assert await read_to_close(ws) == [
                {
                    "type": "error",
                    "title": "Not found",
                    "status": 404,
                    "detail": detail,
                    "credits": opened["credits"],
                }
            ]
            assert (ws.close_code, ws.close_reason) == (4404, detail)
        await http.delete(f"/v1/dataflows/{df}")
