"""The stats subscription against a real server: counts, throughput, latency and stalls.

``GET /v1/dataflows/{id}/stats`` sends a dataflow's counters and the samples of its pace
(one a second: records in and out, completion latency per output, the event loop's lag).
A blocking operator (``tests/e2e/plugins/stall.py``, loaded as a deployer's module) stalls
the server's event loop for real: the stall shows in the samples, in the socket's ``loop``
and in ``/metrics``.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator
from websockets.exceptions import InvalidStatus

from api.client import AsyncClient
from tests.e2e.conftest import REPO, Server, running, within, ws_connect

SCHEMA = Draft202012Validator(
    orjson.loads((Path(__file__).parents[2] / "schemas" / "stats.json").read_bytes())
)

GRAPH = {
    "nodes": {
        "numbers": {"op": "input"},
        "pass": {"op": "stall"},
        "double": {"op": "map", "expr": "r"},
        "out": {"op": "output"},
    },
    "edges": [["numbers", "pass"], ["pass", "double"], ["double", "out"]],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(
        tmp_path_factory.mktemp("stats"), "--operator-module", "tests.e2e.plugins.stall"
    ) as started:
        yield started


async def next_message(ws: Any, timeout: float = 5.0) -> Any:
    """The next message; a ``stats`` one is checked against ``schemas/stats.json``."""
    message = orjson.loads(await within(ws.recv(), timeout))
    if message.get("type") == "stats":
        SCHEMA.validate(message)
    return message


async def samples_until(ws: Any, done: Any, timeout: float = 10.0) -> list[Any]:
    """Every sample received until ``done(samples so far)`` holds."""
    samples: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(samples):
        assert time.monotonic() < deadline, f"not within {timeout} s: {samples}"
        message = await next_message(ws)
        assert message["type"] == "stats", message
        samples.extend(message["samples"])
    return samples


async def test_the_stats_carry_counts_throughput_and_completion_latency(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        dataflow = (await client.create_dataflow(GRAPH, name="paced"))["id"]
        session = await client.session(dataflow, "numbers", start=0)
        path = f"/v1/dataflows/{dataflow}/stats?interval=0.25"
        async with ws_connect(server, path) as ws:
            first = await next_message(ws)
            assert first["type"] == "stats"
            assert (first["id"], first["status"]) == (dataflow, "running")
            assert set(first["operators"]) == {"numbers", "pass", "double", "out"}
            assert first["inputs"]["numbers"]["sessions"] == [{"session": session.id, "time": 0}]
            assert first["outputs"]["out"]["records_out"] == 0
            assert abs(first["at"] - time.time()) < 5

            await session.push([[0, 1], [0, 2], [0, 3]])
            await asyncio.sleep(0.6)  # time 0 stays open this long after its first record
            await session.advance(1)
            await session.push([[1, 4]])
            await session.advance(2)
            samples = await samples_until(
                ws, lambda got: sum(len(s["latency"]) for s in got) >= 2 or len(got) > 8
            )
            # Throughput: every record in and out, counted once over the samples.
            assert sum(s["records_in"]["numbers"] for s in samples) == 4
            assert sum(s["records_out"]["out"] for s in samples) == 4
            # Latency: time 0 waited at least the 0.6 s before its advance; time 1 did not.
            completed = [s["latency"]["out"] for s in samples if "out" in s["latency"]]
            assert sum(c["completed"] for c in completed) == 2
            longest = max(c["max"] for c in completed)
            assert 0.6 <= longest < 1.6, completed
            # One a second, numbered in order; a sample says how long it was.
            seqs = [s["seq"] for s in samples]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
            assert all(0.9 <= s["seconds"] <= 1.5 for s in samples), samples
            latest = await next_message(ws)
            assert latest["inputs"]["numbers"]["records_in"] == 4
            assert latest["outputs"]["out"]["records_out"] == 4
            assert latest["operators"]["double"]["records"] == [4]
            assert latest["operators"]["double"]["busy_seconds"] > 0

        # A new subscriber is sent the samples kept, from the dataflow's first.
        async with ws_connect(server, path) as ws:
            history = (await next_message(ws))["samples"]
            assert history[0]["seq"] == 0
            assert [s["seq"] for s in history] == list(range(len(history)))
            assert history[-1]["seq"] >= seqs[-1]
            assert sum(s["records_in"]["numbers"] for s in history) == 4
        await client.drop(dataflow)


async def test_a_stall_of_the_event_loop_shows(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        dataflow = (await client.create_dataflow(GRAPH, name="stalled"))["id"]
        session = await client.session(dataflow, "numbers", start=0)
        async with ws_connect(server, f"/v1/dataflows/{dataflow}/stats?interval=0.25") as ws:
            await next_message(ws)
            began = time.time()
            await session.push([[0, {"sleep": 1.5}]])  # the worker blocks the loop 1.5 s
            samples = await samples_until(
                ws, lambda got: any(s["loop_lag"] >= 1.4 for s in got), timeout=15
            )
            stalled = next(s for s in samples if s["loop_lag"] >= 1.4)
            assert stalled["loop_lag"] < 3.0
            assert stalled["seconds"] >= 1.4  # the sample took as long as the stall
            message = await next_message(ws)
            stalls = [s for s in message["loop"]["stalls"] if s["at"] >= began - 0.5]
            assert len(stalls) == 1, message["loop"]
            assert 1.4 <= stalls[0]["seconds"] < 3.0
            assert began - 0.5 <= stalls[0]["at"] <= began + 1.5
        await client.drop(dataflow)
    with urllib.request.urlopen(server.url + "/metrics", timeout=5) as answer:
        metrics = answer.read().decode()
    assert "frontier_event_loop_lag_seconds " in metrics
    [total] = [
        line for line in metrics.splitlines() if line.startswith("frontier_event_loop_stalls_total")
    ]
    assert float(total.split()[1]) >= 1


async def test_the_socket_ends_when_the_dataflow_is_dropped(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        dataflow = (await client.create_dataflow(GRAPH))["id"]
        async with ws_connect(server, f"/v1/dataflows/{dataflow}/stats?interval=0.25") as ws:
            await next_message(ws)
            await client.drop(dataflow)
            while (message := await next_message(ws))["type"] == "stats":
                pass
            assert message == {"type": "closed", "reason": f"dataflow {dataflow!r} was dropped"}
            await within(ws.wait_closed())
            assert ws.close_code == 4410


async def test_the_async_client_reads_the_stats(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        dataflow = (await client.create_dataflow(GRAPH))["id"]
        stream = client.stats(dataflow, interval=0.25)
        first = await within(anext(stream))
        assert (first["type"], first["id"]) == ("stats", dataflow)
        await client.drop(dataflow)
        async for message in stream:
            last = message
        assert last["type"] == "closed"


@pytest.mark.parametrize(
    ("query", "status", "detail"),
    [
        ("interval=0.1", 400, "interval must be a number of seconds from 0.25 to 60, not '0.1'"),
        ("interval=soon", 400, "interval must be a number of seconds from 0.25 to 60, not 'soon'"),
        ("interval=nan", 400, "interval must be a number of seconds from 0.25 to 60, not 'nan'"),
    ],
)
async def test_a_bad_interval_is_refused_before_the_upgrade(
    server: Server, query: str, status: int, detail: str
) -> None:
    async with AsyncClient(server.url) as client:
        dataflow = (await client.create_dataflow(GRAPH))["id"]
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(server, f"/v1/dataflows/{dataflow}/stats?{query}"):
                pass
        assert refused.value.response.status_code == status
        problem = orjson.loads(refused.value.response.body or b"{}")
        assert problem["detail"] == detail
        await client.drop(dataflow)


async def test_an_unknown_dataflow_is_a_404(server: Server) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(server, "/v1/dataflows/nope/stats"):
            pass
    assert refused.value.response.status_code == 404
    assert orjson.loads(refused.value.response.body or b"{}")["detail"] == "no dataflow 'nope'"


def stats_cli(server: Server, *args: str) -> subprocess.Popen[str]:
    """``frontier stats`` against the server, its lines read as they come."""
    command = [sys.executable, "-m", "api", "stats", *args, "--url", server.url]
    return subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def lines_until(process: subprocess.Popen[str], done: Any, timeout: float = 15.0) -> list[str]:
    """The CLI's lines until ``done(line)`` holds for one (read in a thread, with a deadline)."""
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if done(lines[-1]):
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert found.wait(timeout), f"not within {timeout} s: {lines}"
    return lines


