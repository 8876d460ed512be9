"""Benchmark of the cluster fabric: the engine across processes beside one process.

Every measurement runs fresh child processes of this script (``child`` mode): each forms
its cluster with ``operators.runtime.cluster.connect`` on 127.0.0.1 (or, for one process,
uses the in-process fabric, as ``execute`` does by default), builds the dataflow, waits at a
start line (a dataflow every worker must close before any sees it complete, so every
process has built everything), runs the workload and prints what it measured as one JSON
line. Timed regions use ``time.perf_counter_ns``, the system-wide monotonic clock on
Linux, so a run's time is the last process's end minus the first process's start. Process
start-up, imports, data generation and connecting are never timed.

* **W1** (``bench/runtime.py``'s keyed pipeline, its functions and data imported from
  there): 2,000,000 records over 100 times, ``map`` -> ``filter`` -> ``count_by`` -> probe,
  on 1 process x 1 worker and on 2 processes x 1 worker (worker ``w`` sends the records
  ``i % 2 == w``; ``count_by`` exchanges half the kept records across the socket).
  Records/s; target: 2 x 1 >= 1.6 x the 1 x 1 rate. Each run's counts are checked against
  ``bench/runtime.py``'s plain loop, untimed.
* **W2** (``bench/runtime.py``'s latency pipeline): input -> map -> filter -> map -> probe,
  100 warm-up times then 1,000 times of 100 integers; the latency of a time runs from just
  before ``advance_to(t + 1)`` to the probe passing it, on worker 0. On 1 x 1, 1 x 2 (two
  workers on one loop) and 2 x 1 (each worker advances its own input; the probe passes
  once the other process's progress arrived). p50 and p99 in µs.
* **Exchange throughput**: worker 0 of 2 processes x 1 worker sends 1,000,000 ``(i, i)``
  records over 100 times, all exchanged to worker 1 (the other process), which counts them.
  Reported in records/s and MB/s of frames on the wire (what the link wrote: headers and
  pickled batches). Baseline in the same run: a bare asyncio socket pair between two
  processes moving the same number of bytes in the same number of writes (the sender
  writes, the receiver ``readexactly``-s until it has them all).

Each measurement is repeated (``--repeats``, default 5), the configurations interleaved
within a repeat; the median over repeats is reported with the min and max. Run from the
repository root::

    .venv/bin/python bench/cluster.py                 # a few minutes
    .venv/bin/python bench/cluster.py --quick         # smaller sizes, 1 repeat
    .venv/bin/python bench/cluster.py --only W1 --repeats 9
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import percentile, table  # bench/common.py (the script's folder)
from runtime import (  # bench/runtime.py: W1 and W2 as the one-process benchmark runs them
    w1_build,
    w1_data,
    w1_plain,
    w1_split,
    w2_double,
    w2_inc,
    w2_keep,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, execute
from operators.runtime import Fabric
from operators.runtime.cluster import ClusterFabric, ClusterSpec, connect

SCRIPT = Path(__file__).resolve()
SECRET = b"bench"
TARGET_W1_SPEEDUP = 1.6


# --------------------------------------------------------------------------- child side


async def start_line(worker: Worker) -> int:
    """Return once every worker has reached this point (so has built what came before)."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.probe()

    handle, probe = worker.dataflow(build)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return time.perf_counter_ns()


async def w1_program(worker: Worker, sizes: dict[str, int]) -> dict[str, Any]:
    batches = w1_data(sizes["records"], sizes["times"], 1000)
    mine = w1_split(batches, worker.peers)[worker.index]
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)

    handle, probe = worker.dataflow(w1_build(out))
    start = await start_line(worker)
    for t, batch in enumerate(mine):
        handle.send_batch(batch)
        handle.advance_to(t + 1)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    end = time.perf_counter_ns()
    return {"start": start, "end": end, "counts": {str(t): dict(v) for t, v in out.items()}}


async def w2_program(worker: Worker, sizes: dict[str, int]) -> dict[str, Any]:
    warmup, times, size = sizes["warmup"], sizes["times"], 100
    batches = [list(range(t * size, (t + 1) * size)) for t in range(warmup + times)]

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.map(w2_inc).filter(w2_keep).map(w2_double).probe()

    handle, probe = worker.dataflow(build)
    start = await start_line(worker)
    clock = time.perf_counter_ns
    latencies: list[int] = []
    for t, batch in enumerate(batches):
        handle.send_batch(batch)
        begin = clock()
        handle.advance_to(t + 1)
        await worker.step_while(functools.partial(probe.less_than, t + 1))
        if t >= warmup:
            latencies.append(clock() - begin)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return {"start": start, "end": clock(), "latencies": latencies}


