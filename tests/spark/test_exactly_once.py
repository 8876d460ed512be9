"""Exactly once without caveats, in real Spark (issue 16's Spark items, and issue 22's).

A task killed hard after staging (its Python worker SIGKILLed: it cannot abort what it
staged) is retried, and the retry discards the dead attempt's rows instead of piling its
own on top of them (which overflowed the staging cap). A batch job run again after its
commit is recognised as done and finishes, applying nothing twice; one run under the same
``writerId`` with other rows, of the same count, is refused (the rows' digests differ). A
stream whose rows carry event times must say how late a micro-batch may write
(``allowedLateness``); it then keeps the latest times open, drops rows later still and
counts them on the server, and never dies of them. A server killed and started again while
the committer retries lets the job succeed, its rows applied once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from api.client import Client
from api.spark.datasource import FrontierDataSource
from api.spark.options import sink_options
from api.spark.sink import FrontierCommitMessage, FrontierWriter
from tests.spark.conftest import COUNTS, ROOT, free_port, start_server, wait_for

TIMES = 10
KEYS = 7


def events(spark: SparkSession, rows: int, partitions: int) -> DataFrame:
    return spark.range(0, rows, numPartitions=partitions).select(
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % KEYS).cast("string")).alias("key"),
    )


def expected(rows: int) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {}
    for i in range(rows):
        per_key = counts.setdefault(i % TIMES, {})
        per_key[f"k{i % KEYS}"] = per_key.get(f"k{i % KEYS}", 0) + 1
    return counts


def counts(client: Client, dataflow: str) -> dict[int, dict[str, int]]:
    return {t: {r["key"]: r["count"] for r in rs} for t, rs in client.times(dataflow, "out")}


def write(frame: DataFrame, url: str, dataflow: str, writer: str, **options: str) -> None:
    (
        frame.write.format(options.pop("format", "frontier"))
        .mode("append")
        .option("url", url)
        .option("dataflow", dataflow)
        .option("input", "rows")
        .option("timeColumn", "t")
        .option("writerId", writer)
        .options(**options)
        .save()
    )


# --------------------------------------------------------------------------- a retried task


class KilledAfterStaging(FrontierWriter):
    """The sink's batch writer, whose first attempt at partition 0 dies once it has staged.

    SIGKILL, as when an executor is lost: nothing of the task runs after it, so it cannot
    abort what it staged, and Spark never receives its commit message.
    """

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FrontierCommitMessage:
        from pyspark import TaskContext

        message = super().write(iterator)
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() == 0 and context.attemptNumber() == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        return message


class KillingFrontier(FrontierDataSource):
    """``format("frontier_killing")``: the frontier sink with :class:`KilledAfterStaging`."""

    @classmethod
    def name(cls) -> str:
        return "frontier_killing"

    def writer(self, schema: StructType, overwrite: bool) -> FrontierWriter:
        return KilledAfterStaging(sink_options(self.options))


def test_a_task_killed_after_staging_is_retried_and_the_retry_discards_its_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """40,000 rows in two partitions, a staging cap of 50,000: the killed attempt's 20,000
    rows plus the job's 40,000 would not fit; the retry discards them first, so it does."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"limits": {"max_staged_records_per_input": 50_000}}))
    server, url = start_server(tmp_path / "server.log", "--config", str(config))
    try:
        spark.dataSource.register(KillingFrontier)
        with Client(url) as client:
            dataflow = client.create_dataflow(COUNTS)["id"]
            write(events(spark, 40_000, 2), url, dataflow, "killed", format="frontier_killing")
            wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES], timeout=30)
            assert counts(client, dataflow) == expected(40_000)
            assert client.input(dataflow, "rows")["staged"] == 0
    finally:
        server.kill()
        server.wait()


