"""Capture and replay (seed 002): a stream recorded as events and played back as a stream.

Every test captures or hand-writes histories, replays them into a separate dataflow and
checks, exactly: the multiset of ``(time, record)`` that arrived, the frontiers the replayed
probes went through (never back, never past a time before all its records arrived, and
through ``[5]`` when the captured inputs stopped at 5), and the final frontier. Captured
histories are checked against the rules of ``docs/events.md`` as well.

Tests with several workers run on one process and across processes
(``tests/runtime/fabrics.py``) where the capture and the replay can meet across processes:
in files (the capture on 3x1, the replay on 2x2, and back), or within each worker. Across
processes, each process checks its own probes and stamps what arrived and what its probes
passed with the system-wide monotonic clock, and the merged stamps show that no probe
passed a time before every worker, in any process, had that time's records
(:class:`StampedCheck`). Tests over in-memory links, or that feed a replay from the test
while it runs, stay in one process and say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import sys
import time as clock
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import pytest

from operators import Barrier, Worker, execute, run
from operators.capture import (
    CorruptEventLog,
    Event,
    EventLink,
    EventReader,
    FileEventReader,
    FileEventWriter,
    Messages,
    Progress,
    StreamEventReader,
    StreamEventWriter,
    decode_event,
    frame,
)
from operators.progress import Antichain, Product, less_equal
from tests.runtime.capture_procs import known
from tests.runtime.fabrics import Clusters, Layout, layouts
from tests.runtime.harness import ReorderingFabric, SafetyLog, within

ROOT = Path(__file__).resolve().parents[2]
PROCS = Path(__file__).resolve().parent / "capture_procs"

TIMES = range(4)
STOP = 5
"""The captured inputs send at times 0..3, then advance to STOP (and close, or not)."""


# ---------------------------------------------------------------------- helpers


def freeze(value: Any) -> Hashable:
    """A hashable form of a JSON-like record (lists become tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def check_history(events: Sequence[Event], minimum: Hashable = 0) -> list[Hashable]:
    """Check a captured history against the rules of ``docs/events.md``; return its frontier.

    It starts from ``{minimum}`` with count 1 and never begins with ``+1`` there; a progress
    event only adds times at or after a time held before it; messages only use held times;
    counts never go negative (a captured frontier holds each element at most once).
    """
    counts: Counter[Hashable] = Counter({minimum: 1})

    def held(time: Hashable) -> bool:
        return any(c > 0 and less_equal(t, time) for t, c in counts.items())

    for position, event in enumerate(events):
        if isinstance(event, Messages):
            assert event.records, f"event {position}: an empty messages event"
            assert held(event.time), f"event {position}: messages at {event.time!r} not held"
            continue
        assert event.changes, f"event {position}: an empty progress event"
        if position == 0:
            assert (minimum, 1) not in event.changes, "the history begins with +1 at the minimum"
        for time, diff in event.changes:
            if diff > 0:
                assert held(time), f"event {position}: +{diff} at {time!r}, not after a held time"
        for time, diff in event.changes:
            counts[time] += diff
        assert all(0 <= c <= 1 for c in counts.values()), (position, dict(counts))
    return sorted(t for t, c in counts.items() if c > 0)


class Gate:
    """A pusher in front of another: records every event, and can be sealed.

    Sealing cuts the capture off, as if its process had stopped: later events are dropped,
    so the history ends where it was (the inputs never close in it).
    """

    def __init__(self, inner: Any, minimum: Hashable = 0) -> None:
        self.inner = inner
        self.minimum = minimum
        self.events: list[Event] = []
        self.sealed = False

    def push(self, event: Event) -> None:
        if not self.sealed:
            self.events.append(event)
            self.inner.push(event)

    def flush(self) -> None:
        if not self.sealed:
            self.inner.flush()

    def frontier(self) -> list[Hashable]:
        return known.history_frontier(self.events, self.minimum)


class Counted:
    """A reader that counts what it hands out (to know when a replay has taken events)."""

    def __init__(self, reader: EventReader) -> None:
        self.reader = reader
        self.poll_interval = reader.poll_interval
        self.taken = 0

    def next(self) -> Event | None:
        event = self.reader.next()
        if event is not None:
            self.taken += 1
        return event

    def attach(self, wake: Callable[[], None]) -> None:
        self.reader.attach(wake)


async def eventually(condition: Callable[[], bool], what: str, seconds: float = 3.0) -> None:
    """Wait (letting the loop run) until ``condition()``; fail after ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


async def stop(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` if it still runs, and wait for it (a failed test leaves nothing behind)."""
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def settle() -> None:
    """Give running workers plenty of turns (to show that something does *not* happen)."""
    for _ in range(20):
        await asyncio.sleep(0.001)


def records_for(worker: int, time: int) -> list[str]:
    return [f"w{worker}t{time}r{i}" for i in range((worker + time) % 3 + 1)]


def sent(workers: int) -> Counter[tuple[Hashable, Hashable]]:
    return Counter((t, r) for w in range(workers) for t in TIMES for r in records_for(w, t))


def capture_work(
    pushers: Sequence[Any], *, close: bool = True, pace: bool = False, finish: bool = False
) -> tuple[Callable[[Worker], Awaitable[None]], list[Gate]]:
    """Each worker sends its records at 0..3 and advances to STOP; its stream, exchanged by
    record, is captured into ``pushers[index]`` (through a :class:`Gate`).

    With ``close=False`` the gate is sealed once the captured frontier is ``[STOP]``, before
    the inputs close. With ``pace`` each worker waits for its probe after every time and
    yields, so a concurrent replay sees the history grow. With ``finish`` (and ``close``)
    the worker closes its input and steps until its captured history is complete before
    returning (rather than leave that to ``execute``), so the pusher may be closed then.
    """
    gates = [Gate(p) for p in pushers]

    async def work(worker: Worker) -> None:
        gate = gates[worker.index]

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            shuffled = stream.exchange(lambda r: r)
            shuffled.capture_into(gate)
            return handle, shuffled.probe()

        handle, probe = worker.dataflow(build)
        for t in TIMES:
            handle.send_batch(records_for(worker.index, t))
            handle.advance_to(t + 1)
            if pace:
                await worker.step_while(lambda: probe.less_than(handle.time))
                await asyncio.sleep(0)
        handle.advance_to(STOP)
        await worker.step_while(lambda: probe.less_than(STOP))
        if not close:
            await worker.step_while(lambda: gate.frontier() != [STOP])
            gate.sealed = True
        elif finish:
            handle.close()
            await worker.step_while(lambda: gate.frontier() != [])

    return work, gates


class ReplayCheck:
    """Watches the replayed stream on every worker: the records, and the probes' frontiers.

    ``expected`` is the multiset of ``(time, frozen record)`` that should arrive. A batch is
    a violation if any worker's probe had already passed its time; an observed frontier is
    one if it went back, or passed a time before all that time's records had arrived.
    """

    def __init__(self, expected: Counter[tuple[Hashable, Hashable]]) -> None:
        self.expected = expected
        self.expected_per_time: Counter[Hashable] = Counter()
        for (time, _), n in expected.items():
            self.expected_per_time[time] += n
        self.arrived: Counter[tuple[Hashable, Hashable]] = Counter()
        self.arrived_per_time: Counter[Hashable] = Counter()
        self.probes: dict[int, Any] = {}
        self.log = SafetyLog()
        self.last: dict[int, Antichain[Hashable]] = {}
        self.seen: dict[int, list[list[Hashable]]] = {}

    def on_batch(self, worker: int, time: Hashable, records: list[Any]) -> None:
        self.observe()
        for index, probe in self.probes.items():
            self.log.batch_seen(f"probe {index}", worker, probe.frontier(), time, len(records))
        for record in records:
            self.arrived[(time, freeze(record))] += 1
        self.arrived_per_time[time] += len(records)

    def observe(self) -> None:
        for index, probe in self.probes.items():
            frontier = probe.frontier()
            if self.last.get(index) == frontier:
                continue
            self.log.frontier_seen("probe", index, self.last.get(index), frontier)
            self.last[index] = frontier
            self.seen.setdefault(index, []).append(sorted(frontier))
            for time, n in self.expected_per_time.items():
                if not frontier.less_equal(time) and self.arrived_per_time[time] != n:
                    self.log.violations.append(
                        f"probe {index} passed {time!r} ({frontier!r}) with "
                        f"{self.arrived_per_time[time]} of its {n} records arrived"
                    )

    def all_arrived(self) -> bool:
        return self.arrived == self.expected

    def frontiers(self) -> list[list[Hashable]]:
        return [sorted(self.probes[i].frontier()) for i in sorted(self.probes)]

    def work(
        self, make_readers: Callable[[], Sequence[EventReader]], scope_kind: str = "root"
    ) -> Callable[[Worker], Awaitable[list[Hashable]]]:
        """Replay ``make_readers()`` (called on each worker) and step until the probe is done.

        With ``scope_kind="iterative"`` the replay happens inside an iterative scope (its
        times are products) and the probe watches it there.
        """

        async def work(worker: Worker) -> list[Hashable]:
            def build(scope: Any) -> Any:
                inner = scope.iterative() if scope_kind == "iterative" else scope
                stream = inner.replay_into(make_readers())
                stream = stream.inspect_batch(lambda t, r: self.on_batch(worker.index, t, r))
                return stream.probe()

            probe = worker.dataflow(build)
            self.probes[worker.index] = probe
            self.observe()
            while not probe.done():
                await worker.step()
                self.observe()
            return sorted(probe.frontier())

        return work

    def assert_clean(self) -> None:
        assert self.log.violations == []
        assert self.arrived == self.expected


def event_paths(tmp_path: Path, k: int) -> list[Path]:
    return [tmp_path / f"stream{i}.events" for i in range(k)]


def read_all(path: Path) -> list[Event]:
    reader = FileEventReader(path)
    events: list[Event] = []
    while (event := reader.next()) is not None:
        events.append(event)
    return events


# ---------------------------------------------------------------------- the exact history


def test_captured_history_is_exact_and_matches_the_docs_example() -> None:
    """One process: it uses the blocking ``run`` entry point (the docs' example) and an
    in-memory link between its two runs."""
    # docs/events.md: "a" at time 0, "b" at time 1, then closed. Captured and replayed with
    # the blocking entry point, each in its own run.
    link = EventLink()

    async def capture(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.capture_into(link)
            return handle, stream.probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(["a"])
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))
        handle.send_batch(["b"])
        handle.close()

    run(capture)
    expected = [
        Messages(0, ["a"]),
        Progress([(0, -1), (1, 1)]),
        Messages(1, ["b"]),
        Progress([(1, -1)]),
    ]
    assert link.events == expected
    assert check_history(link.events) == []
    docs = (ROOT / "docs" / "events.md").read_text()
    example = docs.split("## Example", 1)[1].split("```", 2)[1]
    lines = [line for line in example.splitlines() if line.strip()]
    assert [decode_event(line.encode()) for line in lines] == expected

    async def replay(worker: Worker) -> tuple[list[Any], list[Hashable]]:
        seen: list[Any] = []

        def build(scope: Any) -> Any:
            stream = scope.replay_into([link.reader()])
            return stream.inspect_batch(lambda t, r: seen.append((t, list(r)))).probe()

        probe = worker.dataflow(build)
        await worker.step_while(lambda: not probe.done())
        return seen, sorted(probe.frontier())

    assert run(replay, workers=2) == [([(0, ["a"]), (1, ["b"])], []), ([], [])]


