"""Benchmark of the frontier feed: advance -> WebSocket event, with many subscribers.

For each ``--checkout`` (the code before and after a change, measured in one run, one after
the other for each size), a server (``frontier serve``, 1 worker, access log off, limits
raised so 10,000 subscribers fit one dataflow) runs in a subprocess on 127.0.0.1; its code
is the checkout's (its ``api`` and ``service`` first on ``sys.path``). A *floor* server
(this file, ``--floor-server``: aiohttp on uvloop, nothing else) is measured the same way:
its POST writes one pre-encoded frontier-shaped frame to every subscriber's transport, the
least any server must do.

Workload, per size (subscribers) and dataflow count: ``--dataflows`` dataflows ``input ->
map "r * 2" -> count_by key "r % 100" -> output``, one producer session each (HTTP), and the
subscribers spread evenly over them on ``GET /v1/dataflows/{id}/frontiers``. Each round:
push 10 records at time ``t`` into one dataflow (rotating; untimed, and its events drained),
then start the clock and POST the advance to ``t + 1``; the round's latency is when the
*last* subscriber of that dataflow has received the event saying ``output:out`` is at
``[t + 1]`` (the time is complete at the output, end to end). Also reported: the median over
subscribers of each one's latency.

The subscribers are raw non-blocking sockets polled with ``epoll`` in this process (the
WebSocket handshake by hand, frames parsed minimally, pings answered), and a subscriber's
latency is the time the *kernel* received the bytes holding its event (``SO_TIMESTAMPNS`` on
the socket), against the wall clock read just before the advance was sent. So the figure is
the server's and the network's, not this client's: reading 1,000 sockets in Python takes
about 8 ms, which would otherwise be most of what is measured.

Idle CPU: with 100 dataflows, each with one subscriber, nothing pushed, the server's CPU
time over ``--idle-seconds``, as a share of one core.

    .venv/bin/python bench/frontier_feed.py --checkout /tmp/before --checkout .
"""

from __future__ import annotations

import argparse
import base64
import contextlib
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
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Stat, percentile, table
from bench.service import GRAPH, free_port

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux: the kernel's receive time
TIMESPEC = struct.Struct("qq")
HANDSHAKE = (
    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
    "Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def raise_open_files() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --------------------------------------------------------------------------- servers


class Server:
    """A server subprocess: the service from a checkout, or the floor server."""

    def __init__(self, name: str, command: list[str], port: int, env: dict[str, str]) -> None:
        self.name = name
        self.port = port
        self.log = tempfile.NamedTemporaryFile(prefix="bench-feed-", suffix=".log", delete=False)  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=raise_open_files,  # no threads yet in this process
        )
        deadline = time.monotonic() + 60
        while True:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as answer,
            ):
                if answer.status == 200:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not start: {Path(self.log.name).read_text()}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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


def service(checkout: Path, data: str) -> Server:
    port = free_port()
    config = Path(data) / "config.json"
    limits = {"max_subscribers_per_dataflow": 20_000, "max_dataflows_per_tenant": 1_000}
    config.write_text(json.dumps({"limits": limits}))
    code = (
        f"import sys; sys.path.insert(0, {str(checkout.resolve())!r}); "
        "from api.cli import main; sys.exit(main())"
    )
    command = [sys.executable, "-c", code, "serve", "--port", str(port), "--workers", "1"]
    command += ["--access-log", "off", "--data-dir", data, "--config", str(config)]
    if "--durability" in (checkout / "api" / "cli.py").read_text():
        command += ["--durability", "none"]  # the feed is measured, not the disk
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    return Server(f"service {checkout}", command, port, env)


def floor() -> Server:
    port = free_port()
    command = [sys.executable, str(Path(__file__).resolve()), "--floor-server", str(port)]
    return Server("floor", command, port, dict(os.environ))


