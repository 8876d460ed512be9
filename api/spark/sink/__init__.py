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
listing. An abort discards them all. A commit the server does not answer (the connection
refused or lost, a timeout, a 503 while it recovers its data directory) is made again with
the same key, with backoff, for ``commitRetrySeconds`` (60 by default): a server restarted
mid-commit applies it once, and the job succeeds.

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
restart commits under the same key. Each task takes a digest (SHA-256) of every row it was
given, as Spark handed them, before any is dropped
(:class:`~api.spark.sink.bodies.Tally`); the committer sends the tasks' digests, combined
in partition order, with the commit (``digest``). Under a key used before, the server
answers the first commit's ack without applying anything when the digests are equal,
whatever transactions this run staged (its rows may even be late by then, before the
input's time, and not staged at all), and refuses the commit with ``idempotency-key-reused``
naming the first digest when they differ: the committer then fails the write (another write
under a name used before is refused, whatever its count, never skipped in silence). So a run
again must give each partition the same rows in the same order, and the same Arrow batches
(``spark.sql.execution.arrow.maxRecordsPerBatch``), as Spark's replays of a job or a
micro-batch from a deterministic source do; rows a shuffle hands over in another order are
refused, not applied twice (sort within partitions if such a job may run again). A key an
earlier release's sink used carries no digest: the transactions decide, and the committer
asks for the first ack with the transactions the problem names. Unless late rows are
dropped, the commit must have applied as many rows as the tasks were given, a second check.

**Late rows.** With ``timeColumn``, ``allowedLateness`` keeps the latest times written
open after each commit: the input advances to the largest time written so far (by any
micro-batch: the server never moves it back) + 1 - ``allowedLateness``, so a micro-batch
may go back that far. A stream with ``timeColumn`` (and ``advanceFrontier`` max) must give
it: its writer refuses to start (when Spark plans the first micro-batch) without it, since
the defaults must never report a time complete that a later micro-batch may still write
into. A Spark watermark cannot give it: Spark keeps one only on a TIMESTAMP column, and the
sink's times are integers. ``lateRows=drop`` (the default for a stream with ``timeColumn``;
batch writes default to ``fail``) drops rows before the input's time (each task reads it
first) instead of failing the write; the commit says how many (``dropped``), the server
counts them once per key (``dropped_late`` of the input, ``frontier_records_dropped_late_total``
in ``/metrics``), and the driver logs them for each micro-batch. PySpark's Python data
source API has no hook for a sink's metrics, so the query's progress cannot show them.

The functions take plain values (no ``TaskContext``) so they are tested without a JVM;
the Spark classes (:mod:`api.spark.sink.writers`) only gather those values. The task's side
is :mod:`api.spark.sink.staging` (with the request bodies: :mod:`api.spark.sink.bodies`),
the driver's :mod:`api.spark.sink.committer`.
"""

from api.spark.sink.bodies import (
    Body,
    Tally,
    bodies,
    frontier_batch,
    ipc_body,
    record_columns,
    time_column,
)
from api.spark.sink.committer import abort_writes, commit_writes
from api.spark.sink.common import FrontierCommitMessage, SinkError
from api.spark.sink.staging import speculating, write_partition
from api.spark.sink.writers import FrontierStreamWriter, FrontierWriter

__all__ = [
    "Body",
    "FrontierCommitMessage",
    "FrontierStreamWriter",
    "FrontierWriter",
    "SinkError",
    "Tally",
    "abort_writes",
    "bodies",
    "commit_writes",
    "frontier_batch",
    "ipc_body",
    "record_columns",
    "speculating",
    "time_column",
    "write_partition",
]
