"""How long a server's ``/healthz`` is blocked while it evaluates a hostile expression.

Run by hand, never by the tests. Issue 16: ``matches`` ran Python's backtracking ``re`` and
comprehensions had no budget, so one record could hold the event loop (every tenant's requests,
``/healthz`` too) for seconds to days. For each ``--checkout`` (say the code before the budget,
``git worktree add /tmp/fr-before 119a50b``, and this repository) and each case:

* the checkout's server is ``<checkout>/.venv/bin/python -m api serve`` if that venv exists,
  else this repository's ``.venv/bin/python`` with ``cwd`` and ``PYTHONPATH`` the checkout
  (checked: ``api`` and ``service`` are imported from it); 1 worker, ``--durability none``
  (the expression is measured, not the disk), access log off;
* the case's graph (``input -> ... -> output``) is submitted: a 422 is reported as *refused*
  (nothing runs); else a producer session is opened, then, while a thread asks ``/healthz``
  every 10 ms over a connection of its own, the hostile record is pushed at time 0 and the
  input closed, and the dataflow's status is polled until it is ``completed`` or ``failed``;
* **blocked** is the longest any ``/healthz`` took from its request to its answer in that
  window (a probe sent while the loop is held waits until it is free: the probe interval is
  the resolution); **done** is from the push to the status read as finished; the outcome is
  the output's record count and the node's record errors.

Cases (sizes by option; each doubles, or quadruples, the work of the one before in ``re`` and
in nested loops):

* ``regex-N``: ``filter r.matches("^(a+)+$")`` on ``"a" * N + "b"`` (``--regex``; ``re``
  takes 2^N steps: 22, 24, 26 characters before; after, RE2 is linear, so 40 and 100,000);
* ``nested-N``: ``filter r.exists(x, r.exists(y, x == y + 1000000))`` on ``[0, ..., N-1]``
  (``--nested``; never true, so N^2 steps; with the budget, refused at submission);
* ``shared-N``: ``map r.xs.map(x, r.xs)`` then ``filter r.exists(l, l.exists(y, y == -1))``
  on ``{"xs": [0, ..., N-1]}`` (``--shared``): the estimate of the filter is linear (each
  range is part of its element), but the map made every element the same list, so N^2 steps:
  the step limit's case.

A case that takes more than ``--cap`` seconds is reported as ``> cap`` and its server is killed
and started again. Each case is run ``--repeats`` times per checkout, checkouts alternating;
the median is shown, with the smallest and largest in brackets.

    .venv/bin/python bench/healthz_blocked.py --checkout /tmp/fr-before --checkout . \\
        --regex 22,24,26,40,100000 --nested 2000,4000,8000 --shared 4000,20000
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import cli_source  # bench/common.py (the script's folder)

ROOT = Path(__file__).resolve().parents[1]
PROBE_INTERVAL = 0.01


class Failure(Exception):
    """The benchmark cannot go on (a server that does not start, an unexpected answer)."""


class TooSlow(Exception):
    """A case took longer than the cap."""


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    operators: list[tuple[str, dict[str, Any]]]
    record: Any

    def graph(self) -> dict[str, Any]:
        names = ["in", *(name for name, _ in self.operators), "out"]
        nodes = {"in": {"op": "input"}, **dict(self.operators), "out": {"op": "output"}}
        edges = [[a, b] for a, b in itertools.pairwise(names)]
        return {"nodes": nodes, "edges": edges}


NESTED = "r.exists(x, r.exists(y, x == y + 1000000))"
"""Never true on ``[0, ..., N-1]``: every pair is visited (with ``x == y``, the first x finds
itself among the first ys and it is over at once)."""


def make_cases(args: argparse.Namespace) -> list[Case]:
    cases = [
        Case(
            f"regex-{n}",
            [("f", {"op": "filter", "expr": 'r.matches("^(a+)+$")'})],
            "a" * n + "b",
        )
        for n in args.regex
    ]
    cases += [
        Case(
            f"nested-{n}",
            [("f", {"op": "filter", "expr": NESTED})],
            list(range(n)),
        )
        for n in args.nested
    ]
    cases += [
        Case(
            f"shared-{n}",
            [
                ("m", {"op": "map", "expr": "r.xs.map(x, r.xs)"}),
                ("f", {"op": "filter", "expr": "r.exists(l, l.exists(y, y == -1))"}),
            ],
            {"xs": list(range(n))},
        )
        for n in args.shared
    ]
    return cases


# --------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def checkout_python(checkout: Path) -> Path:
    own = checkout / ".venv" / "bin" / "python"
    if own.exists():
        return own
    ours = ROOT / ".venv" / "bin" / "python"
    return ours if ours.exists() else Path(sys.executable)


class Server:
    """A checkout's server in a subprocess (1 worker, nothing durable)."""

    def __init__(self, checkout: Path) -> None:
        self.checkout = checkout
        self.python = checkout_python(checkout)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
        self.env["PYTHONPATH"] = str(checkout)
        probe = "import api, service; print(api.__file__); print(service.__file__)"
        found = subprocess.run(
            [str(self.python), "-c", probe],
            cwd=checkout,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        paths = found.stdout.split()
        if found.returncode != 0 or not all(p.startswith(f"{checkout}/") for p in paths):
            raise Failure(f"{self.python} in {checkout} does not import its code: {found}")
        self.process: subprocess.Popen[bytes] | None = None
        self.data = ""
        self.port = 0

    def start(self) -> None:
        self.data = tempfile.mkdtemp(prefix="bench-healthz-")
        self.port = free_port()
        cli = cli_source(self.checkout)
        command = [str(self.python), "-m", "api", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--workers", "1", "--data-dir", self.data]
        if "--durability" in cli:
            command += ["--durability", "none"]
        if "--access-log" in cli:
            command += ["--access-log", "off"]
        self.log = Path(self.data) / "server.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                cwd=self.checkout,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"{self.checkout}: the server exited:\n{self.log.read_text()}")
            with contextlib.suppress(OSError, http.client.HTTPException, Failure):
                if request(self.port, "GET", "/readyz", timeout=1)[0] == 200:
                    return
            time.sleep(0.05)
        raise Failure(f"{self.checkout}: the server was not ready in 60 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        shutil.rmtree(self.data, ignore_errors=True)

    def restart(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
        self.stop()
        self.start()


def request(
    port: int, method: str, path: str, body: Any = None, timeout: float = 30.0
) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"Content-Type": "application/json"}
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        except TimeoutError:
            raise TooSlow from None
        return response.status, (json.loads(raw) if raw else None)
    finally:
        connection.close()


# --------------------------------------------------------------------------- one case


class Prober(threading.Thread):
    """Asks /healthz every PROBE_INTERVAL over one connection; the seconds each answer took."""

    def __init__(self, port: int, cap: float) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.cap = cap
        self.answers: list[float] = []
        self.done = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.cap)
        with contextlib.suppress(OSError, http.client.HTTPException):
            while not self.done.is_set():
                start = time.monotonic()
                connection.request("GET", "/healthz")
                response = connection.getresponse()
                response.read()
                self.answers.append(time.monotonic() - start)
                self.done.wait(PROBE_INTERVAL)
        connection.close()


@dataclass
class Result:
    blocked: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)
    outcome: str = ""


def run_case(server: Server, case: Case, cap: float) -> tuple[float, float, str]:
    """One run: (blocked seconds, done seconds, outcome); raises TooSlow past the cap."""
    port = server.port
    status, created = request(port, "POST", "/v1/dataflows", {"graph": case.graph()})
    if status == 422:
        return 0.0, 0.0, "refused (422): " + created["problems"][0]["detail"][:90] + "..."
    if status != 201:
        raise Failure(f"submitting {case.name}: {status} {created}")
    path = f"/v1/dataflows/{created['id']}"
    status, session = request(port, "POST", f"{path}/inputs/in/sessions", {})
    if status != 201:
        raise Failure(f"session: {status} {session}")
    prober = Prober(port, cap)
    prober.start()
    start = time.monotonic()
    try:
        push = {"seq": 1, "records": [[0, case.record]]}
        request(port, "POST", f"{path}/inputs/in/sessions/{session['session']}/push", push, cap)
        request(port, "POST", f"{path}/inputs/in/close", {}, cap)
        while True:
            if time.monotonic() - start > cap:
                raise TooSlow
            status, described = request(port, "GET", path, timeout=cap)
            if described["status"] in ("completed", "failed"):
                break
            time.sleep(0.01)
        done = time.monotonic() - start
    finally:
        prober.done.set()
        prober.join(cap)
    if prober.is_alive():
        raise TooSlow
    _, times = request(port, "GET", f"{path}/outputs/out/times")
    records = sum(len(entry["records"]) for entry in (times or {}).get("times", []))
    errors = described.get("record_errors") or {}
    outcome = f"{records} out" + "".join(
        f", {node}: {e['count']} dropped ({e['last'][:60]})" for node, e in errors.items()
    )
    if described["status"] == "failed":
        outcome = f"failed: {described.get('error')}"
    request(port, "DELETE", path)
    return max(prober.answers, default=done), done, outcome


# --------------------------------------------------------------------------- main


def show(samples: list[float]) -> str:
    if not samples:
        return "-"
    ms = [s * 1000 for s in samples]
    return f"{statistics.median(ms):9.1f} [{min(ms):.1f}-{max(ms):.1f}]"


def sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, action="append", default=None)
    parser.add_argument("--regex", type=sizes, default=[22, 24, 26, 40, 100_000])
    parser.add_argument("--nested", type=sizes, default=[2_000, 4_000, 8_000])
    parser.add_argument("--shared", type=sizes, default=[4_000, 20_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cap", type=float, default=60.0, help="seconds a case may take")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    cases = make_cases(args)
    servers = [Server(checkout) for checkout in checkouts]
    results = {(c.name, str(s.checkout)): Result() for c in cases for s in servers}
    print(f"{len(checkouts)} checkout(s), {len(cases)} cases, {args.repeats} repeats")
    try:
        for server in servers:
            server.start()
        for repeat in range(args.repeats):
            order = servers if repeat % 2 == 0 else servers[::-1]
            for case in cases:
                for server in order:
                    result = results[(case.name, str(server.checkout))]
                    if result.outcome.startswith("> cap"):
                        continue  # once is enough to know
                    try:
                        blocked, done, outcome = run_case(server, case, args.cap)
                    except TooSlow:
                        result.outcome = f"> cap ({args.cap:g} s): killed"
                        server.restart()
                        continue
                    result.blocked.append(blocked)
                    result.done.append(done)
                    result.outcome = outcome
                    ms = blocked * 1000
                    print(f"  {repeat} {case.name:14} {server.checkout}: blocked {ms:.1f} ms")
    finally:
        for server in servers:
            server.stop()
    print()
    print("ms, median [min-max]")
    for case in cases:
        print(case.name)
        for server in servers:
            result = results[(case.name, str(server.checkout))]
            print(
                f"  {server.checkout!s:32} blocked {show(result.blocked):28} done "
                f"{show(result.done):28} {result.outcome}"
            )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            f"{name} @ {checkout}": {
                "blocked_s": result.blocked,
                "done_s": result.done,
                "outcome": result.outcome,
            }
            for (name, checkout), result in results.items()
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
