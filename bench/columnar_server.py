"""Benchmark: a graph on a typed input (columns) against the same graph untyped and a plain loop.

Run by hand from the repository root:

    .venv/bin/python bench/columnar_server.py                      # 10 M records, 5 rounds
    .venv/bin/python bench/columnar_server.py --records 1000000 --rounds 1   # a quick look

One server, ``python -m api serve --workers 1 --durability none`` on 127.0.0.1 (a data
directory of its own), runs the graph ``input -> map -> filter -> count_by -> output``::

    map       {"key": r.key, "v": r.value * 2}
    filter    r.key % 2 == 0
    count_by  r.key

W1's work (``bench/runtime.py``), on records ``{key: i % 1000, value: i}`` over 10 times.
Each run creates a dataflow, opens a session, pushes the records as Arrow IPC bodies of
100,000 rows (``time, key, value``; the most one push may carry) over HTTP one after the
other, advances past the last time, and waits until the output's frontier says every time
is complete; it is timed from the first push to that moment, then the output's
counts are checked against the plain loop's and the dataflow is dropped.

* **typed**: the input declares ``{"key": "int64", "value": "int64"}``: the records stay
  Arrow columns from the body to the output, and the plan runs every node on columns;
* **untyped**: the same graph and bodies with no schema: each row becomes a JSON object and
  every node runs record by record (the graph compiler's fused row path);
* **plain**: a plain Python loop in this process doing the same work on the same records as
  Python lists of ``(key, value)``, made before timing (per time a ``defaultdict(int)``; per
  record ``value * 2`` and, if the key is even, ``counts[key] += 1``).

A round runs the three in turn (interleaved, so a slow spell of the shared machine touches
all three); figures are medians over ``--rounds`` with the ratios taken within each round.
Targets (issue 20): typed >= 10x untyped, and >= 2x the plain loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
ARROW = "application/vnd.apache.arrow.stream"
SCHEMA = {"key": "int64", "value": "int64"}
ROWS = 100_000
TIMES = 10
KEYS = 1000
CLIENTS = 1
"""Sessions pushing at once, each its share of the bodies in time order (4 measured no
faster than 1 on this machine: the client and the server share its 2 CPUs)."""


def graph(typed: bool) -> dict[str, Any]:
    """The benchmark's graph, with or without the input's schema."""
    source: dict[str, Any] = {"op": "input"}
    if typed:
        source["schema"] = SCHEMA
    return {
        "nodes": {
            "rows": source,
            "doubled": {"op": "map", "expr": '{"key": r.key, "v": r.value * 2}'},
            "even": {"op": "filter", "expr": "r.key % 2 == 0"},
            "counted": {"op": "count_by", "key": "r.key"},
            "out": {"op": "output"},
        },
        "edges": [
            ["rows", "doubled"],
            ["doubled", "even"],
            ["even", "counted"],
            ["counted", "out"],
        ],
    }


def bodies(records: int) -> list[tuple[int, bytes]]:
    """``(time, Arrow IPC body)`` per push: records ``i`` at time ``i * TIMES // records``."""
    made = []
    for start in range(0, records, ROWS):
        count = min(ROWS, records - start)
        t = start * TIMES // records
        table = pa.table(
            {
                "time": pa.repeat(pa.scalar(t, pa.int64()), count),
                "key": pa.array(range(start, start + count), pa.int64()).to_numpy() % KEYS,
                "value": pa.array(range(start, start + count), pa.int64()),
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        made.append((t, sink.getvalue().to_pybytes()))
    return made


def plain_data(records: int) -> list[list[tuple[int, int]]]:
    """The records as the plain loop takes them: per time, a list of ``(key, value)``."""
    per: list[list[tuple[int, int]]] = [[] for _ in range(TIMES)]
    for i in range(records):
        per[i * TIMES // records].append((i % KEYS, i))
    return per


def plain(batches: list[list[tuple[int, int]]]) -> list[dict[int, int]]:
    """The graph's work as a plain loop: counts of the even keys per time."""
    result = []
    for batch in batches:
        counts: defaultdict[int, int] = defaultdict(int)
        for key, value in batch:
            doubled = value * 2  # noqa: F841  (the same work as the map)
            if key % 2 == 0:
                counts[key] += 1
        result.append(dict(counts))
    return result


class Server:
    """``python -m api serve`` on a free port of 127.0.0.1 with a data directory of its own."""

    def __init__(self, directory: Path) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--workers", "1", "--durability", "none"]
        command += ["--data-dir", str(directory), "--log-format", "text", "--access-log", "off"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{self.port}"

    async def ready(self, http: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                async with http.get(self.url + "/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def request(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None, arrow: bool = False
) -> Any:
    headers = {"Content-Type": ARROW if arrow else "application/json"}
    data = body if arrow else (None if body is None else orjson.dumps(body))
    async with http.request(method, url, data=data, headers=headers) as response:
        raw = await response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {url}: {response.status} {raw[:500]!r}")
        return orjson.loads(raw) if raw else None


async def run_server(
    http: aiohttp.ClientSession, server: Server, typed: bool, pushes: list[tuple[int, bytes]]
) -> tuple[float, list[dict[int, int]]]:
    """One run of the graph through the server: seconds, and the output's counts per time."""
    base = server.url + "/v1/dataflows"
    created = await request(http, "POST", base, {"graph": graph(typed)})
    df = f"{base}/{created['id']}"
    sessions = []
    for _ in range(CLIENTS):
        opened = await request(http, "POST", f"{df}/inputs/rows/sessions", {})
        sessions.append(f"{df}/inputs/rows/sessions/{opened['session']}")

    async def client(index: int, session: str) -> None:
        # Its share of the bodies, in time order, one after the other; then past the end.
        for seq, (_t, body) in enumerate(pushes[index::CLIENTS], 1):
            await request(http, "POST", f"{session}/push?seq={seq}", body, arrow=True)
        await request(http, "POST", f"{session}/advance", {"time": TIMES})

    start = time.perf_counter()
    await asyncio.gather(*(client(i, s) for i, s in enumerate(sessions)))
    while True:
        shown = await request(http, "GET", df)
        if shown["outputs"]["out"]["frontier"] == [TIMES]:
            break
        if shown["status"] == "failed":
            raise RuntimeError(shown["error"])
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - start
    counts: list[dict[int, int]] = [{} for _ in range(TIMES)]
    page = await request(http, "GET", f"{df}/outputs/out/times?limit=1000")
    for entry in page["times"]:
        for record in entry["records"]:
            counts[entry["time"]][record["key"]] = record["count"]
    if shown["record_errors"]:
        raise RuntimeError(f"records failed: {shown['record_errors']}")
    if typed:
        runs = {node: how["runs"] for node, how in shown["execution"].items()}
        assert set(runs.values()) == {"columns"}, runs
    await request(http, "DELETE", df)
    return elapsed, counts


async def main(args: argparse.Namespace) -> None:
    print(f"load average before: {os.getloadavg()}")
    pushes = bodies(args.records)
    data = plain_data(args.records)
    expected = plain(data)
    directory = Path(tempfile.mkdtemp(prefix="columnar-server-"))
    server = Server(directory)
    rates: dict[str, list[float]] = {"typed": [], "untyped": [], "plain": []}
    ratios: dict[str, list[float]] = {"typed/untyped": [], "typed/plain": []}
    try:
        timeout = aiohttp.ClientTimeout(total=3600)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            await server.ready(http)
            await run_server(http, server, True, bodies(ROWS * TIMES))  # warm up: imports, pools
            for round_ in range(args.rounds):
                typed, counts = await run_server(http, server, True, pushes)
                assert counts == expected, "typed: the counts differ from the plain loop's"
                untyped, counts = await run_server(http, server, False, pushes)
                assert counts == expected, "untyped: the counts differ from the plain loop's"
                start = time.perf_counter()
                assert plain(data) == expected
                looped = time.perf_counter() - start
                for name, seconds in (("typed", typed), ("untyped", untyped), ("plain", looped)):
                    rates[name].append(args.records / seconds)
                ratios["typed/untyped"].append(untyped / typed)
                ratios["typed/plain"].append(looped / typed)
                print(
                    f"round {round_ + 1}: typed {typed:.2f} s, untyped {untyped:.2f} s, "
                    f"plain {looped:.2f} s (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\n{args.records:,} records, {args.rounds} rounds, medians (min-max):")
    for name, values in rates.items():
        print(
            f"  {name:8} {statistics.median(values) / 1e6:6.2f} M records/s "
            f"({min(values) / 1e6:.2f}-{max(values) / 1e6:.2f})"
        )
    for name, values in ratios.items():
        target = 10.0 if name == "typed/untyped" else 2.0
        median = statistics.median(values)
        verdict = "met" if median >= target else "NOT met"
        print(
            f"  {name:14} {median:6.2f}x ({min(values):.2f}-{max(values):.2f}), "
            f"target >= {target}x: {verdict}"
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
