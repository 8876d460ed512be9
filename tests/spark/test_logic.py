"""The Spark connector's logic without a JVM: bodies, transactions, commits, offsets, reads.

Everything Spark would call is called directly here, against a real server subprocess: the
functions behind the tasks (``write_partition``, ``read_range``) and behind the driver's
committer and offset planning (``commit_writes``, ``abort_writes``, the stream reader).
"""

import decimal
import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from api.client import Client, FrontierError
from api.spark.datasource import FrontierDataSource, watermark_delays
from api.spark.options import (
    OptionError,
    SinkOptions,
    SourceOptions,
    sink_options,
    source_options,
    transaction_name,
)
from api.spark.sink import (
    FrontierCommitMessage,
    FrontierStreamWriter,
    FrontierWriter,
    SinkError,
    Tally,
    abort_writes,
    bodies,
    commit_writes,
    record_columns,
    write_partition,
)
from api.spark.sink.committer import Write, _already_committed, _commit, write_digest
from api.spark.source import (
    FrontierReader,
    FrontierStreamReader,
    OutputState,
    TimeRange,
    at_outer,
    frontier_offset,
    offset_of,
    outer,
    plan_batch,
    read_range,
    shape_of,
    split_range,
)
from tests.spark.conftest import COUNTS, IDENTITY, wait_for

PLAIN = StructType([StructField("time", LongType()), StructField("record", StringType())])


def sink(url: str, dataflow: str, streaming: bool = False, **extra: str) -> SinkOptions:
    options = {"url": url, "dataflow": dataflow, "input": "rows", "writerId": "w", **extra}
    return sink_options(options, streaming)


def source(url: str, dataflow: str, **extra: str) -> SourceOptions:
    return source_options({"url": url, "dataflow": dataflow, "output": "out", **extra})


def batch(times: list[int], keys: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"t": pa.array(times, pa.int64()), "key": keys})


def decode(body: bytes) -> pa.Table:
    return pa.ipc.open_stream(body).read_all()


def counts(client: Client, dataflow: str) -> dict[int, dict[str, int]]:
    return {t: {r["key"]: r["count"] for r in rs} for t, rs in client.times(dataflow, "out")}


def records(client: Client, dataflow: str) -> list[tuple[int, Any]]:
    return [(t, r) for t, rs in client.times(dataflow, "out") for r in rs]


def frontier(client: Client, dataflow: str, output: str = "out") -> list[Any]:
    return client.output_frontier(dataflow, output)


def nothing_staged(client: Client, dataflow: str, names: list[str]) -> bool:
    """No transaction of ``names`` holds records (committing one is 404)."""
    session = client.session(dataflow, "rows")
    try:
        for name in names:
            with pytest.raises(FrontierError) as refused:
                session.commit([name], f"probe-{uuid.uuid4().hex}")
            assert refused.value.status == 404, refused.value
    finally:
        session.close()
    return True


# --------------------------------------------------------------------------- Arrow bodies


def test_bodies_carry_batch_size_rows_with_int64_times_and_the_row_columns() -> None:
    options = sink("http://x", "d", timeColumn="t", batchSize="10000")
    spark_batches = [batch([i % 7] * 3000, ["k"] * 3000) for i in range(9)]  # 27,000 rows
    made = list(bodies(spark_batches, options))
    assert [b.rows for b in made] == [10_000, 10_000, 7_000]
    table = decode(made[0].data)
    assert table.schema.names == ["time", "key"]
    assert table.schema.field("time").type == pa.int64()
    assert [b.max_time for b in made] == [3, 6, 6]
    assert sum(decode(b.data).num_rows for b in made) == 27_000


def test_a_fixed_time_stamps_every_row_and_int32_times_are_widened() -> None:
    fixed = list(bodies([batch([0], ["a"])], sink("http://x", "d", time="42")))
    assert decode(fixed[0].data).to_pylist() == [{"time": 42, "t": 0, "key": "a"}]
    narrow = pa.RecordBatch.from_pydict({"t": pa.array([5], pa.int32()), "v": [1]})
    table = decode(next(iter(bodies([narrow], sink("http://x", "d", timeColumn="T")))).data)
    assert table.to_pylist() == [{"time": 5, "v": 1}]


@pytest.mark.parametrize(
    ("column", "message"),
    [
        (pa.array([1.5]), "must hold integers"),
        (pa.array([None], pa.int64()), "nulls"),
        (pa.array([-1], pa.int64()), "negative"),
    ],
)
def test_bad_times_are_refused(column: pa.Array, message: str) -> None:
    bad = pa.RecordBatch.from_pydict({"t": column, "v": [1]})
    with pytest.raises(SinkError, match=message):
        list(bodies([bad], sink("http://x", "d", timeColumn="t")))
    with pytest.raises(SinkError, match="no column 'nope'"):
        list(bodies([bad], sink("http://x", "d", timeColumn="nope")))


