"""Processes of one cluster over real TCP sockets on 127.0.0.1 (``operators.runtime.cluster``).

Each test starts real child processes (``tests/runtime/cluster_child.py``), one per cluster
process, and compares what their workers computed with one process running as many workers:
the outputs must be identical, worker by worker. Start-up refuses a peer whose hello does
not match, naming the field; a peer killed with SIGKILL stops the others, naming it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from operators import Worker, execute
from operators.runtime.cluster import (
    MAGIC,
    PROTOCOL,
    ClusterError,
    ClusterSpec,
    NotAPeer,
    PeerLost,
    _check_hello,
    _hello,
)
from tests.runtime.cluster_scenarios import SCENARIOS
from tests.runtime.fabrics import ClusterPool, Clusters, Layout, free_ports

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


def start(
    scenario: str,
    processes: int,
    workers: int,
    ports: list[int],
    secrets: list[str] | None = None,
    sizes: list[int] | None = None,
    only: list[int] | None = None,
) -> list[subprocess.Popen[str]]:
    """One child per process (of ``only``, if given); ``secrets``/``sizes`` override a
    process's secret or size (a process of another size lists that many peers: ``ports``
    holds enough)."""
    children = []
    for index in range(processes) if only is None else only:
        size = sizes[index] if sizes else processes
        peers = ",".join(f"127.0.0.1:{port}" for port in ports[:size])
        command = [
            sys.executable,
            "-m",
            "tests.runtime.cluster_child",
            scenario,
            "--processes",
            str(size),
            "--index",
            str(index),
            "--workers",
            str(workers),
            "--peers",
            peers,
            "--secret",
            secrets[index] if secrets else "s3cret",
            "--startup-timeout",
            "10",
        ]
        children.append(
            subprocess.Popen(
                command,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
        )
    return children


def finish(children: list[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    """Each child's exit status, stdout and stderr (killed if still running at the deadline)."""
    done = []
    for child in children:
        try:
            out, err = child.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        done.append((child.returncode, out, err))
    return done


def canonical(results: list[Any]) -> list[Any]:
    """Per worker, every ``(time, record)`` it saw, sorted: batch boundaries depend on when
    messages arrive (across sockets, not the same as within one process); what each worker
    receives at each time does not."""
    out = []
    for events in results:
        seen = []
        for event in events:
            if event[0] in ("passed", "done"):
                seen.append(json.dumps(event))
            else:
                seen.extend(json.dumps([event[0], record]) for record in event[1])
        out.append(sorted(seen))
    return out


def run_cluster(scenario: str, processes: int, workers: int) -> list[Any]:
    """Every worker's result, in global worker order, from a cluster of real processes."""
    ended = finish(start(scenario, processes, workers, free_ports(processes)))
    results: dict[int, Any] = {}
    for code, out, err in ended:
        assert code == 0, err
        line = json.loads(out.strip().splitlines()[-1])
        results.update(zip(line["workers"], line["results"], strict=True))
    return [results[w] for w in range(processes * workers)]


@pytest.mark.parametrize("scenario", ["exchange_count", "loop_collatz"])
@pytest.mark.parametrize(("processes", "workers"), [(2, 2), (3, 1)])
async def test_a_cluster_computes_exactly_what_one_process_does(
    scenario: str, processes: int, workers: int
) -> None:
    single = json.loads(json.dumps(await execute(SCENARIOS[scenario], processes * workers)))
    assert canonical(run_cluster(scenario, processes, workers)) == canonical(single)
    if scenario == "exchange_count":
        # Every record was counted once: 50 per worker per time.
        for t in range(4):
            counts = [n for result in single for e in result if e[0] == t for _, n in e[1]]
            assert sum(counts) == 50 * processes * workers


def test_a_peer_with_another_secret_is_refused_naming_the_field() -> None:
    ports = free_ports(2)
    ended = finish(start("exchange_count", 2, 1, ports, secrets=["s3cret", "other"]))
    assert [code for code, _, _ in ended] == [1, 1]
    # Process 0 closes a hello the secret does not prove, says so, and goes on waiting for a
    # peer (issue 22: what is not proven cannot end start-up): its start-up timeout ends it.
    assert "a peer at 127.0.0.1:" in ended[0][2]
    assert "the cluster secret does not match; only that connection is closed" in ended[0][2]
    assert ended[0][2].splitlines()[-1] == (
        f"frontier: process 1 (127.0.0.1:{ports[1]}) did not connect within 10 s"
    )
    assert ended[1][2].startswith(
        f"frontier: process 0 (127.0.0.1:{ports[0]}) closed the connection during the hello"
    )


