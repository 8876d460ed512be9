"""A cluster of real ``frontier serve`` processes on 127.0.0.1: one API, any process.

Each test starts its own processes (``--processes N --process I --peers ... --apis ...``),
all at once, since each waits for the others at start-up. A graph submitted at one process
is built on every worker of every process; a push at another is applied once, where the
input lives; a subscription at a third sees the same outputs and frontiers. A process killed
with SIGKILL stops the others, naming it; one stopped with SIGTERM stops them gracefully; a
process whose secret differs is refused at start-up.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.client import AsyncClient, AsyncSession
from service.app.placement import place_inputs
from tests.e2e.conftest import (
    REPO,
    SHUTDOWN,
    STARTUP,
    WORDS_COUNT,
    Frames,
    Server,
    WsProducer,
    _ready,
    canonical,
    counted,
    frontier,
    is_progress,
    messages,
    progress,
    ws_connect,
    ws_frames,
)
from tests.runtime.fabrics import free_ports

SECRET = "a secret the tests share"


def start_cluster(
    workdir: Path,
    processes: int,
    workers: int = 1,
    secrets: list[str] | None = None,
    ports: list[int] | None = None,
    durability: str = "none",
    startup_timeout: float | None = None,
) -> list[Server]:
    """``processes`` servers forming one cluster (not waited for: see :func:`ready`).

    ``ports`` (the APIs' then the fabric's) start a cluster again where one ran before, with
    the same data directories; ``startup_timeout`` bounds how long each waits for the others.
    """
    ports = ports or free_ports(2 * processes)
    apis, fabric = ports[:processes], ports[processes:]
    peers = ",".join(f"127.0.0.1:{port}" for port in fabric)
    addresses = ",".join(f"127.0.0.1:{port}" for port in apis)
    servers = []
    for index in range(processes):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
        env["PYTHONPATH"] = str(REPO)
        env["PYTHONUNBUFFERED"] = "1"
        env["FRONTIER_CLUSTER_SECRET"] = secrets[index] if secrets else SECRET
        log = workdir / f"process-{index}-{apis[index]}-{time.monotonic_ns()}.log"
        command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(apis[index]), "--workers", str(workers)]
        command += ["--data-dir", str(workdir / f"data-{index}"), "--durability", durability]
        command += ["--processes", str(processes), "--process", str(index)]
        command += ["--peers", peers, "--apis", addresses, "--log-format", "text"]
        if startup_timeout is not None:
            config = workdir / f"config-{index}.yaml"
            config.write_text(f"startup_timeout_seconds: {startup_timeout}\n")
            command += ["--config", str(config)]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        servers.append(Server(apis[index], process, log))
    return servers


def ready(servers: list[Server]) -> None:
    """Wait until every process answers ``/readyz``."""
    deadline = time.monotonic() + STARTUP
    for server in servers:
        while not _ready(server.url):
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"process not ready\n{server.log_tail()}")
            time.sleep(0.05)


def stop_all(servers: list[Server]) -> None:
    """SIGTERM every process still running, then SIGKILL whatever outlives the grace period."""
    for server in servers:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
    for server in servers:
        try:
            server.process.wait(SHUTDOWN)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    """Start clusters of a test's own; every process is stopped when the test ends."""
    started: list[Server] = []

    def start(processes: int, workers: int = 1, **options: Any) -> Any:
        servers = start_cluster(tmp_path, processes, workers, **options)
        started.extend(servers)
        return servers

    yield start
    stop_all(started)


def by_key(record: Any) -> str:
    return str(record["key"])


def holder(processes: int, workers: int, name: str) -> int:
    """The process holding input ``name`` of a fresh cluster's first dataflow (one input).

    Each input goes to the process holding the fewest inputs, the lowest among equals
    (:func:`~service.app.placement.place_inputs`): here process 0, whatever the workers.
    """
    return place_inputs([name], [0] * processes)[name]


# --------------------------------------------------------------------------- one API


