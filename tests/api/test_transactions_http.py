"""Transactions over HTTP: columnar Arrow staging, the input's description, commits without a
session, the idempotency-key-reused problem, counts-only listings and Arrow reads of times
beyond int64."""

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.server import create_app
from service.app import Limits, Settings

ARROW = "application/vnd.apache.arrow.stream"
PROBLEM = "application/problem+json"
IDENTITY = {
    "nodes": {"rows": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["rows", "out"]],
}
PRODUCT = {"time": {"product": ["u64", "u64"]}, **IDENTITY}
BIG = 2**63


def arrow(columns: dict[str, Any]) -> bytes:
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    settings = Settings(limits=Limits(max_staged_records_per_input=10))
    async with TestClient(TestServer(create_app(settings), host="127.0.0.1")) as c:
        yield c


async def create(client: TestClient[Any, Any], graph: dict[str, Any] = IDENTITY) -> str:
    created = await client.post("/v1/dataflows", data=orjson.dumps({"graph": graph}))
    return str((await created.json())["id"])


async def answer(response: Any) -> tuple[int, str, Any]:
    return response.status, response.content_type, await response.json()


async def stage_arrow(client: TestClient[Any, Any], dataflow: str, txn: str, body: bytes) -> Any:
    return await client.put(
        f"/v1/dataflows/{dataflow}/inputs/rows/transactions/{txn}",
        data=body,
        headers={"Content-Type": ARROW},
    )


async def commit(client: TestClient[Any, Any], dataflow: str, **body: Any) -> Any:
    return await client.post(
        f"/v1/dataflows/{dataflow}/inputs/rows/commit", data=orjson.dumps(body)
    )


async def complete(client: TestClient[Any, Any], dataflow: str, frontier: list[Any]) -> Any:
    """The JSON listing once the output's frontier is ``frontier``."""
    for _ in range(200):
        read = await client.get(f"/v1/dataflows/{dataflow}/outputs/out/times")
        page = await read.json()
        if page["frontier"] == frontier:
            return page
    raise AssertionError(f"the output did not reach {frontier}: {page}")


# --------------------------------------------------------------------------- staging Arrow


async def test_arrow_rows_are_committed_per_time_in_staging_order(
    client: TestClient[Any, Any],
) -> None:
    dataflow = await create(client)
    body = arrow(
        {
            "time": pa.array([2, 0, 1, 0, 2], pa.int32()),
            "key": ["a", "b", None, "d", "e"],
            "n": pa.array([1, 2, 3, 4, 5], pa.int64()),
        }
    )
    assert await answer(await stage_arrow(client, dataflow, "t1", body)) == (
        200,
        "application/json",
        {"staged": 5},
    )
    texts = arrow({"time": pa.array([1], pa.uint64()), "record": ['{"k": [1, 2]}']})
    assert (await (await stage_arrow(client, dataflow, "t2", texts)).json()) == {"staged": 1}
    committed = await commit(
        client, dataflow, transactions=["t1", "t2"], idempotency_key="k", advance_to=3
    )
    assert await answer(committed) == (
        200,
        "application/json",
        {"seq": None, "session_time": None, "input_frontier": [3], "applied": 6},
    )
    page = await complete(client, dataflow, [3])
    assert page["times"] == [
        {"time": 0, "records": [{"key": "b", "n": 2}, {"key": "d", "n": 4}]},
        {"time": 1, "records": [{"key": None, "n": 3}, {"k": [1, 2]}]},
        {"time": 2, "records": [{"key": "a", "n": 1}, {"key": "e", "n": 5}]},
    ]


async def test_an_arrow_row_before_the_input_time_is_named(client: TestClient[Any, Any]) -> None:
    dataflow = await create(client)
    await commit(client, dataflow, transactions=[], idempotency_key="move", advance_to=2)
    body = arrow({"time": pa.array([2, 3, 5, 1, 0], pa.int64()), "v": [1, 2, 3, 4, 5]})
    assert await answer(await stage_arrow(client, dataflow, "t1", body)) == (
        409,
        PROBLEM,
        {
            "type": "https://frontier.dev/problems/conflict",
            "title": "Conflict",
            "status": 409,
            "detail": "record 3 is at 1, before input 'rows''s time 2: it could never be "
            "committed; nothing was staged",
        },
    )
    described = await (await client.get(f"/v1/dataflows/{dataflow}/inputs/rows")).json()
    assert (described["staged"], described["transactions"]) == (0, [])


