"""No directory mistake destroys data (issue 22), with real server processes and real files.

One server per data directory (a second exits 2 naming the first); a missing or damaged
catalogue beside input logs refuses to start and changes nothing; what was synced is
recorded, so a shortened, emptied or deleted segment, or a corrupt synced frame, refuses to
start naming the file and the offset, and only bytes written after the last sync are cut (and
logged); ``frontier check`` reports a directory and ``--repair`` cuts a damaged log back,
saying what is lost.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from service.store.log import HEADER_BYTES
from tests.e2e.conftest import REPO, launch
from tests.e2e.test_store import call, five_pushes, frames


def serve(data: Path) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--data-dir", str(data)]
    return subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)


def frontier(*args: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "api", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)


def files(data: Path) -> dict[Path, bytes]:
    """Every file's bytes but SQLite's write-ahead-log index (``-shm``): a cache of the WAL's
    page numbers that any reader rebuilds, holding no data."""
    return {
        p: p.read_bytes()
        for p in data.rglob("*")
        if p.is_file() and not p.name.endswith(".sqlite3-shm")
    }


def test_a_second_server_on_a_directory_exits_2_naming_the_first(tmp_path: Path) -> None:
    first = launch(tmp_path)
    try:
        done = serve(tmp_path / "data")
    finally:
        first.stop()
    assert done.returncode == 2, done.stderr.decode()
    last = done.stderr.decode().splitlines()[-1]
    pattern = (
        rf"frontier: cannot start: {re.escape(str(tmp_path / 'data'))} is in use by another "
        rf"server \(pid {first.process.pid} on {re.escape(socket.gethostname())}, since "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\): a data directory serves one server at a time"
    )
    assert re.fullmatch(pattern, last), last


async def test_a_missing_catalogue_beside_logs_refuses_and_changes_nothing(
    tmp_path: Path,
) -> None:
    dataflow, _session, _segment = await five_pushes(tmp_path)
    data = tmp_path / "data"
    for name in ("catalogue.sqlite3", "catalogue.sqlite3-wal", "catalogue.sqlite3-shm"):
        (data / name).unlink(missing_ok=True)
    before = files(data)
    done = serve(data)
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode().splitlines()[-1] == (
        f"frontier: cannot start: {data / 'catalogue.sqlite3'} is missing, but the directory "
        "holds the logs of 1 inputs of 1 dataflows: without the catalogue they would be taken "
        f"for dropped dataflows' and deleted. Restore it, or move {data / 'inputs'} away to "
        "start empty; nothing was changed"
    )
    assert files(data) == before
    assert (data / "inputs" / dataflow).is_dir()


async def test_a_damaged_catalogue_refuses_and_changes_nothing(tmp_path: Path) -> None:
    await five_pushes(tmp_path)
    data = tmp_path / "data"
    catalogue = data / "catalogue.sqlite3"
    catalogue.write_bytes(b"this is not a database, whatever it was" * 100)
    before = files(data)
    done = serve(data)
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode().splitlines()[-1] == (
        f"frontier: cannot start: {catalogue} cannot be read: file is not a database"
    )
    assert files(data) == before


def shorten(segment: Path, layout: list[tuple[int, int]]) -> tuple[Path, int, str]:
    offset = layout[3][0]  # the fourth frame, acknowledged long ago, is cut in its header
    os.truncate(segment, offset + 5)
    return segment, offset, f"a header cut short, within the {segment_size(layout)} bytes synced"


def empty(segment: Path, layout: list[tuple[int, int]]) -> tuple[Path, int, str]:
    os.truncate(segment, 0)
    return segment, 0, f"the segment ends here but {segment_size(layout)} bytes of it were synced"


def delete(segment: Path, layout: list[tuple[int, int]]) -> tuple[Path, int, str]:
    segment.unlink()
    return segment, 0, f"the segment is missing: {segment_size(layout)} bytes of it were synced"


def flip(segment: Path, layout: list[tuple[int, int]]) -> tuple[Path, int, str]:
    offset, _size = layout[-1]  # the last frame: acknowledged, so synced
    data = bytearray(segment.read_bytes())
    data[offset + HEADER_BYTES] ^= 0x01
    segment.write_bytes(bytes(data))
    why = f"a payload whose checksum does not match, within the {segment_size(layout)} bytes synced"
    return segment, offset, why


def segment_size(layout: list[tuple[int, int]]) -> int:
    offset, size = layout[-1]
    return offset + size


@pytest.mark.parametrize("damage", [shorten, empty, delete, flip])
async def test_damage_to_synced_bytes_refuses_to_start_naming_file_and_offset(
    tmp_path: Path, damage: object
) -> None:
    _dataflow, _session, segment = await five_pushes(tmp_path)
    layout = frames(segment)
    path, offset, why = damage(segment, layout)  # type: ignore[operator]
    data = tmp_path / "data"
    before = files(data)
    done = serve(data)
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode().splitlines()[-1] == (
        f"frontier: cannot start: {path}: corrupt frame at byte offset {offset}: {why}"
    )
    assert files(data) == before


async def test_only_bytes_written_after_the_last_sync_are_cut_and_logged(tmp_path: Path) -> None:
    dataflow, session, segment = await five_pushes(tmp_path)
    size = segment.stat().st_size
    with segment.open("ab") as file:  # a crash mid-append: half a frame, never synced
        file.write(b"FRON" + bytes(9))
    server = launch(tmp_path, "--durability", "fsync")
    try:
        async with aiohttp.ClientSession() as http:
            state = await call(http, server, "GET", f"/v1/dataflows/{dataflow}/inputs/x")
    finally:
        server.stop()
    assert (state["records_in"], state["sessions"]) == (5, [{"session": session, "time": 0}])
    assert segment.stat().st_size == size
    logged = [line for line in server.log_tail().splitlines() if "torn tail" in line]
    assert len(logged) == 1
    assert (
        f"{segment}: cut a torn tail of 13 bytes at byte offset {size} (written after the last "
        "sync: never acknowledged)"
    ) in logged[0]


async def test_check_reports_a_directory_and_repair_cuts_back_saying_what_is_lost(
    tmp_path: Path,
) -> None:
    dataflow, _session, segment = await five_pushes(tmp_path)
    data = tmp_path / "data"
    healthy = frontier("check", str(data))
    out = healthy.stdout.decode()
    assert healthy.returncode == 0, healthy.stderr.decode()
    assert f"  catalogue: schema version 3, 1 dataflows\n    dataflow {dataflow}:" in out
    assert f"  inputs/{dataflow}/0: 1 segments, frames 0-5, " in out
    assert ", synced to 6\n" in out

    layout = frames(segment)
    flip(segment, layout)
    before = files(data)
    damaged = frontier("check", str(data))
    assert damaged.returncode == 1
    assert f"  inputs/{dataflow}/0: DAMAGED" in damaged.stdout.decode()
    offset = layout[-1][0]
    assert damaged.stderr.decode().splitlines() == [
        f"problem: {segment}: corrupt frame at byte offset {offset}: a payload whose checksum "
        f"does not match, within the {segment_size(layout)} bytes synced"
    ]
    assert files(data) == before  # checking changes nothing

    repaired = frontier("check", "--repair", str(data))
    assert repaired.returncode == 0, repaired.stderr.decode()
    assert repaired.stdout.decode().splitlines()[0] == (
        f"lost: {segment}: cut at byte offset {offset} (a payload whose checksum does not "
        f"match, within the {segment_size(layout)} bytes synced): frames from position 5 on "
        f"are lost, {layout[-1][1]} bytes"
    )
    server = launch(tmp_path, "--durability", "fsync")
    try:
        async with aiohttp.ClientSession() as http:
            state = await call(http, server, "GET", f"/v1/dataflows/{dataflow}/inputs/x")
    finally:
        server.stop()
    assert state["records_in"] == 4


def test_check_refuses_beside_a_running_server(tmp_path: Path) -> None:
    server = launch(tmp_path)
    try:
        done = frontier("check", str(tmp_path / "data"))
    finally:
        server.stop()
    assert done.returncode == 2
    assert done.stderr.decode().startswith(
        f"frontier: {tmp_path / 'data'} is in use by another server (pid {server.process.pid} "
    )
