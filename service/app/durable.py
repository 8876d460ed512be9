"""The service's durable store: the catalogue and a log per input, and recovery from them.

Every operation on an input (a session opened, a push, an advance, a staging request, a
commit, ...) is written to the input's log before it takes effect, as it arrived: a batch
keeps the bytes the client sent (JSON or Arrow), decoded again only on recovery, by the
decoder the API hands over. Under ``durability: fsync`` the operation's effects on the
dataflow (records sent, capabilities moved or dropped) wait until its frame is on disk, and
so does its acknowledgement: nothing downstream ever shows what a crash could take back.

Recovery replays each input's log through the same :class:`~service.app.inputs.ProducerInput`
code, in order, so sessions, sequence numbers, transactions and idempotency keys come back
as they were, and the outputs are recomputed (operators are deterministic per time).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
import os
import pickle
import shutil
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.app.errors import Unavailable
from service.app.inputs import Columns, ProducerInput, Raw
from service.app.settings import Limits
from service.store import Catalogue, Committer, Durability, Log, StoreError
from service.store.log import SEGMENT_BYTES

BatchDecoder = Callable[[Raw], "list[tuple[Hashable, Any]] | Columns"]
"""Decodes a batch as it arrived (JSON or Arrow bytes) into pairs or columns: the API's."""

_REPLAY_LIMITS = Limits(
    max_batch_records=1 << 62,
    max_sessions_per_input=1 << 62,
    max_staged_records_per_input=1 << 62,
    max_staged_bytes_per_input=1 << 62,
    idempotency_keys_kept=Limits().idempotency_keys_kept,
    staged_transaction_seconds=math.inf,
)
"""Replay re-applies what was accepted once: no size limit may refuse it the second time,
and no transaction expires by the clock (only the expiries the log holds are applied)."""


REPLAY_CHUNK = 32
"""Operations replayed between two pauses for the workers."""


class ReplayError(StoreError):
    """An input's log does not replay (a bug, or a log from another graph): fail-stop."""


@dataclass(slots=True)
class Replayed:
    """What a recovery replayed."""

    frames: int = 0
    records: int = 0


class InputJournal:
    """One input's log: writes its operations, says when they are durable, replays them."""

    __slots__ = (
        "committer",
        "decode",
        "log",
        "name",
        "position",
        "snapshot",
        "store",
        "tops",
    )

    def __init__(self, store: Store, log: Log, decode: BatchDecoder, name: str) -> None:
        self.store = store
        self.log = log
        self.committer = store.committer
        self.decode = decode
        self.name = name
        self.position = log.next_position - 1
        """The position of the last frame written."""
        self.snapshot: Callable[[], Any] | None = None
        """The input's state now, written as a checkpoint at the head of each new segment:
        where a replay starts once the segments before it are gone."""
        self.tops: dict[int, int | None] = {}
        """Per segment (its first position), the latest time its frames sent records at
        (``None`` once a time that is not an integer was)."""

    def sent(self, times: Iterable[Hashable]) -> None:
        """The operation just written sent records at ``times``: its segment's latest time."""
        self._top(self.log.segment_starts()[-1], times)

    def _top(self, segment: int, times: Iterable[Hashable]) -> None:
        top = self.tops.get(segment, -1)
        if top is None:
            return
        for time in times:
            if type(time) is not int:
                self.tops[segment] = None
                return
            if time > top:
                top = time
        self.tops[segment] = top

    def truncate(self, before: int) -> int:
        """Delete the oldest segments whose records are all at times before ``before``.

        Only whole segments, each followed by one that starts with a checkpoint (the
        state a replay starts from). Returns the bytes freed.
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
        """Whether the segment starting at ``start`` begins with a checkpoint."""
        payload = self.log.first_payload(start)
        return payload is not None and pickle.loads(payload)[0] == "checkpoint"

    @property
    def synced(self) -> int:
        """Every operation logged before this position is durable."""
        return self.log.synced

    def record(self, kind: str, meta: tuple[Any, ...], raw: Raw | None, data: Any) -> None:
        """Write one operation; :class:`Unavailable` (nothing applied) if the disk refuses."""
        payload = pickle.dumps((kind, meta, raw, None if raw is not None else data), 5)
        payloads = [payload]
        if self.snapshot is not None and self.log.next_position > 0 and self.log.rolls_next():
            # The state before this operation heads the new segment: a checkpoint (the
            # first segment needs none: a replay from it starts from nothing).
            payloads.insert(0, pickle.dumps(("checkpoint", (), None, self.snapshot()), 5))
        try:
            self.position = self.log.append(payloads) + len(payloads) - 1
        except OSError as error:
            what = f"input {self.name!r} cannot log the {kind}"
            raise self.store.refused(error, what, len(payload)) from None
        self.store.refusal = None

    def wait(self) -> Awaitable[None] | None:
        """What to await until everything written so far is durable (None: nothing)."""
        if self.log.synced > self.position:
            return None
        try:
            return self.committer.written(self.log)
        except OSError as error:
            raise Unavailable(
                f"the data directory failed: {error.strerror or error}", retry_after=1
            ) from None

    async def replay(
        self,
        producer: ProducerInput,
        replayed: Replayed,
        pause: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Apply every logged operation to ``producer`` again, in order, effects at once.

        Every :data:`REPLAY_CHUNK` operations it awaits ``pause()`` (the workers catch up),
        so a long log is never all in flight in the dataflow at once.
        """
        replaying = _Replaying(self)
        journal, producer.journal = producer.journal, replaying
        deferred, producer._deferred = producer._deferred, None
        limits, producer._limits = producer._limits, _REPLAY_LIMITS
        starts = self.log.segment_starts()
        first = self.log.first_position
        try:
            for position, payload in self.log.replay():
                if pause is not None and replayed.frames % REPLAY_CHUNK == REPLAY_CHUNK - 1:
                    await pause()
                kind, meta, raw, data = pickle.loads(payload)
                replaying.segment = starts[bisect.bisect_right(starts, position) - 1]
                if kind == "checkpoint":
                    # Only the first frame kept matters: what came before it is gone.
                    if position == first and first > 0:
                        producer.restore(data, self.decode)
                    continue
                try:
                    replayed.records += _apply(producer, kind, meta, raw, data, self.decode)
                except Exception as error:
                    raise ReplayError(
                        f"{self.log.directory}: frame {position} ({kind}) of input "
                        f"{self.name!r} does not replay: {type(error).__name__}: {error}"
                    ) from error
                replayed.frames += 1
        finally:
            producer.journal = journal
            producer._deferred = deferred
            producer._limits = limits