async def test_captured_history_of_inputs_stopped_at_5() -> None:
    link = EventLink()
    gate = Gate(link)

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.capture_into(gate)
            return handle, stream.probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch(["a", "b"])
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))
        handle.send_batch(["c"])
        handle.advance_to(5)
        await worker.step_while(lambda: probe.less_than(5))
        await worker.step_while(lambda: gate.frontier() != [5])
        gate.sealed = True  # the capture stops here: the input is never seen to close

    await within(execute(work))
    assert link.events == [
        Messages(0, ["a", "b"]),
        Progress([(0, -1), (1, 1)]),
        Messages(1, ["c"]),
        Progress([(1, -1), (5, 1)]),
    ]
    assert check_history(link.events) == [5]


async def capture_nothing(worker: Worker) -> list[Event]:
    link = EventLink()

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream.capture_into(link)
        return handle

    handle = worker.dataflow(build)
    handle.close()
    await worker.step_while(lambda: known.history_frontier(link.events) != [])
    return link.events


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_an_empty_stream_captures_one_retraction(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, capture_nothing)
    assert results == [[Progress([(0, -1)])]] * layout.peers


# ---------------------------------------------------------------------- k capture -> m replay

WORKER_PAIRS = [(1, 1), (2, 1), (2, 3), (3, 2)]