def test_records_the_server_would_misread_are_sent_as_json_text() -> None:
    def record(columns: dict[str, Any], **extra: str) -> list[Any]:
        made = record_columns(pa.RecordBatch.from_pydict(columns), sink("http://x", "d", **extra))
        if made.schema.names != ["record"]:
            return made.to_pylist()
        return [orjson.loads(text) for text in made.column(0).to_pylist()]

    # a lone column named "record" is data, not JSON text
    assert record({"record": ["x"]}, time="0") == [{"record": "x"}]
    # a column named "time" beside a timeColumn stays in the record
    assert record({"t": [1], "time": [9]}, timeColumn="t") == [{"time": 9}]
    assert record({"d": pa.array([decimal.Decimal("1.25")])}, time="0") == [{"d": 1.25}]
    assert record({"b": pa.array([b"\x00\x01"], pa.binary())}, time="0") == [{"b": "AAE="}]
    mapping = pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))
    assert record({"m": mapping}, time="0") == [{"m": {"a": 1}}]
    assert record({"v": ['{"a": [1]}']}, time="0", valueColumn="v") == [{"a": [1]}]
    assert record({"t": [1]}, timeColumn="t") == [{}]
    # plain columns pass through, typed, for the server to turn into objects
    assert record({"k": ["a"], "n": [1]}, time="0") == [{"k": "a", "n": 1}]


# --------------------------------------------------------------------------- the sink


