"""The store in-process: a restart on the same data directory recovers everything.

Each test runs a manager on a real directory, stops it, and starts another on the same one:
what was acknowledged is back, and the promises hold across the restart (a retried push is
applied once, a key answers the same, a consumer's commit stands).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Hashable
from pathlib import Path
from typing import Any

import pytest

from operators.progress import Product
from service.app import (
    Conflict,
    DataflowManager,
    Gone,
    IdempotencyKeyReused,
    Limits,
    OutputLog,
    Settings,
    Unavailable,
)
from tests.service.support import until

COUNT = {
    "nodes": {
        "x": {"op": "input"},
        "n": {"op": "count_by", "key": "r"},
        "out": {"op": "output"},
    },
    "edges": [["x", "n"], ["n", "out"]],
}

PUSHED = b'{"seq": 1, "records": [[0, "p"], [0, "q"], [1, "p"]]}'
"""A push body as it arrived (logged as such, decoded again on recovery)."""


@pytest.fixture
async def managers(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start managers on one data directory (each stopped at the end, if not before)."""
    started: list[DataflowManager] = []

    async def make(
        durability: str = "fsync", workers: int = 2, segment_bytes: int = 1 << 26, **limits: Any
    ) -> DataflowManager:
        settings = Settings(
            workers=workers,
            data_dir=str(tmp_path / "data"),
            durability=durability,
            limits=Limits(**limits),
            log_segment_bytes=segment_bytes,
        )
        manager = DataflowManager(settings)
        await manager.start()
        started.append(manager)
        await until(lambda: manager.ready, "the manager has recovered", turns=100_000)
        return manager

    yield make
    for manager in started:
        await manager.stop()


def counts(log: OutputLog) -> dict[Hashable, list[Any]]:
    """The retained complete times, each with its sorted (key, count) pairs."""
    return {
        t: sorted((r["key"], r["count"]) for r in log.records_at(t))
        for t in log.complete_times(None, None)
    }


async def passed(log: OutputLog, time: Hashable) -> None:
    await until(lambda: sorted(log.frontier()) == [time], f"the output passes {time}", 10_000)


@pytest.mark.parametrize("durability", ["fsync", "group", "none"])
async def test_a_restart_recovers_dataflows_sessions_outputs_and_consumers(
    managers: Callable[..., Any], durability: str
) -> None:
    first = await managers(durability)
    record = await first.create("t", COUNT, "counts")
    other = await first.create("u", COUNT)
    x = first.input("t", record.id, "x")
    a, b = x.open_session(), x.open_session()
    acks = [
        x.push(a.id, 1, [(0, "p"), (0, "q"), (1, "p")], ("json", PUSHED)),
        x.push(b.id, 1, [(0, "p")]),
        x.advance(a.id, 2, seq=2),
        x.advance(b.id, 2),
    ]
    await x.durable()
    first.commit_consumer("t", record.id, "out", "reader", 0)
    log = first.output("t", record.id, "out")
    await passed(log, 2)
    expected = {0: [("p", 2), ("q", 1)], 1: [("p", 1)]}
    assert counts(log) == expected
    await first.stop()

    second = await managers(durability)
    assert [(r.id, r.tenant, r.name, r.status) for r in second.listing("t")] == [
        (record.id, "t", "counts", "running")
    ]
    assert [r.id for r in second.listing("u")] == [other.id]
    log = second.output("t", record.id, "out")
    await passed(log, 2)
    assert counts(log) == expected
    assert log.consumers == {"reader": 0}
    x = second.input("t", record.id, "x")
    assert (sorted(x.sessions), x.records_in, x.frontier()) == (sorted([a.id, b.id]), 4, [2])
    # Retries are answered as before and applied once; an older seq is stale.
    assert x.advance(a.id, 2, seq=2) == acks[2]
    assert x.push(b.id, 1, [(0, "p")]) == acks[1]
    with pytest.raises(Conflict):
        x.push(a.id, 1, [(2, "stale")])
    # The sessions go on from where they were.
    x.push(a.id, 3, [(2, "r")])
    x.close()
    await x.durable()
    await until(lambda: sorted(log.frontier()) == [], "the output completes", 10_000)
    assert counts(log) == {**expected, 2: [("r", 1)]}


