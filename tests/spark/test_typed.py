"""Typed inputs and outputs in real Spark: typed columns in, typed columns out.

The sink sends a DataFrame's columns as they are into a typed input (the server checks them
against its schema, in bulk); the source reads a typed output as ``time`` and the records'
fields, typed, from the server's typed Arrow pages.
"""

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from api.client import Client
from tests.spark.conftest import wait_for

SCHEMA = {
    "key": "string",
    "value": "int64",
    "big": "uint64",
    "ratio": "float64?",
    "ok": "bool",
    "tags": {"list": "string"},
    "where": {"object": {"lat": "float64", "lon": "float64"}, "nullable": True},
}
TYPED = {
    "nodes": {"rows": {"op": "input", "schema": SCHEMA}, "out": {"op": "output"}},
    "edges": [["rows", "out"]],
}
ROWS = 20_000
TIMES = 4


def rows(spark: SparkSession) -> Any:
    """``ROWS`` rows of the schema's shape, at times ``id % TIMES``."""
    return spark.range(0, ROWS, numPartitions=3).select(
        (F.col("id") % TIMES).alias("t"),
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        (F.col("id") * 3).alias("value"),
        F.col("id").cast("decimal(20,0)").alias("big"),
        F.when(F.col("id") % 2 == 0, F.col("id") / 4).alias("ratio"),
        (F.col("id") % 3 == 0).alias("ok"),
        F.array(F.lit("a"), F.col("id").cast("string")).alias("tags"),
        F.when(
            F.col("id") % 5 == 0,
            F.struct(F.col("id").cast("double").alias("lat"), F.lit(0.5).alias("lon")),
        ).alias("where"),
    )


def expected(i: int) -> dict[str, Any]:
    return {
        "time": i % TIMES,
        "key": f"k{i % 7}",
        "value": i * 3,
        "big": i,
        "ratio": i / 4 if i % 2 == 0 else None,
        "ok": i % 3 == 0,
        "tags": ["a", str(i)],
        "where": {"lat": float(i), "lon": 0.5} if i % 5 == 0 else None,
    }


def test_spark_writes_typed_columns_and_reads_them_back_typed(
    spark: SparkSession, server: str, client: Client
) -> None:
    dataflow = client.create_dataflow(TYPED)["id"]
    options = {"url": server, "dataflow": dataflow}
    rows(spark).write.format("frontier").mode("append").options(**options).option(
        "input", "rows"
    ).option("timeColumn", "t").option("writerId", "typed-" + dataflow).save()
    assert client.input(dataflow, "rows")["records_in"] == ROWS
    client.close_input(dataflow, "rows")
    wait_for(lambda: client.output_frontier(dataflow, "out") == [])
    read = spark.read.format("frontier").options(**options).option("output", "out").load()
    assert read.schema == StructType(
        [
            StructField("time", LongType(), True),
            StructField("key", StringType(), False),
            StructField("value", LongType(), False),
            StructField("big", DecimalType(20, 0), False),
            StructField("ratio", DoubleType(), True),
            StructField("ok", BooleanType(), False),
            StructField("tags", ArrayType(StringType(), False), False),
            StructField(
                "where",
                StructType(
                    [
                        StructField("lat", DoubleType(), False),
                        StructField("lon", DoubleType(), False),
                    ]
                ),
                True,
            ),
        ]
    )
    got = sorted((row.asDict(recursive=True) for row in read.collect()), key=lambda r: r["value"])
    for row in got:
        row["big"] = int(row["big"])
    assert got == [expected(i) for i in range(ROWS)]
    # A declared subset of the fields, read in bulk too.
    narrow = (
        spark.read.format("frontier")
        .options(**options)
        .option("output", "out")
        .option("recordSchema", "key STRING, value LONG")
        .load()
    )
    assert narrow.filter(F.col("value") == 30).collect()[0].asDict() == {
        "time": 2,
        "key": "k3",
        "value": 30,
    }


def test_a_column_that_does_not_fit_the_schema_fails_the_write_and_stages_nothing(
    spark: SparkSession, server: str, client: Client
) -> None:
    dataflow = client.create_dataflow(TYPED)["id"]
    bad = rows(spark).withColumn("value", F.col("key"))  # a string where int64 is declared
    with pytest.raises(Exception, match=r"value: expected int64, got a column of string"):
        bad.write.format("frontier").mode("append").option("url", server).option(
            "dataflow", dataflow
        ).option("input", "rows").option("timeColumn", "t").option(
            "writerId", "bad-" + dataflow
        ).save()
    shown = client.input(dataflow, "rows")
    assert (shown["records_in"], shown["staged"]) == (0, 0)
