"""A Frontier server in a subprocess, shared by the Spark connector's tests."""

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import api.spark
from api.client import Client

ROOT = Path(__file__).resolve().parents[2]

COUNTS = {
    "nodes": {
        "rows": {"op": "input"},
        "count": {"op": "count_by", "key": "r.key"},
        "out": {"op": "output"},
    },
    "edges": [["rows", "count"], ["count", "out"]],
}
"""input -> count_by key "r.key" -> output: ``{"key", "count"}`` per key per time."""

IDENTITY = {
    "nodes": {"rows": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["rows", "out"]],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    log: Path, *extra: str, port: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A server on ``port`` (a free one by default) with its data directory beside ``log``."""
    port = free_port() if port is None else port
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-format",
                "text",
                "--data-dir",
                str(log.with_suffix(".data")),
                *extra,
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with Client(url, timeout=2) as client:
                if client._run(client.aio.request("GET", "/readyz"))["status"] == "ready":
                    return process, url
        except Exception:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"the server did not start: {log.read_text()}") from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a server that runs for the whole test session."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    process, url = start_server(log)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    yield url
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def spark(server: str) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    java = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    session = (
        SparkSession.builder.master("local[2,2]")  # two threads; a task may fail once
        .appName("frontier-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", java)
        .config("spark.executor.extraJavaOptions", java)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    api.spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def client(server: str) -> Iterator[Client]:
    with Client(server) as c:
        yield c


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