async def test_keys_transactions_and_closed_sessions_survive_a_restart(
    managers: Callable[..., Any],
) -> None:
    first = await managers()
    record = await first.create("t", COUNT)
    x = first.input("t", record.id, "x")
    x.stage("t1", [(3, "a"), (4, "b")], ("json", b'{"records":[[3,"a"],[4,"b"]]}'))
    x.stage("t2", [(3, "c")])
    x.stage("t3", [(5, "d")])
    ack = x.commit(None, ["t1", "t2"], "key-1", advance_to=5)
    s = x.open_session(5)
    x.close_session(x.open_session(6).id)
    await x.durable()
    await first.stop()

    second = await managers()
    x = second.input("t", record.id, "x")
    assert x.staged() == {"t3": 1}
    assert list(x.sessions) == [s.id]
    # The key answers the same, and still refuses other transactions.
    assert x.commit(None, ["t1", "t2"], "key-1", advance_to=5) == ack
    with pytest.raises(IdempotencyKeyReused):
        x.commit(None, ["t3"], "key-1")
    log = second.output("t", record.id, "out")
    await passed(log, 5)
    assert counts(log) == {3: [("a", 1), ("c", 1)], 4: [("b", 1)]}


async def test_digests_and_dropped_rows_survive_a_restart(managers: Callable[..., Any]) -> None:
    first = await managers()
    record = await first.create("t", COUNT)
    x = first.input("t", record.id, "x")
    x.stage("w.p0.a0", [(3, "a"), (4, "b")])
    ack = x.commit(None, ["w.p0.a0"], "w", advance_to=5, digest="d1", dropped=7)
    x.stage("v.p0.a0", [(5, "c")])
    x.commit(None, ["v.p0.a0"], "v", digest="d2", dropped=4)
    await x.durable()
    await first.stop()

    second = await managers()
    x = second.input("t", record.id, "x")
    assert (x.records_in, x.dropped_late, x.view().dropped_late) == (3, 11, 11)
    # The key answers the same rows (other transactions), refuses others; counted once.
    assert x.commit(None, ["w.p0.a1"], "w", advance_to=5, digest="d1", dropped=7) == ack
    with pytest.raises(IdempotencyKeyReused) as reused:
        x.commit(None, ["w.p0.a0"], "w", digest="d3")
    assert reused.value.extra == {"idempotency_key": "w", "committed": ["w.p0.a0"], "digest": "d1"}
    assert second.stats("t")[0].dropped_late == {"x": 11}
    await second.stop()

    third = await managers()  # and the answer to the replay was not logged as another commit
    assert third.input("t", record.id, "x").dropped_late == 11


async def test_digests_and_dropped_rows_survive_in_a_checkpoint(
    managers: Callable[..., Any], tmp_path: Path
) -> None:
    """The commit's frame is in a segment deleted since: the checkpoint heading the first
    segment kept holds the key's digest and the count."""
    first = await managers(segment_bytes=2048)
    record = await first.create("t", COUNT)
    x = first.input("t", record.id, "x")
    x.stage("w.p0.a0", [(0, "a")])
    ack = x.commit(None, ["w.p0.a0"], "w", advance_to=1, digest="d1", dropped=9)
    first.commit_consumer("t", record.id, "out", "reader", None)
    s = x.open_session()
    for t in range(1, 40):
        x.push(s.id, t, [(t, f"k{t % 3}")] * 20)
        x.advance(s.id, t + 1)
    await x.durable()
    log = first.output("t", record.id, "out")
    await passed(log, 40)
    logs = tmp_path / "data" / "inputs" / record.id / "0"
    first.commit_consumer("t", record.id, "out", "reader", 30)
    await until(lambda: not (logs / "00000000000000000000.log").exists(), "the first segment goes")
    await first.stop()

    second = await managers(segment_bytes=2048)
    x = second.input("t", record.id, "x")
    assert x.dropped_late == 9
    assert x.commit(None, [], "w", digest="d1") == ack
    with pytest.raises(IdempotencyKeyReused):
        x.commit(None, ["w.p0.a0"], "w", digest="d2")


