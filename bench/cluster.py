"""Benchmark of the cluster fabric: the engine across processes beside one process.

Every measurement runs fresh child processes of this script (``child`` mode): each forms
its cluster with ``operators.runtime.cluster.connect`` on 127.0.0.1 (or, for one process,
uses the in-process fabric, as ``execute`` does by default), builds the dataflow, waits at a
start line (a dataflow every worker must close before any sees it complete, so every
process has built everything), runs the workload and prints what it measured as one JSON
line. Timed regions use ``time.perf_counter_ns``, the system-wide monotonic clock on
Linux, so a run's time is the last process's end minus the first process's start. Process
start-up, imports, data generation and connecting are never timed.

* **W1** (``bench/runtime.py``'s keyed pipeline: its map, its data, and the same count of
  kept records): 2,000,000 records over 100 times, ``map`` -> ``filter`` -> ``count_by`` ->
  probe, on 1 process x 1 worker, 1 x 2 and 2 processes x 1 worker (worker ``w`` sends the
  records ``i % 2 == w``). The filter keeps half of *every* key's records, so ``count_by``'s
  exchange is balanced (``bench/runtime.py`` keeps the even keys, which an int key's own hash
  sends all to worker 0 of 2: ``--skew`` restores that). The records are made once per
  process and frozen out of the garbage collector (``--per-worker-data``: every worker makes
  its own, as before). Records/s, CPU seconds of all processes in the timed region, and how
  busy each process was (CPU time over wall time); target: 2 x 1 >= 1.6 x the 1 x 1 rate.
  Each run's counts are checked against a plain loop, untimed.
* **CW1**, W1 on columns: 40,000,000 records ``{key: int64, value: int64}`` (``key = i %
  1000``) over 10 times, each worker sending its contiguous part of a time in batches of
  100,000, through a typed input -> ``map_columns`` (value doubled) -> ``filter_columns``
  (half of every key) -> ``count_by_columns("key")`` -> a sink that keeps the batches as
  they are; on 1 x 1, 1 x 2 and 2 x 1. Target: 2 x 1 >= 1.8 x 1 x 1. Counts checked
  against pyarrow over all the records, untimed.
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
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import bare_send, percentile, table  # bench/common.py (the script's folder)
from runtime import (  # bench/runtime.py: W1 and W2 as the one-process benchmark runs them
    w1_data,
    w1_keep,
    w1_key,
    w1_map,
    w1_split,
    w2_double,
    w2_inc,
    w2_keep,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import pyarrow.compute as pc
import uvloop

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, execute
from operators.runtime import Fabric, rows_of
from operators.runtime.cluster import ClusterFabric, ClusterSpec, connect
from tests.runtime.fabrics import free_ports  # the tests' own, one for both

SCRIPT = Path(__file__).resolve()
SECRET = b"bench"
TARGET_W1_SPEEDUP = 1.6
TARGET_CW1_SPEEDUP = 1.8
KEYS = 1000


# --------------------------------------------------------------------------- child side


def run_delay() -> int:
    """Nanoseconds this process's thread has waited for a CPU so far (Linux schedstat; 0
    elsewhere): what separates a process that waited for its peer from one the machine's
    other load kept off the CPUs."""
    try:
        with open("/proc/thread-self/schedstat") as file:
            return int(file.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


async def start_line(worker: Worker) -> int:
    """Return once every worker has reached this point (so has built what came before)."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.probe()

    handle, probe = worker.dataflow(build)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return time.perf_counter_ns()


# W1's records are made once per process, shared by its workers, and then frozen out of the
# garbage collector's scans (gc.freeze, as the server does at start): each of two workers of
# one process making its own copy doubled the objects every collection walked, and made 1 x 2
# cost 42% more CPU than 1 x 1 (docs/cluster.md, "Cluster scaling").
_DATA: dict[str, Any] = {}


