"""Staged transactions expire, across a SIGKILL: real server processes on one data directory.

A producer stages records and dies (and so does the server): nobody will ever commit or abort
them. The server, restarted, still knows when they were staged, and discards them once
``staged_transaction_seconds`` have passed since: their share of the staging cap is free
again, a late commit of them gets a precise problem, and the expiry is in the input's log,
so a second kill and restart does not bring them back.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp

from service.app.inputs import rfc3339
from tests.e2e.conftest import Server, launch

GRAPH = {
    "nodes": {"x": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["x", "out"]],
}
SECONDS = 6.0
"""``staged_transaction_seconds``: longer than a restart takes, so the transaction is seen
staged after it."""
CONFIG = {"limits": {"staged_transaction_seconds": SECONDS, "max_staged_records_per_input": 3}}


async def call(
    http: aiohttp.ClientSession, server: Server, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    async with http.request(method, server.url + path, json=body) as response:
        return response.status, await response.json(content_type=None)


def killed(server: Server) -> None:
    server.process.kill()
    server.process.wait()


async def test_a_staged_transaction_expires_after_its_time_across_a_kill(tmp_path: Path) -> None:
    server = launch(tmp_path, "--durability", "fsync", config=CONFIG)
    try:
        async with aiohttp.ClientSession() as http:
            _, created = await call(http, server, "POST", "/v1/dataflows", {"graph": GRAPH})
            base = f"/v1/dataflows/{created['id']}/inputs/x"
            staged_at = time.time()
            records = {"records": [[0, "a"], [0, "b"], [1, "c"]]}
            assert await call(http, server, "PUT", f"{base}/transactions/t1", records) == (
                200,
                {"staged": 3},
            )
    finally:
        killed(server)  # the producer and the server die: nobody commits or aborts t1

    server = launch(tmp_path, "--durability", "fsync", config=CONFIG)
    try:
        async with aiohttp.ClientSession() as http:
            status, state = await call(http, server, "GET", base)
            assert time.time() < staged_at + SECONDS, "the restart took too long to see t1"
            assert (state["staged"], state["transactions"]) == (
                3,
                [{"transaction": "t1", "staged": 3}],
            )
            # t1 holds the whole staging cap
            one = {"records": [[2, "d"]]}
            status, refused = await call(http, server, "PUT", f"{base}/transactions/t2", one)
            assert (status, refused["type"]) == (
                429,
                "https://frontier.dev/problems/limit-exceeded",
            )
            deadline = time.monotonic() + SECONDS + 10
            while state["staged"] and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                status, state = await call(http, server, "GET", base)
            seen_gone = time.time()
            assert (state["staged"], state["transactions"]) == (0, [])
            # not before its time (counted from the staging, not from the restart)
            assert seen_gone >= staged_at + SECONDS
            assert seen_gone <= staged_at + SECONDS + 3  # a round is 0.3 s; the rest is slack
            # its share of the cap is free
            assert await call(http, server, "PUT", f"{base}/transactions/t2", one) == (
                200,
                {"staged": 1},
            )
            commit = {"transactions": ["t1", "t2"], "idempotency_key": "k", "advance_to": 5}
            status, problem = await call(http, server, "POST", f"{base}/commit", commit)
            expired_at = problem.get("expired_at", "")
            assert rfc3339(staged_at + SECONDS) <= expired_at <= rfc3339(seen_gone)
            assert (status, problem) == (
                410,
                {
                    "type": "https://frontier.dev/problems/transaction-expired",
                    "title": "Transaction expired",
                    "status": 410,
                    "detail": (
                        f"transaction 't1' of input 'x' expired at {expired_at}: nothing "
                        "staged into it, committed it or aborted it for 6 s "
                        "(staged_transaction_seconds), so its 3 records were discarded; "
                        "nothing was committed (abort it to use its name again)"
                    ),
                    "transaction": "t1",
                    "expired_at": expired_at,
                },
            )
    finally:
        killed(server)

    # The expiry was logged like an abort: a restart does not bring t1 back.
    server = launch(tmp_path, "--durability", "fsync", config=CONFIG)
    try:
        async with aiohttp.ClientSession() as http:
            status, state = await call(http, server, "GET", base)
            assert (state["staged"], state["transactions"]) == (
                1,
                [{"transaction": "t2", "staged": 1}],
            )
            status, again = await call(http, server, "POST", f"{base}/commit", commit)
            assert (status, again) == (410, problem)
            # Aborting the expired name frees it; then the commit goes through.
            assert await call(http, server, "DELETE", f"{base}/transactions/t1") == (
                200,
                {"discarded": 0},
            )
            assert await call(http, server, "PUT", f"{base}/transactions/t1", one) == (
                200,
                {"staged": 1},
            )
            status, ack = await call(http, server, "POST", f"{base}/commit", commit)
            assert (status, ack["applied"], ack["input_frontier"]) == (200, 2, [5])
        server.stop()
    except BaseException:
        killed(server)
        raise
