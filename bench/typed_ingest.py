"""Benchmark: HTTP and WebSocket ingest of Arrow batches into a typed input, with fsync.

Run by hand from the repository root:

    .venv/bin/python bench/typed_ingest.py                 # 5 rounds, 40 batches a client
    .venv/bin/python bench/typed_ingest.py --rounds 1 --batches 10   # a quick look

Two servers run in subprocesses on 127.0.0.1, each with a data directory of its own:

* **frontier**: ``python -m api serve --durability fsync`` (one worker) with a dataflow
  ``input (schema: key string, value int64) -> output``. Each client opens a session and
  pushes its batches, one Arrow IPC stream of ``--rows`` rows (``time, key, value``) each:
  over HTTP (``POST .../push?seq=``), or over the producer WebSocket as Arrow push frames
  (``seq`` in the stream's schema metadata), keeping ``--window`` frames unacknowledged.
  Every batch is checked against the schema, journaled (fsync'd, group commit) and sent into
  the dataflow as columns before its acknowledgement.
* **bare**: a bare aiohttp server (this file, ``--bare PORT DIR``) that only decodes the
  same Arrow bodies (``pa.ipc.open_stream(body).read_all()``), appends them to one file and
  fsyncs it (a group commit: one fsync in a thread for every body appended since the last)
  before answering a small JSON ack: over HTTP, and over a WebSocket with the same window.

``--clients`` clients (default 4) push at once; a round is one run of each of the four
(frontier/bare x HTTP/WebSocket), interleaved, and the figure is records per second over the
round's wall time. Medians over ``--rounds``, and the ratio frontier/bare per transport
(target >= 0.8); and each server's CPU time (user + system, from /proc) per batch, which a
busy machine does not skew as it does the rates. The machine's load average is printed
before and after.
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import orjson
import pyarrow as pa

SCHEMA = {"key": "string", "value": "int64"}
GRAPH = {
    "nodes": {"rows": {"op": "input", "schema": SCHEMA}, "out": {"op": "output"}},
    "edges": [["rows", "out"]],
}
ARROW = "application/vnd.apache.arrow.stream"
ROOT = Path(__file__).resolve().parents[1]


def body(rows: int, time: int, seq: int | None = None) -> bytes:
    """One Arrow IPC stream of ``rows`` rows at ``time`` (``seq`` in its metadata)."""
    table = pa.table(
        {
            "time": pa.nulls(rows, pa.int64()).fill_null(time),
            "key": pa.array([f"k{i % 64}" for i in range(rows)]),
            "value": pa.array(range(rows), pa.int64()),
        }
    )
    if seq is not None:
        table = table.replace_schema_metadata({"seq": str(seq)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


# --------------------------------------------------------------------------- the bare server


class GroupSync:
    """Appends bodies to one file; ``sync()`` waits for one fsync covering what it wrote."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("ab")
        self.waiting: list[asyncio.Future[None]] = []
        self.running = False
        self.task: asyncio.Task[None] | None = None

    async def append(self, data: bytes) -> None:
        self.file.write(data)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(done)
        if not self.running:
            self.running = True
            self.task = asyncio.ensure_future(self._sync())
        await done

    async def _sync(self) -> None:
        loop = asyncio.get_running_loop()
        while self.waiting:
            waiting, self.waiting = self.waiting, []
            self.file.flush()
            await loop.run_in_executor(None, os.fsync, self.file.fileno())
            for done in waiting:
                done.set_result(None)
        self.running = False


def bare_app(directory: Path) -> aiohttp.web.Application:
    from aiohttp import web

    log = GroupSync(directory / "bodies.log")

    def decode(data: bytes) -> int:
        return int(pa.ipc.open_stream(data).read_all().num_rows)

    async def push(request: web.Request) -> web.Response:
        data = await request.read()
        rows = decode(data)
        await log.append(data)
        return web.Response(body=orjson.dumps({"applied": rows}), content_type="application/json")

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=64 * 1024 * 1024)
        await ws.prepare(request)
        async for message in ws:
            rows = decode(message.data)
            await log.append(message.data)
            await ws.send_bytes(orjson.dumps({"type": "ack", "applied": rows}))
        return ws

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/push", push)
    app.router.add_get("/ws", socket)
    return app


def serve_bare(port: int, directory: Path) -> None:
    import uvloop
    from aiohttp import web

    uvloop.install()
    web.run_app(bare_app(directory), host="127.0.0.1", port=port, print=None)


# --------------------------------------------------------------------------- clients


async def http_client(url: str, bodies: list[bytes], path: Callable[[int], str]) -> None:
    async with aiohttp.ClientSession() as http:
        for seq, data in enumerate(bodies, start=1):
            async with http.post(url + path(seq), data=data, headers={"Content-Type": ARROW}) as r:
                assert r.status == 200, await r.text()
                await r.read()


async def ws_client(url: str, bodies: list[bytes], window: int, greeting: bool) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        if greeting:
            await ws.receive()  # the session frame
        sent = acked = 0
        while acked < len(bodies):
            while sent < len(bodies) and sent - acked < window:
                await ws.send_bytes(bodies[sent])
                sent += 1
            reply = orjson.loads((await ws.receive()).data)
            assert reply["type"] == "ack", reply
            acked += 1