def floor_server(port: int) -> None:
    """Hold WebSockets; POST /fire/{n} writes one frontier-shaped frame to each."""
    import uvloop
    from aiohttp import web

    sockets: dict[str, list[Any]] = {}

    async def ws(request: web.Request) -> web.WebSocketResponse:
        socket_ = web.WebSocketResponse(max_msg_size=0)
        await socket_.prepare(request)
        group = sockets.setdefault(request.match_info["group"], [])
        transport = request.transport
        group.append(transport)
        first = {"type": "frontier", "location": "output:out", "frontier": [0]}
        await socket_.send_bytes(orjson.dumps(first))
        async for _ in socket_:
            pass
        group.remove(transport)
        return socket_

    async def fire(request: web.Request) -> web.Response:
        t = int(request.match_info["t"])
        event = {"type": "frontier", "location": "output:out", "frontier": [t]}
        payload = orjson.dumps(event)
        frame = struct.pack("!BB", 0x82, len(payload)) + payload
        for transport in sockets.get(request.match_info["group"], ()):
            if not transport.is_closing():
                transport.write(frame)
        return web.json_response({"fired": t})

    async def ready(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ready"})

    app = web.Application()
    app.router.add_get("/readyz", ready)
    app.router.add_get("/ws/{group}", ws)
    app.router.add_post("/fire/{group}/{t}", fire)
    web.run_app(app, host="127.0.0.1", port=port, print=None, loop=uvloop.new_event_loop())


# --------------------------------------------------------------------------- the client


def http(server: Server, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return orjson.loads(answer.read() or b"null")


class Subscriber:
    """One raw WebSocket: frames parsed from a buffer, the last output frontier seen."""

    __slots__ = ("arrived", "buffer", "group", "sock", "time")

    def __init__(self, sock: socket.socket, group: int) -> None:
        self.sock = sock
        self.group = group
        self.buffer = b""
        self.time = -1
        """The latest time the output frontier was seen at."""
        self.arrived = 0
        """When the kernel received the bytes that moved it (ns, wall clock)."""

    def feed(self, data: bytes) -> bool:
        """Take bytes; whether the output frontier moved (``time`` is its new value)."""
        buffer = self.buffer + data
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
            if opcode == 0x9:  # a ping: answer with a (masked) pong
                mask = os.urandom(4)
                masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)
            elif opcode in (0x1, 0x2) and b"output:out" in payload:
                frontier = orjson.loads(payload)["frontier"]
                self.time = frontier[0] if frontier else 1 << 62
                moved = True
        self.buffer = buffer[offset:]
        return moved


class Subscribers:
    def __init__(self) -> None:
        self.poll = select.epoll()
        self.by_fd: dict[int, Subscriber] = {}
        self.groups: dict[int, list[Subscriber]] = {}

    def open(self, port: int, path: str, group: int) -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(HANDSHAKE.format(path=path, port=port, key=key).encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                raise RuntimeError(f"the upgrade of {path} was refused")
            answer += chunk
        head, _, rest = answer.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"the upgrade of {path} failed: {head[:200]!r}")
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setblocking(False)
        subscriber = Subscriber(sock, group)
        subscriber.feed(rest)
        self.by_fd[sock.fileno()] = subscriber
        self.groups.setdefault(group, []).append(subscriber)
        self.poll.register(sock.fileno(), select.EPOLLIN)

    def pump(self, timeout: float) -> list[Subscriber]:
        """Read what is there (waiting up to ``timeout``); the subscribers whose output moved."""
        moved = []
        for fd, _event in self.poll.poll(timeout):
            subscriber = self.by_fd[fd]
            try:
                data, ancillary, _flags, _address = subscriber.sock.recvmsg(1 << 16, 64)
            except BlockingIOError:
                continue
            if not data:
                raise RuntimeError("the server closed a subscriber")
            if subscriber.feed(data):
                arrived = time.time_ns()
                for level, kind, value in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        seconds, nanoseconds = TIMESPEC.unpack(value[: TIMESPEC.size])
                        arrived = seconds * 1_000_000_000 + nanoseconds
                subscriber.arrived = arrived
                moved.append(subscriber)
        return moved

    def wait(self, group: int, time_: int, began: int, deadline: float) -> list[int]:
        """Pump until every subscriber of ``group`` saw the output at ``time_``; ns each."""
        waiting = {id(s) for s in self.groups.get(group, ()) if s.time < time_}
        samples: list[int] = []
        while waiting:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(waiting)} subscribers never saw time {time_}")
            for subscriber in self.pump(0.5):
                if subscriber.time >= time_ and id(subscriber) in waiting:
                    waiting.discard(id(subscriber))
                    samples.append(subscriber.arrived - began)
        return samples

    def settle(self) -> None:
        while self.pump(0.02):
            pass

    def close(self) -> None:
        for subscriber in self.by_fd.values():
            with contextlib.suppress(OSError):
                subscriber.sock.close()
        self.poll.close()


def rounds_of(
    subscribers: Subscribers,
    groups: int,
    rounds: int,
    warmup: int,
    prepare: Callable[[int, int], None],
    trigger: Callable[[int, int], None],
) -> dict[str, Any]:
    """Time ``warmup + rounds`` rounds over ``groups`` groups of subscribers.

    Each round calls ``prepare(group, t)`` (untimed), then ``trigger(group, t)``, which moves
    that group's output to ``t + 1``, timed to its last subscriber.
    """
    deadline = time.monotonic() + 60
    for group in range(groups):
        subscribers.wait(group, 0, time.time_ns(), deadline)
    lasts, medians = [], []
    times = [0] * groups
    for r in range(warmup + rounds):
        group = r % groups
        t = times[group]
        prepare(group, t)
        subscribers.settle()
        began = time.time_ns()
        trigger(group, t)
        samples = subscribers.wait(group, t + 1, began, time.monotonic() + 60)
        times[group] = t + 1
        if r >= warmup:
            lasts.append(max(samples))
            medians.append(int(statistics.median(samples)))
    return summary(lasts, medians)


