"""One process of a test cluster that runs programs on request (``tests.runtime.fabrics``).

``python -m tests.runtime.cluster_serve`` reads commands on stdin, one per run, each a frame
(a 4-byte length, then a pickle) of a :class:`Command`. For each it forms the cluster the
command describes (``operators.runtime.cluster.connect``, fresh sockets every run), runs
``program(worker, *args)`` on this process's workers with ``execute``, says goodbye to its
peers, and answers on stdout with a frame: ``("ok", global worker indexes, results,
summary)`` or ``("error", exception)``. A command may name the fabric to use over the links
(``Command.fabric``, a ``ClusterFabric`` by default); ``summary`` is what its ``summary()``
returns once closed, if it has one. A run that fails aborts the fabric without a goodbye, so the
peers end with ``PeerLost`` rather than wait for progress that will never come.

The process lives until its stdin closes (the test session ends, or the parent died), so
the interpreter starts once per session, not once per test. What programs print goes to
stderr: stdout carries only the frames.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any

import uvloop

from operators import Worker, execute
from operators.runtime.cluster import ClusterError, ClusterFabric, ClusterSpec, Link, connect

HEADER = struct.Struct("<I")
SECRET = b"frontier-tests"


@dataclass(frozen=True)
class Command:
    """One run: ``program(worker, *args)`` on process ``index`` of a cluster at ``peers``."""

    program: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...]
    index: int
    workers: int
    peers: tuple[tuple[str, int], ...]
    startup_timeout: float
    fabric: Callable[[ClusterSpec, dict[int, Link]], ClusterFabric] = ClusterFabric


def frame(payload: bytes) -> bytes:
    """``payload`` with its length in front."""
    return HEADER.pack(len(payload)) + payload


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (length,) = HEADER.unpack(header)
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return payload


async def run_one(command: Command) -> tuple[Any, ...]:
    """Form the cluster, run the program on the local workers, close; the reply."""
    spec = ClusterSpec(
        processes=len(command.peers),
        index=command.index,
        workers=command.workers,
        peers=command.peers,
        secret=SECRET,
        startup_timeout=command.startup_timeout,
    )
    try:
        fabric = await connect(spec, command.fabric)
    except ClusterError as error:
        return ("error", error)

    async def work(worker: Worker) -> Any:
        return await command.program(worker, *command.args)

    try:
        results = await execute(work, spec.workers, fabric)
    except Exception as error:
        await fabric.abort()
        return ("error", error)
    await fabric.close()
    summary = getattr(fabric, "summary", None)
    return ("ok", list(fabric.local), results, summary() if summary is not None else None)


def _encode(reply: tuple[Any, ...]) -> bytes:
    try:
        return pickle.dumps(reply, protocol=5)
    except Exception as error:  # a result or an exception that does not pickle
        what = reply[1] if reply[0] == "error" else error
        return pickle.dumps(("error", RuntimeError(f"{type(what).__name__}: {what}")))


def main() -> int:
    """Serve commands until stdin closes."""
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # prints go to stderr; stdout carries only replies
    commands = sys.stdin.buffer
    while (payload := _read_frame(commands)) is not None:
        command = pickle.loads(payload)  # from the parent test process
        replies.write(frame(_encode(uvloop.run(run_one(command)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
