"""Helpers the benchmarks share: statistics over repeats, plain-text tables, checkouts."""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Stat:
    """Values over repeats; ``best`` is the max for rates, the min otherwise."""

    higher_is_better: bool = False
    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def best(self) -> float:
        return max(self.values) if self.higher_is_better else min(self.values)

    def show(self, scale: float = 1.0, digits: int = 2) -> str:
        if not self.values:
            return "-"
        return f"{self.median / scale:.{digits}f} ({self.best / scale:.{digits}f})"

    def as_json(self) -> dict[str, Any]:
        if not self.values:
            return {"median": None, "best": None, "values": []}
        return {"median": self.median, "best": self.best, "values": self.values}


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(lines)


def percentile(sorted_values: list[int], q: float) -> float:
    """The ``q``-quantile (0..1) of sorted values, nearest rank."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return float(sorted_values[rank])


def cli_source(checkout: Path) -> str:
    """The source of a checkout's ``frontier`` command, to see which flags it takes.

    ``api/cli.py`` in older checkouts; since the command is a package (``api/cli/``), its
    modules read together.
    """
    module = checkout / "api" / "cli.py"
    if module.exists():
        return module.read_text()
    return "".join(path.read_text() for path in sorted((checkout / "api" / "cli").glob("*.py")))


def start_server(
    work: Path, root: Path, config: dict[str, Any], durability: str = "none"
) -> tuple[Any, str]:
    """``python -m api serve`` of ``root`` on a free port of 127.0.0.1, ready; and its URL.

    The caller terminates the process. ``config`` is written as the server's ``--config``.
    """
    import os
    import socket
    import subprocess
    import sys
    import time

    import yaml

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "api", "serve", "--port", str(port), "--config", str(path)]
    command += ["--data-dir", str(work / "data"), "--durability", durability]
    server = subprocess.Popen(
        command,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
        except OSError:
            time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


async def bare_send(port: int, total: int, frames: int) -> int:
    """A bare socket's side of a transfer: ``total`` bytes in ``frames`` writes to ``port``
    (retried until it listens); the ``perf_counter_ns`` when the first write began."""
    for _ in range(200):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            break
        except OSError:
            await asyncio.sleep(0.05)
    sizes = [total // frames + (1 if i < total % frames else 0) for i in range(frames)]
    chunks = [bytes(size) for size in sizes]
    start = time.perf_counter_ns()
    for chunk in chunks:
        writer.write(chunk)
        await writer.drain()
    writer.close()
    await writer.wait_closed()
    del reader
    return start
