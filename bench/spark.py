"""Benchmark of the Spark data source: the sink's throughput, and a streaming read's latency.

Run by hand from the repository root (needs the spark extra and Java 17):

    .venv/bin/python bench/spark.py                       # 1,000,000 rows, 3 repeats
    .venv/bin/python bench/spark.py --quick               # 200,000 rows, 1 repeat
    .venv/bin/python bench/spark.py --json bench/results/spark.json

A server (``python -m api serve``) runs in a subprocess on 127.0.0.1 with limits raised so
one job may stage every row (``max_staged_records_per_input``) and the output keeps them.
Spark runs in this process (``--master``, default ``local[2]``; the JVM with its default JIT).

* **Throughput.** One DataFrame of ``--rows`` rows ``(t = id % 10, key = "k" + id % 7,
  value = id)``, cached and counted untimed, is written, in the same run: to Spark's ``noop``
  sink (the cost of producing the rows in Spark), to local Parquet, and through the
  ``frontier`` sink (Arrow bodies of ``--batch-sizes`` rows) into a live dataflow ``input ->
  count_by key "r.key" -> output``, a fresh one per run, after untimed warm-up writes (the
  JVM's JIT, the Python workers, the server's first Arrow body). The sink's time is the
  job's (every task staged, the driver's commit made the rows visible and advanced the
  input); *complete* adds the time until the output's frontier has passed the last time (the
  dataflow has counted every row). Rows/s, median (best) over repeats, and the ratios to
  ``noop`` and Parquet. Every run is checked: the output's counts per key per time add up to
  the rows.
  Target: >= 0.8 M rows/s through the sink.

* **Typed** (``--typed``, issue 20). The same cached DataFrame (``t, key, value``), written
  in one job through the sink into a *typed* input (``schema: key string, value int64``) of
  a dataflow ``input -> output``, against Spark's Parquet writer on the same DataFrame, in
  the same run (target >= 0.7x); then a batch read of the typed output (every row, as
  ``time`` and the typed fields, handed to Spark as Arrow batches) to Spark's ``noop`` sink,
  against Spark reading the same rows from that Parquet file to ``noop`` (target >= 0.5x).
  Every typed write is checked (the input took every row) and so is every read (its count).
  ``--typed`` runs only this part: ``--rows 10000000 --repeats 2`` for the issue's figures.
  Beside them, the **floor** of any Python data source: a source (``FloorSource``, in this
  file) whose readers yield the same rows as the typed read (one partition per time, Arrow
  batches of ``--batch-sizes``'s last size), made once per Python worker and kept, so that
  no network, server or conversion is timed: only Spark taking Arrow batches from its Python
  workers, which every Python data source pays.

* **Latency.** A streaming read (``readStream.format("frontier")``, default trigger, the
  ``foreachBatch`` callback in this process) of a dataflow ``input -> output``; each round
  pushes 10 records at time ``t``, then times from the ``advance`` to ``t + 1`` (the time
  becomes complete) until ``foreachBatch`` has the rows of ``t``. p50/p90/max over rounds,
  and Spark's own phases of those micro-batches (``durationMs``: ``latestOffset`` is the
  connector's, ``walCommit``/``commitOffsets`` the checkpoint's, ``addBatch`` the job's).
  The checkpoint goes to ``--checkpoint-dir`` (default: the temporary directory).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import api.spark
from api.client import Client
from tests.spark.conftest import COUNTS, IDENTITY, start_server

TIMES = 10
WARM_UP = 2
"""Untimed writes into the stub per batch size before the timed ones."""


def spark_session(master: str) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName("frontier-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    api.spark.register(spark)
    return spark


def timed(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def median_best(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f})"


def rate(rows: int, seconds: list[float]) -> float:
    return rows / statistics.median(seconds)


def sink_write(frame: DataFrame, url: str, dataflow: str, size: int) -> None:
    (
        frame.write.format("frontier")
        .mode("append")
        .option("url", url)
        .option("dataflow", dataflow)
        .option("input", "rows")
        .option("timeColumn", "t")
        .option("batchSize", str(size))
        .option("writerId", f"bench-{uuid.uuid4().hex}")  # a new write each time
        .save()
    )


def throughput(
    spark: SparkSession,
    client: Client,
    url: str,
    stub: str,
    rows: int,
    repeats: int,
    sizes: list[int],
) -> dict[str, Any]:
    frame: DataFrame = spark.range(0, rows, numPartitions=spark.sparkContext.defaultParallelism)
    frame = frame.select(
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        F.col("id").alias("value"),
    ).cache()
    frame.count()
    scratch = Path(tempfile.mkdtemp(prefix="frontier-bench-spark-"))
    results: dict[str, Any] = {"rows": rows, "partitions": frame.rdd.getNumPartitions()}
    try:
        noop = [
            timed(lambda: frame.write.format("noop").mode("overwrite").save())
            for _ in range(repeats + 1)
        ][1:]
        parquet = [
            timed(lambda: frame.write.mode("overwrite").parquet(str(scratch / "p")))
            for _ in range(repeats + 1)
        ][1:]
        results["noop"] = {"seconds": noop, "rows_per_s": rate(rows, noop)}
        results["parquet"] = {"seconds": parquet, "rows_per_s": rate(rows, parquet)}
        print(f"noop     {median_best(noop)}  {rate(rows, noop) / 1e6:6.2f} M rows/s")
        print(f"parquet  {median_best(parquet)}  {rate(rows, parquet) / 1e6:6.2f} M rows/s")
        # Warm up before timing anything: the writers' Python workers, the JVM's JIT on this
        # write path (the first writes are up to twice as slow), and the server's Arrow path
        # (its first Arrow body imports pyarrow there).
        for size in sizes:
            for _ in range(WARM_UP):
                sink_write(frame, stub, "warm-up", size)
        warm = client.create_dataflow(COUNTS)["id"]
        sink_write(frame, url, warm, sizes[0])
        client.drop(warm)
        for size in sizes:
            ceiling = [
                timed(lambda size=size: sink_write(frame, stub, "d", size)) for _ in range(repeats)
            ]
            results[f"stub_{size}"] = {"seconds": ceiling, "rows_per_s": rate(rows, ceiling)}
            print(
                f"frontier batchSize={size:<6} into the stub server  {median_best(ceiling)}"
                f"  {rate(rows, ceiling) / 1e6:6.2f} M rows/s"
                f"  (x{rate(rows, ceiling) / results['noop']['rows_per_s']:.2f} noop)"
            )
            written: list[float] = []
            complete: list[float] = []
            for _ in range(repeats):
                dataflow = client.create_dataflow(COUNTS)["id"]
                start = time.perf_counter()
                sink_write(frame, url, dataflow, size)
                written.append(time.perf_counter() - start)
                while client.output_frontier(dataflow, "out") != [TIMES]:
                    time.sleep(0.005)
                complete.append(time.perf_counter() - start)
                total = sum(r["count"] for _, rs in client.times(dataflow, "out") for r in rs)
                assert total == rows, f"the output counted {total} rows, not {rows}"
                client.drop(dataflow)
            sink = rate(rows, written)
            results[f"frontier_{size}"] = {
                "seconds": written,
                "complete_seconds": complete,
                "rows_per_s": sink,
                "complete_rows_per_s": rate(rows, complete),
                "vs_noop": sink / results["noop"]["rows_per_s"],
                "vs_parquet": sink / results["parquet"]["rows_per_s"],
            }
            print(
                f"frontier batchSize={size:<6} into a live dataflow  {median_best(written)}"
                f"  {sink / 1e6:6.2f} M rows/s"
                f"  (x{sink / results['noop']['rows_per_s']:.2f} noop,"
                f" x{sink / results['parquet']['rows_per_s']:.2f} parquet);"
                f" complete {median_best(complete)}  {rate(rows, complete) / 1e6:6.2f} M rows/s"
                f"  target >= 0.8 M rows/s: {'met' if sink >= 0.8e6 else 'NOT met'}"
            )
    finally:
        frame.unpersist()
        shutil.rmtree(scratch, ignore_errors=True)
    return results


TYPED = {
    "nodes": {
        "rows": {"op": "input", "schema": {"key": "string", "value": "int64"}},
        "out": {"op": "output"},
    },
    "edges": [["rows", "out"]],
}


class FloorPartition(InputPartition):  # type: ignore[misc]
    """One time's rows."""

    def __init__(self, time: int) -> None:
        self.time = time


