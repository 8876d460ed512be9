"""Benchmark of the service over real sockets: ingestion, frontier latency, subscriber memory.

The server (``python -m api serve``) runs in a subprocess on 127.0.0.1 (a free port, 1 worker
unless ``--workers``); a *baseline* aiohttp server (this file, ``--baseline-server``) runs in
another subprocess, on uvloop like the service, and does nothing but what the comparison
needs. The clients are coroutines on one uvloop loop in this process. Both servers are
terminated at the end, whatever happens (and get SIGTERM if this process dies). The machine's
CPUs are shared by the server, the baseline server (idle while the server is measured, and
the other way round) and the client, which the header line says.

What it measures:

* **(a) HTTP ingestion.** 1,000,000 ``int`` records (record ``i`` is ``i``) in 1,000 batches
  of 1,000; batch ``b`` is at time ``b`` and carries ``seq = b + 1``. Every body
  ``{"seq", "records": [[t, r], ...]}`` is encoded with orjson before anything is timed. The
  dataflow is ``input -> map "r * 2" -> count_by key "r % 100" -> output``, a fresh one per
  run (created and dropped untimed). With 1 client, and with 4 concurrent clients (client
  ``c`` takes the batches ``b`` with ``b % 4 == c``); each client has its own aiohttp
  session (its own connection) and its own producer session (opened untimed), POSTs its
  batches one after another (one request in flight per client), then advances its session
  past the last time (1,000) and closes it. Timed from the first push until the dataflow's
  output frontier has passed the last time (``GET /v1/dataflows/{id}`` polled every 1 ms,
  only once every client is done, so polling does not compete with ingestion). Reported in
  records/s; the *drain* is the part after the last client's last answer. Beside it, in the
  same run: the baseline server answering the very same requests (same URLs shape, same
  bodies, same client code) with a handler that only reads the body, decodes it with
  ``orjson.loads`` and answers a small JSON (timed until the last answer). The figure is the
  ratio service / baseline (target >= 50%). Every service run is checked untimed: the input
  took every record, and the output's completed times (read back from
  ``/outputs/out/times``) hold exactly the expected count per key per time.

* **(b) WebSocket ingestion.** The same records, dataflow, clients and check, over
  ``/inputs/in/push``: each client opens the socket untimed (which opens its session and
  grants credits), then pipelines its pre-encoded ``push`` frames (binary) up to the credits
  it holds (one spent per frame sent, one returned per ack), then an ``advance`` past the
  last time and a ``close``, each also spending a credit. Timed as in (a). The baseline is
  an aiohttp WebSocket handler that grants the same credits, decodes each frame with orjson
  and acks it.

* **(c) Frontier latency.** A fresh dataflow (the same graph), one producer session over
  HTTP, and 1, then 1,000, WebSocket subscribers on ``/v1/dataflows/{id}/frontiers``, all
  opened from this process (aiohttp). Each round: 10 records are pushed at time ``t``
  (untimed, acknowledged), then the clock starts and ``POST .../advance {"time": t + 1}``
  is sent; a subscriber's latency is when its reader task has decoded the event saying the
  *output* frontier (``output:out``) is at ``t + 1`` or later -- the time is complete at the
  output, end to end. The input's event (``input:in``) is timed the same way and shown
  beside it, with the advance's own HTTP round trip. With 1,000 subscribers, a round's
  latency is the moment the *last* subscriber has the event; per-subscriber latencies (one
  sample per subscriber and round) are reported too. Rounds: 20 warm-up, then 300 per
  repeat; p50/p99/max per repeat. Baseline in the same run: the baseline server's fan-out
  (a POST whose handler sends one small frontier-shaped frame to each of its 1 or 1,000
  WebSocket subscribers, read by the same subscriber code), which is the floor of aiohttp
  plus this client reading 1,000 sockets on one loop (the client's own share of the
  latency, since the readers are timed when they have decoded the frame). The client's heap
  is collected and frozen (``gc.freeze``) before each run of rounds: a full collection of
  it (its 2,000 sockets, ~100 ms) would otherwise land in a round, service's or baseline's
  alike. Targets: p50 <= 1 ms and p99 <= 5 ms with 1 subscriber; p99 <= 50 ms (the last
  subscriber) with 1,000.

* **(d) Server memory per idle subscriber.** Each repeat starts both servers afresh for each
  kind of subscription (heap freed by the other sections, by an earlier repeat or by the
  other kind would absorb the new sockets and hide their cost). A dataflow with nothing
  pushed; the server's ``VmRSS`` (``/proc/<pid>/status``) is read, 1,000 WebSocket
  subscriptions to ``/outputs/out/events`` (then, on fresh servers, to ``/frontiers``) are
  opened (and left idle), and after 0.5 s it is read again: KiB per subscriber. The same for
  1,000 idle sockets on the baseline server (a handler that holds the socket open): aiohttp's
  own cost per connection. The subscriptions are then closed (the RSS freed by closing is
  shown too).

Each measurement is repeated (``--repeats``, default 3; ``--quick``: 1 repeat and small
sizes, well under 30 s), service and baseline runs interleave, and the median over repeats is
shown with the best in brackets. The CPU each process used during each timed ingestion run
is given as a share of one CPU (from ``/proc/<pid>/stat`` and ``os.times``): a server at
~100% is the bottleneck. A run that takes more than ``--timeout`` seconds is reported as a
hang, with the command lines to reproduce it. ``--profile PATH`` runs the service under
pyinstrument (``pip install pyinstrument``) and writes its text report to PATH at the end.

Run from the repository root::

    .venv/bin/python bench/service.py                      # full run, a few minutes
    .venv/bin/python bench/service.py --quick              # smoke run, < 30 s
    .venv/bin/python bench/service.py --only http,latency --json bench/results/service.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvloop
from aiohttp import web
from common import Stat, percentile, table  # bench/common.py (the script's folder)

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("http", "ws", "latency", "rss")

GRAPH: dict[str, Any] = {
    "nodes": {
        "in": {"op": "input"},
        "double": {"op": "map", "expr": "r * 2"},
        "count": {"op": "count_by", "key": "r % 100"},
        "out": {"op": "output"},
    },
    "edges": [["in", "double"], ["double", "count"], ["count", "out"]],
}

TARGET_INGEST_RATIO = 0.5  # service / baseline records/s
TARGET_P50_1_MS = 1.0
TARGET_P99_1_MS = 5.0
TARGET_P99_MANY_MS = 50.0
BASELINE_CREDITS = 16  # the service's default ws_credits
CONTENDED = 0.15  # other processes' CPU (share of one) above which a section is flagged
JSON_HEADERS = {"Content-Type": "application/json"}
clock = time.perf_counter_ns


# --------------------------------------------------------------------------- helpers


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


class Hang(RuntimeError):
    """A run did not finish within ``--timeout``."""


class Failure(RuntimeError):
    """A server answered something unexpected, or died."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the benchmark process dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ServerProcess:
    """A server in a subprocess: start, wait until it answers, read its RSS/CPU, stop."""

    def __init__(self, name: str, command: list[str], port: int, ready_path: str) -> None:
        self.name = name
        self.command = command
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ready_path = ready_path
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115  (closed in stop())
            prefix=f"bench-service-{name}-", suffix=".log", delete=False
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # no threads yet
        )
        self.pid = self.process.pid
        self._ticks = os.sysconf("SC_CLK_TCK")

    async def wait_ready(self, http: aiohttp.ClientSession, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(self.url + self.ready_path) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.05)
        raise Failure(f"the {self.name} server did not become ready in {timeout:g} s")

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise Failure(f"the {self.name} server exited with {code}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace").splitlines()
        return "\n".join("    " + line for line in text[-lines:])

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise Failure(f"no VmRSS for pid {self.pid}")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._ticks  # utime + stime

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuWatch:
    """How much CPU other processes took while a section ran (the machine is shared)."""

    def __init__(self, servers: Servers) -> None:
        self.servers = servers
        self.begin = self._sample()

    def _sample(self) -> tuple[float, float, float]:
        ours = self.servers.service.cpu_seconds() + self.servers.baseline.cpu_seconds()
        return time.monotonic(), busy_cpu_seconds(), ours + time.process_time()

    def others(self) -> float:
        """Other processes' CPU as a share of one CPU since the start."""
        wall, busy, ours = (b - a for a, b in zip(self.begin, self._sample(), strict=True))
        return max(0.0, (busy - ours) / max(wall, 1e-9))