@pytest.mark.parametrize("close", [True, False], ids=["closed", "stopped-at-5"])
@pytest.mark.parametrize("medium", ["link", "file"])
@pytest.mark.parametrize(("k", "m"), WORKER_PAIRS, ids=[f"{k}to{m}" for k, m in WORKER_PAIRS])
async def test_capture_then_replay(
    tmp_path: Path, k: int, m: int, medium: str, close: bool
) -> None:
    """One process: links are queues in this process's memory, and the stopped-at-5 case
    watches the replay's probes from here while it holds. The file medium also runs on
    clusters: test_capture_then_replay_across_processes."""
    links = [EventLink() for _ in range(k)]
    paths = event_paths(tmp_path, k)
    writers = [FileEventWriter(p) for p in paths] if medium == "file" else []
    try:
        work, gates = capture_work(writers or links, close=close)
        await within(execute(work, workers=k))
    finally:
        for writer in writers:
            writer.close()
    histories = (
        [read_all(p) for p in paths] if medium == "file" else [link.events for link in links]
    )
    for gate, history in zip(gates, histories, strict=True):
        assert history == gate.events  # files round-trip every event exactly
        assert check_history(history) == ([] if close else [STOP])
    # Each capturing worker captured what the exchange sent it: together, everything.
    captured = Counter(
        (e.time, r) for h in histories for e in h if isinstance(e, Messages) for r in e.records
    )
    assert captured == sent(k)

    def make_readers() -> list[EventReader]:
        if medium == "file":
            return [FileEventReader(p, poll_interval=0.002) for p in paths]
        return [link.reader() for link in links]

    check = ReplayCheck(sent(k))
    replay = asyncio.ensure_future(execute(check.work(make_readers), workers=m))
    try:
        if not close:
            await eventually(
                lambda: check.all_arrived() and check.frontiers() == [[STOP]] * m,
                "the replay to reach [5]",
            )
            await settle()
            assert not replay.done()
            assert check.frontiers() == [[STOP]] * m  # held: the captured inputs never closed
            # Now let the captured streams finish (as if their inputs closed after all).
            for index in range(k):
                if medium == "file":
                    writer = FileEventWriter(paths[index])
                    writer.push(Progress([(STOP, -1)]))
                    writer.close()
                else:
                    links[index].push(Progress([(STOP, -1)]))
                    links[index].flush()
        finals = await within(replay)
    finally:
        await stop(replay)
    assert finals == [[]] * m
    check.assert_clean()
    for worker in range(m):
        seen = check.seen[worker]
        assert seen[0] == [0] and seen[-1] == []
        if not close:
            assert [STOP] in seen