def test_staged_rows_become_visible_at_one_commit_which_advances_the_input(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t", batchSize="1000")
    writer = "w" + uuid.uuid4().hex
    messages: list[FrontierCommitMessage | None] = [
        write_partition(options, writer, p, 0, [batch([0, 1, 2] * 1000, ["a", "b", "a"] * 1000)])
        for p in range(2)
    ]
    assert [(m.rows, m.max_time, m.late) for m in messages if m] == [(3000, 2, None)] * 2
    assert records(client, dataflow) == []
    assert client.input_frontier(dataflow, "rows") == [0]
    commit_writes(options, writer, messages)
    assert client.input_frontier(dataflow, "rows") == [3]
    wait_for(lambda: frontier(client, dataflow) == [3])
    assert counts(client, dataflow) == {
        0: {"a": 2000},
        1: {"b": 2000},
        2: {"a": 2000},
    }
    # committing the same writer again applies nothing
    commit_writes(options, writer, messages)
    assert counts(client, dataflow)[0] == {"a": 2000}


def test_a_failed_attempts_transaction_is_swept_and_only_the_successful_one_committed(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t")
    writer = "w" + uuid.uuid4().hex
    # attempt 0 of partition 0 staged rows, then failed (Spark never sees its message)
    write_partition(options, writer, 0, 0, [batch([0] * 10, ["lost"] * 10)])
    retried = write_partition(options, writer, 0, 1, [batch([0] * 5, ["a"] * 5)])
    other = write_partition(options, writer, 1, 0, [batch([1] * 5, ["b"] * 5)])
    # a speculative attempt of partition 1 left rows too (Spark speculates: attempt 2 does
    # not discard attempt 0, which may be, and is, the one the driver commits)
    write_partition(options, writer, 1, 2, [batch([1] * 5, ["dup"] * 5)], speculation=True)
    commit_writes(options, writer, [retried, other])
    wait_for(lambda: frontier(client, dataflow) == [2])
    assert counts(client, dataflow) == {0: {"a": 5}, 1: {"b": 5}}
    names = [transaction_name(writer, p, a) for p in range(2) for a in range(4)]
    assert nothing_staged(client, dataflow, names)


def test_abort_discards_every_attempt_and_changes_nothing(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, time="0")
    writer = "w" + uuid.uuid4().hex
    write_partition(options, writer, 0, 0, [batch([0] * 3, ["x"] * 3)])
    done = write_partition(options, writer, 1, 1, [batch([0] * 3, ["y"] * 3)])
    assert abort_writes(options, writer, [None, done]) == 6
    assert client.input_frontier(dataflow, "rows") == [0]
    names = [transaction_name(writer, p, a) for p in range(2) for a in range(4)]
    assert nothing_staged(client, dataflow, names)
    with pytest.raises(SinkError, match="some tasks failed"):
        commit_writes(options, writer, [None, done])


def test_advance_frontier_none_leaves_the_input_and_close_closes_it(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = "w" + uuid.uuid4().hex
    options = sink(server, dataflow, time="5", advanceFrontier="none")
    commit_writes(options, writer, [write_partition(options, writer, 0, 0, [batch([0], ["a"])])])
    assert client.input_frontier(dataflow, "rows") == [0]
    assert records(client, dataflow) == []  # written, but time 5 is not complete
    options = sink(server, dataflow, time="6", advanceFrontier="close")
    writer = "w" + uuid.uuid4().hex
    commit_writes(options, writer, [write_partition(options, writer, 0, 0, [batch([0], ["b"])])])
    assert client.input_frontier(dataflow, "rows") == []
    wait_for(lambda: frontier(client, dataflow) == [])
    assert counts(client, dataflow) == {5: {"a": 1}, 6: {"b": 1}}


def test_rows_before_the_inputs_time_fail_a_batch_write_never_committed(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    session = client.session(dataflow, "rows")
    session.advance(10)
    session.close()
    options = sink(server, dataflow, timeColumn="t", batchSize="2")
    late = write_partition(options, "w1", 0, 0, [batch([12, 13, 3], ["a", "b", "c"])])
    # The task reports them (and how many rows it had); only the committer can tell a
    # re-run of a write committed before from a write that is late.
    assert (late.rows, late.seen, late.late) == (
        0,
        3,
        "409: record 0 is at 3, before input 'rows''s time 10: it could never be committed; "
        "nothing was staged",
    )
    assert nothing_staged(client, dataflow, ["spark.w1.p0.a0"])
    with pytest.raises(SinkError) as refused:
        commit_writes(options, "w1", [late])
    assert str(refused.value) == (
        f"rows are before the input's time, and spark.w1 was never committed: {late.late} "
        "(option allowedLateness keeps the latest times written open for late rows, and "
        "lateRows=drop drops rows later still)"
    )
    assert records(client, dataflow) == []


def stream_writer(server: str, dataflow: str, writer: str, **extra: str) -> FrontierStreamWriter:
    return FrontierStreamWriter(sink(server, dataflow, True, writerId=writer, **extra))


def stream_write(
    writer: FrontierStreamWriter, batch_id: int, rows: list[str], attempt: int = 0
) -> FrontierCommitMessage:
    time = writer.batch_time(batch_id)
    return write_partition(
        writer.options, writer.writer, 0, attempt, [batch([0] * len(rows), rows)], batch_id, time
    )


def test_a_replayed_micro_batch_is_applied_once(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = stream_writer(server, dataflow, "w" + uuid.uuid4().hex, timeOffset="100")
    assert writer.batch_time(0) == 100
    writer.commit([stream_write(writer, 0, ["a", "b"])], 0)
    writer.commit([stream_write(writer, 1, ["a"])], 1)
    assert client.input_frontier(dataflow, "rows") == [102]
    # the driver restarts before Spark recorded batch 1: it is written and committed again;
    # its rows are now before the input's time, so they are late, and the key was used
    replay = stream_write(writer, 1, ["a"])
    assert (replay.rows, replay.late is not None) == (0, True)
    writer.commit([replay], 1)
    writer.commit([stream_write(writer, 2, ["c"])], 2)
    wait_for(lambda: frontier(client, dataflow) == [103])
    assert counts(client, dataflow) == {100: {"a": 1, "b": 1}, 101: {"a": 1}, 102: {"c": 1}}


def test_a_micro_batch_staged_but_never_committed_is_restaged_from_scratch(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = stream_writer(server, dataflow, "w" + uuid.uuid4().hex)
    stream_write(writer, 0, ["a", "a"])  # the driver died before committing
    writer.commit([stream_write(writer, 0, ["a", "a"])], 0)  # same name: emptied first
    wait_for(lambda: frontier(client, dataflow) == [1])
    assert counts(client, dataflow) == {0: {"a": 2}}


def test_a_replay_with_other_attempts_is_recognised_by_its_key(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = stream_writer(server, dataflow, "w" + uuid.uuid4().hex, advanceFrontier="none")
    writer.commit([stream_write(writer, 0, ["a"], attempt=1)], 0)
    # not advanced, so the replay's rows stage; its transactions differ: still applied once
    replay = stream_write(writer, 0, ["a"], attempt=0)
    assert replay.rows == 1
    writer.commit([replay], 0)
    assert nothing_staged(client, dataflow, [replay.transaction])
    session = client.session(dataflow, "rows")
    session.advance(1)
    session.close()
    wait_for(lambda: frontier(client, dataflow) == [1])
    assert counts(client, dataflow) == {0: {"a": 1}}


def test_late_rows_of_a_micro_batch_never_committed_fail_the_commit(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    session = client.session(dataflow, "rows")
    session.advance(50)
    session.close()
    writer = stream_writer(server, dataflow, "w" + uuid.uuid4().hex)
    late = stream_write(writer, 3, ["a"])
    assert late.late is not None
    with pytest.raises(SinkError, match="never committed"):
        writer.commit([late], 3)
    assert records(client, dataflow) == []


def test_an_empty_micro_batch_still_advances_the_input(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = stream_writer(server, dataflow, "w" + uuid.uuid4().hex)
    writer.commit([stream_write(writer, 0, [])], 0)
    assert client.input_frontier(dataflow, "rows") == [1]


# --------------------------------------------------------------------------- the source


def test_times_offsets_and_ranges() -> None:
    assert (outer(7), outer([3, 1]), outer([[4, 0], 2])) == (7, 3, 4)
    assert (shape_of(5), shape_of([3, 1]), shape_of([[4, 9], 2])) == (None, [0, 0], [[0, 0], 0])
    assert (at_outer(None, 5), at_outer([0, 0], 5), at_outer([[0, 0], 0], 5)) == (
        5,
        [5, 0],
        [[5, 0], 0],
    )
    assert frontier_offset([[2, 5], [4, 0]]) == 2
    assert offset_of({"frontier": 4}) == 4
    assert offset_of({"frontier": None}) is None
    for bad in ({"x": 1}, {"frontier": -1}, {"frontier": "3"}, [3]):
        with pytest.raises(RuntimeError, match="not an offset"):
            offset_of(bad)
    ranges = split_range(10, 20, 4)
    assert [(r.start, r.end) for r in ranges] == [(10, 12), (12, 15), (15, 17), (17, 20)]
    assert [(r.start, r.end) for r in split_range(0, 2, 8)] == [(0, 1), (1, 2)]


def test_batch_planning_fixes_the_end_at_the_frontier() -> None:
    options = source_options({"url": "http://x", "dataflow": "d", "output": "o"})
    state = OutputState(offset=10, shape=None, first=3)
    assert [(r.start, r.end) for r in plan_batch(options, state)] == [(3, 10)]
    parts = source_options(
        {
            "url": "http://x",
            "dataflow": "d",
            "output": "o",
            "startingTime": "4",
            "endingTime": "8",
            "numPartitions": "2",
        }
    )
    assert [(r.start, r.end) for r in plan_batch(parts, state)] == [(4, 6), (6, 8)]
    assert plan_batch(options, OutputState(offset=0, shape=None, first=None)) == []
    closed = OutputState(offset=None, shape=None, first=3)
    assert [(r.start, r.end) for r in plan_batch(options, closed)] == [(3, None)]


def push_times(client: Client, dataflow: str, rows: dict[int, list[Any]], advance: int) -> Any:
    session = client.session(dataflow, "rows")
    session.push([[t, r] for t, rs in rows.items() for r in rs])
    session.advance(advance)
    return session


def test_a_batch_read_returns_every_complete_time_and_nothing_else(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    session = push_times(
        client, dataflow, {t: [{"n": t, "i": i} for i in range(3)] for t in range(10)}, 10
    )
    session.push([[10, {"n": 10}], [11, {"n": 11}]])  # pushed, but not complete
    wait_for(lambda: frontier(client, dataflow) == [10])
    options = source(server, dataflow, numPartitions="3", pageTimes="2")
    reader = FrontierReader(options, PLAIN)
    parts = reader.partitions()
    assert [(p.start, p.end) for p in parts] == [(0, 3), (3, 6), (6, 10)]
    got = [row for p in parts for b in reader.read(p) for row in b.to_pylist()]
    assert [(r["time"], orjson.loads(r["record"])) for r in got] == [
        (t, {"n": t, "i": i}) for t in range(10) for i in range(3)
    ]
    first = next(iter(reader.read(parts[0])))
    assert first.schema == pa.schema([("time", pa.int64()), ("record", pa.string())])
    # a time range
    ranged = FrontierReader(source(server, dataflow, startingTime="8", endingTime="20"), PLAIN)
    assert [(p.start, p.end) for p in ranged.partitions()] == [(8, 10)]
    session.close()


def test_a_declared_record_schema_gives_typed_columns(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    push_times(client, dataflow, {0: [{"key": "a"}] * 2 + [{"key": "b"}]}, 1).close()
    wait_for(lambda: frontier(client, dataflow) == [1])
    schema = StructType(
        [
            StructField("time", LongType()),
            StructField("key", StringType()),
            StructField("count", LongType()),
            StructField("missing", StringType()),
        ]
    )
    options = source(server, dataflow, recordSchema="key STRING, count LONG, missing STRING")
    got = [r for b in read_range(client, options, TimeRange(0, 1), schema) for r in b.to_pylist()]
    assert sorted(got, key=lambda r: r["key"]) == [
        {"time": 0, "key": "a", "count": 2, "missing": None},
        {"time": 0, "key": "b", "count": 1, "missing": None},
    ]


def test_stream_offsets_follow_the_frontier_in_whole_times(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    session = push_times(client, dataflow, {t: list(range(3)) for t in range(4)}, 4)
    wait_for(lambda: frontier(client, dataflow) == [4])
    reader = FrontierStreamReader(source(server, dataflow, numPartitions="2"), PLAIN)
    start = reader.initialOffset()
    assert start == {"frontier": 0}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"frontier": 4}
    # whole times only: 3 records per time
    assert reader.latestOffset(start, ReadMaxRows(5)) == {"frontier": 1}
    assert reader.latestOffset(start, ReadMaxRows(6)) == {"frontier": 2}
    assert reader.latestOffset(start, ReadMaxRows(1)) == {"frontier": 1}  # one time at least
    assert reader.partitions({"frontier": 4}, {"frontier": 4}) == []
    parts = reader.partitions(start, {"frontier": 4})
    assert [(p.start, p.end) for p in parts] == [(0, 2), (2, 4)]
    assert sum(b.num_rows for p in parts for b in reader.read(p)) == 12
    # availableNow: the end is fixed when the run starts
    reader.prepareForTriggerAvailableNow()
    session.push([[4, 0]])
    session.advance(6)
    wait_for(lambda: frontier(client, dataflow) == [6])
    assert reader.latestOffset({"frontier": 4}, ReadAllAvailable()) == {"frontier": 4}
    fresh = FrontierStreamReader(source(server, dataflow, startingTime="latest"), PLAIN)
    assert fresh.initialOffset() == {"frontier": 6}
    assert fresh.latestOffset({"frontier": 6}, ReadAllAvailable()) == {"frontier": 6}
    session.close()
    client.close_input(dataflow, "rows")
    wait_for(lambda: frontier(client, dataflow) == [])
    assert fresh.latestOffset({"frontier": 6}, ReadAllAvailable()) == {"frontier": None}
    assert [(p.start, p.end) for p in fresh.partitions({"frontier": 4}, {"frontier": None})] == [
        (4, None)
    ]
    assert fresh.partitions({"frontier": None}, {"frontier": None}) == []


def test_a_consumer_lets_the_output_forget_what_it_read_and_a_late_read_is_gone(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    session = push_times(client, dataflow, {t: [t] for t in range(5)}, 5)
    wait_for(lambda: frontier(client, dataflow) == [5])
    options = source(server, dataflow, consumerId="nightly")
    reader = FrontierStreamReader(options, PLAIN)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"frontier": 5}
    assert sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p)) == 5
    reader.commit(end)
    # everything before 5 was read by the only consumer: the output may forget it
    with pytest.raises(FrontierError) as gone:
        list(read_range(client, options, TimeRange(0, 5), PLAIN))
    assert gone.value.status == 410
    assert "no longer retained" in str(gone.value)
    # a new reader from the earliest retained time starts past the forgotten ones
    later = FrontierStreamReader(source(server, dataflow), PLAIN)
    assert later.initialOffset() == {"frontier": 5}
    client.forget_consumer(dataflow, "out", "nightly")
    session.close()


PRODUCT = {
    "time": {"product": ["u64", "u64"]},
    "nodes": {"rows": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["rows", "out"]],
}


def test_product_times_are_read_by_their_outer_coordinate(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(PRODUCT)["id"]
    session = client.session(dataflow, "rows")
    session.push([[[0, 0], "a"], [[0, 3], "b"], [[1, 1], "c"], [[2, 0], "d"]])
    session.advance([2, 0])
    wait_for(lambda: frontier(client, dataflow) == [[2, 0]])
    reader = FrontierStreamReader(source(server, dataflow), PLAIN)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert (start, end) == ({"frontier": 0}, {"frontier": 2})
    got = [r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()]
    assert sorted((r["time"], orjson.loads(r["record"])) for r in got) == [
        (0, "a"),
        (0, "b"),
        (1, "c"),
    ]
    assert reader.latestOffset(start, ReadMaxRows(1)) == {"frontier": 1}  # outer time 0 whole
    session.close()


class FlakySession:
    """A server whose first answers to a commit are lost (or 503: it is recovering)."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or aiohttp.ClientConnectionError("connection reset")
        self.calls: list[tuple[str, ...]] = []

    def commit(self, transactions: list[str]) -> Any:
        self.calls.append(tuple(transactions))
        if len(self.calls) <= self.failures:
            raise self.error
        return {"applied": 1}


def a_write(retry_seconds: float = 60.0) -> Write:
    return Write("k", "writerId 'w'", ["t1"], 5, "d" * 64, 0, retry_seconds)


def test_a_commit_whose_answer_is_lost_is_repeated_with_the_same_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("api.spark.sink.committer.COMMIT_BACKOFF", 0.0)
    session = FlakySession(failures=1)
    assert _commit(session.commit, a_write(), []) == {"applied": 1}
    assert session.calls == [("t1",)] * 2
    with pytest.raises(aiohttp.ClientConnectionError):
        _commit(FlakySession(failures=3).commit, a_write(retry_seconds=0), [])


def test_a_commit_is_made_again_with_backoff_for_its_retry_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No answer, or a 503 (the server recovering), for a while: the same commit is made
    again, with waits doubling up to a bound, until ``commitRetrySeconds`` have passed."""
    waits: list[float] = []
    clock = [0.0]

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr("api.spark.sink.committer.time.sleep", sleep)
    monkeypatch.setattr("api.spark.sink.committer.time.monotonic", lambda: clock[0])
    recovering = FrontierError(503, {"detail": "the service is recovering its data directory"})
    session = FlakySession(failures=8, error=recovering)
    assert _commit(session.commit, a_write(retry_seconds=60), []) == {"applied": 1}
    assert len(session.calls) == 9
    assert waits == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    # The window ends: the last error, after waiting out what was left of it.
    waits.clear()
    clock[0] = 0.0
    with pytest.raises(aiohttp.ClientConnectionError):
        _commit(FlakySession(failures=100).commit, a_write(retry_seconds=3), [])
    assert waits == [0.25, 0.5, 1.0, 1.25]
    # A refusal is an answer: not made again.
    refused = FlakySession(failures=1, error=FrontierError(409, {"detail": "no"}))
    with pytest.raises(FrontierError):
        _commit(refused.commit, a_write(), [])
    assert len(refused.calls) == 1


def test_the_writer_travels_pickled_with_its_id() -> None:
    writer = FrontierWriter(sink("http://x", "d", time="0", writerId="orders-2026-01-05"))
    again = pickle.loads(pickle.dumps(writer))
    assert again.writer == writer.writer == "orders-2026-01-05"
    message = FrontierCommitMessage(3, 1, "spark.w.p3.a1", 10, 7, None, 12, 2, "ab" * 32)
    assert pickle.loads(pickle.dumps(message)) == message


# --------------------------------------------------------------------------- issue 6 follow-ups


def test_a_replay_is_recognised_by_the_problem_type_not_the_message() -> None:
    reused = {
        "type": "https://frontier.dev/problems/idempotency-key-reused",
        "status": 409,
        "detail": "anything at all",
    }
    look_alike = {
        "type": "https://frontier.dev/problems/conflict",
        "status": 409,
        "detail": "idempotency key 'k' was used to commit ['a'], not ['b']",
    }
    assert _already_committed(FrontierError(409, reused))
    assert not _already_committed(FrontierError(409, look_alike))


def test_a_commit_leaves_no_session_and_no_transaction_behind(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t")
    writer = "w" + uuid.uuid4().hex
    # a failed attempt, and a speculative one still running when the other won
    write_partition(options, writer, 0, 0, [batch([0] * 4, ["lost"] * 4)])
    retried = write_partition(options, writer, 0, 1, [batch([0, 1], ["a", "b"])], speculation=True)
    described = client.input(dataflow, "rows")
    assert (described["staged"], [t["staged"] for t in described["transactions"]]) == (6, [4, 2])
    ack = commit_writes(options, writer, [retried])
    assert ack == {"seq": None, "session_time": None, "input_frontier": [2], "applied": 2}
    described = client.input(dataflow, "rows")
    assert (described["sessions"], described["transactions"], described["staged"]) == ([], [], 0)
    # The driver restarted and commits the job again: acknowledged, not applied twice.
    assert commit_writes(options, writer, [retried]) == ack
    wait_for(lambda: frontier(client, dataflow) == [2])
    assert counts(client, dataflow) == {0: {"a": 1}, 1: {"b": 1}}


def test_max_records_per_trigger_plans_from_counts_only(
    client: Client, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    session = push_times(client, dataflow, {t: list(range(t + 1)) for t in range(4)}, 4)
    wait_for(lambda: frontier(client, dataflow) == [4])
    reader = FrontierStreamReader(source(server, dataflow), PLAIN)
    start = reader.initialOffset()

    def no_records(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("planning read records")

    monkeypatch.setattr(Client, "times_arrow_page", no_records)
    monkeypatch.setattr(Client, "times_page", no_records)
    # 1, 2, 3 and 4 records at times 0 to 3: whole times up to the limit
    assert reader.latestOffset(start, ReadMaxRows(3)) == {"frontier": 2}
    assert reader.latestOffset(start, ReadMaxRows(6)) == {"frontier": 3}
    assert reader.latestOffset({"frontier": 3}, ReadMaxRows(1)) == {"frontier": 4}
    session.close()


def test_a_misspelt_option_is_refused_naming_the_one_meant() -> None:
    from api.spark.options import OptionError, sink_options, source_options

    base = {"url": "http://x", "dataflow": "d"}
    with pytest.raises(OptionError) as sink_error:
        sink_options({**base, "input": "rows", "timeColum": "t"})
    assert str(sink_error.value) == (
        "the frontier sink has no option 'timecolum' (did you mean 'timeColumn'?); it takes "
        "url, dataflow, token, timeout, input, timeColumn, time, timeOffset, valueColumn, "
        "advanceFrontier, writerId, batchSize, maxTaskAttempts, allowedLateness, lateRows, "
        "commitRetrySeconds"
    )
    with pytest.raises(OptionError) as source_error:
        source_options({**base, "output": "out", "endTime": "5"})
    assert str(source_error.value).startswith(
        "the frontier source has no option 'endtime' (did you mean 'endingTime'?)"
    )
    with pytest.raises(OptionError) as unrelated:
        source_options({**base, "output": "out", "colour": "red"})
    assert str(unrelated.value).startswith("the frontier source has no option 'colour'; it takes")
    # What Spark itself passes along is not ours to refuse.
    passed = {**base, "input": "rows", "time": "0", "writerId": "w", "path": "p"}
    assert sink_options(passed).input == "rows"


def test_a_stream_with_an_ending_time_reads_up_to_it_then_nothing(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(IDENTITY)["id"]
    session = push_times(client, dataflow, {t: [t] for t in range(6)}, 6)
    wait_for(lambda: frontier(client, dataflow) == [6])
    reader = FrontierStreamReader(source(server, dataflow, endingTime="3"), PLAIN)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"frontier": 3}
    # Once there, nothing more, however far the output goes.
    assert reader.latestOffset({"frontier": 3}, ReadAllAvailable()) == {"frontier": 3}
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"frontier": 3}, ReadAllAvailable()) == {"frontier": 3}
    session.close()
    client.close_input(dataflow, "rows")
    wait_for(lambda: frontier(client, dataflow) == [])
    assert reader.latestOffset({"frontier": 3}, ReadAllAvailable()) == {"frontier": 3}


def test_a_task_failing_for_any_reason_leaves_nothing_staged(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t", batchSize="10")
    writer = "w" + uuid.uuid4().hex

    def rows_then_a_crash() -> Iterator[pa.RecordBatch]:
        yield batch([0] * 30, ["a"] * 30)  # three staging requests of 10
        raise RuntimeError("the task's input broke")

    with pytest.raises(RuntimeError, match="the task's input broke"):
        write_partition(options, writer, 0, 0, rows_then_a_crash())
    assert client.input(dataflow, "rows")["staged"] == 0
    assert nothing_staged(client, dataflow, [transaction_name(writer, 0, 0)])


# --------------------------------------------------------------------------- issue 16: retries


def staged(client: Client, dataflow: str) -> dict[str, int]:
    return {t["transaction"]: t["staged"] for t in client.input(dataflow, "rows")["transactions"]}


def test_a_retried_attempt_discards_its_partitions_earlier_attempts_unless_spark_speculates(
    client: Client, server: str
) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t")
    writer = "w" + uuid.uuid4().hex
    # Attempt 0 of each partition staged, then was killed: it could not abort.
    write_partition(options, writer, 0, 0, [batch([0] * 3, ["lost"] * 3)])
    write_partition(options, writer, 1, 0, [batch([1] * 4, ["kept"] * 4)])
    other = write_partition(options, "other" + writer, 0, 0, [batch([0], ["x"])])
    # Without speculation attempt 1 starts only once attempt 0 failed: it discards it.
    retried = write_partition(options, writer, 0, 1, [batch([0] * 2, ["a"] * 2)])
    # With it, attempt 0 may still be running and be the one whose message the driver
    # takes: left alone (the job's commit discards it).
    speculative = write_partition(
        options, writer, 1, 1, [batch([1] * 2, ["b"] * 2)], speculation=True
    )
    assert staged(client, dataflow) == {
        transaction_name(writer, 1, 0): 4,
        other.transaction: 1,
        retried.transaction: 2,
        speculative.transaction: 2,
    }
    commit_writes(options, writer, [retried, speculative])
    assert staged(client, dataflow) == {other.transaction: 1}
    wait_for(lambda: frontier(client, dataflow) == [2])
    assert counts(client, dataflow) == {0: {"a": 2}, 1: {"b": 2}}


def test_an_attempt_whose_transaction_was_emptied_meanwhile_fails(
    client: Client, server: str
) -> None:
    """What an attempt staged must all be in its transaction when it reports: another
    attempt discarding it meanwhile (a speculative copy Spark runs unbeknown to the sink)
    fails the attempt instead of letting the job commit part of the partition."""
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t", batchSize="10")
    writer = "w" + uuid.uuid4().hex
    name = transaction_name(writer, 0, 0)

    def rows_and_a_discard() -> Iterator[pa.RecordBatch]:
        for index in range(4):
            if index == 3:  # the first body has landed: another attempt discards them
                client.abort(dataflow, "rows", name)
            yield batch([0] * 10, ["a"] * 10)

    with pytest.raises(SinkError, match=rf"^transaction {name} holds \d+ rows, not the 40 this"):
        write_partition(options, writer, 0, 0, rows_and_a_discard())
    assert staged(client, dataflow) == {}


# --------------------------------------------------------------------------- issue 16: re-runs


def test_a_write_run_again_is_answered_as_the_first_run_was(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    options = sink(server, dataflow, timeColumn="t", advanceFrontier="none")
    writer = "w" + uuid.uuid4().hex
    written = write_partition(options, writer, 0, 0, [batch([0, 1], ["a", "b"])])
    first_digest = write_digest([written])
    first = commit_writes(options, writer, [written])
    assert first == {"seq": None, "session_time": None, "input_frontier": [0], "applied": 2}
    # Run again: another attempt staged this time, so other transactions under the key.
    again = write_partition(options, writer, 0, 1, [batch([0, 1], ["a", "b"])])
    assert commit_writes(options, writer, [again]) == first
    assert staged(client, dataflow) == {}
    # Another write under the same name is not a re-run, whatever its count: refused, not
    # skipped in silence.
    for rows in (["a", "c"], ["a", "b", "c"]):
        other = write_partition(options, writer, 0, 0, [batch([0, 1, 2][: len(rows)], rows)])
        with pytest.raises(SinkError) as refused:
            commit_writes(options, writer, [other])
        assert str(refused.value) == (
            f"writerId {writer!r} was committed before with other rows (digest "
            f"{first_digest[:16]}…, this write's {write_digest([other])[:16]}…): it is not a "
            "run of that write again, and nothing of it was applied. A run again must give "
            "each partition the same rows in the same order (as Spark's replays of a job or "
            "micro-batch do); give another write another writerId"
        )
        assert staged(client, dataflow) == {}
        assert client.input(dataflow, "rows")["records_in"] == 2


# --------------------------------------------------------------------------- issue 16: lateness


def test_allowed_lateness_keeps_the_latest_times_open(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    writer = stream_writer(
        server, dataflow, "w" + uuid.uuid4().hex, timeColumn="t", allowedLateness="3"
    )
    assert writer.options.late_rows == "drop"  # a stream with event times never dies of them

    def micro_batch(batch_id: int, times: list[int]) -> None:
        message = write_partition(
            writer.options, writer.writer, 0, 0, [batch(times, ["k"] * len(times))], batch_id
        )
        writer.commit([message], batch_id)

    micro_batch(0, [10, 12])
    assert client.input_frontier(dataflow, "rows") == [10]  # 12 + 1 - 3: 10, 11, 12 open
    micro_batch(1, [10, 11])
    assert client.input_frontier(dataflow, "rows") == [10]  # never backwards
    micro_batch(2, [11, 15])
    assert client.input_frontier(dataflow, "rows") == [13]
    # Later than that: dropped and counted, and the input follows the largest time written
    # so far (15), not this micro-batch's (14).
    micro_batch(3, [12, 12, 14])
    assert client.input_frontier(dataflow, "rows") == [13]
    assert client.input(dataflow, "rows")["dropped_late"] == 2
    micro_batch(3, [12, 12, 14])  # replayed: answered from its key, counted once
    assert client.input(dataflow, "rows")["dropped_late"] == 2
    wait_for(lambda: frontier(client, dataflow) == [13])
    assert counts(client, dataflow) == {10: {"k": 2}, 11: {"k": 2}, 12: {"k": 1}}
    # Asked to fail instead, a micro-batch with such a row fails, naming the options.
    strict = stream_writer(
        server, dataflow, writer.writer, timeColumn="t", allowedLateness="3", lateRows="fail"
    )
    message = write_partition(strict.options, strict.writer, 0, 0, [batch([12], ["k"])], 4)
    with pytest.raises(SinkError) as refused:
        strict.commit([message], 4)
    assert str(refused.value) == (
        f"rows are before the input's time, and spark.{writer.writer}.b4 was never committed: "
        "409: record 0 is at 12, before input 'rows''s time 13: it could never be committed; "
        "nothing was staged (option allowedLateness keeps the latest times written open for "
        "late rows, and lateRows=drop drops rows later still)"
    )


def test_late_rows_are_dropped_when_asked(client: Client, server: str) -> None:
    dataflow = client.create_dataflow(COUNTS)["id"]
    session = client.session(dataflow, "rows")
    session.advance(10)
    session.close()
    options = sink(server, dataflow, timeColumn="t", lateRows="drop", batchSize="2")
    message = write_partition(options, "w1", 0, 0, [batch([12, 3, 13, 9, 10], list("abcde"))])
    assert (message.rows, message.seen, message.dropped, message.max_time) == (3, 5, 2, 13)
    ack = commit_writes(options, "w1", [message])
    assert (ack["applied"], ack["input_frontier"]) == (3, [14])
    wait_for(lambda: frontier(client, dataflow) == [14])
    assert counts(client, dataflow) == {10: {"e": 1}, 12: {"a": 1}, 13: {"c": 1}}
    assert client.input(dataflow, "rows")["dropped_late"] == 2
    # Run again, everything is late and dropped; the same rows (digested before dropping):
    # answered from the key, nothing applied, the dropped rows counted once.
    again = write_partition(options, "w1", 0, 0, [batch([12, 3, 13, 9, 10], list("abcde"))])
    assert (again.rows, again.seen, again.dropped) == (0, 5, 5)
    assert again.digest == message.digest
    assert commit_writes(options, "w1", [again]) == ack
    described = client.input(dataflow, "rows")
    assert (described["records_in"], described["dropped_late"]) == (3, 2)
    # Other rows under the name, all late too: refused, not skipped in silence.
    other = write_partition(options, "w1", 0, 0, [batch([12, 3, 13, 9, 11], list("abcde"))])
    with pytest.raises(SinkError, match="was committed before with other rows"):
        commit_writes(options, "w1", [other])
    assert client.input(dataflow, "rows")["dropped_late"] == 2


# --------------------------------------------------------------------------- issue 22: digests


def test_a_tasks_digest_is_of_the_rows_it_was_given_in_order_and_what_makes_records() -> None:
    options = sink("http://x", "d", timeColumn="t")

    def digest(*batches: pa.RecordBatch, fixed: int | None = None, **extra: str) -> str:
        tally = Tally.of(sink("http://x", "d", timeColumn="t", **extra), fixed)
        for raw in batches:
            tally.given(raw)
        return tally.digest

    rows = batch([1, 2, 3], ["a", "b", "c"])
    assert digest(rows) == digest(batch([1, 2, 3], ["a", "b", "c"]))
    assert digest(rows) != digest(batch([1, 2, 3], ["a", "b", "d"]))  # the same count
    assert digest(rows) != digest(batch([2, 1, 3], ["b", "a", "c"]))  # another order
    assert digest(rows) == digest(rows, batch([], []))  # an empty batch is nothing
    renamed = pa.RecordBatch.from_pydict({"t": rows.column(0), "name": rows.column(1)})
    assert digest(rows) != digest(renamed)
    assert digest(rows) != digest(rows, valueColumn="key")
    assert digest(rows, fixed=None) != digest(rows, fixed=4)
    # Taken before anything is dropped: the same rows, late, have the same digest.
    tally = Tally.of(options, None)
    dropped = list(bodies([rows], options, floor=10, tally=tally))
    assert (dropped, tally.dropped, tally.digest) == ([], 3, digest(rows))
    # The write's: the tasks' in partition order, whatever order Spark lists them in.
    first = FrontierCommitMessage(0, 0, "p0", 1, 1, digest="a" * 64)
    second = FrontierCommitMessage(1, 2, "p1", 1, 1, digest="b" * 64)
    assert write_digest([first, second]) == write_digest([second, first])
    swapped = FrontierCommitMessage(1, 0, "p1", 1, 1, digest="a" * 64)
    assert write_digest([first, second]) != write_digest([swapped, first])


def test_a_write_whose_rows_are_all_late_still_commits_its_digest(
    client: Client, server: str
) -> None:
    """A write that drops every row commits nothing but its key, digest and count: a run
    of another write under the name is then refused too."""
    dataflow = client.create_dataflow(COUNTS)["id"]
    session = client.session(dataflow, "rows")
    session.advance(10)
    session.close()
    options = sink(server, dataflow, timeColumn="t", lateRows="drop")
    message = write_partition(options, "gone", 0, 0, [batch([1, 2], ["a", "b"])])
    ack = commit_writes(options, "gone", [message])
    assert (ack["applied"], ack["input_frontier"]) == (0, [10])
    assert client.input(dataflow, "rows")["dropped_late"] == 2
    other = write_partition(options, "gone", 0, 0, [batch([1, 3], ["a", "b"])])
    with pytest.raises(SinkError, match="was committed before with other rows"):
        commit_writes(options, "gone", [other])


def test_a_stream_writer_with_event_times_needs_a_lateness_whatever_the_watermark() -> None:
    """Spark keeps a watermark on a TIMESTAMP column only: its delay reaches the writer's
    schema, and is named, but it cannot stand for a lateness in the sink's integer times."""
    schema = StructType(
        [
            StructField("t", LongType()),
            StructField("ts", TimestampType(), metadata={"spark.watermarkDelayMs": 10_000}),
        ]
    )
    assert watermark_delays(schema) == {"ts": 10_000}
    options = {"url": "http://x", "dataflow": "d", "input": "rows", "writerId": "w"}
    source = FrontierDataSource({**options, "timeColumn": "t"})
    with pytest.raises(OptionError, match=r"needs option 'allowedLateness'.*'ts' \(10000 ms\)"):
        source.streamWriter(schema, False)
    late = FrontierDataSource({**options, "timeColumn": "t", "allowedLateness": "5"})
    writer = late.streamWriter(schema, False)
    assert (writer.options.allowed_lateness, writer.options.late_rows) == (5, "drop")