async def exchange_program(worker: Worker, sizes: dict[str, int]) -> dict[str, Any]:
    per = sizes["records"] // sizes["times"]
    batches = [[(i, i) for i in range(t * per, (t + 1) * per)] for t in range(sizes["times"])]
    received = [0]

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        moved = stream.exchange(lambda _r: 1)
        moved = moved.inspect_batch(lambda _t, rs: received.__setitem__(0, received[0] + len(rs)))
        return handle, moved.probe()

    handle, probe = worker.dataflow(build)
    start = await start_line(worker)
    for t, batch in enumerate(batches if worker.index == 0 else []):
        handle.send_batch(batch)
        handle.advance_to(t + 1)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    end = time.perf_counter_ns()
    fabric = worker.fabric
    sent = [0, 0]
    if isinstance(fabric, ClusterFabric):
        sent = [sum(link.bytes_sent for link in fabric.links.values())]
        sent.append(sum(link.frames_sent for link in fabric.links.values()))
    return {
        "start": start,
        "end": end,
        "received": received[0],
        "bytes": sent[0],
        "frames": sent[1],
    }


PROGRAMS = {"W1": w1_program, "W2": w2_program, "exchange": exchange_program}


async def child_main(args: argparse.Namespace) -> list[Any]:
    sizes = json.loads(args.sizes)
    program = PROGRAMS[args.workload]

    async def work(worker: Worker) -> Any:
        return await program(worker, sizes)

    if args.processes == 1:
        return await execute(work, args.workers, Fabric(args.workers))
    peers = tuple(("127.0.0.1", int(port)) for port in args.ports.split(","))
    spec = ClusterSpec(args.processes, args.index, args.workers, peers, SECRET, 30.0)
    fabric = await connect(spec)
    results = await execute(work, args.workers, fabric)
    await fabric.close()
    return results


async def bare_receive(port: int, total: int, ready: asyncio.Event) -> int:
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got = 0
        while got < total:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        done.set_result(got)
        writer.close()

    server = await asyncio.start_server(on_accept, "127.0.0.1", port)
    ready.set()
    got = await done
    server.close()
    return got


async def bare_child(args: argparse.Namespace) -> dict[str, int]:
    """One end of the bare socket pair: ``--index 1`` receives, ``--index 0`` sends."""
    total, frames = (int(n) for n in args.sizes.split(","))
    port = int(args.ports)
    if args.index == 1:
        ready = asyncio.Event()
        got = await bare_receive(port, total, ready)
        return {"end": time.perf_counter_ns(), "received": got}
    for _ in range(200):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            break
        except OSError:
            await asyncio.sleep(0.05)
    sizes = [total // frames + (1 if i < total % frames else 0) for i in range(frames)]
    chunks = [bytes(size) for size in sizes]
    start = time.perf_counter_ns()
    for chunk in chunks:
        writer.write(chunk)
        await writer.drain()
    writer.close()
    await writer.wait_closed()
    del reader
    return {"start": start}


# --------------------------------------------------------------------------- parent side


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def spawn(mode: str, workload: str, processes: int, workers: int, sizes: str) -> list[Any]:
    """Run one configuration in fresh children; each child's JSON results."""
    ports = ",".join(str(p) for p in free_ports(processes if mode == "cluster" else 1))
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                mode,
                workload,
                f"--processes={processes}",
                f"--index={index}",
                f"--workers={workers}",
                f"--ports={ports}",
                f"--sizes={sizes}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(processes)
    ]
    results = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise RuntimeError(f"{workload} on {processes}x{workers}: exit {child.returncode}")
        results.append(json.loads(out.rstrip("\n").rpartition("\n")[2]))
    return results


def span(results: list[list[dict[str, Any]]]) -> float:
    """Seconds from the first worker's start to the last one's end."""
    flat = [r for process in results for r in process]
    return (max(r["end"] for r in flat) - min(r["start"] for r in flat)) / 1e9


