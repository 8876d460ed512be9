"""Two network namespaces joined by a veth pair, for tests across a real network link.

:func:`veth_pair` makes ``frontier-test-<pid>-<n>-a`` and ``...-b``, each holding one end of
a veth pair with an address of a private /30 (``10.213.X.1`` and ``10.213.X.2``) and its
loopback up; with ``delay``, ``tc netem`` delays every packet leaving either end by that
much. Both ends live in the namespaces, so nothing is reachable from (or bound in) the
host's namespace. Leaving the context kills whatever still runs in the namespaces and
deletes them (the veth pair goes with them), whatever happened inside.

It needs root, ``ip netns`` and, for the delay, the ``sch_netem`` qdisc: :func:`veth_pair`
raises :class:`Unavailable` with the failing command and its error otherwise, which the
tests turn into a skip naming that reason.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

_COUNTER = itertools.count()


class Unavailable(Exception):
    """The sandbox cannot make the namespaces, the link or its delay (the reason)."""


@dataclass(frozen=True)
class Namespace:
    """One namespace and the address of its end of the veth pair."""

    name: str
    address: str

    def command(self, *argv: str) -> list[str]:
        """``argv`` to run inside this namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


@dataclass(frozen=True)
class VethPair:
    """The two namespaces, and the delay ``tc netem`` adds on each end (ms, or None)."""

    a: Namespace
    b: Namespace
    delay_ms: float | None


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        error = (done.stderr or done.stdout).strip()
        raise Unavailable(f"`{' '.join(argv)}` failed: {error} (exit {done.returncode})")


def _pids(namespace: str) -> list[int]:
    done = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
    )
    return [int(pid) for pid in done.stdout.split()]


def _delete(namespace: str) -> None:
    """Kill what runs in ``namespace`` (our children: nothing else enters it), delete it."""
    for _ in range(50):
        pids = _pids(namespace)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, check=False)


def check_root() -> None:
    """:class:`Unavailable` unless this is root with ``ip`` and ``tc`` on the path."""
    if os.geteuid() != 0:
        raise Unavailable(f"network namespaces need root (euid {os.geteuid()})")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise Unavailable(f"`{tool}` is not installed")


@contextlib.contextmanager
def veth_pair(delay_ms: float | None = None) -> Iterator[VethPair]:
    """Two namespaces joined by a veth pair (optionally delayed by netem); deleted after."""
    check_root()
    n = next(_COUNTER)
    pid = os.getpid()
    prefix = f"frontier-test-{pid}-{n}"
    names = (f"{prefix}-a", f"{prefix}-b")
    # Interface names are at most 15 bytes; they only need be unique within a namespace
    # (and in the host's for the moment they are created there).
    links = (f"ft{pid % 100000}x{n}a", f"ft{pid % 100000}x{n}b")
    subnet = f"10.213.{(pid + n) % 256}"  # X.0/30: .1 and .2
    pair = VethPair(
        Namespace(names[0], f"{subnet}.1"), Namespace(names[1], f"{subnet}.2"), delay_ms
    )
    made: list[str] = []
    try:
        for name in names:
            _run(["ip", "netns", "add", name])
            made.append(name)
        _run(["ip", "link", "add", links[0], "type", "veth", "peer", "name", links[1]])
        for namespace, link in zip((pair.a, pair.b), links, strict=True):
            try:
                _run(["ip", "link", "set", link, "netns", namespace.name])
            finally:
                # Not moved (a failure): do not leave it in the host's namespace.
                subprocess.run(["ip", "link", "delete", link], capture_output=True, check=False)
            ip = ["ip", "-n", namespace.name]
            _run([*ip, "addr", "add", f"{namespace.address}/30", "dev", link])
            _run([*ip, "link", "set", "lo", "up"])
            _run([*ip, "link", "set", link, "up"])
            if delay_ms is not None:
                qdisc = ["tc", "qdisc", "add", "dev", link, "root", "netem"]
                try:
                    _run(namespace.command(*qdisc, "delay", f"{delay_ms:g}ms"))
                except Unavailable as error:
                    raise Unavailable(f"{error}: no sch_netem qdisc in this kernel?") from None
        yield pair
    finally:
        for name in made:
            _delete(name)
