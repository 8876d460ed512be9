"""Fused chains in the library: consecutive map/filter/flat_map run as one operator.

A chain gives exactly what the same stages give as separate operators (built here with
``map_batches``, which never fuses), on one and two workers; every function runs once per
record whoever reads which stream; a stream read twice ends its chain; a chain nobody reads
still runs; the chain's operator comes before its readers in the scope.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from time import perf_counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Stream, Worker, execute, fused, run
from operators.fused import BATCH, FILTER, MAP, Chained, Pace, Stage, _through_slices, compose
from operators.progress import Product
from operators.runtime import Subgraph
from tests.runtime.harness import within


def names(worker: Worker) -> list[str]:
    """The operators of the worker's first dataflow, in index order."""
    root = worker._dataflows[0]
    assert isinstance(root, Subgraph)
    return [child.operator.name for child in root._children[1:]]


def double(r: tuple[int, int]) -> tuple[int, int]:
    return (r[0], r[1] * 2)


def even_key(r: tuple[int, int]) -> bool:
    return r[0] % 2 == 0


def twice(r: tuple[int, int]) -> list[tuple[int, int]]:
    return [r, (r[0] + 1, r[1])] if r[1] % 3 else []


def key(r: tuple[int, int]) -> int:
    return r[0]


RECORDS = [[(i % 7, i) for i in range(t * 50, t * 50 + 50)] for t in range(4)]


def expected_counts() -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for t, batch in enumerate(RECORDS):
        after = [o for r in batch if even_key(d := double(r)) for o in twice(d)]
        out[t] = dict(Counter(map(key, after)))
    return out


def w1_like(stream: Stream, fused: bool) -> Stream:
    if fused:
        return stream.map(double).filter(even_key).flat_map(twice)
    return (
        stream.map_batches(lambda rs: list(map(double, rs)))
        .map_batches(lambda rs: list(filter(even_key, rs)))
        .map_batches(lambda rs: [o for r in rs for o in twice(r)])
    )


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("fused", [True, False])
async def test_a_chain_gives_what_separate_operators_give(workers: int, fused: bool) -> None:
    counted: dict[int, dict[int, int]] = {}
    structure: list[list[str]] = []

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            counts = w1_like(stream, fused).count_by(key)
            seen = counts.inspect_batch(lambda t, rs: counted.setdefault(t, {}).update(rs))
            return handle, seen.probe()

        handle, probe = worker.dataflow(build)
        structure.append(names(worker))
        for t, batch in enumerate(RECORDS):
            handle.send_batch([r for r in batch if r[1] % workers == worker.index])
            handle.advance_to(t + 1)
        handle.close()
        await worker.step_while(lambda: not probe.done())

    await within(execute(work, workers=workers))
    assert counted == expected_counts()
    middle = ["Map -> Filter -> FlatMap"] if fused else ["MapBatches"] * 3
    assert structure == [["Input", *middle, "CountBy", "InspectBatch"]] * workers


async def test_a_stream_read_twice_ends_its_chain_and_each_function_runs_once() -> None:
    calls: Counter[str] = Counter()
    seen: dict[str, list[int]] = {"odd": [], "negated": []}

    def counting(label: str, fn: Callable[[int], Any]) -> Callable[[int], Any]:
        def call(x: int) -> Any:
            calls[label] += 1
            return fn(x)

        return call

    async def work(worker: Worker) -> list[str]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            tripled = stream.map(counting("triple", lambda x: x * 3))
            odd = tripled.filter(counting("odd", lambda x: x % 2 == 1))
            negated = tripled.map(counting("negate", lambda x: -x)).filter(lambda x: x < -3)
            odd.inspect_batch(lambda _t, rs: seen["odd"].extend(rs))
            negated.inspect_batch(lambda _t, rs: seen["negated"].extend(rs))
            return handle, [odd.probe(), negated.probe()]

        handle, probes = worker.dataflow(build)
        structure = names(worker)
        handle.send_batch([1, 2, 3, 4])
        handle.close()
        await worker.step_while(lambda: not all(p.done() for p in probes))
        return structure

    structure = await within(execute(work, workers=1))
    # ``tripled`` has two readers: it is its own operator; each reader starts a chain.
    assert structure == [
        ["Input", "Map", "Filter", "Map -> Filter", "InspectBatch", "InspectBatch"]
    ]
    assert seen == {"odd": [3, 9], "negated": [-6, -9, -12]}
    assert calls == {"triple": 4, "odd": 4, "negate": 4}