def stats(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def check_w1(results: list[list[dict[str, Any]]], expected: list[dict[int, int]]) -> None:
    merged: list[dict[int, int]] = [{} for _ in expected]
    for process in results:
        for result in process:
            for t, counts in result["counts"].items():
                for key, n in counts.items():
                    assert int(key) not in merged[int(t)], "a key counted on two workers"
                    merged[int(t)][int(key)] = n
    assert merged == [dict(c) for c in expected], "W1 counts differ from the plain loop's"


def run_w1(quick: bool, repeats: int) -> list[str]:
    sizes = {"records": 200_000, "times": 10} if quick else {"records": 2_000_000, "times": 100}
    expected = w1_plain(w1_data(sizes["records"], sizes["times"], 1000))
    rates: dict[str, list[float]] = {"1x1": [], "2x1": []}
    speedups: list[float] = []
    for _ in range(repeats):
        for name, mode, processes in (("1x1", "child", 1), ("2x1", "cluster", 2)):
            results = spawn(mode, "W1", processes, 1, json.dumps(sizes))
            check_w1(results, expected)
            rates[name].append(sizes["records"] / span(results) / 1e6)
        speedups.append(rates["2x1"][-1] / rates["1x1"][-1])
    median = statistics.median(speedups)
    verdict = "MET" if median >= TARGET_W1_SPEEDUP else "NOT MET"
    return [
        f"W1: {sizes['records']:,} records over {sizes['times']} times, map -> filter -> "
        f"count_by -> probe; M records/s, median (min-max) of {repeats}",
        table(
            ["", "M records/s", "vs 1x1 (pairwise)"],
            [
                ["1 process x 1 worker", stats(rates["1x1"]), "1.00"],
                ["2 processes x 1 worker", stats(rates["2x1"]), stats(speedups)],
            ],
        ),
        f"W1 2x1 >= {TARGET_W1_SPEEDUP}x 1x1: {verdict} ({median:.2f}x)",
    ]


def run_w2(quick: bool, repeats: int) -> list[str]:
    sizes = {"warmup": 50, "times": 200} if quick else {"warmup": 100, "times": 1000}
    configs = (("1x1", "child", 1, 1), ("1x2", "child", 1, 2), ("2x1", "cluster", 2, 1))
    p50: dict[str, list[float]] = {name: [] for name, *_ in configs}
    p99: dict[str, list[float]] = {name: [] for name, *_ in configs}
    for _ in range(repeats):
        for name, mode, processes, workers in configs:
            results = spawn(mode, "W2", processes, workers, json.dumps(sizes))
            samples = sorted(results[0][0]["latencies"])  # worker 0
            p50[name].append(percentile(samples, 0.50) / 1e3)
            p99[name].append(percentile(samples, 0.99) / 1e3)
    return [
        f"W2: {sizes['times']} times x 100 records (after {sizes['warmup']} warm-up), input -> "
        f"map -> filter -> map -> probe, advance_to -> probe passes on worker 0; µs, median "
        f"(min-max) of {repeats}",
        table(
            ["", "p50", "p99"],
            [
                ["1 process x 1 worker", stats(p50["1x1"]), stats(p99["1x1"])],
                ["1 process x 2 workers", stats(p50["1x2"]), stats(p99["1x2"])],
                ["2 processes x 1 worker", stats(p50["2x1"]), stats(p99["2x1"])],
            ],
        ),
    ]


def run_exchange(quick: bool, repeats: int) -> list[str]:
    sizes = {"records": 100_000, "times": 10} if quick else {"records": 1_000_000, "times": 100}
    engine_rates: list[float] = []
    engine_mb: list[float] = []
    bare_mb: list[float] = []
    ratios: list[float] = []
    frames = 0
    total = 0
    for _ in range(repeats):
        results = spawn("cluster", "exchange", 2, 1, json.dumps(sizes))
        assert results[1][0]["received"] == sizes["records"], "records lost in the exchange"
        seconds = span(results)
        total, frames = results[0][0]["bytes"], results[0][0]["frames"]
        engine_rates.append(sizes["records"] / seconds / 1e6)
        engine_mb.append(total / seconds / 1e6)
        bare = spawn("bare", "exchange", 2, 1, f"{total},{frames}")
        assert bare[1]["received"] == total, "the bare socket pair lost bytes"
        bare_seconds = (bare[1]["end"] - bare[0]["start"]) / 1e9
        bare_mb.append(total / bare_seconds / 1e6)
        ratios.append(engine_mb[-1] / bare_mb[-1])
    return [
        f"Exchange: {sizes['records']:,} (i, i) records over {sizes['times']} times from "
        f"worker 0 to worker 1 of 2 processes x 1 worker ({total / 1e6:.1f} MB in {frames} "
        f"frames); median (min-max) of {repeats}",
        table(
            ["", "M records/s", "MB/s", "vs bare"],
            [
                ["engine exchange", stats(engine_rates), stats(engine_mb), stats(ratios)],
                ["bare asyncio socket pair, same bytes and writes", "-", stats(bare_mb), "1.00"],
            ],
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "mode", nargs="?", default="run", choices=["run", "child", "cluster", "bare"]
    )
    parser.add_argument("workload", nargs="?", help="a child's workload (internal)")
    parser.add_argument("--only", default="W1,W2,exchange", help="e.g. W1 (default all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat")
    parser.add_argument("--repeats", type=int, help="repeats per measurement (default 5)")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--ports", default="")
    parser.add_argument("--sizes", default="{}")
    args = parser.parse_args(argv)
    if args.mode in ("child", "cluster", "bare"):
        results = uvloop.run(child_main(args) if args.mode != "bare" else bare_child(args))
        # Written to the descriptor itself: after uvloop.run, sys.stdout cut a line bigger
        # than the pipe's buffer at the buffer's size (W1's counts are half a megabyte).
        line = memoryview((json.dumps(results) + "\n").encode())
        while line:
            line = line[os.write(sys.stdout.fileno(), line) :]
        return 0

    repeats = args.repeats or (1 if args.quick else 5)
    print(
        f"cluster benchmark: {args.only}, {repeats} repeat(s){', quick' if args.quick else ''}"
        f"; Python {platform.python_version()}, uvloop {uvloop.__version__}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    runners = {"W1": run_w1, "W2": run_w2, "EXCHANGE": run_exchange}
    for name in args.only.split(","):
        began = time.perf_counter()
        print("\n".join(runners[name.strip().upper()](args.quick, repeats)), flush=True)
        print(f"({time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.2f})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