class Servers:
    """The service and the baseline server (started at once), and the client for control.

    ``start`` starts both processes; ``close`` stops them and must follow in a ``finally``.
    """

    def __init__(
        self,
        http: aiohttp.ClientSession,
        workers: int,
        profile: Path | None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.http = http
        self.data_dir = tempfile.TemporaryDirectory(prefix="bench-service-data-")
        port, base_port = free_port(), free_port()
        serve = ["-m", "api", "serve", "--host", "127.0.0.1", "--port", str(port)]
        serve += ["--workers", str(workers), "--data-dir", self.data_dir.name, *extra]
        if profile is not None:
            serve = ["-m", "pyinstrument", "-r", "text", "-o", str(profile), *serve]
        baseline = [sys.executable, str(Path(__file__).resolve()), "--baseline-server"]
        baseline += ["--port", str(base_port)]
        self.service = ServerProcess("service", [sys.executable, *serve], port, "/readyz")
        try:
            self.baseline = ServerProcess("baseline", baseline, base_port, "/healthz")
        except BaseException:
            self.service.stop()
            raise

    async def wait_ready(self) -> None:
        await self.service.wait_ready(self.http)
        await self.baseline.wait_ready(self.http)

    def close(self) -> None:
        for server in (self.service, self.baseline):
            server.stop()
        self.data_dir.cleanup()

    def repro(self) -> str:
        return (
            f"  service:   {' '.join(self.service.command)}\n"
            f"  baseline:  {' '.join(self.baseline.command)}\n"
            f"  benchmark: {' '.join([sys.executable, *sys.argv])}"
        )


async def call(
    http: aiohttp.ClientSession, method: str, url: str, body: bytes | None = None, ok: int = 200
) -> Any:
    """One request; the decoded answer, or :class:`Failure` if the status is not ``ok``."""
    async with http.request(method, url, data=body, headers=JSON_HEADERS) as response:
        raw = await response.read()
        if response.status != ok:
            raise Failure(f"{method} {url}: {response.status} {raw[:500]!r}")
        return orjson.loads(raw) if raw else None


async def create_dataflow(servers: Servers) -> str:
    created = await call(
        servers.http,
        "POST",
        servers.service.url + "/v1/dataflows",
        orjson.dumps({"name": "bench", "graph": GRAPH}),
        ok=201,
    )
    dataflow: str = created["id"]
    return dataflow


async def drop_dataflow(servers: Servers, dataflow: str) -> None:
    await call(servers.http, "DELETE", f"{servers.service.url}/v1/dataflows/{dataflow}", ok=204)


def passed(frontier: list[Any], last: int) -> bool:
    return all(t > last for t in frontier)


# --------------------------------------------------------------------------- ingestion


@dataclass
class Workload:
    """The records, pre-encoded once: HTTP bodies and WebSocket frames, and the answer."""

    batches: int
    batch: int
    http_bodies: list[bytes]
    ws_frames: list[bytes]
    expected: dict[int, dict[int, int]]  # time -> key -> count

    @property
    def records(self) -> int:
        return self.batches * self.batch

    @property
    def last(self) -> int:
        return self.batches - 1


def make_workload(batches: int, batch: int) -> Workload:
    bodies: list[bytes] = []
    frames: list[bytes] = []
    expected: dict[int, dict[int, int]] = {}
    for b in range(batches):
        records = list(range(b * batch, (b + 1) * batch))
        pairs = [[b, r] for r in records]
        bodies.append(orjson.dumps({"seq": b + 1, "records": pairs}))
        frames.append(orjson.dumps({"type": "push", "seq": b + 1, "records": pairs}))
        expected[b] = dict(Counter((r * 2) % 100 for r in records))
    return Workload(batches, batch, bodies, frames, expected)


@dataclass
class Target:
    """Where one ingestion run sends: the service (with a dataflow) or the baseline."""

    url: str
    dataflow: str
    service: bool


@dataclass
class RunResult:
    elapsed_ns: int
    acked_ns: int
    server_cpu: float
    client_cpu: float


def input_path(target: Target) -> str:
    return f"{target.url}/v1/dataflows/{target.dataflow}/inputs/in"


async def http_client(
    http: aiohttp.ClientSession, session_url: str, bodies: list[bytes], end: bytes
) -> None:
    """Push every body, one request at a time, then advance past the end and close."""
    push = session_url + "/push"
    for body in bodies:
        async with http.post(push, data=body, headers=JSON_HEADERS) as response:
            raw = await response.read()
            if response.status != 200:
                raise Failure(f"push: {response.status} {raw[:500]!r}")
            orjson.loads(raw)
    await call(http, "POST", session_url + "/advance", end)
    await call(http, "DELETE", session_url)


async def ws_client(ws: aiohttp.ClientWebSocketResponse, credits: int, frames: list[bytes]) -> None:
    """Send every frame, never more than the credits held; wait for every ack."""
    sent = acked = 0
    total = len(frames)
    while acked < total:
        while credits > 0 and sent < total:
            await ws.send_bytes(frames[sent])
            sent += 1
            credits -= 1
        message = await ws.receive()
        if message.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
            raise Failure(f"the push socket ended: {message.type.name} {message.data!r}")
        frame = orjson.loads(message.data)
        if frame.get("type") != "ack":
            raise Failure(f"push socket: {frame}")
        acked += 1
        credits += 1
    await ws.close()


async def wait_output_passed(
    http: aiohttp.ClientSession, target: Target, last: int, server: ServerProcess
) -> None:
    url = f"{target.url}/v1/dataflows/{target.dataflow}"
    while True:
        async with http.get(url) as response:
            raw = await response.read()
            if response.status != 200:
                raise Failure(f"GET {url}: {response.status} {raw[:500]!r}")
            described = orjson.loads(raw)
        if passed(described["outputs"]["out"]["frontier"], last):
            return
        server.check_alive()
        await asyncio.sleep(0.001)


async def ingest(
    transport: str,
    target: Target,
    server: ServerProcess,
    workload: Workload,
    clients: int,
    batches: int,
) -> RunResult:
    """One run of ``batches`` batches split over ``clients``: set up untimed, then timed."""
    shares = [list(range(c, batches, clients)) for c in range(clients)]
    end_time = batches  # past the last time, batches - 1
    sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for _ in shares]
    try:
        jobs: list[Awaitable[None]] = []
        if transport == "http":
            end = orjson.dumps({"time": end_time})
            for http, share in zip(sessions, shares, strict=True):
                opened = await call(http, "POST", input_path(target) + "/sessions", b"{}", ok=201)
                url = f"{input_path(target)}/sessions/{opened['session']}"
                jobs.append(http_client(http, url, [workload.http_bodies[b] for b in share], end))
        else:
            for http, share in zip(sessions, shares, strict=True):
                ws = await http.ws_connect(input_path(target) + "/push", max_msg_size=0)
                first = orjson.loads((await ws.receive()).data)
                if first.get("type") != "session":
                    raise Failure(f"push socket opened with {first}")
                frames = [workload.ws_frames[b] for b in share]
                frames.append(
                    orjson.dumps({"type": "advance", "seq": batches + 1, "time": end_time})
                )
                frames.append(orjson.dumps({"type": "close"}))
                jobs.append(ws_client(ws, int(first["credits"]), frames))
        control = sessions[0]
        gc.collect()
        server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
        begin = clock()
        await asyncio.gather(*jobs)
        acked = clock()
        if target.service:
            await wait_output_passed(control, target, end_time - 1, server)
        finished = clock()
        wall = (finished - begin) / 1e9
        return RunResult(
            finished - begin,
            acked - begin,
            (server.cpu_seconds() - server_cpu) / wall,
            (time.process_time() - client_cpu) / wall,
        )
    finally:
        for http in sessions:
            await http.close()


