"""The service across a real network link: one ``frontier serve`` in each of two namespaces.

Two network namespaces joined by a veth pair (``tests/runtime/netns.py``; with ``tc netem``
delaying every packet 5 ms on both ends where the kernel has it), one process of a
2-process cluster in each (``ip netns exec <ns> python -m api serve --processes 2 --process
I --peers ... --apis ... --host <its address>``), each serving its API and its fabric on its
own end of the link. A client inside namespace a (``ip netns exec``, ``python -c`` with
urllib) creates a dataflow at the process that does not hold the input, pushes at the
other one and advances there, then reads the completed times at both: the same exact
counts, from either process. Skipped naming the reason where the sandbox cannot make the
namespaces (not root, ``ip netns`` refused; the netem variant without ``sch_netem``). The
servers are stopped with SIGTERM and must exit 0; the namespaces are deleted, whatever
happened. Nothing binds outside the two namespaces.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.app.placement import place_inputs
from tests.e2e.conftest import REPO, SHUTDOWN, STARTUP, WORDS_COUNT
from tests.runtime.netns import Unavailable, VethPair, veth_pair

SECRET = "a secret the namespaces share"
API, FABRIC = 8080, 7100
WORKERS = 2

CLIENT = r"""
import json, sys, time, urllib.error, urllib.request

plan = json.loads(sys.argv[1])
deadline = time.monotonic() + plan["timeout"]


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        sys.exit(f"{method} {path}: {error.code} {error.read().decode()}")


def ready(base):
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


for base in plan["apis"]:
    while not ready(base):
        if time.monotonic() > deadline:
            sys.exit(f"{base} not ready")
        time.sleep(0.05)

create, push = plan["create"], plan["push"]
df = call(create, "POST", "/v1/dataflows", {"name": "counts", "graph": plan["graph"]})["id"]
session = call(push, "POST", f"/v1/dataflows/{df}/inputs/words/sessions", {})["session"]
at = f"/v1/dataflows/{df}/inputs/words/sessions/{session}"
acks = [
    call(push, "POST", at + "/push", {"seq": 1, "records": plan["records"]}),
    call(push, "POST", at + "/advance", {"time": 2}),
]
reads = []
for base in plan["apis"]:
    while True:
        read = call(base, "GET", f"/v1/dataflows/{df}/outputs/out/times?from=0&to=2")
        if read["frontier"] == [2] or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    for entry in read["times"]:
        entry["records"].sort(key=lambda r: r["key"])
    reads.append(read)
print(json.dumps({"acks": acks, "reads": reads}))
"""
"""Run in namespace a: wait for both APIs, create, push and advance, read at both."""


@pytest.fixture(scope="module", params=[None, 5.0], ids=["veth", "veth-netem-5ms"])
def link(request: pytest.FixtureRequest) -> Iterator[VethPair]:
    """Two namespaces joined by a veth pair (delayed by netem for the second parameter)."""
    try:
        with veth_pair(request.param) as pair:
            yield pair
    except Unavailable as reason:
        pytest.skip(str(reason))


def serve(pair: VethPair, workdir: Path) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """One process of the cluster in each namespace, on its end of the link."""
    namespaces = [pair.a, pair.b]
    peers = ",".join(f"{ns.address}:{FABRIC}" for ns in namespaces)
    apis = ",".join(f"{ns.address}:{API}" for ns in namespaces)
    servers = []
    for index, namespace in enumerate(namespaces):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
        env |= {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        env["FRONTIER_CLUSTER_SECRET"] = SECRET
        command = [sys.executable, "-m", "api", "serve", "--host", namespace.address]
        command += ["--port", str(API), "--workers", str(WORKERS)]
        command += ["--data-dir", str(workdir / f"data-{index}"), "--durability", "none"]
        command += ["--processes", "2", "--process", str(index)]
        command += ["--peers", peers, "--apis", apis, "--log-format", "text"]
        # Namespaces of the test's own: nobody else reaches them, so no tokens are needed.
        command += ["--allow-anonymous"]
        log = workdir / f"process-{index}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                namespace.command(*command),
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        servers.append((process, log))
    return servers


def stop(servers: list[tuple[subprocess.Popen[bytes], Path]]) -> list[int | None]:
    """SIGTERM each (``ip netns exec`` execs the server: the pid is the server's), then kill."""
    for process, _log in servers:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for process, _log in servers:
        try:
            codes.append(process.wait(SHUTDOWN))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            codes.append(None)
    return codes


def logs(servers: list[tuple[subprocess.Popen[bytes], Path]]) -> str:
    return "\n".join(
        f"--- process {i}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        for i, (_process, log) in enumerate(servers)
    )


def test_a_dataflow_across_the_link(link: VethPair, tmp_path: Path) -> None:
    namespaces = [link.a, link.b]
    # The first dataflow's one input goes to the process holding the fewest: process 0.
    owner = place_inputs(["words"], [0, 0])["words"]
    urls = [f"http://{ns.address}:{API}" for ns in namespaces]
    records: list[Any] = [[0, "a"], [0, "b"], [0, "a"], [1, "c"], [1, "a"]]
    plan = {
        "apis": urls,
        "create": urls[1 - owner],  # the process that does not hold the input
        "push": urls[owner],
        "graph": WORDS_COUNT,
        "records": records,
        "timeout": STARTUP,
    }
    servers = serve(link, tmp_path)
    try:
        client = subprocess.run(
            link.a.command(sys.executable, "-c", CLIENT, json.dumps(plan)),
            capture_output=True,
            text=True,
            timeout=2 * STARTUP,
            check=False,
        )
        assert client.returncode == 0, client.stderr + logs(servers)
        answer = json.loads(client.stdout)
    finally:
        codes = stop(servers)
    assert codes == [0, 0], logs(servers)
    assert [ack["applied"] for ack in answer["acks"]] == [5, 0]
    assert [ack["input_frontier"] for ack in answer["acks"]] == [[0], [2]]
    expected = [
        {"time": 0, "records": [{"key": "a", "count": 2}, {"key": "b", "count": 1}]},
        {"time": 1, "records": [{"key": "a", "count": 1}, {"key": "c", "count": 1}]},
    ]
    for read in answer["reads"]:
        assert (read["times"], read["frontier"]) == (expected, [2])
