"""The data directory under faults, with real server processes and real files.

A torn last frame (a crash mid-append) is dropped on restart, and only it; a damaged frame
anywhere else refuses to start, naming the file and the offset, and changes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from service.store.log import HEADER_BYTES, RECORD, SyncRecord
from tests.e2e.conftest import REPO, Server, launch

GRAPH = {
    "nodes": {"x": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["x", "out"]],
}


async def call(
    http: aiohttp.ClientSession, server: Server, method: str, path: str, body: Any = None
) -> Any:
    async with http.request(method, server.url + path, json=body) as response:
        assert response.status < 300, await response.text()
        return await response.json(content_type=None)


async def five_pushes(workdir: Path) -> tuple[str, str, Path]:
    """A dataflow whose input logged: open, then pushes seq 1-5 at times 0-4; then a kill.

    Returns the dataflow, the session and the input's log segment.
    """
    server = launch(workdir, "--durability", "fsync")
    try:
        async with aiohttp.ClientSession() as http:
            dataflow = (await call(http, server, "POST", "/v1/dataflows", {"graph": GRAPH}))["id"]
            base = f"/v1/dataflows/{dataflow}/inputs/x"
            session = (await call(http, server, "POST", f"{base}/sessions", {}))["session"]
            for t in range(5):
                body = {"seq": t + 1, "records": [[t, f"r{t}"]]}
                await call(http, server, "POST", f"{base}/sessions/{session}/push", body)
    finally:
        server.process.kill()
        server.process.wait()
    [segment] = (workdir / "data" / "inputs" / dataflow / "0").glob("*.log")
    return dataflow, session, segment


def frames(segment: Path) -> list[tuple[int, int]]:
    """(offset, size) of each frame of a segment."""
    data = segment.read_bytes()
    found, offset = [], 0
    while offset < len(data):
        size = HEADER_BYTES + int.from_bytes(data[offset + 4 : offset + 8], "little")
        found.append((offset, size))
        offset += size
    return found


def unsynced_last(segment: Path, layout: list[tuple[int, int]]) -> None:
    """As if the crash had come between the last push's write and its sync.

    The sync record beside the segment then says only the frames before it were synced.
    """
    path = segment.parent / RECORD
    record = SyncRecord.decode(path.read_bytes())
    assert record is not None and record.position == len(layout)
    offset, _size = layout[-1]
    path.write_bytes(record._replace(length=offset, position=len(layout) - 1).encode())


@pytest.mark.parametrize("cut", [1, 9, HEADER_BYTES + 1])
async def test_a_torn_last_frame_is_dropped_and_only_it(tmp_path: Path, cut: int) -> None:
    dataflow, session, segment = await five_pushes(tmp_path)
    layout = frames(segment)
    assert len(layout) == 6  # the opening and five pushes
    unsynced_last(segment, layout)
    os.truncate(segment, segment.stat().st_size - cut)
    server = launch(tmp_path, "--durability", "fsync")
    try:
        async with aiohttp.ClientSession() as http:
            base = f"/v1/dataflows/{dataflow}/inputs/x"
            state = await call(http, server, "GET", base)
            assert (state["records_in"], state["sessions"]) == (
                4,
                [{"session": session, "time": 0}],
            )
            # The torn push was never acknowledged: sent again, it is applied (once).
            again = {"seq": 5, "records": [[4, "r4"]]}
            ack = await call(http, server, "POST", f"{base}/sessions/{session}/push", again)
            assert (ack["seq"], ack["applied"]) == (5, 1)
            await call(http, server, "POST", f"{base}/close", {})
            out = f"/v1/dataflows/{dataflow}/outputs/out/times"
            for _ in range(200):
                page = await call(http, server, "GET", out)
                if page["frontier"] == []:
                    break
            assert [(e["time"], e["records"]) for e in page["times"]] == [
                (t, [f"r{t}"]) for t in range(5)
            ]
    finally:
        server.stop()
    # Appends went on after the last good frame.
    assert [offset for offset, _ in frames(segment)][:5] == [o for o, _ in layout[:5]]


async def test_a_damaged_frame_in_the_middle_refuses_to_start_and_changes_nothing(
    tmp_path: Path,
) -> None:
    dataflow, _session, segment = await five_pushes(tmp_path)
    offset, _size = frames(segment)[2]
    data = bytearray(segment.read_bytes())
    data[offset + HEADER_BYTES] ^= 0x20
    segment.write_bytes(bytes(data))
    before = {p: p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file()}
    command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--data-dir", str(tmp_path / "data")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode().splitlines()[-1] == (
        f"frontier: cannot start: {segment}: corrupt frame at byte offset {offset}: "
        "a payload whose checksum does not match"
    )
    after = {p: p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file()}
    assert after == before
    assert dataflow in str(segment)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs the test mounts (skipped where mounting is not allowed)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


async def test_a_full_disk_refuses_writes_with_503_and_they_resume_once_space_is_freed(
    tmp_path: Path, tiny_disk: Path
) -> None:
    filler = tiny_disk / "filler"
    filler.write_bytes(bytes(2 * 1024 * 1024))
    server = launch(tmp_path / "server", "--data-dir", str(tiny_disk / "data"))
    records = [[0, "x" * 100] for _ in range(1000)]  # about 110 KB a push
    try:
        async with aiohttp.ClientSession() as http:
            dataflow = (await call(http, server, "POST", "/v1/dataflows", {"graph": GRAPH}))["id"]
            base = f"/v1/dataflows/{dataflow}/inputs/x"
            session = (await call(http, server, "POST", f"{base}/sessions", {}))["session"]
            push = f"{server.url}{base}/sessions/{session}/push"
            seq = 0
            while True:
                seq += 1
                async with http.post(push, json={"seq": seq, "records": records}) as response:
                    if response.status != 200:
                        refused = (
                            response.status,
                            response.headers["Retry-After"],
                            response.content_type,
                            await response.json(content_type=None),
                        )
                        break
                assert seq < 100, "the disk never filled"
            acknowledged = seq - 1
            assert acknowledged > 0
            detail = (
                "input 'x' cannot log the push: No space left on device; nothing of it was applied"
            )
            assert refused == (
                503,
                "1",
                "application/problem+json",
                {
                    "type": "https://frontier.dev/problems/unavailable",
                    "title": "Service unavailable",
                    "status": 503,
                    "detail": detail,
                },
            )
            # Nothing of it was applied; reads and subscriptions go on; /readyz says why.
            state = await call(http, server, "GET", base)
            assert state["records_in"] == 1000 * acknowledged
            out = f"/v1/dataflows/{dataflow}/outputs/out/times"
            assert (await call(http, server, "GET", out))["frontier"] == [0]
            ws_url = server.ws + f"/v1/dataflows/{dataflow}/frontiers"
            async with http.ws_connect(ws_url) as ws:
                first = await ws.receive(timeout=5)
                assert orjson.loads(first.data) == {
                    "type": "frontier",
                    "location": "input:x",
                    "frontier": [0],
                }
            async with http.get(server.url + "/readyz") as ready:
                assert (ready.status, await ready.json()) == (
                    503,
                    {
                        "status": "unavailable",
                        "error": "the data directory refuses writes: No space left on device",
                    },
                )
            # Space is freed: writes succeed again, without a restart.
            filler.unlink()
            async with http.get(server.url + "/readyz") as ready:
                assert (ready.status, await ready.json()) == (200, {"status": "ready"})
            ack = await call(
                http,
                server,
                "POST",
                f"{base}/sessions/{session}/push",
                {"seq": seq, "records": records[:10]},
            )
            assert (ack["seq"], ack["applied"]) == (seq, 10)
            await call(http, server, "POST", f"{base}/sessions/{session}/advance", {"time": 1})
    finally:
        server.process.kill()
        server.process.wait()
    # Nothing acknowledged was lost: a restart has every record.
    server = launch(tmp_path / "server", "--data-dir", str(tiny_disk / "data"))
    try:
        async with aiohttp.ClientSession() as http:
            state = await call(http, server, "GET", f"/v1/dataflows/{dataflow}/inputs/x")
            assert state["records_in"] == 1000 * acknowledged + 10
            page = await call(http, server, "GET", f"/v1/dataflows/{dataflow}/outputs/out/times")
            assert page["frontier"] == [1]
            assert [(e["time"], len(e["records"])) for e in page["times"]] == [
                (0, 1000 * acknowledged + 10)
            ]
    finally:
        server.stop()


COUNTING = {
    "nodes": {
        "x": {"op": "input"},
        "n": {"op": "count_by", "key": "r"},
        "out": {"op": "output"},
    },
    "edges": [["x", "n"], ["n", "out"]],
}


class Reader:
    """An output subscriber's view: the messages it took, and the frontier they reach."""

    def __init__(self) -> None:
        self.messages: dict[int, dict[str, int]] = {}
        self.counts: dict[int, int] = {0: 1}  # the history starts at one capability at 0

    @property
    def frontier(self) -> list[int]:
        return sorted(t for t, n in self.counts.items() if n > 0)

    def take(self, event: dict[str, Any]) -> None:
        if event["type"] == "messages":
            assert event["time"] not in self.messages, f"time {event['time']} twice"
            self.messages[event["time"]] = {r["key"]: r["count"] for r in event["records"]}
        elif event["type"] == "progress":
            for time, diff in event["changes"]:
                self.counts[time] = self.counts.get(time, 0) + diff