async def check_output(servers: Servers, dataflow: str, workload: Workload, batches: int) -> None:
    """Untimed: every record went in, and every completed time holds the expected counts."""
    base = f"{servers.service.url}/v1/dataflows/{dataflow}"
    described = await call(servers.http, "GET", base)
    records_in = described["inputs"]["in"]["records_in"]
    if records_in != batches * workload.batch:
        raise AssertionError(f"the input took {records_in} records, not {batches * workload.batch}")
    seen: dict[int, dict[int, int]] = {}
    params = "limit=1000"
    while True:
        page = await call(servers.http, "GET", f"{base}/outputs/out/times?{params}")
        for entry in page["times"]:
            seen[entry["time"]] = {r["key"]: r["count"] for r in entry["records"]}
        if page["next_cursor"] is None:
            break
        params = f"limit=1000&cursor={page['next_cursor']}"
    expected = {t: workload.expected[t] for t in range(batches)}
    if seen != expected:
        wrong = sorted(set(seen) ^ set(expected)) or [t for t in expected if seen[t] != expected[t]]
        raise AssertionError(f"the output differs from the expected counts at times {wrong[:5]}")


def record_work_ns(transport: str, workload: Workload) -> tuple[float, float]:
    """ns per record, in this process with no server and no engine: decoding the bodies with
    orjson (all the baseline does), and the work the service cannot avoid for this dataflow
    (decoding and checking the bodies in bulk as the service's fast path does, the two
    compiled expressions over each batch, counting keys). Best of 3 passes over the
    workload, with the GC set as the server sets it.
    """
    # Imported here: only this measurement needs the repository's modules.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from api.models import plain_push
    from operators.graph.cel import compile_expression

    double = compile_expression("r * 2", batch=("map",)).batch["map"]
    key = compile_expression("r % 100", batch=("key",)).batch["key"]
    bodies = workload.http_bodies if transport == "http" else workload.ws_frames
    frame = transport != "http"

    def needed(body: bytes) -> None:
        checked = plain_push(body, frame)  # decoded and checked in bulk, as the service does
        assert checked is not None
        Counter(key(double(list(checked.records))))

    def best(work: Callable[[bytes], object]) -> float:
        passes = []
        for _ in range(3):
            began = time.perf_counter_ns()
            for body in bodies:
                work(body)
            passes.append(time.perf_counter_ns() - began)
        return min(passes) / workload.records

    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)  # as `frontier serve` sets it
    try:
        return best(orjson.loads), best(needed)
    finally:
        gc.set_threshold(*thresholds)


