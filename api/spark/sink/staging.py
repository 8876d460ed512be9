"""A task attempt, on an executor: its rows staged in a transaction of its own.

The transaction is named after the writer, the partition and the attempt (and the
micro-batch): :func:`~api.spark.options.transaction_name`. Nothing staged is visible until
the committer commits it (:mod:`api.spark.sink.committer`).
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

import pyarrow as pa

from api.client import Client, FrontierError
from api.spark.options import MAX_SPARK_TIME, SinkOptions, transaction_name
from api.spark.sink.bodies import Body, Tally, bodies
from api.spark.sink.common import FrontierCommitMessage, SinkError, open_client

log = logging.getLogger("frontier.spark")

IN_FLIGHT = 2
"""Staging requests a task keeps in flight while it builds the next body."""


def _late(error: FrontierError) -> bool:
    return error.status == 409


def speculating(context: Any) -> bool:
    """Whether Spark may run speculative copies of this task (``spark.speculation``).

    The SQL configuration, which starts as the Spark configuration, reaches every task of
    a query as local properties. When it does not say, speculation is off (Spark's default).
    """
    value = None if context is None else context.getLocalProperty("spark.speculation")
    return str(value).strip().lower() == "true"


def _input_time(client: Client, options: SinkOptions) -> int | None:
    """The input's time now: rows before it are late (``None``: closed, or not integers)."""
    time = client.input(options.connection.dataflow, options.input).get("time")
    return time if type(time) is int else None


def _discard_earlier(
    client: Client,
    options: SinkOptions,
    writer: str,
    partition: int,
    attempt: int,
    batch_id: int | None,
    speculation: bool,
) -> None:
    """Empty this attempt's transaction, and discard the partition's earlier attempts.

    The transaction is emptied first: a leftover of the same name (a stage retried with the
    same attempt numbers, a replayed micro-batch) must not add to it. The earlier attempts
    failed (a task killed hard could not abort its own), unless Spark speculates: then one
    may still be running, and win, so they are left to the job's commit.
    """
    conn = options.connection
    names = [transaction_name(writer, partition, attempt, batch_id)]
    if attempt > 0 and not speculation:
        names += [transaction_name(writer, partition, a, batch_id) for a in range(attempt)]
    futures = [
        client.submit(client.aio.abort(conn.dataflow, options.input, name)) for name in names
    ]
    discarded = sum(future.result() for future in futures)
    if discarded and len(names) > 1:
        log.info(
            "attempt %d of partition %d discarded %d rows its earlier attempts left staged",
            attempt,
            partition,
            discarded,
        )


class _Staging:
    """One attempt's staging requests into its transaction, up to :data:`IN_FLIGHT` at once.

    It counts the rows sent and the transaction's size the server answers: they must agree.
    """

    def __init__(self, client: Client, options: SinkOptions, name: str, partition: int) -> None:
        self.client = client
        self.options = options
        self.name = name
        self.partition = partition
        self.in_flight: deque[Future[int]] = deque()
        self.held = 0  # the transaction's size, as the server's answers say
        self.rows = 0
        self.top: int | None = None

    def stage(self, pending: Iterable[Body]) -> None:
        """Stage every body; :class:`SinkError` if the transaction then holds other rows."""
        client, options = self.client, self.options
        for body in pending:
            if body.max_time > MAX_SPARK_TIME:  # pragma: no cover - int64 cannot
                raise SinkError(f"time {body.max_time} does not fit a Spark LONG")
            while len(self.in_flight) >= IN_FLIGHT:
                self.held = max(self.held, self.in_flight.popleft().result())
            self.in_flight.append(
                client.submit(
                    client.aio.stage_arrow(
                        options.connection.dataflow, options.input, self.name, body.data
                    )
                )
            )
            self.rows += body.rows
            self.top = body.max_time if self.top is None else max(self.top, body.max_time)
        while self.in_flight:
            self.held = max(self.held, self.in_flight.popleft().result())
        if self.held != self.rows:
            raise SinkError(
                f"transaction {self.name} holds {self.held} rows, not the {self.rows} this "
                f"attempt staged: another attempt of partition {self.partition} discarded or "
                f"added to it meanwhile"
            )

    def undo(self, error: BaseException) -> None:
        """Abort what this attempt staged, after ``error``, once its requests have landed.

        After a refusal by the server the abort must succeed; after anything else it is
        tried, and its own failure ignored.
        """
        # Let the requests in flight finish (cancelling one does not unsend it): an
        # abort sent before they land would leave their rows staged.
        for future in self.in_flight:
            with contextlib.suppress(Exception):
                future.result()
        dataflow, input_name = self.options.connection.dataflow, self.options.input
        if isinstance(error, FrontierError):
            self.client.abort(dataflow, input_name, self.name)
            return
        # Whatever failed (the rows, the connection, the task killed): nothing of
        # this attempt stays staged, if the server can still be told.
        with contextlib.suppress(Exception):
            self.client.abort(dataflow, input_name, self.name)


def write_partition(
    options: SinkOptions,
    writer: str,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    batch_id: int | None = None,
    fixed_time: int | None = None,
    speculation: bool = False,
) -> FrontierCommitMessage:
    """Stage one task attempt's rows in its transaction; what was staged.

    First the transaction is emptied and, unless Spark speculates, the partition's earlier
    attempts are discarded (:func:`_discard_earlier`). A failure of any kind aborts what
    this attempt staged. Rows the server refuses as before the input's time are *late*:
    the task reports them (after counting the rest of its rows), and the committer decides
    (they are fine when the write was committed before). With ``lateRows=drop`` rows
    before the input's time (read first) are dropped instead. The message carries the
    digest of every row the task was given, late, dropped or staged
    (:class:`~api.spark.sink.bodies.Tally`). The transaction must hold exactly the rows
    staged, or the task fails.
    """
    name = transaction_name(writer, partition, attempt, batch_id)
    batches = iter(batches)  # what a late body leaves of it is counted after
    tally = Tally.of(options, fixed_time)
    with open_client(options) as client:
        _discard_earlier(client, options, writer, partition, attempt, batch_id, speculation)
        floor = _input_time(client, options) if options.late_rows == "drop" else None
        staging = _Staging(client, options, name, partition)
        try:
            staging.stage(bodies(batches, options, fixed_time, floor, tally))
        except BaseException as error:
            staging.undo(error)
            if not isinstance(error, FrontierError):
                raise
            if not _late(error):
                raise SinkError(
                    f"staging rows of partition {partition} in input {options.input!r} "
                    f"failed: {error}"
                ) from error
            # Before the input's time: fine if this write was committed before (a re-run),
            # which only the committer can tell. It needs the rows' count and digest.
            for raw in batches:
                tally.given(raw)
            return _message(partition, attempt, name, None, str(error), tally)
    if tally.dropped:
        log.warning(
            "partition %d dropped %d rows before input %r's time %s (lateRows=drop)",
            partition,
            tally.dropped,
            options.input,
            floor,
        )
    return _message(partition, attempt, name, staging, None, tally)


def _message(
    partition: int,
    attempt: int,
    name: str,
    staging: _Staging | None,
    late: str | None,
    tally: Tally,
) -> FrontierCommitMessage:
    """What an attempt tells the committer: what it staged (nothing, if late), and why not."""
    rows, top = (0, None) if staging is None else (staging.rows, staging.top)
    return FrontierCommitMessage(
        partition, attempt, name, rows, top, late, tally.seen, tally.dropped, tally.digest
    )
