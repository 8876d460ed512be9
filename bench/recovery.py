"""Benchmark of recovery: records replayed per second, and the time to ready after a kill.

A server (``frontier serve``, 1 worker, ``--durability``, default ``none``: the disk's syncs
are measured by ``bench/service.py``, not here) runs in a subprocess on 127.0.0.1 with a
fresh data directory. One dataflow ``input -> map "r * 2" -> count_by key "r % 100" ->
output`` takes ``--records`` records (``int`` records, 10,000 a push at one time each, over
``--records / 10,000`` times) over HTTP; the session is then advanced past the last time and
the output's completion awaited, so the log holds every push. The server is killed
(SIGKILL) and started again on the same directory; what is measured:

* **time to ready**: from the new process's start until ``/readyz`` answers 200 (the process
  start, the checks of every frame, and the replay);
* **replay rate**: records replayed per second of recovery, from the server's own
  ``frontier_recovery_records_replayed`` and ``frontier_recovery_seconds`` (``/metrics``);
* that the recovered output is whole: its completed times each hold the 50 counts (the
  keys of `2r % 100`).

    .venv/bin/python bench/recovery.py --records 10000000 --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Stat, table
from bench.service import GRAPH, free_port

BATCH = 10_000


def call(url: str, method: str, path: str, body: bytes | None = None) -> Any:
    request = urllib.request.Request(url + path, data=body, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=300) as answer:
        return orjson.loads(answer.read() or b"null")


def start(data: str, durability: str) -> tuple[subprocess.Popen[bytes], str, float]:
    port = free_port()
    command = [sys.executable, "-m", "api", "serve", "--port", str(port), "--workers", "1"]
    command += ["--access-log", "off", "--data-dir", data, "--durability", durability]
    began = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")},
    )
    url = f"http://127.0.0.1:{port}"
    while True:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url + "/readyz", timeout=1) as answer,
        ):
            if answer.status == 200:
                return process, url, time.perf_counter() - began
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        time.sleep(0.01)


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "_total "):
                return float(line.split()[-1])
    raise RuntimeError(f"no metric {name}")


def run(records: int, durability: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as data:
        process, url, _ = start(data, durability)
        try:
            dataflow = call(url, "POST", "/v1/dataflows", orjson.dumps({"graph": GRAPH}))["id"]
            base = f"/v1/dataflows/{dataflow}/inputs/in/sessions"
            session = call(url, "POST", base, b"{}")["session"]
            times = records // BATCH
            for t in range(times):
                body = orjson.dumps(
                    {"seq": t + 1, "records": [[t, t * BATCH + i] for i in range(BATCH)]}
                )
                call(url, "POST", f"{base}/{session}/push", body)
            call(url, "POST", f"{base}/{session}/advance", orjson.dumps({"time": times}))
            out = f"/v1/dataflows/{dataflow}/outputs/out/times?counts=true&limit=1000"
            while call(url, "GET", out)["frontier"] != [times]:
                time.sleep(0.05)
            log_bytes = metric(url, "frontier_log_bytes")
        finally:
            process.kill()
            process.wait()
        process, url, ready = start(data, durability)
        try:
            replayed = metric(url, "frontier_recovery_records_replayed")
            seconds = metric(url, "frontier_recovery_seconds")
            page = call(url, "GET", out)
            assert page["frontier"] == [times], page["frontier"]
            counts = [entry["count"] for entry in page["times"]]
            assert counts == [50] * min(times, 1000), counts[:5]  # keys (2r) % 100: even ones
        finally:
            process.kill()
            process.wait()
        return {
            "ready_s": ready,
            "recovery_s": seconds,
            "replayed": replayed,
            "rate": replayed / seconds,
            "log_mb": log_bytes / 1e6,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--durability", default="none", choices=("fsync", "group", "none"))
    args = parser.parse_args()
    stats = {k: Stat() for k in ("ready_s", "recovery_s", "log_mb")}
    rate = Stat(True)
    for _ in range(args.repeats):
        figures = run(args.records, args.durability)
        print(figures, flush=True)
        for key, stat in stats.items():
            stat.values.append(figures[key])
        rate.values.append(figures["rate"])
    print(
        f"{args.records:,} records logged ({args.durability}), {args.repeats} repeats: "
        "median (best)"
    )
    rows = [
        ["time to ready, s", stats["ready_s"].show(digits=2)],
        ["recovery (replay) itself, s", stats["recovery_s"].show(digits=2)],
        ["replayed, M records/s", rate.show(1e6, 2)],
        ["log size, MB", stats["log_mb"].show(digits=0)],
    ]
    print(table(["figure", "value"], rows))


if __name__ == "__main__":
    main()
