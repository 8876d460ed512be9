"""The committer, on the driver's side: the successful attempts' rows visible at once, once.

One session-less commit names the successful attempts' transactions, under the write's
idempotency key and with the digest of every row the tasks were given, advancing the input
and discarding every other attempt's transaction. A commit the server does not answer (its
connection lost, a timeout, a 503 while it recovers) is made again with the same key, with
backoff, for ``commitRetrySeconds`` (:func:`_repeated`). A key used before answers the first
commit when the digests agree, and is refused when they do not: the key committed other
rows. :func:`abort_writes` discards everything the attempts may have staged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from api.client import IDEMPOTENCY_KEY_REUSED, Client, FrontierConnectionError, FrontierError
from api.spark.options import SinkOptions, idempotency_key, swept_attempts, transaction_name
from api.spark.sink.common import FrontierCommitMessage, SinkError, open_client

log = logging.getLogger("frontier.spark")

COMMIT_BACKOFF = 0.25
"""Seconds before the second commit call; each wait after is twice the last."""

COMMIT_BACKOFF_MOST = 4.0
"""The longest wait between two commit calls."""

TRANSACTION_EXPIRED = "https://frontier.dev/problems/transaction-expired"
"""The problem type of a staged transaction the server discarded as expired."""

UNAVAILABLE = 503
"""What a server answers while it recovers its data directory (or its disk refuses writes)."""


@dataclass(frozen=True, slots=True)
class Write:
    """What the commit of a write (or of a micro-batch) says."""

    key: str
    """The idempotency key: :func:`~api.spark.options.idempotency_key`."""
    what: str
    """The write, as messages name it: the writerId (and micro-batch)."""
    transactions: list[str]
    advance: int | None
    digest: str
    dropped: int
    retry_seconds: float


def write_digest(messages: Sequence[FrontierCommitMessage]) -> str:
    """The digest of a write: its tasks' digests (of every row given), in partition order."""
    digest = hashlib.sha256()
    for message in sorted(messages, key=lambda m: m.partition):
        digest.update(f"{message.partition}:{message.digest}\n".encode())
    return digest.hexdigest()


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
    """Where the commit advances the input (``None``: nowhere).

    With ``timeColumn``, to the largest time written + 1 - ``allowedLateness``. The server
    never moves an input back (an ``advance_to`` it is past is satisfied), so across
    micro-batches the input follows the largest time written so far by any of them.
    """
    if options.advance != "max":
        return None
    if batch_time is not None:
        return batch_time + 1
    tops = [m.max_time for m in messages if m.max_time is not None]
    return max(0, max(tops) + 1 - options.allowed_lateness) if tops else None


def _already_committed(error: FrontierError) -> bool:
    """The key was used before (with other transactions, or other rows)."""
    return error.type == IDEMPOTENCY_KEY_REUSED


def _write(
    options: SinkOptions,
    writer: str,
    done: Sequence[FrontierCommitMessage],
    batch_id: int | None,
    batch_time: int | None,
) -> Write:
    return Write(
        idempotency_key(writer, batch_id),
        f"writerId {writer!r}" + ("" if batch_id is None else f" (micro-batch {batch_id})"),
        [m.transaction for m in done if m.rows or m.late],
        _advance_to(options, done, batch_time),
        write_digest(done),
        sum(m.dropped for m in done),
        options.commit_retry_seconds,
    )


def commit_writes(
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None = None,
    batch_time: int | None = None,
) -> Any:
    """Commit the successful attempts' transactions at once, and discard the leftovers.

    One session-less commit call (at the input's time) with idempotency key
    :func:`~api.spark.options.idempotency_key` and the write's digest, which advances the
    input as ``advanceFrontier`` says (a write without rows still commits, under its key)
    and discards every other attempt's transaction in the same call (a re-run's too: the
    server discards them when it answers from the key). It tells the server how many rows
    were dropped as late. With ``close`` the input is closed after. Returns the commit's
    ack: the first commit's when the write was committed before (``None`` only when that
    commit's answer cannot be had; the leftovers are then aborted one by one).

    A write whose key committed other rows (another digest) is a :class:`SinkError`, not
    rows silently skipped. Unless late rows are dropped, a second check: the commit must
    have applied as many rows as the tasks were given (:func:`_check_same_write`).
    """
    conn = options.connection
    done = [m for m in messages if m is not None]
    if len(done) < len(messages):
        raise SinkError("cannot commit: some tasks failed (their commit messages are missing)")
    write = _write(options, writer, done, batch_id, batch_time)
    late = [m for m in done if m.late]
    with open_client(options) as client:
        commit = _caller(client, options, write, _attempts(options, writer, messages, batch_id))
        try:
            ack = _commit(commit, write, late, _late_hint(options))
        except SinkError:
            _sweep_quietly(client, options, writer, messages, batch_id, write)  # refused
            raise
        if options.advance == "close":
            client.close_input(conn.dataflow, options.input)  # discards everything staged
        elif ack is None:
            _sweep_quietly(client, options, writer, messages, batch_id, write)
    if write.dropped:
        log.warning(
            "%s: %d rows before the input's time were dropped (lateRows=drop); the input "
            "counts them (dropped_late)",
            write.key,
            write.dropped,
        )
    if ack is not None and options.late_rows == "fail":
        _check_same_write(ack, done, write)
    return ack