class _Replaying:
    """The journal an input has while its log is replayed.

    It writes nothing, and notes the latest time of each segment's records (for truncation
    after a restart).
    """

    __slots__ = ("journal", "segment")

    def __init__(self, journal: InputJournal) -> None:
        self.journal = journal
        self.segment = 0

    position = -1
    synced = 0

    def record(self, kind: str, meta: tuple[Any, ...], raw: Raw | None, data: Any) -> None:
        """Nothing to write: the operation is in the log already."""

    def wait(self) -> None:
        """Nothing to wait for."""

    def sent(self, times: Iterable[Hashable]) -> None:
        """Note the replayed operation's times in its segment's latest time."""
        self.journal._top(self.segment, times)


def _apply(
    producer: ProducerInput,
    kind: str,
    meta: tuple[Any, ...],
    raw: Raw | None,
    data: Any,
    decode: BatchDecoder,
) -> int:
    """Apply one logged operation; how many records it carried."""
    if kind == "push":
        session, seq = meta
        if raw is not None:
            pairs = decode(raw)
            assert isinstance(pairs, list)
            times, records = _unzip(pairs)
        else:
            times, records = data
        producer.push_columns(session, seq, times, records)
        return len(records)
    if kind == "stage":
        # (transaction, when): a log written before transactions expired has no time; its
        # transactions' time then starts at the recovery.
        transaction, *at = meta
        batch = decode(raw) if raw is not None else data
        producer.stage(transaction, batch, at=at[0] if at else None)
        return len(batch)
    if kind == "open":
        session, time = meta
        producer.open_session(time, id=session)
    elif kind == "advance":
        session, time, seq = meta
        producer.advance(session, time, seq)
    elif kind == "close_session":
        producer.close_session(meta[0])
    elif kind == "abort":
        producer.abort(meta[0])
    elif kind == "expire":
        transaction, now = meta
        producer.expire_transaction(transaction, now)
    elif kind == "commit":
        session, transactions, key, advance_to, discard = meta
        producer.commit(session, transactions, key, advance_to, discard)
    elif kind == "close":
        producer.close()
    else:
        raise ReplayError(f"unknown operation {kind!r}")
    return 0


def _unzip(pairs: list[tuple[Hashable, Any]]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    if not pairs:
        return (), ()
    times, records = zip(*pairs, strict=True)
    return times, records


class Store:
    """A data directory: the catalogue, the inputs' logs, and group commit over them."""

    def __init__(
        self,
        directory: Path | str,
        durability: Durability,
        on_failure: Callable[[BaseException], None] | None = None,
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        # Every log is checked before anything is changed: a corrupt one refuses to start
        # with the directory as it was (torn tails are cut only once all are good).
        self._found: dict[tuple[str, int], Log] = {}
        for path in sorted((self.directory / "inputs").glob("*/*")):
            if path.is_dir() and path.name.isdigit():
                self._found[(path.parent.name, int(path.name))] = Log(path, repair=False)
        for log in self._found.values():
            log.repair()
        self.catalogue = Catalogue(self.directory)
        self.committer = Committer(durability, on_failure=on_failure)
        self.durability = durability
        self._logs: dict[str, list[Log]] = {}
        self.refusal: str | None = None
        """Why the last write was refused (a full disk, say), until one succeeds again."""
        self._refused_bytes = 0

    def refused(self, error: OSError, what: str, size: int = 64 * 1024) -> Unavailable:
        """Note a refused write of ``size`` bytes; the answer to give (nothing was applied)."""
        reason = error.strerror or str(error)
        self.refusal = f"the data directory refuses writes: {reason}"
        self._refused_bytes = size
        return Unavailable(f"{what}: {reason}; nothing of it was applied", retry_after=1)

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

    def journal(self, dataflow: str, index: int, name: str, decode: BatchDecoder) -> InputJournal:
        """The journal of input ``name`` (the ``index``-th of its graph) of ``dataflow``."""
        log = self._found.pop((dataflow, index), None)
        if log is None:
            log = Log(self.directory / "inputs" / dataflow / str(index), self.segment_bytes)
        log.segment_bytes = self.segment_bytes
        self._logs.setdefault(dataflow, []).append(log)
        return InputJournal(self, log, decode, name)

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
