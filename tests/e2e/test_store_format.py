"""A data directory written before log format 2 is read as it was, with real server processes.

``fixtures/datadir-format1.tar.gz`` was made by main at 56c96c9, whose inputs' logs pickled
each operation (``fixtures/make_datadir_format1.py`` says how); ``datadir-format1.json`` is
what that server answered before it stopped. Today's server starts on it, answers the same,
goes on (its new frames are format 2, after the old ones in the same logs), and starts again
on the mixed logs. A format 1 frame naming anything but the few classes those frames held is
refused, never unpickled.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from service.store.log import Log, encode_frame
from tests.e2e.conftest import REPO, Server, launch
from tests.e2e.test_store import call

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "datadir-format1.json").read_text())


def unpack(workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIXTURES / "datadir-format1.tar.gz") as archive:
        archive.extractall(workdir, filter="data")
    return workdir / "data"


async def answers(http: aiohttp.ClientSession, server: Server) -> dict[str, Any]:
    words = f"/v1/dataflows/{EXPECTED['dataflow']}"
    pairs = f"/v1/dataflows/{EXPECTED['products']}/inputs/pairs"
    described = await call(http, server, "GET", words)
    return {
        "input": await call(http, server, "GET", f"{words}/inputs/words"),
        "times": await call(http, server, "GET", f"{words}/outputs/counts/times"),
        "inputs": described["inputs"],
        "outputs": described["outputs"],
        "product_input": await call(http, server, "GET", pairs),
    }


KEEP_STAGED = {"limits": {"staged_transaction_seconds": 3.2e9}}
"""The fixture's open transaction was staged when it was made: it must not expire meanwhile."""

EXPECTED_ANSWERS = {
    # An input's description has gained dropped_late since: a format 1 log has no dropped
    # rows (its commits say none), so 0.
    "input": {**EXPECTED["input"], "dropped_late": 0},
    "times": EXPECTED["times"],
    # A dataflow's description has gained each input's holder since: the directory's
    # holders are filled in at its first start (catalogue schema 3), process 0 alone.
    "inputs": {
        name: {**described, "process": 0}
        for name, described in EXPECTED["described"]["inputs"].items()
    },
    "outputs": EXPECTED["described"]["outputs"],
    "product_input": {**EXPECTED["product_input"], "dropped_late": 0},
}


async def test_a_format_1_directory_is_read_as_it_was_and_goes_on_in_format_2(
    tmp_path: Path,
) -> None:
    data = unpack(tmp_path)
    words = f"/v1/dataflows/{EXPECTED['dataflow']}/inputs/words"
    session = EXPECTED["session"]
    server = launch(tmp_path, config=KEEP_STAGED)
    try:
        async with aiohttp.ClientSession() as http:
            assert await answers(http, server) == EXPECTED_ANSWERS
            # The idempotency key of the logged commit still answers, and applies nothing.
            again = {"transactions": ["t1"], "idempotency_key": "k1", "advance_to": 4}
            ack = await call(http, server, "POST", f"{words}/sessions/{session}/commit", again)
            assert (ack["applied"], ack["input_frontier"]) == (4, [4])
            # The open transaction and session go on: new frames, in format 2.
            body = {"seq": 3, "records": [[4, "apple"], [5, "pear"]]}
            await call(http, server, "POST", f"{words}/sessions/{session}/push", body)
            commit = {"transactions": ["t2"], "idempotency_key": "k2", "advance_to": 5}
            await call(http, server, "POST", f"{words}/sessions/{session}/commit", commit)
            counts = f"/v1/dataflows/{EXPECTED['dataflow']}/outputs/counts/times"
            times = await call(http, server, "GET", counts)
    finally:
        server.stop()
    four = {"time": 4, "records": [{"key": "apple", "count": 1}, {"key": "open", "count": 1}]}
    assert times["times"] == [*EXPECTED["times"]["times"], four]
    assert times["frontier"] == [5]
    log = Log(data / "inputs" / EXPECTED["dataflow"] / "0", repair=False)
    formats = [payload[:1] for _position, payload in log.replay()]
    log.close()
    # The old frames are kept as they were; the two operations since (the push and the new
    # commit: the retried one logged nothing) are format 2.
    assert formats[-2:] == [b"\x02"] * 2
    assert set(formats[:-2]) == {b"\x80"}

    # Started again on the mixed logs: the same answers, the new records once.
    server = launch(tmp_path, config=KEEP_STAGED)
    try:
        async with aiohttp.ClientSession() as http:
            described = await call(http, server, "GET", f"/v1/dataflows/{EXPECTED['dataflow']}")
            again = await call(
                http, server, "GET", f"/v1/dataflows/{EXPECTED['dataflow']}/outputs/counts/times"
            )
            inputs = await call(http, server, "GET", words)
    finally:
        server.stop()
    assert again == times
    assert described["inputs"]["words"]["records_in"] == EXPECTED["input"]["records_in"] + 3
    assert (inputs["staged"], inputs["transactions"], inputs["frontier"]) == (0, [], [5])


class Shell:
    """What a hostile frame would run if it were unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (subprocess.getoutput, (f"touch {self.marker}",))


def test_a_format_1_frame_naming_another_class_is_refused_not_run(tmp_path: Path) -> None:
    data = unpack(tmp_path)
    marker = tmp_path / "ran"
    payload = pickle.dumps(("push", (EXPECTED["session"], 9), None, Shell(marker)), 5)
    segments = sorted((data / "inputs" / EXPECTED["dataflow"] / "0").glob("*.log"))
    with segments[-1].open("ab") as segment:
        segment.write(encode_frame(payload))
    command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--data-dir", str(data)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    position = 20  # the fixture's input log holds frames 0 to 19
    assert stderr.splitlines()[-1] == (
        f"frontier: stopping: BadOperation: {segments[-1].parent}: frame {position}: a format 1 "
        "frame names subprocess.getoutput, which it may not"
    )
    assert not marker.exists()


@pytest.mark.parametrize("format", [b"\x03", b"\x00"])
def test_a_frame_of_an_unknown_format_is_refused(tmp_path: Path, format: bytes) -> None:
    data = unpack(tmp_path)
    segments = sorted((data / "inputs" / EXPECTED["dataflow"] / "0").glob("*.log"))
    with segments[-1].open("ab") as segment:
        segment.write(encode_frame(format + bytes(8)))
    command = [sys.executable, "-m", "api", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--data-dir", str(data)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, timeout=60, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert stderr.splitlines()[-1] == (
        f"frontier: stopping: BadOperation: {segments[-1].parent}: frame 20: frame format "
        f"{format[0]} is not one this release reads (it reads 1 and 2): was the directory "
        "written by a newer release?"
    )
