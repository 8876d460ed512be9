"""Every error a user of ``frontier`` can cause is one line saying what to fix, exit code 1
(2 for a mistaken command line), against real servers; ``--debug`` shows the traceback.
``watch`` and ``tail`` print frontiers as antichains; ``serve`` refuses wrong addresses."""

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from api.client import Client
from tests.e2e.conftest import REPO, Server, launch
from tests.e2e.test_cli import GRAPH_YAML, Nowhere, frontier_cli

UNKNOWN = "0123456789abcdef0123456789abcdef"


def test_every_command_says_in_one_line_that_the_server_is_not_there(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text('[0, "a"]\n')
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    nowhere = Nowhere()
    for args, request in [
        (("submit", str(graph)), "POST /v1/dataflows"),
        (("push", UNKNOWN, "words", str(records)), f"POST /v1/dataflows/{UNKNOWN}/inputs/words"),
        (("watch", UNKNOWN), f"GET /v1/dataflows/{UNKNOWN}/frontiers"),
        (("tail", UNKNOWN, "out"), f"GET /v1/dataflows/{UNKNOWN}/outputs/out"),
        (("why", UNKNOWN, "out", "3"), f"GET /v1/dataflows/{UNKNOWN}/explain"),
        (("dataflows", "list"), "GET /v1/dataflows"),
        (("dataflows", "get", UNKNOWN), f"GET /v1/dataflows/{UNKNOWN}"),
        (("input", "advance", UNKNOWN, "words", "3"), f"POST /v1/dataflows/{UNKNOWN}/inputs"),
        (("sessions", "list", UNKNOWN, "words"), f"GET /v1/dataflows/{UNKNOWN}/inputs/words"),
        (("consumers", "list", UNKNOWN, "out"), f"GET /v1/dataflows/{UNKNOWN}/outputs/out"),
    ]:
        result = frontier_cli(nowhere, *args)
        assert (result.returncode, result.stdout) == (1, ""), (args, result)
        [line] = result.stderr.splitlines()
        method, path = request.split(" ")
        assert line.startswith(f"error: {method} {nowhere.url}{path}"), line
        assert line.endswith("(is the server running there? give --url or $FRONTIER_URL)"), line


def test_an_unknown_dataflow_is_the_servers_problem_in_one_line(service: Server) -> None:
    for args in [
        ("watch", UNKNOWN),
        ("tail", UNKNOWN, "out"),
        ("why", UNKNOWN, "out", "3"),
        ("dataflows", "get", UNKNOWN),
        ("dataflows", "drop", UNKNOWN),
        ("input", "get", UNKNOWN, "words"),
        ("input", "advance", UNKNOWN, "words", "3"),
        ("input", "close", UNKNOWN, "words"),
        ("sessions", "list", UNKNOWN, "words"),
        ("sessions", "open", UNKNOWN, "words"),
        ("sessions", "close", UNKNOWN, "words", "s"),
        ("consumers", "list", UNKNOWN, "out"),
        ("consumers", "commit", UNKNOWN, "out", "c", "1"),
        ("consumers", "drop", UNKNOWN, "out", "c"),
    ]:
        result = frontier_cli(service, *args)
        assert (result.returncode, result.stdout) == (1, ""), (args, result)
        assert result.stderr == f"error: Not found (404): no dataflow '{UNKNOWN}'\n", args


def test_a_problem_names_what_to_fix(service: Server, tmp_path: Path) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    dataflow = orjson.loads(frontier_cli(service, "submit", str(graph), "--json").stdout)["id"]
    result = frontier_cli(service, "tail", dataflow, "nope")
    assert (result.returncode, result.stderr) == (
        1,
        f"error: Not found (404): dataflow '{dataflow}' has no output 'nope'\n",
    )
    result = frontier_cli(service, "why", dataflow, "out", "[1")
    assert (result.returncode, result.stderr) == (
        1,
        "error: Unprocessable content (422): time [1 is not a time at out: "
        "expected an integer 0 <= t < 2^64\n",
    )
    result = frontier_cli(service, "tail", dataflow, "out", "--from", "[1")
    assert (result.returncode, result.stderr) == (
        2,
        "error: Invalid value for --from: '[1' is not a time (an integer, or [outer, inner]) "
        "(see python -m api tail --help)\n",
    )
    bad = tmp_path / "bad.json"
    bad.write_text("[1")
    result = frontier_cli(service, "submit", str(bad))
    assert (result.returncode, result.stderr) == (
        1,
        f"error: {bad} is not YAML or JSON: expected ',' or ']', but got '<stream end>' "
        "at line 1, column 3\n",
    )
    result = frontier_cli(service, "submit", str(tmp_path / "missing.yaml"))
    assert (result.returncode, result.stderr) == (
        1,
        f"error: {tmp_path / 'missing.yaml'}: No such file or directory\n",
    )


def test_debug_shows_the_traceback(service: Server) -> None:
    result = frontier_cli(service, "--debug", "watch", UNKNOWN)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.endswith(
        f"api.client.errors.FrontierError: 404: no dataflow '{UNKNOWN}'\n"
    )
    after = frontier_cli(service, "tail", UNKNOWN, "out", "--debug")
    assert after.returncode == 1
    assert after.stderr.startswith("Traceback (most recent call last):")


def _follow(server: Server, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "FRONTIER_URL": server.url, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "api", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )


def _until(check: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)


def test_tail_prints_records_and_the_frontier_as_an_antichain(
    service: Server, tmp_path: Path
) -> None:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    dataflow = orjson.loads(frontier_cli(service, "submit", str(graph), "--json").stdout)["id"]
    records = tmp_path / "records.jsonl"
    records.write_text('[0, "ab"]\n[1, "c"]\n')
    assert frontier_cli(service, "push", dataflow, "words", str(records)).returncode == 0
    with Client(service.url) as client:
        _until(lambda: client.output_frontier(dataflow, "out") == [2])
        tail = _follow(service, "tail", dataflow, "out")
        try:
            assert tail.stdout is not None
            # The two retained times, then the current frontier: then drop.
            first = [tail.stdout.readline() for _ in range(3)]
            client.drop(dataflow)
            rest, _ = tail.communicate(timeout=30)
        finally:
            if tail.poll() is None:
                tail.kill()
                tail.wait()
    assert tail.returncode == 0
    assert "".join(first) + rest == (
        '0 {"key":2,"count":1}\n'
        '1 {"key":1,"count":1}\n'
        "output out: frontier [2]\n"
        "closed: the dataflow was dropped\n"
    )


def test_serve_refuses_an_address_that_is_not_host_port(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env.update(PYTHONPATH=str(REPO), FRONTIER_CLUSTER_SECRET="s3cret")
    base = [sys.executable, "-m", "api", "serve", "--data-dir", str(tmp_path / "data")]
    base += ["--processes", "2", "--process", "0", "--port", "8081"]
    for flags, said in [
        (
            ["--peers", "127.0.0.1:7001,127.0.0.1:7002", "--apis", "http://127.0.0.1:8081,x:1"],
            "error: Invalid value for --apis: 'http://127.0.0.1:8081' is not host:port "
            "(no scheme or path: 127.0.0.1:8081) (see python -m api serve --help)",
        ),
        (
            ["--peers", "127.0.0.1:7001"],
            "error: Invalid value for --peers: 1 addresses for 2 processes "
            "(see python -m api serve --help)",
        ),
        (
            ["--peers", "127.0.0.1:7001,127.0.0.1:7002", "--apis", "127.0.0.1:8081"],
            "error: Invalid value for --apis: 1 addresses for 2 processes "
            "(see python -m api serve --help)",
        ),
        (
            ["--peers", "127.0.0.1:7001,127.0.0.1/7002"],
            "error: Invalid value for --peers: '127.0.0.1/7002' is not host:port "
            "(no scheme or path: 127.0.0.1) (see python -m api serve --help)",
        ),
    ]:
        result = subprocess.run(
            base + flags, capture_output=True, text=True, timeout=60, cwd=REPO, env=env, check=False
        )
        assert (result.returncode, result.stderr.splitlines()) == (2, [said]), flags
    single = [sys.executable, "-m", "api", "serve", "--data-dir", str(tmp_path / "data")]
    for flags, said in [
        (
            ["--workers", "0"],
            "error: Invalid value for --workers: must be at least 1, not 0 "
            "(see python -m api serve --help)",
        ),
        (
            ["--port", "70000"],
            "error: Invalid value for --port: 70000 is not a port (0 to 65535) "
            "(see python -m api serve --help)",
        ),
        (
            ["--tls-cert", str(tmp_path / "no.pem"), "--tls-key", str(tmp_path / "no.key")],
            f"error: Invalid value for --tls-cert: cannot read {tmp_path / 'no.pem'} "
            "(see python -m api serve --help)",
        ),
        (
            [
                *("--processes", "2", "--process", "0", "--peers", "a:1,b:2"),
                *("--cluster-secret-file", str(tmp_path / "secret")),
            ],
            "error: Invalid value for --cluster-secret-file: cannot read "
            f"{tmp_path / 'secret'}: No such file or directory (see python -m api serve --help)",
        ),
    ]:
        result = subprocess.run(
            single + flags,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            env=env,
            check=False,
        )
        assert (result.returncode, result.stderr.splitlines()) == (2, [said]), flags
    assert not (tmp_path / "data").exists()  # refused before anything started


def test_serve_demo_prints_hints_with_its_own_url(tmp_path: Path) -> None:
    server = launch(tmp_path, "--demo")
    try:
        with Client(server.url) as client:
            [demo] = client.dataflows()
        log = server.log.read_text()
        for hint in [
            f"  frontier push --url {server.url} {demo['id']} words words.jsonl",
            f"  frontier watch --url {server.url} {demo['id']}     # live frontiers",
            f"  frontier tail --url {server.url} {demo['id']} counts",
        ]:
            assert hint in log.splitlines(), log
    finally:
        server.stop()


@pytest.mark.parametrize("flag", ["--version"])
def test_version_is_the_packages(flag: str) -> None:
    from importlib.metadata import version

    result = frontier_cli(Nowhere(), flag)
    assert (result.returncode, result.stdout) == (0, f"frontier {version('frontier')}\n")


def test_a_subscription_cut_short_is_an_error(tmp_path: Path) -> None:
    server = launch(tmp_path)
    with Client(server.url) as client:
        dataflow = client.create_dataflow(
            {
                "nodes": {"words": {"op": "input"}, "out": {"op": "output"}},
                "edges": [["words", "out"]],
            }
        )["id"]
    watch = _follow(server, "watch", dataflow)
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline() != ""  # subscribed
        server.process.kill()  # no closed event: the socket is cut
        server.process.wait(15)
        _, err = watch.communicate(timeout=30)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert (watch.returncode, err) == (
        1,
        f"error: {server.url}: the connection was cut before the subscription ended (is the "
        "server running there? give --url or $FRONTIER_URL)\n",
    )
