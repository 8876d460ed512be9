"""Benchmark of what advancing holds: server RSS over many advances that no record follows.

A server from each ``--checkout`` in turn (as ``bench/lifecycle.py`` starts it: 2 workers,
access log off, ``durability: none``) runs one dataflow of ``--operators`` operators: an
input, a chain of ``map`` operators and an output. One producer session advances its time
``--advances`` times, one by one, over HTTP, and never pushes a record, so no operator but
the input is ever scheduled with data. The server's RSS (``VmRSS``) is read after 200 warm-up
advances and after every ``--every`` advances; the figure is the growth per 1,000 advances
from a least-squares line (a leak grows linearly; noise does not).

Issue 16 reported 63 -> 147 MB over 8,000 advances on a 300-operator graph: the frontier
changes of the operators that are never scheduled held one entry per advanced time.

    .venv/bin/python bench/advance_memory.py --checkout /tmp/before --checkout .
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lifecycle import report, rss_over, start


def chain(operators: int) -> dict[str, Any]:
    """input -> map x (operators - 2) -> output."""
    maps = operators - 2
    nodes: dict[str, Any] = {"x": {"op": "input"}, "out": {"op": "output"}}
    names = ["x"]
    for index in range(maps):
        name = f"m{index}"
        nodes[name] = {"op": "map", "expr": "r + 1"}
        names.append(name)
    names.append("out")
    return {"nodes": nodes, "edges": [list(pair) for pair in itertools.pairwise(names)]}


async def measure(checkout: Path, operators: int, advances: int, every: int) -> dict[str, Any]:
    data = tempfile.TemporaryDirectory(prefix="bench-advance-")
    server = start(checkout, data.name)
    try:
        async with aiohttp.ClientSession() as http:
            await server.wait_ready(http)
            graph = {"graph": chain(operators)}
            async with http.post(f"{server.url}/v1/dataflows", json=graph) as response:
                assert response.status == 201, await response.text()
                base = f"{server.url}/v1/dataflows/{(await response.json())['id']}"
            async with http.post(f"{base}/inputs/x/sessions", json={}) as response:
                session = (await response.json())["session"]
            advance = f"{base}/inputs/x/sessions/{session}/advance"

            async def to(time_: int) -> None:
                async with http.post(advance, json={"time": time_}) as response:
                    assert response.status == 200, await response.text()

            for t in range(1, 201):
                await to(t)
            return await rss_over(
                server, checkout, lambda i: to(200 + i), advances, every, "advances"
            )
    finally:
        server.stop()
        data.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, action="append", default=None)
    parser.add_argument("--operators", type=int, default=300)
    parser.add_argument("--advances", type=int, default=8_000)
    parser.add_argument("--every", type=int, default=1_000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    checkouts = args.checkout or [Path(".")]
    results = [
        asyncio.run(measure(c, args.operators, args.advances, args.every)) for c in checkouts
    ]
    print(f"{args.operators} operators, {args.advances} advances, no records")
    report(results, "advances", args.json)


if __name__ == "__main__":
    main()
