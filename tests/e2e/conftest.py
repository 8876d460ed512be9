"""End-to-end fixtures: a real server in a subprocess, talked to over real sockets.

Every server is ``python -m api serve`` bound to 127.0.0.1 on a free port, started from the
repository root and waited for on ``/readyz``. Whatever happens in a test, it is stopped with
SIGTERM (then killed, as a last resort) and must have exited with code 0: a graceful shutdown.

Every wait here has a deadline; nothing sleeps for a fixed time except short polling steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 5.0
"""The longest a test waits for any one thing to happen (a frame, an event, a close)."""
STARTUP = 20.0
SHUTDOWN = 15.0

WORDS_COUNT = {
    "nodes": {
        "words": {"op": "input"},
        "count": {"op": "count_by", "key": "r"},
        "out": {"op": "output"},
    },
    "edges": [["words", "count"], ["count", "out"]],
}
"""words -> count_by(r) -> out: per time, ``{"key": word, "count": n}`` once it is complete."""

PASS_THROUGH = {
    "nodes": {"words": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["words", "out"]],
}
"""words -> out: every pushed record shows at once."""


# --------------------------------------------------------------------------- the server


@dataclass
class Server:
    """A server process and where it listens."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        """The HTTP base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        """The WebSocket base URL."""
        return f"ws://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's output, for failure messages."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def terminate(self) -> int:
        """SIGTERM, wait for the exit; kill it if it does not go. Its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(SHUTDOWN)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(SHUTDOWN)
                raise AssertionError(
                    f"the server did not exit within {SHUTDOWN}s of SIGTERM (killed)\n"
                    + self.log_tail()
                ) from None
        return self.process.returncode

    def stop(self) -> None:
        """Terminate and require a graceful exit (code 0)."""
        code = self.terminate()
        assert code == 0, f"the server exited with {code} after SIGTERM\n{self.log_tail()}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=1.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def launch(workdir: Path, *args: str, config: dict[str, Any] | None = None) -> Server:
    """Start ``python -m api serve`` on a free port of 127.0.0.1 and wait until it is ready."""
    workdir.mkdir(parents=True, exist_ok=True)
    extra = list(args)
    if config is not None:
        config_file = workdir / "config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        extra += ["--config", str(config_file)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    for _attempt in range(3):
        port = _free_port()
        log = workdir / f"server-{port}.log"
        command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(port), "--data-dir", str(workdir / "data"), *extra]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        server = Server(port, process, log)
        deadline = time.monotonic() + STARTUP
        while process.poll() is None and time.monotonic() < deadline:
            if _ready(server.url):
                return server
            time.sleep(0.02)
        if process.poll() is None:
            server.terminate()
            raise AssertionError(f"the server was not ready in {STARTUP}s\n{server.log_tail()}")
        if "address already in use" not in server.log_tail().lower():
            raise AssertionError(
                f"the server exited with {process.returncode} at startup\n{server.log_tail()}"
            )
    raise AssertionError("no free port found for the server")


@contextlib.contextmanager
def running(workdir: Path, *args: str, config: dict[str, Any] | None = None) -> Iterator[Server]:
    """A server for the ``with`` block, stopped gracefully after it (exit code 0 checked)."""
    server = launch(workdir, *args, config=config)
    try:
        yield server
    except BaseException:
        server.terminate()
        raise
    server.stop()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server (2 workers, no auth) shared by a module's tests."""
    with running(tmp_path_factory.mktemp("service"), "--workers", "2") as server:
        yield server


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start servers of a test's own; each is stopped (and checked) when the test ends."""
    servers: list[Server] = []

    def start(*args: str, config: dict[str, Any] | None = None) -> Server:
        server = launch(tmp_path / f"server{len(servers)}", *args, config=config)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# --------------------------------------------------------------------------- reading frames


def short(value: Any, most: int = 2000) -> str:
    """``repr(value)``, cut to ``most`` characters (frames can hold big records)."""
    text = repr(value)
    return text if len(text) <= most else text[:most] + f"... ({len(text)} characters)"


async def within(awaitable: Any, timeout: float = TIMEOUT) -> Any:
    """``awaitable``'s result, or fail after ``timeout`` seconds."""
    return await asyncio.wait_for(awaitable, timeout)


class Frames:
    """The JSON frames of a subscription (an async iterator), read with deadlines."""

    def __init__(self, frames: AsyncIterator[Any]) -> None:
        self._frames = frames

    async def next(self, timeout: float = TIMEOUT) -> Any:
        """The next frame."""
        return await within(anext(self._frames), timeout)

    async def until(self, done: Callable[[Any], bool], timeout: float = TIMEOUT) -> list[Any]:
        """Frames up to and including the first one ``done`` accepts."""
        deadline = time.monotonic() + timeout
        frames: list[Any] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; frames so far: {short(frames)}")
            try:
                frame = await self.next(left)
            except TimeoutError:
                raise AssertionError(f"timed out; frames so far: {short(frames)}") from None
            frames.append(frame)
            if done(frame):
                return frames

    async def aclose(self) -> None:
        """Close the subscription (if it is a generator)."""
        close = getattr(self._frames, "aclose", None)
        if close is not None:
            await close()