def test_tasks_see_whether_spark_speculates(spark: SparkSession) -> None:
    """``spark.speculation`` reaches the tasks (the SQL configuration is a local property of
    every task): with it on, a retry leaves earlier attempts to the job's commit."""
    from api.spark.sink import speculating

    def seen(_batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        yield pa.RecordBatch.from_pydict({"on": [speculating(TaskContext.get())]})

    def run() -> bool:
        return bool(spark.range(1, numPartitions=1).mapInArrow(seen, "on BOOLEAN").first()[0])

    assert run() is False
    spark.sparkContext.setLocalProperty("spark.speculation", "true")
    try:
        assert run() is True
    finally:
        spark.sparkContext.setLocalProperty("spark.speculation", None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- a job run again


def test_a_batch_job_run_again_after_its_commit_is_recognised_as_done(
    spark: SparkSession, server: str, client: Client
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = "again-" + uuid.uuid4().hex[:8]
    write(events(spark, 20_000, 2), server, dataflow, writer)
    wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES])
    first = counts(client, dataflow)
    assert first == expected(20_000)
    # The driver died after the commit, before it could say so: the job runs again. Its
    # rows are before the input's time now; the commit's key says they are in.
    write(events(spark, 20_000, 2), server, dataflow, writer)
    assert counts(client, dataflow) == first
    described = client.input(dataflow, "rows")
    assert (described["frontier"], described["records_in"], described["staged"]) == (
        [TIMES],
        20_000,
        0,
    )


def test_a_batch_job_that_leaves_the_input_where_it_is_applies_once_when_run_again(
    spark: SparkSession, server: str, client: Client
) -> None:
    """``advanceFrontier=none``: the rows stage again, and the key applies them once."""
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = "none-" + uuid.uuid4().hex[:8]
    for _run in range(2):
        write(events(spark, 20_000, 2), server, dataflow, writer, advanceFrontier="none")
    described = client.input(dataflow, "rows")
    assert (described["frontier"], described["records_in"], described["staged"]) == ([0], 20_000, 0)
    # The same writerId for other rows is not a re-run: refused, nothing applied.
    with pytest.raises(Exception, match=f"writerId '{writer}' was committed before"):
        write(events(spark, 30_000, 2), server, dataflow, writer, advanceFrontier="none")
    session = client.session(dataflow, "rows")
    session.advance(TIMES)
    session.close()
    wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES])
    assert counts(client, dataflow) == expected(20_000)
    assert client.input(dataflow, "rows")["staged"] == 0


def test_a_run_under_a_writer_id_with_other_rows_of_the_same_count_is_refused(
    spark: SparkSession, server: str, client: Client
) -> None:
    """The same count is not the same write: the commit carries a digest of the rows."""
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = "other-" + uuid.uuid4().hex[:8]
    write(events(spark, 20_000, 2), server, dataflow, writer)
    wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES])
    first = counts(client, dataflow)
    assert first == expected(20_000)
    shifted = spark.range(0, 20_000, numPartitions=2).select(  # other keys, as many rows
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), ((F.col("id") + 1) % KEYS).cast("string")).alias("key"),
    )
    with pytest.raises(Exception, match=f"writerId '{writer}' was committed before with other"):
        write(shifted, server, dataflow, writer)
    assert counts(client, dataflow) == first
    described = client.input(dataflow, "rows")
    assert (described["frontier"], described["records_in"], described["staged"]) == (
        [TIMES],
        20_000,
        0,
    )
    # The same rows again are the same write: recognised, and the job succeeds.
    write(events(spark, 20_000, 2), server, dataflow, writer)
    assert counts(client, dataflow) == first


def test_a_batch_write_needs_a_writer_id(spark: SparkSession, server: str, client: Client) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    with pytest.raises(Exception, match="a write needs option 'writerId'"):
        events(spark, 10, 1).write.format("frontier").mode("append").option("url", server).option(
            "dataflow", dataflow
        ).option("input", "rows").option("timeColumn", "t").save()
    assert client.input(dataflow, "rows")["records_in"] == 0


# --------------------------------------------------------------------------- event time


