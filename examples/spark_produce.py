"""Spark as a producer: write a DataFrame of events into a Frontier input, exactly once.

Creates (unless ``--dataflow`` is given) a dataflow counting events per key per time:
``events`` (input) -> ``count_by`` key ``r.key`` -> ``counts`` (output), then writes
``--rows`` events spread over ``--times`` times with the ``frontier`` data source. The write
is one commit: every row becomes visible at once, and the input advances past the last time,
so those times complete. Prints the dataflow's id (for ``spark_consume.py``).

The write is named (``writerId``, here ``--writer-id``, by default ``events-<dataflow>``): run
again with the same name, after a crash say, it is recognised as done and applies nothing
twice; another write into the same dataflow needs another name.

    .venv/bin/python examples/spark_produce.py --url http://127.0.0.1:8080
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import api.spark
from api.client import Client

GRAPH = {
    "name": "events per key",
    "nodes": {
        "events": {"op": "input"},
        "per_key": {"op": "count_by", "key": "r.key"},
        "counts": {"op": "output"},
    },
    "edges": [["events", "per_key"], ["per_key", "counts"]],
}


def session(app: str) -> SparkSession:
    """A local Spark session on the loopback interface, workers on this Python."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName(app)
        .master(os.environ.get("SPARK_MASTER", "local[2]"))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> None:
    """Parse the arguments and run the job (in ``spark`` if given, which is left running)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("FRONTIER_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--dataflow", help="an existing dataflow with input 'events'")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--writer-id", help="the write's name (default: events-<dataflow>)")
    args = parser.parse_args(argv)

    dataflow = args.dataflow
    if dataflow is None:
        with Client(args.url) as client:
            dataflow = client.create_dataflow(GRAPH)["id"]

    own = spark is None
    spark = spark or session("frontier-produce")
    api.spark.register(spark)
    events = spark.range(args.rows).select(
        (F.col("id") % args.times).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        F.col("id"),
    )
    (
        events.write.format("frontier")
        .mode("append")
        .option("url", args.url)
        .option("dataflow", dataflow)
        .option("input", "events")
        .option("timeColumn", "t")  # the record is {"key": ..., "id": ...}
        .option("writerId", args.writer_id or f"events-{dataflow}")
        .save()
    )
    if own:
        spark.stop()
    print(dataflow)


if __name__ == "__main__":
    main()
