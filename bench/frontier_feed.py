"""Benchmark of the frontier feed: advance -> WebSocket event, with up to 10,000 subscribers.

Run by hand, never by the tests. One run measures the server of every ``--checkout`` (say the
code before a change and after it) and a *floor*, alternating them cell by cell (the order
reversed every repeat) so that the machine's noise hits them alike:

* Each checkout's server is ``<checkout>/.venv/bin/python -m api serve`` if that venv exists,
  else this repository's ``.venv/bin/python`` with ``cwd=<checkout>`` and
  ``PYTHONPATH=<checkout>`` (checked: ``api`` and ``service`` are imported from the checkout),
  1 worker, access log off, ``--durability none`` (the feed is measured, not the disk), and a
  config file raising ``max_subscribers_per_dataflow`` and ``max_dataflows_per_tenant``.
* The floor is this file's ``--baseline-server``: aiohttp on uvloop whose POST writes one
  pre-encoded frontier-shaped binary frame to the transport of each of its N subscribers,
  the least any server must do. The same client reads both.

**Latency**, per cell (subscribers x dataflows): ``D`` dataflows ``input -> map "r * 2" ->
count_by key "r % 100" -> output`` (bench/service.py's graph), one producer session each over
HTTP, and the subscribers spread evenly over them on ``GET /v1/dataflows/{id}/frontiers``.
Each round: push 10 records at time ``t`` into one dataflow (untimed; the dataflows with
subscribers take turns), wait until the sockets are quiet, read the wall clock, POST the
advance to ``t + 1`` (a kept-alive HTTP connection); the round's latency is when the *last*
subscriber of that dataflow received the frame saying ``output:out`` is at ``>= t + 1``.
Reported: p50/p99/max of the rounds, the median over rounds of the per-subscriber median,
the advance's HTTP round trip, the server's CPU per round, and service/floor ratios.

The subscribers are raw non-blocking sockets in this process: the WebSocket upgrade written by
hand, all sockets on one edge-triggered ``epoll``, frames parsed minimally (binary, 7/16/64-bit
lengths, ``orjson``; pings answered with masked pongs; a close or ``closed`` event is an
error). A subscriber's time is when the *kernel* received the bytes holding its event
(``SO_TIMESTAMPNS``), so it does not include this client's reading of the other sockets
(~5 µs a socket: 50 ms for 10,000). Nor does the client take a CPU from the server during a
round: it reads nothing until bytes have arrived on every socket of the dataflow and then on
none for 2 ms, looking every 0.5 ms without blocking in ``epoll_wait`` (blocked, it would have
the server wake it per arrival). ``--live-read`` reads while the server writes instead, and
shows how late the client parsed the last event ("client lag").

**Idle CPU**: 100 dataflows with 1 (and 10) ``/frontiers`` subscribers each, nothing pushed:
the server's utime + stime (``/proc/<pid>/stat``) over ``--idle-seconds``, as a share of one
core, with its context switches per second (a server that polls wakes up while idle).

    .venv/bin/python bench/frontier_feed.py --checkout /tmp/before --checkout .
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gc
import http.client
import json
import os
import resource
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from common import (  # bench/common.py (the script's folder)
    Stat,
    cli_source,
    percentile,
    table,
)

# bench/service.py, not the service package: the script's folder is first on sys.path.
from service import GRAPH, _die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[1]

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux: the kernel's receive time
TIMESPEC = struct.Struct("qq")
ANCILLARY = socket.CMSG_SPACE(TIMESPEC.size)
READ_BYTES = 1 << 16
QUIET_STEP = 0.0005
"""Seconds between looks while the server writes a round's events."""
HANDSHAKE = (
    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
    "Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
OPEN_BATCH = 100
"""Upgrades in flight at once (under aiohttp's listen backlog of 128)."""
SPARE_FILES = 200
"""Descriptors a process needs besides the subscribers' sockets (logs, pipes, listeners)."""
RECORDS_PER_PUSH = 10
IDLE_DATAFLOWS = 100


class Failure(Exception):
    """The benchmark cannot go on (a server died, a subscriber was closed, a timeout)."""


# --------------------------------------------------------------------------- limits


def raise_open_files() -> int:
    """Raise this process's RLIMIT_NOFILE soft limit to the hard one; the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = int(Path("/proc/sys/fs/nr_open").read_text())
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def child_setup() -> None:
    """In a server subprocess, before exec: die with this process, open-files limit raised."""
    _die_with_parent()
    raise_open_files()


def files_needed(subscribers: int, dataflows: int) -> int:
    """Descriptors the client or the server needs for a cell (sockets, the inputs' logs)."""
    return subscribers + 4 * dataflows + SPARE_FILES


# --------------------------------------------------------------------------- servers


class Server:
    """A server subprocess: the service from a checkout, or the floor."""

    def __init__(
        self, name: str, command: list[str], port: int, cwd: Path, env: dict[str, str]
    ) -> None:
        self.name = name
        self.command = command
        self.port = port
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115  (closed in stop())
            prefix="bench-feed-", suffix=".log", delete=False
        )
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=child_setup,  # no threads in this process yet
        )
        self.pid = self.process.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            with contextlib.suppress(OSError, http.client.HTTPException):
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                try:
                    connection.request("GET", "/readyz")
                    if connection.getresponse().status == 200:
                        return
                finally:
                    connection.close()
            time.sleep(0.05)
        raise Failure(f"{self.name} did not become ready in {timeout:g} s:\n{self.log_tail()}")

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise Failure(f"{self.name} exited with {code}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 15) -> str:
        self.log.flush()
        text = Path(self.log.name).read_text(errors="replace").splitlines()
        return "\n".join("    " + line for line in text[-lines:])

    def open_files_limit(self) -> int:
        for line in Path(f"/proc/{self.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
        raise Failure(f"no open-files limit for pid {self.pid}")

    def cpu_seconds(self) -> float:
        """utime + stime, in clock ticks (10 ms), as the brief of the idle test says."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _tasks(self) -> Iterator[Path]:
        yield from Path(f"/proc/{self.pid}/task").iterdir()

    def cpu_ns(self) -> int:
        """Time on a CPU, ns, summed over the live threads (``schedstat``: not in ticks)."""
        total = 0
        for task in self._tasks():
            with contextlib.suppress(OSError):
                total += int((task / "schedstat").read_text().split()[0])
        return total

    def switches(self) -> int:
        """Context switches (voluntary and not) summed over the live threads: wake-ups."""
        total = 0
        for task in self._tasks():
            with contextlib.suppress(OSError):
                for line in (task / "status").read_text().splitlines():
                    if "ctxt_switches:" in line:  # voluntary_ and nonvoluntary_
                        total += int(line.split()[1])
        return total

    def quiesce(self, timeout: float = 15.0) -> None:
        """Wait until the server uses < 1% of a core (e.g. done closing 10,000 sockets)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            before = self.cpu_ns()
            time.sleep(0.2)
            if self.cpu_ns() - before < 2_000_000:
                return

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)


def checkout_python(checkout: Path) -> Path:
    own = checkout / ".venv" / "bin" / "python"
    if own.exists():
        return own
    ours = ROOT / ".venv" / "bin" / "python"
    return ours if ours.exists() else Path(sys.executable)


def start_service(checkout: Path, data: str, args: argparse.Namespace) -> Server:
    checkout = checkout.resolve()
    python = checkout_python(checkout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env["PYTHONPATH"] = str(checkout)
    probe = "import api, service; print(api.__file__); print(service.__file__)"
    found = subprocess.run(
        [str(python), "-c", probe], cwd=checkout, env=env, capture_output=True, text=True
    )
    paths = found.stdout.split()
    if found.returncode != 0 or not all(p.startswith(str(checkout) + "/") for p in paths):
        raise Failure(f"{python} in {checkout} does not import the checkout's code: {found}")
    settings = (checkout / "service" / "app" / "settings.py").read_text()
    wanted = {
        "max_subscribers_per_dataflow": 2 * max(args.sizes) + 1_000,
        "max_dataflows_per_tenant": 2 * max([*args.dataflows, IDLE_DATAFLOWS]) + 10,
    }
    limits = {name: value for name, value in wanted.items() if f"{name}:" in settings}
    config = Path(data) / "config.json"
    config.write_text(json.dumps({"limits": limits}))
    cli = cli_source(checkout)
    port = free_port()
    command = [str(python), "-m", "api", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", "1", "--data-dir", data, "--config", str(config)]
    if "--access-log" in cli:
        command += ["--access-log", "off"]
    if "--durability" in cli and args.durability != "default":
        command += ["--durability", args.durability]
    server = Server(f"service {checkout}", command, port, checkout, env)
    server.wait_ready()
    return server


def start_floor() -> Server:
    port = free_port()
    command = [sys.executable, str(Path(__file__).resolve()), "--baseline-server", str(port)]
    server = Server("floor", command, port, ROOT, dict(os.environ))
    server.wait_ready()
    return server


def ws_frame(payload: bytes) -> bytes:
    """One unmasked binary frame (server to client)."""
    size = len(payload)
    if size < 126:
        return struct.pack("!BB", 0x82, size) + payload
    if size < 1 << 16:
        return struct.pack("!BBH", 0x82, 126, size) + payload
    return struct.pack("!BBQ", 0x82, 127, size) + payload


def baseline_server(port: int) -> None:
    """The floor: hold WebSockets per group; ``POST /fire/{group}/{t}`` writes one frame each."""
    import asyncio

    import uvloop
    from aiohttp import web

    groups: dict[str, list[asyncio.Transport]] = {}

    def event(t: int) -> bytes:
        return orjson.dumps({"type": "frontier", "location": "output:out", "frontier": [t]})

    async def subscribe(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=1 << 16)
        await ws.prepare(request)
        transport = request.transport
        assert transport is not None
        group = groups.setdefault(request.match_info["group"], [])
        group.append(transport)
        try:
            await ws.send_bytes(event(0))
            async for _message in ws:
                pass
        finally:
            group.remove(transport)
        return ws

    async def fire(request: web.Request) -> web.Response:
        t = int(request.match_info["t"])
        frame = ws_frame(event(t))  # encoded once, written to every subscriber
        sinks = groups.get(request.match_info["group"], [])
        for transport in sinks:
            if not transport.is_closing():
                transport.write(frame)
        return web.json_response({"fired": t, "subscribers": len(sinks)})

    async def ready(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ready"})

    app = web.Application()
    app.router.add_get("/readyz", ready)
    app.router.add_get("/ws/{group}", subscribe)
    app.router.add_post("/fire/{group}/{t}", fire)
    web.run_app(
        app,
        host="127.0.0.1",
        port=port,
        print=None,
        access_log=None,
        loop=uvloop.new_event_loop(),
    )


# --------------------------------------------------------------------------- the client


class Http:
    """One kept-alive HTTP/1.1 connection (no new TCP connection inside a timed round)."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.connection.connect()
        assert self.connection.sock is not None
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.connection.request(method, path, body=data, headers=headers)
        answer = self.connection.getresponse()
        content = answer.read()
        if answer.status >= 400:
            raise Failure(f"{method} {path}: {answer.status} {content[:500]!r}")
        return orjson.loads(content) if content else None

    def close(self) -> None:
        self.connection.close()


class Subscriber:
    """One raw WebSocket: frames parsed from a buffer, the last output frontier seen."""

    __slots__ = ("arrived", "buffer", "group", "read", "sock", "time")

    def __init__(self, sock: socket.socket, group: int) -> None:
        self.sock = sock
        self.group = group
        self.buffer = b""
        self.time = -1
        """The latest time ``output:out``'s frontier was seen at."""
        self.arrived = 0
        """When the kernel received the bytes that moved it (ns, wall clock)."""
        self.read = 0
        """When this client had parsed them (ns, wall clock)."""

    def feed(self, data: bytes) -> bool:
        """Take bytes; whether the output frontier moved (``time`` is its new value)."""
        buffer = self.buffer + data if self.buffer else data
        moved = False
        offset = 0
        size = len(buffer)
        while size - offset >= 2:
            opcode, length = buffer[offset] & 0x0F, buffer[offset + 1] & 0x7F
            head = 2
            if length == 126:
                if size - offset < 4:
                    break
                length = struct.unpack_from("!H", buffer, offset + 2)[0]
                head = 4
            elif length == 127:
                if size - offset < 10:
                    break
                length = struct.unpack_from("!Q", buffer, offset + 2)[0]
                head = 10
            if size - offset < head + length:
                break
            payload = buffer[offset + head : offset + head + length]
            offset += head + length
            if opcode in (0x1, 0x2):
                if b"output:out" in payload:
                    frontier = orjson.loads(payload)["frontier"]
                    self.time = frontier[0] if frontier else 1 << 62
                    moved = True
                elif b'"closed"' in payload:
                    raise Failure(f"a subscriber was closed: {payload[:300]!r}")
            elif opcode == 0x9:  # ping: answer a masked pong with the same payload
                mask = os.urandom(4)
                masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)
            elif opcode == 0x8:
                code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else None
                raise Failure(f"the server closed a subscriber: {code} {payload[2:300]!r}")
        self.buffer = buffer[offset:]
        return moved


class Subscribers:
    """Raw WebSocket subscribers on one edge-triggered ``epoll``.

    An arrival is noted (``pending``) when ``epoll`` reports it and read later, so a round
    can wait for the server to finish writing without reading (``wait_quiet``).
    """

    def __init__(self) -> None:
        self.poll = select.epoll()
        self.by_fd: dict[int, Subscriber] = {}
        self.groups: dict[int, list[Subscriber]] = {}
        self.pending: set[int] = set()
        """Sockets with bytes arrived and not read yet."""
        self.untimed = 0
        """Events whose read brought no kernel timestamp (the client's clock was used)."""

    def open(self, port: int, paths: list[tuple[str, int]]) -> None:
        """Upgrade one socket per ``(path, group)``, ``OPEN_BATCH`` in flight at a time."""
        for start in range(0, len(paths), OPEN_BATCH):
            batch = []
            for path, group in paths[start : start + OPEN_BATCH]:
                sock = socket.create_connection(("127.0.0.1", port), timeout=60)
                key = base64.b64encode(os.urandom(16)).decode()
                sock.sendall(HANDSHAKE.format(path=path, port=port, key=key).encode())
                batch.append((sock, path, group))
            for sock, path, group in batch:
                answer = b""
                while b"\r\n\r\n" not in answer:
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise Failure(f"the upgrade of {path} was refused: {answer[:300]!r}")
                    answer += chunk
                head, _, rest = answer.partition(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 101"):
                    raise Failure(f"the upgrade of {path} failed: {answer[:500]!r}")
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                # Closing sends a RST: no TIME_WAIT left over by 10,000 sockets a cell.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.setblocking(False)
                subscriber = Subscriber(sock, group)
                if rest and subscriber.feed(rest):
                    subscriber.arrived = subscriber.read = time.time_ns()
                self.by_fd[sock.fileno()] = subscriber
                self.groups.setdefault(group, []).append(subscriber)
                # Registering reports bytes already there: edge-triggered loses nothing.
                self.poll.register(sock.fileno(), select.EPOLLIN | select.EPOLLET)

    def note(self, timeout: float) -> list[int]:
        """Note the sockets bytes have arrived on (waiting up to ``timeout`` s); those new."""
        fresh = []
        for fd, _event in self.poll.poll(timeout, max(1, len(self.by_fd))):
            if fd not in self.pending:
                self.pending.add(fd)
                fresh.append(fd)
        return fresh

    def read(self, fd: int) -> bool:
        """Read a socket dry (edge-triggered); whether its output frontier moved."""
        subscriber = self.by_fd[fd]
        moved = False
        while True:
            try:
                data, ancillary, _flags, _address = subscriber.sock.recvmsg(READ_BYTES, ANCILLARY)
            except BlockingIOError:
                return moved
            if not data:
                raise Failure("the server closed a subscriber's connection")
            if subscriber.feed(data):
                # The kernel's time for the last segment read: the one with the event, which
                # ends what the server wrote.
                now = time.time_ns()
                arrived = 0
                for level, kind, value in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        seconds, nanoseconds = TIMESPEC.unpack(value[: TIMESPEC.size])
                        arrived = seconds * 1_000_000_000 + nanoseconds
                if not arrived:
                    self.untimed += 1
                    arrived = now
                subscriber.arrived = arrived
                subscriber.read = now
                moved = True
            if len(data) < READ_BYTES:  # dry; a later arrival is a new edge
                return moved

    def pump(self, timeout: float) -> list[Subscriber]:
        """Read what has arrived (waiting up to ``timeout`` s if nothing has); the
        subscribers whose output moved."""
        self.note(0 if self.pending else timeout)
        fds, self.pending = self.pending, set()
        return [self.by_fd[fd] for fd in fds if self.read(fd)]

    def wait(self, group: int, time_: int, began: int, timeout: float) -> list[tuple[int, int]]:
        """Pump until every subscriber of ``group`` saw the output at ``>= time_``.

        Returns ``(kernel receive - began, client parsed - began)`` in ns, per subscriber.
        """
        deadline = time.monotonic() + timeout
        members = self.groups.get(group, [])
        samples = [(s.arrived - began, s.read - began) for s in members if s.time >= time_]
        waiting = {id(s) for s in members if s.time < time_}
        while waiting:
            if time.monotonic() > deadline:
                raise Failure(f"{len(waiting)} subscribers never saw time {time_}")
            for subscriber in self.pump(0.5):
                if subscriber.time >= time_ and id(subscriber) in waiting:
                    waiting.discard(id(subscriber))
                    samples.append((subscriber.arrived - began, subscriber.read - began))
        return samples

    def wait_quiet(self, group: int, timeout: float, quiet: float = 0.002) -> None:
        """Wait, reading nothing, until bytes have arrived on every socket of ``group`` and
        then on none for ``quiet`` s: the server has written the round's events.

        It sleeps and looks (``epoll`` without waiting): a client blocked in ``epoll_wait``
        would have the server wake it for each arrival, ~2 µs of the server's CPU per socket,
        and a client reading takes a CPU from the server; the kernel's receive timestamps
        wait in the sockets meanwhile.
        """
        members = self.groups.get(group, [])
        missing = len(members) - sum(s.sock.fileno() in self.pending for s in members)
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while True:
            fresh = self.note(0)
            now = time.monotonic()
            if fresh:
                missing -= sum(self.by_fd[fd].group == group for fd in fresh)
                last = now
            elif missing <= 0 and now - last >= quiet:
                return
            if now > deadline:
                return  # wait() says what is missing
            time.sleep(QUIET_STEP)

    def settle(self, quiet: float = 0.02) -> None:
        """Read until nothing has come for ``quiet`` seconds."""
        self.pump(0)
        while self.note(quiet):
            self.pump(0)

    def close(self) -> None:
        for subscriber in self.by_fd.values():
            with contextlib.suppress(OSError):
                subscriber.sock.close()
        self.poll.close()


def busy_jiffies() -> int:
    """Ticks every CPU of the machine spent not idle (``/proc/stat``)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # minus idle and iowait


def client_cpu_ns() -> int:
    return time.process_time_ns()


def run_rounds(
    server: Server,
    subscribers: Subscribers,
    groups: int,
    args: argparse.Namespace,
    prepare: Callable[[int, int], None],
    trigger: Callable[[int, int], None],
) -> dict[str, Any]:
    """Time ``warmup + rounds`` rounds over ``groups`` groups of subscribers.

    Each round calls ``prepare(group, t)`` (untimed), waits until the sockets are quiet, then
    reads the clock and calls ``trigger(group, t)``, which must move that group's output to
    ``t + 1``; timed until its last subscriber has received the event.
    """
    for group in range(groups):
        subscribers.wait(group, 0, time.time_ns(), args.timeout)
    subscribers.settle()
    gc.collect()
    gc.freeze()  # no full collection over thousands of sockets inside a round
    times = [0] * groups
    lasts: list[int] = []
    medians: list[int] = []
    acks: list[int] = []
    lags: list[int] = []
    untimed = subscribers.untimed
    for r in range(args.warmup + args.rounds):
        if r == args.warmup:
            server_cpu, client_cpu = server.cpu_ns(), client_cpu_ns()
            machine, wall = busy_jiffies(), time.monotonic()
        group = r % groups
        t = times[group]
        prepare(group, t)
        subscribers.settle()
        began = time.time_ns()
        trigger(group, t)
        acked = time.time_ns()
        if not args.live_read:
            subscribers.wait_quiet(group, args.timeout)  # read once the server is done
        samples = subscribers.wait(group, t + 1, began, args.timeout)
        times[group] = t + 1
        if r >= args.warmup:
            kernel = [k for k, _ in samples]
            lasts.append(max(kernel))
            medians.append(int(statistics.median(kernel)))
            acks.append(acked - began)
            # The client is free to read once the advance is answered (the floor writes its
            # frames before answering): how long after that, or after the last event came,
            # it had parsed the last event says whether one client process keeps up.
            lags.append(max(c for _, c in samples) - max(max(kernel), acked - began))
    wall = time.monotonic() - wall
    server_cpu = server.cpu_ns() - server_cpu
    client_cpu = client_cpu_ns() - client_cpu
    ticks = os.sysconf("SC_CLK_TCK")
    machine_cpu = (busy_jiffies() - machine) / ticks
    others = max(0.0, machine_cpu - (server_cpu + client_cpu) / 1e9) / wall
    gc.unfreeze()
    ordered = sorted(lasts)
    return {
        "p50": percentile(ordered, 0.5) / 1e6,
        "p99": percentile(ordered, 0.99) / 1e6,
        "max": ordered[-1] / 1e6,
        "subscriber_p50": statistics.median(medians) / 1e6,
        "ack_p50": statistics.median(acks) / 1e6,
        "client_lag_p50": statistics.median(lags) / 1e6,
        "server_cpu_ms_per_round": server_cpu / 1e6 / args.rounds,
        "client_cpu_ms_per_round": client_cpu / 1e6 / args.rounds,
        "others_cores": others,
        "untimed_events": subscribers.untimed - untimed,
        "rounds_ms": [v / 1e6 for v in lasts],
    }


def create_dataflows(client: Http, count: int) -> list[str]:
    return [client.call("POST", "/v1/dataflows", {"graph": GRAPH})["id"] for _ in range(count)]


def drop_dataflows(client: Http, ids: list[str]) -> None:
    for dataflow in ids:
        with contextlib.suppress(Failure, OSError, http.client.HTTPException):
            client.call("DELETE", f"/v1/dataflows/{dataflow}")


def cell_service(
    server: Server, size: int, dataflows: int, args: argparse.Namespace
) -> dict[str, Any]:
    client = Http(server.port)
    ids: list[str] = []
    subscribers = Subscribers()
    try:
        ids = create_dataflows(client, dataflows)
        sessions = []
        for dataflow in ids:
            opened = client.call("POST", f"/v1/dataflows/{dataflow}/inputs/in/sessions", {})
            sessions.append(f"/v1/dataflows/{dataflow}/inputs/in/sessions/{opened['session']}")
        seqs = [0] * dataflows

        def push(group: int, t: int) -> None:
            seqs[group] += 1
            records = [[t, i] for i in range(RECORDS_PER_PUSH)]
            client.call("POST", f"{sessions[group]}/push", {"seq": seqs[group], "records": records})

        def advance(group: int, t: int) -> None:
            client.call("POST", f"{sessions[group]}/advance", {"time": t + 1})

        paths = [
            (f"/v1/dataflows/{ids[i % dataflows]}/frontiers", i % dataflows) for i in range(size)
        ]
        subscribers.open(server.port, paths)
        client.close()  # the server's keep-alive may have lapsed while 10,000 sockets opened
        client = Http(server.port)
        return run_rounds(server, subscribers, min(size, dataflows), args, push, advance)
    finally:
        subscribers.close()
        client.close()
        if server.process.poll() is None:
            client = Http(server.port)
            drop_dataflows(client, ids)
            client.close()
            server.quiesce()


def cell_floor(
    server: Server, size: int, dataflows: int, args: argparse.Namespace
) -> dict[str, Any]:
    client = Http(server.port)
    subscribers = Subscribers()

    def fire(group: int, t: int) -> None:
        client.call("POST", f"/fire/{group}/{t + 1}")

    try:
        subscribers.open(
            server.port, [(f"/ws/{i % dataflows}", i % dataflows) for i in range(size)]
        )
        client.close()
        client = Http(server.port)
        groups = min(size, dataflows)
        return run_rounds(server, subscribers, groups, args, lambda _g, _t: None, fire)
    finally:
        subscribers.close()
        client.close()
        server.quiesce()


def idle_cpu(server: Server, per_dataflow: int, args: argparse.Namespace) -> dict[str, float]:
    """The server's CPU while 100 dataflows with ``per_dataflow`` subscribers each sit idle."""
    client = Http(server.port)
    subscribers = Subscribers()
    floor = server.name == "floor"
    ids: list[str] = []
    try:
        if floor:
            paths = [(f"/ws/{g}", g) for g in range(IDLE_DATAFLOWS) for _ in range(per_dataflow)]
        else:
            ids = create_dataflows(client, IDLE_DATAFLOWS)
            paths = [
                (f"/v1/dataflows/{ids[g]}/frontiers", g)
                for g in range(IDLE_DATAFLOWS)
                for _ in range(per_dataflow)
            ]
        subscribers.open(server.port, paths)
        client.close()
        subscribers.settle()
        server.quiesce()
        time.sleep(1.0)
        ticks, ns, switches = server.cpu_seconds(), server.cpu_ns(), server.switches()
        began = time.monotonic()
        end = began + args.idle_seconds
        while (left := end - time.monotonic()) > 0:
            subscribers.pump(min(left, 0.5))  # answer pings, if any
        elapsed = time.monotonic() - began
        return {
            "cpu_percent": 100 * (server.cpu_seconds() - ticks) / elapsed,
            "cpu_percent_schedstat": 100 * (server.cpu_ns() - ns) / 1e9 / elapsed,
            "switches_per_s": (server.switches() - switches) / elapsed,
        }
    finally:
        subscribers.close()
        if ids and server.process.poll() is None:
            client = Http(server.port)
            drop_dataflows(client, ids)
            client.close()
        server.quiesce()


# --------------------------------------------------------------------------- the run


def report(
    args: argparse.Namespace,
    names: list[str],
    results: dict[str, dict[str, dict[str, Stat]]],
    idle: dict[str, dict[int, dict[str, Stat]]],
    skipped: list[str],
) -> None:
    print()
    print(
        f"advance -> last subscriber has output:out >= t+1 (kernel receive time), ms; "
        f"median (best) over {args.repeats} repeats of {args.rounds} rounds "
        f"after {args.warmup} warm-up; x floor = service p50 / floor p50 of the same cell"
    )
    headers = ["subs", "dataflows", "server", "p50", "p99", "max", "per-sub p50"]
    headers += ["x floor", "ack p50"] + ["client lag"] * args.live_read
    headers += ["srv CPU/round", "others"]
    rows = []
    for dataflows in args.dataflows:
        for size in args.sizes:
            key = f"{size}/{dataflows}"
            floor = results.get("floor", {}).get(key)
            for name in names:
                cell = results[name].get(key)
                if not cell:
                    continue
                ratio = "-"
                if floor and name != "floor":
                    ratio = f"{cell['p50'].median / floor['p50'].median:.2f}"
                rows.append(
                    [str(size), str(dataflows), name]
                    + [cell[k].show(digits=3) for k in ("p50", "p99", "max", "subscriber_p50")]
                    + [ratio]
                    + [f"{cell['ack_p50'].median:.3f}"]
                    + [f"{cell['client_lag_p50'].median:.3f}"] * args.live_read
                    + [f"{cell['server_cpu_ms_per_round'].median:.2f} ms"]
                    + [f"{cell['others_cores'].median:.2f}"]
                )
    if rows:
        print(table(headers, rows))
    print(
        "ack p50: the advance's HTTP round trip; srv CPU/round: the server's CPU over the timed "
        "rounds (push + advance) per round; others: cores the rest of the machine used"
    )
    if args.live_read:
        print(
            "client lag (--live-read): when this client had parsed the last event minus when "
            "it could have (the event's kernel receive time, or the ack if later)"
        )
    else:
        print(
            "the sockets were read once the server was done (every socket of the dataflow had "
            "bytes, then 2 ms without any): the client took ~no CPU from the server in a round"
        )
    if idle:
        print()
        print(
            f"idle: {IDLE_DATAFLOWS} dataflows (the floor: groups) with k subscribers each, "
            f"nothing pushed, {args.idle_seconds:g} s; median (best) over repeats"
        )
        rows = []
        for name, by_k in idle.items():
            for k, stat in by_k.items():
                rows.append(
                    [
                        name,
                        str(k),
                        stat["cpu_percent"].show(digits=2),
                        stat["cpu_percent_schedstat"].show(digits=3),
                        stat["switches_per_s"].show(digits=1),
                    ]
                )
        heads = ["server", "k", "CPU % of a core (stat)", "CPU % (schedstat)", "switches/s"]
        print(table(heads, rows))
    for line in skipped:
        print(f"not measured: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--checkout", type=Path, action="append", default=None)
    parser.add_argument("--sizes", default="1,100,1000,10000")
    parser.add_argument("--dataflows", default="1,100")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--idle-subscribers", default="1,10", help="per dataflow; '' for none")
    parser.add_argument("--durability", default="none", help="fsync|group|none|default")
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument(
        "--live-read",
        action="store_true",
        help="read the sockets while the server writes (default: once it is done)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="s for one round")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--baseline-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_server is not None:
        baseline_server(args.baseline_server)
        return
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.dataflows = [int(d) for d in args.dataflows.split(",")]
    idle_ks = [int(k) for k in args.idle_subscribers.split(",") if k]
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    limit = raise_open_files()
    print(
        f"frontier_feed: {len(checkouts)} checkout(s), sizes {args.sizes}, dataflows "
        f"{args.dataflows}, {args.rounds} rounds after {args.warmup} warm-up, {args.repeats} "
        f"repeats; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; open files "
        f"{limit}; durability {args.durability}",
        flush=True,
    )
    names = ["floor"] * (not args.no_floor) + [str(c) for c in checkouts]
    results: dict[str, dict[str, dict[str, Stat]]] = {n: {} for n in names}
    idle: dict[str, dict[int, dict[str, Stat]]] = {}
    skipped: list[str] = []
    failed: list[str] = []
    raw: dict[str, dict[str, list[list[float]]]] = {}
    servers: dict[str, Server] = {}
    data = tempfile.TemporaryDirectory(prefix="bench-feed-data-")
    try:
        for name in names:
            if name == "floor":
                servers[name] = start_floor()
            else:
                directory = Path(data.name) / str(len(servers))
                directory.mkdir()
                servers[name] = start_service(Path(name), str(directory), args)
            server = servers[name]
            print(f"{name}: pid {server.pid}, open files {server.open_files_limit()}")
            print(f"    {' '.join(server.command)}", flush=True)
        cells = [(s, d) for d in args.dataflows for s in args.sizes]
        for size, dataflows in cells:
            need = files_needed(size, dataflows)
            limits = {"client": limit} | {n: s.open_files_limit() for n, s in servers.items()}
            if min(limits.values()) < need:
                have = ", ".join(f"{n} {v}" for n, v in limits.items())
                skipped.append(
                    f"{size} subscribers / {dataflows} dataflows: needs {need} open files per "
                    f"process; the RLIMIT_NOFILE hard limits allow {have}"
                )
                print(f"not measured: {skipped[-1]}", flush=True)
        for repeat in range(args.repeats):
            order = names if repeat % 2 == 0 else names[::-1]
            for size, dataflows in cells:
                key = f"{size}/{dataflows}"
                if any(s.startswith(f"{size} subscribers / {dataflows} ") for s in skipped):
                    continue
                for name in order:
                    server = servers[name]
                    run = cell_floor if name == "floor" else cell_service
                    try:
                        figures = run(server, size, dataflows, args)
                    except Failure as error:  # e.g. a subscriber closed as a slow consumer
                        failed.append(f"[{repeat}] {name} {key}: {error}")
                        print(f"[{repeat}] {name} {key}: FAILED {error}", flush=True)
                        server.check_alive()
                        continue
                    server.check_alive()
                    raw.setdefault(name, {}).setdefault(key, []).append(figures.pop("rounds_ms"))
                    cell = results[name].setdefault(key, {})
                    for field, value in figures.items():
                        cell.setdefault(field, Stat()).values.append(value)
                    shown = {k: round(v, 3) for k, v in figures.items()}
                    print(f"[{repeat}] {name} {key}: {shown}", flush=True)
            for name in order:
                for k in idle_ks:
                    figures = idle_cpu(servers[name], k, args)
                    stats = idle.setdefault(name, {}).setdefault(k, {})
                    for field, value in figures.items():
                        stats.setdefault(field, Stat()).values.append(value)
                    shown = {f: round(v, 3) for f, v in figures.items()}
                    print(f"[{repeat}] {name} idle {IDLE_DATAFLOWS}x{k}: {shown}", flush=True)
    finally:
        for server in servers.values():
            server.stop()
        data.cleanup()
    report(args, names, results, idle, skipped + failed)
    if args.json:
        dump = {
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "checkouts": [str(c) for c in checkouts],
            "latency": {
                n: {k: {f: s.as_json() for f, s in c.items()} for k, c in r.items()}
                for n, r in results.items()
            },
            "idle": {
                n: {str(k): {f: s.as_json() for f, s in v.items()} for k, v in by_k.items()}
                for n, by_k in idle.items()
            },
            "rounds_ms": raw,
            "skipped": skipped,
            "failed": failed,
        }
        args.json.write_bytes(orjson.dumps(dump, default=str, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
