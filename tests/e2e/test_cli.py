"""The frontier command against a running server: submit, push, tail."""

import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson

from api.client import Client

ROOT = Path(__file__).resolve().parents[2]

GRAPH_YAML = """\
name: lengths
nodes:
  words: {op: input}
  lengths: {op: map, expr: "size(r)"}
  counts: {op: count_by, key: "r"}
  out: {op: output}
edges:
  - [words, lengths]
  - [lengths, counts]
  - [counts, out]
"""


def frontier_cli(
    server: object, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FRONTIER_URL": server.url, "PYTHONPATH": str(ROOT)}  # type: ignore[attr-defined]
    return subprocess.run(
        [sys.executable, "-m", "api", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_submit_push_and_tail(service: object, tmp_path: Path) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    planned = frontier_cli(service, "submit", str(graph), "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert orjson.loads(planned.stdout)["order"] == ["words", "lengths", "counts", "out"]

    submitted = frontier_cli(service, "submit", str(graph), "--name", "cli", "--json")
    assert submitted.returncode == 0, submitted.stderr
    dataflow = orjson.loads(submitted.stdout)["id"]

    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(['[0, "ab"]', '[0, "cd"]', '[1, "efg"]', '[2, "h"]']) + "\n")
    pushed = frontier_cli(
        service, "push", dataflow, "words", str(records), "--batch", "2", "--close"
    )
    assert pushed.returncode == 0, pushed.stderr

    with Client(service.url) as client:  # type: ignore[attr-defined]
        client.close_input(dataflow, "words")
        for _ in range(200):
            if client.dataflow(dataflow)["outputs"]["out"]["frontier"] == []:
                break
        times = {t: sorted(r["key"] for r in rs) for t, rs in client.times(dataflow, "out")}
        assert times == {0: [2], 1: [3], 2: [1]}
        tail = subprocess.Popen(
            [sys.executable, "-m", "api", "tail", dataflow, "out", "--json"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "FRONTIER_URL": service.url, "PYTHONPATH": str(ROOT)},  # type: ignore[attr-defined]
        )
        try:
            assert tail.stdout is not None
            # The three retained times, then the current frontier: then drop.
            first = "".join(tail.stdout.readline() for _ in range(4))
            client.drop(dataflow)
            rest, _ = tail.communicate(timeout=30)
        finally:
            if tail.poll() is None:
                tail.kill()
                tail.wait()
    events = [orjson.loads(line) for line in (first + rest).splitlines() if line]
    assert events[-1]["type"] == "closed"
    assert events[-1]["reason"] == "the dataflow was dropped"
    assert sorted(
        (e["time"], r["key"]) for e in events if e["type"] == "messages" for r in e["records"]
    ) == [(0, 2), (1, 3), (2, 1)]


def test_submit_reports_every_problem(service: object, tmp_path: Path) -> None:
    graph = tmp_path / "bad.json"
    graph.write_text('{"nodes": {"a": {"op": "nope"}, "b": {"op": "map"}}}')
    result = frontier_cli(service, "submit", str(graph))
    assert result.returncode == 1
    assert result.stderr.splitlines()[1:] == [
        "  /nodes/a/op: unknown operator 'nope' (accumulate, aggregate, branch, concat, count, "
        "count_by, delay, exchange, feedback, filter, flat_map, input, inspect, join, key_by, "
        "map, output, partition)",
        "  /nodes/b/expr: map needs the parameter 'expr'",
        "  /nodes/b: input b:0 is not connected",
    ]


def test_watch_shows_frontiers_until_the_dataflow_ends(service: object, tmp_path: Path) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    dataflow = orjson.loads(frontier_cli(service, "submit", str(graph), "--json").stdout)["id"]
    env = {**os.environ, "FRONTIER_URL": service.url, "PYTHONPATH": str(ROOT)}  # type: ignore[attr-defined]
    watch = subprocess.Popen(
        [sys.executable, "-m", "api", "watch", dataflow],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert watch.stdout is not None
        # Subscribed once the first frontiers are shown.
        shown = [watch.stdout.readline(), watch.stdout.readline()]
        assert sorted(shown) == ["input words: frontier [0]\n", "output out: frontier [0]\n"]
        with Client(service.url) as client:  # type: ignore[attr-defined]
            session = client.session(dataflow, "words")
            session.push([[0, "x"]])
            session.advance(3)
            for _ in range(200):
                if client.dataflow(dataflow)["outputs"]["out"]["frontier"] == [3]:
                    break
            client.drop(dataflow)
        out, _ = watch.communicate(timeout=30)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 0
    lines = out.splitlines()
    assert "input words: frontier [3]" in lines and "output out: frontier [3]" in lines
    assert lines[-1] == "closed: the dataflow was dropped"


class Nowhere:
    """A server address where nothing listens (a port bound, then let go)."""

    def __init__(self) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_a_server_that_is_not_there_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    nowhere = Nowhere()
    result = frontier_cli(nowhere, "submit", str(graph))
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: POST {nowhere.url}/v1/dataflows: no answer: "), line
    assert line.endswith("(is the server running there? give --url or $FRONTIER_URL)"), line
    assert "Traceback" not in result.stderr


def test_the_clients_raise_a_connection_error_of_their_own() -> None:
    from api.client import FrontierConnectionError

    nowhere = Nowhere()
    with Client(nowhere.url, timeout=5) as client:
        try:
            client.dataflows()
        except FrontierConnectionError as error:
            assert str(error).startswith(f"GET {nowhere.url}/v1/dataflows: no answer: ")
            assert isinstance(error, ConnectionError)
            assert isinstance(error, aiohttp.ClientConnectionError)  # as callers caught before
        else:
            raise AssertionError("a server that is not there answered")