async def test_product_times_and_a_dropped_dataflow(managers: Callable[..., Any]) -> None:
    graph = {"time": {"product": ["u64", "u64"]}, **COUNT}
    first = await managers()
    kept = await first.create("t", graph)
    dropped = await first.create("t", COUNT)
    x = first.input("t", kept.id, "x")
    s = x.open_session()
    x.push(s.id, 1, [(Product(0, 1), "a")], ("json", b'{"records":[[[0,1],"a"]]}'))
    x.push(s.id, 2, [(Product(1, 0), "b")])
    x.advance(s.id, Product(1, 1))
    await x.durable()
    await first.drop("t", dropped.id)
    await first.stop()

    second = await managers()
    assert [r.id for r in second.listing("t")] == [kept.id]
    log = second.output("t", kept.id, "out")
    await until(
        lambda: sorted(log.frontier()) == [Product(1, 1)], "the output passes (0, 1)", 10_000
    )
    assert counts(log) == {Product(0, 1): [("a", 1)], Product(1, 0): [("b", 1)]}
    assert not (Path(second.settings.data_dir or "") / "inputs" / dropped.id).exists()


async def test_under_fsync_nothing_is_seen_downstream_before_it_is_durable(
    managers: Callable[..., Any],
) -> None:
    manager = await managers("fsync")
    record = await manager.create("t", COUNT)
    x = manager.input("t", record.id, "x")
    log = manager.output("t", record.id, "out")
    s = x.open_session()
    await x.durable()
    x.push(s.id, 1, [(0, "a")])
    x.advance(s.id, 1)
    # Acknowledged only after the sync: until then the dataflow has seen nothing of it.
    assert x.applied_frontier() == [0]
    for _ in range(50):
        await asyncio.sleep(0)
        if x.journal is not None and x.journal.synced > x.journal.position:
            break
    assert sorted(log.frontier()) == [0]
    await x.durable()
    assert x.applied_frontier() == [1]
    await passed(log, 1)
    assert counts(log) == {0: [("a", 1)]}


async def test_requests_wait_while_the_directory_is_recovered(
    managers: Callable[..., Any], tmp_path: Path
) -> None:
    manager = DataflowManager(Settings(data_dir=str(tmp_path / "fresh")))
    manager.runner.ready = False
    with pytest.raises(Unavailable) as caught:
        manager.check_ready()
    assert caught.value.detail == "the service is recovering its data directory"


async def test_logs_of_a_drop_cut_short_by_a_crash_are_removed(
    managers: Callable[..., Any], tmp_path: Path
) -> None:
    first = await managers()
    kept = await first.create("t", COUNT)
    await first.stop()
    # A crash between the catalogue's drop and the logs' removal leaves logs of its own.
    orphan = tmp_path / "data" / "inputs" / "0123abcd" / "0"
    orphan.mkdir(parents=True)
    (orphan / "00000000000000000000.log").write_bytes(b"")
    second = await managers()
    assert [r.id for r in second.listing("t")] == [kept.id]
    assert sorted(p.name for p in (tmp_path / "data" / "inputs").iterdir()) == [kept.id]


async def test_logs_shrink_below_what_every_consumer_committed_and_a_restart_agrees(
    managers: Callable[..., Any], tmp_path: Path
) -> None:
    first = await managers(segment_bytes=2048)
    record = await first.create("t", COUNT)
    x = first.input("t", record.id, "x")
    s = x.open_session()
    first.commit_consumer("t", record.id, "out", "reader", None)  # keeps everything for now
    for t in range(60):
        x.push(s.id, t + 1, [(t, f"k{t % 3}")] * 20)
        x.advance(s.id, t + 1)
    await x.durable()
    log = first.output("t", record.id, "out")
    await passed(log, 60)
    logs = tmp_path / "data" / "inputs" / record.id / "0"
    segments = sorted(logs.glob("*.log"))
    size = sum(p.stat().st_size for p in segments)
    assert len(segments) > 5
    first.commit_consumer("t", record.id, "out", "reader", 40)
    await until(lambda: len(list(logs.glob("*.log"))) < len(segments), "the log shrinks")
    kept = sorted(logs.glob("*.log"))
    assert sum(p.stat().st_size for p in kept) < size / 2
    assert record.truncated_before == 40
    retained = counts(log)
    assert sorted(retained) == list(range(40, 60))
    await first.stop()

    second = await managers(segment_bytes=2048)
    log = second.output("t", record.id, "out")
    await passed(log, 60)
    assert counts(log) == retained  # the retained times, served identically
    assert log.consumers == {"reader": 40}
    with pytest.raises(Gone):
        log.check_start([39])
    x = second.input("t", record.id, "x")
    assert (list(x.sessions), x.records_in) == ([s.id], 1200)
    assert x.push(s.id, 61, [(60, "k0")] * 20).applied == 20
    x.advance(s.id, 61)
    await x.durable()
    await passed(log, 61)
    assert counts(log)[60] == [("k0", 20)]
