"""Crash loop: a server killed with SIGKILL again and again loses nothing it acknowledged.

A real server process (2 workers, a ``count_by`` dataflow, ``durability: fsync``) takes five
producers at once: two pushing over HTTP, one over a WebSocket, one staging and committing
transactions as the Spark sink does, and one pipelining frames over a WebSocket whose
connection it also breaks at random moments while the server lives (it resumes its session
and sends again every frame it has no ack for). Each retries what was not acknowledged, with
the same sequence numbers or idempotency keys, once the server is back. The server is killed at
seeded random moments, 20 times, and restarted on the same data directory. At the end the
output's counts per time are exactly the expected ones (nothing lost, nothing doubled), and a
frontier subscriber that reconnected after each restart never saw the output go backwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from tests.e2e.conftest import Server, launch

SEED = 20261124
KILLS = 20
TIMES = 250
PER_BATCH = 12
GRAPH = {
    "nodes": {
        "x": {"op": "input"},
        "n": {"op": "count_by", "key": "r"},
        "out": {"op": "output"},
    },
    "edges": [["x", "n"], ["n", "out"]],
}
GONE = (aiohttp.ClientError, ConnectionError, asyncio.TimeoutError, OSError)
"""What a request to a killed server raises."""

pytestmark = pytest.mark.slow


def batch(producer: str, t: int) -> list[list[Any]]:
    """The records ``producer`` sends at time ``t``: keys from a few, so counts add up."""
    return [[t, f"{producer}{(t + i) % 4}"] for i in range(PER_BATCH)]


def expected() -> dict[int, dict[str, int]]:
    counts: dict[int, Counter[str]] = {}
    for producer in ("a", "b", "w", "s", "p"):
        for t in range(TIMES):
            counts.setdefault(t, Counter()).update(r for _, r in batch(producer, t))
    return {t: dict(c) for t, c in counts.items()}


class Cluster:
    """The one server at a time, restarted on the same directory after each kill."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.server: Server | None = None
        self.up = asyncio.Event()
        self.kills = 0
        self.unanswered = 0
        """Requests the server went away from without answering (retried or not)."""
        self.answered = 0
        self.breaks = 0
        """Connections a producer broke while the server lived."""

    async def start(self) -> None:
        self.server = await asyncio.to_thread(
            launch, self.workdir, "--workers", "2", "--durability", "fsync"
        )
        self.up.set()

    def kill(self) -> None:
        assert self.server is not None
        self.up.clear()
        self.server.process.kill()
        self.server.process.wait()
        self.kills += 1

    async def after(self, requests: int) -> None:
        """Return once ``requests`` more requests were answered (producers at full speed)."""
        target = self.answered + requests
        while self.answered < target:
            await asyncio.sleep(0.001)

    async def url(self) -> str:
        await self.up.wait()
        assert self.server is not None
        return self.server.url

    async def once(
        self, http: aiohttp.ClientSession, method: str, path: str, body: Any = None
    ) -> tuple[int, Any] | None:
        """One request; ``None`` if the server went away before answering (maybe applied).

        A 503 applied nothing (the server is recovering): it is sent again.
        """
        while True:
            url = await self.url()
            try:
                async with http.request(method, url + path, json=body) as response:
                    if response.status == 503:
                        await asyncio.sleep(0.05)
                        continue
                    answer = response.status, await response.json(content_type=None)
                    self.answered += 1
                    return answer
            except GONE:
                self.unanswered += 1
                await asyncio.sleep(0.05)
                return None

    async def call(
        self, http: aiohttp.ClientSession, method: str, path: str, body: Any = None
    ) -> tuple[int, Any]:
        """One idempotent request, sent again until a server answers it."""
        while True:
            answer = await self.once(http, method, path, body)
            if answer is not None:
                return answer


