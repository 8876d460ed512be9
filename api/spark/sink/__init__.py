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