async def timed(clients: list[Awaitable[None]]) -> float:
    start = time.perf_counter()
    await asyncio.gather(*clients)
    return time.perf_counter() - start


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    import urllib.request

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError as error:
            if getattr(error, "code", None) is not None:
                return  # any HTTP answer: it listens
            if process.poll() is not None:
                raise RuntimeError("the server exited at startup") from None
            time.sleep(0.05)
    raise RuntimeError(f"{url} was not ready in 30 s")


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system, all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Servers:
    """The frontier server and the bare one, each in a subprocess."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.frontier_port, self.bare_port = free_port(), free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        frontier = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1"]
        frontier += ["--port", str(self.frontier_port), "--durability", "fsync"]
        frontier += ["--data-dir", str(directory / "frontier"), "--workers", "1"]
        frontier += ["--log-format", "text"]
        (directory / "bare").mkdir()
        self.processes = [
            subprocess.Popen(
                frontier, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            ),
            subprocess.Popen(
                [sys.executable, __file__, "--bare", str(self.bare_port), str(directory / "bare")],
                cwd=ROOT,
                env=env,
            ),
        ]
        wait_ready(f"http://127.0.0.1:{self.frontier_port}/readyz", self.processes[0])
        wait_ready(f"http://127.0.0.1:{self.bare_port}/", self.processes[1])

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def frontier_round(
    port: int, transport: str, clients: int, batches: int, rows: int, window: int
) -> float:
    url = f"http://127.0.0.1:{port}"
    limits = {"max_batch_records": rows}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1/dataflows", data=orjson.dumps({"graph": GRAPH})) as r:
            created = await r.json()
        assert r.status == 201, (created, limits)
        df = created["id"]
        base = f"/v1/dataflows/{df}/inputs/rows"
        sessions = []
        if transport == "http":
            for _ in range(clients):
                async with http.post(url + base + "/sessions", data=b"{}") as r:
                    sessions.append((await r.json())["session"])
    bodies = [
        body(rows, t) if transport == "http" else body(rows, t, t + 1) for t in range(batches)
    ]
    if transport == "http":
        work = [
            http_client(url, bodies, lambda seq, s=s: f"{base}/sessions/{s}/push?seq={seq}")
            for s in sessions
        ]
    else:
        ws = f"ws://127.0.0.1:{port}{base}/push"
        work = [ws_client(ws, bodies, window, True) for _ in range(clients)]
    seconds = await timed(work)
    async with aiohttp.ClientSession() as http:
        async with http.get(url + base) as r:
            shown = await r.json()
        assert shown["records_in"] == clients * batches * rows, shown
        async with http.delete(f"{url}/v1/dataflows/{df}") as r:
            await r.read()
    return clients * batches * rows / seconds


async def bare_round(
    port: int, transport: str, clients: int, batches: int, rows: int, window: int
) -> float:
    url = f"http://127.0.0.1:{port}"
    bodies = [body(rows, t) for t in range(batches)]
    if transport == "http":
        work = [http_client(url, bodies, lambda _seq: "/push") for _ in range(clients)]
    else:
        work = [
            ws_client(f"ws://127.0.0.1:{port}/ws", bodies, window, False) for _ in range(clients)
        ]
    seconds = await timed(work)
    return clients * batches * rows / seconds


async def run(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="typed-ingest-"))
    servers = Servers(directory)
    figures: dict[str, list[float]] = {}
    try:
        shape = (args.clients, args.batches, args.rows, args.window)
        for transport in ("http", "ws"):  # warm-up, not counted
            await frontier_round(
                servers.frontier_port, transport, args.clients, 2, args.rows, args.window
            )
            await bare_round(servers.bare_port, transport, args.clients, 2, args.rows, args.window)
        ours_pid, bare_pid = (p.pid for p in servers.processes)
        batches = args.clients * args.batches
        for _ in range(args.rounds):
            for transport in ("http", "ws"):
                before = cpu_seconds(ours_pid)
                ours = await frontier_round(servers.frontier_port, transport, *shape)
                ours_cpu = (cpu_seconds(ours_pid) - before) / batches * 1e6
                before = cpu_seconds(bare_pid)
                bare = await bare_round(servers.bare_port, transport, *shape)
                bare_cpu = (cpu_seconds(bare_pid) - before) / batches * 1e6
                figures.setdefault(f"frontier {transport}", []).append(ours)
                figures.setdefault(f"bare {transport}", []).append(bare)
                figures.setdefault(f"ratio {transport}", []).append(ours / bare)
                figures.setdefault(f"cpu/batch frontier {transport}", []).append(ours_cpu)
                figures.setdefault(f"cpu/batch bare {transport}", []).append(bare_cpu)
    finally:
        servers.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bare", nargs=2, metavar=("PORT", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40, help="batches per client a round")
    parser.add_argument("--rows", type=int, default=10_000, help="rows per batch")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--window", type=int, default=4, help="unacknowledged WebSocket frames")
    args = parser.parse_args()
    if args.bare:
        serve_bare(int(args.bare[0]), Path(args.bare[1]))
        return
    print(f"load average before: {os.getloadavg()}")
    import uvloop

    figures = uvloop.run(run(args))
    print(f"load average after: {os.getloadavg()}")
    print(
        f"{args.clients} clients x {args.batches} batches x {args.rows} rows, {args.rounds} rounds"
    )
    for name, values in figures.items():
        unit = {"ratio": "", "cpu/b": " us"}.get(name[:5], " records/s")
        shown = ", ".join(f"{v:,.2f}" if unit == "" else f"{v:,.0f}" for v in values)
        print(f"{name:16s} median {statistics.median(values):,.2f}{unit}  ({shown})")


if __name__ == "__main__":
    main()
