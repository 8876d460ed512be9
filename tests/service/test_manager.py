"""DataflowManager in process: dataflows' lifecycle, tenants, limits, failures, frontiers.

Each test starts real workers (coroutines on the test's loop) and stops them at the end,
whatever happens; waiting is always bounded and by yielding to the loop, never by sleeping.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import pytest

from operators.runtime import stable_hash
from service.app import (
    DataflowManager,
    DataflowRecord,
    Gone,
    Invalid,
    LimitExceeded,
    NotFound,
)
from service.app.frontiers import FrontierWatch
from service.app.outputs import OutputLog
from tests.service.support import Start, settle, until

# Inputs "x" and "y" are owned by worker 0 with 1 and with 3 workers; "in" by worker 1 of 3.
assert [stable_hash(n) % 3 for n in ("x", "y", "in")] == [0, 0, 1]

PASS = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}
TWO = {
    "nodes": {
        "x": {"op": "input"},
        "y": {"op": "input"},
        "ox": {"op": "output"},
        "oy": {"op": "output"},
    },
    "edges": [["x", "ox"], ["y", "oy"]],
}
DOUBLE = {
    "nodes": {
        "x": {"op": "input"},
        "double": {"op": "map", "expr": "r * 2"},
        "out": {"op": "output"},
    },
    "edges": [["x", "double"], ["double", "out"]],
}
FAILING = {
    "nodes": {
        "x": {"op": "input"},
        "m": {"op": "map", "expr": "r.v * 2", "on_error": "fail"},
        "out": {"op": "output"},
    },
    "edges": [["x", "m"], ["m", "out"]],
}
FAILED = "EvaluationError: node 'm': no such overload: field selection on string"


def frontier(log: OutputLog) -> list[Any]:
    return sorted(log.frontier())


def on_workers(manager: DataflowManager, record: DataflowRecord) -> list[bool]:
    """Whether each worker still runs the dataflow."""
    return [record.index in worker.dataflow_indexes() for worker in manager.plane.workers]


# --------------------------------------------------------------------------- lifecycle


@pytest.mark.parametrize("workers", [1, 3])
async def test_create_get_listing_drop(start: Start, workers: int) -> None:
    manager = await start(workers)
    first = await manager.create("t", PASS, "first")
    second = await manager.create("t", DOUBLE)
    assert (first.status, second.status) == ("running", "running")
    assert (first.tenant, first.name, second.name) == ("t", "first", "")
    assert first.graph is PASS
    assert (first.index, second.index) == (1, 2)  # dataflow 0 is the control plane
    assert first.id != second.id
    assert (list(first.inputs), list(first.outputs)) == (["x"], ["out"])
    assert manager.get("t", first.id) is first
    assert manager.listing("t") == [first, second]
    assert asdict(first.summary()) == {
        "id": first.id,
        "name": "first",
        "status": "running",
        "created_at": first.created_at,
        "inputs": ["x"],
        "outputs": ["out"],
    }
    assert on_workers(manager, first) == [True] * workers
    await manager.drop("t", first.id)
    assert first.status == "dropped"
    assert on_workers(manager, first) == [False] * workers
    assert on_workers(manager, second) == [True] * workers
    assert manager.listing("t") == [second]
    # A dropped dataflow answers 410 to its tenant (and stays unknown to others).
    with pytest.raises(Gone) as caught:
        manager.get("t", first.id)
    assert caught.value.detail == f"dataflow {first.id!r} was dropped"
    with pytest.raises(Gone):
        await manager.drop("t", first.id)
    with pytest.raises(NotFound):
        manager.get("other", first.id)
    # The other dataflow keeps working.
    x = manager.input("t", second.id, "x")
    session = x.open_session()
    x.push(session.id, 1, [(0, 21)])
    x.advance(session.id, 1)
    log = manager.output("t", second.id, "out")
    await until(lambda: frontier(log) == [1], "the output passes 0")
    assert log.records_at(0) == [42]


async def test_unknown_inputs_and_outputs(start: Start) -> None:
    manager = await start()
    record = await manager.create("t", PASS)
    with pytest.raises(NotFound) as no_input:
        manager.input("t", record.id, "out")
    assert no_input.value.detail == f"dataflow {record.id!r} has no input 'out'"
    with pytest.raises(NotFound) as no_output:
        manager.output("t", record.id, "x")
    assert no_output.value.detail == f"dataflow {record.id!r} has no output 'x'"
    with pytest.raises(NotFound) as no_dataflow:
        manager.get("t", "nope")
    assert no_dataflow.value.detail == "no dataflow 'nope'"


async def test_tenants_see_only_their_own_dataflows(start: Start) -> None:
    manager = await start()
    mine = await manager.create("a", PASS, "mine")
    theirs = await manager.create("b", PASS, "theirs")
    assert manager.listing("a") == [mine]
    assert manager.listing("b") == [theirs]
    assert manager.listing("c") == []
    for call in (
        lambda: manager.get("b", mine.id),
        lambda: manager.input("b", mine.id, "x"),
        lambda: manager.output("b", mine.id, "out"),
        lambda: manager.watch("b", mine.id),
    ):
        with pytest.raises(NotFound) as caught:
            call()
        assert caught.value.detail == f"no dataflow {mine.id!r}"
    with pytest.raises(NotFound):
        await manager.drop("b", mine.id)
    assert manager.get("a", mine.id).status == "running"
    assert manager.listing("a") == [mine]


async def test_max_dataflows_per_tenant(start: Start) -> None:
    manager = await start(max_dataflows_per_tenant=2)
    first = await manager.create("a", PASS)
    await manager.create("a", PASS)
    with pytest.raises(LimitExceeded) as caught:
        await manager.create("a", PASS)
    assert caught.value.detail == "tenant 'a' has 2 dataflows, the limit (max_dataflows_per_tenant)"
    assert len(manager.listing("a")) == 2
    await manager.create("b", PASS)  # another tenant has its own budget
    await manager.drop("a", first.id)
    await manager.create("a", PASS)
    assert len(manager.listing("a")) == 2


@pytest.mark.parametrize(
    ("graph", "problems"),
    [
        ([], [("", "a graph must be a JSON object")]),
        (
            {"nodes": {}, "extra": 1},
            [
                ("/extra", "unknown field 'extra'"),
                ("/nodes", "nodes must be a non-empty object of named nodes"),
            ],
        ),
        (
            {"time": "u32", **PASS},
            [("/time", 'the time domain must be "u64" or {"product": [<time domain>, "u64"]}')],
        ),
        (
            {
                "nodes": {
                    "x": {"op": "input"},
                    "m": {"op": "mapp", "expr": "r"},
                    "f": {"op": "filter", "expr": "r +"},
                    "out": {"op": "output"},
                },
                "edges": [["x", "m"], ["m", "f"], ["f", "out"], ["ghost", "out"], ["x:1", "f"]],
            },
            [
                (
                    "/nodes/m/op",
                    "unknown operator 'mapp' (accumulate, aggregate, branch, concat, count, "
                    "count_by, delay, exchange, feedback, filter, flat_map, input, inspect, join, "
                    "key_by, map, output, partition)",
                ),
                (
                    "/nodes/f/expr",
                    "expression does not compile: line 1, column 4: unexpected end of expression",
                ),
                ("/edges/3/0", "no node 'ghost'"),
                ("/edges/4/0", "x (input) has no output 1"),
            ],
        ),
        (
            {
                "nodes": {
                    "x": {"op": "input"},
                    "m": {"op": "map", "expr": "r", "when": 1},
                    "out": {"op": "output"},
                },
                "edges": [["x", "out"], ["x", "out"]],
            },
            [
                ("/nodes/m/when", "map has no parameter 'when'"),
                (
                    "/edges/1/1",
                    "input out:0 is already connected by /edges/0; use a concat to merge",
                ),
                ("/nodes/m", "input m:0 is not connected"),
            ],
        ),
        (
            {
                "scopes": {"loop": {}},
                "nodes": {
                    "x": {"op": "input"},
                    "c": {"op": "concat", "scope": "loop"},
                    "m": {"op": "map", "expr": "r + 1", "scope": "loop"},
                    "out": {"op": "output"},
                },
                "edges": [["x", "c:0"], ["m", "c:1"], ["c", "m"], ["m", "out"]],
            },
            [
                (
                    "/edges",
                    "the cycle through c, m does not pass a feedback of scope 'loop', so "
                    "records could return at the same time",
                )
            ],
        ),
    ],
    ids=["not-an-object", "shape", "time-domain", "meaning", "ports", "cycle"],
)
async def test_invalid_graphs_list_every_problem(
    start: Start, graph: Any, problems: list[tuple[str, str]]
) -> None:
    manager = await start()
    with pytest.raises(Invalid) as caught:
        await manager.create("t", graph, "bad")
    assert caught.value.problems == [{"pointer": p, "detail": d} for p, d in problems]
    assert caught.value.extra == {"problems": caught.value.problems}
    assert caught.value.detail == f"the graph has {len(problems)} problem(s)"
    assert caught.value.status == 422
    assert manager.listing("t") == []
    assert manager.dataflows == {}


# --------------------------------------------------------------------------- status


@pytest.mark.parametrize("workers", [1, 3])
async def test_status_completes_when_every_output_is_complete(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", TWO)
    ox, oy = manager.output("t", record.id, "ox"), manager.output("t", record.id, "oy")
    x, y = manager.input("t", record.id, "x"), manager.input("t", record.id, "y")
    session = x.open_session()
    x.push(session.id, 1, [(3, "a")])
    x.close()
    await until(lambda: frontier(ox) == [], "output ox completes")
    await settle()
    assert (record.status, frontier(oy)) == ("running", [0])
    y.close()
    await until(lambda: record.status == "completed", "the dataflow completes")
    assert (frontier(ox), frontier(oy)) == ([], [])
    assert (ox.records_at(3), ox.complete_times(None, None)) == (["a"], [3])
    assert manager.describe(record, operators=False).status == "completed"


async def test_status_completes_when_the_input_lives_on_another_worker(start: Start) -> None:
    manager = await start(3)
    graph = {"nodes": {"in": {"op": "input"}, "out": {"op": "output"}}, "edges": [["in", "out"]]}
    record = await manager.create("t", graph)
    log = manager.output("t", record.id, "out")
    await settle()  # every worker idles
    manager.input("t", record.id, "in").close()
    await until(lambda: frontier(log) == [], "the output completes")
    await until(lambda: record.status == "completed", "the dataflow completes")


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("workers", [1, 3])
async def test_a_failing_expression_fails_its_dataflow_only(start: Start, workers: int) -> None:
    manager = await start(workers)
    healthy = await manager.create("t", PASS, "healthy")
    record = await manager.create("t", FAILING, "failing")
    log = manager.output("t", record.id, "out")
    subscriber = log.subscribe()
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    x.push(session.id, 1, [(0, {"v": 1}), (0, "s")])
    await until(lambda: record.status == "failed", "the dataflow fails")
    assert record.error == FAILED
    assert subscriber.closed == f"the dataflow failed: {FAILED}"
    assert log.subscribers == []
    assert manager.describe(record, operators=False).error == FAILED
    with pytest.raises(Gone) as caught:
        manager.input("t", record.id, "x")
    assert caught.value.detail == f"dataflow {record.id!r} is failed"
    await until(lambda: not any(on_workers(manager, record)), "every worker drops it")
    assert manager.listing("t") == [healthy, record]
    assert manager.running
    # The other dataflow keeps running.
    h = manager.input("t", healthy.id, "x")
    hs = h.open_session()
    h.push(hs.id, 1, [(0, "fine")])
    h.advance(hs.id, 1)
    healthy_log = manager.output("t", healthy.id, "out")
    await until(lambda: frontier(healthy_log) == [1], "the healthy output passes 0")
    assert healthy_log.records_at(0) == ["fine"]
    assert healthy.status == "running"
    # A failed dataflow can still be dropped.
    await manager.drop("t", record.id)
    assert manager.listing("t") == [healthy]


async def test_producers_of_a_failed_dataflow_get_gone(start: Start) -> None:
    manager = await start()
    record = await manager.create("t", FAILING)
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    x.push(session.id, 1, [(0, "s")])
    await until(lambda: record.status == "failed", "the dataflow fails")
    with pytest.raises(Gone):
        x.push(session.id, 2, [(0, {"v": 1})])


async def test_subscribing_to_a_failed_dataflow_is_closed_at_once(start: Start) -> None:
    manager = await start()
    record = await manager.create("t", FAILING)
    x = manager.input("t", record.id, "x")
    x.push(x.open_session().id, 1, [(0, "s")])
    await until(lambda: record.status == "failed", "the dataflow fails")
    subscriber = manager.output("t", record.id, "out").subscribe()
    assert subscriber.closed == f"the dataflow failed: {FAILED}"


async def test_frontier_watches_of_a_failed_dataflow_are_closed(start: Start) -> None:
    manager = await start()
    record = await manager.create("t", FAILING)
    watch = manager.watch("t", record.id)
    x = manager.input("t", record.id, "x")
    x.push(x.open_session().id, 1, [(0, "s")])
    await until(lambda: record.status == "failed", "the dataflow fails")
    assert watch.closed == f"the dataflow failed: {FAILED}"


async def test_dropping_a_failed_dataflow_at_once_drops_it_everywhere(start: Start) -> None:
    manager = await start(3)
    record = await manager.create("t", FAILING)
    x = manager.input("t", record.id, "x")
    x.push(x.open_session().id, 1, [(0, "s")])
    await until(lambda: record.status == "failed", "the dataflow fails")
    await manager.drop("t", record.id)
    await until(lambda: not any(on_workers(manager, record)), "every worker drops it")


# --------------------------------------------------------------------------- drop and stop


@pytest.mark.parametrize("workers", [1, 3])
async def test_drop_closes_subscribers_and_producers_get_gone(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", PASS)
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    x.push(session.id, 1, [(0, "a")])
    log = manager.output("t", record.id, "out")
    subscriber = log.subscribe()
    watch = manager.watch("t", record.id)
    await manager.drop("t", record.id)
    assert subscriber.closed == "the dataflow was dropped"
    assert watch.closed == "the dataflow was dropped"
    assert watch.wake.is_set()
    assert log.closed_reason == "the dataflow was dropped"
    assert record.id not in manager.frontier_watchers
    for call in (
        lambda: x.push(session.id, 2, [(0, "b")]),
        lambda: x.advance(session.id, 1),
        lambda: x.open_session(),
        lambda: x.stage("t1", [(0, "c")]),
        lambda: x.commit(session.id, [], "k"),
        lambda: x.close_session(session.id),
    ):
        with pytest.raises(Gone) as caught:
            call()
        assert caught.value.detail == "the dataflow of input 'x' was dropped"
    with pytest.raises(Gone):
        manager.input("t", record.id, "x")
    assert on_workers(manager, record) == [False] * workers


async def test_stop_closes_everything_and_refuses_commands(start: Start) -> None:
    manager = await start(3)
    record = await manager.create("t", PASS)
    subscriber = manager.output("t", record.id, "out").subscribe()
    watch = manager.watch("t", record.id)
    await manager.stop()
    assert not manager.running
    assert subscriber.closed == "going away: the service is stopping"
    assert watch.closed == "going away: the service is stopping"
    with pytest.raises(Gone) as caught:
        await manager.create("t", PASS)
    assert caught.value.detail == "the service is not running"


async def test_a_refused_create_leaves_nothing_behind(start: Start) -> None:
    manager = await start()
    await manager.stop()
    with pytest.raises(Gone):
        await manager.create("t", PASS)
    assert manager.listing("t") == []


async def test_a_cancelled_create_still_runs(start: Start) -> None:
    manager = await start(3)
    task = asyncio.ensure_future(manager.create("t", PASS))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [record] = manager.listing("t")
    await until(lambda: all(on_workers(manager, record)), "every worker builds it")
    await until(lambda: record.status == "running", "it is running")


# --------------------------------------------------------------------------- describe

SMALL = {
    "nodes": {
        "x": {"op": "input"},
        "spread": {"op": "exchange", "key": "r"},
        "double": {"op": "map", "expr": "r * 2"},
        "big": {"op": "filter", "expr": "r > 2"},
        "out": {"op": "output"},
    },
    "edges": [["x", "spread"], ["spread", "double"], ["double", "big"], ["big", "out"]],
}


UNTYPED = {"runs": "rows", "why": "its input is not typed (no schema reaches it)"}


@pytest.mark.parametrize("workers", [1, 3])
async def test_describe(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", SMALL, "small")
    x = manager.input("t", record.id, "x")
    s1, s2 = x.open_session(), x.open_session()
    x.push(s1.id, 1, [(0, 1), (0, 2), (1, 3), (1, "s"), (0, 5)])
    x.advance(s1.id, 3)
    x.advance(s2.id, 2)
    log = manager.output("t", record.id, "out")
    await until(lambda: frontier(log) == [2], "the output passes 1")
    await until(
        lambda: manager.frontiers(record, operators=True)["operator:big:0"] == [2],
        "worker 0 sees the operators pass 1",
    )
    at = [{"frontier": [2], "records": n} for n in (5, 5, 4, 3)]
    described = asdict(manager.describe(record))
    busy = {node: state.pop("busy_seconds") for node, state in described["operators"].items()}
    assert sorted(busy) == ["big", "double", "out", "spread", "x"]
    assert all(type(seconds) is float and seconds >= 0 for seconds in busy.values())
    assert busy["double"] > 0  # it ran, on records
    assert described == {
        "id": record.id,
        "name": "small",
        "status": "running",
        "created_at": record.created_at,
        "graph": SMALL,
        "error": None,
        "inputs": {
            "x": {
                "frontier": [2],
                "sessions": 2,
                "records_in": 5,
                "closed": False,
                "schema": None,
                "process": 0,
            }
        },
        "outputs": {"out": {"frontier": [2], "records_out": 3}},
        "operators": {
            "x": {"outputs": [at[0]]},
            "spread": {"outputs": [at[1]]},
            "double": {"outputs": [at[2]]},
            "big": {"outputs": [at[3]]},
            "out": {"outputs": []},
        },
        "record_errors": {"double": {"count": 1, "last": "no such overload: string * int"}},
        "execution": {
            "x": {"runs": "rows", "why": "the input has no schema"},
            **{node: UNTYPED for node in ("spread", "double", "big", "out")},
        },
    }
    assert manager.describe(record, operators=False).operators is None
    again = manager.describe(record).operators
    assert again is not None
    assert all(again[node].busy_seconds >= seconds for node, seconds in busy.items())
    assert {t: sorted(log.records_at(t)) for t in log.complete_times(None, None)} == {
        0: [4, 10],
        1: [6],
    }
    assert manager.frontiers(record, operators=True) == {
        "input:x": [2],
        "output:out": [2],
        "operator:x:0": [2],
        "operator:spread:0": [2],
        "operator:double:0": [2],
        "operator:big:0": [2],
    }


SLOW_AND_IDLE = {
    "nodes": {
        "x": {"op": "input"},
        "y": {"op": "input"},
        "slow": {"op": "map", "expr": "[r, r, r, r, r, r, r, r].map(v, v * 2 + 1).size() + r"},
        "idle": {"op": "map", "expr": "r + 1"},
        "out": {"op": "output"},
        "other": {"op": "output"},
    },
    "edges": [["x", "slow"], ["slow", "out"], ["y", "idle"], ["idle", "other"]],
}


@pytest.mark.parametrize("workers", [1, 2])
async def test_busy_seconds(start: Start, workers: int) -> None:
    """Each node's busy seconds: a counter, larger for the node doing the work."""
    manager = await start(workers)
    record = await manager.create("t", SLOW_AND_IDLE, "busy")
    x = manager.input("t", record.id, "x")
    session = x.open_session()

    def busy() -> dict[str, float]:
        operators = manager.describe(record).operators
        assert operators is not None
        return {node: state.busy_seconds for node, state in operators.items()}

    before = busy()
    assert sorted(before) == sorted(SLOW_AND_IDLE["nodes"])
    assert all(type(seconds) is float and seconds >= 0 for seconds in before.values())
    x.push(session.id, 1, [(0, n) for n in range(20_000)])
    x.advance(session.id, 1)
    log = manager.output("t", record.id, "out")
    await until(lambda: frontier(log) == [1], "the output passes 0", turns=100_000)
    after = busy()
    assert all(after[node] >= before[node] for node in before)  # only ever increases
    assert after["slow"] > before["slow"]
    assert after["slow"] > after["idle"]


