"""The source: completed times of a Frontier output as Spark rows, batch and streaming.

A time is read only once it is *complete*: below the output's frontier, so no record can
still arrive at it. Offsets are output frontiers as JSON dicts ``{"frontier": T}``: a
micro-batch from ``{"frontier": a}`` to ``{"frontier": b}`` reads exactly the times ``t``
with ``a <= t < b``, all complete when ``b`` was taken; ``{"frontier": null}`` is a closed
output (everything is complete). For product times the offsets carry the outer (leftmost)
coordinate: ``[o, i]`` is read once every ``[o, *]`` is complete.

Rows are ``time LONG, record STRING`` (the record's JSON text), or with ``recordSchema``
typed columns parsed from the record's JSON. A *typed* output (fed by a typed input; the
server shows its ``schema``) is read as ``time`` and the records' fields, typed
(:func:`typed_struct`), unless ``recordSchema`` says otherwise: the server answers its
Arrow reads with typed columns, which are handed to Spark as they are (cast to Spark's
Arrow types in bulk, :func:`convert_typed`), with no row made into a Python value. Each
read partition is a time range, read a page of ``pageTimes`` times at a time as Arrow (JSON
for product times) and yielded as Arrow record batches of exactly the declared schema.

The planning functions take plain values so they are tested without a JVM; the Spark
classes at the bottom only call them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from api.client import Client
from api.spark.options import MAX_SPARK_TIME, SourceOptions
from api.spark.rows import SourceError, arrow_schema, convert, convert_typed

log = logging.getLogger("frontier.spark")

COUNT_PAGE = 1000
"""Times per page when only their record counts are read (the server's most)."""

Offset = int | None
"""An output frontier as the source sees it: the least incomplete (outer) time, or ``None``
when the output is closed."""


# --------------------------------------------------------------------------- times


def outer(time: Any) -> int:
    """The outer (leftmost) coordinate of a JSON time: ``[[3, 1], 2]`` -> 3."""
    while isinstance(time, list):
        time = time[0]
    if type(time) is not int:
        raise SourceError(f"{time!r} is not a time")
    return time


def shape_of(time: Any) -> Any:
    """A JSON time's shape: ``None`` for integers, else the time with every coordinate 0."""
    if not isinstance(time, list):
        return None
    return [0 if not isinstance(c, list) else shape_of(c) for c in time]


def at_outer(shape: Any, value: int) -> Any:
    """The least time of ``shape`` whose outer coordinate is ``value``."""
    if shape is None:
        return value
    first, *rest = shape
    return [at_outer(first if isinstance(first, list) else None, value), *rest]


def frontier_offset(frontier: Sequence[Any]) -> Offset:
    """The offset of an output frontier: every time with a smaller outer coordinate is complete.

    >>> frontier_offset([7]), frontier_offset([]), frontier_offset([[3, 9], [5, 0]])
    (7, None, 3)
    """
    if not frontier:
        return None
    return min(outer(t) for t in frontier)


def offset_json(offset: Offset) -> dict[str, Any]:
    """An offset as Spark keeps it."""
    return {"frontier": offset}


def offset_of(value: Any) -> Offset:
    """The offset of Spark's JSON dict; :class:`SourceError` if it is not one of ours."""
    if not isinstance(value, dict) or "frontier" not in value:
        raise SourceError(f"{value!r} is not an offset of the frontier source")
    raw = value["frontier"]
    if raw is None:
        return None
    if type(raw) is not int or not 0 <= raw <= MAX_SPARK_TIME + 1:
        raise SourceError(f"{value!r} is not an offset of the frontier source")
    return int(raw)


def before(a: Offset, b: Offset) -> bool:
    """Whether offset ``a`` is strictly before ``b`` (``None``, closed, is after all)."""
    if a is None:
        return False
    return b is None or a < b


def capped(offset: Offset, ending: int | None) -> Offset:
    """``offset``, but never past ``endingTime``: a stream reads no time from it on."""
    if ending is not None and not before(offset, ending):
        return ending
    return offset


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class TimeRange(InputPartition):  # type: ignore[misc,unused-ignore]
    """A read partition: the complete times with outer coordinate in ``[start, end)``."""

    start: int
    end: int | None
    shape: Any = None
    """``None`` for integer times, else the zero time of the output's product domain."""


def split_range(start: int, end: int | None, parts: int, shape: Any = None) -> list[TimeRange]:
    """``[start, end)`` as up to ``parts`` ranges of (nearly) equal width, in order.

    An unbounded range (a closed output, no end) stays whole; an empty one gives none.

    >>> [(r.start, r.end) for r in split_range(0, 10, 3)]
    [(0, 3), (3, 6), (6, 10)]
    >>> split_range(5, 5, 4), [(r.start, r.end) for r in split_range(5, None, 4)]
    ([], [(5, None)])
    """
    if end is None:
        return [TimeRange(start, None, shape)]
    if end <= start:
        return []
    parts = max(1, min(parts, end - start))
    width = end - start
    bounds = [start + width * i // parts for i in range(parts + 1)]
    return [TimeRange(lo, hi, shape) for lo, hi in itertools.pairwise(bounds)]


@dataclass(frozen=True, slots=True)
class OutputState:
    """What planning needs to know of an output now."""

    offset: Offset
    shape: Any
    first: int | None
    """The outer coordinate of the oldest retained complete time (``None``: none)."""


def _client(options: SourceOptions) -> Client:
    conn = options.connection
    return Client(conn.url, conn.token, conn.timeout)


def output_state(client: Client, options: SourceOptions, probe: bool) -> OutputState:
    """The output's offset and time shape, and (with ``probe``) its oldest retained time."""
    conn = options.connection
    frontier = client.output_frontier(conn.dataflow, options.output)
    shape = shape_of(frontier[0]) if frontier else None
    first = None
    if probe or not frontier:
        page = client.time_counts_page(conn.dataflow, options.output, limit=1)
        if page["times"]:
            time = page["times"][0]["time"]
            shape = shape_of(time)
            first = outer(time)
    return OutputState(frontier_offset(frontier), shape, first)


def plan_batch(options: SourceOptions, state: OutputState) -> list[TimeRange]:
    """The read partitions of a batch read: complete times in ``[startingTime, endingTime)``.

    The end is fixed now (the frontier when planned), so every partition reads one
    consistent set of times; ``earliest`` starts at the oldest retained time.
    """
    if options.starting == "latest":
        return []
    start = state.first if options.starting == "earliest" else options.starting
    if start is None:  # nothing is retained
        return []
    end = state.offset
    if options.ending is not None:
        end = options.ending if end is None else min(end, options.ending)
    return split_range(int(start), end, options.num_partitions, state.shape)


# --------------------------------------------------------------------------- reading


def output_schema(options: SourceOptions) -> dict[str, Any] | None:
    """The output's schema if it is typed (``None``: untyped), as the server shows it."""
    conn = options.connection
    with _client(options) as client:
        shown = client.output(conn.dataflow, options.output)
    schema: dict[str, Any] | None = shown.get("schema")
    return schema


def read_range(
    client: Client, options: SourceOptions, part: TimeRange, schema: StructType
) -> Iterator[pa.RecordBatch]:
    """The rows of one partition, a page of times at a time."""
    conn = options.connection
    target = arrow_schema(schema)
    cursor: str | None = None
    if part.shape is None:
        while True:
            page = client.times_arrow_page(
                conn.dataflow, options.output, part.start, part.end, options.page_times, cursor
            )
            for batch in pa.ipc.open_stream(page.body):
                if not batch.num_rows:
                    continue
                if batch.schema.names == ["time", "record"]:
                    yield convert(batch.column(0), batch.column(1), schema, target)
                else:  # a typed output's columns
                    yield convert_typed(batch, schema, target)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
    lo = at_outer(part.shape, part.start)
    hi = None if part.end is None else at_outer(part.shape, part.end)
    while True:
        answer = client.times_page(
            conn.dataflow, options.output, lo, hi, options.page_times, cursor
        )
        times: list[int] = []
        texts: list[str] = []
        for entry in answer["times"]:
            time = outer(entry["time"])
            if time > MAX_SPARK_TIME:
                raise SourceError(f"time {entry['time']} does not fit a Spark LONG")
            for record in entry["records"]:
                times.append(time)
                texts.append(orjson.dumps(record).decode())
        if times:
            yield convert(pa.array(times, pa.int64()), pa.array(texts, pa.string()), schema, target)
        if answer["next_cursor"] is None:
            return
        cursor = answer["next_cursor"]


def admit(
    client: Client, options: SourceOptions, start: int, end: Offset, shape: Any, most: int
) -> Offset:
    """The end of a micro-batch from ``start`` of whole times and at most ``most`` records.

    At least one time is admitted (a time larger than ``most`` is read alone). Only the
    counts are read (``counts=true``), never the records, a page of up to 1000 times at a time.
    """
    conn = options.connection
    counts: dict[int, int] = {}
    total = 0
    cursor: str | None = None
    lo = at_outer(shape, start)
    hi = None if end is None else at_outer(shape, end)
    while True:
        answer = client.time_counts_page(conn.dataflow, options.output, lo, hi, COUNT_PAGE, cursor)
        pairs = [(outer(e["time"]), int(e["count"])) for e in answer["times"]]
        next_cursor = answer["next_cursor"]
        for time, count in pairs:
            if time not in counts and counts and total + count > most:
                return time
            counts[time] = counts.get(time, 0) + count
            total += count
        if next_cursor is None:
            return end
        cursor = next_cursor


# --------------------------------------------------------------------------- Spark classes


class FrontierReader(DataSourceReader):  # type: ignore[misc,unused-ignore]
    """The batch reader: ``spark.read.format("frontier")``."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[TimeRange]:
        """The time ranges to read, fixed now: complete times below the frontier."""
        with _client(self.options) as client:
            state = output_state(client, self.options, probe=self.options.starting == "earliest")
        ranges = plan_batch(self.options, state)
        return ranges or [TimeRange(0, 0, state.shape)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one time range."""
        assert isinstance(partition, TimeRange)
        if partition.end is not None and partition.end <= partition.start:
            return
        with _client(self.options) as client:
            yield from read_range(client, self.options, partition, self.schema)


class FrontierStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc,unused-ignore]
    """The streaming reader: each micro-batch reads the times completed since the last."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._available_now = False
        self._target: Offset = None
        """The end of an ``availableNow`` run."""
        self._registered = False
        self._shape: Any = None
        self._shape_known = False

    # -- offsets (driver side)

    def _state(self, client: Client, probe: bool = False) -> OutputState:
        state = output_state(client, self.options, probe)
        if state.shape is not None or state.offset is not None or state.first is not None:
            self._shape, self._shape_known = state.shape, True
        return state

    def _register(self, client: Client, start: Offset) -> None:
        consumer = self.options.consumer_id
        if consumer is None or self._registered or start is None:
            return
        client.commit_consumer(
            self.options.connection.dataflow,
            self.options.output,
            consumer,
            at_outer(self._shape, start),
        )
        self._registered = True

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: ``startingTime``, the oldest retained time, or now."""
        with _client(self.options) as client:
            starting = self.options.starting
            state = self._state(client, probe=starting == "earliest")
            if starting == "latest":
                offset = state.offset
            elif starting == "earliest":
                offset = state.first if state.first is not None else state.offset
                if offset is None:
                    offset = 0
            else:
                offset = int(starting)
            self._register(client, offset)
        return offset_json(offset)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerTrigger`` as Spark's row limit."""
        most = self.options.max_records_per_trigger
        return ReadAllAvailable() if most is None else ReadMaxRows(most)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an ``availableNow`` run: the output's frontier now."""
        with _client(self.options) as client:
            self._target = capped(self._state(client).offset, self.options.ending)
        self._available_now = True

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The output's frontier (or the ``availableNow`` target), cut to whole times.

        Never past ``endingTime``: a stream given one reads the times before it, then
        nothing more.
        """
        begin = offset_of(start)
        with _client(self.options) as client:
            state = self._state(client)
            self._register(client, begin)
            end = self._target if self._available_now else state.offset
            end = capped(end, self.options.ending)
            if not before(begin, end):
                return offset_json(begin)
            assert begin is not None
            if isinstance(limit, ReadMaxRows):
                end = admit(client, self.options, begin, end, self._shape, limit.max_rows)
        return offset_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[TimeRange]:
        """The time ranges of a micro-batch (none when ``start == end``)."""
        begin, stop = offset_of(start), offset_of(end)
        if not before(begin, stop):
            return []
        assert begin is not None
        if not self._shape_known:
            with _client(self.options) as client:
                self._state(client)
        return split_range(begin, stop, self.options.num_partitions, self._shape)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one time range of a micro-batch."""
        assert isinstance(partition, TimeRange)
        with _client(self.options) as client:
            yield from read_range(client, self.options, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Tell the server this query has read everything before ``end`` (``consumerId``)."""
        consumer = self.options.consumer_id
        offset = offset_of(end)
        if consumer is None or offset is None:
            return
        with _client(self.options) as client:
            if not self._shape_known:
                self._state(client)
            client.commit_consumer(
                self.options.connection.dataflow,
                self.options.output,
                consumer,
                at_outer(self._shape, offset),
            )
