"""Spark as a consumer: read the completed times of a Frontier output as a stream.

Reads output ``counts`` of the dataflow ``spark_produce.py`` created, with Structured
Streaming and ``trigger(availableNow=True)``: every time complete now is read exactly once,
then the query stops. ``recordSchema`` turns each record's JSON into typed columns, and
``consumerId`` registers the query as a reader of the output, so the server may forget the
times it has read. Prints one line per time: ``time 0: 10000 events, k0=1429 k1=1428 ...``.

    .venv/bin/python examples/spark_consume.py --url http://127.0.0.1:8080 --dataflow <id>
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from pyspark.sql import SparkSession

import api.spark


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
    parser.add_argument("--dataflow", required=True)
    parser.add_argument("--consumer", default="spark-consume-example")
    parser.add_argument("--checkpoint", help="keep the query's progress here (default: temporary)")
    args = parser.parse_args(argv)

    own = spark is None
    spark = spark or session("frontier-consume")
    api.spark.register(spark)
    counts = (
        spark.readStream.format("frontier")
        .option("url", args.url)
        .option("dataflow", args.dataflow)
        .option("output", "counts")
        .option("recordSchema", "key STRING, count LONG")
        .option("consumerId", args.consumer)
        .option("numPartitions", "2")
        .load()
    )
    with tempfile.TemporaryDirectory() as scratch:
        query = (
            counts.writeStream.format("memory")
            .queryName("counts")
            .option("checkpointLocation", args.checkpoint or os.path.join(scratch, "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    rows = spark.sql("SELECT time, key, count FROM counts ORDER BY time, key").collect()
    per_time: dict[int, list[tuple[str, int]]] = {}
    for row in rows:
        per_time.setdefault(row.time, []).append((row.key, row["count"]))
    for time, pairs in per_time.items():
        total = sum(n for _, n in pairs)
        print(f"time {time}: {total} events, " + " ".join(f"{k}={n}" for k, n in pairs))
    if own:
        spark.stop()


if __name__ == "__main__":
    main()
