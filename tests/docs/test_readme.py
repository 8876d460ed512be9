"""The README's Python examples run as written (so the docs stay true)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples() -> None:
    assert len(blocks()) == 2


def test_readme_engine_example_prints_counts_per_time() -> None:
    code = blocks()[0]
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=README.parent,
        check=True,
    )
    # Each word is counted on the worker its key hashes to: merge the two workers' lines.
    lines = sorted(done.stdout.splitlines())
    merged: dict[str, list[object]] = {}
    for line in lines:
        time, _, rest = line.partition(" ")
        merged.setdefault(time, []).extend(ast.literal_eval(rest))
    assert {t: sorted(v) for t, v in merged.items()} == {
        "0": [("a", 2), ("b", 1)],
        "1": [("b", 1), ("c", 1)],
    }


def test_readme_progress_example_runs() -> None:
    subprocess.run([sys.executable, "-c", blocks()[1]], timeout=60, cwd=README.parent, check=True)


def test_readme_states_the_staging_cap_the_server_has() -> None:
    from service.app import Limits

    text = " ".join(README.read_text().split())
    cap = Limits().max_staged_records_per_input
    assert f"`max_staged_records_per_input` ({cap:,} records by default" in text