def test_garbage_on_the_fabric_port_closes_only_that_connection() -> None:
    """4 KiB of garbage, a hello too long and one that never comes, on a starting process's
    fabric port: each connection is closed, and the cluster forms when its peer comes."""
    ports = free_ports(2)
    first = start("exchange_count", 2, 1, ports, only=[0])
    try:
        time.sleep(1.0)  # process 0 listens
        with socket.create_connection(("127.0.0.1", ports[0])) as garbage:
            garbage.sendall(os.urandom(4096))
        with socket.create_connection(("127.0.0.1", ports[0])) as long:
            long.sendall(MAGIC + (1 << 20).to_bytes(4, "little") + b"x" * 4096)
        silent = socket.create_connection(("127.0.0.1", ports[0]))
        time.sleep(0.5)
        assert first[0].poll() is None
        [second] = start("exchange_count", 2, 1, ports, only=[1])
        ended = finish([first[0], second])
        silent.close()
    finally:
        for child in first:
            if child.poll() is None:
                child.kill()
    assert [code for code, _, _ in ended] == [0, 0], [err for _, _, err in ended]
    assert "not a Frontier cluster peer; only that connection is closed" in ended[0][2]
    assert "a hello of 1048576 bytes (at most 4096); only that connection is closed" in ended[0][2]


def test_a_peer_of_another_cluster_size_is_refused_naming_the_field() -> None:
    ports = free_ports(3)
    children = start("exchange_count", 2, 1, ports, sizes=[2, 3])
    ended = finish(children)
    assert [code for code, _, _ in ended] == [1, 1]
    assert "cluster size 3, ours 2" in ended[0][2]


def test_another_protocol_version_or_index_is_refused() -> None:
    ours = ClusterSpec(2, 0, 1, (("127.0.0.1", 1), ("127.0.0.1", 2)), b"k")
    theirs = ClusterSpec(2, 1, 1, (("127.0.0.1", 1), ("127.0.0.1", 2)), b"k")
    assert _check_hello(ours, _hello(theirs), None, "peer") == 1
    hello = json.loads(_hello(theirs))
    hello["protocol"] = PROTOCOL + 1
    # As a peer of that version would send it: its HMAC proves its own fields.
    fields = {k: hello[k] for k in ("protocol", "processes", "index", "workers")}
    text = json.dumps(fields, sort_keys=True).encode()
    hello["mac"] = hmac.new(b"k", text, hashlib.sha256).hexdigest()
    refused = f"peer: protocol version {PROTOCOL + 1}, ours {PROTOCOL}"
    with pytest.raises(ClusterError, match=refused):
        _check_hello(ours, json.dumps(hello).encode(), None, "peer")
    forged = json.loads(_hello(theirs))
    forged["protocol"] = PROTOCOL + 1  # the HMAC no longer proves the fields
    with pytest.raises(NotAPeer, match="peer: the cluster secret does not match"):
        _check_hello(ours, json.dumps(forged).encode(), None, "peer")
    with pytest.raises(ClusterError, match="peer: process index 0 is not another process's"):
        _check_hello(ours, _hello(ours), None, "peer")
    with pytest.raises(ClusterError, match="peer: not a Frontier cluster hello"):
        _check_hello(ours, b"GET / HTTP/1.1", None, "peer")


def test_a_killed_peer_stops_the_others_naming_it() -> None:
    ports = free_ports(2)
    children = start("forever", 2, 1, ports)
    try:
        time.sleep(2.0)  # formed, exchanging
        assert [c.poll() for c in children] == [None, None], [c.stderr.read() for c in children]  # type: ignore[union-attr]
        children[1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        _, err = children[0].communicate(timeout=10)
        assert time.monotonic() - killed < 10.0
        assert children[0].returncode == 1
        assert err == (
            f"frontier: process 1 (127.0.0.1:{ports[1]}): connection lost (the connection closed)\n"
        )
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.communicate()


async def fail_on_worker_zero(worker: Worker) -> int:
    """Worker 0 raises; the others wait for a frontier that can only pass once it ran."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.exchange(lambda r: r).probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        raise ValueError("worker 0 failed")
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    return worker.index


def test_a_failed_process_ends_its_peers_runs_naming_it() -> None:
    """Regression: a process whose run fails drops its links without a goodbye
    (``ClusterFabric.abort``), so its peers end with PeerLost instead of waiting forever."""
    pool = ClusterPool(Layout(2, 1))
    try:
        first, second = pool.run(fail_on_worker_zero, (), timeout=20)
        assert first[0] == "error" and str(first[1]) == "worker 0 failed"
        assert second[0] == "error" and isinstance(second[1], PeerLost)
        assert str(second[1]).startswith("process 0 (127.0.0.1:")
        # How the loss shows first depends on the race between the peer's read and write:
        # the end of the stream, or the OS refusing a write into the closed socket.
        causes = (
            "the connection closed",
            "[Errno 32] Broken pipe",
            "[Errno 104] Connection reset by peer",
        )
        lost = re.fullmatch(
            r"process 0 \(127\.0\.0\.1:\d+\): connection lost \((.*)\)", str(second[1])
        )
        assert lost is not None and lost.group(1) in causes, str(second[1])
        # The pool's processes are fine for the next run.
        with pytest.raises(ValueError, match="worker 0 failed"):
            asyncio.run(Clusters().run(Layout(1, 2), fail_on_worker_zero))
        again = pool.run(fail_on_worker_zero, (), timeout=20)
        assert [reply[0] for reply in again] == ["error", "error"]
    finally:
        pool.kill()
