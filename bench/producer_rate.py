"""How many requests a second an ordinary producer makes: what the default rate limit must let by.

A real server (``python -m api serve``, 1 worker, ``durability: fsync`` unless ``--durability``,
no rate limit) on 127.0.0.1; producers push batches of ``--batch`` records (default 100, JSON,
integer times, one time per batch) over HTTP, each with one request in flight, as fast as
the server answers, for ``--seconds``; then the same with ``--clients`` producers at once (one
tenant). Printed: requests per second, with 1 producer and with N, median of ``--repeats``.

    .venv/bin/python bench/producer_rate.py --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
from common import start_server  # bench/common.py (the script's folder)

ROOT = Path(__file__).resolve().parents[1]
GRAPH = {
    "nodes": {"x": {"op": "input"}, "n": {"op": "count_by", "key": "r"}, "out": {"op": "output"}},
    "edges": [["x", "n"], ["n", "out"]],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def producer(url: str, base: str, batch: int, deadline: float) -> int:
    """Push batches until ``deadline``; how many requests were answered."""
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}{base}/sessions", json={}) as opened:
            session = (await opened.json())["session"]
        done = 0
        while time.monotonic() < deadline:
            body = orjson.dumps(
                {"seq": done + 1, "records": [[done, i % 17] for i in range(batch)]}
            )
            async with http.post(
                f"{url}{base}/sessions/{session}/push",
                data=body,
                headers={"Content-Type": "application/json"},
            ) as answer:
                assert answer.status == 200, await answer.text()
                await answer.read()
            done += 1
        return done


async def rate(url: str, clients: int, batch: int, seconds: float) -> float:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/dataflows", json={"graph": GRAPH}) as created,
    ):
        dataflow = (await created.json())["id"]
    base = f"/v1/dataflows/{dataflow}/inputs/x"
    began = time.monotonic()
    counts = await asyncio.gather(
        *(producer(url, base, batch, began + seconds) for _ in range(clients))
    )
    return sum(counts) / (time.monotonic() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--durability", default="fsync")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-rate-"))
    limits = {"limits": {"tenant_requests_per_second": 0}}
    server, url = start_server(work, ROOT, limits, args.durability)
    try:
        one, many = [], []
        for _ in range(args.repeats):
            one.append(asyncio.run(rate(url, 1, args.batch, args.seconds)))
            many.append(asyncio.run(rate(url, args.clients, args.batch, args.seconds)))
        print(
            f"batches of {args.batch}, durability {args.durability}: 1 producer "
            f"{statistics.median(one):,.0f} requests/s (min {min(one):,.0f}, max "
            f"{max(one):,.0f}); {args.clients} producers {statistics.median(many):,.0f} "
            f"requests/s (min {min(many):,.0f}, max {max(many):,.0f})"
        )
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
