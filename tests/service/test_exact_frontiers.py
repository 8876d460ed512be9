"""An input's frontier is exactly the times its producers can still send (issue 22).

The input holds an antichain of capabilities, one per minimal time of its open sessions:
with product times, sessions at ``[2, 0]`` and ``[0, 2]`` leave ``[1, 0]``, which no session
can send, complete, where the input used to hold the meet ``[0, 0]`` until a session closed.
A real manager runs each case (its workers on the test's loop); the output's frontier is read
after the dataflow has stepped, and compared with the reference frontier of the progress core.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import pytest
import uvloop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.progress import Antichain, Product, Source, frontier, less_equal
from service.app import Conflict, DataflowManager, Settings
from tests.service.support import Start, until

PASS_PRODUCT = {
    "time": {"product": ["u64", "u64"]},
    "nodes": {"x": {"op": "input"}, "out": {"op": "output"}},
    "edges": [["x", "out"]],
}


def sort(times: Any) -> list[Hashable]:
    return sorted(times)


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_time_no_session_can_send_completes(start: Start, workers: int) -> None:
    manager = await start(workers)
    record = await manager.create("t", PASS_PRODUCT)
    x = manager.input("t", record.id, "x")
    log = manager.output("t", record.id, "out")
    a, b = x.open_session(), x.open_session()
    x.advance(a.id, Product(2, 0))
    ack = x.advance(b.id, Product(0, 2))
    assert ack.input_frontier == [Product(0, 2), Product(2, 0)]
    assert x.frontier() == x.applied_frontier() == [Product(0, 2), Product(2, 0)]
    await until(lambda: sort(log.frontier()) == [Product(0, 2), Product(2, 0)], "the output")
    assert not log.frontier().less_equal(Product(1, 0))  # complete: nothing can send it
    explained = manager.explain("t", record.id, "out", Product(1, 0))
    assert (explained.complete, explained.holders) == (True, [])
    # Closing a session frees what only it held.
    x.close_session(b.id)
    await until(lambda: sort(log.frontier()) == [Product(2, 0)], "the output at [2, 0]")
    assert not log.frontier().less_equal(Product(0, 5))


async def test_explain_names_each_session_holding_a_time(start: Start) -> None:
    manager = await start()
    record = await manager.create("t", PASS_PRODUCT)
    x = manager.input("t", record.id, "x")
    a, b = x.open_session(), x.open_session()
    x.advance(a.id, Product(2, 0))
    x.advance(b.id, Product(0, 2))
    x.stage("t1", [(Product(2, 1), "r")])
    log = manager.output("t", record.id, "out")
    await until(lambda: sort(log.frontier()) == [Product(0, 2), Product(2, 0)], "the output")
    held = manager.explain("t", record.id, "x:0", Product(3, 3))
    named = {
        (h.kind, h.session or h.transaction, h.time, h.count)
        for h in held.holders
        for h in [h, *(h.holders or ())]
    }
    assert named == {
        ("capability", None, Product(0, 2), 1),
        ("capability", None, Product(2, 0), 1),
        ("session", a.id, Product(2, 0), 1),
        ("session", b.id, Product(0, 2), 1),
        ("transaction", "t1", Product(0, 2), 1),
        ("transaction", "t1", Product(2, 0), 1),
    }


async def test_a_session_starts_at_or_after_a_time_of_the_frontier(start: Start) -> None:
    manager = await start()
    record = await manager.create("t", PASS_PRODUCT)
    x = manager.input("t", record.id, "x")
    a, b = x.open_session(), x.open_session()
    x.advance(a.id, Product(2, 0))
    x.advance(b.id, Product(0, 2))
    with pytest.raises(Conflict) as caught:
        x.open_session(start=Product(1, 1))
    assert caught.value.detail == (
        "cannot open a session at Product(outer=1, inner=1): input 'x' is already at "
        "[Product(outer=0, inner=2), Product(outer=2, inner=0)]"
    )
    with pytest.raises(Conflict) as caught:
        x.open_session()
    assert caught.value.detail == (
        "input 'x' is at several times [Product(outer=0, inner=2), Product(outer=2, inner=0)]: "
        "give the session's start (at or after one of them)"
    )
    c = x.open_session(start=Product(1, 2))
    assert c.time == Product(1, 2)
    # The input follows its sessions: once b closes, only the others' times are held.
    x.close_session(b.id)
    assert x.frontier() == [Product(1, 2), Product(2, 0)]
    x.close_session(c.id)
    assert x.frontier() == [Product(2, 0)]


# ----------------------------------------------------------------- against the reference

OPS = st.lists(
    st.tuples(
        st.sampled_from(["open", "advance", "close"]),
        st.integers(0, 3),
        st.tuples(st.integers(0, 4), st.integers(0, 4)),
    ),
    min_size=1,
    max_size=12,
)


def reference(own: list[Hashable], sessions: dict[str, Hashable]) -> list[Hashable]:
    """The progress core's reference frontier of the input's capabilities."""
    where = Source(1, 0)
    held = [(where, t) for t in [*own, *sessions.values()]]
    reached = frontier([], [], held).get(where, Antichain())
    return sorted(reached.elements())


async def scenario(workers: int, ops: list[tuple[str, int, tuple[int, int]]]) -> None:
    manager = DataflowManager(Settings(workers=workers))
    await manager.start()
    try:
        record = await manager.create("t", PASS_PRODUCT)
        x = manager.input("t", record.id, "x")
        log = manager.output("t", record.id, "out")
        own: list[Hashable] = [Product(0, 0)]  # the input's own times, as the model has them
        open_: dict[int, tuple[str, Hashable]] = {}
        for kind, which, (outer, inner) in ops:
            time = Product(outer, inner)
            if kind == "open" and len(open_) < 4 and which not in open_:
                if any(less_equal(t, time) for t in own):
                    open_[which] = (x.open_session(start=time).id, time)
                continue
            if which not in open_:
                continue
            session, at = open_[which]
            if kind == "advance" and less_equal(at, time):
                x.advance(session, time)
                open_[which] = (session, time)
            elif kind == "close":
                x.close_session(session)
                del open_[which]
            else:
                continue
            if open_:  # the input follows its open sessions; alone it stays where it is
                own = sorted(Antichain(t for _, t in open_.values()).elements())
            expected = reference(own, {s: t for s, t in open_.values()})
            assert x.frontier() == expected
            await until(lambda: sort(log.frontier()) == expected, f"the output at {expected}")  # noqa: B023
            for probe in (Product(o, i) for o in range(5) for i in range(5)):
                sendable = any(less_equal(t, probe) for t in expected)
                assert log.frontier().less_equal(probe) == sendable
    finally:
        await manager.stop()


@pytest.mark.parametrize("workers", [1, 2])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_frontier_is_the_reference_frontier_of_the_sessions(
    workers: int, ops: list[tuple[str, int, tuple[int, int]]]
) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario(workers, ops))