def run_service(
    server: Server, size: int, dataflows: int, rounds: int, warmup: int
) -> dict[str, Any]:
    ids, sessions = [], []
    for _ in range(dataflows):
        dataflow = http(server, "POST", "/v1/dataflows", {"graph": GRAPH})["id"]
        ids.append(dataflow)
        opened = http(server, "POST", f"/v1/dataflows/{dataflow}/inputs/in/sessions", {})
        sessions.append(opened["session"])

    def session(group: int) -> str:
        return f"/v1/dataflows/{ids[group]}/inputs/in/sessions/{sessions[group]}"

    def push(group: int, t: int) -> None:
        records = [[t, i] for i in range(10)]
        http(server, "POST", f"{session(group)}/push", {"seq": t + 1, "records": records})

    def advance(group: int, t: int) -> None:
        http(server, "POST", f"{session(group)}/advance", {"time": t + 1})

    subscribers = Subscribers()
    try:
        for i in range(size):
            group = i % dataflows
            subscribers.open(server.port, f"/v1/dataflows/{ids[group]}/frontiers", group)
        return rounds_of(subscribers, min(size, dataflows), rounds, warmup, push, advance)
    finally:
        subscribers.close()
        for dataflow in ids:
            http(server, "DELETE", f"/v1/dataflows/{dataflow}")


def run_floor(
    server: Server, size: int, dataflows: int, rounds: int, warmup: int
) -> dict[str, Any]:
    def fire(group: int, t: int) -> None:
        http(server, "POST", f"/fire/{group}/{t + 1}")

    subscribers = Subscribers()
    try:
        for i in range(size):
            subscribers.open(server.port, f"/ws/{i % dataflows}", i % dataflows)
        groups = min(size, dataflows)
        return rounds_of(subscribers, groups, rounds, warmup, lambda _g, _t: None, fire)
    finally:
        subscribers.close()


def summary(lasts: list[int], medians: list[int]) -> dict[str, Any]:
    ordered = sorted(lasts)
    return {
        "p50": percentile(ordered, 0.5) / 1e6,
        "p99": percentile(ordered, 0.99) / 1e6,
        "max": ordered[-1] / 1e6,
        "subscriber_median": statistics.median(medians) / 1e6,
    }


def idle_cpu(server: Server, seconds: float) -> float:
    ids = [http(server, "POST", "/v1/dataflows", {"graph": GRAPH})["id"] for _ in range(100)]
    subscribers = Subscribers()
    try:
        for group, dataflow in enumerate(ids):
            subscribers.open(server.port, f"/v1/dataflows/{dataflow}/frontiers", group)
        subscribers.settle()
        time.sleep(1)
        before = server.cpu_seconds()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            subscribers.pump(0.2)  # answer pings, if any
        return (server.cpu_seconds() - before) / seconds
    finally:
        subscribers.close()
        for dataflow in ids:
            http(server, "DELETE", f"/v1/dataflows/{dataflow}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, action="append", default=None)
    parser.add_argument("--sizes", default="1,100,1000,10000")
    parser.add_argument("--dataflows", default="1,100")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--floor-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_server is not None:
        floor_server(args.floor_server)
        return
    raise_open_files()
    checkouts = args.checkout or [Path(".")]
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(d) for d in args.dataflows.split(",")]
    names = ["floor"] * (not args.no_floor) + [str(c) for c in checkouts]
    results: dict[str, dict[str, dict[str, Stat]]] = {n: {} for n in names}
    idle: dict[str, Stat] = {str(c): Stat() for c in checkouts}
    for _repeat in range(args.repeats):
        for name in names:  # one server per name and repeat, every size on it in turn
            with tempfile.TemporaryDirectory(prefix="bench-feed-data-") as data:
                server = floor() if name == "floor" else service(Path(name), data)
                try:
                    for dataflows in counts:
                        for size in sizes:
                            run = run_floor if name == "floor" else run_service
                            figures = run(server, size, dataflows, args.rounds, args.warmup)
                            cell = results[name].setdefault(f"{size}/{dataflows}", {})
                            for key, value in figures.items():
                                cell.setdefault(key, Stat()).values.append(value)
                            print(
                                f"{name} {size} subscribers / {dataflows} dataflows: {figures}",
                                flush=True,
                            )
                    if name != "floor":
                        idle[name].values.append(idle_cpu(server, args.idle_seconds))
                finally:
                    server.stop()
    rows = []
    for key in [f"{s}/{d}" for d in counts for s in sizes]:
        for name in names:
            cell = results[name].get(key)
            if cell is None:
                continue
            rows.append(
                [key, name]
                + [cell[k].show(digits=3) for k in ("p50", "p99", "max", "subscriber_median")]
            )
    print(
        f"advance -> output:out event, ms, median (best) over {args.repeats} repeats of "
        f"{args.rounds} rounds"
    )
    print(table(["subscribers/dataflows", "server", "p50", "p99", "max", "per-sub p50"], rows))
    for name, stat in idle.items():
        print(f"idle CPU with 100 watched dataflows, {name}: {stat.show(0.01, 3)} % of a core")
    if args.json:
        dump = {
            n: {k: {f: s.values for f, s in c.items()} for k, c in r.items()}
            for n, r in results.items()
        }
        args.json.write_bytes(
            orjson.dumps({"latency": dump, "idle": {n: s.values for n, s in idle.items()}})
        )


if __name__ == "__main__":
    main()
