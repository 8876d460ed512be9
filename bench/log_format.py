"""Where an input's log lives: SQLite rows or segment files of checksummed frames, measured.

Both stores hold the same thing: each push as it arrived (a JSON body of 1,000 ``[t, r]``
pairs, about 12 KB), appended in groups of ``--group`` pushes that share one sync (group
commit, as concurrent producers would), then read back in order (recovery). Each is measured
with a real sync per group (``fdatasync`` for files, ``synchronous=FULL`` in WAL mode for
SQLite) and without one (``durability: none``), in a fresh directory under ``--dir``
(default: the system's temporary directory; give a directory on the disk the server's data
directory would be on).

Figures: appends (pushes/s and MB/s) with and without sync, sync latency per group (p50),
and replay (records/s, including the frames' checks and ``orjson.loads`` of every body).

    .venv/bin/python bench/log_format.py --pushes 2000 --group 4 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Stat, table

HEADER = struct.Struct("<IIII")  # magic, length, crc32(payload), crc32(first 12 bytes)
MAGIC = 0x46524F4E


def bodies(pushes: int, batch: int) -> list[bytes]:
    return [
        orjson.dumps({"seq": p + 1, "records": [[p, p * batch + i] for i in range(batch)]})
        for p in range(pushes)
    ]


class Segments:
    def __init__(self, directory: Path, sync: bool) -> None:
        self.path = directory / "00000000.log"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.sync_on = sync

    def append(self, payloads: list[bytes]) -> None:
        parts = []
        for payload in payloads:
            head = struct.pack("<III", MAGIC, len(payload), zlib.crc32(payload))
            parts.append(head + struct.pack("<I", zlib.crc32(head)))
            parts.append(payload)
        os.write(self.fd, b"".join(parts))

    def sync(self) -> None:
        if self.sync_on:
            os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)

    def replay(self) -> int:
        data = self.path.read_bytes()
        view = memoryview(data)
        offset = records = 0
        unpack = HEADER.unpack_from
        while offset < len(data):
            magic, length, crc, head_crc = unpack(data, offset)
            if magic != MAGIC or zlib.crc32(view[offset : offset + 12]) != head_crc:
                raise ValueError(f"bad header at {offset}")
            start = offset + HEADER.size
            payload = view[start : start + length]
            if zlib.crc32(payload) != crc:
                raise ValueError(f"bad frame at {offset}")
            records += len(orjson.loads(payload)["records"])
            offset = start + length
        return records


class Rows:
    def __init__(self, directory: Path, sync: bool) -> None:
        self.db = sqlite3.connect(directory / "log.sqlite3", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if sync else 'OFF'}")
        self.db.execute("CREATE TABLE log (position INTEGER PRIMARY KEY, body BLOB NOT NULL)")

    def append(self, payloads: list[bytes]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO log (body) VALUES (?)", [(p,) for p in payloads])

    def sync(self) -> None:
        self.db.execute("COMMIT")  # the sync happens here (synchronous=FULL)

    def close(self) -> None:
        self.db.close()

    def replay(self) -> int:
        records = 0
        for (body,) in self.db.execute("SELECT body FROM log ORDER BY position"):
            records += len(orjson.loads(body)["records"])
        return records


def run(
    make: Callable[[Path, bool], Segments | Rows], sync: bool, payloads: list[bytes], group: int
) -> tuple[float, float, float]:
    """Appends per second, the median sync (ms), replayed records per second."""
    with tempfile.TemporaryDirectory(dir=ARGS.dir) as directory:
        store = make(Path(directory), sync)
        syncs: list[float] = []
        began = time.perf_counter()
        for i in range(0, len(payloads), group):
            store.append(payloads[i : i + group])
            before = time.perf_counter()
            store.sync()
            syncs.append(time.perf_counter() - before)
        appended = len(payloads) / (time.perf_counter() - began)
        began = time.perf_counter()
        records = store.replay()
        replayed = records / (time.perf_counter() - began)
        store.close()
        return appended, statistics.median(syncs) * 1000, replayed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None)
    global ARGS
    ARGS = parser.parse_args()
    payloads = bodies(ARGS.pushes, ARGS.batch)
    size = sum(map(len, payloads)) / len(payloads)
    stores: dict[str, Callable[[Path, bool], Segments | Rows]] = {
        "segment files": Segments,
        "SQLite rows": Rows,
    }
    rows = []
    for sync in (True, False):
        for name, make in stores.items():
            appends, syncs, replays = Stat(True), Stat(), Stat(True)
            for _ in range(ARGS.repeats):
                a, s, r = run(make, sync, payloads, ARGS.group)
                appends.values.append(a)
                syncs.values.append(s)
                replays.values.append(r)
            mb = Stat(True, [a * size / 1e6 for a in appends.values])
            rows.append(
                [
                    name,
                    "yes" if sync else "no",
                    appends.show(digits=0),
                    mb.show(digits=1),
                    syncs.show(digits=3) if sync else "-",
                    replays.show(1e6, 2),
                ]
            )
    print(
        f"{ARGS.pushes} pushes of {ARGS.batch} records ({size / 1000:.1f} KB each), "
        f"{ARGS.group} per sync, {ARGS.repeats} repeats: median (best)"
    )
    headers = ["store", "sync", "pushes/s", "MB/s", "sync ms p50", "replay M rec/s"]
    print(table(headers, rows))


ARGS: argparse.Namespace

if __name__ == "__main__":
    main()