async def run_ingestion(
    transport: str, servers: Servers, workload: Workload, repeats: int, timeout: float
) -> dict[str, Any]:
    label = "HTTP" if transport == "http" else "WebSocket"
    configs = (1, 4)
    rates = {(who, c): Stat(True) for who in ("service", "baseline") for c in configs}
    acked = {c: Stat(True) for c in configs}
    drain = {c: Stat() for c in configs}
    cpu: dict[tuple[str, int], dict[str, list[float]]] = {
        key: {"server": [], "client": []} for key in rates
    }
    baseline_target = Target(servers.baseline.url, "baseline", service=False)

    async def service_run(clients: int, batches: int) -> RunResult:
        dataflow = await create_dataflow(servers)
        target = Target(servers.service.url, dataflow, service=True)
        try:
            async with asyncio.timeout(timeout):
                result = await ingest(
                    transport, target, servers.service, workload, clients, batches
                )
        except TimeoutError:
            raise Hang(
                f"{label} ingestion into the service with {clients} client(s) did not finish "
                f"within {timeout:g} s (dataflow {dataflow})"
            ) from None
        await check_output(servers, dataflow, workload, batches)
        await drop_dataflow(servers, dataflow)
        return result

    async def baseline_run(clients: int, batches: int) -> RunResult:
        try:
            async with asyncio.timeout(timeout):
                return await ingest(
                    transport,
                    baseline_target,
                    servers.baseline,
                    workload,
                    clients,
                    batches,
                )
        except TimeoutError:
            raise Hang(
                f"{label} ingestion into the baseline with {clients} client(s) did not finish "
                f"within {timeout:g} s"
            ) from None

    warm = max(8, workload.batches // 20)
    for clients in configs:  # warm-up, untimed
        await service_run(clients, warm)
        await baseline_run(clients, warm)
    for _ in range(repeats):
        for clients in configs:
            for who, run in (("service", service_run), ("baseline", baseline_run)):
                result = await run(clients, workload.batches)
                rates[who, clients].values.append(workload.records / (result.elapsed_ns / 1e9))
                cpu[who, clients]["server"].append(result.server_cpu)
                cpu[who, clients]["client"].append(result.client_cpu)
                if who == "service":
                    acked[clients].values.append(workload.records / (result.acked_ns / 1e9))
                    drain[clients].values.append((result.elapsed_ns - result.acked_ns) / 1e6)

    decode_ns, needed_ns = record_work_ns(transport, workload)
    rows = []
    ratios: dict[int, float] = {}
    for clients in configs:
        service, baseline = rates["service", clients], rates["baseline", clients]
        ratios[clients] = service.median / baseline.median
        for who, stat in (("service", service), ("baseline", baseline)):
            share = cpu[who, clients]
            rows.append(
                [
                    f"{clients} client{'s' if clients > 1 else ''}, {who}",
                    stat.show(1e6, 3),
                    f"{stat.median / baseline.median:.0%}",
                    acked[clients].show(1e6, 3) if who == "service" else "-",
                    drain[clients].show(1.0, 1) if who == "service" else "-",
                    f"{statistics.median(share['server']):.0%}",
                    f"{statistics.median(share['client']):.0%}",
                ]
            )
    text = [
        f"({'a' if transport == 'http' else 'b'}) {label} ingestion: {workload.records:,} int "
        f"records in {workload.batches:,} batches of {workload.batch:,} (batch b at time b), "
        f"input -> map r*2 -> count_by r%100 -> output; M records/s, median (best) of "
        f"{repeats}, timed until the output frontier passed {workload.last}; output verified "
        "each run",
        table(
            ["", "M records/s", "/ baseline", "acked M/s", "drain ms", "server CPU", "client CPU"],
            rows,
        ),
        f"record work measured in this process, no server, no engine: orjson decode (all the "
        f"baseline does) {decode_ns:.0f} ns/record; what this dataflow needs at least "
        f"(decode and check, r*2 and r%100 over each batch, count) {needed_ns:.0f} ns/record "
        "(in this process's heap and caches: a guide to how much of the gap is record work, "
        "not a bound)",
    ]
    met = {c: ratios[c] >= TARGET_INGEST_RATIO for c in configs}
    targets = [
        f"({'a' if transport == 'http' else 'b'}) {label} ingestion >= "
        f"{TARGET_INGEST_RATIO:.0%} of the baseline, {c} client{'s' if c > 1 else ''}: "
        f"{verdict(met[c])} ({ratios[c]:.1%}: "
        f"{rates['service', c].median / 1e6:.3f}M vs {rates['baseline', c].median / 1e6:.3f}M "
        "records/s)"
        for c in configs
    ]
    document = {
        "records": workload.records,
        "batch": workload.batch,
        "records_per_s": {
            f"{who}_{c}_clients": rates[who, c].as_json()
            for who in ("service", "baseline")
            for c in configs
        },
        "acked_records_per_s": {f"service_{c}_clients": acked[c].as_json() for c in configs},
        "drain_ms": {f"service_{c}_clients": drain[c].as_json() for c in configs},
        "cpu_share": {f"{who}_{c}_clients": cpu[who, c] for who, c in cpu},
        "ratio": {f"{c}_clients": ratios[c] for c in configs},
        "record_work_ns": {"decode": decode_ns, "needed": needed_ns},
        "targets": {"ratio": TARGET_INGEST_RATIO, "met": {f"{c}_clients": met[c] for c in configs}},
    }
    return {"text": text, "targets": targets, "json": document}


# --------------------------------------------------------------------------- latency


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """This process's heap collected, then frozen (``gc.freeze``) for the block.

    The client holds 2,000 sockets; a full collection of its heap takes ~100 ms, and lands
    in whichever round it happens to start in (the servers are left as they are).
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class Subscribers:
    """WebSocket subscribers to frontier events, timing when each sees a round's event."""

    def __init__(self, out_location: str, in_location: str | None) -> None:
        self.out_location = out_location
        self.in_location = in_location
        self.sockets: list[aiohttp.ClientWebSocketResponse] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.ready = 0
        self.all_ready = asyncio.Event()
        self.expected: int | None = None
        self.round = 0
        self.begin = 0
        self.out_samples: list[int] = []
        self.in_samples: list[int] = []
        self.out_done = asyncio.Event()
        self.in_done = asyncio.Event()
        self.failure: str | None = None

    @property
    def count(self) -> int:
        return len(self.sockets)

    async def open(self, http: aiohttp.ClientSession, url: str, n: int, chunk: int = 50) -> None:
        async def one() -> None:
            ws = await http.ws_connect(url, max_msg_size=0)
            self.sockets.append(ws)
            self.tasks.append(asyncio.ensure_future(self._read(ws)))

        while self.count < n:
            await asyncio.gather(*(one() for _ in range(min(chunk, n - self.count))))
        async with asyncio.timeout(30):
            await self.all_ready.wait()

    async def close(self) -> None:
        for i in range(0, len(self.sockets), 100):
            await asyncio.gather(*(ws.close() for ws in self.sockets[i : i + 100]))
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.sockets.clear()
        self.tasks.clear()

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        ready = False
        out_round = in_round = 0
        async for message in ws:
            now = clock()
            if message.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                break
            event = orjson.loads(message.data)
            if event.get("type") != "frontier":
                self.failure = f"a subscriber got {event}"
                self.out_done.set()
                break
            location, frontier = event["location"], event["frontier"]
            if location == self.out_location:
                if not ready:
                    ready = True
                    self.ready += 1
                    if self.ready == self.count:
                        self.all_ready.set()
                expected = self.expected
                if (
                    expected is not None
                    and out_round != self.round
                    and passed(frontier, expected - 1)
                ):
                    out_round = self.round
                    self.out_samples.append(now - self.begin)
                    if len(self.out_samples) == self.count:
                        self.out_done.set()
            elif location == self.in_location:
                expected = self.expected
                if (
                    expected is not None
                    and in_round != self.round
                    and passed(frontier, expected - 1)
                ):
                    in_round = self.round
                    self.in_samples.append(now - self.begin)
                    if len(self.in_samples) == self.count:
                        self.in_done.set()

    async def measure(
        self, expected: int, trigger: Callable[[], Awaitable[Any]], timeout: float
    ) -> tuple[list[int], list[int], int]:
        """One round: per-subscriber ns to the output (and input) event; the trigger's ns."""
        self.out_samples, self.in_samples = [], []
        self.out_done.clear()
        self.in_done.clear()
        self.round += 1
        self.expected = expected
        self.begin = clock()
        try:
            async with asyncio.timeout(timeout):
                await trigger()
                answered = clock() - self.begin
                await self.out_done.wait()
                if self.in_location is not None:
                    await self.in_done.wait()
        except TimeoutError:
            raise Hang(
                f"round to time {expected}: {len(self.out_samples)} of {self.count} subscribers "
                f"had the output event after {timeout:g} s"
            ) from None
        finally:
            self.expected = None
        if self.failure is not None:
            raise Failure(self.failure)
        return self.out_samples, self.in_samples, answered


@dataclass
class Latencies:
    p50: Stat = field(default_factory=Stat)
    p99: Stat = field(default_factory=Stat)
    max: Stat = field(default_factory=Stat)

    def add(self, samples: list[int]) -> None:
        ordered = sorted(samples)
        self.p50.values.append(percentile(ordered, 0.50) / 1e6)
        self.p99.values.append(percentile(ordered, 0.99) / 1e6)
        self.max.values.append(ordered[-1] / 1e6)

    def row(self, name: str) -> list[str]:
        if not self.p50.values:
            return [name, "-", "-", "-"]
        return [name, self.p50.show(1, 3), self.p99.show(1, 3), self.max.show(1, 3)]

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k).as_json() for k in ("p50", "p99", "max")}


