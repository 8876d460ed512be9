"""What a task and the committer share: the commit message, the sink's error, the client."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from api.client import Client
from api.spark.options import SinkOptions


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
    digest: str = ""
    """The digest of every row the task was given (:class:`~api.spark.sink.bodies.Tally`)."""


def open_client(options: SinkOptions) -> Client:
    """A blocking client of the sink's server, to close after use (a ``with`` block)."""
    conn = options.connection
    return Client(conn.url, conn.token, conn.timeout)