async def ws_frames(ws: ClientConnection) -> AsyncIterator[Any]:
    """A websockets connection's frames as JSON, ending when it closes (any code)."""
    while True:
        try:
            message = await ws.recv()
        except ConnectionClosed:
            return
        yield orjson.loads(message)


def ws_connect(server: Server, path: str, token: str | None = None, **options: Any) -> Any:
    """Connect with the ``websockets`` package (the second, independent client)."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    options.setdefault("max_size", None)
    return connect(server.ws + path, additional_headers=headers, open_timeout=TIMEOUT, **options)


async def read_to_close(ws: ClientConnection, timeout: float = TIMEOUT) -> list[Any]:
    """Every frame until the server closes the socket (then see ``ws.close_code``)."""
    frames: list[Any] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"the socket was not closed in time; frames: {short(frames)}")
        try:
            message = await asyncio.wait_for(ws.recv(), left)
        except ConnectionClosed:
            return frames
        except TimeoutError:
            raise AssertionError(
                f"the socket was not closed in time; frames: {short(frames)}"
            ) from None
        frames.append(orjson.loads(message))


class WsProducer:
    """A producer session over the push WebSocket that keeps to its credits."""

    def __init__(self, ws: ClientConnection, opened: dict[str, Any]) -> None:
        self.ws = ws
        self.opened = opened
        self.session: str = opened["session"]
        self.credits: int = opened["credits"]
        self.outstanding = 0

    @classmethod
    async def open(cls, ws: ClientConnection) -> WsProducer:
        """Read the ``session`` frame the server sends first."""
        opened = orjson.loads(await within(ws.recv()))
        assert opened["type"] == "session", opened
        return cls(ws, opened)

    async def send(self, frame: dict[str, Any]) -> None:
        """Send a frame, spending a credit (never more than granted)."""
        assert self.credits > 0, "no credit left: wait for an ack"
        self.credits -= 1
        self.outstanding += 1
        await self.ws.send(orjson.dumps(frame).decode())

    async def reply(self) -> dict[str, Any]:
        """The next ack or error; an ack gives the credits back."""
        frame: dict[str, Any] = orjson.loads(await within(self.ws.recv()))
        self.outstanding -= 1
        if frame["type"] == "ack":
            self.credits = frame["credits"]
        return frame

    async def call(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send one frame and wait for its reply."""
        await self.send(frame)
        return await self.reply()


# --------------------------------------------------------------------------- events


def _record_key(record: Any) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)


def _time_key(time: Any) -> Any:
    """A JSON time as a hashable, ordered value (arrays as tuples)."""
    return tuple(_time_key(t) for t in time) if isinstance(time, list) else time


def _time_json(time: Any) -> Any:
    return [_time_json(t) for t in time] if isinstance(time, tuple) else time


def canonical(events: list[Any]) -> list[Any]:
    """Capture events with each run of ``messages`` merged per time, times and records sorted.

    Several workers each send their share of a time's records: how a time's records are split
    over ``messages`` events, and in what order they come before the next ``progress``, is not
    fixed; the records per time and their place between progress events are.
    """
    result: list[Any] = []
    run: dict[Any, list[Any]] = {}

    def flush() -> None:
        for at in sorted(run):
            records = sorted(run[at], key=_record_key)
            result.append({"type": "messages", "time": _time_json(at), "records": records})
        run.clear()

    for event in events:
        if event["type"] == "messages":
            run.setdefault(_time_key(event["time"]), []).extend(event["records"])
            continue
        flush()
        result.append(event)
    flush()
    return result


def messages(time: Any, *records: Any) -> dict[str, Any]:
    """An expected ``messages`` event (records in canonical order)."""
    return {"type": "messages", "time": time, "records": sorted(records, key=_record_key)}


def progress(*changes: tuple[Any, int]) -> dict[str, Any]:
    """An expected ``progress`` event."""
    return {"type": "progress", "changes": [list(change) for change in changes]}


def counted(**counts: int) -> list[dict[str, Any]]:
    """count_by output records: ``{"key": word, "count": n}``."""
    return [{"key": key, "count": n} for key, n in counts.items()]


def frontier(location: str, *times: Any) -> dict[str, Any]:
    """An expected frontier event."""
    return {"type": "frontier", "location": location, "frontier": list(times)}


def is_progress(event: Any) -> bool:
    """Whether a capture event is ``progress``."""
    return bool(event["type"] == "progress")


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of one Prometheus sample in an exposition text (``None`` if absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return None
