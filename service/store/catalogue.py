"""The catalogue: what the service holds besides the inputs' logs, in one SQLite file.

``catalogue.sqlite3`` in the data directory (the standard library's ``sqlite3``, WAL mode,
``synchronous=FULL``: a change is durable when its transaction commits) holds:

* ``dataflows``: every live dataflow in creation order (the control plane's order, in which a
  restarted server builds them again), with its tenant, name, graph (JSON), status, and the
  time below which its inputs' logs were truncated (every output had forgotten those times);
* ``consumers``: each output's registered readers and the time each has committed;
* ``meta``: what the directory was written by: ``shape`` (``{"processes", "workers"}``, the
  cluster's shape) and ``process`` (this directory's process index); and, per dataflow,
  ``holders``: which process holds each of its inputs (``{input: process}``, kept as it
  was decided when the dataflow was created: ``docs/cluster.md``, "Changing the shape").

The producers' state (sessions, sequence numbers, open transactions, idempotency keys) is not
here: it is the inputs' logs (and the checkpoints that head their segments), written in the
same append as the operation that changes it, so it can never disagree with them.

The schema has a version (``PRAGMA user_version``) and a list of migrations: a newer release
opens an older directory by applying the migrations it lacks; an older release refuses a
directory written by a newer one with :class:`NewerCatalogue`, changing nothing.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from operators.progress import decode_time, encode_time
from service.store.log import StoreError

FILE = "catalogue.sqlite3"

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE dataflows (
        position   INTEGER PRIMARY KEY AUTOINCREMENT,
        id         TEXT NOT NULL UNIQUE,
        tenant     TEXT NOT NULL,
        name       TEXT NOT NULL,
        graph      BLOB NOT NULL,
        created_at REAL NOT NULL,
        status     TEXT NOT NULL,
        error      TEXT
    );
    CREATE TABLE consumers (
        dataflow  TEXT NOT NULL,
        output    TEXT NOT NULL,
        consumer  TEXT NOT NULL,
        committed BLOB,
        PRIMARY KEY (dataflow, output, consumer)
    );
    """,
    """
    ALTER TABLE dataflows ADD COLUMN truncated_before INTEGER NOT NULL DEFAULT 0;
    """,
    # The shape a directory was written by, and where each input lives: NULL holders are
    # a directory written before this migration, filled in at its next start.
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value BLOB NOT NULL
    );
    ALTER TABLE dataflows ADD COLUMN holders BLOB;
    """,
)
"""Migration ``i`` takes the schema from version ``i`` to ``i + 1``."""

VERSION = len(MIGRATIONS)
"""The schema version this release writes."""


class NewerCatalogue(StoreError):
    """The data directory was written by a newer release: this one will not touch it."""


class MissingCatalogue(StoreError):
    """The catalogue is gone but input logs are there: starting would delete them."""


class DamagedCatalogue(StoreError):
    """The catalogue cannot be read as a catalogue: the server will not guess."""


@dataclass(frozen=True, slots=True)
class StoredDataflow:
    """A dataflow as the catalogue holds it."""

    position: int
    id: str
    tenant: str
    name: str
    graph: Any
    """The graph, as it was submitted."""
    created_at: float
    status: str
    error: str | None
    truncated_before: int = 0
    """Its inputs' logs hold no record at a time before this one (they were truncated)."""
    holders: dict[str, int] | None = None
    """Which process holds each input (``None``: written before holders were kept)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """A cluster's shape: how many processes, and workers in each."""

    processes: int
    workers: int

    def __str__(self) -> str:
        """``3 processes x 2 workers``, as messages say it.

        >>> str(Shape(1, 1)), str(Shape(3, 2))
        ('1 process x 1 worker', '3 processes x 2 workers')
        """
        processes = "process" if self.processes == 1 else "processes"
        workers = "worker" if self.workers == 1 else "workers"
        return f"{self.processes} {processes} x {self.workers} {workers}"