def _caller(
    client: Client, options: SinkOptions, write: Write, leftovers: list[str]
) -> Callable[[list[str]], Any]:
    """The commit call of ``write``, naming the transactions given (discarding ``leftovers``)."""
    conn = options.connection

    def commit(names: list[str]) -> Any:
        return client.commit(
            conn.dataflow,
            options.input,
            names,
            write.key,
            write.advance,
            discard=leftovers,
            digest=write.digest,
            dropped=write.dropped,
        )

    return commit


def _sweep_quietly(
    client: Client,
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None,
    write: Write,
) -> None:
    """:func:`_sweep`, whose failure is only logged: a leftover holds staging space, no more.

    After a commit (its rows are in) or a refusal (none of them will be): the transactions
    of this write that are still staged go.
    """
    try:
        _sweep(client, options, writer, messages, batch_id)
    except FrontierError as error:
        log.warning("discarding leftover transactions of %s failed: %s", write.key, error)


def _check_same_write(ack: Any, done: Sequence[FrontierCommitMessage], write: Write) -> None:
    """:class:`SinkError` unless the commit applied as many rows as the tasks were given.

    The server compares digests only when both commits carry one: under a key an earlier
    release's sink used (none), an ack answered from the key is the first commit's, and a
    write with another count is not a run of that write again (nothing of it was applied).
    """
    seen = sum(m.seen for m in done)
    applied = ack.get("applied") if isinstance(ack, dict) else None
    if isinstance(applied, int) and applied != seen:
        raise SinkError(
            f"{write.what} was committed before with {applied} rows, and this write has "
            f"{seen}: it is not a run of that write again, and nothing of it was applied "
            f"(give another write another writerId)"
        )


def _late_hint(options: SinkOptions) -> str:
    """What to change when rows are before the input's time."""
    if options.time_column is None:
        return "choose a later time or timeOffset"
    return (
        "option allowedLateness keeps the latest times written open for late rows, and "
        "lateRows=drop drops rows later still"
    )


def _commit(
    commit: Callable[[list[str]], Any],
    write: Write,
    late: Sequence[FrontierCommitMessage],
    hint: str = "choose a later time",
) -> Any:
    """``commit(transactions)``, made again with the same key while it gets no answer.

    ``idempotency-key-reused`` naming the first commit's digest means the key committed
    other rows: :class:`SinkError`, nothing applied. Without one (a key an earlier release's
    sink used, with other transactions) the first commit's ack is asked for with the
    transactions the problem names (nothing is applied), or ``None`` if it names none.
    """
    try:
        return _repeated(commit, write.transactions, write)
    except FrontierError as error:
        if _already_committed(error):
            return _answered_before(commit, write, error)
        if late and error.status == 404:
            raise SinkError(
                f"rows are before the input's time, and {write.key} was never committed: "
                f"{late[0].late} ({hint})"
            ) from error
        if error.type == TRANSACTION_EXPIRED:
            raise SinkError(
                f"the server discarded rows this write staged, as nobody committed them for "
                f"its staged_transaction_seconds: {error}; nothing was committed (run the "
                f"write again)"
            ) from error
        raise


def _answered_before(commit: Callable[[list[str]], Any], write: Write, error: FrontierError) -> Any:
    """The first commit's ack under a key used before, or :class:`SinkError` (other rows)."""
    first = error.problem.get("digest")
    if isinstance(first, str):  # digests on both sides, and they differ
        raise SinkError(
            f"{write.what} was committed before with other rows (digest {first[:16]}…, this "
            f"write's {write.digest[:16]}…): it is not a run of that write again, and nothing "
            f"of it was applied. A run again must give each partition the same rows in the "
            f"same order (as Spark's replays of a job or micro-batch do); give another write "
            f"another writerId"
        ) from error
    log.info("commit %s was applied before (a re-run): not applied again", write.key)
    committed = error.problem.get("committed")
    if not isinstance(committed, list) or not committed:
        return None
    return _repeated(commit, [str(name) for name in committed], write)


def _repeated(commit: Callable[[list[str]], Any], transactions: list[str], write: Write) -> Any:
    """``commit(transactions)``, made again with the same key while the server cannot answer.

    No answer (the connection refused or lost, a timeout) or a 503 (the server recovering)
    may hide a commit that was applied, or not: the same key is safe either way. It is made
    again after :data:`COMMIT_BACKOFF` seconds, twice that after the next, up to
    :data:`COMMIT_BACKOFF_MOST`, for ``commitRetrySeconds`` in all; then the last error.
    """
    deadline = time.monotonic() + write.retry_seconds
    wait = COMMIT_BACKOFF
    while True:
        try:
            return commit(transactions)
        except (FrontierConnectionError, aiohttp.ClientError, TimeoutError, FrontierError) as error:
            if isinstance(error, FrontierError) and error.status != UNAVAILABLE:
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            log.warning(
                "commit %s: %s; trying again for %.0f s more (commitRetrySeconds)",
                write.key,
                error,
                left,
            )
            time.sleep(min(wait, left))
            wait = min(2 * wait, COMMIT_BACKOFF_MOST)


def abort_writes(
    options: SinkOptions,
    writer: str,
    messages: Sequence[FrontierCommitMessage | None],
    batch_id: int | None = None,
) -> int:
    """Discard every transaction the tasks' attempts may have staged; how many rows."""
    with open_client(options) as client:
        return _sweep(client, options, writer, messages, batch_id)
