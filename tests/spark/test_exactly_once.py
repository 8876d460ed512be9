"""Exactly once without caveats, in real Spark (issue 16's Spark items).

A task killed hard after staging (its Python worker SIGKILLed: it cannot abort what it
staged) is retried, and the retry discards the dead attempt's rows instead of piling its
own on top of them (which overflowed the staging cap). A batch job run again after its
commit is recognised as done and finishes, applying nothing twice. A stream whose rows
carry event times keeps the latest ``allowedLateness`` times open, and drops rows later
still with ``lateRows=drop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
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
from tests.spark.conftest import COUNTS, start_server, wait_for

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
    """Micro-batches whose rows go back in time: with ``allowedLateness`` 2 the input stays
    two times behind the latest time written, and a row before that is dropped."""
    dataflow = client.create_dataflow(COUNTS)["id"]
    files = tmp_path / "in"
    files.mkdir()
    batches = [
        [(5, "a"), (5, "b"), (6, "a")],  # the input advances to 6 + 1 - 2 = 5
        [(5, "a"), (7, "c")],  # 5 is still open; to 6
        [(4, "late"), (6, "b"), (8, "a")],  # 4 is dropped; to 7
    ]
    for index, rows in enumerate(batches):  # one file a micro-batch, in modification order
        path = files / f"{index}.json"
        path.write_text("".join(json.dumps({"t": t, "key": k}) + "\n" for t, k in rows))
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))

    def run(dataflow: str, **options: str) -> Any:
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

    # Without the options, the input advances past 6 at the first micro-batch: the second
    # one's row at 5 fails the query, naming the options (it died with a bare 409 before).
    strict = client.create_dataflow(COUNTS)["id"]
    query = run(strict)
    assert "rows are before the input's time, and spark.events-" in str(query.exception())
    assert "option allowedLateness keeps the latest times written open" in str(query.exception())
    assert client.input(strict, "rows")["records_in"] == 3

    query = run(dataflow, allowedLateness="2", lateRows="drop")
    assert query.exception() is None
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [3, 2, 3]
    assert client.input_frontier(dataflow, "rows") == [7]
    wait_for(lambda: client.output_frontier(dataflow, "out") == [7])
    assert counts(client, dataflow) == {5: {"a": 2, "b": 1}, 6: {"a": 1, "b": 1}}
    assert client.input(dataflow, "rows")["records_in"] == 7  # the late row was dropped
