"""Moving inputs between data directories, the cluster stopped: what must move, and the move.

A cluster keeps each input on the process that holds it (the catalogue's ``holders``). A
cluster that shrinks must first move the inputs of the processes it loses to processes it
keeps: :func:`to_move` says which (read off process 0's catalogue, which decides where
inputs live), :func:`move` moves them.

A move takes every directory's lock (so no server runs on any), checks everything first,
then, for each input the source process holds:

1. copies its log into the target directory frame by frame (every frame's checksums checked
   as it is read, :class:`~service.store.log.Log`), segment by segment with the same names,
   into a hidden directory beside where it goes, with a sync record saying all of it is
   synced; syncs every file and the directory, reads the copy back and compares it frame by
   frame with the source; then renames it into place and syncs the parent;
2. once every log is in place, records the new holder in every catalogue given (process
   0's last: it is the one the next start follows);
3. only then deletes the source's copies.

Interrupted anywhere, nothing is lost: before step 2 the source still holds every log and
its catalogue says so (a hidden copy is replaced by the next move); after it, running the
same move again finds the copies in place, equal to the source, and finishes. A log already
at the target that is not the same is never overwritten.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from operators.graph import parse_graph
from service.store.catalogue import FILE as CATALOGUE
from service.store.catalogue import Catalogue, StoredDataflow
from service.store.checksum import crc32
from service.store.lock import DirectoryLock
from service.store.log import Log, StoreError, SyncRecord, encode_frame


class MoveRefused(StoreError):
    """The move cannot be done as asked: nothing was changed."""


@dataclass(frozen=True, slots=True)
class Held:
    """An input of a dataflow, and the process holding it."""

    dataflow: str
    name: str
    """The dataflow's name."""
    input: str
    index: int
    """The input's index in its graph (its log is ``inputs/<dataflow>/<index>``)."""
    process: int


@dataclass(frozen=True, slots=True)
class Moved:
    """An input moved: how many frames and bytes its log held."""

    held: Held
    frames: int
    bytes: int
    copied: bool
    """Whether this move copied it (``False``: an earlier, interrupted one had)."""


def _inputs(dataflow: StoredDataflow) -> list[str]:
    return parse_graph(dataflow.graph).inputs()


def held_inputs(catalogue: Catalogue) -> Iterator[Held]:
    """Every input of every dataflow of ``catalogue``, with its holder, in creation order.

    :class:`MoveRefused` for a dataflow without holders (a directory written before they
    were kept, not started since: a start fills them in).
    """
    for dataflow in catalogue.dataflows():
        if dataflow.holders is None:
            raise MoveRefused(
                f"{catalogue.path} does not say where the inputs of dataflow {dataflow.id} "
                "live (written by an older release): start the cluster once at its current "
                "shape first"
            )
        for index, name in enumerate(_inputs(dataflow)):
            holder = dataflow.holders.get(name, 0)
            yield Held(dataflow.id, dataflow.name, name, index, holder)


def _process_of(catalogue: Catalogue) -> int:
    shape = catalogue.shape()
    if shape is None:
        raise MoveRefused(
            f"{catalogue.path} records no shape: start the cluster once with this release first"
        )
    return shape[1]


def to_move(directory: Path, processes: int) -> list[Held]:
    """The inputs held by processes ``>= processes``: what must move before shrinking to it.

    ``directory`` is process 0's data directory. Read only (a running server may hold it).
    """
    catalogue = _catalogue(directory)
    try:
        if _process_of(catalogue) != 0:
            raise MoveRefused(
                f"{directory} is the data directory of process {_process_of(catalogue)}: "
                "give process 0's, whose catalogue says where inputs live"
            )
        return [held for held in held_inputs(catalogue) if held.process >= processes]
    finally:
        catalogue.close()


def _catalogue(directory: Path) -> Catalogue:
    if not (directory / CATALOGUE).exists():
        raise MoveRefused(f"{directory} holds no catalogue: not a data directory")
    return Catalogue(directory, create=False)


def _log_dir(directory: Path, held: Held) -> Path:
    return directory / "inputs" / held.dataflow / str(held.index)


def _frames(path: Path) -> list[tuple[int, int, int]]:
    """A log's frames as ``(position, length, crc32)``, each checked as it is read."""
    if not path.exists():
        return []
    log = Log(path, repair=False)
    try:
        return [(p, len(payload), crc32(payload)) for p, payload in log.replay()]
    finally:
        log.close()