def w1_keep_balanced(r: tuple[int, int]) -> bool:
    """Half of every key's records (those of even thousands): every key is kept.

    ``bench/runtime.py``'s filter keeps the even keys, and an int key is its own hash, so
    with 2 workers every kept record went to worker 0. (The mapped value is ``2 * i``.)
    """
    return (r[1] // 2000) % 2 == 0


def w1_build(out: dict[int, list[tuple[int, int]]], skew: bool) -> Any:
    """W1's dataflow (map -> filter -> count_by), with the balanced filter unless ``skew``."""
    keep = w1_keep if skew else w1_keep_balanced

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = (
            stream.map(w1_map)
            .filter(keep)
            .count_by(w1_key)
            .inspect_batch(lambda t, rs: out[t].extend(rs))
        )
        return handle, counted.probe()

    return build


def w1_plain(batches: list[list[tuple[int, int]]], skew: bool) -> list[dict[int, int]]:
    """W1's counts by a plain loop (untimed, to check the engine's)."""
    keep = w1_keep if skew else w1_keep_balanced
    result = []
    for batch in batches:
        counts: dict[int, int] = defaultdict(int)
        for record in map(w1_map, batch):
            if keep(record):
                counts[record[0]] += 1
        result.append(counts)
    return result


def w1_share(worker: Worker, sizes: dict[str, Any]) -> list[list[tuple[int, int]]]:
    """This worker's records: made once per process (or per worker with ``per_worker``)."""
    if sizes.get("per_worker"):
        return w1_split(w1_data(sizes["records"], sizes["times"], KEYS), worker.peers)[worker.index]
    if "w1" not in _DATA:
        batches = w1_data(sizes["records"], sizes["times"], KEYS)
        _DATA["w1"] = w1_split(batches, worker.peers)
        del batches
        gc.collect()
        gc.freeze()
    shares: list[list[list[tuple[int, int]]]] = _DATA["w1"]
    return shares[worker.index]


async def w1_program(worker: Worker, sizes: dict[str, Any]) -> dict[str, Any]:
    mine = w1_share(worker, sizes)
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)

    handle, probe = worker.dataflow(w1_build(out, bool(sizes.get("skew"))))
    start = await start_line(worker)
    cpu, delay = time.process_time_ns(), run_delay()
    for t, batch in enumerate(mine):
        handle.send_batch(batch)
        handle.advance_to(t + 1)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    end = time.perf_counter_ns()
    return {
        "start": start,
        "end": end,
        "cpu": [cpu, time.process_time_ns()],
        "waited": [delay, run_delay()],
        "counts": {str(t): dict(v) for t, v in out.items()},
    }


CW1_SCHEMA = pa.schema([("key", pa.int64()), ("value", pa.int64())])


def cw1_double(batch: pa.RecordBatch) -> pa.RecordBatch:
    """W1's map on columns: the value doubled."""
    return batch.set_column(1, "value", pc.multiply(batch.column(1), 2))


def cw1_keep(batch: pa.RecordBatch) -> pa.Array:
    """W1's balanced filter on columns: half of every key's records."""
    return pc.equal(pc.bit_wise_and(pc.divide(batch.column(1), 2000), 1), 0)


def cw1_batches(records: int, times: int, part: int = 0, parts: int = 1) -> list[pa.RecordBatch]:
    """Every time's records ``(i % KEYS, i)`` as one record batch per time, or its ``part``-th
    of ``parts`` contiguous slices (a multiple of ``KEYS`` long: every key in each)."""
    per = records // times
    size = per // parts
    offsets = pa.array(range(size), pa.int64())
    batches = []
    for t in range(times):
        values = pc.add(offsets, t * per + part * size)
        keys = pc.subtract(values, pc.multiply(pc.divide(values, KEYS), KEYS))
        batches.append(pa.RecordBatch.from_arrays([keys, values], schema=CW1_SCHEMA))
    return batches


def cw1_share(worker: Worker, sizes: dict[str, Any]) -> list[pa.RecordBatch]:
    """This worker's contiguous part of every time's records (made before the timed region;
    the objects made so far are frozen out of the garbage collector, as the server does)."""
    batches = cw1_batches(sizes["records"], sizes["times"], worker.index, worker.peers)
    gc.collect()
    gc.freeze()
    return batches


async def cw1_warm_up(worker: Worker) -> None:
    """Run the columnar operators once on a little data, untimed: pyarrow loads its kernels
    (and Acero) on first use, which would otherwise land in the timed region."""

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input(schema=CW1_SCHEMA)
        counted = stream.map_columns(cw1_double).filter_columns(cw1_keep)
        return handle, counted.count_by_columns("key").probe()

    handle, probe = worker.dataflow(build)
    handle.send_batch(cw1_batches(4000, 1)[0])
    handle.close()
    await worker.step_while(lambda: not probe.done())


