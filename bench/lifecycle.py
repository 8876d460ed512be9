"""Benchmark of what a dataflow leaves behind: server RSS over many create/use/drop cycles.

A server (``frontier serve``, 2 workers, access log off) runs in a subprocess on 127.0.0.1,
started from each ``--checkout`` in turn (its code: the checkout's ``api`` and ``service``
come first on ``sys.path``), so a run can hold the code before and after a change side by
side. Each *cycle*, over real sockets: create a dataflow ``input -> exchange -> count_by ->
output``, open a producer session and push 3 records at time 0, open a frontier WebSocket
(``/frontiers?operators=true``) and an output event WebSocket, register a consumer and commit
it, advance the session to 1, wait until the frontier socket reports ``output:out`` at
``[1]``, close both sockets, drop the dataflow. The server keeps a data directory of its own
(a temporary one, ``durability: none``: what is measured is memory, not the disk; a checkout
from before the store ignores it). The server's RSS (``VmRSS``) is read before
the first cycle (after 20 warm-up cycles, so that allocator pools and caches are warm) and
after every ``--every`` cycles. The figure is the growth per 1,000 cycles, from a least-squares
line through the readings (a leak grows linearly; noise does not).

    .venv/bin/python bench/lifecycle.py --cycles 10000 --checkout . --checkout /tmp/before
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import cli_source, table
from bench.service import ServerProcess, free_port

GRAPH = {
    "nodes": {
        "x": {"op": "input"},
        "spread": {"op": "exchange", "key": "r"},
        "n": {"op": "count_by", "key": "r % 3"},
        "out": {"op": "output"},
    },
    "edges": [["x", "spread"], ["spread", "n"], ["n", "out"]],
}


def start(checkout: Path, data_dir: str) -> ServerProcess:
    port = free_port()
    code = (
        f"import sys; sys.path.insert(0, {str(checkout.resolve())!r}); "
        "from api.cli import main; sys.exit(main())"
    )
    command = [
        sys.executable,
        "-c",
        code,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "2",
        "--access-log",
        "off",
        "--data-dir",
        data_dir,
    ]
    if "--durability" in cli_source(checkout):
        command += ["--durability", "none"]
    return ServerProcess(checkout.name or "here", command, port, "/readyz")


async def cycle(http: aiohttp.ClientSession, url: str) -> None:
    async with http.post(f"{url}/v1/dataflows", json={"graph": GRAPH}) as response:
        assert response.status == 201, await response.text()
        dataflow = (await response.json())["id"]
    base = f"{url}/v1/dataflows/{dataflow}"
    async with http.post(f"{base}/inputs/x/sessions", json={}) as response:
        session = (await response.json())["session"]
    push = {"seq": 1, "records": [[0, 1], [0, 2], [0, 4]]}
    async with http.post(f"{base}/inputs/x/sessions/{session}/push", json=push) as response:
        assert response.status == 200, await response.text()
    frontiers = await http.ws_connect(f"{base}/frontiers?operators=true")
    events = await http.ws_connect(f"{base}/outputs/out/events")
    async with http.put(f"{base}/outputs/out/consumers/reader", json={"committed": 0}) as r:
        assert r.status == 200, await r.text()
    advance = {"time": 1}
    async with http.post(f"{base}/inputs/x/sessions/{session}/advance", json=advance) as r:
        assert r.status == 200, await r.text()
    async for message in frontiers:
        event = orjson.loads(message.data)
        if event == {"type": "frontier", "location": "output:out", "frontier": [1]}:
            break
    await frontiers.close()
    await events.close()
    async with http.delete(base) as response:
        assert response.status == 204, await response.text()


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares KiB per cycle."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


async def rss_over(
    server: ServerProcess,
    checkout: Path,
    step: Callable[[int], Awaitable[None]],
    count: int,
    every: int,
    noun: str,
) -> dict[str, Any]:
    """``step(i)`` for ``i`` in ``1..count``, the server's RSS read before and every ``every``:
    the readings, their growth per 1,000 steps (least squares) and the steps per second."""
    points = [(0, server.rss_kib())]
    began = time.perf_counter()
    for i in range(1, count + 1):
        await step(i)
        if i % every == 0:
            points.append((i, server.rss_kib()))
    seconds = time.perf_counter() - began
    return {
        "checkout": str(checkout),
        "points": points,
        "kib_per_1000": slope(points) * 1000,
        f"{noun}_per_s": count / seconds,
    }


def report(results: list[dict[str, Any]], noun: str, json_path: Path | None) -> None:
    """The RSS table and each checkout's readings (and the results as JSON, if asked)."""
    rows = [
        [
            r["checkout"],
            f"{r['points'][0][1] / 1024:.1f}",
            f"{r['points'][-1][1] / 1024:.1f}",
            f"{r['points'][-1][0]}",
            f"{r['kib_per_1000']:.0f}",
            f"{r[noun + '_per_s']:.0f}",
        ]
        for r in results
    ]
    headers = ["checkout", "RSS start MiB", "RSS end MiB", noun, f"KiB/1000 {noun}", f"{noun}/s"]
    print(table(headers, rows))
    for result in results:
        trace = ", ".join(f"{i}: {kib / 1024:.1f}" for i, kib in result["points"])
        print(f"{result['checkout']}: RSS MiB after {noun} {trace}")
    if json_path:
        json_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))


async def measure(checkout: Path, cycles: int, every: int) -> dict[str, Any]:
    data = tempfile.TemporaryDirectory(prefix="bench-lifecycle-")
    server = start(checkout, data.name)
    try:
        async with aiohttp.ClientSession() as http:
            await server.wait_ready(http)
            for _ in range(20):
                await cycle(http, server.url)
            return await rss_over(
                server, checkout, lambda _i: cycle(http, server.url), cycles, every, "cycles"
            )
    finally:
        server.stop()
        data.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, action="append", default=None)
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    checkouts = args.checkout or [Path(".")]
    results = [asyncio.run(measure(c, args.cycles, args.every)) for c in checkouts]
    report(results, "cycles", args.json)


if __name__ == "__main__":
    main()
