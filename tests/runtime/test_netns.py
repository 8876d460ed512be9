"""A cluster across a real network link: two namespaces joined by a veth pair.

Each test makes two network namespaces (``tests/runtime/netns.py``) joined by a veth pair
with addresses in a private /30, and runs one cluster process in each (``ip netns exec``
``python -m tests.runtime.cluster_child``), each listening on its own end of the link. The
workers' outputs must be exactly those of one process running as many workers
(``test_cluster.canonical``: every ``(time, record)`` each worker saw).

Two links: a plain veth pair, and one where ``tc netem`` delays every packet by 5 ms on both
ends. Before the cluster runs on the delayed link, a TCP round trip across it is measured
from namespace a (a connection refused by b: a SYN out, a RST back) and must take at least
4.5 ms: a check that the delay is in place (the clock's granularity is the margin), not a
timing target. A test is skipped naming the reason when the sandbox cannot make its link:
not root, ``ip netns`` refused, or no ``sch_netem`` qdisc in the kernel. Whatever happens,
the namespaces are deleted (and what runs in them killed) when the test ends. Nothing binds
outside the two namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from operators import execute
from tests.runtime.cluster_scenarios import SCENARIOS
from tests.runtime.fabrics import REPO
from tests.runtime.netns import Unavailable, VethPair, veth_pair
from tests.runtime.test_cluster import canonical

DEADLINE = 60.0
DELAY_MS = 5.0
PORT = 7100
"""The cluster's port in each namespace (fresh namespaces: nothing else listens there)."""

RTT = """
import socket, sys, time
best = None
for _ in range(5):
    s = socket.socket()
    s.settimeout(5)
    start = time.perf_counter()
    try:
        s.connect((sys.argv[1], 9))
    except ConnectionRefusedError:
        pass
    elapsed = time.perf_counter() - start
    s.close()
    best = elapsed if best is None else min(best, elapsed)
print(best * 1000)
"""
"""The least of 5 TCP round trips to a closed port at argv[1], in ms (refused: SYN, RST)."""


@pytest.fixture(scope="module", params=[None, DELAY_MS], ids=["veth", "veth-netem-5ms"])
def link(request: pytest.FixtureRequest) -> Iterator[VethPair]:
    """Two namespaces joined by a veth pair (delayed by netem for the second parameter)."""
    try:
        with veth_pair(request.param) as pair:
            yield pair
    except Unavailable as reason:
        pytest.skip(str(reason))


def round_trip_ms(pair: VethPair) -> float:
    """The least TCP round trip from namespace a to b's address, in ms."""
    out = subprocess.run(
        pair.a.command(sys.executable, "-c", RTT, pair.b.address),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return float(out.stdout)


def run_across(pair: VethPair, scenario: str, workers: int) -> list[Any]:
    """Every worker's result, in global order, of process 0 in a and process 1 in b."""
    namespaces = [pair.a, pair.b]
    peers = ",".join(f"{ns.address}:{PORT}" for ns in namespaces)
    children = []
    for index, namespace in enumerate(namespaces):
        command = namespace.command(
            sys.executable,
            "-m",
            "tests.runtime.cluster_child",
            scenario,
            "--processes",
            "2",
            "--index",
            str(index),
            "--workers",
            str(workers),
            "--peers",
            peers,
            "--startup-timeout",
            "20",
        )
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
    results: dict[int, Any] = {}
    try:
        for child in children:
            out, err = child.communicate(timeout=DEADLINE)
            assert child.returncode == 0, err
            line = json.loads(out.strip().splitlines()[-1])
            results.update(zip(line["workers"], line["results"], strict=True))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    return [results[worker] for worker in range(2 * workers)]


def test_the_link_joins_only_the_two_namespaces(link: VethPair) -> None:
    """b is reachable from a across the veth; with netem, a round trip takes >= 4.5 ms."""
    rtt = round_trip_ms(link)
    if link.delay_ms is not None:
        assert rtt >= 0.9 * link.delay_ms, f"round trip {rtt:.3f} ms: is netem delaying?"
    # Neither end is in the host's namespace.
    host = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True)
    assert link.a.address not in host.stdout and link.b.address not in host.stdout


@pytest.mark.parametrize("scenario", ["exchange_count", "loop_collatz"])
async def test_a_cluster_across_the_link_computes_what_one_process_does(
    link: VethPair, scenario: str
) -> None:
    """2 processes x 2 workers, one process in each namespace."""
    if link.delay_ms is not None:
        assert round_trip_ms(link) >= 0.9 * link.delay_ms
    single = json.loads(json.dumps(await execute(SCENARIOS[scenario], 4)))
    assert canonical(run_across(link, scenario, 2)) == canonical(single)
