"""No loop freezes the server (issue 22): fair scheduling, against a real server process.

While one tenant's record goes round an iterative loop tens of thousands of times, the
server keeps answering ``/healthz`` and another tenant's pushes and advances: each dataflow
runs for a slice and then lets the others (and the event loop) run. The figures with a
million iterations come from ``bench/fair_scheduling.py``; here the bound is looser.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.fair_scheduling import PASS, TOKENS, Tenant, loop_graph
from tests.e2e.conftest import Server, running

ITERATIONS = 20_000


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with running(tmp_path, "--durability", "none", config={"tokens": TOKENS}) as started:
        yield started


async def test_a_long_loop_leaves_room_for_health_probes_and_other_tenants(
    server: Server,
) -> None:
    async with aiohttp.ClientSession() as http:
        loop, other = Tenant(http, server.url, "loop"), Tenant(http, server.url, "other")
        dataflow, looping = await loop.session(loop_graph(ITERATIONS), "in")
        _other, pushing = await other.session(PASS, "x")
        await loop.call("POST", f"{looping}/push", {"seq": 1, "records": [[0, 0]]})
        await loop.call("POST", f"{looping}/advance", {"time": 1})
        health: list[float] = []
        rounds: list[float] = []
        seq = 0
        while not (await loop.call("GET", f"/v1/dataflows/{dataflow}/outputs/out/times"))["times"]:
            began = time.monotonic()
            async with http.get(f"{server.url}/healthz") as answer:
                assert answer.status == 200
            health.append(time.monotonic() - began)
            began = time.monotonic()
            await other.call("POST", f"{pushing}/push", {"seq": seq + 1, "records": [[seq, 1]]})
            await other.call("POST", f"{pushing}/advance", {"time": seq + 1})
            rounds.append(time.monotonic() - began)
            seq += 1
            await asyncio.sleep(0.01)
    # The loop ran for seconds: the others were answered all along, none waited long.
    assert len(health) >= 10, health
    assert max(health) < 0.5, sorted(health)[-5:]
    assert max(rounds) < 0.5, sorted(rounds)[-5:]
