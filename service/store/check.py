"""What a data directory holds and what is wrong with it; and cutting a damaged log back.

:func:`check` reads a directory without changing anything (``frontier check <dir>``): the
catalogue (its schema version and dataflows), every input log (segments, frames, bytes, what
its sync record says was synced, a torn tail that a start would cut), and every problem a
start would refuse for. :func:`repair` (``--repair``) cuts each damaged log back to its last
good frame and says exactly what that loses: the frames (by position) and the bytes. Both
hold the directory's lock: never beside a running server.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from service.store.catalogue import FILE as CATALOGUE
from service.store.lock import DirectoryLock
from service.store.log import RECORD, CorruptLog, Log, StoreError, SyncRecord


@dataclass(slots=True)
class LogReport:
    """One input log."""

    path: Path
    segments: int = 0
    frames: int = 0
    bytes: int = 0
    first: int = 0
    """The first position kept."""
    synced: SyncRecord | None = None
    torn_bytes: int = 0
    """Bytes written after the last sync that a start cuts (never acknowledged)."""
    problem: str | None = None


@dataclass(slots=True)
class Report:
    """A data directory."""

    directory: Path
    catalogue: str = ""
    """What the catalogue says of itself (its version and dataflows), or what is wrong."""
    dataflows: dict[str, str] = field(default_factory=dict)
    """Each catalogued dataflow: its name and status."""
    logs: list[LogReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """Whether a server would start on it as it is."""
        return not self.problems


def _catalogue(report: Report) -> None:
    path = report.directory / CATALOGUE
    if not path.exists():
        report.catalogue = "missing"
        return
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            checked = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
            if checked != ["ok"]:
                raise sqlite3.DatabaseError("; ".join(checked[:3]))
            (version,) = db.execute("PRAGMA user_version").fetchone()
            rows = db.execute("SELECT id, name, status FROM dataflows ORDER BY position")
            report.dataflows = {id: f"{name or '(no name)'}, {status}" for id, name, status in rows}
    except sqlite3.DatabaseError as error:
        report.catalogue = f"damaged: {error}"
        report.problems.append(f"{path} cannot be read: {error}")
        return
    report.catalogue = f"schema version {version}, {len(report.dataflows)} dataflows"


def _log(path: Path) -> LogReport:
    report = LogReport(path)
    try:
        log = Log(path, repair=False)
    except CorruptLog as error:
        report.problem = str(error)
        return report
    report.segments = len(log.segment_starts())
    report.first = log.first_position
    report.frames = log.next_position - log.first_position
    report.bytes = log.size
    report.synced = log.record
    report.torn_bytes = log.torn_bytes
    log.close()
    return report


def _log_paths(directory: Path) -> list[Path]:
    inputs = directory / "inputs"
    return sorted(p for p in inputs.glob("*/*") if p.is_dir() and p.name.isdigit())


def check(directory: Path | str) -> Report:
    """What ``directory`` holds and what is wrong with it; nothing is changed."""
    report = Report(Path(directory))
    lock = DirectoryLock(report.directory)
    try:
        _inspect(report)
    finally:
        lock.release()
    return report


def _inspect(report: Report) -> None:
    _catalogue(report)
    report.logs = [_log(path) for path in _log_paths(report.directory)]
    for log in report.logs:
        if log.problem is not None:
            report.problems.append(log.problem)
    holding = [log for log in report.logs if log.bytes or log.problem]
    if report.catalogue == "missing" and holding:
        report.problems.append(
            f"{report.directory / CATALOGUE} is missing, but {len(holding)} input logs are "
            "there (a start refuses: restore the catalogue, or move inputs/ away)"
        )
    for log in report.logs:
        dataflow = log.path.parent.name
        if report.dataflows and dataflow not in report.dataflows:
            report.problems.append(f"{log.path}: the catalogue has no dataflow {dataflow}")


def repair(directory: Path | str) -> list[str]:
    """Cut every damaged log back to its last good frame; what each cut lost, line by line.

    A missing or damaged catalogue is not repaired (there is nothing to cut it back to):
    :class:`StoreError` says so, and nothing is changed.
    """
    root = Path(directory)
    lock = DirectoryLock(root)
    try:
        report = Report(root)
        _catalogue(report)
        if report.catalogue == "missing" or report.catalogue.startswith("damaged"):
            raise StoreError(
                f"{root / CATALOGUE} is {report.catalogue}: it cannot be repaired here "
                "(restore it from a backup); nothing was changed"
            )
        lost: list[str] = []
        for path in _log_paths(root):
            lost.extend(_repair_log(path))
    finally:
        lock.release()
    return lost


def _repair_log(path: Path) -> list[str]:
    """Cut one log until it opens; what was lost."""
    lost: list[str] = []
    for _attempt in range(1_000):  # each cut removes a segment's tail or a record's claim
        try:
            log = Log(path, repair=False)
        except CorruptLog as error:
            lost.append(_cut(path, error))
            continue
        if log.torn_bytes:
            lost.append(
                f"{path}: cut a torn tail of {log.torn_bytes} bytes (written after the last "
                "sync: never acknowledged)"
            )
            log.repair()
        log.close()
        return lost
    raise StoreError(f"{path} could not be repaired")


def _cut(path: Path, error: CorruptLog) -> str:
    """Cut the log at the bad frame ``error`` names: that segment's rest, and what follows."""
    segments = sorted(path.glob("*.log"))
    record = SyncRecord.decode((path / RECORD).read_bytes()) if (path / RECORD).exists() else None
    if not error.path.exists():
        # A segment the sync record names is missing: what it held is gone already.
        if record is not None:
            (path / RECORD).unlink()
        return f"{error.path} is missing ({error.why}): its frames are lost; the sync record goes"
    later = [s for s in segments if s.name > error.path.name]
    size = error.path.stat().st_size
    frames = _frames_before(error.path, error.offset)
    first = int(error.path.stem)
    cut_bytes = size - error.offset + sum(s.stat().st_size for s in later)
    with open(error.path, "r+b") as file:
        file.truncate(error.offset)
    for segment in later:
        segment.unlink()
    if record is not None:
        (path / RECORD).unlink()
    return (
        f"{error.path}: cut at byte offset {error.offset} ({error.why}): frames from position "
        f"{first + frames} on are lost, {cut_bytes} bytes"
        + (f", with {len(later)} later segments" if later else "")
    )


def _frames_before(segment: Path, offset: int) -> int:
    """How many whole frames a segment holds before ``offset``."""
    data = segment.read_bytes()[:offset]
    count = 0
    position = 0
    while position + 16 <= len(data):
        length = int.from_bytes(data[position + 4 : position + 8], "little")
        position += 16 + length
        count += 1
    return count
