"""The ``frontier`` data source in real Spark (local, one session for every test).

Few and end to end: the connector's logic is tested without a JVM in ``test_logic.py``.
"""

import json
import os
import re
import runpy
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from api.client import Client, FrontierError
from api.spark.options import transaction_name
from tests.spark.conftest import COUNTS, IDENTITY, ROOT, start_server, wait_for

ROWS = 100_000
TIMES = 10
KEYS = 7


def frontier_options(server: str, dataflow: str) -> dict[str, str]:
    return {"url": server, "dataflow": dataflow}


def expected_counts() -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {}
    for i in range(ROWS):
        per_key = counts.setdefault(i % TIMES, {})
        key = f"k{i % KEYS}"
        per_key[key] = per_key.get(key, 0) + 1
    return counts


def events(spark: SparkSession, rows: int = ROWS, partitions: int = 4) -> DataFrame:
    return spark.range(0, rows, numPartitions=partitions).select(
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % KEYS).cast("string")).alias("key"),
    )


def per_time(rows: list[Any]) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {}
    for row in rows:
        fields = row.asDict()
        record = json.loads(row.record) if "record" in fields else fields
        counts.setdefault(row.time, {})[record["key"]] = record["count"]
    return counts


def test_spark_writes_100k_rows_and_reads_the_counts_back_in_batch_and_streaming(
    spark: SparkSession, server: str, client: Client, tmp_path: Path
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = frontier_options(server, dataflow)
    events(spark).write.format("frontier").mode("append").options(**options).option(
        "input", "rows"
    ).option("timeColumn", "t").option("writerId", "events-" + dataflow).save()
    assert client.input_frontier(dataflow, "rows") == [TIMES]
    # pushed, but not complete: must not be read
    late = client.session(dataflow, "rows")
    late.push([[TIMES, {"key": "k0"}], [TIMES + 1, {"key": "k1"}]])
    wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES])
    expected = expected_counts()

    def batch() -> Any:  # a DataFrameReader keeps the options set on it: one per read
        return spark.read.format("frontier").options(**options).option("output", "out")

    plain = batch().option("numPartitions", "3").load()
    assert plain.schema.simpleString() == "struct<time:bigint,record:string>"
    assert plain.rdd.getNumPartitions() == 3
    assert per_time(plain.collect()) == expected
    typed = batch().option("recordSchema", "key STRING, count LONG").load()
    assert per_time(typed.collect()) == expected

    stream = (
        spark.readStream.format("frontier")
        .options(**options)
        .option("output", "out")
        .option("consumerId", "tests")
        .option("maxRecordsPerTrigger", "40")  # 7 records a time: five whole times a batch
        .load()
        .writeStream.format("memory")
        .queryName("counts_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(120)
    assert [p["numInputRows"] for p in stream.recentProgress if p["numInputRows"]] == [35, 35]
    assert per_time(spark.table("counts_stream").collect()) == expected

    # the consumer committed the first micro-batch (times before 5): those may be forgotten
    with pytest.raises(Exception, match="no longer retained"):
        batch().option("startingTime", "0").load().collect()
    assert per_time(batch().load().collect()) == {t: expected[t] for t in range(5, TIMES)}
    late.close()


def fail_first_attempt(batches: Iterator[Any]) -> Iterator[Any]:
    """Pass rows through; partition 0's first attempt fails after 15,000 rows.

    By then the sink has staged the first 10,000 (Spark hands it 10,000-row batches).
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None
    failing = context.partitionId() == 0 and context.attemptNumber() == 0
    passed = 0
    for batch in batches:
        for offset in range(0, batch.num_rows, 1000):
            yield batch.slice(offset, 1000)
            passed += min(1000, batch.num_rows - offset)
            if failing and passed >= 15_000:
                time.sleep(1)  # let the sink stage what it was given
                raise RuntimeError("the first attempt fails")


def test_a_task_failing_on_its_first_attempt_leaves_no_duplicate_and_no_orphan(
    spark: SparkSession, server: str, client: Client
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = "retry" + uuid.uuid4().hex[:8]
    source = events(spark, rows=40_000, partitions=2)
    (
        source.mapInArrow(fail_first_attempt, source.schema)
        .write.format("frontier")
        .mode("append")
        .options(**frontier_options(server, dataflow))
        .option("input", "rows")
        .option("timeColumn", "t")
        .option("writerId", writer)
        .option("batchSize", "1000")
        .save()
    )
    wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES])
    got = {t: {r["key"]: r["count"] for r in rs} for t, rs in client.times(dataflow, "out")}
    assert sum(n for counts in got.values() for n in counts.values()) == 40_000
    assert got[0] == {f"k{k}": sum(1 for i in range(0, 40_000, 10) if i % 7 == k) for k in range(7)}
    # no attempt's transaction is left staged (committing any of them finds nothing)
    session = client.session(dataflow, "rows")
    for name in [transaction_name(writer, p, a) for p in range(2) for a in range(4)]:
        with pytest.raises(FrontierError) as refused:
            session.commit([name], "probe-" + name)
        assert refused.value.status == 404
    session.close()


def test_a_streaming_write_replayed_after_a_restart_is_applied_once(
    spark: SparkSession, server: str, client: Client, tmp_path: Path
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    files = tmp_path / "in"
    files.mkdir()
    checkpoint = tmp_path / "checkpoint"
    batches = [["a", "b", "a"], ["b"], ["c", "c"], ["a"]]

    def add(index: int) -> None:  # one file a micro-batch, taken in modification order
        path = files / f"{index}.json"
        path.write_text("".join(json.dumps({"key": k}) + "\n" for k in batches[index]))
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))

    for index in range(3):
        add(index)

    def run() -> Any:
        query = (
            spark.readStream.schema("key STRING")
            .option("maxFilesPerTrigger", 1)
            .json(str(files))
            .writeStream.format("frontier")
            .options(**frontier_options(server, dataflow))
            .option("input", "rows")
            .option("writerId", "files-to-counts")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        return query

    def counts() -> dict[int, dict[str, int]]:
        return {t: {r["key"]: r["count"] for r in rs} for t, rs in client.times(dataflow, "out")}

    run()  # micro-batches 0, 1, 2 at times 0, 1, 2
    wait_for(lambda: client.output_frontier(dataflow, "out") == [3])
    first = counts()
    assert first == {0: {"a": 2, "b": 1}, 1: {"b": 1}, 2: {"c": 2}}
    # the driver "dies" after the sink committed micro-batch 2, before Spark recorded it
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    replay = run()
    assert [p["batchId"] for p in replay.recentProgress if p["numInputRows"]] == [2]
    assert counts() == first
    assert client.input_frontier(dataflow, "rows") == [3]
    # and the stream goes on from there
    add(3)
    run()
    wait_for(lambda: client.output_frontier(dataflow, "out") == [4])
    assert counts() == {**first, 3: {"a": 1}}


def test_the_examples_run_as_documented(
    spark: SparkSession, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's two commands, run in this test's Spark session (not two new JVMs)."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Spark") : readme.index("## Layout")]
    commands = [
        shlex.split(line.split("#")[0])
        for line in re.findall(r"^\.venv/bin/python examples/.*$", section, flags=re.M)
    ]
    assert [c[1] for c in commands] == ["examples/spark_produce.py", "examples/spark_consume.py"]

    def run(command: list[str], dataflow: str = "") -> str:
        argv = [server if a == "http://127.0.0.1:8080" else a for a in command[2:]]
        argv = [dataflow if a == "<id>" else a for a in argv]
        runpy.run_path(str(ROOT / command[1]), run_name="example")["main"](argv, spark)
        return capsys.readouterr().out

    dataflow = run(commands[0]).strip().splitlines()[-1]
    assert re.fullmatch(r"[0-9a-f]{32}", dataflow)
    lines = [line for line in run(commands[1], dataflow).splitlines() if line.startswith("time")]
    expected = expected_counts()
    assert lines == [
        f"time {t}: {ROWS // TIMES} events, "
        + " ".join(f"{k}={n}" for k, n in sorted(expected[t].items()))
        for t in range(TIMES)
    ]
    assert lines[0].startswith("time 0: 10000 events, k0=1429 k1=1428")  # as the README says
    # and as the example's own docstring says
    docstring = (ROOT / "examples" / "spark_consume.py").read_text().split('"""')[1]
    claimed = re.search(r"``(time \d+: [^`]*?) \.\.\.``", docstring)
    assert claimed is not None
    assert any(line.startswith(claimed.group(1)) for line in lines), claimed.group(1)


def test_an_identity_dataflow_round_trips_typed_rows(
    spark: SparkSession, server: str, client: Client
) -> None:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    frame = spark.createDataFrame(
        [(3, "x", 1.5, [1, 2]), (4, "y", None, [])],
        "t LONG, name STRING, score DOUBLE, tags ARRAY<INT>",
    )
    frame.write.format("frontier").mode("append").options(
        **frontier_options(server, dataflow)
    ).option("input", "rows").option("timeColumn", "t").option("advanceFrontier", "close").option(
        "writerId", "typed-" + dataflow
    ).save()
    wait_for(lambda: client.output_frontier(dataflow, "out") == [])
    back = (
        spark.read.format("frontier")
        .options(**frontier_options(server, dataflow))
        .option("output", "out")
        .option("recordSchema", "name STRING, score DOUBLE, tags ARRAY<INT>")
        .load()
        .orderBy("time")
        .collect()
    )
    assert [tuple(r) for r in back] == [(3, "x", 1.5, [1, 2]), (4, "y", None, [])]
    with pytest.raises(Exception, match=r'use mode\("append"\)'):
        frame.write.format("frontier").mode("overwrite").options(
            **frontier_options(server, dataflow)
        ).option("input", "rows").option("time", "9").option("writerId", "again").save()


def test_a_batch_job_whose_driver_died_before_its_commit_is_applied_once_when_run_again(
    tmp_path: Path,
) -> None:
    """Tasks staged, the driver killed before the job's commit, the server restarted, the
    job run again: every row once (real processes: server, Spark drivers and their JVMs)."""
    log = tmp_path / "server.log"
    server, url = start_server(log)
    rows, writer = 20_000, "driver-crash"
    job = [sys.executable, str(ROOT / "tests" / "spark" / "driver_job.py")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    try:
        with Client(url) as client:
            dataflow = client.create_dataflow(COUNTS)["id"]
        marker = tmp_path / "staged"
        hook = str(ROOT / "tests" / "spark" / "stop_before_commit")
        driver = subprocess.Popen(
            [*job, url, dataflow, writer, str(rows)],
            env={
                **env,
                "PYTHONPATH": os.pathsep.join([hook, str(ROOT)]),
                "FRONTIER_STOP_BEFORE_COMMIT": str(marker),
            },
            start_new_session=True,  # the driver, its JVM and its Python workers: together
        )
        try:
            wait_for(marker.exists, timeout=180)
        finally:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        with Client(url) as client:
            assert client.input(dataflow, "rows")["staged"] == rows  # staged, not committed
            assert client.output_frontier(dataflow, "out") == [0]
        server.kill()  # and the server dies too; it recovers the staged transactions
        server.wait()
        server, url = start_server(
            log.with_name("server-again.log"), "--data-dir", str(log.with_suffix(".data"))
        )
        with Client(url) as client:
            assert client.input(dataflow, "rows")["staged"] == rows
        rerun = subprocess.run([*job, url, dataflow, writer, str(rows)], env=env, timeout=300)
        assert rerun.returncode == 0
        with Client(url) as client:
            wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES], timeout=30)
            got = {t: {r["key"]: r["count"] for r in rs} for t, rs in client.times(dataflow, "out")}
            assert client.input(dataflow, "rows")["staged"] == 0
        expected: dict[int, dict[str, int]] = {}
        for i in range(rows):
            per_key = expected.setdefault(i % TIMES, {})
            per_key[f"k{i % KEYS}"] = per_key.get(f"k{i % KEYS}", 0) + 1
        assert got == expected
    finally:
        server.kill()
        server.wait()
