"""examples/word_count.yaml counts the words of text lines, as its header says.

The graph splits each line with CEL's ``split`` (the strings extension) and compiles; the
run on a real server pushes examples/word_count.jsonl and expects, per time, the counts that
Python's ``str.split(" ")`` gives (empty words dropped).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from api.client import AsyncClient
from operators.graph import compile_graph, parse_graph
from tests.e2e.conftest import running

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GRAPH = EXAMPLES / "word_count.yaml"
LINES = EXAMPLES / "word_count.jsonl"
DEADLINE = 30.0


def graph() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(GRAPH.read_text(encoding="utf-8"))
    return document


def lines() -> list[list[Any]]:
    text = LINES.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def expected() -> dict[int, list[dict[str, Any]]]:
    counts: dict[int, Counter[str]] = {}
    for at, line in lines():
        counts.setdefault(at, Counter()).update(w for w in line.split(" ") if w)
    return {
        at: sorted(({"key": w, "count": n} for w, n in c.items()), key=lambda r: r["key"])
        for at, c in sorted(counts.items())
    }


def test_the_example_is_a_word_count_of_lines() -> None:
    spec = graph()
    compile_graph(parse_graph(spec))  # it compiles: split is known
    assert spec["nodes"]["lines"] == {"op": "input"}
    assert "r.split(" in spec["nodes"]["words"]["expr"]
    assert spec["nodes"]["counts"] == {"op": "output"}
    assert len(expected()) >= 3 and all(isinstance(line, str) for _, line in lines())


async def test_the_word_count_counts_the_words_of_each_time(tmp_path: Path) -> None:
    want = expected()
    with running(tmp_path) as server:
        async with AsyncClient(server.url) as client:
            spec = graph()
            dataflow = (await client.create_dataflow(spec, spec["name"]))["id"]
            session = await client.session(dataflow, "lines")
            await session.push(lines())
            await session.advance(max(want) + 1)
            deadline = time.monotonic() + DEADLINE
            while True:
                got = {at: records async for at, records in client.times(dataflow, "counts")}
                if len(got) == len(want) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
    assert {at: sorted(rs, key=lambda r: r["key"]) for at, rs in got.items()} == want
