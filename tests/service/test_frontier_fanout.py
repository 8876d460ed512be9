"""Frontier subscriptions fanned out from one place, over real sockets on 127.0.0.1.

The server runs in process (aiohttp's ``TestServer`` on 127.0.0.1, the test's uvloop loop) so
the tests can look at what the server holds per subscriber: the transport's unsent bytes and
the tasks. Subscribers are aiohttp clients, and for the subscriber that stops reading a raw
socket with a tiny receive buffer (the handshake and the frame parsing are done here).

Every wait has a deadline; every server and socket is closed when the test ends.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from api.codec import frontier_event
from api.server import create_app, websockets
from api.server.app import MANAGER
from service.app import DataflowManager, Limits, Settings
from service.app.frontiers import FrontierFeed, FrontierWatch

DOUBLE = {
    "nodes": {
        "x": {"op": "input"},
        "double": {"op": "map", "expr": "r * 2"},
        "out": {"op": "output"},
    },
    "edges": [["x", "double"], ["double", "out"]],
}
DEADLINE = 10.0
DROPPED = {"type": "closed", "reason": "the dataflow was dropped"}
Event = tuple[str, list[Any]]


def frontier(location: str, *times: Any) -> dict[str, Any]:
    return {"type": "frontier", "location": location, "frontier": list(times)}


def step(t: int | None) -> list[dict[str, Any]]:
    """The events of one advance of DOUBLE's input to ``t`` (``None``: closed)."""
    times = [] if t is None else [t]
    return [frontier("input:x", *times), frontier("output:out", *times)]


# --------------------------------------------------------------------------- the server


class Served:
    """An in-process server and its manager."""

    def __init__(self, server: TestServer) -> None:
        self.server = server
        self.manager: DataflowManager = server.app[MANAGER]  # type: ignore[index]

    @property
    def port(self) -> int:
        port = self.server.port
        assert port is not None
        return port

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))

    def feed(self, dataflow: str) -> FrontierFeed:
        return self.manager.frontier_watchers[dataflow]


async def idle(request: web.Request) -> web.WebSocketResponse:
    """A bare aiohttp socket that is only held open (what any idle socket costs)."""
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for _message in ws:
        pass
    return ws


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    """Start in-process servers on 127.0.0.1 (workers=1 unless given); all closed at the end."""
    servers: list[TestServer] = []

    async def start(workers: int = 1, **limits: int) -> Served:
        app = create_app(Settings(workers=workers, limits=Limits(**limits)))
        app.router.add_get("/idle", idle)
        server = TestServer(app, host="127.0.0.1")
        servers.append(server)
        await server.start_server()
        return Served(server)

    try:
        yield start
    finally:
        for server in reversed(servers):
            await server.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        yield session


async def create(http: aiohttp.ClientSession, served: Served, graph: Any = DOUBLE) -> str:
    async with http.post(served.url("/v1/dataflows"), data=orjson.dumps({"graph": graph})) as r:
        assert r.status == 201, await r.text()
        dataflow: str = (await r.json())["id"]
        return dataflow


