"""The store: a data directory holding the catalogue and one log per input.

``catalogue.sqlite3`` (:class:`~service.store.catalogue.Catalogue`) holds the dataflows and
their consumers; ``inputs/<dataflow>/<index>/`` is the :class:`InputLog` of the graph's
``index``-th input: its operations (:mod:`service.store.operations`), each written before
it takes effect. Group commit over every log is the :class:`Committer`'s.

The store knows no HTTP and no dataflow: it writes, syncs, reads back and cuts what the
service (:mod:`service.app.journal`) hands it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from pathlib import Path

from service.store.catalogue import FILE as CATALOGUE
from service.store.catalogue import Catalogue, MissingCatalogue
from service.store.durability import Committer, Durability
from service.store.legacy import PICKLE, decode_legacy
from service.store.lock import DirectoryLock
from service.store.log import SEGMENT_BYTES, Log, StoreError
from service.store.operations import BadOperation, Checkpoint, Frame, decode, encode_parts


class WriteRefused(StoreError):
    """The disk refused a write (full, failing): nothing of it is in the store.

    ``reason`` says why, for the client; the store notes the refusal
    (:attr:`Store.refusal`) until a write succeeds again.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_frame(payload: bytes) -> Frame:
    """The operation (or checkpoint) a log frame holds, in either format.

    :class:`~service.store.operations.BadOperation` if it holds none.
    """
    if payload[:1] == PICKLE:
        return decode_legacy(payload)
    return decode(payload)


class InputLog:
    """One input's log: appends its operations, says when they are durable, reads them back.

    Each segment after the first begins with a :class:`Checkpoint` (the input's state
    before the operation that follows), so whole segments can be cut once every record in
    them is at a time every output has forgotten.
    """

    __slots__ = ("committer", "log", "name", "position", "store", "tops")

    def __init__(self, store: Store, log: Log, name: str) -> None:
        self.store = store
        self.log = log
        self.committer = store.committer
        self.name = name
        self.position = log.next_position - 1
        """The position of the last frame written."""
        self.tops: dict[int, int | None] = {}
        """Per segment (its first position), the latest time its frames sent records at
        (``None`` once a time that is not an integer was)."""

    @property
    def synced(self) -> int:
        """Every frame before this position is durable."""
        return self.log.synced

    @property
    def directory(self) -> Path:
        """Where the log's segments are."""
        return self.log.directory

    def append(self, frame: Frame, state: Callable[[], Checkpoint]) -> None:
        """Write one operation (not yet durable).

        ``state`` is the input's state before it: written first as a checkpoint when the
        operation starts a new segment. :class:`WriteRefused` if the disk refuses (nothing
        of the operation is in the log then).
        """
        payloads = [encode_parts(frame)]
        if self.log.next_position > 0 and self.log.rolls_next():
            # The first segment needs no checkpoint: a replay from it starts from nothing.
            payloads.insert(0, encode_parts(state()))
        try:
            self.position = self.log.append(payloads) + len(payloads) - 1
        except OSError as error:
            size = sum(map(len, payloads[-1]))
            raise WriteRefused(self.store.refused(error, size)) from None
        self.store.refusal = None

    def written(self) -> Awaitable[None] | None:
        """What to await until everything written is durable (``None``: it is already).

        :class:`OSError` if the disk failed.
        """
        if self.log.synced > self.position:
            return None
        return self.committer.written(self.log)

    def sent(self, times: Iterable[Hashable], segment: int | None = None) -> None:
        """The frame just written (or replayed, in ``segment``) sent records at ``times``."""
        start = self.log.segment_starts()[-1] if segment is None else segment
        top = self.tops.get(start, -1)
        if top is None:
            return
        for time in times:
            if type(time) is not int:
                self.tops[start] = None
                return
            if time > top:
                top = time
        self.tops[start] = top

    def truncate(self, before: int) -> int:
        """Delete the oldest segments whose records are all at times before ``before``.

        Only whole segments, each followed by one that starts with a checkpoint (the state
        a replay starts from). Returns the bytes freed.
        """
        starts = self.log.segment_starts()
        keep = starts[0]
        for start, following in itertools.pairwise(starts):
            top = self.tops.get(start, -1)
            if top is None or top >= before or not self._checkpoint_at(following):
                break
            keep = following
        freed = self.log.truncate_before(keep)
        for start in [s for s in self.tops if s < keep]:
            del self.tops[start]
        return freed

    def _checkpoint_at(self, start: int) -> bool:
        payload = self.log.first_payload(start)
        return payload is not None and isinstance(read_frame(payload), Checkpoint)

    def frames(self) -> Iterator[tuple[int, int, Frame]]:
        """Every frame kept, in order: ``(position, its segment's start, frame)``.

        The first frame is a checkpoint when earlier segments were cut.
        """
        starts = self.log.segment_starts()
        index = 0
        for position, payload in self.log.replay():
            while index + 1 < len(starts) and starts[index + 1] <= position:
                index += 1
            try:
                frame = read_frame(payload)
            except BadOperation as error:
                raise BadOperation(f"{self.log.directory}: frame {position}: {error}") from None
            yield position, starts[index], frame