def copy_log(source: Path, target: Path) -> tuple[int, int]:
    """Copy the log at ``source`` to ``target`` (which must hold none); frames and bytes.

    Frame by frame, each checked (:class:`~service.store.log.CorruptLog` if one is bad),
    into a hidden directory that is synced, read back and compared, then renamed into place.
    A torn tail of the source (never acknowledged) is not copied.
    """
    log = Log(source, repair=False)
    staging = target.parent / f".{target.name}.moving"
    shutil.rmtree(staging, ignore_errors=True)  # an interrupted move's copy: made again
    staging.mkdir(parents=True)
    frames = written = 0
    try:
        starts = set(log.segment_starts())
        out: int | None = None
        last, length = 0, 0
        for position, payload in log.replay():
            if position in starts or out is None:
                if out is not None:
                    os.fsync(out)
                    os.close(out)
                # The segments keep their names (their first positions), as log.py gives them.
                path = staging / f"{position:020d}.log"
                out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                last, length = position, 0
            frame = encode_frame(payload)
            os.write(out, frame)
            length += len(frame)
            frames += 1
            written += len(frame)
        if out is not None:
            os.fsync(out)
            os.close(out)
            # Everything copied is synced: the record says so, and a start checks it.
            record = SyncRecord(log.first_position, last, length, log.next_position)
            _write_synced(staging / "synced", record.encode())
        _sync_dir(staging)
    finally:
        log.close()
    if _frames(staging) != _frames(source):
        raise StoreError(f"{staging}: the copy of {source} does not read back the same")
    if target.exists():
        shutil.rmtree(target)  # an empty log (checked by the caller): nothing is lost
    os.rename(staging, target)
    _sync_dir(target.parent)
    return frames, written


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move(source: Path, target: Path, to_process: int, others: list[Path]) -> list[Moved]:
    """Move every input ``source``'s process holds to ``target`` (process ``to_process``).

    ``others`` are the other data directories whose catalogues must learn the new holders;
    process 0's must be among ``source``, ``target`` and ``others``. :class:`MoveRefused`
    (nothing changed) if the move cannot be done; what was moved, in creation order.
    """
    directories = list(dict.fromkeys([source, target, *others]))
    if source.resolve() == target.resolve():
        raise MoveRefused(f"--from and --to are the same directory: {source}")
    with contextlib.ExitStack() as stack:
        for directory in directories:
            if not directory.is_dir():
                raise MoveRefused(f"{directory} is not a directory")
            lock = DirectoryLock(directory)  # DirectoryLocked while a server runs on it
            stack.callback(lock.release)
        catalogues = {}
        for directory in directories:
            catalogues[directory] = catalogue = _catalogue(directory)
            stack.callback(catalogue.close)
        processes = {d: _process_of(c) for d, c in catalogues.items()}
        if processes[target] != to_process:
            raise MoveRefused(
                f"{target} is the data directory of process {processes[target]}, not "
                f"{to_process} (--to-process)"
            )
        zero = next((d for d, p in processes.items() if p == 0), None)
        if zero is None:
            raise MoveRefused(
                "process 0's data directory must be among --from, --to and --catalogue: its "
                "catalogue decides where inputs live"
            )
        moving = _moving(catalogues, zero, source, processes[source], target)
        moved = []
        for held in moving:
            frames = _frames(_log_dir(source, held))
            there = _frames(_log_dir(target, held))
            size = sum(length for _, length, _ in frames)
            if frames and there != frames:
                copy_log(_log_dir(source, held), _log_dir(target, held))
            moved.append(Moved(held, len(frames), size, bool(frames) and there != frames))
        # Every log is in place: now the catalogues, process 0's last (the one a start follows).
        for directory in sorted(catalogues, key=lambda d: processes[d] == 0):
            _rehome(catalogues[directory], moving, to_process)
        for held in moving:
            gone = _log_dir(source, held)
            if gone.exists():
                shutil.rmtree(gone)
                _sync_dir(gone.parent)
        return moved


def _moving(
    catalogues: dict[Path, Catalogue], zero: Path, source: Path, process: int, target: Path
) -> list[Held]:
    """What the move takes, after checking all of it: nothing is changed before."""
    known = {d.id for d in catalogues[target].dataflows()}
    moving = []
    for held in held_inputs(catalogues[zero]):
        log = _log_dir(source, held)
        if held.process != process and not _frames(log):
            continue  # held elsewhere, and nothing of it here
        if held.dataflow not in known:
            raise MoveRefused(
                f"{target} does not know dataflow {held.dataflow}: start the cluster once at "
                "its new shape first, so that every process has it"
            )
        here, there = _frames(log), _frames(_log_dir(target, held))
        if there and there != here:
            raise MoveRefused(
                f"{_log_dir(target, held)} already holds a log of input {held.input!r} of "
                f"dataflow {held.dataflow} ({len(there)} frames), not the same as "
                f"{log}'s: it is not overwritten; nothing was changed"
            )
        moving.append(held)
    return moving


def _rehome(catalogue: Catalogue, moving: list[Held], process: int) -> None:
    """Record ``process`` as the holder of every input moving (of the dataflows it has)."""
    stored = {d.id: d for d in catalogue.dataflows()}
    for held in moving:
        dataflow = stored.get(held.dataflow)
        if dataflow is None:
            continue
        holders = dict(dataflow.holders or {})
        holders[held.input] = process
        catalogue.set_holders(held.dataflow, holders)
        # Several inputs of one dataflow may move: each builds on the last one recorded.
        stored[held.dataflow] = dataclasses.replace(dataflow, holders=holders)