@pytest.mark.parametrize("medium", ["link", "file"])
@pytest.mark.parametrize(("k", "m"), WORKER_PAIRS, ids=[f"{k}to{m}" for k, m in WORKER_PAIRS])
async def test_replay_runs_while_the_capture_runs(
    tmp_path: Path, k: int, m: int, medium: str
) -> None:
    """One process: the capture and the replay run at once on two sets of workers of
    this event loop, sharing links (in memory) or files; replaying a file another process
    is still writing is test_file_is_replayed_while_another_process_is_still_writing_it."""
    # The replay reads the histories as they grow (links wake it; files are polled), so its
    # probes move through intermediate frontiers: none may pass a time early.
    links = [EventLink() for _ in range(k)]
    paths = event_paths(tmp_path, k)
    writers = [FileEventWriter(p) for p in paths] if medium == "file" else []
    work, gates = capture_work(writers or links, pace=True)

    def make_readers() -> list[EventReader]:
        if medium == "file":
            return [FileEventReader(p, poll_interval=0.001) for p in paths]
        return [link.reader() for link in links]

    check = ReplayCheck(sent(k))
    try:
        _, finals = await within(
            asyncio.gather(execute(work, workers=k), execute(check.work(make_readers), m))
        )
    finally:
        for writer in writers:
            writer.close()
    assert finals == [[]] * m
    check.assert_clean()
    for gate in gates:
        assert check_history(gate.events) == []
    for worker in range(m):
        assert check.seen[worker][0] == [0] and check.seen[worker][-1] == []
        if medium == "link":  # woken by every flush: the replay followed the capture
            assert len(check.seen[worker]) > 2, check.seen


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("k", "m"), [(2, 3), (3, 2)], ids=["2to3", "3to2"])
async def test_capture_and_replay_with_late_interleaved_progress(seed: int, k: int, m: int) -> None:
    """One process: the capture and the replay share in-memory links, each on a
    ReorderingFabric of this process."""
    # Both dataflows run on fabrics that deliver progress late and interleaved.
    links = [EventLink() for _ in range(k)]
    work, gates = capture_work(links, pace=True)
    check = ReplayCheck(sent(k))
    rng = random.Random(seed)
    async with ReorderingFabric(k, rng) as capture_fabric, ReorderingFabric(m, rng) as fabric:
        _, finals = await within(
            asyncio.gather(
                execute(work, workers=k, fabric=capture_fabric),
                execute(check.work(lambda: [link.reader() for link in links]), m, fabric),
            ),
            seconds=5,
        )
    capture_fabric.check()
    fabric.check()
    assert finals == [[]] * m
    check.assert_clean()
    for gate in gates:
        assert check_history(gate.events) == []


# ---------------------------------------------------------------------- hand-written histories


def replay_in_background(
    readers: Sequence[EventReader], m: int, expected: Counter[tuple[Hashable, Hashable]]
) -> tuple[ReplayCheck, asyncio.Future[list[list[Hashable]]]]:
    check = ReplayCheck(expected)
    task = asyncio.ensure_future(execute(check.work(lambda: readers), workers=m))
    return check, task


async def test_replayed_frontier_holds_until_every_stream_releases_the_minimum() -> None:
    """One process: the test feeds the replay's readers event by event while it runs and
    reads its probes in between (both in this process's memory)."""
    a, b, c = EventLink(), EventLink(), EventLink()
    readers = [Counted(link.reader()) for link in (a, b, c)]
    expected = Counter({(0, "a0"): 1, (3, "b3"): 1, (0, "c0"): 1, (5, "a5"): 1, (6, "c6"): 1})
    check, replay = replay_in_background(readers, 2, expected)
    try:
        await eventually(lambda: len(check.probes) == 2, "the replay to start")
        assert check.frontiers() == [[0], [0]]
        # A and B retract 0 and hold 5; C has pushed nothing yet.
        a.push(Messages(0, ["a0"]))
        a.push(Progress([(0, -1), (5, 1)]))
        b.push(Messages(3, ["b3"]))
        b.push(Progress([(0, -1), (5, 1)]))
        a.flush()
        b.flush()
        await eventually(lambda: readers[0].taken == 2 and readers[1].taken == 2, "A and B")
        await settle()
        assert check.frontiers() == [[0], [0]]
        # C sends at 0 (still allowed) and only then retracts it.
        c.push(Messages(0, ["c0"]))
        c.flush()
        await eventually(lambda: readers[2].taken == 1, "C's records")
        await settle()
        assert check.frontiers() == [[0], [0]]
        c.push(Progress([(0, -1), (5, 1)]))
        c.flush()
        await eventually(lambda: check.frontiers() == [[5], [5]], "the frontier [5]")
        await settle()
        assert check.frontiers() == [[5], [5]]
        assert check.arrived == Counter({(0, "a0"): 1, (3, "b3"): 1, (0, "c0"): 1})
        # Every stream closes (C moves on to 6 first).
        a.push(Messages(5, ["a5"]))
        a.push(Progress([(5, -1)]))
        b.push(Progress([(5, -1)]))
        c.push(Progress([(5, -1), (6, 1)]))
        for link in (a, b, c):
            link.flush()
        await eventually(lambda: check.frontiers() == [[6], [6]], "the frontier [6]")
        c.push(Messages(6, ["c6"]))
        c.push(Progress([(6, -1)]))
        c.flush()
        assert await within(replay) == [[], []]
    finally:
        await stop(replay)
    check.assert_clean()
    assert check.seen == {0: [[0], [5], [6], []], 1: [[0], [5], [6], []]}


async def test_replayed_frontier_is_the_least_held_time_over_all_streams() -> None:
    """One process: the test feeds the replay's readers event by event while it runs and
    reads its probes in between (both in this process's memory)."""
    a, b, c = EventLink(), EventLink(), EventLink()
    check, replay = replay_in_background([link.reader() for link in (a, b, c)], 3, Counter())
    steps: list[tuple[EventLink, list[tuple[Hashable, int]], list[Hashable]]] = [
        (a, [(0, -1), (5, 1)], [0]),
        (b, [(0, -1), (3, 1)], [0]),
        (c, [(0, -1), (4, 1)], [3]),
        (b, [(3, -1), (7, 1)], [4]),
        (c, [(4, -1)], [5]),
        (a, [(5, -1)], [7]),
        (b, [(7, -1)], []),
    ]
    try:
        for link, changes, frontier in steps:
            link.push(Progress(changes))
            link.flush()
            await eventually(lambda f=frontier: check.frontiers() == [f] * 3, f"{frontier}")
            await settle()
            assert check.frontiers() == [frontier] * 3
        assert await within(replay) == [[], [], []]
    finally:
        await stop(replay)
    check.assert_clean()