async def test_submit_at_one_push_at_another_subscribe_at_a_third(cluster: Any) -> None:
    servers = cluster(3)
    ready(servers)
    owner = holder(3, 1, "words")
    submit, push, watch = servers[(owner + 1) % 3], servers[(owner + 2) % 3], servers[owner]
    async with (
        AsyncClient(submit.url) as submitter,
        AsyncClient(push.url) as producer,
        AsyncClient(watch.url) as watcher,
        AsyncClient(submit.url) as second_watcher,
    ):
        df = (await submitter.create_dataflow(WORDS_COUNT, "counts"))["id"]
        # Built everywhere by the time the submission is answered.
        for server in servers:
            async with AsyncClient(server.url) as client:
                shown = await client.dataflow(df)
                assert (shown["status"], shown["outputs"]) == (
                    "running",
                    {"out": {"frontier": [0], "records_out": 0}},
                )
        frontiers = [Frames(watcher.frontiers(df)), Frames(second_watcher.frontiers(df))]
        for frames in frontiers:
            assert [await frames.next(), await frames.next()] == [
                frontier("input:words", 0),
                frontier("output:out", 0),
            ]
        async with ws_connect(watch, f"/v1/dataflows/{df}/outputs/out/events") as events_ws:
            events = Frames(ws_frames(events_ws))
            session = await producer.session(df, "words")
            assert await session.push([[0, "a"], [0, "b"], [0, "a"], [1, "c"]]) == {
                "seq": 1,
                "session_time": 0,
                "input_frontier": [0],
                "applied": 4,
            }
            assert (await session.push([[0, "a"], [0, "b"], [0, "a"], [1, "c"]], seq=1))[
                "applied"
            ] == 4  # a retry: acknowledged again, applied once
            assert (await session.advance(1))["input_frontier"] == [1]
            for frames in frontiers:
                assert await frames.until(lambda e: e == frontier("output:out", 1)) == [
                    frontier("input:words", 1),
                    frontier("output:out", 1),
                ]
            assert canonical(await events.until(is_progress)) == [
                messages(0, *counted(a=2, b=1)),
                progress((0, -1), (1, 1)),
            ]
            assert (await session.advance(2))["input_frontier"] == [2]
            for frames in frontiers:
                assert await frames.until(lambda e: e == frontier("output:out", 2)) == [
                    frontier("input:words", 2),
                    frontier("output:out", 2),
                ]
            assert canonical(await events.until(is_progress)) == [
                messages(1, *counted(c=1)),
                progress((1, -1), (2, 1)),
            ]
        for frames in frontiers:
            await frames.aclose()
        # Every process describes the dataflow alike, its input as the holder sees it.
        described = []
        for server in servers:
            async with AsyncClient(server.url) as client:
                shown = await client.dataflow(df, operators=False)
                described.append((shown["inputs"], shown["outputs"]))
        assert (
            described
            == [
                (
                    {
                        "words": {
                            "frontier": [2],
                            "sessions": 1,
                            "records_in": 4,
                            "closed": False,
                            "process": owner,
                        }
                    },
                    {"out": {"frontier": [2], "records_out": 3}},
                )
            ]
            * 3
        )
        # Every process holds the whole output.
        for server in servers:
            async with AsyncClient(server.url) as client:
                read = [(t, sorted(r, key=by_key)) async for t, r in client.times(df, "out")]
                assert read == [
                    (0, [{"key": "a", "count": 2}, {"key": "b", "count": 1}]),
                    (1, [{"key": "c", "count": 1}]),
                ]


async def test_a_producer_socket_at_a_process_without_the_input_is_relayed(cluster: Any) -> None:
    servers = cluster(2, workers=2)
    ready(servers)
    elsewhere = servers[1 - holder(2, 2, "words")]
    async with AsyncClient(elsewhere.url) as client:
        df = (await client.create_dataflow(WORDS_COUNT))["id"]
        watch = Frames(client.frontiers(df))
        async with ws_connect(elsewhere, f"/v1/dataflows/{df}/inputs/words/push?start=0") as ws:
            producer = await WsProducer.open(ws)
            assert producer.opened == {
                "type": "session",
                "session": producer.session,
                "time": 0,
                "credits": 16,
            }
            ack = await producer.call({"type": "push", "seq": 1, "records": [[0, "x"], [0, "x"]]})
            assert (ack["type"], ack["seq"], ack["applied"]) == ("ack", 1, 2)
            ack = await producer.call({"type": "advance", "seq": 2, "time": 1})
            assert (ack["seq"], ack["input_frontier"]) == (2, [1])
        await watch.until(lambda e: e == frontier("output:out", 1))
        await watch.aclose()
        assert [(t, r) async for t, r in client.times(df, "out")] == [
            (0, [{"key": "x", "count": 2}])
        ]


