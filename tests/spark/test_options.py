"""Option parsing and validation of the Spark data source (pure Python: no JVM, no server)."""

import pytest

from api.spark.options import (
    DEFAULT_BATCH_SIZE,
    MAX_SPARK_TIME,
    OptionError,
    idempotency_key,
    sink_options,
    source_options,
    source_schema,
    swept_attempts,
    transaction_name,
)

BASE = {"url": "http://127.0.0.1:8080/", "dataflow": "d1"}


def test_sink_options_arrive_lower_cased_and_as_strings() -> None:
    options = sink_options(
        {
            **BASE,
            "input": "rows",
            "timecolumn": "t",
            "advancefrontier": "CLOSE",
            "batchsize": "500",
            "writerid": "job-7",
            "token": "s3cret",
        }
    )
    assert options.connection.url == "http://127.0.0.1:8080"
    assert options.connection.dataflow == "d1"
    assert options.connection.token == "s3cret"
    assert (options.input, options.time_column, options.time) == ("rows", "t", None)
    assert (options.advance, options.batch_size, options.writer_id) == ("close", 500, "job-7")


def test_sink_options_accept_any_case_and_have_defaults() -> None:
    options = sink_options({**BASE, "Input": "rows", "Time": "4", "WriterId": "w"})
    assert options.time == 4
    assert options.advance == "max"
    assert options.batch_size == DEFAULT_BATCH_SIZE
    assert options.value_column is None
    assert (options.allowed_lateness, options.late_rows) == (0, "fail")
    late = sink_options(
        {**BASE, "input": "i", "timeColumn": "t", "writerId": "w", "allowedLateness": "3"}
        | {"lateRows": "DROP"}
    )
    assert (late.allowed_lateness, late.late_rows) == (3, "drop")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dataflow": "d", "input": "i", "time": "0"}, "'url' is required"),
        ({"url": "ftp://x", "dataflow": "d", "input": "i", "time": "0"}, "http://"),
        ({"url": "http://x", "input": "i", "time": "0"}, "'dataflow' is required"),
        ({**BASE, "time": "0"}, "'input' is required"),
        ({**BASE, "input": "a b", "time": "0"}, "node name"),
        ({**BASE, "input": "i"}, "needs option 'timeColumn'"),
        ({**BASE, "input": "i", "time": "1", "timecolumn": "t"}, "not both"),
        ({**BASE, "input": "i", "time": "-1"}, "from 0 to"),
        ({**BASE, "input": "i", "time": str(2**63)}, "from 0 to"),
        ({**BASE, "input": "i", "time": "soon"}, "must be an integer"),
        ({**BASE, "input": "i", "time": "0", "advancefrontier": "far"}, "advanceFrontier"),
        ({**BASE, "input": "i", "time": "0", "batchsize": "0"}, "batchSize"),
        ({**BASE, "input": "i", "time": "0", "batchsize": "100001"}, "batchSize"),
        ({**BASE, "input": "i", "time": "0", "writerid": "a/b"}, "writerId"),
        ({**BASE, "input": "i", "time": "0", "timeoffset": "3"}, "for streaming writes"),
        ({**BASE, "input": "i", "time": "0", "timeout": "-1"}, "timeout"),
        ({**BASE, "input": "i", "timecolumn": "v", "valuecolumn": "v"}, "same column"),
        ({**BASE, "input": "i", "time": "0", "allowedlateness": "2"}, "rows with their own"),
        (
            {**BASE, "input": "i", "timecolumn": "t", "allowedlateness": "2"}
            | {"advancefrontier": "none"},
            "advanceFrontier max",
        ),
        ({**BASE, "input": "i", "timecolumn": "t", "allowedlateness": "-1"}, "from 0 to"),
        ({**BASE, "input": "i", "time": "0", "laterows": "skip"}, "'lateRows' must be fail"),
        (
            {**BASE, "input": "i", "time": "0", "commitretryseconds": "soon"},
            "'commitRetrySeconds' must be a number of seconds, not 'soon'",
        ),
        (
            {**BASE, "input": "i", "time": "0", "commitretryseconds": "-1"},
            "'commitRetrySeconds' must be from 0 to 86400 seconds, not '-1'",
        ),
        ({**BASE, "input": "i", "time": "0", "commitretryseconds": "nan"}, "from 0 to 86400"),
        ({**BASE, "input": "i", "time": "0", "commitretryseconds": "1e9"}, "from 0 to 86400"),
    ],
)
def test_bad_sink_options_are_refused_naming_the_option(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        sink_options({"writerid": "w", **options})


def test_a_batch_write_needs_a_writer_id() -> None:
    """A job run again must be known for the same write: Spark gives the sink nothing that
    outlives the driver, and rows alone cannot tell a re-run from a second write of them."""
    with pytest.raises(OptionError) as refused:
        sink_options({**BASE, "input": "rows", "timeColumn": "t"})
    assert str(refused.value) == (
        "a write needs option 'writerId': a name for this write that stays the same when the "
        "job is run again (after its driver died, say), so a write committed before is "
        "recognised and not applied twice; another write needs another name "
        "(orders-2026-01-05, say)"
    )


def test_a_stream_needs_a_writer_id_and_defaults_to_batch_times() -> None:
    with pytest.raises(OptionError, match="writerId"):
        sink_options({**BASE, "input": "rows"}, streaming=True)
    with pytest.raises(OptionError, match="close is for batch writes"):
        sink_options({**BASE, "input": "r", "writerid": "w", "advancefrontier": "close"}, True)
    options = sink_options({**BASE, "input": "rows", "writerid": "w", "timeoffset": "100"}, True)
    assert (options.time_column, options.time, options.time_offset) == (None, None, 100)


def test_the_commit_is_made_again_for_a_minute_by_default() -> None:
    options = sink_options({**BASE, "input": "i", "time": "0", "writerId": "w"})
    assert options.commit_retry_seconds == 60.0
    quick = {**BASE, "input": "i", "time": "0", "writerId": "w", "commitRetrySeconds": "2.5"}
    assert sink_options(quick).commit_retry_seconds == 2.5


def test_a_stream_with_event_times_needs_a_lateness_and_drops_rows_later_still() -> None:
    """The defaults never report complete a time a later micro-batch may write into, and
    never kill the query: the lateness must be said, and late rows are dropped (counted)."""
    stream = {**BASE, "input": "rows", "writerId": "w", "timeColumn": "t"}
    with pytest.raises(OptionError) as refused:
        sink_options(stream, streaming=True)
    assert str(refused.value) == (
        "a streaming write with option 'timeColumn' ('t') and advanceFrontier max needs option "
        "'allowedLateness': how many of the latest times written a later micro-batch may still "
        "write into. The input is kept that far behind the largest time written so far, so no "
        "time is reported complete while a later micro-batch may still write into it; rows "
        "later still are dropped and counted (lateRows=drop, the default for streams). Give 0 "
        "if no micro-batch ever goes back in time."
    )
    with pytest.raises(OptionError) as watermarked:
        sink_options(stream, streaming=True, watermarks={"ts": 10_000})
    assert str(watermarked.value).endswith(
        "The query's watermark on 'ts' (10000 ms) cannot give it: Spark keeps a watermark on a "
        "TIMESTAMP column, in milliseconds, and the sink's times are integers in units of "
        "your own."
    )
    options = sink_options({**stream, "allowedLateness": "0"}, streaming=True)
    assert (options.allowed_lateness, options.late_rows) == (0, "drop")
    strict = sink_options({**stream, "allowedLateness": "2", "lateRows": "fail"}, True)
    assert (strict.allowed_lateness, strict.late_rows) == (2, "fail")
    # Nothing to keep open when the stream does not advance the input, or times its rows
    # itself; a batch write fails on late rows unless told to drop them.
    assert sink_options({**stream, "advanceFrontier": "none"}, True).late_rows == "drop"
    assert sink_options({**BASE, "input": "r", "writerId": "w"}, True).late_rows == "fail"
    assert sink_options(stream).late_rows == "fail"
    assert sink_options(stream).allowed_lateness == 0


def test_the_largest_spark_long_is_the_largest_time() -> None:
    largest = sink_options({**BASE, "input": "i", "time": str(MAX_SPARK_TIME), "writerId": "w"})
    assert largest.time == 2**63 - 1


def test_source_options_and_schema() -> None:
    options = source_options(
        {
            **BASE,
            "output": "out",
            "startingtime": "3",
            "endingtime": "9",
            "numpartitions": "4",
            "recordschema": "key STRING, count LONG",
            "maxrecordspertrigger": "1000",
            "consumerid": "report",
        }
    )
    assert (options.starting, options.ending, options.num_partitions) == (3, 9, 4)
    assert (options.max_records_per_trigger, options.consumer_id) == (1000, "report")
    assert source_schema(options) == "time LONG, key STRING, count LONG"
    plain = source_options({**BASE, "output": "out"})
    assert (plain.starting, plain.ending, plain.num_partitions) == ("earliest", None, 1)
    assert source_schema(plain) == "time LONG, record STRING"
    assert source_options({**BASE, "output": "o", "startingTime": "LATEST"}).starting == "latest"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**BASE}, "'output' is required"),
        ({**BASE, "output": "o", "startingtime": "3", "endingtime": "2"}, "before"),
        ({**BASE, "output": "o", "startingtime": "yesterday"}, "startingTime"),
        ({**BASE, "output": "o", "numpartitions": "0"}, "numPartitions"),
        ({**BASE, "output": "o", "maxrecordspertrigger": "0"}, "maxRecordsPerTrigger"),
        ({**BASE, "output": "o", "consumerid": "x" * 101}, "consumerId"),
        ({**BASE, "output": "o", "pagetimes": "1001"}, "pageTimes"),
    ],
)
def test_bad_source_options_are_refused_naming_the_option(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        source_options(options)


def test_transaction_names_are_deterministic_per_writer_partition_attempt_and_batch() -> None:
    names = {
        transaction_name(w, p, a, b)
        for w in ("w1", "w2")
        for p in range(3)
        for a in range(3)
        for b in (None, 0, 1)
    }
    assert len(names) == 2 * 3 * 3 * 3
    assert transaction_name("w", 2, 1) == "spark.w.p2.a1"
    assert transaction_name("w", 2, 1, batch=5) == "spark.w.b5.p2.a1"
    assert idempotency_key("w") == "spark.w"
    assert idempotency_key("w", 5) == "spark.w.b5"
    assert len(transaction_name("x" * 100, 10**6, 1000, 2**63 - 1)) <= 200


def test_the_sweep_covers_every_attempt_up_to_the_successful_one() -> None:
    assert list(swept_attempts(4, None)) == [0, 1, 2, 3]
    assert list(swept_attempts(4, 1)) == [0, 1, 2, 3]
    assert list(swept_attempts(2, 5)) == [0, 1, 2, 3, 4, 5]
