"""One tenant's loop must not freeze the others: latency while a record loops N times.

A real server (``python -m api serve``, 1 worker, ``durability: none``) on 127.0.0.1. Tenant
``loop`` creates the iterative dataflow of docs/graphs.md whose ``test`` lets a record out at
``r >= N`` (``--iterations``, default 1,000,000) and pushes one record ``0``: it goes round
the loop N times. Measured, median of ``--repeats``:

* **alone**: from the push until the output holds the record, with nothing else asking;
* **shared**: the same, while a prober asks ``/healthz`` every 20 ms and tenant ``other``
  pushes a batch and advances its own (pass-through) dataflow every 20 ms: the latency of
  each (p50, p99, max, over every repeat), and the loop's time against its time alone.

    .venv/bin/python bench/fair_scheduling.py --iterations 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
PASS = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}
TOKENS = {"loop": "loop", "other": "other"}


def loop_graph(iterations: int) -> dict[str, Any]:
    return {
        "scopes": {"loop": {"kind": "iterative"}},
        "nodes": {
            "in": {"op": "input"},
            "merge": {"op": "concat", "scope": "loop"},
            "step": {"op": "map", "expr": "r + 1", "scope": "loop"},
            "test": {"op": "branch", "expr": f"r >= {iterations}", "scope": "loop"},
            "back": {"op": "feedback", "scope": "loop"},
            "out": {"op": "output"},
        },
        "edges": [
            ["in", "merge:0"],
            ["back", "merge:1"],
            ["merge", "step"],
            ["step", "test"],
            ["test:0", "back"],
            ["test:1", "out"],
        ],
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Tenant:
    def __init__(self, http: aiohttp.ClientSession, url: str, token: str) -> None:
        self.http, self.url = http, url
        self.headers = {"Authorization": f"Bearer {token}"}

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        async with self.http.request(
            method, self.url + path, json=body, headers=self.headers
        ) as answer:
            assert answer.status < 300, await answer.text()
            return await answer.json(content_type=None)

    async def session(self, graph: dict[str, Any], input: str) -> tuple[str, str]:
        dataflow = (await self.call("POST", "/v1/dataflows", {"graph": graph}))["id"]
        base = f"/v1/dataflows/{dataflow}/inputs/{input}"
        session = (await self.call("POST", f"{base}/sessions", {}))["session"]
        return dataflow, f"{base}/sessions/{session}"


async def looped(loop: Tenant, iterations: int) -> float:
    """Push one record round the loop; seconds until the output holds it."""
    dataflow, session = await loop.session(loop_graph(iterations), "in")
    began = time.monotonic()
    await loop.call("POST", f"{session}/push", {"seq": 1, "records": [[0, 0]]})
    await loop.call("POST", f"{session}/advance", {"time": 1})
    while True:
        page = await loop.call("GET", f"/v1/dataflows/{dataflow}/outputs/out/times")
        if page["times"]:
            took = time.monotonic() - began
            await loop.call("DELETE", f"/v1/dataflows/{dataflow}")
            return took
        await asyncio.sleep(0.05)


async def probe(http: aiohttp.ClientSession, url: str, done: asyncio.Event) -> list[float]:
    seconds = []
    while not done.is_set():
        began = time.monotonic()
        async with http.get(f"{url}/healthz") as answer:
            await answer.read()
        seconds.append(time.monotonic() - began)
        await asyncio.sleep(0.02)
    return seconds


async def other_tenant(other: Tenant, done: asyncio.Event) -> list[float]:
    """Push a batch and advance, every 20 ms: each pair's round trip."""
    _dataflow, session = await other.session(PASS, "x")
    seconds, seq = [], 0
    while not done.is_set():
        began = time.monotonic()
        await other.call("POST", f"{session}/push", {"seq": seq + 1, "records": [[seq, seq]]})
        await other.call("POST", f"{session}/advance", {"time": seq + 1})
        seconds.append(time.monotonic() - began)
        seq += 1
        await asyncio.sleep(0.02)
    return seconds


async def shared(url: str, iterations: int) -> tuple[float, list[float], list[float]]:
    async with aiohttp.ClientSession() as http:
        loop, other = Tenant(http, url, "loop"), Tenant(http, url, "other")
        done = asyncio.Event()
        probes = asyncio.ensure_future(probe(http, url, done))
        pushes = asyncio.ensure_future(other_tenant(other, done))
        await asyncio.sleep(0.2)
        took = await looped(loop, iterations)
        done.set()
        return took, await probes, await pushes


async def alone(url: str, iterations: int) -> float:
    async with aiohttp.ClientSession() as http:
        return await looped(Tenant(http, url, "loop"), iterations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    # bench/common.py, the script's folder: imported here, as tests import this module.
    from common import start_server

    work = Path(tempfile.mkdtemp(prefix="bench-fair-"))
    server, url = start_server(work, ROOT, {"tokens": TOKENS})
    try:
        alone_s, shared_s, probes, pushes = [], [], [], []
        for _ in range(args.repeats):  # interleaved: alone, then shared
            alone_s.append(asyncio.run(alone(url, args.iterations)))
            took, probed, pushed = asyncio.run(shared(url, args.iterations))
            shared_s.append(took)
            probes += probed
            pushes += pushed
        ratio = statistics.median(s / a for s, a in zip(shared_s, alone_s, strict=True))
        print(f"{args.iterations:,} iterations, median of {args.repeats}:")
        alone_m, shared_m = statistics.median(alone_s), statistics.median(shared_s)
        print(f"  loop alone {alone_m:.2f} s; shared {shared_m:.2f} s: {ratio:.2f}x")
        for name, seconds in (("/healthz", probes), ("other tenant's push+advance", pushes)):
            print(
                f"  {name}: {len(seconds)} samples, p50 {percentile(seconds, 0.5) * 1e3:.1f} ms, "
                f"p99 {percentile(seconds, 0.99) * 1e3:.1f} ms, max {max(seconds) * 1e3:.1f} ms"
            )
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
