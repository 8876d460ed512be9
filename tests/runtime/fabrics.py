"""The fabric as a test parameter: one process, or a cluster of real processes over 127.0.0.1.

A runtime test that runs with several workers takes a :class:`Layout` parameter
(:func:`layouts`): ``1x3`` is one process of three workers on the in-process fabric, as
before; ``3x1`` and ``2x2`` are clusters of child processes (processes x workers) joined by
``operators.runtime.cluster`` over real sockets on 127.0.0.1. The test runs a module-level
program with :meth:`Clusters.run` and asserts the same exact values whatever the layout::

    @pytest.mark.parametrize("layout", layouts(1, 3))
    async def test_it(layout: Layout, clusters: Clusters) -> None:
        results = await clusters.run(layout, program, arg)  # program(worker, arg) per worker

The results come back in global worker order, as ``execute`` returns them; an exception
raised on any worker is raised here (in a cluster, the first that is not the ``PeerLost`` it
causes in the other processes).

**Programs.** ``program`` and ``args`` travel to the children by pickle: the program is a
module-level ``async def program(worker, *args)``, and its arguments are values or
module-level functions (pickled by name). Whatever a worker wants to report it returns: in
a cluster, state shared between workers is shared only within a process.

**Processes.** Each cluster shape has one :class:`ClusterPool` per test session, whose
children (``tests/runtime/cluster_serve.py``) start on first use and run one program per
request, forming the cluster afresh each time: one interpreter start per shape and
session, not per test. A run that does not finish within its timeout kills the pool's
children (the next run starts new ones) and fails naming what they wrote on stderr; the
``clusters`` fixture kills every child at the end of the session, and a child whose parent
dies exits when its stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from operators import execute
from operators.runtime.cluster import ClusterFabric, ClusterSpec, Link, PeerLost
from tests.runtime.cluster_serve import HEADER, Command, frame

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 20.0
"""Seconds a run may take (they take milliseconds; the margin is for a loaded machine)."""
STARTUP = 5.0
"""Seconds the processes of one run have to connect to each other."""


@dataclass(frozen=True)
class Layout:
    """``processes`` processes of ``workers`` workers each (one process: the local fabric)."""

    processes: int
    workers: int

    @property
    def peers(self) -> int:
        """Workers in all: what ``worker.peers`` is."""
        return self.processes * self.workers

    def __str__(self) -> str:
        return f"{self.processes}x{self.workers}"


CLUSTERS = {3: Layout(3, 1), 4: Layout(2, 2)}
"""The cluster that runs a test of this many workers across processes."""


def layouts(*peers: int) -> list[Any]:
    """Parameters: one process of each number of ``peers``, then the clusters of as many."""
    local = [Layout(1, n) for n in peers]
    across = [CLUSTERS[n] for n in peers if n in CLUSTERS]
    return [pytest.param(layout, id=str(layout)) for layout in local + across]


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now (held open together so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _read_exactly(fd: int, n: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


class ClusterPool:
    """The child processes of one cluster shape, reused run after run."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.children: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []

    def _start(self) -> None:
        for _ in range(self.layout.processes):
            log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by kill())
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.runtime.cluster_serve"],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                bufsize=0,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
            self.children.append(child)
            self.logs.append(log)

    def run(
        self,
        program: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        timeout: float,
        fabric: Callable[[ClusterSpec, dict[int, Link]], ClusterFabric] = ClusterFabric,
    ) -> list[tuple[Any, ...]]:
        """Each process's reply to one run of ``program`` (blocking)."""
        if not self.children:
            self._start()
        ports = free_ports(self.layout.processes)
        peers = tuple(("127.0.0.1", port) for port in ports)
        marks = [log.seek(0, os.SEEK_END) for log in self.logs]
        for index, child in enumerate(self.children):
            command = Command(program, args, index, self.layout.workers, peers, STARTUP, fabric)
            assert child.stdin is not None
            child.stdin.write(frame(pickle.dumps(command, protocol=5)))
        deadline = time.monotonic() + timeout
        replies = []
        try:
            for child in self.children:
                assert child.stdout is not None
                fd = child.stdout.fileno()
                (length,) = HEADER.unpack(_read_exactly(fd, HEADER.size, deadline))
                replies.append(pickle.loads(_read_exactly(fd, length, deadline)))
        except (TimeoutError, EOFError) as error:
            stderr = self._stderr(marks)
            self.kill()
            what = "did not finish" if isinstance(error, TimeoutError) else "lost a process"
            raise AssertionError(
                f"a run on {self.layout} {what} within {timeout:g} s; stderr:\n{stderr}"
            ) from None
        except BaseException:
            # A reply that does not unpickle here: the other replies are left unread, so
            # these children cannot serve the next run (it would read this run's replies).
            self.kill()
            raise
        return replies

    def _stderr(self, marks: list[int]) -> str:
        parts = []
        for index, (log, mark) in enumerate(zip(self.logs, marks, strict=True)):
            log.seek(mark)
            text = log.read().decode(errors="replace")[-4000:]
            parts.append(f"--- process {index}:\n{text}")
        return "\n".join(parts)

    def kill(self) -> None:
        """End every child (closing its stdin first, killing what still runs) and reap it."""
        for child in self.children:
            with contextlib.suppress(OSError):
                assert child.stdin is not None
                child.stdin.close()
        for child in self.children:
            try:
                child.wait(timeout=2)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()
        for log in self.logs:
            log.close()
        self.children = []
        self.logs = []


class Clusters:
    """Runs programs on a layout: in this process, or on the pool of its cluster shape."""

    def __init__(self) -> None:
        self.pools: dict[Layout, ClusterPool] = {}

    async def run(
        self,
        layout: Layout,
        program: Callable[..., Awaitable[Any]],
        *args: Any,
        timeout: float = TIMEOUT,
    ) -> list[Any]:
        """Every worker's result of ``program(worker, *args)``, in global worker order."""
        if layout.processes == 1:

            async def work(worker: Any) -> Any:
                return await program(worker, *args)

            return await asyncio.wait_for(execute(work, layout.workers), timeout)
        results, _summaries = await self.run_on_fabric(layout, ClusterFabric, program, *args)
        return results

    async def run_on_fabric(
        self,
        layout: Layout,
        fabric: Callable[[ClusterSpec, dict[int, Link]], ClusterFabric],
        program: Callable[..., Awaitable[Any]],
        *args: Any,
        timeout: float = TIMEOUT,
    ) -> tuple[list[Any], list[Any]]:
        """:meth:`run` on a cluster whose processes use ``fabric`` (a module-level factory).

        Also returns each process's fabric summary (``fabric.summary()`` once closed).
        """
        pool = self.pools.get(layout)
        if pool is None:
            pool = self.pools[layout] = ClusterPool(layout)
        replies = await asyncio.to_thread(pool.run, program, args, timeout, fabric)
        errors = [(i, reply[1]) for i, reply in enumerate(replies) if reply[0] == "error"]
        if errors:
            # The failure itself, not the PeerLost it caused in the other processes.
            causes = [(i, e) for i, e in errors if not isinstance(e, PeerLost)]
            index, error = (causes or errors)[0]
            error.add_note(f"raised in process {index} of {layout}")
            raise error
        results: dict[int, Any] = {}
        for _ok, workers, values, _summary in replies:
            results.update(zip(workers, values, strict=True))
        return [results[worker] for worker in range(layout.peers)], [r[3] for r in replies]

    def close(self) -> None:
        """End every pool's children."""
        for pool in self.pools.values():
            pool.kill()
        self.pools.clear()
