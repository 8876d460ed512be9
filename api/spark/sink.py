"""The sink: Spark rows into a Frontier input, exactly once.

Every task stages its rows, as Arrow IPC bodies of ``batchSize`` rows, in a transaction of
its own, named after the writer, the partition and the attempt (and the micro-batch of a
stream): :func:`~api.spark.options.transaction_name`. Nothing is visible until the
committer (a fresh process on the driver's side) commits exactly the successful attempts'
transactions in one call, whose idempotency key is the writer (and micro-batch), advancing
the input past the largest time written in the same call. The commit names no session (the
server commits at the input's own time), so a driver that dies mid-commit leaves no session
behind to hold the input's frontier. Then it discards every transaction a failed, retried or
speculative attempt may have left: the names are deterministic, so it finds them without a
listing. An abort discards them all.

**Retried tasks.** A task that fails aborts what it staged; one killed hard (its executor
lost, its worker SIGKILLed) cannot. So an attempt ``n > 0`` first discards attempts
``0 .. n-1`` of its partition: without speculation Spark starts attempt ``n`` only once
attempt ``n-1`` has failed, so none of them can be the one whose commit message the driver
takes. With ``spark.speculation`` on, an earlier attempt may still be running and win, so
they are left alone, to the job's commit (which discards every attempt it does not commit)
and to the server's expiry of transactions nobody commits (``staged_transaction_seconds``).
Either way an attempt checks, from the server's answers, that its transaction holds exactly
the rows it staged: one emptied by another attempt meanwhile fails the task rather than
commit part of a partition.

**Runs of the same write.** The write is named by ``writerId`` (required): a job run again
(its driver died before or after the commit) or a stream's micro-batch replayed after a
restart commits under the same key. If the first run's commit was applied, the server
answers it again without applying anything (its rows are then before the input's time and
cannot even be staged: the tasks report them as *late*, and the committer accepts that only
when the key was already used). A run whose attempts staged other transactions is refused
with the problem type ``idempotency-key-reused``, which means the same: the committer then
asks for the first commit's answer with the transactions it names. Unless late rows are
dropped, the rows of a run answered from the key must be as many as the first commit
applied: another write under a name used before is refused, not silently skipped.

**Late rows.** With ``timeColumn``, ``allowedLateness`` keeps the latest times written
open after each commit (the input advances to the largest time + 1 - ``allowedLateness``),
so a micro-batch may go back that far; ``lateRows=drop`` drops rows before the input's time
(each task reads it first) instead of failing the write.

The functions here take plain values (no ``TaskContext``) so they are tested without a JVM;
the Spark classes at the bottom only gather those values.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import aiohttp
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from api.client import IDEMPOTENCY_KEY_REUSED, Client, FrontierConnectionError, FrontierError
from api.spark.options import (
    MAX_SPARK_TIME,
    SinkOptions,
    idempotency_key,
    swept_attempts,
    transaction_name,
)

log = logging.getLogger("frontier.spark")

COMMIT_TRIES = 3
"""Commit calls made when the answer is lost (connection error, timeout): same key each."""

COMMIT_BACKOFF = 0.5
"""Seconds before the second commit call (twice that before the third)."""

TRANSACTION_EXPIRED = "https://frontier.dev/problems/transaction-expired"
"""The problem type of a staged transaction the server discarded as expired."""

IN_FLIGHT = 2
"""Staging requests a task keeps in flight while it builds the next body."""

_SCHEMA_RECORD = pa.schema([pa.field("time", pa.int64(), False), pa.field("record", pa.string())])


class SinkError(RuntimeError):
    """The sink cannot write these rows (the message says why and what to change)."""


@dataclass(frozen=True, slots=True)
class FrontierCommitMessage(WriterCommitMessage):  # type: ignore[misc,unused-ignore]
    """What a task attempt staged, for the committer."""

    partition: int
    attempt: int
    transaction: str
    rows: int
    """Rows staged."""
    max_time: int | None
    late: str | None = None
    """Why the server refused the rows as before the input's time (``None``: staged)."""
    seen: int = 0
    """Rows the task was given: staged, late or dropped."""
    dropped: int = 0
    """Rows dropped as before the input's time (``lateRows=drop``)."""