# --------------------------------------------------------------------------- frontier watches


async def watch_until(
    watch: FrontierWatch, expected: dict[str, list[Any]]
) -> list[tuple[str, list[Any]]]:
    """Take the watch's events until every location in ``expected`` reached its frontier."""
    events: list[tuple[str, list[Any]]] = []
    latest: dict[str, list[Any]] = {}

    def reached() -> bool:
        for location, frontier in watch.take():
            events.append((location, frontier))
            latest[location] = frontier
        return all(latest.get(k) == v for k, v in expected.items())

    await until(reached, f"the watch reports {expected}")
    await settle(20)
    events.extend(watch.take())
    return events


def never_backwards(events: list[tuple[str, list[Any]]]) -> None:
    last: dict[str, list[Any]] = {}
    for location, frontier in events:
        if location in last:
            before = last[location]
            assert before != frontier, f"{location} repeated {frontier}"
            assert before and all(any(b <= t for b in before) for t in frontier), (
                f"{location} went back from {before} to {frontier}"
            )
        last[location] = frontier


@pytest.mark.parametrize("workers", [1, 3])
async def test_frontier_watch_of_inputs_and_outputs(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", DOUBLE)
    watch = manager.watch("t", record.id)
    assert watch.take() == [("input:x", [0]), ("output:out", [0])]
    assert watch.take() == []
    x = manager.input("t", record.id, "x")
    s1, s2 = x.open_session(), x.open_session()
    everything: list[tuple[str, list[Any]]] = []

    async def step(expected: list[tuple[str, list[Any]]]) -> None:
        events = await watch_until(watch, dict(expected))
        assert events == expected
        everything.extend(events)

    x.advance(s1.id, 2)
    await settle()
    assert watch.take() == []  # s2 still holds 0
    x.advance(s2.id, 1)
    await step([("input:x", [1]), ("output:out", [1])])
    x.advance(s2.id, 3)
    await step([("input:x", [2]), ("output:out", [2])])
    # Two changes before the watch looks: only the latest is reported.
    x.advance(s1.id, 4)  # the input is at 3 ...
    x.advance(s2.id, 6)  # ... and then at 4
    await step([("input:x", [4]), ("output:out", [4])])
    x.close_session(s1.id)
    await step([("input:x", [6]), ("output:out", [6])])
    x.close()
    await step([("input:x", []), ("output:out", [])])
    never_backwards(everything)
    assert watch.closed is None
    manager.unwatch(watch)
    manager.unwatch(watch)  # twice is fine
    assert manager.frontier_watchers[record.id] == []


@pytest.mark.parametrize("workers", [1, 3])
async def test_frontier_watch_coalesces_to_the_latest(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", DOUBLE)
    lazy = manager.watch("t", record.id)
    eager = manager.watch("t", record.id)
    assert lazy.take() == eager.take() == [("input:x", [0]), ("output:out", [0])]
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    x.advance(session.id, 2)
    assert await watch_until(eager, {"output:out": [2]}) == [
        ("input:x", [2]),
        ("output:out", [2]),
    ]
    x.advance(session.id, 4)
    assert await watch_until(eager, {"output:out": [4]}) == [
        ("input:x", [4]),
        ("output:out", [4]),
    ]
    # Both watches are updated together: the lazy one holds one event per location.
    assert lazy.wake.is_set()
    assert lazy.take() == [("input:x", [4]), ("output:out", [4])]
    assert not lazy.wake.is_set()


@pytest.mark.parametrize("workers", [1, 3])
async def test_frontier_watch_with_operators(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", DOUBLE)
    watch = manager.watch("t", record.id, operators=True)
    assert watch.take() == [
        ("input:x", [0]),
        ("output:out", [0]),
        ("operator:x:0", [0]),
        ("operator:double:0", [0]),
    ]
    x = manager.input("t", record.id, "x")
    session = x.open_session()
    everything: list[tuple[str, list[Any]]] = []
    for time in (2, 4, None):
        if time is None:
            x.close()
        else:
            x.advance(session.id, time)
        frontier = [] if time is None else [time]
        expected = {
            "input:x": frontier,
            "output:out": frontier,
            "operator:x:0": frontier,
            "operator:double:0": frontier,
        }
        events = await watch_until(watch, expected)
        # One event per location; the input first (nothing moves before it), the operators in
        # the order of the graph.
        assert sorted(events) == sorted(expected.items())
        assert events[0] == ("input:x", frontier)
        operators = [e for e in events if e[0].startswith("operator:")]
        assert operators == [("operator:x:0", frontier), ("operator:double:0", frontier)]
        everything.extend(events)
    never_backwards(everything)


async def test_frontier_watch_when_the_input_lives_on_another_worker(start: Start) -> None:
    manager = await start(3)
    graph = {"nodes": {"in": {"op": "input"}, "out": {"op": "output"}}, "edges": [["in", "out"]]}
    record = await manager.create("t", graph)
    watch = manager.watch("t", record.id)
    producer = manager.input("t", record.id, "in")
    session = producer.open_session()
    log = manager.output("t", record.id, "out")
    for time in (1, 3):
        await settle()  # every worker idles
        producer.advance(session.id, time)
        await until(lambda: frontier(log) == [time], f"the output passes {time - 1}")  # noqa: B023
        assert await watch_until(watch, {"output:out": [time]}) == [
            ("input:in", [time]),
            ("output:out", [time]),
        ]


async def test_max_frontier_watches_per_dataflow(start: Start) -> None:
    manager = await start(max_subscribers_per_dataflow=2)
    record = await manager.create("t", PASS)
    first = manager.watch("t", record.id)
    manager.watch("t", record.id, operators=True)
    with pytest.raises(LimitExceeded) as caught:
        manager.watch("t", record.id)
    assert caught.value.detail == (
        f"dataflow {record.id!r} has 2 frontier subscribers, the limit "
        "(max_subscribers_per_dataflow)"
    )
    manager.unwatch(first)
    manager.watch("t", record.id)
    assert len(manager.frontier_watchers[record.id]) == 2


async def test_expression_costs_are_estimated_for_the_configured_record_size(
    start: Start,
) -> None:
    # A comprehension over a record's list nested in another: quadratic in the record. For
    # the default largest record (1 MiB) it is refused; where records are at most 1 KiB,
    # its estimate is far below the limit and the graph is taken.
    nested = {
        "nodes": {
            "in": {"op": "input"},
            "f": {"op": "filter", "expr": "r.exists(x, r.exists(y, x == y))"},
            "out": {"op": "output"},
        },
        "edges": [["in", "f"], ["f", "out"]],
    }
    default = await start()
    with pytest.raises(Invalid) as refused:
        default.compile(nested)
    [problem] = refused.value.problems
    assert problem["pointer"] == "/nodes/f/expr"
    assert (
        "expression too costly: its estimated cost on a record of 1,048,576 bytes"
        in (problem["detail"])
    )
    small = await start(max_record_bytes=1024)
    assert small.compile(nested).spec.nodes["f"].op == "filter"