def keep_containers(stream: Any, out: list[tuple[int, Any]]) -> Any:
    """A sink that keeps each batch as it arrives (columns stay columns: read after timing)."""

    def constructor(capability: Any, _info: Any) -> Any:
        capability.drop()

        def logic(input: Any, _output: Any) -> None:
            out.extend(input.containers())

        return logic

    return stream.unary(constructor, name="Keep")


async def cw1_program(worker: Worker, sizes: dict[str, Any]) -> dict[str, Any]:
    mine = cw1_share(worker, sizes)
    await cw1_warm_up(worker)
    out: list[tuple[int, Any]] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input(schema=CW1_SCHEMA)
        counted = stream.map_columns(cw1_double).filter_columns(cw1_keep).count_by_columns("key")
        return handle, keep_containers(counted, out).probe()

    handle, probe = worker.dataflow(build)
    start = await start_line(worker)
    cpu, delay = time.process_time_ns(), run_delay()
    step = sizes["batch"]
    for t, batch in enumerate(mine):
        for offset in range(0, batch.num_rows, step):  # batches of 100,000: a time is several
            handle.send_batch(batch.slice(offset, step))
        handle.advance_to(t + 1)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    end = time.perf_counter_ns()
    cpu_end, waited = time.process_time_ns(), run_delay()
    counts: dict[str, dict[int, int]] = defaultdict(dict)
    for t, batch in out:
        counts[str(t)].update((r["key"], r["count"]) for r in rows_of(batch))
    return {
        "start": start,
        "end": end,
        "cpu": [cpu, cpu_end],
        "waited": [delay, waited],
        "counts": counts,
    }


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


PROGRAMS = {
    "W1": w1_program,
    "CW1": cw1_program,
    "W2": w2_program,
    "exchange": exchange_program,
}


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
    return {"start": await bare_send(port, total, frames)}


# --------------------------------------------------------------------------- parent side


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


def cpu_and_busy(results: list[list[dict[str, Any]]]) -> tuple[float, float, float]:
    """CPU seconds of all processes in their timed regions, their mean busy fraction, and the
    mean fraction of their wall time they waited for a CPU (the machine's other load).

    A process's workers share its clock: its CPU time runs from its first worker's start to
    its last one's end, and its busy fraction is that over the wall time between them.
    """
    seconds = 0.0
    busy = []
    waited = []
    for process in results:
        cpu = (max(r["cpu"][1] for r in process) - min(r["cpu"][0] for r in process)) / 1e9
        wall = (max(r["end"] for r in process) - min(r["start"] for r in process)) / 1e9
        wait = (max(r["waited"][1] for r in process) - min(r["waited"][0] for r in process)) / 1e9
        seconds += cpu
        busy.append(cpu / wall)
        waited.append(wait / wall)
    return seconds, statistics.mean(busy), statistics.mean(waited)


W1_CONFIGS = (
    ("1x1", "child", 1, 1, "1 process x 1 worker"),
    ("1x2", "child", 1, 2, "1 process x 2 workers (one loop)"),
    ("2x1", "cluster", 2, 1, "2 processes x 1 worker"),
)


def run_configs(
    workload: str,
    sizes: dict[str, Any],
    repeats: int,
    check: Any,
    configs: tuple[tuple[str, str, int, int, str], ...] = W1_CONFIGS,
) -> dict[str, dict[str, list[float]]]:
    """Rates (M records/s), CPU seconds and busy fractions per configuration, interleaved."""
    figures = {
        name: {"rate": [], "cpu": [], "busy": [], "waited": [], "speedup": []}
        for name, *_ in configs
    }
    for _ in range(repeats):
        for name, mode, processes, workers, _label in configs:
            results = spawn(mode, workload, processes, workers, json.dumps(sizes))
            check(results)
            cpu, busy, waited = cpu_and_busy(results)
            figures[name]["rate"].append(sizes["records"] / span(results) / 1e6)
            figures[name]["cpu"].append(cpu)
            figures[name]["busy"].append(100 * busy)
            figures[name]["waited"].append(100 * waited)
        for name, *_ in configs:
            figures[name]["speedup"].append(figures[name]["rate"][-1] / figures["1x1"]["rate"][-1])
    return figures