async def http_producer(
    cluster: Cluster, http: aiohttp.ClientSession, base: str, name: str, session: str
) -> None:
    for t in range(TIMES):
        body = {"seq": t + 1, "records": batch(name, t)}
        status, ack = await cluster.call(http, "POST", f"{base}/sessions/{session}/push", body)
        assert status == 200, ack
        assert ack["seq"] == t + 1
    status, _ = await cluster.call(
        http, "POST", f"{base}/sessions/{session}/advance", {"time": TIMES}
    )
    assert status == 200


async def ws_producer(
    cluster: Cluster, http: aiohttp.ClientSession, base: str, session: str
) -> None:
    t = 0  # the first time without an ack
    while True:
        url = (await cluster.url()).replace("http", "ws", 1)
        try:
            async with http.ws_connect(f"{url}{base}/push?session={session}") as ws:
                opened = orjson.loads((await ws.receive()).data)
                assert opened["type"] == "session", opened
                while t <= TIMES:  # the pushes, then the last advance (seq TIMES + 1)
                    if t < TIMES:
                        frame = {"type": "push", "seq": t + 1, "records": batch("w", t)}
                    else:
                        frame = {"type": "advance", "seq": TIMES + 1, "time": TIMES}
                    await ws.send_bytes(orjson.dumps(frame))
                    reply = await ws.receive()
                    if reply.type != aiohttp.WSMsgType.BINARY:
                        break  # the server went away: resume the session, send it again
                    ack = orjson.loads(reply.data)
                    assert (ack["type"], ack["seq"]) == ("ack", t + 1), ack
                    t += 1
                    cluster.answered += 1
                if t > TIMES:
                    return
        except GONE:
            await asyncio.sleep(0.05)
        except aiohttp.WSServerHandshakeError as error:
            if error.status != 503:
                raise
            await asyncio.sleep(0.05)


async def breaking_ws_producer(
    cluster: Cluster, base: str, session: str, rng: random.Random
) -> None:
    """Up to 4 frames in flight, and the connection dropped at random (no close handshake).

    Every frame without an ack is sent again on the resumed session: those the server had
    applied are acknowledged with ``applied`` 0, the others applied.
    """
    acked = 0  # frames 1 to acked have their ack
    while acked <= TIMES:
        url = (await cluster.url()).replace("http", "ws", 1)
        try:
            async with ws_connect(f"{url}{base}/push?session={session}", max_size=None) as ws:
                opened = orjson.loads(await ws.recv())
                assert opened["type"] == "session", opened
                acked = await pipeline(cluster, ws, acked, acked + rng.randint(5, 40))
        except (*GONE, ConnectionClosed, InvalidHandshake):
            # Also a 409 while the server has not yet seen the broken socket end.
            await asyncio.sleep(0.05)


async def pipeline(cluster: Cluster, ws: ClientConnection, acked: int, breaks_at: int) -> int:
    """Send and read acks until the last frame's, or until it breaks the connection."""
    sent = acked
    while acked <= TIMES:
        while sent <= TIMES and sent - acked < 4:
            if sent < TIMES:
                frame = {"type": "push", "seq": sent + 1, "records": batch("p", sent)}
            else:
                frame = {"type": "advance", "seq": TIMES + 1, "time": TIMES}
            await ws.send(orjson.dumps(frame))
            sent += 1
        if acked >= breaks_at and sent > acked:
            ws.transport.abort()  # the network's break, with frames in flight
            cluster.breaks += 1
            return acked
        ack = orjson.loads(await ws.recv())
        assert (ack["type"], ack["seq"]) == ("ack", acked + 1), ack
        acked += 1
        cluster.answered += 1
    return acked


