"""The committer, on the driver's side: the successful attempts' rows visible at once, once.

One session-less commit names the successful attempts' transactions, under the write's
idempotency key, advancing the input and discarding every other attempt's transaction; a
commit whose answer is lost is made again with the same key (:func:`_repeated`), and a
re-run answered from the key is checked to be the same write. :func:`abort_writes`
discards everything the attempts may have staged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

from api.client import IDEMPOTENCY_KEY_REUSED, Client, FrontierConnectionError, FrontierError
from api.spark.options import SinkOptions, idempotency_key, swept_attempts, transaction_name
from api.spark.sink.common import FrontierCommitMessage, SinkError, open_client

log = logging.getLogger("frontier.spark")

COMMIT_TRIES = 3
"""Commit calls made when the answer is lost (connection error, timeout): same key each."""

COMMIT_BACKOFF = 0.5
"""Seconds before the second commit call (twice that before the third)."""

TRANSACTION_EXPIRED = "https://frontier.dev/problems/transaction-expired"
"""The problem type of a staged transaction the server discarded as expired."""


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
    with open_client(options) as client:
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
        _check_same_write(ack, done, writer, batch_id)
    return ack


def _check_same_write(
    ack: Any, done: Sequence[FrontierCommitMessage], writer: str, batch_id: int | None
) -> None:
    """:class:`SinkError` unless the commit applied as many rows as the tasks were given.

    An ack answered from the key is the first commit's: a write with another count is not
    a run of that write again, and nothing of it was applied.
    """
    seen = sum(m.seen for m in done)
    applied = ack.get("applied") if isinstance(ack, dict) else None
    if isinstance(applied, int) and applied != seen:
        what = f"writerId {writer!r}" + ("" if batch_id is None else f" (micro-batch {batch_id})")
        raise SinkError(
            f"{what} was committed before with {applied} rows, and this write has {seen}: "
            f"it is not a run of that write again, and nothing of it was applied (give "
            f"another write another writerId)"
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
    with open_client(options) as client:
        return _sweep(client, options, writer, messages, batch_id)