# --------------------------------------------------------------------------- Arrow bodies


def _find(batch: pa.RecordBatch, name: str) -> str:
    names: list[str] = batch.schema.names
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise SinkError(f"the DataFrame has no column {name!r} (its columns: {names})")


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _plain(kind: pa.DataType) -> bool:
    """Whether the server turns values of ``kind`` into JSON as Spark's ``to_json`` would."""
    if (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_null(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    ):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _plain(kind.value_type)
    if pa.types.is_struct(kind):
        return all(_plain(kind.field(i).type) for i in range(kind.num_fields))
    return False


def record_columns(batch: pa.RecordBatch, options: SinkOptions) -> pa.RecordBatch:
    """The record part of a body: the columns to send beside ``time``.

    Either a single ``record`` column of JSON text (``valueColumn``, or rows the server would
    misread: a lone column named ``record``, a column named ``time``, maps, binary, nested
    decimals) or the row's columns as they are, which the server turns into JSON objects.
    """
    if options.value_column is not None:
        column = batch.column(_find(batch, options.value_column))
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column = pc.cast(column, pa.string())
        elif not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise SinkError(
                f"option 'valueColumn' names a column of {column.type}: it must hold JSON text"
            )
        return pa.RecordBatch.from_arrays([pc.cast(column, pa.string())], names=["record"])
    drop = None if options.time_column is None else _find(batch, options.time_column)
    names = [n for n in batch.schema.names if n != drop]
    columns = [batch.column(n) for n in names]
    columns = [pc.cast(c, pa.float64()) if pa.types.is_decimal(c.type) else c for c in columns]
    passthrough = (
        names
        and names != ["record"]
        and "time" not in names
        and len(set(names)) == len(names)
        and all(_plain(c.type) for c in columns)
    )
    if passthrough:
        return pa.RecordBatch.from_arrays(columns, names=names)
    rows = pa.RecordBatch.from_arrays(columns, names=names).to_pylist() if names else []
    maps = [n for n, c in zip(names, columns, strict=True) if pa.types.is_map(c.type)]
    for row in rows:  # a map is a JSON object, as Spark's to_json writes it
        for name in maps:
            if row[name] is not None:
                row[name] = {str(k): v for k, v in row[name]}
    texts = (
        [orjson.dumps(r, default=_json_default).decode() for r in rows]
        if names
        else ["{}"] * batch.num_rows
    )
    return pa.RecordBatch.from_arrays([pa.array(texts, pa.string())], names=["record"])


def time_column(batch: pa.RecordBatch, options: SinkOptions, fixed: int | None) -> pa.Array:
    """The rows' times as int64: from ``timeColumn``, else ``fixed`` (or ``time``) for all."""
    if options.time_column is None:
        fixed = options.time if fixed is None else fixed
        if fixed is None:
            raise SinkError("no time for the rows: give option 'timeColumn' or 'time'")
        return pa.array([fixed] * batch.num_rows, pa.int64())
    name = _find(batch, options.time_column)
    column = batch.column(name)
    if not pa.types.is_integer(column.type):
        raise SinkError(f"the time column {name!r} must hold integers, not {column.type}")
    if column.null_count:
        raise SinkError(f"the time column {name!r} has nulls: every record needs a time")
    column = pc.cast(column, pa.int64())
    if len(column) and pc.min(column).as_py() < 0:
        raise SinkError(f"the time column {name!r} has negative times")
    return column


def frontier_batch(
    batch: pa.RecordBatch, options: SinkOptions, fixed: int | None
) -> pa.RecordBatch:
    """One Spark batch as the server's Arrow push shape: ``time`` and the record columns."""
    times = time_column(batch, options, fixed)
    records = record_columns(batch, options)
    return pa.RecordBatch.from_arrays(
        [times, *records.columns], names=["time", *records.schema.names]
    )


def ipc_body(batches: Sequence[pa.RecordBatch]) -> bytes:
    """An Arrow IPC stream of ``batches`` (all of one schema)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


@dataclass(frozen=True, slots=True)
class Body:
    """One staging request: an Arrow IPC stream and what it holds."""

    data: bytes
    rows: int
    max_time: int


@dataclass(slots=True)
class Tally:
    """What a task was given, and what it dropped."""

    seen: int = 0
    dropped: int = 0


def bodies(
    batches: Iterable[pa.RecordBatch],
    options: SinkOptions,
    fixed: int | None = None,
    floor: int | None = None,
    tally: Tally | None = None,
) -> Iterator[Body]:
    """The rows of ``batches`` as request bodies of up to ``options.batch_size`` rows each.

    Rows at times before ``floor`` are dropped. ``tally`` counts the rows given and dropped.
    """
    tally = Tally() if tally is None else tally
    pending: list[pa.RecordBatch] = []
    size = 0
    limit = options.batch_size

    def flush() -> Body:
        nonlocal pending, size
        schema = pending[0].schema
        same = [b if b.schema == schema else b.cast(schema) for b in pending]
        top = max(pc.max(b.column(0)).as_py() for b in same if b.num_rows)
        body = Body(ipc_body(same), size, top)
        pending, size = [], 0
        return body

    for raw in batches:
        tally.seen += raw.num_rows
        if raw.num_rows == 0:
            continue
        batch = frontier_batch(raw, options, fixed)
        if floor is not None and pc.min(batch.column(0)).as_py() < floor:
            kept = batch.filter(pc.greater_equal(batch.column(0), floor))
            tally.dropped += batch.num_rows - kept.num_rows
            batch = kept
            if batch.num_rows == 0:
                continue
        if pending and batch.schema != pending[0].schema:
            yield flush()
        offset = 0
        while offset < batch.num_rows:
            take = min(limit - size, batch.num_rows - offset)
            pending.append(batch.slice(offset, take))
            size += take
            offset += take
            if size >= limit:
                yield flush()
    if size:
        yield flush()


# --------------------------------------------------------------------------- tasks


def _client(options: SinkOptions) -> Client:
    conn = options.connection
    return Client(conn.url, conn.token, conn.timeout)


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
    before the input's time (read first) are dropped instead. The transaction must hold
    exactly the rows staged, or the task fails.
    """
    conn = options.connection
    name = transaction_name(writer, partition, attempt, batch_id)
    batches = iter(batches)  # what a late body leaves of it is counted after
    rows = 0
    top: int | None = None
    tally = Tally()
    with _client(options) as client:
        _discard_earlier(client, options, writer, partition, attempt, batch_id, speculation)
        floor = _input_time(client, options) if options.late_rows == "drop" else None
        in_flight: deque[Future[int]] = deque()
        held = 0  # the transaction's size, as the server's answers say
        try:
            for body in bodies(batches, options, fixed_time, floor, tally):
                if body.max_time > MAX_SPARK_TIME:  # pragma: no cover - int64 cannot
                    raise SinkError(f"time {body.max_time} does not fit a Spark LONG")
                while len(in_flight) >= IN_FLIGHT:
                    held = max(held, in_flight.popleft().result())
                in_flight.append(
                    client.submit(
                        client.aio.stage_arrow(conn.dataflow, options.input, name, body.data)
                    )
                )
                rows += body.rows
                top = body.max_time if top is None else max(top, body.max_time)
            while in_flight:
                held = max(held, in_flight.popleft().result())
            if held != rows:
                raise SinkError(
                    f"transaction {name} holds {held} rows, not the {rows} this attempt "
                    f"staged: another attempt of partition {partition} discarded or added "
                    f"to it meanwhile"
                )
        except BaseException as error:
            # Let the requests in flight finish (cancelling one does not unsend it): an
            # abort sent before they land would leave their rows staged.
            for future in in_flight:
                with contextlib.suppress(Exception):
                    future.result()
            if not isinstance(error, FrontierError):
                # Whatever failed (the rows, the connection, the task killed): nothing of
                # this attempt stays staged, if the server can still be told.
                with contextlib.suppress(Exception):
                    client.abort(conn.dataflow, options.input, name)
                raise
            client.abort(conn.dataflow, options.input, name)
            if not _late(error):
                raise SinkError(
                    f"staging rows of partition {partition} in input {options.input!r} "
                    f"failed: {error}"
                ) from error
            # Before the input's time: fine if this write was committed before (a re-run),
            # which only the committer can tell. It needs the count of the rows.
            for raw in batches:
                tally.seen += raw.num_rows
            return FrontierCommitMessage(
                partition, attempt, name, 0, None, str(error), tally.seen, tally.dropped
            )
    if tally.dropped:
        log.warning(
            "partition %d dropped %d rows before input %r's time %s (lateRows=drop)",
            partition,
            tally.dropped,
            options.input,
            floor,
        )
    return FrontierCommitMessage(
        partition, attempt, name, rows, top, None, tally.seen, tally.dropped
    )


# --------------------------------------------------------------------------- the committer


def _attempts(
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None,
) -> list[str]:
    """The transaction of every attempt of these tasks (that may have staged rows)."""
    return [
        transaction_name(writer, partition, attempt, batch_id)
        for partition, message in enumerate(messages)
        for attempt in swept_attempts(
            options.max_task_attempts, None if message is None else message.attempt
        )
    ]


def _sweep(
    client: Client,
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None,
) -> int:
    """Discard every transaction any attempt of these tasks may have staged; how many rows."""
    conn = options.connection
    names = _attempts(options, writer, messages, batch_id)
    futures = [
        client.submit(client.aio.abort(conn.dataflow, options.input, name)) for name in names
    ]
    discarded = 0
    for future in futures:
        try:
            discarded += future.result()
        except FrontierError as error:
            if error.status != 410:  # a closed input discarded everything already
                raise
    return discarded


def _advance_to(
    options: SinkOptions, messages: Sequence[FrontierCommitMessage], batch_time: int | None
) -> int | None:
    if options.advance != "max":
        return None
    if batch_time is not None:
        return batch_time + 1
    tops = [m.max_time for m in messages if m.max_time is not None]
    # The latest allowedLateness times stay open (an input already past it stays).
    return max(0, max(tops) + 1 - options.allowed_lateness) if tops else None


def _already_committed(error: FrontierError) -> bool:
    """The key was used before with other transactions (a replay with other attempts)."""
    return error.type == IDEMPOTENCY_KEY_REUSED


def commit_writes(
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None = None,
    batch_time: int | None = None,
) -> Any:
    """Commit the successful attempts' transactions at once, and discard the leftovers.

    One session-less commit call (at the input's time) with idempotency key
    :func:`~api.spark.options.idempotency_key`, which advances the input as
    ``advanceFrontier`` says (a micro-batch without rows still advances, under its key) and
    discards every other attempt's transaction in the same call (a re-run's too: the server
    discards them when it answers from the key). Only when no commit was made are the
    leftovers aborted one by one. With ``close`` the input is closed after. Returns the
    commit's ack: the first commit's when the write was committed before (``None`` if there
    was nothing to commit).

    A write answered from its key must have as many rows as the first commit applied
    (unless ``lateRows=drop``, which leaves no count to compare): another write under a
    ``writerId`` used before is a :class:`SinkError`, not rows silently skipped.
    """
    conn = options.connection
    done = [m for m in messages if m is not None]
    if len(done) < len(messages):
        raise SinkError("cannot commit: some tasks failed (their commit messages are missing)")
    transactions = [m.transaction for m in done if m.rows or m.late]
    late = [m for m in done if m.late]
    key = idempotency_key(writer, batch_id)
    advance = _advance_to(options, done, batch_time)
    ack = None
    with _client(options) as client:
        if transactions or advance is not None:
            leftovers = _attempts(options, writer, messages, batch_id)

            def commit(names: list[str], key: str, advance: int | None) -> Any:
                return client.commit(
                    conn.dataflow, options.input, names, key, advance, discard=leftovers
                )

            ack = _commit(commit, transactions, key, advance, late, _late_hint(options))
        if options.advance == "close":
            client.close_input(conn.dataflow, options.input)  # discards everything staged
        elif ack is None:
            try:
                _sweep(client, options, writer, messages, batch_id)
            except FrontierError as error:
                # The rows are committed: a leftover only holds staging space until aborted.
                log.warning("discarding leftover transactions of %s failed: %s", key, error)
    dropped = sum(m.dropped for m in done)
    if dropped:
        log.warning(
            "%s: %d rows before the input's time were dropped (lateRows=drop)", key, dropped
        )
    if ack is not None and options.late_rows == "fail":
        seen = sum(m.seen for m in done)
        applied = ack.get("applied") if isinstance(ack, dict) else None
        if isinstance(applied, int) and applied != seen:
            what = f"writerId {writer!r}" + (
                "" if batch_id is None else f" (micro-batch {batch_id})"
            )
            raise SinkError(
                f"{what} was committed before with {applied} rows, and this write has {seen}: "
                f"it is not a run of that write again, and nothing of it was applied (give "
                f"another write another writerId)"
            )
    return ack


def _late_hint(options: SinkOptions) -> str:
    """What to change when rows are before the input's time."""
    if options.time_column is None:
        return "choose a later time or timeOffset"
    return (
        "option allowedLateness keeps the latest times written open for late rows, and "
        "lateRows=drop drops rows later still"
    )


def _commit(
    commit: Callable[[list[str], str, int | None], Any],
    transactions: list[str],
    key: str,
    advance: int | None,
    late: Sequence[FrontierCommitMessage],
    hint: str = "choose a later time",
) -> Any:
    """``commit(transactions, key, advance)``, repeated with the same key if the answer is lost.

    A key used before with other transactions (``idempotency-key-reused``) is a re-run:
    the first commit's ack is asked for with the transactions the problem names (nothing is
    applied), or ``None`` if the problem names none.
    """
    try:
        return _repeated(commit, transactions, key, advance)
    except FrontierError as error:
        if _already_committed(error):
            log.info("commit %s was applied before (a re-run): not applied again", key)
            committed = error.problem.get("committed")
            if not isinstance(committed, list) or not committed:
                return None
            return _repeated(commit, [str(name) for name in committed], key, advance)
        if late and error.status == 404:
            raise SinkError(
                f"rows are before the input's time, and {key} was never committed: "
                f"{late[0].late} ({hint})"
            ) from error
        if error.type == TRANSACTION_EXPIRED:
            raise SinkError(
                f"the server discarded rows this write staged, as nobody committed them for "
                f"its staged_transaction_seconds: {error}; nothing was committed (run the "
                f"write again)"
            ) from error
        raise


def _repeated(
    commit: Callable[[list[str], str, int | None], Any],
    transactions: list[str],
    key: str,
    advance: int | None,
) -> Any:
    """``commit(...)``, called again with the same key while its answer is lost."""
    for attempt in range(COMMIT_TRIES):
        try:
            return commit(transactions, key, advance)
        except (FrontierConnectionError, aiohttp.ClientError, TimeoutError) as error:
            # The answer was lost, not necessarily the commit: the same key is safe.
            if attempt + 1 == COMMIT_TRIES:
                raise
            log.warning("commit %s: %r; trying again", key, error)
            time.sleep(COMMIT_BACKOFF * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def abort_writes(
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None = None,
) -> int:
    """Discard every transaction the tasks' attempts may have staged; how many rows."""
    with _client(options) as client:
        return _sweep(client, options, writer, messages, batch_id)


# --------------------------------------------------------------------------- Spark classes


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