async def call(http: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    async with http.request(method, url, data=data) as response:
        assert response.status in (200, 201, 204), await response.text()
        return None if response.status == 204 else await response.json()


# --------------------------------------------------------------------------- subscribers


class Reader:
    """An aiohttp subscriber that reads every frame as it comes."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.close_reason = ""
        self.arrived = asyncio.Event()
        self.task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            message = await self.ws.receive()
            if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                self.events.append(orjson.loads(message.data))
                self.arrived.set()
                continue
            if message.type == aiohttp.WSMsgType.CLOSE:
                self.close_reason = message.extra or ""
            self.arrived.set()
            return

    async def until(self, event: dict[str, Any]) -> None:
        async with asyncio.timeout(DEADLINE):
            while event not in self.events:
                assert not self.task.done(), f"closed before {event}: {self.events}"
                self.arrived.clear()
                await self.arrived.wait()

    async def to_close(self) -> tuple[list[dict[str, Any]], int | None, str]:
        async with asyncio.timeout(DEADLINE):
            await self.task
        return self.events, self.ws.close_code, self.close_reason


async def readers(
    http: aiohttp.ClientSession, served: Served, path: str, n: int, chunk: int = 50
) -> list[Reader]:
    opened: list[Reader] = []
    while len(opened) < n:
        sockets = await asyncio.gather(
            *(http.ws_connect(served.url(path)) for _ in range(min(chunk, n - len(opened))))
        )
        opened.extend(Reader(ws) for ws in sockets)
    return opened


class RawSubscriber:
    """A WebSocket client on a raw socket: it reads only when told to."""

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        self.sock = sock
        self.data = data
        self.frames: list[tuple[int, bytes]] = []

    @classmethod
    async def open(cls, port: int, path: str, receive_buffer: int) -> RawSubscriber:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, ("127.0.0.1", port))
            key = base64.b64encode(os.urandom(16)).decode()
            await loop.sock_sendall(
                sock,
                (
                    f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n"
                ).encode(),
            )
            data = b""
            async with asyncio.timeout(DEADLINE):
                while b"\r\n\r\n" not in data:
                    data += await loop.sock_recv(sock, 1)
        except BaseException:
            sock.close()
            raise
        assert data.startswith(b"HTTP/1.1 101"), data
        return cls(sock, b"")

    def local_port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    async def read(self, done: Callable[[list[tuple[int, bytes]]], bool]) -> None:
        """Read (and parse frames) until ``done(frames)``, or the server closes."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(DEADLINE):
            while not done(self.frames):
                chunk = await loop.sock_recv(self.sock, 65536)
                if not chunk:
                    return
                self.data += chunk
                self._parse()

    def _parse(self) -> None:
        data = self.data
        while len(data) >= 2:
            opcode, size, at = data[0] & 0x0F, data[1] & 0x7F, 2
            assert data[0] & 0xF0 == 0x80 and not data[1] & 0x80, data[:2]  # FIN, unmasked
            if size == 126:
                if len(data) < 4:
                    break
                (size,), at = struct.unpack("!H", data[2:4]), 4
            elif size == 127:
                if len(data) < 10:
                    break
                (size,), at = struct.unpack("!Q", data[2:10]), 10
            if len(data) < at + size:
                break
            self.frames.append((opcode, data[at : at + size]))
            data = data[at + size :]
        self.data = data

    def events(self) -> list[dict[str, Any]]:
        return [orjson.loads(payload) for opcode, payload in self.frames if opcode in (1, 2)]

    def close_frame(self) -> tuple[int, str] | None:
        for opcode, payload in self.frames:
            if opcode == 8:
                return struct.unpack("!H", payload[:2])[0], payload[2:].decode()
        return None

    async def close(self) -> None:
        """Close the WebSocket (a masked close frame, 1000), then the socket."""
        loop = asyncio.get_running_loop()
        try:
            mask = os.urandom(4)
            code = bytes(b ^ mask[i] for i, b in enumerate(struct.pack("!H", 1000)))
            await loop.sock_sendall(self.sock, b"\x88\x82" + mask + code)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self.read(lambda frames: any(opcode == 8 for opcode, _ in frames))
        except OSError:
            pass
        finally:
            self.sock.close()


def never_backwards(events: list[dict[str, Any]]) -> None:
    """Per location, every frontier is strictly later than the one before (``[]`` last)."""
    last: dict[str, list[Any]] = {}
    for event in events:
        if event["type"] != "frontier":
            continue
        location, now = event["location"], event["frontier"]
        if location in last:
            before = last[location]
            assert before, f"{location} moved after it was complete"
            assert now != before and all(any(b <= t for b in before) for t in now), (
                f"{location} went from {before} to {now}"
            )
        last[location] = now


def watch_of(served: Served, dataflow: str, raw: RawSubscriber) -> FrontierWatch:
    """The server-side watch of a raw subscriber (found by its socket's port)."""
    for watch in served.feed(dataflow):
        sink = watch.sink
        if (
            isinstance(sink, websockets.FrontierSocket)
            and sink.transport.get_extra_info("peername")[1] == raw.local_port()
        ):
            return watch
    raise AssertionError("no watch for the raw subscriber")


# --------------------------------------------------------------------------- tests


async def test_ws_frames_are_binary_frames_with_each_length_form() -> None:
    short, medium, long = b"a" * 125, b"b" * 126, b"c" * 65536
    assert websockets.ws_frames([]) == b""
    assert websockets.ws_frames([short]) == b"\x82\x7d" + short
    assert websockets.ws_frames([medium]) == b"\x82\x7e\x00\x7e" + medium
    assert websockets.ws_frames([long]) == b"\x82\x7f" + (65536).to_bytes(8, "big") + long
    assert websockets.ws_frames([short, medium]) == (
        b"\x82\x7d" + short + b"\x82\x7e\x00\x7e" + medium
    )


async def test_200_subscribers_get_the_same_events_in_order(
    serve: Callable[..., Any], http: aiohttp.ClientSession
) -> None:
    served = await serve(workers=2)
    dataflow = await create(http, served)
    base = f"/v1/dataflows/{dataflow}"
    plain = await readers(http, served, f"{base}/frontiers", 150)
    detailed = await readers(http, served, f"{base}/frontiers?operators=true", 50)
    everyone = plain + detailed
    for reader in everyone:
        await reader.until(frontier("output:out", 0))
    session = await call(http, "POST", served.url(f"{base}/inputs/x/sessions"), {})
    session_url = served.url(f"{base}/inputs/x/sessions/{session['session']}")
    producer = served.manager.input("default", dataflow, "x")

    # Over HTTP, one advance at a time.
    await call(http, "POST", session_url + "/push", {"seq": 1, "records": [[0, 1], [1, 2]]})
    for t in (1, 2):
        await call(http, "POST", session_url + "/advance", {"time": t})
        for reader in everyone:
            await reader.until(frontier("output:out", t))
    # Two advances before the feed looks (the same turn of the loop): only the latest.
    producer.advance(session["session"], 4)
    producer.advance(session["session"], 6)
    for reader in everyone:
        await reader.until(frontier("output:out", 6))
    await call(http, "POST", served.url(f"{base}/inputs/x/close"))
    for reader in everyone:
        await reader.until(frontier("output:out"))
    assert await call(http, "DELETE", served.url(base)) is None

    expected = step(0) + step(1) + step(2) + step(6) + step(None)
    for reader in plain:
        events, code, reason = await reader.to_close()
        assert events == [*expected, DROPPED]
        assert (code, reason) == (4410, "the dataflow was dropped")
    sequences = []
    for reader in detailed:
        events, code, _ = await reader.to_close()
        assert code == 4410
        sequences.append(events)
    # Every operators subscriber saw the very same sequence; without the operator events
    # it is the plain one, and the operators moved as the input did.
    assert all(events == sequences[0] for events in sequences)
    first = sequences[0]
    assert [e for e in first if not e.get("location", "").startswith("operator:")] == [
        *expected,
        DROPPED,
    ]
    never_backwards(first)
    operators = [e for e in first if e.get("location", "").startswith("operator:")]
    assert operators[:2] == [frontier("operator:x:0", 0), frontier("operator:double:0", 0)]
    assert operators[-2:] == [frontier("operator:x:0"), frontier("operator:double:0")]


async def test_a_subscriber_that_does_not_read_is_coalesced_within_the_bound(
    serve: Callable[..., Any], http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 2048
    monkeypatch.setattr(websockets, "FRONTIER_BUFFER_BYTES", bound)
    served = await serve()
    dataflow = await create(http, served)
    path = f"/v1/dataflows/{dataflow}/frontiers"
    fast = await readers(http, served, path, 10)
    slow = await RawSubscriber.open(served.port, path, receive_buffer=1024)
    try:
        watch = watch_of(served, dataflow, slow)
        assert isinstance(watch.sink, websockets.FrontierSocket)
        transport = watch.sink.transport
        # The kernel's buffers on both ends are small too: the transport's own buffer fills.
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        producer = served.manager.input("default", dataflow, "x")
        session = producer.open_session()
        last = 400
        most, behind = 0, 0
        for t in range(1, last + 1):
            producer.advance(session.id, t)
            for reader in fast:
                await reader.until(frontier("output:out", t))
            most = max(most, transport.get_write_buffer_size())
            behind += watch.waiting
        # It fell behind and was written nothing more: at most one batch (two events) over.
        biggest = len(
            websockets.ws_frames(
                [orjson.dumps(e) for e in step(last)]  # the longest events of this test
            )
        )
        assert behind > 0
        assert bound < most <= bound + biggest
        for reader in fast:
            assert reader.events == [e for t in range(last + 1) for e in step(t)]

        # Reading now: it catches up to the latest frontiers, coalesced, never backwards.
        await slow.read(lambda _: frontier("output:out", last) in slow.events())
        events = slow.events()
        assert events[:2] == step(0)
        assert events[-2:] == step(last)
        never_backwards(events)
        everything = [e for t in range(last + 1) for e in step(t)]
        assert len(events) < len(everything)
        position = 0  # a subsequence of what the others got, in the same order
        for event in events:
            position = everything.index(event, position) + 1
        assert not watch.waiting
        assert transport.get_write_buffer_size() == 0

        # Dropped: everyone, the slow one too, gets the final event and 4410.
        assert await call(http, "DELETE", served.url(f"/v1/dataflows/{dataflow}")) is None
        for reader in fast:
            events, code, _ = await reader.to_close()
            assert (events[-1], code) == (DROPPED, 4410)
        await slow.read(lambda frames: any(opcode == 8 for opcode, _ in frames))
        assert slow.events()[-1] == DROPPED
        assert slow.close_frame() == (4410, "the dataflow was dropped")
    finally:
        await slow.close()


async def test_a_slow_subscriber_gets_its_latest_frontiers_and_closed_on_drop(
    serve: Callable[..., Any], http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(websockets, "FRONTIER_BUFFER_BYTES", 512)
    served = await serve()
    dataflow = await create(http, served)
    path = f"/v1/dataflows/{dataflow}/frontiers"
    [fast] = await readers(http, served, path, 1)
    slow = await RawSubscriber.open(served.port, path, receive_buffer=1024)
    try:
        watch = watch_of(served, dataflow, slow)
        assert isinstance(watch.sink, websockets.FrontierSocket)
        watch.sink.transport.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
        )
        producer = served.manager.input("default", dataflow, "x")
        session = producer.open_session()
        t = 0
        while not watch.waiting:
            t += 1
            assert t < 2000, "the slow subscriber never fell behind"
            producer.advance(session.id, t)
            await fast.until(frontier("output:out", t))
        producer.advance(session.id, t + 5)
        await fast.until(frontier("output:out", t + 5))
        # Dropped while it is behind: what it missed (the latest per location), then closed.
        assert await call(http, "DELETE", served.url(f"/v1/dataflows/{dataflow}")) is None
        await slow.read(lambda frames: any(opcode == 8 for opcode, _ in frames))
        events = slow.events()
        assert events[-3:] == [*step(t + 5), DROPPED]
        never_backwards(events)
        assert slow.close_frame() == (4410, "the dataflow was dropped")
    finally:
        await slow.close()


async def test_shutdown_closes_every_subscriber_with_going_away(
    serve: Callable[..., Any], http: aiohttp.ClientSession
) -> None:
    served = await serve()
    dataflow = await create(http, served)
    path = f"/v1/dataflows/{dataflow}/frontiers"
    plain = await readers(http, served, path, 3)
    detailed = await readers(http, served, path + "?operators=true", 2)
    for reader in plain + detailed:
        await reader.until(frontier("output:out", 0))
    await served.server.close()
    reason = "going away: the service is stopping"
    for reader in plain:
        events, code, _ = await reader.to_close()
        assert events == [*step(0), {"type": "closed", "reason": reason}]
        assert code == 1001
    for reader in detailed:
        events, code, _ = await reader.to_close()
        assert events[-1] == {"type": "closed", "reason": reason}
        assert code == 1001


async def test_subscriber_limits_and_auth_come_before_the_upgrade(
    serve: Callable[..., Any], http: aiohttp.ClientSession
) -> None:
    served = await serve(max_subscribers_per_dataflow=2)
    dataflow = await create(http, served)
    path = f"/v1/dataflows/{dataflow}/frontiers"
    first, second = await readers(http, served, path, 2)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await http.ws_connect(served.url(path))
    assert refused.value.status == 429
    async with http.get(served.url(path)) as response:  # the same, read as HTTP
        assert response.status == 429
        assert (await response.json())["detail"] == (
            f"dataflow {dataflow!r} has 2 frontier subscribers, the limit "
            "(max_subscribers_per_dataflow)"
        )
    await first.ws.close()
    async with asyncio.timeout(DEADLINE):
        while len(served.feed(dataflow)) > 1:
            await asyncio.sleep(0.001)
    third = (await readers(http, served, path, 1))[0]
    await third.until(frontier("output:out", 0))
    with pytest.raises(aiohttp.WSServerHandshakeError) as unknown:
        await http.ws_connect(served.url("/v1/dataflows/nope/frontiers"))
    assert unknown.value.status == 404
    for reader in (second, third):
        await reader.ws.close()


async def test_idle_subscribers_hold_no_task_beyond_an_idle_aiohttp_socket(
    serve: Callable[..., Any], http: aiohttp.ClientSession
) -> None:
    served = await serve()
    dataflow = await create(http, served)
    base = f"/v1/dataflows/{dataflow}"
    raws: list[RawSubscriber] = []

    async def tasks_per_socket(paths: list[str]) -> float:
        await asyncio.sleep(0.05)
        before = len(asyncio.all_tasks())
        raws.extend([await RawSubscriber.open(served.port, p, 65536) for p in paths])
        await asyncio.sleep(0.05)
        return (len(asyncio.all_tasks()) - before) / len(paths)

    def has(event: dict[str, Any], raw: RawSubscriber) -> Callable[[Any], bool]:
        return lambda _: event in raw.events()

    try:
        # aiohttp's own per connection (its connection task and the handler's task) ...
        bare = await tasks_per_socket(["/idle"] * 5)
        assert bare == 2
        # ... is all an idle subscriber has: no reader task, no waiter, no sender.
        assert await tasks_per_socket([f"{base}/frontiers"] * 5) == bare
        assert await tasks_per_socket([f"{base}/outputs/out/events"] * 5) == bare
        assert set() == websockets._BACKGROUND
        frontiers, events = raws[5:10], raws[10:15]
        producer = served.manager.input("default", dataflow, "x")
        session = producer.open_session()
        producer.push(session.id, 1, [(0, 3)])
        producer.advance(session.id, 1)
        for raw in frontiers:
            await raw.read(has(frontier("output:out", 1), raw))
            assert raw.events() == step(0) + step(1)
        progress = {"type": "progress", "changes": [[0, -1], [1, 1]]}
        for raw in events:
            await raw.read(has(progress, raw))
            assert raw.events() == [{"type": "messages", "time": 0, "records": [6]}, progress]
        # The output subscribers' senders ran while there was something to send, and ended.
        await asyncio.sleep(0.05)
        assert set() == websockets._BACKGROUND
    finally:
        for raw in raws:
            await raw.close()


# --------------------------------------------------------------------------- the feed alone


class FakeSink:
    """A sink that records what is written; its bound is switched by the test."""

    encoded: ClassVar[list[list[bytes]]] = []

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.open = True
        self.full = False
        self.waiting: list[Callable[[], None]] = []
        self.finished: list[str] = []

    @staticmethod
    def encode(payloads: list[bytes]) -> bytes:
        FakeSink.encoded.append(payloads)
        return b"\n".join(payloads) + b"\n"

    def writable(self) -> bool:
        return not self.full

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def when_writable(self, then: Callable[[], None]) -> None:
        self.waiting.append(then)

    @staticmethod
    def write_all(sinks: list[FakeSink], data: bytes) -> list[int]:
        full = [i for i, sink in enumerate(sinks) if not sink.writable()]
        for i, sink in enumerate(sinks):
            if i not in full:
                sink.write(data)
        return full

    def finish(self, reason: str) -> None:
        self.finished.append(reason)

    def events(self) -> list[Event]:
        lines = b"".join(self.written).splitlines()
        decoded = [orjson.loads(line) for line in lines]
        return [(e["location"], e["frontier"]) for e in decoded]

    def drained(self) -> None:
        self.full = False
        waiting, self.waiting = self.waiting, []
        for then in waiting:
            then()


def fed(feed: FrontierFeed, operators: bool = False) -> tuple[FrontierWatch, FakeSink]:
    watch = FrontierWatch(feed, operators)
    feed.append(watch)
    feed.operator_watches += operators
    sink = FakeSink()
    watch.attach(sink)
    return watch, sink


def at(t: int, operator: int | None = None) -> dict[str, list[Any]]:
    frontiers = {"input:x": [t], "output:out": [t]}
    if operator is not None:
        frontiers["operator:x:0"] = [operator]
    return frontiers


def test_a_change_is_encoded_once_and_the_same_bytes_go_to_everyone() -> None:
    feed = FrontierFeed("d", frontier_event)
    feed.publish(at(0, operator=0))
    sinks = [fed(feed)[1] for _ in range(3)]
    detailed = [fed(feed, operators=True)[1] for _ in range(2)]
    for sink in sinks:
        assert sink.events() == [("input:x", [0]), ("output:out", [0])]
    for sink in detailed:
        assert sink.events() == [("input:x", [0]), ("output:out", [0]), ("operator:x:0", [0])]
    FakeSink.encoded.clear()
    feed.publish(at(1, operator=0))
    # One encoding per kind of watch; every sink of a kind got the very same bytes object.
    assert (
        FakeSink.encoded
        == [
            [
                b'{"type":"frontier","location":"input:x","frontier":[1]}',
                b'{"type":"frontier","location":"output:out","frontier":[1]}',
            ]
        ]
        * 2
    )
    assert all(sink.written[-1] is sinks[0].written[-1] for sink in sinks)
    assert detailed[0].written[-1] is detailed[1].written[-1]
    feed.publish({"input:x": [1], "output:out": [1], "operator:x:0": [1]})
    assert [len(sink.written) for sink in sinks] == [2, 2, 2]  # nothing for plain watches
    assert detailed[0].events()[-1] == ("operator:x:0", [1])


def test_a_sink_over_its_bound_is_coalesced_until_it_drains() -> None:
    feed = FrontierFeed("d", frontier_event)
    feed.publish(at(0))
    watch, slow = fed(feed)
    _, fast = fed(feed)
    slow.full = True
    feed.publish(at(1))
    feed.publish({"input:x": [2], "output:out": [1]})
    feed.publish({"input:x": [3], "output:out": [1]})
    feed.publish({"input:x": [3], "output:out": [2]})
    assert fast.events()[2:] == [
        ("input:x", [1]),
        ("output:out", [1]),
        ("input:x", [2]),
        ("input:x", [3]),
        ("output:out", [2]),
    ]
    # Nothing written while over the bound, one wait registered, however many changes.
    assert slow.events() == [("input:x", [0]), ("output:out", [0])]
    assert (watch.waiting, len(slow.waiting)) == (True, 1)
    slow.drained()
    # One write: the latest of each location, least recently changed first.
    assert slow.events()[2:] == [("input:x", [3]), ("output:out", [2])]
    assert len(slow.written) == 2
    assert not watch.waiting
    feed.publish(at(4))
    assert slow.events()[-2:] == [("input:x", [4]), ("output:out", [4])]
    assert slow.written[-1] is fast.written[-1]  # up to date again: the shared batch


def test_a_sink_still_full_after_a_wake_waits_again() -> None:
    feed = FrontierFeed("d", frontier_event)
    feed.publish(at(0))
    watch, slow = fed(feed)
    slow.full = True
    feed.publish(at(1))
    [then] = slow.waiting
    slow.waiting.clear()
    then()  # woken, but still over the bound
    assert (watch.waiting, len(slow.waiting), len(slow.written)) == (True, 1, 1)
    slow.drained()
    assert slow.events()[2:] == [("input:x", [1]), ("output:out", [1])]


def test_close_writes_what_is_missing_then_finishes_even_over_the_bound() -> None:
    feed = FrontierFeed("d", frontier_event)
    feed.publish(at(0))
    watch, slow = fed(feed)
    slow.full = True
    feed.publish(at(1))
    feed.publish(at(2))
    watch.close("the dataflow was dropped")
    watch.close("again")  # once only
    assert slow.events()[2:] == [("input:x", [2]), ("output:out", [2])]
    assert slow.finished == ["the dataflow was dropped"]
    slow.drained()  # a late wake writes nothing more
    feed.publish(at(3))
    assert len(slow.written) == 2


def test_a_watch_closed_before_its_sink_is_attached_gets_everything_then_closed() -> None:
    feed = FrontierFeed("d", frontier_event)
    feed.publish(at(0))
    watch = FrontierWatch(feed, False)
    feed.append(watch)
    feed.publish(at(1))
    watch.close("going away")
    sink = FakeSink()
    watch.attach(sink)
    assert sink.events() == [("input:x", [1]), ("output:out", [1])]
    assert sink.finished == ["going away"]


def test_unwatched_sinks_are_written_nothing_more() -> None:
    feed = FrontierFeed("d", frontier_event)
    feed.publish(at(0))
    manager = DataflowManager(Settings())
    manager.frontier_watchers["d"] = feed
    watch, sink = fed(feed)
    sink.full = True
    feed.publish(at(1))
    manager.unwatch(watch)
    assert list(feed) == []
    sink.drained()
    feed.publish(at(2))
    assert sink.events() == [("input:x", [0]), ("output:out", [0])]


async def test_a_watch_of_a_failed_dataflow_is_closed_at_once() -> None:
    failing = {
        "nodes": {
            "x": {"op": "input"},
            "m": {"op": "map", "expr": "r.v * 2", "on_error": "fail"},
            "out": {"op": "output"},
        },
        "edges": [["x", "m"], ["m", "out"]],
    }
    manager = DataflowManager(Settings(), frontier_codec=frontier_event)
    await manager.start()
    try:
        record = await manager.create("t", failing)
        producer = manager.input("t", record.id, "x")
        producer.push(producer.open_session().id, 1, [(0, "s")])
        async with asyncio.timeout(DEADLINE):
            while record.status != "failed":
                await asyncio.sleep(0)
        watch = manager.watch("t", record.id)
        assert watch.closed == f"the dataflow failed: {record.error}"
        assert watch.wake.is_set()
        sink = FakeSink()
        watch.attach(sink)
        assert sink.events() == [("input:x", [0]), ("output:out", [0])]
        assert sink.finished == [f"the dataflow failed: {record.error}"]
    finally:
        await manager.stop()