async def test_workers_that_replay_nothing_follow_the_one_stream() -> None:
    """One process: the test feeds the replay's reader event by event while it runs and
    reads its probes in between (both in this process's memory)."""
    link = EventLink()
    reader = Counted(link.reader())
    expected = Counter({(0, "x"): 1, (5, "y"): 1})
    check, replay = replay_in_background([reader], 3, expected)
    try:
        await eventually(lambda: len(check.probes) == 3, "the replay to start")
        link.push(Messages(0, ["x"]))
        link.flush()
        await eventually(lambda: reader.taken == 1, "the record")
        await settle()
        assert check.frontiers() == [[0]] * 3
        link.push(Progress([(0, -1), (5, 1)]))
        link.flush()
        await eventually(lambda: check.frontiers() == [[5]] * 3, "the frontier [5]")
        link.push(Messages(5, ["y"]))
        link.push(Progress([(5, -1)]))
        link.flush()
        assert await within(replay) == [[]] * 3
    finally:
        await stop(replay)
    check.assert_clean()
    assert check.seen == {w: [[0], [5], []] for w in range(3)}


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_replaying_no_streams_is_complete_at_once(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, replay_files, StampedCheck(Counter()), [], False)
    assert [final for final, _ in results] == [[]] * layout.peers
    merge_checks([check for _, check in results]).assert_clean()


# ---------------------------------------------------------------------- two processes


def process_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


async def spawn(procs: list[asyncio.subprocess.Process], script: str, *args: str) -> Any:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROCS / script),
        *args,
        cwd=ROOT,
        env=process_env(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    procs.append(proc)
    return proc


async def reap(procs: list[asyncio.subprocess.Process]) -> None:
    """Kill whatever still runs, and wait for every process (and its pipes) to finish."""
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
        await asyncio.wait_for(proc.communicate(), 10)


async def finish(proc: Any, seconds: float = 30) -> list[str]:
    out, err = await within(proc.communicate(), seconds)
    assert proc.returncode == 0, err.decode()
    return out.decode().splitlines()


async def next_line(proc: Any, seconds: float = 30) -> str:
    line = await within(proc.stdout.readline(), seconds)
    assert line, "the process ended early"
    return line.decode().rstrip("\n")


@pytest.mark.parametrize(("k", "m"), [(1, 1), (2, 3)], ids=["1to1", "2to3"])
async def test_file_captured_by_one_process_is_replayed_by_another(
    tmp_path: Path, k: int, m: int
) -> None:
    pattern = str(tmp_path / "stream{}.events")
    paths = [pattern.format(i) for i in range(k)]
    procs: list[asyncio.subprocess.Process] = []
    try:
        capture = await spawn(procs, "capture_file.py", pattern, "--workers", str(k))
        assert await finish(capture) == ["done"]
        for path in paths:
            assert check_history(read_all(Path(path))) == []
        replay = await spawn(procs, "replay_file.py", *paths, "--workers", str(m))
        lines = [json.loads(line) for line in await finish(replay)]
    finally:
        await reap(procs)
    assert lines[-1] == {"result": {"records": known.expected(k), "frontiers": [[]] * m}}
    assert [line for line in lines if "violation" in line] == []
    frontiers = [line["frontier"] for line in lines if "frontier" in line]
    assert frontiers[0] == [0] and frontiers[-1] == []


async def test_file_is_replayed_while_another_process_is_still_writing_it(tmp_path: Path) -> None:
    # B starts first (the files do not exist yet), then A captures slowly, one time every
    # 20 ms, on 2 workers. At time 5 A stops with the frame of its records at 5 half written
    # and waits: B must have reached [5] by then and see nothing at 5 (a partial last frame
    # is "nothing yet"). Then A finishes and B replays everything, exactly.
    pattern = str(tmp_path / "stream{}.events")
    paths = [pattern.format(i) for i in range(2)]
    procs: list[asyncio.subprocess.Process] = []
    try:
        replay = await spawn(procs, "replay_file.py", *paths, "--workers", "2")
        seen = [json.loads(await next_line(replay))]
        assert seen == [{"frontier": [0]}]
        capture = await spawn(
            procs, "capture_file.py", pattern, "--workers", "2", "--interval", "0.02",
            "--pause-at", "5",
        )  # fmt: skip
        assert await next_line(capture) == "paused"
        while seen[-1] != {"frontier": [5]}:
            seen.append(json.loads(await next_line(replay)))
        await asyncio.sleep(0.1)  # B polls every 5 ms: plenty of looks at the partial frames
        for path in paths:
            complete = read_all(Path(path))
            assert Path(path).stat().st_size > len(b"".join(frame(e) for e in complete))
            assert check_history(complete) == [5]
        while True:
            try:
                line = await asyncio.wait_for(replay.stdout.readline(), 0.05)
            except TimeoutError:
                break
            seen.append(json.loads(line))
        assert capture.returncode is None  # A is still writing
        assert not [line for line in seen if line.get("time", -1) >= 5], seen
        capture.stdin.write(b"go\n")
        await capture.stdin.drain()
        assert await finish(capture) == ["done"]
        seen.extend(json.loads(line) for line in await finish(replay))
    finally:
        await reap(procs)
    assert seen[-1] == {"result": {"records": known.expected(2), "frontiers": [[], []]}}
    assert [line for line in seen if "violation" in line] == []
    frontiers = [line["frontier"] for line in seen if "frontier" in line]
    everything = [[t] for t in range(known.TIMES + 1)] + [[]]
    assert [f for f in everything if f in frontiers] == frontiers  # in order, each once
    assert frontiers[0] == [0] and [5] in frontiers and frontiers[-1] == []


# ---------------------------------------------------------------------- TCP


@pytest.mark.parametrize(("k", "m"), [(1, 1), (2, 3)], ids=["1to1", "2to3"])
async def test_capture_over_tcp_and_replay_from_the_connection(k: int, m: int) -> None:
    """One process: the capture's connections and the replay's readers are the two ends
    of sockets this test opens and accepts, held in its memory."""
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put((reader, writer))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clients: list[asyncio.StreamWriter] = []
    served: list[asyncio.StreamWriter] = []
    readers: list[StreamEventReader] = []
    try:
        for _ in range(k):
            _, client = await asyncio.open_connection("127.0.0.1", port)
            clients.append(client)
        for index in range(k):
            reader, writer = await within(accepted.get())
            served.append(writer)
            readers.append(StreamEventReader(reader, name=f"connection {index}"))
        pushers = [StreamEventWriter(client) for client in clients]
        work, gates = capture_work(pushers, pace=True)

        async def capture_then_hang_up() -> None:
            await execute(work, workers=k)
            for pusher in pushers:
                pusher.close()

        check = ReplayCheck(sent(k))
        _, finals = await within(
            asyncio.gather(capture_then_hang_up(), execute(check.work(lambda: readers), m))
        )
    finally:
        for stream_reader in readers:
            await stream_reader.close()
        for writer in clients + served:
            writer.close()
            await writer.wait_closed()
        server.close()
        await server.wait_closed()
    assert finals == [[]] * m
    check.assert_clean()
    for gate in gates:
        assert check_history(gate.events) == []


# ---------------------------------------------------------------------- nested scopes


async def capture_loop_to_file(worker: Worker, paths: list[str]) -> list[Event]:
    """Capture inside the loop (times ``Product(round, iteration)``) into ``paths[index]``."""
    writer = FileEventWriter(Path(paths[worker.index]))
    gate = Gate(writer, minimum=Product(0, 0))
    try:

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            inner = scope.iterative()
            loop_handle, loop = inner.feedback(Product(0, 1))
            body = stream.enter(inner).concat(loop).map(lambda x: x + 1)
            body.filter(lambda x: x < 4).connect_loop(loop_handle)
            body.capture_into(gate)
            return handle, body.filter(lambda x: x >= 4).leave().probe()

        handle, probe = worker.dataflow(build)
        if worker.index == 0:
            handle.send_batch([0, 2])
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))
        if worker.index == 0:
            handle.send_batch([1])
        handle.close()
        await worker.step_while(lambda: gate.frontier() != [])
    finally:
        writer.close()
    return gate.events