@dataclass
class LatencyRuns:
    last_out: Latencies = field(default_factory=Latencies)
    each_out: Latencies = field(default_factory=Latencies)
    last_in: Latencies = field(default_factory=Latencies)
    each_in: Latencies = field(default_factory=Latencies)
    answered: Latencies = field(default_factory=Latencies)

    def add(self, rounds: list[tuple[list[int], list[int], int]]) -> None:
        self.last_out.add([max(out) for out, _, _ in rounds])
        self.each_out.add([s for out, _, _ in rounds for s in out])
        if rounds[0][1]:
            self.last_in.add([max(inp) for _, inp, _ in rounds])
            self.each_in.add([s for _, inp, _ in rounds for s in inp])
        self.answered.add([a for _, _, a in rounds])

    def as_json(self) -> dict[str, Any]:
        return {
            "last_subscriber_output_event_ms": self.last_out.as_json(),
            "per_subscriber_output_event_ms": self.each_out.as_json(),
            "last_subscriber_input_event_ms": self.last_in.as_json(),
            "per_subscriber_input_event_ms": self.each_in.as_json(),
            "trigger_http_round_trip_ms": self.answered.as_json(),
        }


class LatencyRounds:
    """One subscriber count: a fresh dataflow and producer session, the service's and the
    baseline's subscribers, and the rounds that time them."""

    def __init__(self, servers: Servers, timeout: float) -> None:
        self.http = servers.http
        self.service_url = servers.service.url
        self.baseline_url = servers.baseline.url
        self.timeout = timeout
        self.engine = Subscribers("output:out", "input:in")
        self.floor = Subscribers("output:out", None)
        self.subscribers = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self.session_url = ""
        self.time = 0
        self.seq = 0

    async def open(self, dataflow: str, n: int) -> None:
        base = f"{self.service_url}/v1/dataflows/{dataflow}"
        opened = await call(self.http, "POST", f"{base}/inputs/in/sessions", b"{}", ok=201)
        self.session_url = f"{base}/inputs/in/sessions/{opened['session']}"
        await self.engine.open(self.subscribers, f"{base}/frontiers", n)
        await self.floor.open(self.subscribers, f"{self.baseline_url}/fanout/ws", n)

    async def close(self) -> None:
        await self.engine.close()
        await self.floor.close()
        await self.subscribers.close()

    async def service_round(self) -> tuple[list[int], list[int], int]:
        t = self.time
        self.seq += 1
        body = orjson.dumps({"seq": self.seq, "records": [[t, t * 10 + i] for i in range(10)]})
        await call(self.http, "POST", self.session_url + "/push", body)
        advance = orjson.dumps({"time": t + 1})
        url = self.session_url + "/advance"
        self.time = t + 1
        return await self.engine.measure(
            t + 1, lambda: call(self.http, "POST", url, advance), self.timeout
        )

    async def baseline_round(self) -> tuple[list[int], list[int], int]:
        self.time += 1
        url = f"{self.baseline_url}/fanout/{self.time}"
        return await self.floor.measure(
            self.time, lambda: call(self.http, "POST", url), self.timeout
        )


