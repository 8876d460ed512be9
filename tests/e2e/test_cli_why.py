"""``frontier why``: the explain answer as a tree in the terminal, against a running server."""

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

from api.client import Client

ROOT = Path(__file__).resolve().parents[2]

HIST = {
    "nodes": {
        "words": {"op": "input"},
        "histogram": {"op": "count_by", "key": "r"},
        "counts": {"op": "output"},
    },
    "edges": [["words", "histogram"], ["histogram", "counts"]],
}


def why(server: object, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FRONTIER_URL": server.url,  # type: ignore[attr-defined]
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "160",
    }
    return subprocess.run(
        [sys.executable, "-m", "api", "why", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_why_prints_the_holders_as_a_tree(service: object) -> None:
    with Client(service.url) as client:  # type: ignore[attr-defined]
        dataflow = client.create_dataflow(HIST)["id"]
        session = client.session(dataflow, "words")
        session.push([[3, "a"]])
        session.advance(3)
        for _ in range(200):
            answer = client.explain(dataflow, "counts", 3)
            if len(answer["holders"]) == 3:
                break
            time.sleep(0.01)
        printed = why(service, dataflow, "counts", "3")
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout.replace(session.id, "S") == (
            "3 is not complete at counts (frontier [3])\n"
            "├── capability  of words at words:0  @ 3  summary +0  via words > histogram > counts\n"
            "├── session S of words  @ 3  summary +0  via words > histogram > counts\n"
            "└── capability  of histogram  @ 3  summary +0  via histogram > counts\n"
        )
        complete = why(service, dataflow, "histogram:0", "2")
        assert complete.stdout == "2 is complete at histogram:0 (frontier [3])\n"
        answer = orjson.loads(why(service, dataflow, "histogram:0", "2", "--json").stdout)
        assert (answer["complete"], answer["frontier"], answer["holders"]) == (True, [3], [])
        refused = why(service, dataflow, "nowhere", "2")
        assert refused.returncode == 1
        assert refused.stderr == (
            f"error: Not found (404): dataflow '{dataflow}' has no location 'nowhere'; its "
            "locations are: words:0, histogram:0, counts (a node's output port as node:port, "
            "or an output's name)\n"
        )
        refused = why(service, dataflow, "counts", "[1,2]")
        assert (refused.returncode, refused.stderr) == (
            1,
            "error: Unprocessable content (422): time [1, 2] is not a time at counts: expected "
            "an integer 0 <= t < 2^64\n",
        )
        session.close()
