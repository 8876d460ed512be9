"""The journal: what the service keeps of its dataflows, or, in memory, nothing at all.

A :class:`Journal` is given to the manager and, through it, to every dataflow and input
when they are made: a :class:`StoreJournal` writes to a data directory
(:class:`~service.store.Store`): the dataflows and their consumers in the catalogue, and
every operation on an input in that input's log, before it takes effect; a
:class:`NullJournal` (no data directory: a library user running in-process) keeps nothing,
and every write is free. Nothing else in the service asks which it has.

Truncation sits here too: once every output of a dataflow has forgotten the times before
some time, the inputs' logs are cut below it (:meth:`Journal.truncate`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from typing import Any, Protocol

from service.app.errors import Unavailable
from service.app.settings import Settings
from service.app.views import StoreStats
from service.store import (
    Checkpoint,
    Durability,
    Frame,
    InputLog,
    Operation,
    Shape,
    Store,
    StoredDataflow,
    WriteRefused,
)

log = logging.getLogger("frontier.service")


class InputJournal(Protocol):
    """Where an input writes each operation before it takes effect (the input's log)."""

    @property
    def defers_effects(self) -> bool:
        """Whether effects on the dataflow wait until their operation is durable."""
        ...

    @property
    def checkpoints(self) -> bool:
        """Whether it writes checkpoints (open transactions then keep their batches' bytes)."""
        ...

    @property
    def position(self) -> int:
        """The log position of the last operation written."""
        ...

    @property
    def synced(self) -> int:
        """Every operation logged before this position is durable."""
        ...

    def record(self, operation: Operation, state: Callable[[], Checkpoint]) -> None:
        """Write ``operation`` (not yet durable); :class:`Unavailable` if it cannot be.

        Nothing of the operation may be applied when this raises. ``state`` is the input's
        state before the operation, for a checkpoint if one is due.
        """
        ...

    def wait(self) -> Awaitable[None] | None:
        """What to await until everything written so far is durable (``None``: nothing)."""
        ...

    def sent(self, times: Iterable[Hashable]) -> None:
        """The operation just written sends records at ``times`` (where the log may be cut)."""
        ...

    def frames(self) -> Iterator[tuple[int, int, Frame]]:
        """What the log holds, to replay: ``(position, segment, frame)`` in order."""
        ...

    def replayed(self, segment: int, times: Iterable[Hashable]) -> None:
        """A replayed frame of ``segment`` sent records at ``times``."""
        ...

    def describe(self) -> str:
        """Where it keeps what it keeps (for messages)."""
        ...


class NullInputJournal:
    """The journal of an input kept in memory only: nothing is written, all is durable."""

    __slots__ = ()

    defers_effects = False
    checkpoints = False
    position = -1
    synced = 0

    def record(self, operation: Operation, state: Callable[[], Checkpoint]) -> None:
        """Nothing to write."""

    def wait(self) -> None:
        """Nothing to wait for."""

    def sent(self, times: Iterable[Hashable]) -> None:
        """Nothing to note."""

    def frames(self) -> Iterator[tuple[int, int, Frame]]:
        """Nothing to replay."""
        return iter(())

    def replayed(self, segment: int, times: Iterable[Hashable]) -> None:
        """Nothing to note."""

    def describe(self) -> str:
        """Nowhere."""
        return "memory"


NULL_INPUT = NullInputJournal()


class LoggedInput:
    """An input's journal on disk: its :class:`~service.store.InputLog`."""

    __slots__ = ("defers_effects", "log")

    checkpoints = True

    def __init__(self, input_log: InputLog, defers_effects: bool) -> None:
        self.log = input_log
        self.defers_effects = defers_effects

    @property
    def position(self) -> int:
        """The log position of the last operation written."""
        return self.log.position

    @property
    def synced(self) -> int:
        """Every operation logged before this position is durable."""
        return self.log.synced

    def record(self, operation: Operation, state: Callable[[], Checkpoint]) -> None:
        """Write one operation; :class:`Unavailable` (nothing applied) if the disk refuses."""
        try:
            self.log.append(operation, state)
        except WriteRefused as refused:
            raise Unavailable(
                f"input {self.log.name!r} cannot log the {operation.kind}: {refused.reason}; "
                "nothing of it was applied",
                retry_after=1,
            ) from None

    def wait(self) -> Awaitable[None] | None:
        """What to await until everything written so far is durable (None: nothing)."""
        try:
            return self.log.written()
        except OSError as error:
            raise Unavailable(
                f"the data directory failed: {error.strerror or error}", retry_after=1
            ) from None

    def sent(self, times: Iterable[Hashable]) -> None:
        """Note the latest time of the current segment's records."""
        self.log.sent(times)

    def frames(self) -> Iterator[tuple[int, int, Frame]]:
        """Every frame the log keeps, in order."""
        return self.log.frames()

    def replayed(self, segment: int, times: Iterable[Hashable]) -> None:
        """Note the latest time of a replayed segment's records (for truncation)."""
        self.log.sent(times, segment)

    def describe(self) -> str:
        """The log's directory."""
        return str(self.log.directory)


class Journal(Protocol):
    """What the service keeps of its dataflows: the catalogue and the inputs' logs."""

    def open(self) -> list[StoredDataflow]:
        """Open what is kept; the dataflows kept, in creation order.

        Before anything else is asked of it. Leftovers of a drop a crash cut short go;
        :class:`~service.store.StoreError` if what is kept cannot be used as it is.
        """
        ...

    def open_logs(self, dataflow: str, inputs: list[str]) -> None:
        """Open (and check) the logs of a stored dataflow's inputs before anything runs."""
        ...

    def input(self, dataflow: str, index: int, name: str) -> InputJournal:
        """The journal of input ``name``, the ``index``-th of the dataflow's graph."""
        ...

    def add_dataflow(
        self,
        id: str,
        tenant: str,
        name: str,
        graph: dict[str, Any],
        created_at: float,
        holders: dict[str, int] | None = None,
    ) -> None:
        """Keep a new dataflow; :class:`Unavailable` (nothing kept) if it cannot be."""
        ...

    def set_holders(self, id: str, holders: dict[str, int]) -> None:
        """Keep which process holds each of a dataflow's inputs."""
        ...

    def failed(self, id: str, error: str) -> None:
        """Keep that a dataflow failed, and why."""
        ...

    def drop(self, id: str) -> None:
        """Forget a dataflow: its catalogue rows, then its logs."""
        ...

    def commit_consumer(
        self, dataflow: str, output: str, consumer: str, committed: Hashable | None
    ) -> None:
        """Keep what a consumer has read; :class:`Unavailable` if it cannot be kept."""
        ...

    def forget_consumer(self, dataflow: str, output: str, consumer: str) -> None:
        """Forget a consumer; :class:`Unavailable` if it cannot be."""
        ...

    def consumers(self, dataflow: str) -> list[tuple[str, str, Hashable | None]]:
        """A dataflow's kept consumers: ``(output, consumer, committed)``."""
        ...

    def truncate(self, dataflow: str, before: int) -> bool:
        """Cut the dataflow's inputs' logs below ``before`` (the catalogue first).

        Whether they were (``False``: not now, it is tried again later).
        """
        ...

    def write_problem(self) -> str | None:
        """Why writes are refused now (a full disk, say), or ``None``: checked afresh."""
        ...

    def stats(self, recovery_seconds: float | None, records_replayed: int) -> StoreStats | None:
        """What the metrics show of the data directory (``None`` without one)."""
        ...

    async def close(self) -> None:
        """Sync what is left and close every file."""
        ...


class NullJournal:
    """No data directory: nothing is kept, and a restart starts empty."""

    def open(self) -> list[StoredDataflow]:
        """Nothing was kept."""
        return []

    def open_logs(self, dataflow: str, inputs: list[str]) -> None:
        """No logs to open."""

    def input(self, dataflow: str, index: int, name: str) -> InputJournal:
        """An input journal that keeps nothing."""
        return NULL_INPUT

    def add_dataflow(
        self,
        id: str,
        tenant: str,
        name: str,
        graph: dict[str, Any],
        created_at: float,
        holders: dict[str, int] | None = None,
    ) -> None:
        """Nothing to keep."""

    def set_holders(self, id: str, holders: dict[str, int]) -> None:
        """Nothing to keep."""

    def failed(self, id: str, error: str) -> None:
        """Nothing to keep."""

    def drop(self, id: str) -> None:
        """Nothing to forget."""

    def commit_consumer(
        self, dataflow: str, output: str, consumer: str, committed: Hashable | None
    ) -> None:
        """Nothing to keep."""

    def forget_consumer(self, dataflow: str, output: str, consumer: str) -> None:
        """Nothing to forget."""

    def consumers(self, dataflow: str) -> list[tuple[str, str, Hashable | None]]:
        """None kept."""
        return []

    def truncate(self, dataflow: str, before: int) -> bool:
        """No logs to cut."""
        return False

    def write_problem(self) -> str | None:
        """Nothing is written: nothing is refused."""
        return None

    def stats(self, recovery_seconds: float | None, records_replayed: int) -> StoreStats | None:
        """No data directory to show."""
        return None

    async def close(self) -> None:
        """Nothing to close."""


class StoreJournal:
    """The journal of a data directory (``Settings.data_dir``): every write is kept.

    Made when the service is, opened (:meth:`open`) when it starts: the directory is read
    then, every log checked before anything runs.
    """

    def __init__(self, settings: Settings, on_failure: Callable[[BaseException], None]) -> None:
        self._settings = settings
        self._on_failure = on_failure
        self._store: Store | None = None
        self._inputs: dict[tuple[str, str], LoggedInput] = {}
        """Each input's journal (dataflow id, input name), opened before it is built."""

    @property
    def store(self) -> Store:
        """The data directory (once opened)."""
        if self._store is None:
            raise RuntimeError("the journal is not open: open() it first")
        return self._store

    def open(self) -> list[StoredDataflow]:
        """Open the directory; the kept dataflows (a cut drop's leftover logs go)."""
        settings = self._settings
        assert settings.data_dir is not None
        self._store = Store(
            settings.data_dir,
            Durability(settings.durability),
            on_failure=self._on_failure,
            segment_bytes=settings.log_segment_bytes,
        )
        stored = list(self.store.catalogue.dataflows())
        self.store.remove_orphans({dataflow.id for dataflow in stored})
        return stored

    def open_logs(self, dataflow: str, inputs: list[str]) -> None:
        """Open every input's log of a kept dataflow (a corrupt one refuses to start)."""
        for index, name in enumerate(inputs):
            self.input(dataflow, index, name)

    def input(self, dataflow: str, index: int, name: str) -> InputJournal:
        """The journal of an input: its log (opened once, and kept for the dataflow)."""
        journal = self._inputs.get((dataflow, name))
        if journal is None:
            fsync = self.store.durability is Durability.FSYNC
            journal = LoggedInput(self.store.input_log(dataflow, index, name), fsync)
            self._inputs[(dataflow, name)] = journal
        return journal

    def _refused(self, error: OSError, what: str) -> Unavailable:
        reason = self.store.refused(error)
        return Unavailable(f"{what}: {reason}; nothing of it was applied", retry_after=1)

    def add_dataflow(
        self,
        id: str,
        tenant: str,
        name: str,
        graph: dict[str, Any],
        created_at: float,
        holders: dict[str, int] | None = None,
    ) -> None:
        """Keep a new dataflow in the catalogue (before its logs exist)."""
        try:
            self.store.catalogue.add_dataflow(id, tenant, name, graph, created_at, holders)
        except OSError as error:
            raise self._refused(error, "the dataflow cannot be stored") from None

    def set_holders(self, id: str, holders: dict[str, int]) -> None:
        """Keep which process holds each of a dataflow's inputs."""
        self.store.catalogue.set_holders(id, holders)

    def shape(self) -> tuple[Shape, int] | None:
        """The shape the catalogue says the directory was written by, and its process."""
        return self.store.catalogue.shape()

    def set_shape(self, shape: Shape, process: int) -> None:
        """Keep the shape the directory is written by from now on."""
        self.store.catalogue.set_shape(shape, process)

    def held_logs(self) -> set[tuple[str, int]]:
        """The inputs whose logs here hold frames (found when the directory was opened)."""
        return self.store.held_logs()

    def failed(self, id: str, error: str) -> None:
        """Keep that a dataflow failed, and why."""
        self.store.catalogue.set_status(id, "failed", error)

    def drop(self, id: str) -> None:
        """Forget a dataflow: its catalogue rows, then its logs."""
        self.store.drop(id)
        for key in [key for key in self._inputs if key[0] == id]:
            del self._inputs[key]

    def commit_consumer(
        self, dataflow: str, output: str, consumer: str, committed: Hashable | None
    ) -> None:
        """Keep what a consumer has read (before it lets the output forget anything)."""
        try:
            self.store.catalogue.commit_consumer(dataflow, output, consumer, committed)
        except OSError as error:
            raise self._refused(error, "the commit cannot be stored") from None

    def forget_consumer(self, dataflow: str, output: str, consumer: str) -> None:
        """Forget a consumer."""
        try:
            self.store.catalogue.forget_consumer(dataflow, output, consumer)
        except OSError as error:
            raise self._refused(error, "the consumer cannot be forgotten") from None

    def consumers(self, dataflow: str) -> list[tuple[str, str, Hashable | None]]:
        """A dataflow's kept consumers."""
        return self.store.catalogue.consumers(dataflow)

    def truncate(self, dataflow: str, before: int) -> bool:
        """Cut the dataflow's inputs' logs below ``before``, the catalogue first.

        A restart then knows those times are gone, whatever segments a crash left. ``False``
        (nothing cut) if the catalogue refuses the write: it is tried again later.
        """
        try:
            self.store.catalogue.truncated(dataflow, before)
        except OSError as error:
            log.warning("truncating the logs of %s waits: %s", dataflow, error)
            return False
        for (owner, _name), journal in self._inputs.items():
            if owner == dataflow:
                journal.log.truncate(before)
        return True

    def write_problem(self) -> str | None:
        """Why writes are refused now, or ``None``: checked afresh."""
        return None if self.store.writable() else self.store.refusal

    def stats(self, recovery_seconds: float | None, records_replayed: int) -> StoreStats | None:
        """The data directory's figures."""
        committer = self.store.committer
        return StoreStats(
            self.store.log_bytes,
            committer.syncs,
            committer.sync_seconds,
            committer.last_sync_seconds,
            recovery_seconds,
            records_replayed,
        )

    async def close(self) -> None:
        """Sync what is left and close every file (if it was opened)."""
        if self._store is not None:
            await self._store.close()


def journal_for(settings: Settings, on_failure: Callable[[BaseException], None]) -> Journal:
    """The journal ``settings`` ask for: a data directory's, or none.

    ``on_failure`` hears of a sync that failed: nothing can be acknowledged any more.
    """
    if settings.data_dir is None:
        return NullJournal()
    return StoreJournal(settings, on_failure)


__all__ = [
    "InputJournal",
    "Journal",
    "LoggedInput",
    "NullInputJournal",
    "NullJournal",
    "StoreJournal",
    "journal_for",
]