async def run_latency(
    servers: Servers,
    counts: tuple[int, ...],
    rounds: int,
    warmup: int,
    repeats: int,
    timeout: float,
) -> dict[str, Any]:
    results: dict[int, tuple[LatencyRuns, LatencyRuns]] = {}
    for n in counts:
        dataflow = await create_dataflow(servers)
        measured = LatencyRounds(servers, timeout)
        try:
            await measured.open(dataflow, n)
            for _ in range(warmup):
                await measured.service_round()
                await measured.baseline_round()
            service, baseline = LatencyRuns(), LatencyRuns()
            for _ in range(repeats):
                with frozen_heap():
                    service.add([await measured.service_round() for _ in range(rounds)])
                with frozen_heap():
                    baseline.add([await measured.baseline_round() for _ in range(rounds)])
            results[n] = (service, baseline)
        finally:
            await measured.close()
        await drop_dataflow(servers, dataflow)

    text = [
        f"(c) frontier latency: POST .../advance to time t+1 (after an untimed push of 10 "
        f"records at t) until a /frontiers subscriber has decoded the event; {rounds} rounds "
        f"per repeat after {warmup} warm-up; ms, median (best) of {repeats}"
    ]
    targets: list[str] = []
    document: dict[str, Any] = {"rounds": rounds, "warmup_rounds": warmup}
    for n, (service, baseline) in results.items():
        many = n > 1
        rows = [
            service.last_out.row("service: output event" + (", last subscriber" if many else "")),
        ]
        if many:
            rows.append(service.each_out.row("service: output event, per subscriber"))
        rows.append(service.last_in.row("service: input event" + (", last" if many else "")))
        rows.append(service.answered.row("service: advance HTTP round trip"))
        rows.append(
            baseline.last_out.row("baseline fan-out" + (", last subscriber" if many else ""))
        )
        if many:
            rows.append(baseline.each_out.row("baseline fan-out, per subscriber"))
        rows.append(baseline.answered.row("baseline: POST round trip"))
        text.append(f"{n:,} subscriber{'s' if many else ''}:")
        text.append(table(["", "p50 ms", "p99 ms", "max ms"], rows))
        p50, p99 = service.last_out.p50.median, service.last_out.p99.median
        if many:
            met = p99 <= TARGET_P99_MANY_MS
            targets.append(
                f"(c) p99 <= {TARGET_P99_MANY_MS:g} ms with {n:,} subscribers (last subscriber): "
                f"{verdict(met)} ({p99:.2f} ms; per subscriber p99 "
                f"{service.each_out.p99.median:.2f} ms; baseline fan-out p99 "
                f"{baseline.last_out.p99.median:.2f} ms)"
            )
            document[f"{n}_subscribers"] = {
                "service": service.as_json(),
                "baseline": baseline.as_json(),
                "targets": {"p99_ms": TARGET_P99_MANY_MS, "met": met},
            }
        else:
            met50, met99 = p50 <= TARGET_P50_1_MS, p99 <= TARGET_P99_1_MS
            targets.append(
                f"(c) p50 <= {TARGET_P50_1_MS:g} ms with 1 subscriber: {verdict(met50)} "
                f"({p50:.3f} ms)"
            )
            targets.append(
                f"(c) p99 <= {TARGET_P99_1_MS:g} ms with 1 subscriber: {verdict(met99)} "
                f"({p99:.3f} ms)"
            )
            document["1_subscriber"] = {
                "service": service.as_json(),
                "baseline": baseline.as_json(),
                "targets": {
                    "p50_ms": TARGET_P50_1_MS,
                    "p99_ms": TARGET_P99_1_MS,
                    "p50_met": met50,
                    "p99_met": met99,
                },
            }
    return {"text": text, "targets": targets, "json": document}


# --------------------------------------------------------------------------- memory


async def open_idle(
    http: aiohttp.ClientSession, url: str, n: int, chunk: int = 50
) -> list[aiohttp.ClientWebSocketResponse]:
    sockets: list[aiohttp.ClientWebSocketResponse] = []
    while len(sockets) < n:
        sockets.extend(
            await asyncio.gather(
                *(http.ws_connect(url, max_msg_size=0) for _ in range(min(chunk, n - len(sockets))))
            )
        )
    return sockets


RSS_PLACES = {
    "events": "service: /outputs/out/events",
    "frontiers": "service: /frontiers",
    "baseline": "baseline: a held WebSocket",
}


async def rss_once(servers: Servers, n: int, endpoint: str) -> dict[str, tuple[int, int, int]]:
    """On fresh servers: (RSS before, with ``n`` idle subscribers, after closing) in KiB, for
    the service's ``endpoint`` (``events`` or ``frontiers``) and the baseline."""
    dataflow = await create_dataflow(servers)
    base = f"{servers.service.url}/v1/dataflows/{dataflow}"
    path = "/outputs/out/events" if endpoint == "events" else "/frontiers"
    places = {
        endpoint: (servers.service, base + path),
        "baseline": (servers.baseline, f"{servers.baseline.url}/idle/ws"),
    }
    found: dict[str, tuple[int, int, int]] = {}
    for who, (server, url) in places.items():
        http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        try:
            await asyncio.sleep(0.5)
            rss0 = server.rss_kib()
            sockets = await open_idle(http, url, n)
            await asyncio.sleep(0.5)
            rss1 = server.rss_kib()
            for i in range(0, n, 100):
                await asyncio.gather(*(ws.close() for ws in sockets[i : i + 100]))
            await asyncio.sleep(0.5)
            found[who] = (rss0, rss1, server.rss_kib())
        finally:
            await http.close()
    await drop_dataflow(servers, dataflow)
    return found