@pytest.mark.parametrize(
    ("columns", "detail"),
    [
        (
            {"time": pa.array([0], pa.int64()), "price": pa.array([1], pa.decimal128(5, 2))},
            "column 'price' holds decimal128(5, 2), which has no JSON form: send such rows as "
            "JSON text in a 'record' column",
        ),
        (
            {"time": pa.array([0], pa.int64()), "blob": pa.array([b"x"], pa.binary())},
            "column 'blob' holds binary, which has no JSON form: send such rows as JSON text "
            "in a 'record' column",
        ),
        (
            {"time": pa.array([0, 3, -2], pa.int64())},
            "row 2: time -2 is outside [0, 2**64)",
        ),
        ({"time": pa.array([0, None], pa.int64())}, "the 'time' column has nulls"),
        (
            {"time": pa.array([0], pa.int64()), "record": pa.array([1], pa.int64())},
            "the 'record' column must hold JSON text, not int64",
        ),
        (
            {"time": pa.array([0, 0], pa.int64()), "record": ['"ok"', "{nope"]},
            "row 1: the record is not valid JSON",
        ),
    ],
)
async def test_bad_arrow_bodies_stage_nothing(
    client: TestClient[Any, Any], columns: dict[str, Any], detail: str
) -> None:
    dataflow = await create(client)
    status, kind, problem = await answer(await stage_arrow(client, dataflow, "t", arrow(columns)))
    assert (status, kind, problem["type"], problem["detail"]) == (
        400,
        PROBLEM,
        "https://frontier.dev/problems/bad-request",
        detail,
    )


