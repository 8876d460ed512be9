"""Transactions in process: columnar staging, commits without a session, keys, discards.

The columnar batches here are :class:`FakeColumns`, the smallest thing that is
:class:`~service.app.inputs.Columns` (the API's Arrow one is tested in tests/api); what
matters is what the input does with them: bulk checks, exact messages, one batch per time.
"""

from __future__ import annotations

from typing import Any

import pytest

from operators.progress import Product
from service.app import (
    Conflict,
    Invalid,
    LimitExceeded,
    NotFound,
)
from service.app.errors import IdempotencyKeyReused
from service.app.inputs import Ack
from tests.service.support import Start, settle
from tests.service.test_inputs import PASS_PRODUCT, dataflow, frontier_is, output


class FakeColumns:
    """Columns over plain lists; counts the calls that turn records into Python objects."""

    def __init__(self, times: list[int], records: list[Any]) -> None:
        self.times = times
        self.rows = records
        self.least = min(times) if times else 0
        self.grouped = 0

    def __len__(self) -> int:
        return len(self.times)

    def time_at(self, index: int) -> int:
        return self.times[index]

    def first_before(self, time: int) -> int:
        return next(i for i, t in enumerate(self.times) if t < time)

    def by_time(self) -> list[tuple[int, list[Any]]]:
        self.grouped += 1
        groups: dict[int, list[Any]] = {}
        for time, record in sorted(zip(self.times, self.rows, strict=True), key=lambda p: p[0]):
            groups.setdefault(time, []).append(record)
        return list(groups.items())


# --------------------------------------------------------------------------- columnar staging


