"""A cluster changes its shape across restarts and keeps every dataflow (real processes).

One run of real ``frontier serve`` processes on real data directories: 1 x 1, then 3 x 1,
2 x 2 and 1 x 1 again, inputs moved with ``frontier rescale move`` before each shrink and
pushes between the steps. After every step, every process shows each dataflow's outputs as a
run that was never rescaled computes them (the counts below), the retried push of an
acknowledged batch (same session, same seq) and the retried commit of a transaction (same
idempotency key) are applied once, and the consumer's committed time holds. A changed shape
without ``--rescale``, and a shrink that would drop an input without moving it, exit 2
naming what is wrong; ``frontier rescale plan`` lists exactly the inputs to move.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from api.client import AsyncClient, AsyncSession
from tests.e2e.conftest import REPO, STARTUP, WORDS_COUNT, Server
from tests.e2e.test_cluster import SECRET, ready, stop_all, wait_exit
from tests.runtime.fabrics import free_ports


def serve(workdir: Path, processes: int, workers: int, rescale: bool = False) -> list[Server]:
    """A cluster of ``processes`` on ``workdir/data-<index>`` (not waited for)."""
    ports = free_ports(2 * processes)
    apis, fabric = ports[:processes], ports[processes:]
    peers = ",".join(f"127.0.0.1:{port}" for port in fabric)
    addresses = ",".join(f"127.0.0.1:{port}" for port in apis)
    servers = []
    for index in range(processes):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
        env.update(PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", FRONTIER_CLUSTER_SECRET=SECRET)
        if rescale:
            env["FRONTIER_RESCALE"] = "1"  # the environment, as the StatefulSet gives it
        log = workdir / f"p{index}-{processes}x{workers}-{time.monotonic_ns()}.log"
        command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(apis[index]), "--workers", str(workers)]
        command += ["--data-dir", str(workdir / f"data-{index}"), "--durability", "fsync"]
        command += ["--processes", str(processes), "--process", str(index)]
        command += ["--peers", peers, "--apis", addresses, "--log-format", "text"]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        servers.append(Server(apis[index], process, log))
    return servers


def frontier_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``frontier <args>`` as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "api", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def counts(pushed: list[list[Any]]) -> dict[int, list[dict[str, Any]]]:
    """What ``count_by(r)`` outputs per time for ``pushed``: the run never rescaled."""
    per_time: dict[int, Counter[str]] = {}
    for t, word in pushed:
        per_time.setdefault(t, Counter())[word] += 1
    return {
        t: [{"key": k, "count": n} for k, n in sorted(c.items())]
        for t, c in sorted(per_time.items())
    }


async def until_frontier(client: AsyncClient, df: str, expected: list[Any]) -> None:
    """Wait until the output's frontier is ``expected`` (at most 10 s: replays run)."""
    deadline = time.monotonic() + 10.0
    while (shown := await client.output_frontier(df, "out")) != expected:
        assert time.monotonic() < deadline, (df, shown, expected)
        await asyncio.sleep(0.02)


class Flow:
    """A dataflow of the run: what was pushed into it, and what every process must show."""

    def __init__(self, df: str) -> None:
        self.id = df
        self.pushed: list[list[Any]] = []
        self.frontier = 0
        self.forgotten = 0
        """Times before this one were read by the consumer: the outputs forgot them."""

    def expected(self) -> list[tuple[int, list[dict[str, Any]]]]:
        return [(t, r) for t, r in counts(self.pushed).items() if self.forgotten <= t]


async def check(servers: list[Server], flows: list[Flow], holders: dict[str, int]) -> None:
    """Every process shows every dataflow as the run never rescaled; its inputs' holders."""
    for server in servers:
        async with AsyncClient(server.url) as client:
            for flow in flows:
                await until_frontier(client, flow.id, [flow.frontier])
                read = [
                    (t, sorted(r, key=lambda c: c["key"]))
                    async for t, r in client.times(flow.id, "out")
                ]
                assert read == flow.expected(), (server.url, flow.id)
                shown = await client.dataflow(flow.id, operators=False)
                assert shown["inputs"]["words"]["process"] == holders[flow.id]
                assert shown["inputs"]["words"]["records_in"] == len(flow.pushed)


