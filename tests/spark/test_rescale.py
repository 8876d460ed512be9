"""The Spark sink's exactly-once holds across a rescale (real Spark, real processes).

A batch job writes under a ``writerId`` into a dataflow of a 1 x 1 server; the server stops
and its directory is started as process 0 of 2 x 1 with ``--rescale`` (process 1 on an empty
directory). The same job, run again under the same ``writerId`` against process 1 (which
forwards to the input's holder), applies nothing twice: the commit's key and digest came
through the rescale in the input's log.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from pyspark.sql import SparkSession

from api.client import Client
from tests.e2e.conftest import Server
from tests.e2e.test_cluster import ready, stop_all
from tests.e2e.test_rescale import serve
from tests.spark.conftest import COUNTS, wait_for
from tests.spark.test_exactly_once import TIMES, counts, events, expected, write


def test_a_job_run_again_after_a_rescale_applies_nothing_twice(
    spark: SparkSession, tmp_path: Path
) -> None:
    started: list[Server] = []
    try:
        [alone] = servers = serve(tmp_path, 1, 1)
        started += servers
        ready(servers)
        writer = "rescale-" + uuid.uuid4().hex[:8]
        with Client(alone.url) as client:
            dataflow = client.create_dataflow(COUNTS)["id"]
            write(events(spark, 20_000, 2), alone.url, dataflow, writer)
            wait_for(lambda: client.output_frontier(dataflow, "out") == [TIMES])
            assert counts(client, dataflow) == expected(20_000)
        stop_all(servers)
        servers = serve(tmp_path, 2, 1, rescale=True)
        started += servers
        ready(servers)
        # The driver died after the commit, before it could say so: the job runs again, at
        # the process that does not hold the input.
        write(events(spark, 20_000, 2), servers[1].url, dataflow, writer)
        for server in servers:
            with Client(server.url) as client:
                wait_for(lambda c=client: c.output_frontier(dataflow, "out") == [TIMES])
                assert counts(client, dataflow) == expected(20_000)
                described = client.input(dataflow, "rows")
                assert (described["frontier"], described["records_in"], described["staged"]) == (
                    [TIMES],
                    20_000,
                    0,
                )
    finally:
        stop_all(started)
