"""ProducerInput in process: sessions, pushes with sequence numbers, transactions, closing.

Every test runs a real DataflowManager (its workers are coroutines on the test's loop) and
checks what reaches the output, not only what the input answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import pytest

from operators.progress import Product
from service.app import (
    Conflict,
    DataflowManager,
    DataflowRecord,
    Gone,
    Invalid,
    LimitExceeded,
    NotFound,
)
from service.app.errors import IdempotencyKeyReused
from service.app.inputs import Ack, ProducerInput, meet
from service.app.outputs import OutputLog
from tests.service.support import Start, settle, until

# "x" is owned by worker 0 with 1 and with 3 workers (stable_hash("x") % 3 == 0).
PASS = {"nodes": {"x": {"op": "input"}, "out": {"op": "output"}}, "edges": [["x", "out"]]}
PASS_PRODUCT = {"time": {"product": ["u64", "u64"]}, **PASS}


async def dataflow(
    start: Start, workers: int = 1, graph: dict[str, Any] = PASS, **limits: int
) -> tuple[DataflowManager, DataflowRecord, ProducerInput, OutputLog]:
    manager = await start(workers, **limits)
    record = await manager.create("t", graph, "test")
    return (
        manager,
        record,
        manager.input("t", record.id, "x"),
        manager.output("t", record.id, "out"),
    )


async def frontier_is(log: OutputLog, expected: list[Hashable]) -> None:
    await until(lambda: list(log.frontier()) == expected, f"the output frontier is {expected}")


def output(log: OutputLog) -> dict[Hashable, list[Any]]:
    """The completed times of the output with their records."""
    return {t: log.records_at(t) for t in log.complete_times(None, None)}


# --------------------------------------------------------------------------- meet


def test_meet_of_integers_is_the_minimum() -> None:
    assert meet(3, 5) == 3
    assert meet(5, 3) == 3
    assert meet(4, 4) == 4
    assert meet(0, 2**64 - 1) == 0


def test_meet_of_products_is_coordinatewise() -> None:
    assert meet(Product(0, 5), Product(3, 1)) == Product(0, 1)
    assert meet(Product(2, 2), Product(2, 7)) == Product(2, 2)
    assert meet(Product(Product(1, 9), 4), Product(Product(3, 2), 6)) == Product(Product(1, 2), 4)
    result = meet(Product(7, 8), Product(7, 8))
    assert type(result) is Product
    assert result == Product(7, 8)


@pytest.mark.parametrize(
    ("a", "b"),
    [(1, Product(1, 1)), (Product(1, 1), 1), (True, 1), (1.0, 2), (Product(1, 1), (1, 1))],
)
def test_meet_refuses_times_of_different_domains(a: Any, b: Any) -> None:
    with pytest.raises(TypeError, match="times of different domains"):
        meet(a, b)


# --------------------------------------------------------------------------- sessions


@pytest.mark.parametrize("workers", [1, 3])
async def test_input_frontier_is_the_meet_of_the_sessions(start: Start, workers: int) -> None:
    manager, record, x, log = await dataflow(start, workers)
    seen: list[list[Hashable]] = []

    async def check(expected: list[Hashable]) -> None:
        seen.append(x.frontier())
        await frontier_is(log, expected)
        assert manager.frontiers(record) == {"input:x": expected, "output:out": expected}

    s1 = x.open_session()
    s2 = x.open_session(start=3)
    assert (s1.time, s2.time, x.time()) == (0, 3, 0)
    await check([0])
    assert x.advance(s1.id, 2) == Ack(None, 2, [2], 0)
    await check([2])
    assert x.advance(s1.id, 5) == Ack(None, 5, [3], 0)
    await check([3])
    assert x.advance(s2.id, 7) == Ack(None, 7, [5], 0)
    await check([5])
    assert x.close_session(s1.id) == Ack(None, None, [7], 0)
    await check([7])
    # With no session open the input stays where it is: a new session may start there.
    assert x.close_session(s2.id) == Ack(None, None, [7], 0)
    await check([7])
    s3 = x.open_session()
    assert s3.time == 7
    x.close()
    assert (x.closed, x.time(), x.sessions) == (True, None, {})
    await check([])
    assert seen == [[0], [2], [3], [5], [7], [7], []]
    assert output(log) == {}


async def test_input_frontier_with_product_times(start: Start) -> None:
    _manager, record, x, log = await dataflow(start, graph=PASS_PRODUCT)
    s1 = x.open_session(start=Product(0, 5))
    s2 = x.open_session(start=Product(3, 1))
    x.advance(s1.id, Product(0, 6))
    # Exactly the sessions' times (issue 22): not their meet (0, 1), which nothing can send.
    assert x.frontier() == [Product(0, 6), Product(3, 1)]
    await frontier_is(log, [Product(0, 6), Product(3, 1)])
    assert x.advance(s2.id, Product(4, 1)) == Ack(
        None, Product(4, 1), [Product(0, 6), Product(4, 1)], 0
    )
    x.advance(s1.id, Product(5, 6))
    assert x.frontier() == [Product(4, 1)]
    await frontier_is(log, [Product(4, 1)])
    with pytest.raises(Conflict, match=r"^cannot advance the session from Product\(outer=5, inn"):
        x.advance(s1.id, Product(6, 5))  # not later in the product order
    x.push(s1.id, 1, [(Product(5, 6), "a"), (Product(6, 6), "b")])
    x.close()
    await frontier_is(log, [])
    assert output(log) == {Product(5, 6): ["a"], Product(6, 6): ["b"]}
    await until(lambda: record.status == "completed", "the dataflow completes")


async def test_a_session_opened_later_moves_the_input_only_when_it_advances(start: Start) -> None:
    # Opening at 3 leaves the input at 0, so another session may still start before 3;
    # the input follows the sessions' meet once they advance or close.
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session(start=3)
    assert x.frontier() == [0]
    x.open_session(start=1)
    x.close_session(s1.id)
    assert x.frontier() == [1]
    await frontier_is(log, [1])


async def test_open_session_before_the_input_time_is_a_conflict(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    s1 = x.open_session()
    x.advance(s1.id, 4)
    with pytest.raises(Conflict) as caught:
        x.open_session(start=3)
    assert caught.value.detail == "cannot open a session at 3: input 'x' is already at 4"
    assert list(x.sessions) == [s1.id]
    assert x.open_session(start=4).time == 4
    assert x.open_session(start=9).time == 9
    with pytest.raises(Invalid) as invalid:
        x.open_session(start=-1)
    assert invalid.value.detail == "the time: time -1 is outside [0, 2**64)"


async def test_max_sessions_per_input(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start, max_sessions_per_input=2)
    s1 = x.open_session()
    x.open_session()
    with pytest.raises(LimitExceeded) as caught:
        x.open_session()
    assert caught.value.detail == (
        "input 'x' has 2 open sessions, the limit (max_sessions_per_input)"
    )
    assert len(x.sessions) == 2
    x.close_session(s1.id)
    x.open_session()
    assert len(x.sessions) == 2


async def test_close_session_then_it_is_unknown(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    s1 = x.open_session()
    x.close_session(s1.id)
    assert s1.closed
    for call in (
        lambda: x.push(s1.id, 1, [(0, "a")]),
        lambda: x.advance(s1.id, 1),
        lambda: x.close_session(s1.id),
        lambda: x.commit(s1.id, [], "k"),
    ):
        with pytest.raises(NotFound) as caught:
            call()
        assert caught.value.detail == f"input 'x' has no open session {s1.id!r}"


# --------------------------------------------------------------------------- pushing


@pytest.mark.parametrize("workers", [1, 3])
async def test_push_records_reach_the_output_per_time(start: Start, workers: int) -> None:
    manager, record, x, log = await dataflow(start, workers)
    s1 = x.open_session()
    s2 = x.open_session()
    assert x.push(s1.id, 1, [(0, "a"), (2, "b"), (0, "c")]) == Ack(1, 0, [0], 3)
    assert x.push(s2.id, 1, [(1, "d")]) == Ack(1, 0, [0], 1)
    assert x.push(s2.id, 2, []) == Ack(2, 0, [0], 0)
    x.advance(s1.id, 3)
    x.advance(s2.id, 2)
    await frontier_is(log, [2])
    assert output(log) == {0: ["a", "c"], 1: ["d"]}
    x.close()
    await frontier_is(log, [])
    assert output(log) == {0: ["a", "c"], 1: ["d"], 2: ["b"]}
    assert (x.records_in, log.records_out) == (4, 4)
    assert asdict(manager.describe(record, operators=False))["inputs"] == {
        "x": {
            "frontier": [],
            "sessions": 0,
            "records_in": 4,
            "closed": True,
            "schema": None,
            "process": 0,
        }
    }


@pytest.mark.parametrize("workers", [1, 3])
async def test_push_before_the_session_time_applies_nothing(start: Start, workers: int) -> None:
    _manager, _record, x, log = await dataflow(start, workers)
    s1 = x.open_session()
    x.push(s1.id, 1, [(2, "a")])
    x.advance(s1.id, 2)
    with pytest.raises(Conflict) as caught:
        x.push(s1.id, 2, [(3, "b"), (2, "c"), (1, "d"), (4, "e")])
    assert caught.value.detail == (
        "record 2 is at 1, before the session's time 2: the push was refused and nothing of it "
        "applied"
    )
    assert x.records_in == 1
    assert s1.seq == 1  # the refused seq was not used up
    assert x.push(s1.id, 2, [(3, "f")]) == Ack(2, 2, [2], 1)
    x.advance(s1.id, 5)
    await frontier_is(log, [5])
    assert output(log) == {2: ["a"], 3: ["f"]}
    assert log.records_out == 2


@pytest.mark.parametrize(
    ("time", "problem"),
    [
        (-1, "time -1 is outside [0, 2**64)"),
        (2**64, "time 18446744073709551616 is outside [0, 2**64)"),
        ("1", "not a timestamp: '1' (expected an int or a Product)"),
        (1.0, "not a timestamp: 1.0 (expected an int or a Product)"),
        (True, "not a timestamp: True (expected an int or a Product)"),
        (None, "not a timestamp: None (expected an int or a Product)"),
        ([1, 2], "not a timestamp: [1, 2] (expected an int or a Product)"),
    ],
)
async def test_invalid_times_are_invalid(start: Start, time: Any, problem: str) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session()
    with pytest.raises(Invalid) as caught:
        x.push(s1.id, 1, [(0, "ok"), (time, "bad")])
    assert caught.value.detail == f"record 1: {problem}"
    with pytest.raises(Invalid) as advanced:
        x.advance(s1.id, time)
    assert advanced.value.detail == f"the time: {problem}"
    with pytest.raises(Invalid) as staged:
        x.stage("t1", [(time, "bad")])
    assert staged.value.detail == f"record 0: {problem}"
    assert (x.records_in, s1.seq, s1.time, x.transactions) == (0, 0, 0, {})
    x.close()
    await frontier_is(log, [])
    assert output(log) == {}


async def test_the_largest_time_is_valid(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session()
    assert x.push(s1.id, 1, [(2**64 - 1, "last")]) == Ack(1, 0, [0], 1)
    assert x.advance(s1.id, 2**64 - 1) == Ack(None, 2**64 - 1, [2**64 - 1], 0)
    x.close_session(s1.id)
    x.close()
    await frontier_is(log, [])
    assert output(log) == {2**64 - 1: ["last"]}


async def test_a_time_of_another_domain_is_invalid(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    s1 = x.open_session()
    with pytest.raises(Invalid):
        x.push(s1.id, 1, [(Product(0, 1), "a")])


@pytest.mark.parametrize("workers", [1, 3])
async def test_a_retried_push_is_acknowledged_again_not_applied(start: Start, workers: int) -> None:
    _manager, _record, x, log = await dataflow(start, workers)
    s1 = x.open_session()
    first = x.push(s1.id, 1, [(0, "a"), (1, "b")])
    assert first == Ack(1, 0, [0], 2)
    x.advance(s1.id, 1)
    # The retry (whatever it carries) answers the first ack, taken before the advance.
    assert x.push(s1.id, 1, [(0, "a"), (1, "b")]) is first
    assert x.push(s1.id, 1, [(5, "different")]) is first
    assert x.records_in == 2
    second = x.push(s1.id, 2, [(1, "c")])
    assert second == Ack(2, 1, [1], 1)
    with pytest.raises(Conflict) as caught:
        x.push(s1.id, 1, [(1, "a")])
    assert caught.value.detail == f"seq 1 is stale: session {s1.id} has applied up to 2"
    assert x.push(s1.id, 2, []) is second
    # Gaps are allowed: only order matters.
    assert x.push(s1.id, 7, [(2, "d")]) == Ack(7, 1, [1], 1)
    x.advance(s1.id, 3)
    await frontier_is(log, [3])
    assert output(log) == {0: ["a"], 1: ["b", "c"], 2: ["d"]}
    assert (x.records_in, log.records_out) == (4, 4)


@pytest.mark.parametrize("seq", [0, -1, True, "3", 1.0, None])
async def test_seq_must_be_a_positive_int(start: Start, seq: Any) -> None:
    _manager, _record, x, _log = await dataflow(start)
    s1 = x.open_session()
    with pytest.raises(Invalid) as caught:
        x.push(s1.id, seq, [(0, "a")])
    assert caught.value.detail == f"seq must be a positive integer, not {seq!r}"
    if seq is not None:  # advance takes seq=None as "no sequence number"
        with pytest.raises(Invalid):
            x.advance(s1.id, 1, seq=seq)
    assert (x.records_in, s1.seq, s1.time) == (0, 0, 0)


async def test_advance_with_seq_is_idempotent(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session()
    s2 = x.open_session()
    ack = x.advance(s1.id, 4, seq=1)
    assert ack == Ack(1, 4, [0], 0)
    x.advance(s2.id, 2)
    assert x.advance(s1.id, 4, seq=1) is ack  # the retry answers the first ack
    assert x.advance(s1.id, 6, seq=2) == Ack(2, 6, [2], 0)
    with pytest.raises(Conflict) as stale:
        x.advance(s1.id, 9, seq=1)
    assert stale.value.detail == f"seq 1 is stale: session {s1.id} has applied up to 2"
    # A push with the seq of the last advance is the same retry.
    assert x.push(s1.id, 2, [(7, "ignored")]) == Ack(2, 6, [2], 0)
    x.close()
    await frontier_is(log, [])
    assert output(log) == {}


async def test_advance_to_an_earlier_time_is_a_conflict(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    s1 = x.open_session()
    x.advance(s1.id, 3)
    with pytest.raises(Conflict) as caught:
        x.advance(s1.id, 1)
    assert caught.value.detail == "cannot advance the session from 3 to the earlier 1"
    assert x.advance(s1.id, 3) == Ack(None, 3, [3], 0)  # the same time is fine
    assert (s1.time, x.frontier()) == (3, [3])


async def test_max_batch_records(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start, max_batch_records=3)
    s1 = x.open_session()
    with pytest.raises(LimitExceeded) as caught:
        x.push(s1.id, 1, [(0, "a"), (0, "b"), (0, "c"), (0, "d")])
    assert caught.value.detail == "a batch of 4 records exceeds max_batch_records (3)"
    assert x.push(s1.id, 1, [(0, "a"), (0, "b"), (0, "c")]) == Ack(1, 0, [0], 3)
    x.close()
    await frontier_is(log, [])
    assert output(log) == {0: ["a", "b", "c"]}


# --------------------------------------------------------------------------- closing


@pytest.mark.parametrize("workers", [1, 3])
async def test_close_input(start: Start, workers: int) -> None:
    manager, record, x, log = await dataflow(start, workers)
    s1 = x.open_session()
    s2 = x.open_session(start=2)
    x.push(s1.id, 1, [(1, "a")])
    x.stage("t1", [(3, "staged")])
    x.close()
    assert (x.closed, x.frontier(), x.sessions, x.transactions) == (True, [], {}, {})
    assert s1.closed and s2.closed
    for call in (
        lambda: x.push(s1.id, 2, [(1, "b")]),
        lambda: x.advance(s2.id, 3),
        lambda: x.open_session(),
        lambda: x.stage("t2", [(3, "c")]),
        lambda: x.abort("t1"),
        lambda: x.commit(s1.id, ["t1"], "k"),
        lambda: x.close_session(s1.id),
    ):
        with pytest.raises(Gone) as caught:
            call()
        assert caught.value.detail == "input 'x' is closed"
    x.close()  # closing again does nothing
    await frontier_is(log, [])
    await until(lambda: record.status == "completed", "the dataflow completes")
    assert output(log) == {1: ["a"]}
    assert manager.frontiers(record) == {"input:x": [], "output:out": []}


# --------------------------------------------------------------------------- transactions


@pytest.mark.parametrize("workers", [1, 3])
async def test_staged_records_appear_at_commit_all_at_once(start: Start, workers: int) -> None:
    _manager, _record, x, log = await dataflow(start, workers)
    s1 = x.open_session()
    subscriber = log.subscribe()
    assert x.stage("t1", [(1, "a"), (2, "b")]) == 2
    assert x.stage("t1", [(1, "c")]) == 3  # staging appends
    assert x.stage("t2", [(2, "d")]) == 1
    await settle()
    assert (x.records_in, log.records_out, subscriber.take()) == (0, 0, [])
    ack = x.commit(s1.id, ["t1", "t2"], "key-1")
    assert ack == Ack(None, 0, [0], 4)
    assert (x.records_in, x.transactions) == (4, {})
    x.advance(s1.id, 3)
    await frontier_is(log, [3])
    assert output(log) == {1: ["a", "c"], 2: ["b", "d"]}
    events = subscriber.take()
    assert [(e.time, e.records) for e in events[:-1]] == [(1, ["a", "c"]), (2, ["b", "d"])]
    assert events[-1].changes == [(0, -1), (3, 1)]


async def test_commit_and_advance_in_one_call(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session()
    x.stage("t1", [(1, "a"), (4, "b")])
    assert x.commit(s1.id, ["t1"], "k", advance_to=2) == Ack(None, 2, [2], 2)
    await frontier_is(log, [2])
    assert output(log) == {1: ["a"]}
    assert x.commit(s1.id, [], "k2", advance_to=5) == Ack(None, 5, [5], 0)
    await frontier_is(log, [5])
    assert output(log) == {1: ["a"], 4: ["b"]}


async def test_abort_discards(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session()
    x.stage("t1", [(1, "a"), (2, "b")])
    x.stage("t2", [(1, "c")])
    assert x.abort("t1") == 2
    assert x.abort("t1") == 0
    assert x.abort("never") == 0
    with pytest.raises(NotFound) as caught:
        x.commit(s1.id, ["t2", "t1"], "k")
    assert caught.value.detail == "no staged transaction 't1' on input 'x'"
    assert list(x.transactions) == ["t2"]
    x.commit(s1.id, ["t2"], "k", advance_to=3)
    await frontier_is(log, [3])
    assert output(log) == {1: ["c"]}


@pytest.mark.parametrize("workers", [1, 3])
async def test_commit_twice_with_one_key_applies_once(start: Start, workers: int) -> None:
    _manager, _record, x, log = await dataflow(start, workers)
    s1 = x.open_session()
    x.stage("t1", [(1, "a"), (1, "b")])
    first = x.commit(s1.id, ["t1"], "key", advance_to=2)
    assert first == Ack(None, 2, [2], 2)
    x.stage("t1", [(3, "again")])  # the same transaction id, staged anew
    assert x.commit(s1.id, ["t1"], "key") is first
    assert x.commit(s1.id, ["t1"], "key", advance_to=7) is first
    assert (x.records_in, s1.time, x.staged()) == (2, 2, {"t1": 1})
    with pytest.raises(IdempotencyKeyReused) as caught:
        x.commit(s1.id, ["t1", "t2"], "key")
    assert caught.value.detail == (
        "idempotency key 'key' was used to commit ['t1'], not ['t1', 't2']"
    )
    assert (caught.value.status, caught.value.slug) == (409, "idempotency-key-reused")
    assert caught.value.extra == {"idempotency_key": "key", "committed": ["t1"]}
    x.advance(s1.id, 4)
    await frontier_is(log, [4])
    assert output(log) == {1: ["a", "b"]}
    assert log.records_out == 2


async def test_commit_before_the_session_time_applies_nothing(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session()
    s2 = x.open_session()
    x.advance(s1.id, 2)
    x.stage("t1", [(2, "a")])
    x.stage("t2", [(3, "b"), (1, "c")])
    with pytest.raises(Conflict) as caught:
        x.commit(s1.id, ["t1", "t2"], "k", advance_to=5)
    assert caught.value.detail == (
        "record 2 is at 1, before the session's time 2: the commit was refused and nothing of "
        "it applied"
    )
    assert (x.records_in, s1.time) == (0, 2)
    assert {t: [r for c in tx.chunks for r in c] for t, tx in x.transactions.items()} == {
        "t1": [(2, "a")],
        "t2": [(3, "b"), (1, "c")],
    }
    x.advance(s2.id, 1)
    with pytest.raises(Conflict) as backwards:
        x.commit(s2.id, ["t1", "t2"], "k", advance_to=0)
    assert backwards.value.detail == (
        "cannot advance the session from 1 to the earlier 0; nothing was committed"
    )
    assert x.records_in == 0
    # The key was not used up, and the session holding time 1 can commit them.
    assert x.commit(s2.id, ["t1", "t2"], "k", advance_to=3) == Ack(None, 3, [2], 3)
    x.close()
    await frontier_is(log, [])
    assert output(log) == {1: ["c"], 2: ["a"], 3: ["b"]}


async def test_staging_before_the_input_time_is_a_conflict(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    s1 = x.open_session()
    x.advance(s1.id, 2)
    with pytest.raises(Conflict) as caught:
        x.stage("t1", [(2, "a"), (1, "b")])
    assert caught.value.detail == (
        "record 1 is at 1, before input 'x''s time 2: it could never be committed; nothing was "
        "staged"
    )
    assert x.transactions == {}
    assert x.stage("t1", [(2, "a")]) == 1


async def test_max_staged_records_per_input(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start, max_staged_records_per_input=3)
    s1 = x.open_session()
    assert x.stage("t1", [(0, "a"), (0, "b")]) == 2
    with pytest.raises(LimitExceeded) as caught:
        x.stage("t2", [(0, "c"), (0, "d")])
    assert caught.value.detail == (
        "input 'x' would hold more than max_staged_records_per_input (3) staged records"
    )
    assert list(x.transactions) == ["t1"]
    assert x.stage("t2", [(0, "c")]) == 1
    assert x.abort("t1") == 2
    assert x.stage("t3", [(0, "d"), (0, "e")]) == 2
    x.commit(s1.id, ["t2", "t3"], "k")
    assert x.stage("t4", [(0, "f"), (0, "g"), (0, "h")]) == 3


class _RoundsJournal:
    """A journal whose sync rounds the test completes by hand; another producer appends."""

    def __init__(self) -> None:
        self.position = 5  # the caller's operation is the last written: position 5
        self.synced = 0
        self.rounds: list[Any] = []

    def wait(self) -> Any:
        if self.synced > self.position:
            return None
        self.rounds.append(asyncio.get_running_loop().create_future())
        return self.rounds[-1]


async def test_an_acknowledgement_waits_for_what_was_written_before_it_only() -> None:
    journal = _RoundsJournal()
    applied: list[int] = []
    core = SimpleNamespace(
        journal=journal, capabilities=SimpleNamespace(apply_durable=applied.append)
    )
    waiting = asyncio.ensure_future(ProducerInput.durable(SimpleNamespace(core=core)))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert len(journal.rounds) == 1 and not waiting.done()
    journal.position = 6  # another producer writes while the round runs
    journal.synced = 6  # the round made positions 0..5 durable
    journal.rounds[0].set_result(None)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    # Done after one round: position 6 is the other producer's to wait for.
    assert waiting.done() and len(journal.rounds) == 1
    assert applied == [6]
