"""A typed input's graph runs on columns through the real server.

The dry-run plan and ``GET /v1/dataflows/{id}`` say which nodes run on columns (and why the
others do not); records pushed as Arrow and as JSON go through ``map -> filter -> count_by``
on columns, a record whose expression fails is dropped and counted at its node with the row
backend's message, and the output of a columnar ``count_by`` reads as typed columns.
"""

from __future__ import annotations

import pyarrow as pa

from tests.e2e.conftest import Server
from tests.e2e.test_typed_io import ARROW, arrow_body, arrow_times, call, complete, dataflow

SCHEMA = {"key": "string", "value": "int64"}
GRAPH = {
    "nodes": {
        "rows": {"op": "input", "schema": SCHEMA},
        "scaled": {"op": "map", "expr": '{"key": r.key, "v": 100 / r.value}'},
        "big": {"op": "filter", "expr": "r.v > 10"},
        "counted": {"op": "count_by", "key": "r.key"},
        "once": {"op": "filter", "expr": "[1, 2].exists_one(x, x == r.v)"},
        "out": {"op": "output"},
        "odd": {"op": "output"},
    },
    "edges": [
        ["rows", "scaled"],
        ["scaled", "big"],
        ["big", "counted"],
        ["counted", "out"],
        ["scaled", "once"],
        ["once", "odd"],
    ],
}
EXECUTION = {
    "rows": {"runs": "columns", "how": "records as columns of its schema"},
    "scaled": {"runs": "columns"},
    "big": {"runs": "columns"},
    "counted": {"runs": "columns"},
    "once": {"runs": "rows", "why": "not vectorized: the macro exists_one"},
    "out": {"runs": "columns"},
    "odd": {"runs": "columns"},
}


async def test_the_plan_and_the_dataflow_say_what_runs_on_columns(service: Server) -> None:
    status, _, _, plan = await call(service, "POST", "/v1/dataflows?dry_run=true", {"graph": GRAPH})
    assert status == 200, plan
    shown = {
        name: {k: v for k, v in node.items() if k in ("runs", "how", "why")}
        for name, node in plan["plan"]["nodes"].items()
    }
    assert shown == EXECUTION
    df = await dataflow(service, GRAPH)
    _, _, _, described = await call(service, "GET", f"/v1/dataflows/{df}")
    assert described["execution"] == EXECUTION
    # The filter by rows passes on the map's records: its output is typed too.
    _, _, _, odd = await call(service, "GET", f"/v1/dataflows/{df}/outputs/odd")
    assert odd["schema"] == {"key": "string?", "v": "int64?"}
    _, _, _, out = await call(service, "GET", f"/v1/dataflows/{df}/outputs/out")
    assert out["schema"] == {"key": "string?", "count": "int64?"}


async def test_records_run_on_columns_and_failures_are_counted(service: Server) -> None:
    df = await dataflow(service, GRAPH)
    _, _, _, opened = await call(service, "POST", f"/v1/dataflows/{df}/inputs/rows/sessions", {})
    base = f"/v1/dataflows/{df}/inputs/rows/sessions/{opened['session']}"
    body = arrow_body(
        {
            "time": pa.array([0, 0, 0, 0, 1], pa.int64()),
            "key": ["a", "b", "a", "c", "a"],
            "value": pa.array([1, 0, 5, 50, 2], pa.int64()),
        }
    )
    status, _, _, ack = await call(service, "POST", f"{base}/push?seq=1", body, ARROW)
    assert (status, ack["applied"]) == (200, 5)
    records = [[1, {"key": "b", "value": 0}], [1, {"key": "b", "value": 3}]]
    status, _, _, ack = await call(service, "POST", f"{base}/push", {"seq": 2, "records": records})
    assert (status, ack["applied"]) == (200, 2)
    await call(service, "POST", f"{base}/advance", {"time": 2})
    page = await complete(service, df, [2])
    # v = 100 / value: a 100, b fails, a 20, c 2 (dropped), a 50; b fails, b 33.
    times = {t["time"]: sorted(t["records"], key=lambda r: r["key"]) for t in page["times"]}
    assert times == {
        0: [{"key": "a", "count": 2}],
        1: [{"key": "a", "count": 1}, {"key": "b", "count": 1}],
    }
    _, _, _, described = await call(service, "GET", f"/v1/dataflows/{df}")
    assert described["record_errors"] == {"scaled": {"count": 2, "last": "division by zero"}}
    table = await arrow_times(service, df)
    assert table.schema == pa.schema(
        [pa.field("time", pa.int64(), False), ("key", pa.string()), ("count", pa.int64())]
    )
    assert sorted(table.to_pylist(), key=lambda r: (r["time"], r["key"])) == [
        {"time": 0, "key": "a", "count": 2},
        {"time": 1, "key": "a", "count": 1},
        {"time": 1, "key": "b", "count": 1},
    ]