async def run_rss(
    http: aiohttp.ClientSession, workers: int, n: int, repeats: int
) -> tuple[dict[str, Any], bool]:
    """(d), each repeat and each kind of subscription on freshly started servers: memory
    freed by earlier work (or an earlier repeat) would otherwise absorb the subscriptions and
    hide their cost. The baseline is measured beside each (so twice per repeat)."""
    per = {who: Stat() for who in RSS_PLACES}
    before = {who: Stat() for who in RSS_PLACES}
    after = {who: Stat() for who in RSS_PLACES}
    released = {who: Stat() for who in RSS_PLACES}
    others: list[float] = []
    for _ in range(repeats):
        for endpoint in ("events", "frontiers"):
            servers = Servers(http, workers, None)
            try:
                await servers.wait_ready()
                watch = CpuWatch(servers)
                found = await rss_once(servers, n, endpoint)
                others.append(watch.others())
            except (Hang, Failure, AssertionError, aiohttp.ClientError, OSError) as problem:
                return failure_result("rss", problem, servers), True
            finally:
                servers.close()
            for who, (rss0, rss1, rss2) in found.items():
                per[who].values.append((rss1 - rss0) / n)
                before[who].values.append(rss0 / 1024)
                after[who].values.append(rss1 / 1024)
                released[who].values.append((rss1 - rss2) / 1024)
    rows = [
        [
            name,
            per[who].show(1, 1),
            before[who].show(1, 1),
            after[who].show(1, 1),
            released[who].show(1, 1),
        ]
        for who, name in RSS_PLACES.items()
    ]
    text = [
        f"(d) server RSS per idle subscriber: VmRSS before and 0.5 s after opening {n:,} idle "
        f"WebSocket subscriptions, on freshly started servers (for each kind); median (min) of "
        f"{repeats} (baseline: of {2 * repeats})",
        table(
            ["", "KiB / subscriber", "RSS before MiB", "RSS after MiB", "freed on close MiB"], rows
        ),
    ]
    floor = per["baseline"].median
    targets = [
        f"(d) server RSS per idle output subscriber: {per['events'].median:.1f} KiB, per idle "
        f"frontier subscriber: {per['frontiers'].median:.1f} KiB (baseline aiohttp socket "
        f"{floor:.1f} KiB; no target set)"
    ]
    document = {
        "subscribers": n,
        "kib_per_subscriber": {who: per[who].as_json() for who in per},
        "rss_before_mib": {who: before[who].as_json() for who in per},
        "rss_after_mib": {who: after[who].as_json() for who in per},
        "freed_on_close_mib": {who: released[who].as_json() for who in per},
    }
    result = {"text": text, "targets": targets, "json": document}
    contention(result, statistics.fmean(others))
    return result, False


# --------------------------------------------------------------------------- baseline server