async def transaction_producer(
    cluster: Cluster, http: aiohttp.ClientSession, base: str, session: str
) -> None:
    """As the Spark sink: stage in a transaction of this attempt, commit with the batch's key."""
    for t in range(TIMES):
        attempt = 0
        while True:
            txn = f"t{t}-a{attempt}"
            earlier = [f"t{t}-a{a}" for a in range(attempt)]
            # Staging is not idempotent: a stage without an answer is left to the next
            # attempt's commit to discard, and the batch is staged again in a new transaction.
            staged = await cluster.once(
                http, "PUT", f"{base}/transactions/{txn}", {"records": batch("s", t)}
            )
            if staged is None:
                attempt += 1
                continue
            assert staged[0] == 200, staged
            body = {
                "transactions": [txn],
                "idempotency_key": f"k{t}",
                "advance_to": t + 1,
                "discard": earlier,
            }
            status, answer = await cluster.call(
                http, "POST", f"{base}/sessions/{session}/commit", body
            )
            if status == 200:
                break
            if status == 409 and answer["type"].endswith("/idempotency-key-reused"):
                # An earlier attempt's commit was applied (its ack was lost): done.
                await cluster.call(http, "DELETE", f"{base}/transactions/{txn}")
                break
            raise AssertionError(f"commit of {t}: {status} {answer}")


async def frontier_watcher(
    cluster: Cluster, http: aiohttp.ClientSession, dataflow: str, seen: list[int | None]
) -> None:
    """Follow output:out across restarts; ``seen`` gets each frontier (None: complete)."""
    while not seen or seen[-1] is not None:
        url = (await cluster.url()).replace("http", "ws", 1)
        with contextlib.suppress(*GONE, aiohttp.WSServerHandshakeError):
            async with http.ws_connect(f"{url}/v1/dataflows/{dataflow}/frontiers") as ws:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.BINARY:
                        break
                    event = orjson.loads(message.data)
                    if event.get("location") == "output:out":
                        frontier = event["frontier"]
                        seen.append(frontier[0] if frontier else None)
                        if not frontier:
                            return
        await asyncio.sleep(0.05)


async def test_twenty_kills_lose_nothing_acknowledged_and_double_nothing(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    cluster = Cluster(tmp_path / "server")
    await cluster.start()
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        status, created = await cluster.call(http, "POST", "/v1/dataflows", {"graph": GRAPH})
        assert status == 201, created
        dataflow = created["id"]
        base = f"/v1/dataflows/{dataflow}/inputs/x"
        sessions = []
        for _ in range(5):
            status, opened = await cluster.call(http, "POST", f"{base}/sessions", {})
            assert status == 201
            sessions.append(opened["session"])
        seen: list[int | None] = []
        watcher = asyncio.ensure_future(frontier_watcher(cluster, http, dataflow, seen))
        producers = asyncio.gather(
            http_producer(cluster, http, base, "a", sessions[0]),
            http_producer(cluster, http, base, "b", sessions[1]),
            ws_producer(cluster, http, base, sessions[2]),
            transaction_producer(cluster, http, base, sessions[3]),
            breaking_ws_producer(cluster, base, sessions[4], random.Random(SEED + 1)),
        )
        try:
            for _ in range(KILLS):
                # A seeded random moment, counted in requests answered: the producers run at
                # full speed, so requests are in flight when the server dies.
                await cluster.after(rng.randint(5, 40))
                cluster.kill()
                await cluster.start()
            async with asyncio.timeout(120):
                await producers
            status, _ = await cluster.call(http, "POST", f"{base}/close", {})
            assert status == 200
            async with asyncio.timeout(60):
                await watcher
            pages: dict[int, dict[str, int]] = {}
            cursor = None
            while True:
                query = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
                status, page = await cluster.call(
                    http, "GET", f"/v1/dataflows/{dataflow}/outputs/out/times{query}"
                )
                assert status == 200
                for entry in page["times"]:
                    pages[entry["time"]] = {r["key"]: r["count"] for r in entry["records"]}
                cursor = page["next_cursor"]
                if cursor is None:
                    break
        finally:
            producers.cancel()
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await producers
            with contextlib.suppress(BaseException):
                await watcher
            assert cluster.server is not None
            cluster.server.stop()
    assert pages == expected()
    # The kills landed while producers were at work: requests went unanswered.
    assert cluster.kills == KILLS
    assert cluster.unanswered >= KILLS
    assert cluster.breaks >= 10  # and connections broke while the server lived
    # The output's frontier never went backwards, across every restart.
    times = [t for t in seen if t is not None]
    assert times == sorted(times), seen
    assert seen[-1] is None