def test_a_stream_with_event_times_keeps_the_latest_times_open_and_drops_later_rows(
    spark: SparkSession, server: str, client: Client, tmp_path: Path
) -> None:
    """Micro-batches whose rows go back in time. With the defaults the query must say how
    far (``allowedLateness``), or it stops before it writes anything; with 2, the input
    stays two times behind the largest time written so far, so no time is reported
    complete that a later micro-batch writes into, and a row before that is dropped (the
    default for streams), counted on the server, and the query goes on."""
    batches = [
        [(5, "a"), (5, "b"), (6, "a")],  # the input advances to 6 + 1 - 2 = 5
        [(5, "a"), (7, "c")],  # 5 is still open; to 6
        [(4, "late"), (6, "b"), (8, "a")],  # 4 is dropped; to 7
    ]

    def add(files: Path, index: int) -> None:  # one file a micro-batch, in modification order
        path = files / f"{index}.json"
        path.write_text("".join(json.dumps({"t": t, "key": k}) + "\n" for t, k in batches[index]))
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))

    def run(dataflow: str, files: Path, **options: str) -> Any:
        query = (
            spark.readStream.schema("t LONG, key STRING")
            .option("maxFilesPerTrigger", 1)
            .json(str(files))
            .writeStream.format("frontier")
            .option("url", server)
            .option("dataflow", dataflow)
            .option("input", "rows")
            .option("timeColumn", "t")
            .option("writerId", "events-" + dataflow)
            .options(**options)
            .option("checkpointLocation", str(tmp_path / dataflow))
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(Exception):
            query.awaitTermination(120)
        return query

    # Without allowedLateness, the writer refuses when Spark plans the first micro-batch,
    # naming the option (on main, the input advanced past 6 at the first micro-batch and the
    # second one's row at 5 killed the query, after time 5 was reported complete).
    strict = client.create_dataflow(COUNTS)["id"]
    (tmp_path / "all").mkdir()
    for index in range(len(batches)):
        add(tmp_path / "all", index)
    query = run(strict, tmp_path / "all")
    assert "needs option 'allowedLateness'" in str(query.exception())
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == []
    assert client.input(strict, "rows")["records_in"] == 0

    # One micro-batch at a time: what a completed time holds never changes after.
    dataflow = client.create_dataflow(COUNTS)["id"]
    files = tmp_path / "in"
    files.mkdir()
    final = {5: {"a": 2, "b": 1}, 6: {"a": 1, "b": 1}}
    for index, (frontier, rows) in enumerate([(5, 3), (6, 2), (7, 3)]):
        add(files, index)
        query = run(dataflow, files, allowedLateness="2")
        assert query.exception() is None
        assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [rows]
        assert client.input_frontier(dataflow, "rows") == [frontier]
        wait_for(lambda frontier=frontier: client.output_frontier(dataflow, "out") == [frontier])
        assert counts(client, dataflow) == {t: c for t, c in final.items() if t < frontier}
    described = client.input(dataflow, "rows")
    assert (described["records_in"], described["dropped_late"]) == (7, 1)  # the row at 4


# --------------------------------------------------------------------------- a server restart


def test_a_server_restarted_while_the_committer_retries_lets_the_job_succeed(
    tmp_path: Path,
) -> None:
    """The tasks staged their rows; the server is SIGKILLed before the job's commit, which
    then gets no answer and makes the commit again, with backoff, for commitRetrySeconds;
    the server is started again on its data directory (the same port) seconds later, longer
    than the 1.5 s the committer retried before: the job succeeds, every row once."""
    log = tmp_path / "server.log"
    port = free_port()
    server, url = start_server(log, port=port)
    rows, writer = 20_000, "restarted"
    job = [sys.executable, str(ROOT / "tests" / "spark" / "driver_job.py")]
    marker = tmp_path / "staged"
    hook = str(ROOT / "tests" / "spark" / "stop_before_commit")
    try:
        with Client(url) as client:
            dataflow = client.create_dataflow(COUNTS)["id"]
        driver = subprocess.Popen(
            [*job, url, dataflow, writer, str(rows)],
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join([hook, str(ROOT)]),
                "PYSPARK_PYTHON": sys.executable,
                "FRONTIER_PAUSE_BEFORE_COMMIT": str(marker),
            },
            start_new_session=True,  # the driver, its JVM and its Python workers: together
        )
        try:
            wait_for(marker.exists, timeout=180)
            server.kill()  # SIGKILL
            server.wait()
            Path(f"{marker}.go").touch()  # the committer commits now: nobody answers
            time.sleep(5)
            assert driver.poll() is None  # still trying
            server, _ = start_server(
                log.with_name("server-again.log"),
                "--data-dir",
                str(log.with_suffix(".data")),
                port=port,
            )
            assert driver.wait(timeout=300) == 0
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
        with Client(url) as client:
            wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES], timeout=30)
            assert counts(client, dataflow) == expected(rows)
            described = client.input(dataflow, "rows")
            assert (described["records_in"], described["staged"]) == (rows, 0)
    finally:
        server.kill()
        server.wait()