def baseline_server(port: int) -> None:
    """The baseline: aiohttp on uvloop doing only what the comparison needs."""
    fanout: list[web.WebSocketResponse] = []

    def answer(value: Any) -> web.Response:
        return web.Response(body=orjson.dumps(value), content_type="application/json")

    async def anything(request: web.Request) -> web.Response:
        body = await request.read()
        value = orjson.loads(body) if body else None
        if request.method == "GET":
            return answer({"status": "ok"})
        if request.path.endswith("/sessions"):
            return web.Response(
                status=201,
                body=orjson.dumps({"session": "baseline", "time": 0}),
                content_type="application/json",
            )
        seq = value.get("seq") if isinstance(value, dict) else None
        records = value.get("records", ()) if isinstance(value, dict) else ()
        return answer(
            {"seq": seq, "session_time": 0, "input_frontier": [0], "applied": len(records)}
        )

    async def push(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        session = {"type": "session", "session": "baseline", "time": 0, "credits": BASELINE_CREDITS}
        await ws.send_bytes(orjson.dumps(session))
        async for message in ws:
            if message.type not in (web.WSMsgType.TEXT, web.WSMsgType.BINARY):
                continue
            frame = orjson.loads(message.data)
            if frame.get("type") == "close":
                last: dict[str, Any] = {"type": "ack", "seq": None, "session_time": None}
                last.update(input_frontier=[0], applied=0, credits=0)
                await ws.send_bytes(orjson.dumps(last))
                await ws.close()
                break
            ack: dict[str, Any] = {"type": "ack", "seq": frame.get("seq"), "session_time": 0}
            ack.update(input_frontier=[0], applied=len(frame.get("records", ())))
            ack["credits"] = BASELINE_CREDITS
            await ws.send_bytes(orjson.dumps(ack))
        return ws

    async def subscribe(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        await ws.send_bytes(
            orjson.dumps({"type": "frontier", "location": "output:out", "frontier": [0]})
        )
        fanout.append(ws)
        try:
            async for _message in ws:
                pass
        finally:
            fanout.remove(ws)
        return ws

    async def publish(request: web.Request) -> web.Response:
        t = int(request.match_info["t"])
        frame = orjson.dumps({"type": "frontier", "location": "output:out", "frontier": [t]})
        for ws in fanout.copy():
            await ws.send_bytes(frame)
        return answer({"sent": len(fanout)})

    async def idle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        async for _message in ws:
            pass
        return ws

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/v1/dataflows/{id}/inputs/{input}/push", push)
    app.router.add_get("/fanout/ws", subscribe)
    app.router.add_post("/fanout/{t}", publish)
    app.router.add_get("/idle/ws", idle)
    app.router.add_route("*", "/{tail:.*}", anything)
    web.run_app(
        app,
        host="127.0.0.1",
        port=port,
        loop=uvloop.new_event_loop(),
        access_log=None,
        print=None,
        shutdown_timeout=5.0,
    )


# --------------------------------------------------------------------------- driver


def failure_result(name: str, problem: BaseException, servers: Servers) -> dict[str, Any]:
    kind = "HANG" if isinstance(problem, Hang) else "FAILED"
    text = [
        f"{name}: {kind}: {type(problem).__name__}: {problem}",
        "to reproduce (the servers as this run started them):",
        servers.repro(),
    ]
    text.extend(
        f"{server.name} server log:\n{server.log_tail()}"
        for server in (servers.service, servers.baseline)
        if server.process.poll() is not None
    )
    return {"text": text, "targets": [f"{name}: {kind}"], "json": {"error": f"{kind}: {problem}"}}


async def run_section(
    name: str, servers: Servers, args: argparse.Namespace, repeats: int, workload: Workload | None
) -> dict[str, Any]:
    timeout = args.timeout or (30.0 if args.quick else 120.0)
    subscribers = 100 if args.quick else 1000
    if name in ("http", "ws"):
        assert workload is not None
        return await run_ingestion(name, servers, workload, repeats, timeout)
    assert name == "latency", name
    rounds, warmup = (50, 10) if args.quick else (300, 20)
    return await run_latency(servers, (1, subscribers), rounds, warmup, repeats, timeout)


async def run_all(
    args: argparse.Namespace, chosen: list[str], repeats: int
) -> tuple[dict[str, Any], bool]:
    batches = 100 if args.quick else 1000
    workload = make_workload(batches, 1000) if {"http", "ws"} & set(chosen) else None
    results: dict[str, Any] = {}
    failed = False
    started = time.perf_counter()
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    try:
        shared = [name for name in chosen if name != "rss"]  # (d) starts servers of its own
        if shared:
            extra = () if args.durability is None else ("--durability", args.durability)
            servers = Servers(http, args.workers, args.profile, extra)
            try:
                await servers.wait_ready()
                service = servers.service
                cpu0, wall0 = service.cpu_seconds(), time.monotonic()
                await asyncio.sleep(1.0)
                idle = (service.cpu_seconds() - cpu0) / (time.monotonic() - wall0)
                print(
                    f"service pid {service.pid} (idle: {idle:.0%} CPU, RSS "
                    f"{service.rss_kib() / 1024:.1f} MiB), baseline pid {servers.baseline.pid}",
                    flush=True,
                )
                for name in shared:
                    watch = CpuWatch(servers)
                    try:
                        results[name] = await run_section(name, servers, args, repeats, workload)
                    except (Hang, Failure, AssertionError, aiohttp.ClientError, OSError) as error:
                        failed = True
                        results[name] = failure_result(name, error, servers)
                    contention(results[name], watch.others())
                    show(name, results[name], started)
                    if service.process.poll() is not None:
                        break
            finally:
                servers.close()
        if "rss" in chosen:
            subscribers = 100 if args.quick else 1000
            results["rss"], broke = await run_rss(http, args.workers, subscribers, repeats)
            failed = failed or broke
            show("rss", results["rss"], started)
    finally:
        await http.close()
    return results, failed


def contention(result: dict[str, Any], others: float) -> None:
    """Note how much CPU other processes took during a section."""
    result["others_cpu_share"] = others
    line = (
        f"other processes on the machine used {others:.0%} of a CPU during this section "
        f"(of {len(os.sched_getaffinity(0))})"
    )
    if others > CONTENDED:
        line = f"NOTE: {line}: the figures are contended (noisy, latency tails above all)"
    result["text"].append(line)


def show(name: str, result: dict[str, Any], started: float) -> None:
    elapsed = time.perf_counter() - started
    print(f"  {name} done ({elapsed:.0f} s)", file=sys.stderr, flush=True)
    print()
    print("\n".join(result["text"]), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat, small sizes")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help="a subset of " + ",".join(SECTIONS)
    )
    parser.add_argument("--repeats", type=int, help="repeats per measurement (default 3)")
    parser.add_argument("--workers", type=int, default=1, help="the service's workers (default 1)")
    parser.add_argument(
        "--timeout", type=float, help="seconds before a run is a hang (120; quick 30)"
    )
    parser.add_argument(
        "--profile", type=Path, help="run the service under pyinstrument, report to PATH"
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON to PATH")
    parser.add_argument(
        "--durability",
        choices=("fsync", "group", "none"),
        help="the service's --durability (default: the server's own default)",
    )
    parser.add_argument("--baseline-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.baseline_server:
        baseline_server(args.port)
        return 0

    chosen = [s.strip().lower() for s in args.only.split(",") if s.strip()]
    if not chosen or any(s not in SECTIONS for s in chosen):
        parser.error(f"--only takes a comma-separated subset of {','.join(SECTIONS)}")
    repeats = args.repeats or (1 if args.quick else 3)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    cpus = len(os.sched_getaffinity(0))
    print(
        f"service benchmark: {','.join(chosen)}, {repeats} repeat(s)"
        f"{', quick sizes' if args.quick else ''}; {args.workers} service worker(s); "
        f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}, uvloop "
        f"{uvloop.__version__} on {platform.machine()}; {cpus} CPUs shared by the service, the "
        f"baseline server and this client (all on loopback); load average "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    try:
        results, failed = uvloop.run(run_all(args, chosen, repeats))
    except Failure as problem:  # a server did not start
        print(f"FAILED: {problem}", flush=True)
        return 1
    print()
    for name in chosen:
        for line in results.get(name, {}).get("targets", []):
            print(line, flush=True)
    print(
        f"(all on {cpus} CPUs shared by the service, the baseline server and the client; load "
        f"average {os.getloadavg()[0]:.2f} at the end)",
        flush=True,
    )
    if args.json:
        document = {
            "benchmark": "service",
            "config": {
                "sections": chosen,
                "repeats": repeats,
                "quick": args.quick,
                "service_workers": args.workers,
            },
            "environment": {
                "python": platform.python_version(),
                "aiohttp": aiohttp.__version__,
                "uvloop": uvloop.__version__,
                "machine": platform.machine(),
                "platform": platform.platform(),
                "cpus": cpus,
                "note": "the CPUs are shared by the service, the baseline server and the client",
            },
            "results": {name: results[name]["json"] for name in results},
            "others_cpu_share": {name: results[name].get("others_cpu_share") for name in results},
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