async def until_consumer(client: AsyncClient, df: str, committed: int) -> None:
    deadline = time.monotonic() + 5.0
    expected = [{"consumer": "spark", "committed": committed}]
    while (shown := await client.output(df, "out"))["consumers"] != expected:
        assert time.monotonic() < deadline, shown
        await asyncio.sleep(0.02)


async def test_rescale_1x1_to_3x1_to_2x2_to_1x1_keeps_every_dataflow(tmp_path: Path) -> None:
    started: list[Server] = []
    data = [tmp_path / f"data-{i}" for i in range(3)]

    def cluster(processes: int, workers: int, rescale: bool = False) -> list[Server]:
        servers = serve(tmp_path, processes, workers, rescale)
        started.extend(servers)
        return servers

    try:
        # ---------------------------------------------------------------- 1 x 1
        [alone] = servers = cluster(1, 1)
        ready(servers)
        async with AsyncClient(alone.url) as client:
            first = Flow((await client.create_dataflow(WORDS_COUNT, "first"))["id"])
            session = await client.session(first.id, "words")
            batch = [[0, "a"], [0, "b"], [0, "a"]]
            assert (await session.push(batch))["applied"] == 3
            first.pushed += batch
            # A transaction, committed at the session's time with an idempotency key.
            assert await client.stage(first.id, "words", "tx1", [[0, "t"], [0, "a"]]) == 2
            committed = await session.commit(["tx1"], "key-1")
            assert committed["applied"] == 2
            first.pushed += [[0, "t"], [0, "a"]]
            await session.advance(1)
            first.frontier = 1
            await until_frontier(client, first.id, [1])
            # The consumer read time 0: the output forgets it.
            assert (await client.commit_consumer(first.id, "out", "spark", 1))["committed"] == 1
            first.forgotten = 1
            # An open session's time 1 batch, acknowledged, the session left open.
            retry = [[1, "c"], [1, "a"]]
            assert (await session.push(retry, seq=2))["applied"] == 2
            first.pushed += retry
            await session.advance(2)
            first.frontier = 2
        await check(servers, [first], {first.id: 0})
        stop_all(servers)

        # ------------------------------------------- 3 x 1 without --rescale: refused
        servers = cluster(3, 1)
        assert wait_exit(servers[0], STARTUP) == 2, servers[0].log_tail()
        assert (
            f"frontier: cannot start: data directory {data[0]} was written by a cluster of 1 "
            "process x 1 worker; this start is 3 processes x 1 worker: start every process "
            'with --rescale to change the shape (docs/cluster.md, "Changing the shape")'
        ) in servers[0].log_tail()
        for server in servers[1:]:  # waiting for process 0, which will not come
            server.process.kill()
            server.process.wait()

        # ---------------------------------------------------------------- 3 x 1
        servers = cluster(3, 1, rescale=True)
        ready(servers)
        holders = {first.id: 0}
        await check(servers, [first], holders)
        async with AsyncClient(servers[2].url) as client:
            await until_consumer(client, first.id, 1)
            resumed = AsyncSession(client, f"/v1/dataflows/{first.id}/inputs/words", session.id, 2)
            # The acknowledged batch again (same session, same seq): applied once in all.
            assert (await resumed.push(retry, seq=2))["applied"] == 2
            # The commit again, with its key: the first commit's ack, applied once in all.
            assert await resumed.commit(["tx1"], "key-1") == committed
            second = Flow((await client.create_dataflow(WORDS_COUNT, "second"))["id"])
            third = Flow((await client.create_dataflow(WORDS_COUNT, "third"))["id"])
            # Where there is room: the processes the rescale added, the lowest first.
            holders.update({second.id: 1, third.id: 2})
            producers = {}
            for flow, words in ((second, ["x", "y"]), (third, ["z"])):
                producer = producers[flow.id] = await client.session(flow.id, "words")
                batch = [[0, w] for w in words]
                assert (await producer.push(batch))["applied"] == len(batch)
                flow.pushed += batch
                await producer.advance(1)
                flow.frontier = 1
            more = [[2, "a"], [2, "d"]]
            assert (await resumed.push(more, seq=3))["applied"] == 2
            first.pushed += more
            await resumed.advance(3)
            first.frontier = 3
        flows = [first, second, third]
        await check(servers, flows, holders)
        stop_all(servers)

        # ---------------------------------------------- 2 x 2: process 2's input moves
        planned = frontier_cli("rescale", "plan", "--data-dir", str(data[0]), "--processes", "2")
        assert (planned.returncode, planned.stdout) == (0, f"{third.id} third words 2\n")
        moved = frontier_cli(
            "rescale", "move", "--from", str(data[2]), "--to", str(data[1]),
            "--to-process", "1", "--catalogue", str(data[0]),
        )  # fmt: skip
        assert moved.returncode == 0, moved.stderr
        # Its log: the session opened, the push, the advance.
        line = moved.stdout.removesuffix(" bytes, copied)\n")
        assert line.startswith(
            f"moved input 'words' of dataflow {third.id}: process 2 -> 1 (3 frames, "
        ), moved.stdout
        assert line.rpartition(" ")[2].isdigit(), moved.stdout
        assert not (data[2] / "inputs" / third.id / "0").exists()
        holders[third.id] = 1
        servers = cluster(2, 2, rescale=True)
        ready(servers)
        await check(servers, flows, holders)
        async with AsyncClient(servers[1].url) as client:
            await until_consumer(client, first.id, 1)
            resumed = AsyncSession(client, f"/v1/dataflows/{first.id}/inputs/words", session.id, 3)
            assert (await resumed.push(more, seq=3))["applied"] == 2  # applied once
            later = [[3, "b"], [3, "e"], [3, "b"]]
            assert (await resumed.push(later, seq=4))["applied"] == 3
            first.pushed += later
            await resumed.advance(4)
            first.frontier = 4
            # The third's producer resumes its session (open across the move and the rescale).
            path = f"/v1/dataflows/{third.id}/inputs/words"
            producer = AsyncSession(client, path, producers[third.id].id, 1)
            assert (await producer.push([[1, "z"], [1, "w"]], seq=2))["applied"] == 2
            third.pushed += [[1, "z"], [1, "w"]]
            await producer.advance(2)
            third.frontier = 2
        await check(servers, flows, holders)
        stop_all(servers)

        # ------------------------------------- 1 x 1: refused until process 1's inputs move
        planned = frontier_cli("rescale", "plan", "--data-dir", str(data[0]), "--processes", "1")
        assert (planned.returncode, planned.stdout) == (
            0,
            f"{second.id} second words 1\n{third.id} third words 1\n",
        )
        [alone] = servers = cluster(1, 1, rescale=True)
        assert wait_exit(alone, STARTUP) == 2, alone.log_tail()
        assert (
            f"frontier: cannot start: input 'words' of dataflow {second.id} (second) is held "
            "by process 1, which a cluster of 1 process x 1 worker does not have: move it "
            "first"
        ) in alone.log_tail()
        moved = frontier_cli(
            "rescale", "move", "--from", str(data[1]), "--to", str(data[0]), "--to-process", "0"
        )
        assert moved.returncode == 0, moved.stderr
        assert len(moved.stdout.splitlines()) == 2, moved.stdout
        holders.update({second.id: 0, third.id: 0})
        [alone] = servers = cluster(1, 1, rescale=True)
        ready(servers)
        await check(servers, flows, holders)
        async with AsyncClient(alone.url) as client:
            await until_consumer(client, first.id, 1)
            resumed = AsyncSession(client, f"/v1/dataflows/{first.id}/inputs/words", session.id, 4)
            assert (await resumed.push(later, seq=4))["applied"] == 3  # applied once
            last = [[4, "f"]]
            assert (await resumed.push(last, seq=5))["applied"] == 1
            first.pushed += last
            await resumed.advance(5)
            first.frontier = 5
        await check(servers, flows, holders)
        # Expected values, spelled out once: what the never-rescaled run outputs.
        assert first.expected() == [
            (1, [{"key": "a", "count": 1}, {"key": "c", "count": 1}]),
            (2, [{"key": "a", "count": 1}, {"key": "d", "count": 1}]),
            (3, [{"key": "b", "count": 2}, {"key": "e", "count": 1}]),
            (4, [{"key": "f", "count": 1}]),
        ]
        stop_all(servers)
        for server in started:
            assert server.process.poll() is not None
    finally:
        stop_all(started)