_FLOOR: dict[tuple[int, int, int], list[Any]] = {}
"""Per (rows, time, batch size): the batches a Python worker made for that time (kept)."""


class FloorReader(DataSourceReader):  # type: ignore[misc]
    """Yields each time's rows as the typed read gets them, from memory."""

    def __init__(self, rows: int, size: int) -> None:
        self.rows, self.size = rows, size

    def partitions(self) -> list[FloorPartition]:
        return [FloorPartition(t) for t in range(TIMES)]

    def read(self, partition: Any) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        key = (self.rows, partition.time, self.size)
        batches = _FLOOR.get(key)
        if batches is None:
            values = pa.array(np.arange(partition.time, self.rows, TIMES, dtype=np.int64))
            keys = pc.binary_join_element_wise(
                "k", pc.cast(pc.remainder(values, 7), pa.string()), ""
            )
            times = pa.array(np.full(len(values), partition.time, dtype=np.int64))
            whole = pa.RecordBatch.from_arrays([times, keys, values], ["time", "key", "value"])
            batches = _FLOOR[key] = [
                whole.slice(start, self.size) for start in range(0, len(whole), self.size)
            ]
        yield from batches


class FloorSource(DataSource):  # type: ignore[misc]
    """``format("frontierfloor")``: the rows of the typed read, from the workers' memory."""

    @classmethod
    def name(cls) -> str:
        return "frontierfloor"

    def schema(self) -> str:
        return "time LONG, key STRING, value LONG"

    def reader(self, schema: Any) -> FloorReader:
        return FloorReader(int(self.options["rows"]), int(self.options["size"]))


