"""Benchmark of a rescale: the time to ready of a 1 x 1 server's directory started on 2 x 1.

As ``bench/recovery.py``: a server (1 worker, ``--durability``, default ``none``) on a fresh
data directory takes ``--records`` records of ``bench.service.GRAPH`` over HTTP (10,000 a
push, one time each), the output's completion awaited, then stops (SIGTERM). The directory
is then started, in turn:

* **again as 1 x 1** (a plain restart, the baseline);
* **as process 0 of 2 x 1 with --rescale**, beside process 1 on an empty directory (the
  dataflow is rebuilt on 2 workers, its input replayed at process 0, every record routed by
  the new worker count, half of them to the other process), then back to 1 x 1.

Measured: the time from starting the processes until every one answers ``/readyz`` (process
1 is ready once process 0 has recovered), process 0's own ``frontier_recovery_seconds``, and
the time until the output at every process holds every time whole (the 50 counts of each;
measured after ready, by polling every 50 ms: an upper bound).

    .venv/bin/python bench/rescale.py --records 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Stat, table
from bench.recovery import BATCH, call, metric
from bench.service import GRAPH, free_port

SECRET = "a bench secret"


def start(
    data: list[str], durability: str, rescale: bool
) -> tuple[list[subprocess.Popen[bytes]], list[str], float]:
    """Processes on ``data`` (one each), waited for on ``/readyz``: them, their URLs, the time."""
    processes = len(data)
    apis = [free_port() for _ in data]
    fabric = [free_port() for _ in data]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env["FRONTIER_CLUSTER_SECRET"] = SECRET
    began = time.perf_counter()
    started = []
    for index, directory in enumerate(data):
        command = [sys.executable, "-m", "api", "serve", "--port", str(apis[index])]
        command += ["--workers", "1", "--access-log", "off", "--data-dir", directory]
        command += ["--durability", durability, "--processes", str(processes)]
        command += ["--process", str(index)]
        command += ["--peers", ",".join(f"127.0.0.1:{p}" for p in fabric)]
        command += ["--rescale"] if rescale else []
        started.append(
            subprocess.Popen(
                command,
                cwd=Path(__file__).resolve().parents[1],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        )
    urls = [f"http://127.0.0.1:{port}" for port in apis]
    for url, process in zip(urls, started, strict=True):
        while True:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url + "/readyz", timeout=1) as answer,
            ):
                if answer.status == 200:
                    break
            if process.poll() is not None:
                raise RuntimeError(f"a server exited with {process.returncode}")
            time.sleep(0.01)
    return started, urls, time.perf_counter() - began


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        process.wait(60)


def whole(urls: list[str], dataflow: str, times: int) -> None:
    """Every process's output holds every time, each with its 50 counts."""
    out = f"/v1/dataflows/{dataflow}/outputs/out/times?counts=true&limit=1000"
    for url in urls:
        deadline = time.monotonic() + 120
        while (page := call(url, "GET", out))["frontier"] != [times]:
            assert time.monotonic() < deadline, page["frontier"]
            time.sleep(0.05)
        counts = [entry["count"] for entry in page["times"]]
        assert counts == [50] * min(times, 1000), counts[:5]


def run(records: int, durability: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-rescale-") as root:
        data = [str(Path(root) / "d0"), str(Path(root) / "d1")]
        servers, [url], _ = start(data[:1], durability, False)
        times = records // BATCH
        try:
            dataflow = call(url, "POST", "/v1/dataflows", orjson.dumps({"graph": GRAPH}))["id"]
            base = f"/v1/dataflows/{dataflow}/inputs/in/sessions"
            session = call(url, "POST", base, b"{}")["session"]
            for t in range(times):
                body = orjson.dumps(
                    {"seq": t + 1, "records": [[t, t * BATCH + i] for i in range(BATCH)]}
                )
                call(url, "POST", f"{base}/{session}/push", body)
            call(url, "POST", f"{base}/{session}/advance", orjson.dumps({"time": times}))
            whole([url], dataflow, times)
        finally:
            stop(servers)
        figures = {}
        for name, directories, rescale in (
            ("restart 1x1", data[:1], False),
            ("rescale to 2x1", data, True),
            ("rescale back to 1x1", data[:1], True),
        ):
            servers, urls, ready = start(directories, durability, rescale)
            try:
                figures[f"{name} ready_s"] = ready
                figures[f"{name} recovery_s"] = metric(urls[0], "frontier_recovery_seconds")
                began = time.perf_counter()
                whole(urls, dataflow, times)
                # Ready, the replay may still be on its way through the exchange: until the
                # output is whole at every process.
                figures[f"{name} whole_s"] = ready + time.perf_counter() - began
            finally:
                stop(servers)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--durability", default="none", choices=("fsync", "group", "none"))
    args = parser.parse_args()
    stats: dict[str, Stat] = {}
    for _ in range(args.repeats):
        figures = run(args.records, args.durability)
        print(figures, flush=True)
        for key, value in figures.items():
            stats.setdefault(key, Stat()).values.append(value)
    print(
        f"{args.records:,} records logged ({args.durability}), {args.repeats} repeats: "
        "median (best), seconds"
    )
    print(table(["figure", "value"], [[key, stat.show(digits=2)] for key, stat in stats.items()]))


if __name__ == "__main__":
    main()