class Store:
    """A data directory: the catalogue, the inputs' logs, and group commit over them.

    Every log is checked before anything is changed: a corrupt one refuses to start with
    the directory as it was (torn tails are cut only once every log is known good).
    """

    def __init__(
        self,
        directory: Path | str,
        durability: Durability,
        on_failure: Callable[[BaseException], None] | None = None,
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.lock = DirectoryLock(self.directory)
        try:
            self._found = self._open_logs()
            self.catalogue = Catalogue(self.directory, create=not self._found)
        except BaseException:
            self.lock.release()
            raise
        # Only now that every log and the catalogue are known good is anything changed.
        self.lock.claim()
        for log in self._found.values():
            log.repair()
        self.committer = Committer(durability, on_failure=on_failure)
        self.durability = durability
        self._logs: dict[str, list[Log]] = {}
        self.refusal: str | None = None
        """Why the last write was refused (a full disk, say), until one succeeds again."""
        self._refused_bytes = 0

    def _open_logs(self) -> dict[tuple[str, int], Log]:
        """Every input log, each checked (nothing changed yet); keyed (dataflow, index)."""
        found: dict[tuple[str, int], Log] = {}
        for path in sorted((self.directory / "inputs").glob("*/*")):
            if path.is_dir() and path.name.isdigit():
                found[(path.parent.name, int(path.name))] = Log(path, repair=False)
        holding = {key: log for key, log in found.items() if log.size or log.record}
        if holding and not (self.directory / CATALOGUE).exists():
            dataflows = len({dataflow for dataflow, _ in holding})
            raise MissingCatalogue(
                f"{self.directory / CATALOGUE} is missing, but the directory holds the logs of "
                f"{len(holding)} inputs of {dataflows} dataflows: without the catalogue they "
                "would be taken for dropped dataflows' and deleted. Restore it, or move "
                f"{self.directory / 'inputs'} away to start empty; nothing was changed"
            )
        return found

    def held_logs(self) -> set[tuple[str, int]]:
        """The logs found when opening that hold frames (or did): ``(dataflow, index)``.

        Before any is opened for writing; an empty log (of an input another process holds)
        is not one of them.
        """
        return {key for key, log in self._found.items() if log.size or log.record}

    def refused(self, error: OSError, size: int = 64 * 1024) -> str:
        """Note a refused write of ``size`` bytes; the reason, to tell the client."""
        reason = error.strerror or str(error)
        self.refusal = f"the data directory refuses writes: {reason}"
        self._refused_bytes = size
        return reason

    def writable(self) -> bool:
        """Whether writes succeed now.

        After a refusal, a probe file as large as the refused write is written and synced:
        once it fits, the write retried would too.
        """
        if self.refusal is None:
            return True
        probe = self.directory / ".probe"
        try:
            with open(probe, "wb") as file:
                file.write(bytes(max(4096, self._refused_bytes)))
                file.flush()
                os.fsync(file.fileno())
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
        self.refusal = None
        return True

    def input_log(self, dataflow: str, index: int, name: str) -> InputLog:
        """The log of input ``name`` (the ``index``-th of its graph) of ``dataflow``."""
        log = self._found.pop((dataflow, index), None)
        if log is None:
            log = Log(self.directory / "inputs" / dataflow / str(index), self.segment_bytes)
        log.segment_bytes = self.segment_bytes
        self._logs.setdefault(dataflow, []).append(log)
        return InputLog(self, log, name)

    def remove_orphans(self, dataflows: set[str]) -> None:
        """Delete the logs of dataflows the catalogue does not hold (a drop a crash cut short).

        A dataflow is added to the catalogue before its logs exist and removed from it
        before they are deleted: logs without a catalogue entry are a drop's leftovers.
        """
        for dataflow, _index in [key for key in self._found if key[0] not in dataflows]:
            for key in [k for k in self._found if k[0] == dataflow]:
                self._found.pop(key).close()
            shutil.rmtree(self.directory / "inputs" / dataflow, ignore_errors=True)

    def drop(self, dataflow: str) -> None:
        """Forget a dataflow: its catalogue rows, then its logs."""
        self.catalogue.drop_dataflow(dataflow)
        for log in self._logs.pop(dataflow, []):
            log.close()
        shutil.rmtree(self.directory / "inputs" / dataflow, ignore_errors=True)

    @property
    def log_bytes(self) -> int:
        """Bytes held in every input's log."""
        return sum(log.size for logs in self._logs.values() for log in logs)

    async def close(self) -> None:
        """Sync what is left and close every file."""
        await self.committer.close()
        for logs in self._logs.values():
            for log in logs:
                log.close()
        self.catalogue.close()
        self.lock.release()