def _writes(method: Any) -> Any:
    """A write: a disk that refuses it (full, failing) raises :class:`OSError`.

    SQLite rolls the statement back first: nothing of it is applied.
    """

    @functools.wraps(method)
    def write(self: Catalogue, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise OSError(f"the catalogue refused a write: {error}") from error

    return write


class Catalogue:
    """The catalogue file of a data directory (created on first use).

    With ``create`` false, a missing file is :class:`MissingCatalogue`. A file SQLite cannot
    read, or whose ``quick_check`` finds damage, is :class:`DamagedCatalogue`: nothing is
    written to it then.
    """

    def __init__(self, directory: Path | str, create: bool = True) -> None:
        self.path = Path(directory) / FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not create and not self.path.exists():
            raise MissingCatalogue(f"{self.path} is missing")
        if self.path.exists():
            self._check()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            self._migrate()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        except BaseException:
            self._db.close()
            raise

    def _check(self) -> None:
        """:class:`DamagedCatalogue` unless SQLite finds the file sound.

        On a connection that can only read: one that could write would, on closing, fold
        the write-ahead log into a damaged file (SQLite's checkpoint), changing what a
        refusal must leave as it found it.
        """
        try:
            with contextlib.closing(
                sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            ) as db:
                problems = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
                if problems == ["ok"]:
                    return
        except sqlite3.DatabaseError as error:
            raise DamagedCatalogue(f"{self.path} cannot be read: {error}") from None
        raise DamagedCatalogue(f"{self.path} is damaged: {'; '.join(problems[:3])}")

    def _migrate(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version > VERSION:
            raise NewerCatalogue(
                f"{self.path} has schema version {version}, written by a newer release of "
                f"Frontier; this release reads versions up to {VERSION}: run the newer "
                f"release, or start with another data directory"
            )
        for target in range(version + 1, VERSION + 1):
            # One transaction per step: a crash mid-migration leaves the previous version.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _statements(MIGRATIONS[target - 1]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {target}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @property
    def version(self) -> int:
        """The schema version of the file."""
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        return int(version)

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    # ----------------------------------------------------------------- meta

    def meta(self, key: str) -> Any:
        """The value kept under ``key`` (JSON), or ``None``."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else orjson.loads(row[0])

    @_writes
    def set_meta(self, key: str, value: Any) -> None:
        """Keep ``value`` (JSON) under ``key``."""
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, orjson.dumps(value)),
        )

    def shape(self) -> tuple[Shape, int] | None:
        """The shape the directory was written by, and its process index (``None``: unknown)."""
        shape, process = self.meta("shape"), self.meta("process")
        if shape is None or process is None:
            return None
        return Shape(int(shape["processes"]), int(shape["workers"])), int(process)

    @_writes
    def set_shape(self, shape: Shape, process: int) -> None:
        """Record the shape this directory is written by from now on, in one transaction."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            value = {"processes": shape.processes, "workers": shape.workers}
            for key, item in (("shape", value), ("process", process)):
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, orjson.dumps(item)),
                )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @_writes
    def add_dataflow(
        self,
        id: str,
        tenant: str,
        name: str,
        graph: Any,
        created_at: float,
        holders: dict[str, int] | None = None,
    ) -> int:
        """Record a new dataflow (status ``running``); its position in creation order.

        The graph is kept as JSON, and so are its inputs' ``holders``. Positions only grow:
        a new dataflow is after every other.
        """
        kept = None if holders is None else orjson.dumps(holders)
        cursor = self._db.execute(
            "INSERT INTO dataflows (id, tenant, name, graph, created_at, status, holders) "
            "VALUES (?, ?, ?, ?, ?, 'running', ?)",
            (id, tenant, name, orjson.dumps(graph), created_at, kept),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    @_writes
    def set_status(self, id: str, status: str, error: str | None = None) -> None:
        """Record a dataflow's status (``failed`` with its error, say)."""
        self._db.execute(
            "UPDATE dataflows SET status = ?, error = ? WHERE id = ?", (status, error, id)
        )

    @_writes
    def set_holders(self, id: str, holders: dict[str, int]) -> None:
        """Record which process holds each of a dataflow's inputs."""
        self._db.execute(
            "UPDATE dataflows SET holders = ? WHERE id = ?", (orjson.dumps(holders), id)
        )

    @_writes
    def truncated(self, id: str, before: int) -> None:
        """Record that a dataflow's logs hold no record at a time before ``before``."""
        self._db.execute("UPDATE dataflows SET truncated_before = ? WHERE id = ?", (before, id))

    @_writes
    def drop_dataflow(self, id: str) -> None:
        """Forget a dataflow and everything recorded for it, in one transaction."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("DELETE FROM consumers WHERE dataflow = ?", (id,))
            self._db.execute("DELETE FROM dataflows WHERE id = ?", (id,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def dataflows(self) -> Iterator[StoredDataflow]:
        """Every dataflow, in creation order."""
        rows = self._db.execute(
            "SELECT position, id, tenant, name, graph, created_at, status, error, "
            "truncated_before, holders FROM dataflows ORDER BY position"
        )
        for row in rows.fetchall():
            position, id, tenant, name, graph, created_at, status, error, cut, holders = row
            yield StoredDataflow(
                position,
                id,
                tenant,
                name,
                orjson.loads(graph),
                created_at,
                status,
                error,
                cut,
                None if holders is None else orjson.loads(holders),
            )

    # ----------------------------------------------------------------- consumers

    @_writes
    def commit_consumer(
        self, dataflow: str, output: str, consumer: str, committed: Hashable | None
    ) -> None:
        """Record what a consumer has committed (a time, kept as JSON, or None)."""
        value = None if committed is None else orjson.dumps(encode_time(committed))
        self._db.execute(
            "INSERT INTO consumers (dataflow, output, consumer, committed) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (dataflow, output, consumer) DO UPDATE SET committed = excluded.committed",
            (dataflow, output, consumer, value),
        )

    @_writes
    def forget_consumer(self, dataflow: str, output: str, consumer: str) -> None:
        """Unregister a consumer."""
        self._db.execute(
            "DELETE FROM consumers WHERE dataflow = ? AND output = ? AND consumer = ?",
            (dataflow, output, consumer),
        )

    def consumers(self, dataflow: str) -> list[tuple[str, str, Hashable | None]]:
        """A dataflow's consumers: ``(output, consumer, committed)``."""
        rows = self._db.execute(
            "SELECT output, consumer, committed FROM consumers WHERE dataflow = ? "
            "ORDER BY output, consumer",
            (dataflow,),
        )
        return [
            (str(o), str(c), None if t is None else decode_time(orjson.loads(t)))
            for o, c, t in rows.fetchall()
        ]


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script (``executescript`` would commit on its own)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