async def test_the_whole_cluster_started_again_recovers_every_acknowledged_push(
    cluster: Any,
) -> None:
    ports = free_ports(4)
    servers = cluster(2, durability="fsync", ports=ports)
    ready(servers)
    owner = holder(2, 1, "words")
    batch = [[0, "a"], [0, "b"], [0, "a"], [1, "c"]]
    async with AsyncClient(servers[1 - owner].url) as client:
        df = (await client.create_dataflow(WORDS_COUNT, "counts"))["id"]
        session = await client.session(df, "words")
        assert (await session.push(batch))["applied"] == 4
        assert (await session.advance(1))["input_frontier"] == [1]
        watch = Frames(client.frontiers(df))
        await watch.until(lambda e: e == frontier("output:out", 1))
        await watch.aclose()
    # The process holding the input is killed: the other stops, naming it.
    servers[owner].process.send_signal(signal.SIGKILL)
    assert wait_exit(servers[1 - owner], 10.0) == 1, servers[1 - owner].log_tail()
    assert wait_exit(servers[owner], 10.0) == -signal.SIGKILL
    again = cluster(2, durability="fsync", ports=ports)
    ready(again)
    for server in again:
        async with AsyncClient(server.url) as client:
            shown = await client.dataflow(df)
            assert (shown["name"], shown["status"]) == ("counts", "running")
            read = [(t, sorted(r, key=by_key)) async for t, r in client.times(df, "out")]
            assert read == [(0, [{"key": "a", "count": 2}, {"key": "b", "count": 1}])]
    async with AsyncClient(again[1 - owner].url) as client:
        resumed = AsyncSession(client, f"/v1/dataflows/{df}/inputs/words", session.id, 1)
        # The acknowledged push, sent again, is recognised: applied once in all.
        assert (await resumed.push(batch, seq=1))["applied"] == 4
        assert (await resumed.advance(2))["input_frontier"] == [2]
        watch = Frames(client.frontiers(df))
        await watch.until(lambda e: e == frontier("output:out", 2))
        await watch.aclose()
        read = [(t, sorted(r, key=by_key)) async for t, r in client.times(df, "out")]
        assert read == [
            (0, [{"key": "a", "count": 2}, {"key": "b", "count": 1}]),
            (1, [{"key": "c", "count": 1}]),
        ]


async def test_a_consumer_committed_at_one_process_is_known_at_every_one(cluster: Any) -> None:
    servers = cluster(3)
    ready(servers)
    async with AsyncClient(servers[0].url) as first, AsyncClient(servers[2].url) as last:
        df = (await first.create_dataflow(WORDS_COUNT))["id"]
        assert await first.commit_consumer(df, "out", "spark", 0) == {
            "consumer": "spark",
            "committed": 0,
            "frontier": [0],
        }
        # Applied at the other processes through the sequencer: seen there soon after.
        for server in servers:
            async with AsyncClient(server.url) as client:
                await until_consumers(client, df, [{"consumer": "spark", "committed": 0}])
        await last.forget_consumer(df, "out", "spark")
        for server in servers:
            async with AsyncClient(server.url) as client:
                await until_consumers(client, df, [])


async def test_every_process_explains_a_time_alike_naming_the_session(cluster: Any) -> None:
    servers = cluster(2)
    ready(servers)
    owner = holder(2, 1, "words")
    async with (
        AsyncClient(servers[owner].url) as at_holder,
        AsyncClient(servers[1 - owner].url) as elsewhere,
    ):
        df = (await elsewhere.create_dataflow(WORDS_COUNT))["id"]
        session = await elsewhere.session(df, "words")
        assert (await session.push([[0, "a"]]))["applied"] == 1
        # Records pushed may still be on their way when the first process answers: both
        # answers agree once they have arrived (at most 5 s).
        deadline = time.monotonic() + 5.0
        while True:
            explained = [await c.explain(df, "out", 0) for c in (at_holder, elsewhere)]
            if explained[0] == explained[1] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        assert explained[0] == explained[1]
        assert explained[0]["complete"] is False
        sessions = [h for h in explained[0]["holders"] if h["kind"] == "session"]
        assert [(h["operator"], h["session"], h["time"]) for h in sessions] == [
            ("words", session.id, 0)
        ]


async def until_consumers(client: AsyncClient, df: str, expected: list[Any]) -> None:
    """Wait until the output's consumers are ``expected`` (at most 5 s)."""
    deadline = time.monotonic() + 5.0
    while True:
        shown = await client.request("GET", f"/v1/dataflows/{df}/outputs/out")
        if shown["consumers"] == expected or time.monotonic() > deadline:
            assert shown["consumers"] == expected
            return
        await asyncio.sleep(0.02)


