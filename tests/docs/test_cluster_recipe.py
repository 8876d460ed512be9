"""docs/cluster.md's recipe for three processes on one machine runs as written.

The test takes the ``sh`` block under "Three processes on one machine", swaps each port it
names for a free one, puts a ``frontier`` of this checkout on the ``PATH`` and runs the block
with bash in an empty directory: the three ``frontier serve`` processes form a cluster, a
dataflow made at one takes a push at another and completes a time at the third, and
``kill %1 %2 %3`` stops them. The commands themselves are checked too: one per process, each
with its own ``--port`` (the one ``--apis`` lists for it) and data directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.fabrics import free_ports

REPO = Path(__file__).resolve().parents[2]
CLUSTER_MD = REPO / "docs" / "cluster.md"
HEADING = "### Three processes on one machine"
TIMEOUT = 240.0
"""Seconds the whole recipe may take: the processes start in a few each on this machine."""


def recipe() -> str:
    """The ``sh`` block under :data:`HEADING`."""
    text = CLUSTER_MD.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    match = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert match is not None, f"no sh block under {HEADING!r}"
    return match.group(1)


def serve_commands(block: str) -> list[list[str]]:
    """The block's ``frontier serve`` commands, continuation lines joined, as arguments."""
    joined = block.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        if line.startswith("frontier serve "):
            words = shlex.split(line, comments=True)
            ends = [i for i, word in enumerate(words) if ">" in word or word == "&"]
            commands.append(words[: ends[0]] if ends else words)
    return commands


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_recipe_names_every_process() -> None:
    commands = serve_commands(recipe())
    assert len(commands) == 3
    apis = option(commands[0], "--apis").split(",")
    peers = option(commands[0], "--peers").split(",")
    assert len(apis) == len(peers) == 3
    assert len(set(apis) | set(peers)) == 6, "every address is a port of its own"
    for index, words in enumerate(commands):
        assert option(words, "--processes") == "3"
        assert option(words, "--process") == str(index)
        assert option(words, "--apis").split(",") == apis
        assert option(words, "--peers").split(",") == peers
        assert apis[index] == f"127.0.0.1:{option(words, '--port')}", "--apis lists its --port"
    assert len({option(words, "--data-dir") for words in commands}) == 3


@pytest.mark.skipif(shutil.which("curl") is None, reason="the recipe uses curl, not installed")
def test_the_recipe_runs_a_cluster_of_three(tmp_path: Path) -> None:
    block = recipe()
    documented = sorted({int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", block)})
    assert len(documented) == 6
    ports = dict(zip(documented, free_ports(len(documented)), strict=True))
    script = re.sub(
        r"\b(" + "|".join(map(str, documented)) + r")\b", lambda m: str(ports[int(m[1])]), block
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "frontier"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m api "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    work = tmp_path / "work"
    work.mkdir()
    shell = subprocess.Popen(
        ["bash", "-c", script],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the servers too, stopped below
    )
    try:
        out, err = shell.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        out, err = shell.communicate()
        logs = "\n".join(p.read_text()[-2000:] for p in sorted(work.glob("process-*.log")))
        pytest.fail(f"the recipe did not finish in {TIMEOUT:.0f} s\n{out}\n{err}\n{logs}")
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
    assert shell.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines[:3] == [{"status": "ready"}] * 3, out
    push, advance, times = lines[3:]
    assert (push["seq"], push["applied"], push["input_frontier"]) == (1, 2, [0])
    assert (advance["seq"], advance["input_frontier"]) == (2, [1])
    assert [(t["time"], sorted(t["records"])) for t in times["times"]] == [(0, ["a", "b"])]
    for index in range(3):
        log = (work / f"process-{index}.log").read_text()
        assert "Traceback" not in log, log
    assert sorted(p.name for p in work.iterdir() if p.is_dir()) == ["data-0", "data-1", "data-2"]
