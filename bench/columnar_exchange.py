"""Benchmark: batches of columns exchanged between two processes, beside a bare socket pair.

Every measurement runs fresh child processes of this script. The engine run is a cluster
of 2 processes x 1 worker on 127.0.0.1 (``operators.runtime.cluster.connect``): worker 0
sends ``--records`` records ``{"k": int64, "v": int64}`` (16 bytes each) as
:class:`~operators.runtime.Columns` batches of ``--batch`` records, over ``--times``
times, through ``exchange`` with a column key that sends every batch to worker 1 (the
other process), which counts them (``count``, lengths only: no record becomes a Python
object). The link writes each batch as one Arrow IPC frame (``operators/runtime/wire.py``).
Timed from worker 0's start (after a start line every worker passes, so both have built
the dataflow and connected) to worker 1 seeing the last time complete, with the system-wide
monotonic clock. Reported: MB/s of frames on the wire (what the link wrote) and M records/s.

Baseline, in the same run and interleaved: a bare uvloop socket pair between two fresh
processes moving the same number of bytes in the same number of writes (the sender writes
and drains, the receiver reads until it has them all).

Target: the engine's exchange >= 300 MB/s of Arrow frames. Medians (min-max) over
``--repeats`` (default 5). From the repository root::

    .venv/bin/python bench/columnar_exchange.py              # about a minute
    .venv/bin/python bench/columnar_exchange.py --quick      # small sizes, 1 repeat
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import bare_send, table  # bench/common.py (the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
import uvloop

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, execute
from operators.runtime import Columns
from operators.runtime.cluster import ClusterFabric, ClusterSpec, connect
from tests.runtime.fabrics import free_ports  # the tests' own, one for both

SCRIPT = Path(__file__).resolve()
SECRET = b"bench"
TARGET_MB_S = 300.0


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


def _batches(records: int, batch: int) -> list[Columns]:
    """Distinct batches of ``batch`` records (a few, cycled: the sender reuses them)."""
    made = []
    for start in range(0, min(records, 8 * batch), batch):
        keys = pa.array(range(start, start + batch), pa.int64())
        values = pa.array(range(batch), pa.int64())
        made.append(Columns(pa.StructArray.from_arrays([keys, values], ["k", "v"])))
    return made


_ONES: list[pa.Array] = []


def _to_worker_one(batch: Columns) -> pa.Array:
    """Every record's key is 1 (so all go to worker 1): a slice of one array of ones."""
    if not _ONES or len(_ONES[0]) < len(batch):
        _ONES[:] = [pa.array([1] * len(batch), pa.int64())]
    return _ONES[0].slice(0, len(batch))


async def engine_program(worker: Worker, sizes: dict[str, int]) -> dict[str, Any]:
    records, times, size = sizes["records"], sizes["times"], sizes["batch"]
    batches = _batches(records, size)
    per_time = records // size // times
    received = [0]

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        moved = stream.exchange(lambda _r: 1, columns=_to_worker_one)
        counted = moved.count().inspect_batch(
            lambda _t, counts: received.__setitem__(0, received[0] + sum(counts))
        )
        return handle, counted.probe()

    handle, probe = worker.dataflow(build)
    start = await start_line(worker)
    cpu_start = time.process_time()
    if worker.index == 0:
        sent = 0
        for t in range(times):
            for _ in range(per_time):
                handle.send_batch(batches[sent % len(batches)])
                sent += 1
            handle.advance_to(t + 1)
            await worker.step()  # let the link write while the sender goes on
    handle.close()
    await worker.step_while(lambda: not probe.done())
    end = time.perf_counter_ns()
    cpu = time.process_time() - cpu_start
    fabric = worker.fabric
    assert isinstance(fabric, ClusterFabric)
    links = fabric.links.values()
    return {
        "start": start,
        "end": end,
        "received": received[0],
        "cpu": cpu,
        "bytes": sum(link.bytes_sent for link in links),
        "frames": sum(link.frames_sent for link in links),
    }


async def engine_child(args: argparse.Namespace) -> list[Any]:
    sizes = json.loads(args.sizes)
    peers = tuple(("127.0.0.1", int(port)) for port in args.ports.split(","))
    spec = ClusterSpec(2, args.index, 1, peers, SECRET, 30.0)
    fabric = await connect(spec)

    async def work(worker: Worker) -> Any:
        return await engine_program(worker, sizes)

    results = await execute(work, 1, fabric)
    await fabric.close()
    return results


async def bare_child(args: argparse.Namespace) -> dict[str, int]:
    """One end of the bare socket pair: ``--index 1`` receives, ``--index 0`` sends."""
    total, frames = (int(n) for n in args.sizes.split(","))
    port = int(args.ports)
    if args.index == 1:
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
        got = await done
        end = time.perf_counter_ns()
        server.close()
        return {"end": end, "received": got}
    return {"start": await bare_send(port, total, frames)}


# --------------------------------------------------------------------------- parent side


def spawn(mode: str, sizes: str) -> list[Any]:
    """Run one measurement in two fresh children; each child's JSON result."""
    ports = ",".join(str(p) for p in free_ports(2 if mode == "engine" else 1))
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                mode,
                f"--index={i}",
                f"--ports={ports}",
                f"--sizes={sizes}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in (1, 0)  # the receiver first (the bare pair's listens)
    ]
    results = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise RuntimeError(f"{mode}: a child exited with {child.returncode}")
        results.append(json.loads(out.rstrip("\n").rpartition("\n")[2]))
    return results[::-1]  # index order