async def replay_loop_files(
    worker: Worker, check: StampedCheck, paths: list[str]
) -> tuple[list[Hashable], StampedCheck]:
    """Replay the files inside an iterative scope."""
    readers = [FileEventReader(Path(p)) for p in paths]
    return await check.work(lambda: readers, "iterative")(worker), check


LOOP_PAIRS = [(Layout(1, 1), Layout(1, 1)), (Layout(1, 2), Layout(1, 3))]
LOOP_PAIRS += [(Layout(3, 1), Layout(2, 2))]


@pytest.mark.parametrize(
    ("capture", "replay"), LOOP_PAIRS, ids=[f"{a}to{b}" for a, b in LOOP_PAIRS]
)
async def test_capture_in_an_iterative_scope_round_trips_product_times(
    tmp_path: Path, capture: Layout, replay: Layout, clusters: Clusters
) -> None:
    # Inside the loop each value is incremented until it reaches 4: captured there, the
    # stream's times are Product(round, iteration). Worker 0 sends 0 and 2 at time 0, and 1
    # at time 1; the other workers capture only progress.
    paths = [str(p) for p in event_paths(tmp_path, capture.peers)]
    histories = await clusters.run(capture, capture_loop_to_file, paths)
    expected = Counter(
        {
            (Product(0, 0), 1): 1,
            (Product(0, 0), 3): 1,
            (Product(0, 1), 2): 1,
            (Product(0, 1), 4): 1,
            (Product(0, 2), 3): 1,
            (Product(0, 3), 4): 1,
            (Product(1, 0), 2): 1,
            (Product(1, 1), 3): 1,
            (Product(1, 2), 4): 1,
        }
    )
    for history, path in zip(histories, paths, strict=True):
        events = read_all(Path(path))
        assert events == history  # Product times (and everything else) round-trip
        assert all(type(e.time) is Product for e in events if isinstance(e, Messages))
        assert all(
            type(t) is Product for e in events if isinstance(e, Progress) for t, _ in e.changes
        )
        assert check_history(events, Product(0, 0)) == []
    assert (
        Counter(
            (e.time, r) for h in histories for e in h if isinstance(e, Messages) for r in e.records
        )
        == expected
    )

    results = await clusters.run(replay, replay_loop_files, StampedCheck(expected), paths)
    assert [final for final, _ in results] == [[]] * replay.peers
    check = merge_checks([check for _, check in results])
    check.assert_clean()
    for worker in range(replay.peers):
        assert check.seen[worker][0] == [Product(0, 0)] and check.seen[worker][-1] == []