async def test_columns_are_checked_at_stage_and_converted_once_at_commit(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    body = FakeColumns([2, 0, 1, 0, 2], ["a", "b", "c", "d", "e"])
    assert x.stage("t1", body) == 5
    assert x.stage("t1", [(1, "f")]) == 6
    assert (body.grouped, x.staged(), x.staged_records) == (0, {"t1": 6}, 6)
    ack = x.commit(None, ["t1"], "k", advance_to=3)
    assert ack == Ack(None, None, [3], 6)
    assert body.grouped == 1
    await frontier_is(log, [3])
    # One batch per time, in staging order within a time, across the chunks.
    assert output(log) == {0: ["b", "d"], 1: ["c", "f"], 2: ["a", "e"]}
    assert (x.records_in, x.staged(), x.staged_records) == (6, {}, 0)


async def test_columns_before_the_input_time_name_the_first_offender(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    session = x.open_session()
    x.advance(session.id, 2)
    with pytest.raises(Conflict) as caught:
        x.stage("t1", FakeColumns([2, 5, 1, 0], ["a", "b", "c", "d"]))
    assert caught.value.detail == (
        "record 2 is at 1, before input 'x''s time 2: it could never be committed; nothing was "
        "staged"
    )
    assert (x.transactions, x.staged_records) == ({}, 0)


async def test_columns_on_a_product_input_are_invalid(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start, graph=PASS_PRODUCT)
    with pytest.raises(Invalid) as caught:
        x.stage("t1", FakeColumns([3], ["a"]))
    assert caught.value.detail == ("record 0: 3 is not a time of this input's domain (like [0, 0])")
    detail = "3 is not a time of this input's domain (like [0, 0])"
    assert caught.value.problems == [{"pointer": "/records/0/0", "detail": detail}]


async def test_columns_count_against_max_staged_records(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start, max_staged_records_per_input=4)
    assert x.stage("t1", FakeColumns([0, 0, 1], ["a", "b", "c"])) == 3
    with pytest.raises(LimitExceeded) as caught:
        x.stage("t2", FakeColumns([0, 0], ["d", "e"]))
    assert caught.value.detail == (
        "input 'x' would hold more than max_staged_records_per_input (4) staged records"
    )
    assert x.stage("t2", FakeColumns([0], ["d"])) == 1
    assert x.abort("t1") == 3
    assert (x.staged(), x.staged_records) == ({"t2": 1}, 1)


async def test_a_commit_refused_by_a_late_column_names_it_across_chunks(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    s1 = x.open_session(start=2)
    s0 = x.open_session()
    x.stage("t1", [(2, "a"), (3, "b")])
    body = FakeColumns([4, 1, 2], ["c", "d", "e"])
    x.stage("t2", body)
    with pytest.raises(Conflict) as caught:
        x.commit(s1.id, ["t1", "t2"], "k")
    assert caught.value.detail == (
        "record 3 is at 1, before the session's time 2: the commit was refused and nothing of "
        "it applied"
    )
    assert (body.grouped, x.records_in, x.staged()) == (0, 0, {"t1": 2, "t2": 3})
    # The key was not used up: the session at time 0 commits them.
    assert x.commit(s0.id, ["t1", "t2"], "k", advance_to=5) == Ack(None, 5, [2], 5)
    x.close_session(s1.id)
    await frontier_is(log, [5])
    assert output(log) == {1: ["d"], 2: ["a", "e"], 3: ["b"], 4: ["c"]}


async def test_an_empty_stage_creates_the_transaction_and_commits_nothing(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    assert x.stage("t1", FakeColumns([], [])) == 0
    assert x.stage("t2", []) == 0
    assert x.staged() == {"t1": 0, "t2": 0}
    assert x.commit(None, ["t1", "t2"], "k", advance_to=1) == Ack(None, None, [1], 0)
    await frontier_is(log, [1])
    assert output(log) == {}


# --------------------------------------------------------------------------- without a session


async def test_a_commit_without_a_session_is_at_the_input_time_and_advances_it(
    start: Start,
) -> None:
    _manager, _record, x, log = await dataflow(start)
    x.stage("t1", [(0, "a"), (2, "b")])
    assert x.commit(None, ["t1"], "k1", advance_to=3) == Ack(None, None, [3], 2)
    assert (x.time(), x.sessions) == (3, {})
    # An advance_to the input is already past is satisfied as it is.
    x.stage("t2", [(3, "c")])
    assert x.commit(None, ["t2"], "k2", advance_to=1) == Ack(None, None, [3], 1)
    # Only an advance (no transactions), under a key of its own.
    assert x.commit(None, [], "k3", advance_to=4) == Ack(None, None, [4], 0)
    await frontier_is(log, [4])
    assert output(log) == {0: ["a"], 2: ["b"], 3: ["c"]}


async def test_a_commit_without_a_session_refuses_records_before_the_input_time(
    start: Start,
) -> None:
    _manager, _record, x, _log = await dataflow(start)
    x.stage("t1", [(3, "a"), (1, "b")])
    session = x.open_session()
    x.advance(session.id, 2)
    x.close_session(session.id)
    with pytest.raises(Conflict) as caught:
        x.commit(None, ["t1"], "k", advance_to=5)
    assert caught.value.detail == (
        "record 1 is at 1, before input 'x''s time 2: the commit was refused and nothing of it "
        "applied"
    )
    assert (x.records_in, x.time(), x.staged()) == (0, 2, {"t1": 2})


async def test_an_open_session_holds_the_input_against_a_commit_without_one(
    start: Start,
) -> None:
    _manager, _record, x, log = await dataflow(start)
    held = x.open_session(start=1)
    x.stage("t1", [(1, "a"), (5, "b")])
    # The implicit session at the input's time (0) advances to 6 and closes; the input's
    # time follows its open sessions, and the one open session has not moved: it stays.
    assert x.commit(None, ["t1"], "k", advance_to=6) == Ack(None, None, [0], 2)
    await settle()
    assert list(log.frontier()) == [0]
    x.advance(held.id, 6)
    await frontier_is(log, [6])
    assert output(log) == {1: ["a"], 5: ["b"]}


async def test_a_commit_without_a_session_checks_advance_to(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start, graph=PASS_PRODUCT)
    session = x.open_session()
    x.advance(session.id, _product(1, 5))
    x.close_session(session.id)
    x.stage("t1", [(_product(1, 5), "a")])
    with pytest.raises(Conflict) as caught:
        x.commit(None, ["t1"], "k", advance_to=_product(2, 0))
    assert caught.value.detail == (
        "cannot advance the input 'x' from Product(outer=1, inner=5) to the earlier "
        "Product(outer=2, inner=0); nothing was committed"
    )
    with pytest.raises(Invalid) as invalid:
        x.commit(None, ["t1"], "k", advance_to=7)
    detail = "7 is not a time of this input's domain (like [0, 0])"
    assert invalid.value.problems == [{"pointer": "/advance_to", "detail": detail}]
    assert x.commit(None, ["t1"], "k", advance_to=_product(1, 6)).input_frontier == [_product(1, 6)]


def _product(outer: int, inner: int) -> Any:
    return Product(outer, inner)


# --------------------------------------------------------------------------- keys and discards


async def test_a_replay_after_the_implicit_session_is_gone_is_acknowledged_not_applied(
    start: Start,
) -> None:
    _manager, _record, x, log = await dataflow(start)
    x.stage("t1", [(0, "a"), (1, "b")])
    first = x.commit(None, ["t1"], "job-7", advance_to=2)
    assert first == Ack(None, None, [2], 2)
    # A driver restarted and replays: its tasks staged the same transaction anew (at times
    # the input is past now, so through JSON pairs the test can stage after advancing).
    x.stage("t1", [(2, "again")])
    assert x.commit(None, ["t1"], "job-7", advance_to=2) is first
    assert x.commit(None, ["t1"], "job-7", advance_to=9) is first
    assert (x.records_in, x.time(), x.staged()) == (2, 2, {"t1": 1})
    # With other transactions the key is refused with a type of its own.
    with pytest.raises(IdempotencyKeyReused) as reused:
        x.commit(None, ["t1", "t2"], "job-7")
    assert reused.value.detail == (
        "idempotency key 'job-7' was used to commit ['t1'], not ['t1', 't2']"
    )
    assert reused.value.extra == {"idempotency_key": "job-7", "committed": ["t1"]}
    await frontier_is(log, [2])
    assert output(log) == {0: ["a"], 1: ["b"]}


async def test_a_key_with_a_digest_answers_the_same_rows_and_refuses_other_rows(
    start: Start,
) -> None:
    """Under a key used before, equal digests answer the first ack whatever transactions
    are named (the leftovers still go), different ones are refused, nothing applied; the
    rows a producer dropped as late are counted once per key."""
    _manager, _record, x, log = await dataflow(start)
    x.stage("w.p0.a0", [(0, "a"), (1, "b")])
    first = x.commit(None, ["w.p0.a0"], "w", advance_to=2, digest="d1", dropped=3)
    assert first == Ack(None, None, [2], 2)
    assert (x.records_in, x.dropped_late, x.view().dropped_late) == (2, 3, 3)
    # A run again: another attempt staged other transactions (or none: its rows are late).
    x.stage("w.p0.a1", [(2, "again")])
    again = x.commit(None, ["w.p0.a1"], "w", 2, discard=["w.p0.a1"], digest="d1", dropped=3)
    assert again is first
    assert x.commit(None, [], "w", digest="d1", dropped=5) is first
    assert (x.records_in, x.dropped_late, x.staged()) == (2, 3, {})
    # Other rows under the key: refused, whatever the transactions; nothing is applied,
    # nothing discarded, nothing counted.
    x.stage("w.p0.a2", [(2, "other")])
    for names in (["w.p0.a0"], ["w.p0.a2"]):
        with pytest.raises(IdempotencyKeyReused) as reused:
            x.commit(None, names, "w", 3, discard=["w.p0.a2"], digest="d2", dropped=1)
        assert reused.value.detail == (
            "idempotency key 'w' committed other rows (digest 'd1') than this commit's "
            "(digest 'd2'): nothing was applied"
        )
        assert reused.value.extra == {
            "idempotency_key": "w",
            "committed": ["w.p0.a0"],
            "digest": "d1",
        }
    assert (x.records_in, x.dropped_late, x.staged(), x.time()) == (2, 3, {"w.p0.a2": 1}, 2)
    # Without a digest on one side, the transactions decide, as before.
    assert x.commit(None, ["w.p0.a0"], "w") is first
    with pytest.raises(IdempotencyKeyReused) as by_name:
        x.commit(None, ["w.p0.a2"], "w")
    assert (
        by_name.value.detail
        == "idempotency key 'w' was used to commit ['w.p0.a0'], not ['w.p0.a2']"
    )
    assert by_name.value.extra["digest"] == "d1"
    x.stage("u1", [(2, "u")])
    legacy = x.commit(None, ["u1"], "legacy", advance_to=3)
    assert x.commit(None, ["u1"], "legacy", digest="dx") is legacy
    with pytest.raises(IdempotencyKeyReused) as unknown:
        x.commit(None, ["u2"], "legacy", digest="dx")
    assert unknown.value.extra == {"idempotency_key": "legacy", "committed": ["u1"]}
    await frontier_is(log, [3])
    assert output(log) == {0: ["a"], 1: ["b"], 2: ["u"]}
    assert (x.records_in, x.dropped_late) == (3, 3)


async def test_a_key_is_the_inputs_not_the_sessions(start: Start) -> None:
    _manager, _record, x, _log = await dataflow(start)
    session = x.open_session()
    x.stage("t1", [(0, "a")])
    first = x.commit(session.id, ["t1"], "k", advance_to=1)
    x.close_session(session.id)
    # The session is gone: its commit's replay is still answered, with or without a session.
    assert x.commit(session.id, ["t1"], "k") is first
    assert x.commit(None, ["t1"], "k") is first
    with pytest.raises(NotFound) as missing:
        x.commit(session.id, ["t1"], "other-key")
    assert missing.value.detail == f"input 'x' has no open session {session.id!r}"


async def test_discard_aborts_the_leftovers_once_the_commit_is_done(start: Start) -> None:
    _manager, _record, x, log = await dataflow(start)
    x.stage("w.p0.a0", [(0, "lost")])
    x.stage("w.p0.a1", [(0, "a")])
    x.stage("w.p1.a0", [(0, "b")])
    x.stage("other", [(0, "kept")])
    names = ["w.p0.a0", "w.p0.a1", "w.p1.a0", "w.p1.a1"]
    ack = x.commit(None, ["w.p0.a1", "w.p1.a0"], "w", advance_to=1, discard=names)
    assert ack == Ack(None, None, [1], 2)
    assert (x.staged(), x.staged_records) == ({"other": 1}, 1)
    # A refused commit discards nothing.
    x.stage("w2.p0.a0", [(1, "c")])
    with pytest.raises(NotFound):
        x.commit(None, ["w2.p0.a1"], "w2", discard=["w2.p0.a0"])
    assert x.staged() == {"other": 1, "w2.p0.a0": 1}
    # A replay answered from its key discards what the replay staged.
    x.stage("w.p0.a1", [(1, "replayed")])
    assert x.commit(None, ["w.p0.a1", "w.p1.a0"], "w", discard=names) is ack
    assert x.staged() == {"other": 1, "w2.p0.a0": 1}
    await frontier_is(log, [1])
    assert output(log) == {0: ["a", "b"]}
