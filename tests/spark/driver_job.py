"""A Spark batch job writing events into a dataflow: the driver the crash tests run.

    python tests/spark/driver_job.py URL DATAFLOW WRITER ROWS

Run by a test with its ``stop_before_commit`` hook on the Python path, the job's commit
(which Spark runs in a Python worker of the driver) writes a marker and waits instead of
committing: the test kills the driver's process group there, as a driver that dies between
its tasks and its commit. Or it waits for the test's word before it commits: the test kills
the server meanwhile, and starts it again while the committer retries.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import api.spark

TIMES = 10
KEYS = 7


def main(argv: list[str]) -> None:
    url, dataflow, writer, rows = argv[:4]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("frontier-driver-job")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    api.spark.register(spark)
    events = spark.range(0, int(rows), numPartitions=4).select(
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % KEYS).cast("string")).alias("key"),
    )
    (
        events.write.format("frontier")
        .mode("append")
        .option("url", url)
        .option("dataflow", dataflow)
        .option("input", "rows")
        .option("timeColumn", "t")
        .option("writerId", writer)
        .save()
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