def scaling_table(
    figures: dict[str, dict[str, list[float]]],
    configs: tuple[tuple[str, str, int, int, str], ...] = W1_CONFIGS,
) -> str:
    return table(
        ["", "M records/s", "vs 1x1 (pairwise)", "CPU s", "busy %", "waited for a CPU %"],
        [
            [
                label,
                stats(figures[name]["rate"]),
                stats(figures[name]["speedup"]),
                stats(figures[name]["cpu"]),
                f"{statistics.median(figures[name]['busy']):.0f}",
                f"{statistics.median(figures[name]['waited']):.0f}",
            ]
            for name, *_, label in configs
        ],
    )


def run_w1(quick: bool, repeats: int, skew: bool = False, per_worker: bool = False) -> list[str]:
    sizes: dict[str, Any] = (
        {"records": 200_000, "times": 10} if quick else {"records": 2_000_000, "times": 100}
    )
    sizes.update(skew=skew, per_worker=per_worker)
    expected = w1_plain(w1_data(sizes["records"], sizes["times"], KEYS), skew)
    figures = run_configs("W1", sizes, repeats, lambda results: check_w1(results, expected))
    median = statistics.median(figures["2x1"]["speedup"])
    verdict = "MET" if median >= TARGET_W1_SPEEDUP else "NOT MET"
    split = "even keys only (all to worker 0 of 2)" if skew else "half of every key (balanced)"
    data = "made by every worker" if per_worker else "made once per process, frozen"
    return [
        f"W1: {sizes['records']:,} records over {sizes['times']} times, map -> filter -> "
        f"count_by -> probe; kept: {split}; data {data}; median (min-max) of {repeats}",
        scaling_table(figures),
        f"W1 2x1 >= {TARGET_W1_SPEEDUP}x 1x1: {verdict} ({median:.2f}x)",
    ]


def cw1_expected(sizes: dict[str, Any]) -> list[dict[int, int]]:
    """CW1's counts per time, computed with pyarrow over the whole data (untimed)."""
    expected = []
    for batch in cw1_batches(sizes["records"], sizes["times"]):
        kept = cw1_keep(cw1_double(batch))
        counted = pa.table(batch.filter(kept)).group_by("key").aggregate([([], "count_all")])
        keys, counts = (counted.column(c).to_pylist() for c in ("key", "count_all"))
        expected.append(dict(zip(keys, counts, strict=True)))
    return expected


def run_cw1(quick: bool, repeats: int) -> list[str]:
    sizes = {"records": 4_000_000 if quick else 40_000_000, "times": 10, "batch": 100_000}
    expected = cw1_expected(sizes)
    figures = run_configs("CW1", sizes, repeats, lambda results: check_w1(results, expected))
    median = statistics.median(figures["2x1"]["speedup"])
    verdict = "MET" if median >= TARGET_CW1_SPEEDUP else "NOT MET"
    return [
        f"Columnar W1: {sizes['records']:,} records over {sizes['times']} times in batches of "
        f"{sizes['batch']:,}, a typed input -> map_columns -> filter_columns -> "
        "count_by_columns -> probe, balanced keys; "
        f"median (min-max) of {repeats}",
        scaling_table(figures),
        f"Columnar W1 2x1 >= {TARGET_CW1_SPEEDUP}x 1x1: {verdict} ({median:.2f}x)",
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
    parser.add_argument("--only", default="W1,CW1,W2,exchange", help="e.g. W1 (default all)")
    parser.add_argument(
        "--skew", action="store_true", help="W1 keeps even keys only, as bench/runtime.py"
    )
    parser.add_argument(
        "--per-worker-data", action="store_true", help="W1's workers each make all the data"
    )
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
    runners = {
        "W1": functools.partial(run_w1, skew=args.skew, per_worker=args.per_worker_data),
        "CW1": run_cw1,
        "W2": run_w2,
        "EXCHANGE": run_exchange,
    }
    for name in args.only.split(","):
        began = time.perf_counter()
        print("\n".join(runners[name.strip().upper()](args.quick, repeats)), flush=True)
        print(f"({time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.2f})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