async def test_replay_into_a_nested_scope_holds_product_frontiers() -> None:
    """One process: the test feeds the replay's link event by event while it runs and
    reads its probes in between (both in this process's memory)."""
    # Hand-written history in Product times, replayed inside an iterative scope and left:
    # the inner probe holds (1, 0) and (0, 2) together; outside, the frontier is [0] until
    # round 0 is released, then [1].
    link = EventLink()
    expected = Counter({(Product(0, 1), "x"): 1, (Product(1, 0), "y"): 1})
    check = ReplayCheck(expected)
    outer: dict[int, Any] = {}

    async def work(worker: Worker) -> list[Hashable]:
        def build(scope: Any) -> Any:
            inner = scope.iterative()
            stream = inner.replay_into([link.reader()])
            stream = stream.inspect_batch(lambda t, r: check.on_batch(worker.index, t, r))
            return stream.probe(), stream.leave().probe()

        probe, left = worker.dataflow(build)
        check.probes[worker.index] = probe
        outer[worker.index] = left
        while not probe.done():
            await worker.step()
            check.observe()
        return sorted(left.frontier())

    replay = asyncio.ensure_future(execute(work, workers=2))
    try:
        await eventually(lambda: len(outer) == 2, "the replay to start")
        link.push(Messages(Product(0, 1), ["x"]))
        link.push(Progress([(Product(0, 0), -1), (Product(0, 2), 1), (Product(1, 0), 1)]))
        link.flush()
        await eventually(
            lambda: check.frontiers() == [[Product(0, 2), Product(1, 0)]] * 2, "inner frontier"
        )
        await settle()
        assert [sorted(p.frontier()) for p in outer.values()] == [[0], [0]]
        link.push(Progress([(Product(0, 2), -1)]))
        link.flush()
        await eventually(lambda: check.frontiers() == [[Product(1, 0)]] * 2, "round 0 done")
        await eventually(
            lambda: [sorted(p.frontier()) for p in outer.values()] == [[1], [1]], "[1]"
        )
        link.push(Messages(Product(1, 0), ["y"]))
        link.push(Progress([(Product(1, 0), -1)]))
        link.flush()
        assert await within(replay) == [[], []]
    finally:
        await stop(replay)
    check.assert_clean()


# ---------------------------------------------------------------------- corruption


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_a_corrupt_frame_ends_the_replay_with_its_offset(
    tmp_path: Path, layout: Layout, clusters: Clusters
) -> None:
    path = tmp_path / "bad.events"
    good = frame(Messages(0, ["a"])) + frame(Progress([(0, -1), (1, 1)]))
    path.write_bytes(good + b"\x05\x00\x00\x00{nope")
    check = StampedCheck(Counter({(0, "a"): 1}))
    with pytest.raises(CorruptEventLog, match=f"corrupt frame at offset {len(good)}: ") as raised:
        await clusters.run(layout, replay_files, check, [str(path)], False)
    assert raised.value.offset == len(good)


# ---------------------------------------------------------------------- same workers


async def capture_and_replay_here(worker: Worker) -> tuple[list[Any], list[list[Hashable]]]:
    # Worker i replays stream i (``replay_into`` hands worker i the streams i, i + peers,
    # ...), which it captures itself: each worker's links are its own.
    links = [EventLink() for _ in range(worker.peers)]
    seen: list[Any] = []
    frontiers: list[list[Hashable]] = []

    def capture(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream.capture_into(links[scope.index])
        return handle

    def replay(scope: Any) -> Any:
        stream = scope.replay_into([link.reader() for link in links])
        return stream.inspect_batch(lambda t, r: seen.append((t, list(r)))).probe()

    handle = worker.dataflow(capture)
    probe = worker.dataflow(replay)
    for t in range(3):
        handle.send_batch([f"{worker.index}-{t}"])
        handle.advance_to(t + 1)
        await worker.step_while(lambda: probe.less_than(handle.time))
        frontiers.append(sorted(probe.frontier()))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return seen, frontiers


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_capture_and_replay_in_two_dataflows_of_the_same_workers(
    layout: Layout, clusters: Clusters
) -> None:
    # Dataflow 0 captures into links that dataflow 1, on the same workers, replays: each
    # flush wakes the replay from inside the capturing dataflow's run.
    results = await clusters.run(layout, capture_and_replay_here)
    for index, (seen, frontiers) in enumerate(results):
        assert seen == [(t, [f"{index}-{t}"]) for t in range(3)]
        assert frontiers == [[1], [2], [3]]


# ---------------------------------------------------------------------- across processes
#
# The capture and the replay run on clusters of processes (``tests/runtime/fabrics.py``)
# and meet in files: what one cluster's workers write, another's read. Links
# (``EventLink``) are queues in one process's memory, so the tests that capture into links,
# or feed a replay from the test itself while it runs, stay in one process.

_ORDER = itertools.count()


def stamp() -> tuple[int, int]:
    """The system-wide monotonic clock (every process of this machine reads the same), then
    the order within this process: a probe passes a time only after every record at that
    time reached its inspect, in whichever process, so it is stamped later."""
    return clock.monotonic_ns(), next(_ORDER)


class StampedCheck(ReplayCheck):
    """:class:`ReplayCheck` for one process of a cluster; :func:`merge_checks` joins them.

    A process sees only its own workers' arrivals and probes: it records each batch and
    each frontier its probes go through with a :func:`stamp`, and flags a batch at a time
    one of its own probes had passed. Whether a probe passed a time before every worker (in
    any process) received that time's records is checked on the merged stamps. It pickles
    without its probes, once the run is over (the reply carries it back).
    """

    def __init__(self, expected: Counter[tuple[Hashable, Hashable]]) -> None:
        super().__init__(expected)
        self.arrivals: list[tuple[tuple[int, int], Hashable, int]] = []
        self.passes: list[tuple[tuple[int, int], int, Antichain[Hashable]]] = []

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "probes": {}}

    def on_batch(self, worker: int, time: Hashable, records: list[Any]) -> None:
        self.observe()
        for index, probe in self.probes.items():
            self.log.batch_seen(f"probe {index}", worker, probe.frontier(), time, len(records))
        for record in records:
            self.arrived[(time, freeze(record))] += 1
        self.arrivals.append((stamp(), time, len(records)))

    def observe(self) -> None:
        for index, probe in self.probes.items():
            frontier = probe.frontier()
            if self.last.get(index) == frontier:
                continue
            self.log.frontier_seen("probe", index, self.last.get(index), frontier)
            self.last[index] = frontier
            self.seen.setdefault(index, []).append(sorted(frontier))
            self.passes.append((stamp(), index, frontier))