async def test_a_stream_needed_early_is_a_tap_of_its_chain() -> None:
    """A probe builds the chain at once; a reader of a stream inside it comes later."""
    calls: Counter[str] = Counter()
    seen: list[int] = []

    def square(x: int) -> int:
        calls["square"] += 1
        return x * x

    async def work(worker: Worker) -> list[str]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            squared = stream.map(square)
            big = squared.filter(lambda x: x > 4)
            probe = big.probe()  # builds Map -> Filter now: ``squared`` had one reader
            assert isinstance(squared, Chained) and squared.built
            squared.inspect_batch(lambda _t, rs: seen.extend(rs))  # reads the map's tap
            return handle, probe, big

        handle, probe, big = worker.dataflow(build)
        structure = names(worker)
        handle.send_batch([1, 2, 3])
        handle.advance_to(1)
        await worker.step_while(lambda: probe.less_than(1))
        assert big.source.port == 1  # the chain's second tap
        handle.close()
        await worker.step_while(lambda: not probe.done())
        return structure

    assert await within(execute(work, workers=1)) == [["Input", "Map -> Filter", "InspectBatch"]]
    assert seen == [1, 4, 9]
    assert calls == {"square": 3}


async def test_a_chain_nobody_reads_still_runs() -> None:
    touched: list[int] = []

    async def work(worker: Worker) -> list[str]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.map(lambda x: x + 1).filter(lambda x: x > 2).map(touched.append)
            return handle

        handle = worker.dataflow(build)
        handle.send_batch([1, 2, 3])
        handle.close()
        return names(worker)

    assert await within(execute(work, workers=1)) == [["Input", "Map -> Filter -> Map"]]
    assert touched == [3, 4]


async def test_the_chain_operator_comes_before_its_reader() -> None:
    async def work(worker: Worker) -> tuple[list[str], list[tuple[int, int]]]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.map(double).filter(even_key).count_by(key)
            return handle

        worker.dataflow(build).close()
        root = worker._dataflows[0]
        assert isinstance(root, Subgraph)
        return names(worker), sorted((s.node, t.node) for s, t in root.edges())

    # Input 1 -> the chain 2 -> CountBy 3: the scope's order is the data's.
    expected = (["Input", "Map -> Filter", "CountBy"], [(1, 2), (2, 3)])
    assert await within(execute(work, workers=1)) == [expected]


async def test_an_exception_in_a_fused_stage_fails_the_run() -> None:
    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.map(lambda x: x - 2).filter(lambda x: 1 / x > 0).inspect(lambda _r: None)
            return handle

        handle = worker.dataflow(build)
        handle.send_batch([1, 2, 3])
        handle.close()

    with pytest.raises(ZeroDivisionError):
        await within(execute(work, workers=1))


def test_a_chain_in_a_loop_gives_the_loop_s_results() -> None:
    """W3's shape: the body is read twice (the loop and the exit), each a chain of one."""

    async def work(worker: Worker) -> tuple[list[int], list[str]]:
        left: list[int] = []

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            inner = scope.iterative()
            loop_handle, loop = inner.feedback(Product(0, 1))
            body = stream.enter(inner).concat(loop).map(lambda x: x + 3)
            body.filter(lambda x: x < 10).map(lambda x: x * 1).connect_loop(loop_handle)
            done = body.filter(lambda x: x >= 10).leave()
            return handle, done.inspect_batch(lambda _t, rs: left.extend(rs)).probe(), inner

        handle, probe, inner = worker.dataflow(build)
        handle.send_batch([0, 1, 2, 11])
        handle.close()
        await worker.step_while(lambda: not probe.done())
        inside = [child.operator.name for child in inner.builder.subgraph._children[1:]]
        return sorted(left), inside

    inside = ["Feedback", "Concat", "Map", "Filter -> Map", "Filter"]
    assert run(work) == [([10, 11, 12, 14], inside)]