def stats(values: list[float], digits: int = 0) -> str:
    return (
        f"{statistics.median(values):,.{digits}f} "
        f"({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def run(args: argparse.Namespace) -> list[str]:
    sizes = {"records": args.records, "times": args.times, "batch": args.batch}
    engine_mb: list[float] = []
    engine_records: list[float] = []
    bare_mb: list[float] = []
    ratios: list[float] = []
    busy: dict[str, list[float]] = {"sender": [], "receiver": []}
    total = frames = 0
    for _ in range(args.repeats):
        sender, receiver = spawn("engine", json.dumps(sizes))
        sender, receiver = sender[0], receiver[0]
        expected = args.records // args.batch // args.times * args.times * args.batch
        assert receiver["received"] == expected, "records lost in the exchange"
        seconds = (receiver["end"] - sender["start"]) / 1e9
        total, frames = sender["bytes"], sender["frames"]
        engine_mb.append(total / seconds / 1e6)
        engine_records.append(expected / seconds / 1e6)
        busy["sender"].append(100 * sender["cpu"] / seconds)
        busy["receiver"].append(100 * receiver["cpu"] / seconds)
        bare = spawn("bare", f"{total},{frames}")
        assert bare[1]["received"] == total, "the bare socket pair lost bytes"
        bare_mb.append(total / ((bare[1]["end"] - bare[0]["start"]) / 1e9) / 1e6)
        ratios.append(engine_mb[-1] / bare_mb[-1])
    median = statistics.median(engine_mb)
    verdict = "MET" if median >= TARGET_MB_S else "NOT MET"
    return [
        f"Columnar exchange: {args.records:,} records of 16 bytes in batches of {args.batch:,} "
        f"over {args.times} times, worker 0 -> worker 1 of 2 processes x 1 worker "
        f"({total / 1e6:.0f} MB in {frames} frames); median (min-max) of {args.repeats}",
        table(
            ["", "MB/s", "M records/s", "vs bare", "sender CPU %", "receiver CPU %"],
            [
                [
                    "engine: Arrow IPC frames",
                    stats(engine_mb),
                    stats(engine_records, 1),
                    stats(ratios, 2),
                    stats(busy["sender"]),
                    stats(busy["receiver"]),
                ],
                ["bare socket pair, same bytes and writes", stats(bare_mb), "-", "1.00", "-", "-"],
            ],
        ),
        f"columnar exchange >= {TARGET_MB_S:.0f} MB/s: {verdict} ({median:.0f} MB/s)",
    ]


def routing(repeats: int) -> list[str]:
    """In this process: splitting 1,000,000 records for 2 workers, as columns and as rows."""
    from operators.runtime.channels import route
    from operators.runtime.routing import field_key, route_columns

    n = 1_000_000
    ints = pa.array([(i * 7919) % 1_000_003 for i in range(n)], pa.int64())
    words = pa.array([f"user-{i % 1000}" for i in range(n)])
    rows = []
    for name, keys in (("int keys", ints), ("1,000 distinct string keys", words)):
        columns = Columns(pa.StructArray.from_arrays([keys, ints], ["k", "v"]))
        records = columns.rows()
        timings: dict[str, list[float]] = {"columns": [], "rows": []}
        for _ in range(repeats):
            began = time.perf_counter()
            parts = route_columns(columns, ["k"], 2)
            timings["columns"].append(time.perf_counter() - began)
            began = time.perf_counter()
            by_rows = route(records, field_key(["k"]), 2)
            timings["rows"].append(time.perf_counter() - began)
        assert [len(p) if p else 0 for p in parts] == [len(p) for p in by_rows]
        ratio = statistics.median(timings["rows"]) / statistics.median(timings["columns"])
        rows.append(
            [
                name,
                stats([t * 1e3 for t in timings["columns"]], 1),
                stats([t * 1e3 for t in timings["rows"]], 1),
                f"{ratio:.0f}x",
            ]
        )
    return [
        f"Routing 1,000,000 records for 2 workers in this process (ms, median (min-max) of "
        f"{repeats}): route_columns on Columns beside route on the same records as dicts",
        table(["keys", "columns", "rows", "rows / columns"], rows),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("mode", nargs="?", default="run", choices=["run", "engine", "bare"])
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repeat")
    parser.add_argument("--repeats", type=int, help="repeats (default 5)")
    parser.add_argument("--records", type=int, help="records sent (default 16,777,216)")
    parser.add_argument("--batch", type=int, default=65536, help="records per batch")
    parser.add_argument("--times", type=int, default=64, help="times the records span")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--ports", default="")
    parser.add_argument("--sizes", default="{}")
    args = parser.parse_args(argv)
    if args.mode != "run":
        result = uvloop.run(engine_child(args) if args.mode == "engine" else bare_child(args))
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    args.repeats = args.repeats or (1 if args.quick else 5)
    args.records = args.records or (1 << 21 if args.quick else 1 << 24)
    args.times = max(1, min(args.times, args.records // args.batch))
    print(
        f"columnar exchange benchmark, {args.repeats} repeat(s); Python "
        f"{platform.python_version()}, pyarrow {pa.__version__}, uvloop {uvloop.__version__}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    began = time.perf_counter()
    print("\n".join(run(args)))
    print("\n".join(routing(args.repeats)))
    print(f"({time.perf_counter() - began:.0f} s; load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