def typed_throughput(
    spark: SparkSession, client: Client, url: str, rows: int, repeats: int, size: int
) -> dict[str, Any]:
    """Typed write and read against Spark's Parquet writer and reader, in the same run."""
    frame: DataFrame = spark.range(0, rows, numPartitions=spark.sparkContext.defaultParallelism)
    frame = frame.select(
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        F.col("id").alias("value"),
    ).cache()
    frame.count()
    scratch = Path(tempfile.mkdtemp(prefix="frontier-bench-typed-"))
    parquet_path = str(scratch / "p")
    results: dict[str, Any] = {"rows": rows, "batch_size": size}
    write: list[float] = []
    parquet: list[float] = []
    read: list[float] = []
    parquet_read: list[float] = []
    floor: list[float] = []
    spark.dataSource.register(FloorSource)

    def read_floor() -> Any:
        source = spark.read.format("frontierfloor").option("rows", rows).option("size", size)
        return source.load()

    def read_typed(dataflow: str) -> Any:
        return (
            spark.read.format("frontier")
            .option("url", url)
            .option("dataflow", dataflow)
            .option("output", "out")
            .load()
        )

    try:
        warm = client.create_dataflow(TYPED)["id"]  # the JIT, the workers, the server's path
        sink_write(frame.limit(rows // 10), url, warm, size)
        client.close_input(warm, "rows")
        read_typed(warm).write.format("noop").mode("overwrite").save()
        client.drop(warm)
        assert read_floor().count() == rows  # every Python worker makes its batches once
        for _ in range(repeats):
            parquet.append(timed(lambda: frame.write.mode("overwrite").parquet(parquet_path)))
            dataflow = client.create_dataflow(TYPED)["id"]
            write.append(timed(lambda d=dataflow: sink_write(frame, url, d, size)))
            assert client.input(dataflow, "rows")["records_in"] == rows
            client.close_input(dataflow, "rows")
            while client.output_frontier(dataflow, "out") != []:
                time.sleep(0.01)
            parquet_read.append(
                timed(
                    lambda: (
                        spark.read.parquet(parquet_path)
                        .write.format("noop")
                        .mode("overwrite")
                        .save()
                    )
                )
            )
            read.append(
                timed(
                    lambda d=dataflow: read_typed(d).write.format("noop").mode("overwrite").save()
                )
            )
            assert read_typed(dataflow).count() == rows
            client.drop(dataflow)
            floor.append(timed(lambda: read_floor().write.format("noop").mode("overwrite").save()))
    finally:
        frame.unpersist()
        shutil.rmtree(scratch, ignore_errors=True)
    for name, seconds in (
        ("typed_write", write),
        ("parquet_write", parquet),
        ("typed_read", read),
        ("parquet_read", parquet_read),
        ("floor_read", floor),
    ):
        results[name] = {"seconds": seconds, "rows_per_s": rate(rows, seconds)}
        print(f"{name:14s} {median_best(seconds)}  {rate(rows, seconds) / 1e6:6.2f} M rows/s")
    write_ratio = rate(rows, write) / rate(rows, parquet)
    read_ratio = rate(rows, read) / rate(rows, parquet_read)
    results["write_vs_parquet"], results["read_vs_parquet"] = write_ratio, read_ratio
    print(f"typed write / Parquet write x{write_ratio:.2f} (target >= 0.7)")
    print(f"typed read / Parquet read   x{read_ratio:.2f} (target >= 0.5)")
    floor_ratio = rate(rows, floor) / rate(rows, parquet_read)
    results["floor_vs_parquet"] = floor_ratio
    print(f"floor read / Parquet read   x{floor_ratio:.2f} (any Python data source's ceiling)")
    return results


def latency(
    spark: SparkSession, client: Client, url: str, rounds: int, checkpoints: str | None
) -> dict[str, Any]:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    seen: dict[int, float] = {}
    arrived = threading.Condition()

    def on_batch(batch: DataFrame, _batch_id: int) -> None:
        times = {r.time for r in batch.collect()}  # a few rows: one job, no shuffle
        now = time.perf_counter()
        with arrived:
            for t in times:
                seen.setdefault(t, now)
            arrived.notify_all()

    scratch = tempfile.mkdtemp(prefix="frontier-bench-latency-", dir=checkpoints)
    query = (
        spark.readStream.format("frontier")
        .option("url", url)
        .option("dataflow", dataflow)
        .option("output", "out")
        .load()
        .writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", scratch)
        .start()
    )
    session = client.session(dataflow, "rows")
    samples: list[float] = []
    try:
        for t in range(rounds + 3):
            session.push([[t, {"i": i}] for i in range(10)])
            start = time.perf_counter()
            session.advance(t + 1)
            with arrived:
                if not arrived.wait_for(lambda t=t: t in seen, timeout=60):
                    raise RuntimeError(f"time {t} was not read within 60 s")
            if t >= 3:  # the first rounds warm up the query
                samples.append(seen[t] - start)
        progress = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
        session.close()
        shutil.rmtree(scratch, ignore_errors=True)
    # Spark's own account of a micro-batch with rows (median per phase, ms)
    phases = sorted({k for p in progress for k in p["durationMs"]})
    breakdown = {k: statistics.median(p["durationMs"].get(k, 0) for p in progress) for k in phases}
    ms = sorted(s * 1000 for s in samples)
    result = {
        "rounds": rounds,
        "p50_ms": statistics.median(ms),
        "p90_ms": ms[int(0.9 * (len(ms) - 1))],
        "max_ms": ms[-1],
        "spark_phases_ms": breakdown,
    }
    print(
        f"latency  advance -> rows in foreachBatch: p50 {result['p50_ms']:.0f} ms,"
        f" p90 {result['p90_ms']:.0f} ms, max {result['max_ms']:.0f} ms ({rounds} rounds)"
    )
    print(
        "         Spark's phases of a micro-batch (median ms): "
        + ", ".join(f"{k} {v:.0f}" for k, v in breakdown.items())
    )
    return result


# --------------------------------------------------------------------------- the stub server


def stub_server(port: int) -> None:
    """A server that takes the sink's requests and does nothing with the rows (the ceiling).

    It reads each staged Arrow body whole (``read_all``) to count its rows, as any server
    must at least decode it; sessions, commits and aborts are answered at once.
    """
    import pyarrow as pa
    import pyarrow.ipc
    from aiohttp import web

    staged: dict[str, int] = {}
    ack = {"seq": None, "session_time": 0, "input_frontier": [0], "applied": 0}

    async def session(_request: web.Request) -> web.Response:
        return web.json_response({"session": "s", "time": 0}, status=201)

    async def stage(request: web.Request) -> web.Response:
        rows = pa.ipc.open_stream(await request.read()).read_all().num_rows
        name = request.match_info["txn"]
        staged[name] = staged.get(name, 0) + rows
        return web.json_response({"staged": staged[name]})

    async def abort(request: web.Request) -> web.Response:
        return web.json_response({"discarded": staged.pop(request.match_info["txn"], 0)})

    async def commit(request: web.Request) -> web.Response:
        body = await request.json()
        applied = sum(staged.pop(t, 0) for t in body["transactions"])
        return web.json_response({**ack, "applied": applied})

    async def simple(_request: web.Request) -> web.Response:
        return web.json_response(ack)

    base = "/v1/dataflows/{id}/inputs/{input}"
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post(f"{base}/sessions", session)
    app.router.add_put(f"{base}/transactions/{{txn}}", stage)
    app.router.add_delete(f"{base}/transactions/{{txn}}", abort)
    app.router.add_post(f"{base}/commit", commit)
    app.router.add_post(f"{base}/sessions/{{session}}/commit", commit)
    app.router.add_post(f"{base}/sessions/{{session}}/advance", simple)
    app.router.add_delete(f"{base}/sessions/{{session}}", simple)
    import uvloop

    web.run_app(app, host="127.0.0.1", port=port, print=None, loop=uvloop.new_event_loop())


def start_stub() -> tuple[subprocess.Popen[bytes], str]:
    from tests.spark.conftest import free_port

    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, "--stub-server", str(port)])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with Client(url, timeout=2) as client:
                client.session("d", "rows").close()
                return process, url
        except Exception:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", default="10000,50000")
    parser.add_argument("--rounds", type=int, default=20, help="latency rounds")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--checkpoint-dir", help="where the streaming query checkpoints (e.g. /dev/shm)"
    )
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 1 repeat, 5 rounds")
    parser.add_argument("--typed", action="store_true", help="only the typed write and read")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--stub-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stub_server:
        stub_server(args.stub_server)
        return
    if args.quick:
        args.rows, args.repeats, args.rounds = 200_000, 1, 5
    sizes = [int(s) for s in args.batch_sizes.split(",")]

    scratch = Path(tempfile.mkdtemp(prefix="frontier-bench-server-"))
    config = scratch / "settings.json"
    config.write_text(
        json.dumps(
            {
                "limits": {
                    "max_staged_records_per_input": 2 * args.rows,
                    "max_staged_bytes_per_input": 64 * args.rows,
                    "output_retention_records": 4 * args.rows,
                    "output_retention_bytes": 128 * args.rows,
                    "max_body_bytes": 64 * 1024 * 1024,
                }
            }
        )
    )
    server, url = start_server(scratch / "server.log", "--config", str(config))
    stub, stub_url = start_stub()
    print(
        f"# {args.rows:,} rows, {args.repeats} repeats, master {args.master},"
        f" {os.cpu_count()} CPUs shared by Spark, its Python workers and the server"
    )
    try:
        spark = spark_session(args.master)
        with Client(url, timeout=300) as client:
            if args.typed:
                typed = typed_throughput(spark, client, url, args.rows, args.repeats, sizes[-1])
                results = {"typed": typed}
            else:
                results = {
                    "throughput": throughput(
                        spark, client, url, stub_url, args.rows, args.repeats, sizes
                    ),
                    "latency": latency(spark, client, url, args.rounds, args.checkpoint_dir),
                }
        spark.stop()
    finally:
        for process in (server, stub):
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
