"""The Spark classes of the sink: they only gather Spark's values for the functions.

A task's ``write`` stages its rows (:func:`~api.spark.sink.staging.write_partition`); the
driver's ``commit`` and ``abort`` call :func:`~api.spark.sink.committer.commit_writes` and
:func:`~api.spark.sink.committer.abort_writes`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from api.spark.options import MAX_SPARK_TIME, SinkOptions
from api.spark.sink.committer import abort_writes, commit_writes
from api.spark.sink.common import FrontierCommitMessage, SinkError
from api.spark.sink.staging import speculating, write_partition


def _ours(messages: Sequence[WriterCommitMessage | None]) -> list[FrontierCommitMessage | None]:
    """The commit messages as this sink's (a failed task's is ``None``)."""
    result: list[FrontierCommitMessage | None] = []
    for message in messages:
        if message is not None and not isinstance(message, FrontierCommitMessage):
            raise SinkError(f"not a commit message of the frontier sink: {message!r}")
        result.append(message)
    return result


def _task() -> tuple[int, int, Any]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # pragma: no cover - Spark always runs writers in a task
        raise SinkError("the frontier sink's write() runs only inside a Spark task")
    return context.partitionId(), context.attemptNumber(), context


class FrontierWriter(DataSourceArrowWriter):  # type: ignore[misc,unused-ignore]
    """The batch writer: ``df.write.format("frontier")``.

    Its id is the write's ``writerId`` (required: a job run again must present the same
    one); it travels pickled to the tasks and the committer.
    """

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        assert options.writer_id is not None  # checked by sink_options
        self.writer = options.writer_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FrontierCommitMessage:
        """Stage this task's rows."""
        partition, attempt, context = _task()
        return write_partition(
            self.options,
            self.writer,
            partition,
            attempt,
            iterator,
            None,
            self.options.time,
            speculating(context),
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Make every task's rows visible at once, then advance the input."""
        commit_writes(self.options, self.writer, _ours(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Discard everything staged."""
        abort_writes(self.options, self.writer, _ours(messages))


class FrontierStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc,unused-ignore]
    """The streaming writer: ``writeStream.format("frontier")``; one commit per micro-batch."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        assert options.writer_id is not None  # checked by sink_options(streaming=True)
        self.writer = options.writer_id

    def batch_time(self, batch_id: int) -> int | None:
        """The time of a micro-batch's rows (``None`` when they carry their own)."""
        if self.options.time_column is not None:
            return None
        if self.options.time is not None:
            return self.options.time
        time = batch_id + self.options.time_offset
        if time > MAX_SPARK_TIME:
            raise SinkError(f"micro-batch {batch_id} + timeOffset is past 2**63 - 1")
        return time

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FrontierCommitMessage:
        """Stage this task's rows of the current micro-batch."""
        partition, attempt, context = _task()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        return write_partition(
            self.options,
            self.writer,
            partition,
            attempt,
            iterator,
            batch_id,
            self.batch_time(batch_id),
            speculating(context),
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Make the micro-batch visible and advance the input past it (once, even replayed)."""
        commit_writes(self.options, self.writer, _ours(messages), batchId, self.batch_time(batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Discard the micro-batch's staged rows."""
        abort_writes(self.options, self.writer, _ours(messages), batchId)