# --------------------------------------------------------------------------- failures


def wait_exit(server: Server, seconds: float) -> int | None:
    try:
        return server.process.wait(seconds)
    except subprocess.TimeoutExpired:
        return None


async def test_a_process_killed_stops_the_others_naming_it(cluster: Any) -> None:
    servers = cluster(3)
    ready(servers)
    async with AsyncClient(servers[0].url) as client:
        await client.create_dataflow(WORDS_COUNT)
    killed = servers[1]
    killed.process.send_signal(signal.SIGKILL)
    began = time.monotonic()
    for survivor in (servers[0], servers[2]):
        code = wait_exit(survivor, 10.0 - (time.monotonic() - began))
        assert code == 1, survivor.log_tail()
        assert "frontier: stopping: PeerLost: process 1 (127.0.0.1:" in survivor.log_tail(), (
            survivor.log_tail()
        )
        assert "connection lost" in survivor.log_tail()


async def test_a_process_stopped_stops_the_cluster_gracefully(cluster: Any) -> None:
    servers = cluster(2)
    ready(servers)
    servers[0].process.send_signal(signal.SIGTERM)
    assert wait_exit(servers[0], SHUTDOWN) == 0, servers[0].log_tail()
    assert wait_exit(servers[1], SHUTDOWN) == 0, servers[1].log_tail()
    assert "frontier: stopping: process 0 (127.0.0.1:" in servers[1].log_tail()
    assert "left the cluster" in servers[1].log_tail()


async def test_a_process_with_another_secret_is_refused_at_start_up(cluster: Any) -> None:
    servers = cluster(2, secrets=[SECRET, "not the secret"], startup_timeout=5.0)
    for server in servers:
        assert wait_exit(server, STARTUP) == 2, server.log_tail()
    logs = [server.log_tail() for server in servers]
    assert all("frontier: cannot start: " in log for log in logs), logs
    # The side that checks the other's hello first names the field (and, since the hello
    # proves nothing, waits on until its start-up timeout); the other, the peer.
    assert any("the cluster secret does not match" in log for log in logs), logs
    assert any("process 0 (127.0.0.1:" in log for log in logs) or all(
        "the cluster secret does not match" in log for log in logs
    ), logs


# --------------------------------------------------------------------------- typed inputs

TYPED_COUNT = {
    "nodes": {
        "rows": {"op": "input", "schema": {"key": "string", "value": "int64"}},
        "scaled": {"op": "map", "expr": '{"key": r.key, "v": 10 / r.value}'},
        "counted": {"op": "count_by", "key": "r.key"},
        "out": {"op": "output"},
    },
    "edges": [["rows", "scaled"], ["scaled", "counted"], ["counted", "out"]],
}


async def test_a_typed_graph_runs_on_columns_across_the_cluster(cluster: Any) -> None:
    servers = cluster(2, workers=2)
    ready(servers)
    push = servers[1 - holder(2, 2, "rows")]  # relayed to the holder
    async with AsyncClient(push.url) as client:
        df = (await client.create_dataflow(TYPED_COUNT, "typed"))["id"]
        session = await client.session(df, "rows")
        records = [[0, {"key": k, "value": v}] for k, v in [("a", 1), ("b", 0), ("a", 2)]]
        records += [[0, {"key": f"k{i % 5}", "value": i + 1}] for i in range(100)]
        assert (await session.push(records))["applied"] == 103
        await session.advance(1)
    deadline = time.monotonic() + 10
    failed = []
    for server in servers:
        async with AsyncClient(server.url) as reader:
            while True:
                shown = await reader.dataflow(df, operators=False)
                if shown["outputs"]["out"]["frontier"] == [1]:
                    break
                assert time.monotonic() < deadline, shown
                await asyncio.sleep(0.05)
            assert {node: how["runs"] for node, how in shown["execution"].items()} == {
                "rows": "columns",
                "scaled": "columns",
                "counted": "columns",
                "out": "columns",
            }
            failed.append(shown["record_errors"])
            read = [(t, sorted(r, key=by_key)) async for t, r in reader.times(df, "out")]
            expected = [{"key": "a", "count": 2}] + [
                {"key": f"k{i}", "count": 20} for i in range(5)
            ]
            assert read == [(0, expected)]
    # Each process counts what its workers dropped: one division by zero, where the input is.
    assert sorted(failed, key=len) == [{}, {"scaled": {"count": 1, "last": "division by zero"}}]
