"""``frontier push`` against a real server: a file of lines completes every time it holds."""

import re
import time
from pathlib import Path

from api.client import Client
from tests.e2e.test_cli import GRAPH_YAML, frontier_cli


def until(check: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)


def submitted(service: object, tmp_path: Path) -> str:
    graph = tmp_path / "graph.yaml"
    graph.write_text(GRAPH_YAML)
    result = frontier_cli(service, "submit", str(graph), "--json")
    assert result.returncode == 0, result.stderr
    import orjson

    return str(orjson.loads(result.stdout)["id"])


def test_push_completes_every_time_of_the_file(service: object, tmp_path: Path) -> None:
    dataflow = submitted(service, tmp_path)
    records = tmp_path / "records.jsonl"
    records.write_text('[0, "ab"]\n[0, "cd"]\n\n[1, "efg"]\n[2, "h"]\n[2, "ij"]\n')
    pushed = frontier_cli(service, "push", dataflow, "words", str(records), "--batch", "2")
    assert pushed.returncode == 0, pushed.stderr
    first, second, rate = pushed.stdout.splitlines()
    assert first == "pushed 5 records at times 0 to 2 into words"
    assert second == "input words: frontier [3]"
    assert re.fullmatch(r"5 records in \d+\.\d\d s: \d+ records/s", rate), rate
    with Client(service.url) as client:  # type: ignore[attr-defined]
        # No session is left holding the input: it stays past the file's last time.
        described = client.input(dataflow, "words")
        assert (described["frontier"], described["sessions"]) == ([3], [])
        until(lambda: client.output_frontier(dataflow, "out") == [3])
        times = {t: sorted(r["key"] for r in rs) for t, rs in client.times(dataflow, "out")}
        assert times == {0: [2], 1: [3], 2: [1, 2]}

    # The next file carries on from there; --close closes the input: everything completes.
    records.write_text('[3, "klm"]\n[5, "n"]\n')
    closed = frontier_cli(service, "push", dataflow, "words", str(records), "--close")
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout.splitlines()[:2] == [
        "pushed 2 records at times 3 to 5 into words",
        "input words: frontier [] (complete)",
    ]
    with Client(service.url) as client:  # type: ignore[attr-defined]
        until(lambda: client.output_frontier(dataflow, "out") == [])
        times = {t: sorted(r["key"] for r in rs) for t, rs in client.times(dataflow, "out")}
        assert times == {0: [2], 1: [3], 2: [1, 2], 3: [3], 5: [1]}


def test_push_json_answers_what_it_did(service: object, tmp_path: Path) -> None:
    import orjson

    dataflow = submitted(service, tmp_path)
    records = tmp_path / "records.jsonl"
    records.write_text('[4, "a"]\n[2, "b"]\n[7, "c"]\n')  # in any order: it waits for the least
    pushed = frontier_cli(
        service, "push", dataflow, "words", str(records), "--batch", "1", "--json"
    )
    assert pushed.returncode == 0, pushed.stderr
    answer = orjson.loads(pushed.stdout)
    assert answer.pop("seconds") >= 0 and answer.pop("records_per_second") >= 0
    assert answer == {"records": 3, "first": 2, "last": 7, "frontier": [8]}


def test_a_bad_line_is_one_error_naming_its_number(service: object, tmp_path: Path) -> None:
    dataflow = submitted(service, tmp_path)
    records = tmp_path / "records.jsonl"
    records.write_text('[0, "ab"]\n[0, "cd"\n')
    result = frontier_cli(service, "push", dataflow, "words", str(records))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: {records} line 2: not JSON (unexpected end of data at column 9): "
        "each line is [time, record]\n"
    )
    records.write_text('[0, "ab"]\n{"time": 1}\n')
    result = frontier_cli(service, "push", dataflow, "words", str(records))
    assert (result.returncode, result.stderr) == (
        1,
        f'error: {records} line 2: {{"time": 1}} is not [time, record]\n',
    )
    with Client(service.url) as client:  # type: ignore[attr-defined]
        # Nothing was pushed: the file is read whole before anything is sent.
        assert client.input(dataflow, "words")["records_in"] == 0


def test_push_help_says_what_it_does(service: object) -> None:
    result = frontier_cli(service, "push", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "advances to the least time still to come" in text
    assert "past the file's last time (its last coordinate plus one)" in text
    assert "With --close the input is closed instead" in text


def test_push_finishes_product_times(service: object, tmp_path: Path) -> None:
    import orjson

    graph = tmp_path / "graph.json"
    graph.write_text(
        orjson.dumps(
            {
                "time": {"product": ["u64", "u64"]},
                "nodes": {"words": {"op": "input"}, "out": {"op": "output"}},
                "edges": [["words", "out"]],
            }
        ).decode()
    )
    result = frontier_cli(service, "submit", str(graph), "--json")
    assert result.returncode == 0, result.stderr
    dataflow = orjson.loads(result.stdout)["id"]
    records = tmp_path / "records.jsonl"
    records.write_text('[[0, 1], "a"]\n[[0, 2], "b"]\n[[1, 0], "c"]\n')
    pushed = frontier_cli(service, "push", dataflow, "words", str(records), "--batch", "1")
    assert pushed.returncode == 0, pushed.stderr
    # Opened at the meet [0, 0]; each time passed once no later line has it; at the end past
    # the join [1, 2] (its last coordinate plus one): every time of the file completes.
    assert pushed.stdout.splitlines()[:2] == [
        "pushed 3 records at times [0, 0] to [1, 2] into words",
        "input words: frontier [[1, 3]]",
    ]
    with Client(service.url) as client:  # type: ignore[attr-defined]
        until(lambda: client.output_frontier(dataflow, "out") == [[1, 3]])
        assert sorted(t for t, _ in client.times(dataflow, "out")) == [[0, 1], [0, 2], [1, 0]]