async def test_an_output_subscriber_resuming_after_a_kill_gets_exactly_what_it_missed(
    tmp_path: Path,
) -> None:
    server = launch(tmp_path, "--durability", "fsync")
    reader = Reader()
    try:
        async with aiohttp.ClientSession() as http:
            df = (await call(http, server, "POST", "/v1/dataflows", {"graph": COUNTING}))["id"]
            base = f"/v1/dataflows/{df}/inputs/x"
            session = (await call(http, server, "POST", f"{base}/sessions", {}))["session"]
            push = f"{base}/sessions/{session}/push"
            for t in range(5):
                await call(
                    http, server, "POST", push, {"seq": t + 1, "records": [[t, "a"], [t, f"k{t}"]]}
                )
            await call(http, server, "POST", f"{base}/sessions/{session}/advance", {"time": 5})
            async with http.ws_connect(f"{server.ws}/v1/dataflows/{df}/outputs/out/events") as ws:
                while reader.frontier != [5]:
                    reader.take(orjson.loads((await ws.receive(timeout=10)).data))
                # More is acknowledged while this subscriber reads nothing; then a kill.
                for t in range(5, 8):
                    await call(
                        http, server, "POST", push, {"seq": t + 1, "records": [[t, "a"]] * 2}
                    )
                await call(http, server, "POST", f"{base}/sessions/{session}/advance", {"time": 8})
                server.process.kill()
                server.process.wait()
    finally:
        server.process.kill()
        server.process.wait()
    assert sorted(reader.messages) == [0, 1, 2, 3, 4]
    server = launch(tmp_path, "--durability", "fsync")
    try:
        async with aiohttp.ClientSession() as http:
            resume = orjson.dumps(reader.frontier).decode()
            path = f"/v1/dataflows/{df}/outputs/out/events?frontier={resume}"
            async with http.ws_connect(server.ws + path) as ws:
                resumed = Reader()  # a subscription's history starts at the minimum again
                while resumed.frontier != [8]:
                    resumed.take(orjson.loads((await ws.receive(timeout=10)).data))
    finally:
        server.stop()
    # Exactly what it missed: times 5-7, none it had, nothing twice.
    assert resumed.messages == {t: {"a": 2} for t in range(5, 8)}
    assert {**reader.messages, **resumed.messages} == {
        **{t: {"a": 1, f"k{t}": 1} for t in range(5)},
        **{t: {"a": 2} for t in range(5, 8)},
    }