async def test_the_cli_prints_the_pace_and_the_stalls(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        dataflow = (await client.create_dataflow(GRAPH, name="cli-paced"))["id"]
        session = await client.session(dataflow, "numbers", start=0)
        process = stats_cli(server, "cli-paced", "--interval", "0.25")  # by its name
        try:
            await session.push([[0, n] for n in range(3000)])
            await asyncio.sleep(0.5)
            await session.advance(1)
            latency = r"latency (\d+) ms \(max (\d+) ms, 1 time\)"
            line = re.compile(
                rf"\d\d:\d\d:\d\d in numbers (\d+(\.\d)?k?)/s · out out (\d+(\.\d)?k?)/s, "
                rf"{latency} · loop lag \d+ ms"
            )
            lines = await asyncio.to_thread(lines_until, process, line.fullmatch)
            found = line.fullmatch(lines[-1])
            assert found is not None
            assert 500 <= int(found[5]) == int(found[6]) < 1500, lines[-1]
            # A stall of the loop: a line of its own.
            await session.push([[1, {"sleep": 1.2}]])
            stalled = re.compile(
                r"\d\d:\d\d:\d\d the server's event loop stalled (\d\.\d\d) s: "
                "it answered nothing meanwhile"
            )
            lines = await asyncio.to_thread(lines_until, process, stalled.fullmatch)
            found = stalled.fullmatch(lines[-1])
            assert found is not None and 1.05 <= float(found[1]) < 2.5, lines[-1]
        finally:
            process.terminate()
            process.communicate(timeout=10)  # and its pipes closed
        # --json: the messages themselves; the drop ends it with "closed" and exit 0.
        process = stats_cli(server, dataflow, "--json")
        try:
            first = await asyncio.to_thread(lines_until, process, lambda line: True)
            SCHEMA.validate(orjson.loads(first[0]))
            await client.drop(dataflow)
            out, err = await asyncio.to_thread(process.communicate, timeout=15)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=10)
        assert process.returncode == 0, err
        assert orjson.loads(out.splitlines()[-1])["type"] == "closed"


def test_the_cli_names_a_missing_dataflow_in_one_line(server: Server) -> None:
    process = stats_cli(server, "nope")
    out, err = process.communicate(timeout=30)
    assert process.returncode != 0
    assert out == ""
    assert err.strip().splitlines() == [err.strip()], err  # one line, no traceback
    assert "nope" in err, err
