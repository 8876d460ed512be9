"""Staged transactions expire: left ``staged_transaction_seconds`` alone, they are discarded.

In process: what expires and when (the time of the last staging request), the cap share it
frees, the precise problem a later commit or stage gets, an abort freeing the name, the
manager's periodic expiry, and (on a real data directory) that a restart neither brings an
expired transaction back nor forgets when a staged one was last touched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from service.app import DataflowManager, LimitExceeded, Limits, Settings
from service.app.inputs import Ack, TransactionExpired, rfc3339
from tests.service.support import Start
from tests.service.test_inputs import dataflow, frontier_is, output

T = 4_000_000_000.0
"""A time to stage at, in 2096: the wall clock (which a commit or a stage looks at, to
expire what is due) is long before it, so only the test's explicit ``now`` expires."""


def expired_detail(name: str, at: float, seconds: float, records: int, outcome: str) -> str:
    return (
        f"transaction {name!r} of input 'x' expired at {rfc3339(at)}: nothing staged into it, "
        f"committed it or aborted it for {seconds:g} s (staged_transaction_seconds), so its "
        f"{records} records were discarded; {outcome} (abort it to use its name again)"
    )


async def test_a_transaction_left_alone_expires_frees_its_share_and_says_so(
    start: Start,
) -> None:
    _manager, _record, x, log = await dataflow(
        start, max_staged_records_per_input=5, staged_transaction_seconds=60
    )
    x.stage("t1", [(0, "a"), (0, "b"), (1, "c")], at=T)
    with pytest.raises(LimitExceeded):
        x.stage("t2", [(0, "d")] * 3, at=T)
    assert x.expire(now=T + 59.9) == []
    assert x.expire(now=T + 60) == [("t1", 3)]
    # Its share of the staging cap is free: what was refused fits now.
    assert (x.staged(), x.staged_records) == ({}, 0)
    assert x.stage("t2", [(0, "d")] * 3, at=T + 60) == 3
    with pytest.raises(TransactionExpired) as committed:
        x.commit(None, ["t2", "t1"], "k", advance_to=2)
    error = committed.value
    assert (error.status, error.slug, error.title) == (
        410,
        "transaction-expired",
        "Transaction expired",
    )
    assert error.detail == expired_detail("t1", T + 60, 60, 3, "nothing was committed")
    assert error.extra == {"transaction": "t1", "expired_at": "2096-10-02T07:07:40.000Z"}
    assert x.staged() == {"t2": 3}  # the refused commit applied nothing
    with pytest.raises(TransactionExpired) as staged:
        x.stage("t1", [(0, "late")])
    assert staged.value.detail == expired_detail("t1", T + 60, 60, 3, "nothing was staged")
    # An abort answers 0 (its records went when it expired) and frees the name.
    assert x.abort("t1") == 0
    assert x.stage("t1", [(1, "e")]) == 1
    assert x.commit(None, ["t2", "t1"], "k", advance_to=2) == Ack(None, None, [2], 4)
    await frontier_is(log, [2])
    assert output(log) == {0: ["d", "d", "d"], 1: ["e"]}


async def test_each_staging_request_restarts_the_clock(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start, staged_transaction_seconds=60)
    x.stage("t1", [(0, "a")], at=T)
    x.stage("t1", [(0, "b")], at=T + 50)
    assert x.expire(now=T + 100) == []
    assert x.expire(now=T + 110) == [("t1", 2)]


async def test_a_due_transaction_is_expired_by_the_request_that_finds_it(start: Start) -> None:
    """Between two rounds of the periodic expiry, a commit of a due transaction is refused
    the same way: what a request gets does not depend on when the expiry last ran."""
    _manager, _record, x, _log = await dataflow(start, staged_transaction_seconds=60)
    x.stage("t1", [(0, "a")], at=time.time() - 61)
    before = time.time()
    with pytest.raises(TransactionExpired) as refused:
        x.commit(None, ["t1"], "k")
    after = time.time()
    expired_at = refused.value.expired_at
    assert rfc3339(before - 0.001) <= expired_at <= rfc3339(after + 0.001)
    assert x.staged() == {}
    x.stage("t2", [(0, "b")], at=time.time() - 61)
    with pytest.raises(TransactionExpired):
        x.stage("t2", [(0, "c")])