@pytest.mark.parametrize("via", ["map", "map_batches", "evaluate"])
@pytest.mark.parametrize(("per_run", "taken"), [(None, [6]), (3, [4, 2])])
async def test_a_run_takes_so_many_records_then_lets_its_readers_run(
    per_run: int | None, taken: list[int], via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain's operator, and the one-function operators too (``evaluate`` slices)."""
    if per_run is not None:
        monkeypatch.setattr(fused, "RUN_RECORDS", per_run)
    events: list[tuple[str, Any]] = []

    def mapped(x: int) -> int:
        events.append(("map", x))
        return x

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            if via == "map":
                made = stream.map(mapped)
            else:
                made = getattr(stream, via)(lambda rs: [mapped(x) for x in rs])
            read = made.inspect_batch(lambda _t, rs: events.append(("read", rs)))
            return handle, read.probe()

        handle, probe = worker.dataflow(build)
        for t in range(3):  # three batches wait before the first step
            handle.send_batch([2 * t, 2 * t + 1])
            handle.advance_to(t + 1)
        handle.close()
        await worker.step_while(lambda: not probe.done())

    await within(execute(work, workers=1))
    expected: list[tuple[str, Any]] = []
    start = 0
    for n in taken:  # a run maps ``n`` records, then the reader reads their batches
        expected += [("map", x) for x in range(start, start + n)]
        expected += [("read", [x, x + 1]) for x in range(start, start + n, 2)]
        start += n
    assert events == expected


# --------------------------------------------------------------------------- the logic


def test_compose_runs_the_stages_lazily_in_order() -> None:
    order: list[str] = []

    def plus(x: int) -> int:
        order.append(f"plus {x}")
        return x + 1

    def odd(x: int) -> bool:
        order.append(f"odd {x}")
        return x % 2 == 1

    segment = compose([Stage(MAP, plus, "Map"), Stage(FILTER, odd, "Filter")])
    assert segment([0, 1, 2]) == [1, 3]
    # Record by record through the chain (no intermediate list).
    assert order == ["plus 0", "odd 1", "plus 1", "odd 2", "plus 2", "odd 3"]


def test_slices_through_a_chain_give_each_tap_its_part() -> None:
    halve = Stage(BATCH, lambda rs: [r // 2 for r in rs], "Halve")
    positive = Stage(BATCH, lambda rs: [r for r in rs if r > 0], "Positive")
    taps: list[Any] = [None, None]
    plan = [(compose([halve]), taps[0]), (compose([positive]), taps[1])]
    records = list(range(10))
    # A deadline already passed: one slice, of one record (the pace is unknown).
    assert _through_slices(plan, records, Pace(), 0.0) == ([[0], []], 1)
    # Time enough: slices of 1, 2, 4, ... cover the batch; each tap gets all of its part.
    outs, done = _through_slices(plan, records, Pace(), perf_counter() + 3600)
    assert (outs, done) == ([[0, 0, 1, 1, 2, 2, 3, 3, 4, 4], [1, 1, 2, 2, 3, 3, 4, 4]], 10)
    # A known pace that fits the batch: one call on the list itself.
    fast = Pace()
    fast.per_second = 1e12
    assert _through_slices(plan, records, fast, perf_counter() + 3600)[1] == 10


# --------------------------------------------------------------------------- property

STAGES = st.lists(
    st.one_of(
        st.tuples(st.just("map"), st.integers(-3, 3), st.integers(-5, 5)),
        st.tuples(st.just("filter"), st.integers(2, 4), st.integers(0, 3)),
        st.tuples(st.just("flat_map"), st.integers(0, 2), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=5,
)


def stage_fn(kind: str, a: int, b: int) -> Callable[[int], Any]:
    if kind == "map":
        return lambda x: x * a + b
    if kind == "filter":
        return lambda x: x % a == b
    return lambda x: [x + i for i in range(a)] if x % 2 == b else []


def plain_streams(stages: list[tuple[str, int, int]], records: list[int]) -> list[list[int]]:
    """The records of the stream after each stage, by plain Python."""
    out = []
    for kind, a, b in stages:
        fn = stage_fn(kind, a, b)
        if kind == "map":
            records = [fn(x) for x in records]
        elif kind == "filter":
            records = [x for x in records if fn(x)]
        else:
            records = [y for x in records for y in fn(x)]
        out.append(records)
    return out


def build_stages(stream: Stream, stages: list[tuple[str, int, int]]) -> list[Stream]:
    streams = []
    for kind, a, b in stages:
        stream = getattr(stream, kind)(stage_fn(kind, a, b))
        streams.append(stream)
    return streams


@settings(max_examples=40, deadline=None)
@given(
    stages=STAGES,
    read=st.sets(st.integers(0, 4)),
    early=st.one_of(st.none(), st.integers(0, 4)),
    workers=st.sampled_from([1, 2]),
    batches=st.lists(st.lists(st.integers(-20, 20), max_size=8), min_size=1, max_size=3),
)
def test_any_chain_with_any_readers_gives_each_stream_s_records(
    stages: list[tuple[str, int, int]],
    read: set[int],
    early: int | None,
    workers: int,
    batches: list[list[int]],
) -> None:
    """Readers of any streams of a chain (one probed early, before the others read) each get
    exactly that stream's records, per time, merged over the workers."""
    last = len(stages) - 1
    read = {i for i in read if i <= last} | {last}
    seen: dict[int, dict[Hashable, list[int]]] = {i: {} for i in read}

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            streams = build_stages(stream, stages)
            probes = []
            if early is not None and early <= last:
                probes.append(streams[early].probe())
            for i in sorted(read):
                sink = seen[i]
                streams[i].inspect_batch(lambda t, rs, s=sink: s.setdefault(t, []).extend(rs))
            probes.append(streams[last].probe())
            return handle, probes

        handle, probes = worker.dataflow(build)
        for t, batch in enumerate(batches):
            handle.send_batch(batch[worker.index :: workers])
            handle.advance_to(t + 1)
        handle.close()
        await worker.step_while(lambda: not all(p.done() for p in probes))

    run(work, workers=workers)
    expected: dict[int, dict[Hashable, list[int]]] = {i: {} for i in read}
    for t, batch in enumerate(batches):
        for i, records in enumerate(plain_streams(stages, batch)):
            if i in read and records:
                expected[i][t] = sorted(records)
    assert {i: {t: sorted(rs) for t, rs in per.items()} for i, per in seen.items()} == expected