def merge_checks(checks: list[StampedCheck]) -> ReplayCheck:
    """The processes' checks as one (each process's once), its early passes added."""
    unique = list({id(check): check for check in checks}.values())
    merged = ReplayCheck(unique[0].expected)
    arrivals = sorted(a for check in unique for a in check.arrivals)
    for check in unique:
        merged.arrived.update(check.arrived)
        merged.log.violations.extend(check.log.violations)
        merged.seen.update(check.seen)
        for when, index, frontier in check.passes:
            for time, n in merged.expected_per_time.items():
                before = sum(k for at, t, k in arrivals if t == time and at < when)
                if not frontier.less_equal(time) and before != n:
                    merged.log.violations.append(
                        f"probe {index} passed {time!r} ({frontier!r}) with {before} of its "
                        f"{n} records arrived"
                    )
    return merged


async def capture_to_file(worker: Worker, paths: list[str], close: bool) -> list[Event]:
    """Capture this worker's exchanged stream into ``paths[index]``; the events written."""
    writer = FileEventWriter(Path(paths[worker.index]))
    try:
        pushers = [writer if i == worker.index else None for i in range(worker.peers)]
        work, gates = capture_work(pushers, close=close, finish=True)
        await work(worker)
    finally:
        writer.close()
    return gates[worker.index].events


async def replay_files(
    worker: Worker, check: StampedCheck, paths: list[str], close_at_stop: bool
) -> tuple[list[Hashable], StampedCheck]:
    """Replay the files; with ``close_at_stop`` (their inputs never closed), once every
    worker's probe has reached ``[STOP]`` (a barrier), worker 0 appends the end of every
    stream, as if the captured inputs had closed after all."""
    readers = [FileEventReader(Path(p), poll_interval=0.002) for p in paths]
    if close_at_stop:
        barrier = Barrier(worker)

        async def release() -> None:
            while check.probes.get(worker.index) is None or check.last.get(
                worker.index
            ) != Antichain([STOP]):
                await asyncio.sleep(0.001)
            await barrier.wait()
            if worker.index == 0:
                for path in paths:
                    writer = FileEventWriter(Path(path))
                    writer.push(Progress([(STOP, -1)]))
                    writer.close()
            barrier.close()

        releasing = asyncio.ensure_future(release())
    final = await check.work(lambda: readers)(worker)
    if close_at_stop:
        await releasing
    return final, check


CLUSTER_PAIRS = [(Layout(3, 1), Layout(2, 2)), (Layout(2, 2), Layout(3, 1))]


@pytest.mark.parametrize("close", [True, False], ids=["closed", "stopped-at-5"])
@pytest.mark.parametrize(
    ("capture", "replay"), CLUSTER_PAIRS, ids=[f"{a}to{b}" for a, b in CLUSTER_PAIRS]
)
async def test_capture_then_replay_across_processes(
    tmp_path: Path, capture: Layout, replay: Layout, close: bool, clusters: Clusters
) -> None:
    """test_capture_then_replay's file medium with both dataflows on clusters."""
    k, m = capture.peers, replay.peers
    paths = [str(p) for p in event_paths(tmp_path, k)]
    histories = await clusters.run(capture, capture_to_file, paths, close)
    for path, history in zip(paths, histories, strict=True):
        assert read_all(Path(path)) == history  # files round-trip every event exactly
        assert check_history(history) == ([] if close else [STOP])
    captured = Counter(
        (e.time, r) for h in histories for e in h if isinstance(e, Messages) for r in e.records
    )
    assert captured == sent(k)
    results = await clusters.run(replay, replay_files, StampedCheck(sent(k)), paths, not close)
    assert [final for final, _ in results] == [[]] * m
    check = merge_checks([check for _, check in results])
    check.assert_clean()
    for worker in range(m):
        seen = check.seen[worker]
        assert seen[0] == [0] and seen[-1] == []
        if not close:
            assert [STOP] in seen