async def test_the_manager_expires_transactions_on_its_own(start: Start) -> None:
    manager, _record, x, _log = await dataflow(start, staged_transaction_seconds=0.2)
    staged_at = time.time()
    x.stage("t1", [(0, "a")])
    x.stage("t2", [(0, "b")])
    deadline = time.monotonic() + 5
    while x.staged() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    gone = time.time()
    assert x.staged() == {}
    # Not before its time, and no later than a round (a twentieth of it, 50 ms at least).
    assert 0.2 <= gone - staged_at <= 0.2 + 0.05 + 0.5
    assert await manager.expire_transactions() == 0


# --------------------------------------------------------------------------- across restarts


@pytest.fixture
async def managers(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start managers on one data directory (each stopped at the end, if not before)."""
    started: list[DataflowManager] = []

    async def make(segment_bytes: int = 1 << 26, **limits: Any) -> DataflowManager:
        settings = Settings(
            workers=1,
            data_dir=str(tmp_path / "data"),
            limits=Limits(**limits),
            log_segment_bytes=segment_bytes,
        )
        manager = DataflowManager(settings)
        await manager.start()
        started.append(manager)
        deadline = time.monotonic() + 10
        while not manager.ready and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return manager

    yield make
    for manager in started:
        await manager.stop()


PASS = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}


async def test_an_expiry_is_logged_and_staging_times_survive_a_restart(
    managers: Callable[..., Any],
) -> None:
    first = await managers(staged_transaction_seconds=60)
    record = await first.create("t", PASS)
    x = first.input("t", record.id, "x")
    x.stage("gone", [(0, "a"), (0, "b")], ("json", b'{"records":[[0,"a"],[0,"b"]]}'), at=T)
    x.stage("kept", [(0, "c")], at=T + 1000)
    assert await first.expire_transactions(now=T + 70) == 1
    await first.stop()

    second = await managers(staged_transaction_seconds=60)
    x = second.input("t", record.id, "x")
    # The expiry is not undone by the replay, and the kept one keeps its time.
    assert (x.staged(), x.staged_records) == ({"kept": 1}, 1)
    with pytest.raises(TransactionExpired) as refused:
        x.commit(None, ["gone"], "k")
    assert refused.value.detail == expired_detail("gone", T + 70, 60, 2, "nothing was committed")
    assert x.expire(now=T + 1059) == []
    assert x.expire(now=T + 1060) == [("kept", 1)]
    await x.durable()
    # An abort of the expired name is logged too: after another restart the name is free.
    assert x.abort("gone") == 0
    await x.durable()
    await second.stop()

    third = await managers(staged_transaction_seconds=60)
    x = third.input("t", record.id, "x")
    assert x.staged() == {}
    assert x.stage("gone", [(0, "d")]) == 1
    with pytest.raises(TransactionExpired):
        x.commit(None, ["kept"], "k")


async def test_a_checkpoint_holds_staging_times_and_expiries(
    managers: Callable[..., Any],
) -> None:
    """What heads a new segment of the log (where a replay starts once earlier ones are
    cut): the open transactions with their times, and the expired ones."""
    manager = await managers(staged_transaction_seconds=60)
    x = manager.input("t", (await manager.create("t", PASS)).id, "x")
    x.stage("gone", [(0, "a")], at=T)
    x.stage("kept", [(0, "b")], at=T + 1000)
    x.expire(now=T + 60)
    y = manager.input("t", (await manager.create("t", PASS)).id, "x")
    y.restore(x.snapshot())
    assert (y.staged(), y.staged_records) == ({"kept": 1}, 1)
    with pytest.raises(TransactionExpired):
        y.commit(None, ["gone"], "k")
    assert y.expire(now=T + 1059) == []
    assert y.expire(now=T + 1060) == [("kept", 1)]