async def test_duplicate_arrow_columns_are_refused(client: TestClient[Any, Any]) -> None:
    dataflow = await create(client)
    table = pa.Table.from_arrays(
        [pa.array([0], pa.int64()), pa.array([1]), pa.array([2])], names=["time", "x", "x"]
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    problem = await (await stage_arrow(client, dataflow, "t", sink.getvalue().to_pybytes())).json()
    assert problem["detail"] == "the Arrow body has more than one column named 'x'"


async def test_arrow_rows_count_against_max_staged_records(client: TestClient[Any, Any]) -> None:
    dataflow = await create(client)
    eight = arrow({"time": pa.array([0] * 8, pa.int64())})
    assert (await (await stage_arrow(client, dataflow, "t1", eight)).json()) == {"staged": 8}
    status, _kind, problem = await answer(await stage_arrow(client, dataflow, "t2", eight))
    assert (status, problem["detail"]) == (
        429,
        "input 'rows' would hold more than max_staged_records_per_input (10) staged records",
    )


# --------------------------------------------------------------------------- the input


async def test_an_input_shows_its_sessions_and_staged_transactions(
    client: TestClient[Any, Any],
) -> None:
    dataflow = await create(client)
    base = f"/v1/dataflows/{dataflow}/inputs/rows"
    opened = await (await client.post(f"{base}/sessions", data=b'{"start": 4}')).json()
    await client.put(f"{base}/transactions/orphan", data=b'{"records": [[5, "a"], [6, "b"]]}')
    await stage_arrow(client, dataflow, "spark.w.p0.a0", arrow({"time": pa.array([4, 4, 9])}))
    await client.put(f"{base}/transactions/empty", data=b'{"records": []}')
    assert await answer(await client.get(base)) == (
        200,
        "application/json",
        {
            "input": "rows",
            "frontier": [0],
            "time": 0,
            "closed": False,
            "records_in": 0,
            "dropped_late": 0,
            "sessions": [{"session": opened["session"], "time": 4}],
            "staged": 5,
            "transactions": [
                {"transaction": "orphan", "staged": 2},
                {"transaction": "spark.w.p0.a0", "staged": 3},
                {"transaction": "empty", "staged": 0},
            ],
        },
    )
    await client.post(f"{base}/close")
    assert (await client.get(base)).status == 200
    assert await (await client.get(base)).json() == {
        "input": "rows",
        "frontier": [],
        "time": None,
        "closed": True,
        "records_in": 0,
        "dropped_late": 0,
        "sessions": [],
        "staged": 0,
        "transactions": [],
    }
    missing = await client.get(f"/v1/dataflows/{dataflow}/inputs/nope")
    assert (missing.status, (await missing.json())["detail"]) == (
        404,
        f"dataflow {dataflow!r} has no input 'nope'",
    )
    await client.delete(f"/v1/dataflows/{dataflow}")
    gone = await client.get(base)
    assert (gone.status, (await gone.json())["type"]) == (
        410,
        "https://frontier.dev/problems/gone",
    )


# --------------------------------------------------------------------------- commits


async def test_a_key_used_for_other_transactions_has_its_own_problem_type(
    client: TestClient[Any, Any],
) -> None:
    dataflow = await create(client)
    base = f"/v1/dataflows/{dataflow}/inputs/rows"
    await client.put(f"{base}/transactions/a0", data=b'{"records": [[0, "x"]]}')
    await client.put(f"{base}/transactions/a1", data=b'{"records": [[0, "y"]]}')
    first = await commit(client, dataflow, transactions=["a0"], idempotency_key="job", advance_to=1)
    ack = {"seq": None, "session_time": None, "input_frontier": [1], "applied": 1}
    assert (first.status, await first.json()) == (200, ack)
    # The same key and transactions: the same ack, nothing applied, leftovers discarded.
    again = await commit(
        client, dataflow, transactions=["a0"], idempotency_key="job", discard=["a0", "a1"]
    )
    assert (again.status, await again.json()) == (200, ack)
    assert (await (await client.get(base)).json())["transactions"] == []
    # Other transactions under the key: idempotency-key-reused, through either route.
    await client.put(f"{base}/transactions/a2", data=b'{"records": [[1, "z"]]}')
    session = (await (await client.post(f"{base}/sessions", data=b"{}")).json())["session"]
    for path in (f"{base}/commit", f"{base}/sessions/{session}/commit"):
        reused = await client.post(
            path, data=orjson.dumps({"transactions": ["a2"], "idempotency_key": "job"})
        )
        assert await answer(reused) == (
            409,
            PROBLEM,
            {
                "type": "https://frontier.dev/problems/idempotency-key-reused",
                "title": "Idempotency key reused",
                "status": 409,
                "detail": "idempotency key 'job' was used to commit ['a0'], not ['a2']",
                "idempotency_key": "job",
                "committed": ["a0"],
            },
        )
    page = await complete(client, dataflow, [1])
    assert page["times"] == [{"time": 0, "records": ["x"]}]


async def test_a_commit_with_a_digest_and_dropped_rows(client: TestClient[Any, Any]) -> None:
    """The same digest under a key answers the first ack whatever the transactions; another
    is idempotency-key-reused naming the first digest; the dropped rows are counted once,
    in the input's description and in /metrics."""
    dataflow = await create(client)
    base = f"/v1/dataflows/{dataflow}/inputs/rows"
    await client.put(f"{base}/transactions/p0.a0", data=b'{"records": [[0, "x"], [1, "y"]]}')
    body = {"idempotency_key": "spark.w", "advance_to": 2, "digest": "sha:1", "dropped": 5}
    first = await commit(client, dataflow, transactions=["p0.a0"], **body)
    ack = {"seq": None, "session_time": None, "input_frontier": [2], "applied": 2}
    assert (first.status, await first.json()) == (200, ack)
    # A run again whose rows were all late: nothing staged, the same digest.
    again = await commit(client, dataflow, transactions=[], discard=["p0.a0", "p0.a1"], **body)
    assert (again.status, await again.json()) == (200, ack)
    await client.put(f"{base}/transactions/p0.a1", data=b'{"records": [[2, "z"]]}')
    other = await commit(client, dataflow, transactions=["p0.a1"], **{**body, "digest": "sha:2"})
    assert await answer(other) == (
        409,
        PROBLEM,
        {
            "type": "https://frontier.dev/problems/idempotency-key-reused",
            "title": "Idempotency key reused",
            "status": 409,
            "detail": "idempotency key 'spark.w' committed other rows (digest 'sha:1') than "
            "this commit's (digest 'sha:2'): nothing was applied",
            "idempotency_key": "spark.w",
            "committed": ["p0.a0"],
            "digest": "sha:1",
        },
    )
    described = await (await client.get(base)).json()
    assert (described["records_in"], described["dropped_late"], described["staged"]) == (2, 5, 1)
    await client.put(f"{base}/transactions/v", data=b'{"records": [[2, "v"]]}')
    await commit(client, dataflow, transactions=["v"], idempotency_key="spark.v", dropped=3)
    metrics = await (await client.get("/metrics")).text()
    assert (
        f'frontier_records_dropped_late_total{{dataflow="{dataflow}",input="rows"}} 8.0'
        in metrics.splitlines()
    )
    assert (await (await client.get(base)).json())["dropped_late"] == 8
    for bad, detail in (
        ({"digest": "a b"}, "String should match pattern '^[A-Za-z0-9_.:+/=-]{1,128}$'"),
        ({"dropped": -1}, "Input should be greater than or equal to 0"),
    ):
        refused = await commit(client, dataflow, transactions=[], idempotency_key="k", **bad)
        status, kind, problem = await answer(refused)
        assert (status, kind, problem["problems"]) == (
            422,
            PROBLEM,
            [{"pointer": f"/{next(iter(bad))}", "detail": detail}],
        )


async def test_a_commit_without_a_session_refuses_a_bad_body(client: TestClient[Any, Any]) -> None:
    dataflow = await create(client)
    status, _kind, problem = await answer(
        await commit(client, dataflow, transactions=["t", "t"], idempotency_key="k")
    )
    assert (status, problem["problems"]) == (
        422,
        [{"pointer": "/transactions", "detail": "transaction 't' is listed more than once"}],
    )
    status, _kind, problem = await answer(
        await commit(client, dataflow, transactions=["t"], idempotency_key="k")
    )
    assert (status, problem["detail"]) == (404, "no staged transaction 't' on input 'rows'")


# --------------------------------------------------------------------------- reading


async def test_counts_list_completed_times_without_their_records(
    client: TestClient[Any, Any],
) -> None:
    dataflow = await create(client)
    body = arrow({"time": pa.array([0, 0, 2, 5, 5, 5], pa.int64())})
    await stage_arrow(client, dataflow, "t", body)
    await commit(client, dataflow, transactions=["t"], idempotency_key="k", advance_to=6)
    await complete(client, dataflow, [6])
    times = f"/v1/dataflows/{dataflow}/outputs/out/times"
    first = await client.get(f"{times}?counts=true&limit=2", headers={"Accept": ARROW})
    assert await answer(first) == (
        200,
        "application/json",
        {
            "times": [{"time": 0, "count": 2}, {"time": 2, "count": 1}],
            "frontier": [6],
            "next_cursor": "5",
        },
    )
    rest = await client.get(f"{times}?counts=true&limit=2&cursor=5")
    assert await rest.json() == {
        "times": [{"time": 5, "count": 3}],
        "frontier": [6],
        "next_cursor": None,
    }
    bad = await client.get(f"{times}?counts=yes")
    assert (bad.status, (await bad.json())["detail"]) == (
        400,
        "counts must be true or false, not 'yes'",
    )


async def test_an_arrow_read_of_times_beyond_int64_is_not_acceptable(
    client: TestClient[Any, Any],
) -> None:
    dataflow = await create(client)
    body = arrow({"time": pa.array([7, BIG, BIG + 1], pa.uint64()), "v": [1, 2, 3]})
    await stage_arrow(client, dataflow, "t", body)
    await commit(client, dataflow, transactions=["t"], idempotency_key="k", advance_to=BIG + 2)
    page = await complete(client, dataflow, [BIG + 2])
    assert [entry["time"] for entry in page["times"]] == [7, BIG, BIG + 1]
    times = f"/v1/dataflows/{dataflow}/outputs/out/times"
    refused = await client.get(times, headers={"Accept": ARROW})
    assert await answer(refused) == (
        406,
        PROBLEM,
        {
            "type": "https://frontier.dev/problems/not-acceptable",
            "title": "Not acceptable",
            "status": 406,
            "detail": "time 9223372036854775808 of output 'out' does not fit the int64 time "
            "column of an Arrow read (times from 2**63 on, beyond Spark's LONG): read it as "
            "JSON, or read the times before it (to=9223372036854775808)",
            "time": BIG,
        },
    )
    below = await client.get(f"{times}?to={BIG}", headers={"Accept": ARROW})
    assert (below.status, below.content_type) == (200, ARROW)
    rows = pa.ipc.open_stream(await below.read()).read_all()
    assert rows.to_pylist() == [{"time": 7, "record": '{"v":1}'}]
    counts = await (await client.get(f"{times}?counts=true", headers={"Accept": ARROW})).json()
    assert counts["times"] == [
        {"time": 7, "count": 1},
        {"time": BIG, "count": 1},
        {"time": BIG + 1, "count": 1},
    ]
    # A client that takes JSON too gets JSON, the representation that carries every time.
    for accept in (f"{ARROW}, application/json;q=0.5", f"{ARROW}, */*"):
        either = await client.get(times, headers={"Accept": accept})
        assert (either.status, either.content_type) == (200, "application/json")
        assert [e["time"] for e in (await either.json())["times"]] == [7, BIG, BIG + 1]
    refused = await client.get(times, headers={"Accept": f"{ARROW}, application/json;q=0"})
    assert refused.status == 406


async def test_an_arrow_read_of_product_times_is_not_acceptable(
    client: TestClient[Any, Any],
) -> None:
    dataflow = await create(client, PRODUCT)
    refused = await client.get(
        f"/v1/dataflows/{dataflow}/outputs/out/times", headers={"Accept": ARROW}
    )
    status, kind, problem = await answer(refused)
    assert (status, kind, problem["type"], problem["detail"]) == (
        406,
        PROBLEM,
        "https://frontier.dev/problems/not-acceptable",
        "output 'out' has product times, which an Arrow read (an int64 time column) cannot "
        "carry: read them as JSON",
    )
    either = await client.get(
        f"/v1/dataflows/{dataflow}/outputs/out/times",
        headers={"Accept": f"{ARROW}, application/json"},
    )
    assert await answer(either) == (
        200,
        "application/json",
        {"times": [], "frontier": [[0, 0]], "next_cursor": None},
    )
