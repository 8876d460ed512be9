"""Per-record and routing operators, with exact outputs per time, on 1, 3 and 4 workers.

Every test runs one dataflow through :func:`run`: each worker sends the records ``send``
gives for it at times 0, 1 and 2 through one input, advancing the input after each time and
stepping until the probes of all watched streams pass it. Each worker logs every batch that
arrives on a watched stream, and a marker with the probes' frontiers each time they pass a
time. :func:`check_progress` then checks, on every worker, that each probe's frontier was
exactly ``[t + 1]`` after time ``t``, and that every record at time ``t`` arrived before it.

Each test runs in one process and across processes (3x1 and 2x2, over sockets:
:mod:`tests.runtime.fabrics`), with the same exact expected values.
"""

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import FrozenInstanceError, dataclass
from functools import partial
from typing import Any

import pytest

import operators  # registers the stream-building scope
from operators import Err, Ok
from operators.runtime import Worker, stable_hash
from tests.runtime.fabrics import Clusters, Layout, layouts

TIMES = 3
LAYOUTS = layouts(1, 3, 4)

Event = tuple[Any, ...]
Log = Callable[[Event], None]
Build = Callable[[Any, Log], dict[str, Any]]
"""``build(stream, log)``: the named streams to watch; ``log`` appends to the worker's log."""
Send = Callable[[int, int], list[Any]]
"""``send(worker index, time)``: the records that worker sends at that time."""

DATA: dict[int, list[Any]] = {0: [1, 2, 3, 4], 1: [5, 6, 7], 2: [8, 9, 10, 11, 12]}
"""What worker 0 sends (alone) in most tests."""


@dataclass(frozen=True)
class from_first:
    """Only worker 0 sends: the outputs do not depend on the number of workers."""

    data: dict[int, list[Any]]

    def __call__(self, worker: int, time: int) -> list[Any]:
        return list(self.data.get(time, [])) if worker == 0 else []


def per_worker(worker: int, time: int) -> list[int]:
    """Distinct records from every worker: ``w*100 + t*10 + i``."""
    return [worker * 100 + time * 10 + i for i in range(4)]


async def work(worker: Worker, build: Build, send: Send) -> list[Event]:
    """One worker's part of :func:`run`: its log of events."""
    events: list[Event] = []

    def dataflow(scope: Any) -> Any:
        handle, stream = scope.new_input()
        probes = []
        for name, out in build(stream, events.append).items():

            def seen(time: Hashable, records: list[Any], name: str = name) -> None:
                events.append(("data", name, time, sorted(records)))

            probes.append(out.inspect_batch(seen).probe())
        return handle, probes

    handle, probes = worker.dataflow(dataflow)
    for t in range(TIMES):
        handle.send_batch(send(worker.index, t))
        handle.advance_to(t + 1)
        await worker.step_while(lambda: any(p.less_than(handle.time) for p in probes))
        events.append(("passed", t, [sorted(p.frontier()) for p in probes]))
    handle.close()
    await worker.step_while(lambda: not all(p.done() for p in probes))
    events.append(("done",))
    return events


async def run(layout: Layout, clusters: Clusters, build: Build, send: Send) -> list[list[Event]]:
    """Run the dataflow on ``layout``; return each worker's log of events.

    ``build`` and ``send`` are module-level functions (or picklable callables): on a
    cluster they travel to the child processes.
    """
    results = await clusters.run(layout, work, build, send)
    assert len(results) == layout.peers
    return results


def check_progress(results: list[list[Event]], streams: int) -> None:
    """Frontiers exactly ``[t + 1]`` after each time; records at ``t`` arrive before that."""
    for events in results:
        markers = [e for e in events if e[0] in ("passed", "done")]
        assert markers == [("passed", t, [[t + 1]] * streams) for t in range(TIMES)] + [("done",)]
        passed = -1
        for event in events:
            if event[0] == "passed":
                passed = event[1]
            elif event[0] == "data":
                assert event[2] > passed, f"{event} arrived after time {passed} was passed"
            elif event[0] == "done":
                passed = TIMES


def outputs(events: list[Event], name: str) -> dict[Hashable, list[Any]]:
    """The records of stream ``name`` on one worker, merged per time and sorted."""
    merged: dict[Hashable, list[Any]] = {}
    for event in events:
        if event[0] == "data" and event[1] == name:
            merged.setdefault(event[2], []).extend(event[3])
    return {t: sorted(records) for t, records in sorted(merged.items())}


def everywhere(results: list[list[Event]], name: str) -> dict[Hashable, list[Any]]:
    """The records of stream ``name`` on all workers, merged per time and sorted."""
    return outputs([e for events in results for e in events], name)


def only_on_first(results: list[list[Event]], name: str) -> dict[Hashable, list[Any]]:
    """Stream ``name`` on worker 0, after checking no other worker saw any of it."""
    for events in results[1:]:
        assert outputs(events, name) == {}
    return outputs(results[0], name)


# ---------------------------------------------------------------------------- per record


def build_map(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.map(lambda x: x * 10)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_map(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_map, from_first(DATA))
    check_progress(results, 1)
    assert only_on_first(results, "out") == {
        0: [10, 20, 30, 40],
        1: [50, 60, 70],
        2: [80, 90, 100, 110, 120],
    }


def build_negate(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.map(lambda x: -x)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_map_keeps_records_on_their_worker(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_negate, per_worker)
    check_progress(results, 1)
    for w, events in enumerate(results):
        assert outputs(events, "out") == {
            t: sorted(-x for x in per_worker(w, t)) for t in range(TIMES)
        }
    assert outputs(results[0], "out") == {
        0: [-3, -2, -1, 0],
        1: [-13, -12, -11, -10],
        2: [-23, -22, -21, -20],
    }


def build_flat_map(stream: Any, _log: Log) -> dict[str, Any]:
    return {
        "some": stream.flat_map(lambda x: [x] * (x % 3)),
        "none": stream.flat_map(lambda x: []),
        "pairs": stream.flat_map(lambda x: ((x, i) for i in range(2))),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_flat_map(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_flat_map, from_first(DATA))
    check_progress(results, 3)
    assert only_on_first(results, "some") == {
        0: [1, 2, 2, 4],
        1: [5, 5, 7],
        2: [8, 8, 10, 11, 11],
    }
    assert everywhere(results, "none") == {}
    assert only_on_first(results, "pairs") == {
        0: [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1)],
        1: [(5, 0), (5, 1), (6, 0), (6, 1), (7, 0), (7, 1)],
        2: [(8, 0), (8, 1), (9, 0), (9, 1), (10, 0), (10, 1), (11, 0), (11, 1), (12, 0), (12, 1)],
    }


def build_filter(stream: Any, _log: Log) -> dict[str, Any]:
    return {
        "even": stream.filter(lambda x: x % 2 == 0),
        "big": stream.filter(lambda x: x > 6),
        "nothing": stream.filter(lambda x: False),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_filter(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_filter, from_first(DATA))
    check_progress(results, 3)
    assert only_on_first(results, "even") == {0: [2, 4], 1: [6], 2: [8, 10, 12]}
    # Time 0 has no record above 6: no batch at all, yet its frontier still passes.
    assert only_on_first(results, "big") == {1: [7], 2: [8, 9, 10, 11, 12]}
    assert everywhere(results, "nothing") == {}


def build_inspect(stream: Any, log: Log) -> dict[str, Any]:
    return {"out": stream.inspect(lambda x: log(("inspected", x)))}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_inspect(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_inspect, from_first(DATA))
    check_progress(results, 1)
    assert only_on_first(results, "out") == DATA
    # Each record is inspected once, before the time it belongs to is passed.
    events = results[0]
    for t in range(TIMES):
        before = events[: events.index(("passed", t, [[t + 1]]))]
        assert sorted(e[1] for e in before if e[0] == "inspected") == sorted(
            x for u in range(t + 1) for x in DATA[u]
        )
    for events in results[1:]:
        assert not [e for e in events if e[0] == "inspected"]


def build_inspect_batch(stream: Any, log: Log) -> dict[str, Any]:
    return {"out": stream.inspect_batch(lambda t, r: log(("batch", t, sorted(r))))}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_inspect_batch(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_inspect_batch, from_first(DATA))
    check_progress(results, 1)
    assert only_on_first(results, "out") == DATA
    # Input batches are sent whole: one call per time, with the time and the records.
    assert [e for e in results[0] if e[0] == "batch"] == [
        ("batch", 0, [1, 2, 3, 4]),
        ("batch", 1, [5, 6, 7]),
        ("batch", 2, [8, 9, 10, 11, 12]),
    ]
    for events in results[1:]:
        assert not [e for e in events if e[0] == "batch"]


# ---------------------------------------------------------------------------- routing


def build_exchange_by_int_key(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.exchange(lambda x: x)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_exchange_by_int_key(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await run(layout, clusters, build_exchange_by_int_key, per_worker)
    check_progress(results, 1)
    sent = {t: sorted(x for w in range(workers) for x in per_worker(w, t)) for t in range(TIMES)}
    # Nothing lost or duplicated...
    assert everywhere(results, "out") == sent
    # ...and every record on worker ``key % peers`` (an int key hashes to itself).
    for w, events in enumerate(results):
        assert outputs(events, "out") == {
            t: [x for x in records if x % workers == w] for t, records in sent.items()
        }
    if workers == 3:
        assert outputs(results[1], "out") == {
            0: [1, 100, 103, 202],
            1: [10, 13, 112, 211],
            2: [22, 121, 220, 223],
        }


def build_exchange_by_str_key(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.exchange(lambda x: f"key-{x}")}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_exchange_by_str_key(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await run(layout, clusters, build_exchange_by_str_key, per_worker)
    check_progress(results, 1)
    sent = {t: sorted(x for w in range(workers) for x in per_worker(w, t)) for t in range(TIMES)}
    assert everywhere(results, "out") == sent
    landed: Counter[int] = Counter()
    for w, events in enumerate(results):
        expected = {
            t: [x for x in records if stable_hash(f"key-{x}") % workers == w]
            for t, records in sent.items()
        }
        assert outputs(events, "out") == {t: r for t, r in expected.items() if r}
        landed[w] = sum(len(r) for r in expected.values())
    assert sum(landed.values()) == 12 * workers


def build_concat(stream: Any, _log: Log) -> dict[str, Any]:
    tens = stream.map(lambda x: x * 10)
    odd = stream.filter(lambda x: x % 2 == 1)
    doubled = stream.flat_map(lambda x: [-x, -x])
    return {
        "two": tens.concat(odd),
        "three": tens.concat(odd, doubled),
        "self": odd.concat(odd),
        "one": odd.concat(),
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_concat(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_concat, from_first(DATA))
    check_progress(results, 4)
    assert only_on_first(results, "two") == {
        0: [1, 3, 10, 20, 30, 40],
        1: [5, 7, 50, 60, 70],
        2: [9, 11, 80, 90, 100, 110, 120],
    }
    assert only_on_first(results, "three") == {
        0: [-4, -4, -3, -3, -2, -2, -1, -1, 1, 3, 10, 20, 30, 40],
        1: [-7, -7, -6, -6, -5, -5, 5, 7, 50, 60, 70],
        2: [-12, -12, -11, -11, -10, -10, -9, -9, -8, -8, 9, 11, 80, 90, 100, 110, 120],
    }
    assert only_on_first(results, "self") == {0: [1, 1, 3, 3], 1: [5, 5, 7, 7], 2: [9, 9, 11, 11]}
    assert only_on_first(results, "one") == {0: [1, 3], 1: [5, 7], 2: [9, 11]}


def build_concat_of_exchanged_streams(stream: Any, _log: Log) -> dict[str, Any]:
    left = stream.exchange(lambda x: x)
    right = stream.map(lambda x: x + 1000)
    return {"out": left.concat(right)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_concat_of_exchanged_streams(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await run(layout, clusters, build_concat_of_exchanged_streams, per_worker)
    check_progress(results, 1)
    for w, events in enumerate(results):
        assert outputs(events, "out") == {
            t: sorted(
                [x for v in range(workers) for x in per_worker(v, t) if x % workers == w]
                + [x + 1000 for x in per_worker(w, t)]
            )
            for t in range(TIMES)
        }


def build_broadcast(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.broadcast()}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_broadcast_from_one_worker(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_broadcast, from_first(DATA))
    check_progress(results, 1)
    for events in results:
        assert outputs(events, "out") == {
            0: [1, 2, 3, 4],
            1: [5, 6, 7],
            2: [8, 9, 10, 11, 12],
        }


def build_broadcast_from_every_worker(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.broadcast(), "after": stream.broadcast().map(lambda x: x % 100)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_broadcast_from_every_worker(layout: Layout, clusters: Clusters) -> None:
    workers = layout.peers
    results = await run(layout, clusters, build_broadcast_from_every_worker, per_worker)
    check_progress(results, 2)
    every = {t: sorted(x for w in range(workers) for x in per_worker(w, t)) for t in range(TIMES)}
    for events in results:
        # Every worker sees every record exactly once (a duplicate would show in the list).
        assert outputs(events, "out") == every
        assert outputs(events, "after") == {
            t: sorted(x % 100 for x in records) for t, records in every.items()
        }
    if workers == 3:
        assert outputs(results[2], "out")[1] == [
            10,
            11,
            12,
            13,
            110,
            111,
            112,
            113,
            210,
            211,
            212,
            213,
        ]


def build_partition(stream: Any, _log: Log) -> dict[str, Any]:
    by_three = stream.partition(3, lambda x: (x % 3, x * 2))
    assert len(by_three) == 3
    (single,) = stream.partition(1, lambda x: (0, -x))
    sparse = stream.partition(4, lambda x: (0 if x < 6 else 2, x))
    return {
        "p0": by_three[0],
        "p1": by_three[1],
        "p2": by_three[2],
        "single": single,
        "s0": sparse[0],
        "s1": sparse[1],
        "s2": sparse[2],
        "s3": sparse[3],
    }


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_partition(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_partition, from_first(DATA))
    check_progress(results, 8)
    assert only_on_first(results, "p0") == {0: [6], 1: [12], 2: [18, 24]}
    assert only_on_first(results, "p1") == {0: [2, 8], 1: [14], 2: [20]}
    assert only_on_first(results, "p2") == {0: [4], 1: [10], 2: [16, 22]}
    assert only_on_first(results, "single") == {
        0: [-4, -3, -2, -1],
        1: [-7, -6, -5],
        2: [-12, -11, -10, -9, -8],
    }
    assert only_on_first(results, "s0") == {0: [1, 2, 3, 4], 1: [5]}
    assert everywhere(results, "s1") == {}
    assert only_on_first(results, "s2") == {1: [6, 7], 2: [8, 9, 10, 11, 12]}
    assert everywhere(results, "s3") == {}


def build_branch(stream: Any, _log: Log) -> dict[str, Any]:
    odd, even = stream.branch(lambda x: x % 2 == 0)
    small, large = stream.branch(lambda x: x > 100)
    return {"false": odd, "true": even, "small": small, "large": large}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_branch(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_branch, from_first(DATA))
    check_progress(results, 4)
    assert only_on_first(results, "false") == {0: [1, 3], 1: [5, 7], 2: [9, 11]}
    assert only_on_first(results, "true") == {0: [2, 4], 1: [6], 2: [8, 10, 12]}
    assert only_on_first(results, "small") == DATA
    assert everywhere(results, "large") == {}


def classify(x: int) -> Ok[int] | Err[str]:
    return Ok(x * 10) if x % 3 else Err(f"bad {x}")


def build_ok_err(stream: Any, _log: Log) -> dict[str, Any]:
    oks, errs = stream.ok_err(classify)
    all_ok, no_err = stream.ok_err(Ok)
    return {"oks": oks, "errs": errs, "all_ok": all_ok, "no_err": no_err}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_ok_err(layout: Layout, clusters: Clusters) -> None:
    results = await run(layout, clusters, build_ok_err, from_first(DATA))
    check_progress(results, 4)
    assert only_on_first(results, "oks") == {0: [10, 20, 40], 1: [50, 70], 2: [80, 100, 110]}
    assert only_on_first(results, "errs") == {0: ["bad 3"], 1: ["bad 6"], 2: ["bad 12", "bad 9"]}
    assert only_on_first(results, "all_ok") == DATA
    assert everywhere(results, "no_err") == {}


def test_ok_and_err_are_frozen_slotted_values() -> None:
    assert operators.Ok is Ok and operators.Err is Err
    assert Ok(1) == Ok(1) and Ok(1) != Err(1)
    assert Ok(2).value == 2 and Err("e").error == "e"
    with pytest.raises(FrozenInstanceError):
        Ok(1).value = 2  # type: ignore[misc]
    assert not hasattr(Ok(1), "__dict__") and not hasattr(Err(1), "__dict__")


# ---------------------------------------------------------------------------- progress


def build_in_and_out(stream: Any, _log: Log) -> dict[str, Any]:
    return {"in": stream, "out": stream.map(str)}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_probe_frontier_after_each_advance(layout: Layout, clusters: Clusters) -> None:
    # With nothing sent at all, the frontier still moves to exactly [t + 1] each time.
    results = await run(layout, clusters, build_in_and_out, from_first({}))
    check_progress(results, 2)
    assert everywhere(results, "in") == {}
    assert everywhere(results, "out") == {}


# ---------------------------------------------------------------------------- errors


def build_partition_out_of_range_raises(bad: int, stream: Any, _log: Log) -> dict[str, Any]:
    parts = stream.partition(3, lambda x: (bad if x == 6 else 0, x))
    return {str(i): part for i, part in enumerate(parts)}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bad", [3, 7, -1])
async def test_partition_out_of_range_raises(layout: Layout, bad: int, clusters: Clusters) -> None:
    with pytest.raises(ValueError, match=rf"part index {bad} is out of range for 3 parts"):
        build = partial(build_partition_out_of_range_raises, bad)
        await run(layout, clusters, build, from_first(DATA))


def build_no_part(stream: Any, _log: Log) -> dict[str, Any]:
    return {"x": stream.partition(0, lambda x: (0, x))[0]}


async def test_partition_needs_a_part(clusters: Clusters) -> None:
    with pytest.raises(ValueError, match="parts must be at least 1, not 0"):
        await run(Layout(1, 1), clusters, build_no_part, from_first(DATA))


def build_ok_err_rejects_other_results(stream: Any, _log: Log) -> dict[str, Any]:
    oks, errs = stream.ok_err(lambda x: Ok(x) if x < 6 else x)
    return {"oks": oks, "errs": errs}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_ok_err_rejects_other_results(layout: Layout, clusters: Clusters) -> None:
    with pytest.raises(TypeError, match="must return Ok or Err, not int"):
        await run(layout, clusters, build_ok_err_rejects_other_results, from_first(DATA))


# ---------------------------------------------------------------------------- keys


def build_exchange_by_tuple_key_with_a_big_int(stream: Any, _log: Log) -> dict[str, Any]:
    return {"out": stream.exchange(lambda x: (2**64 + x,))}


@pytest.mark.parametrize("layout", layouts(3))
async def test_exchange_by_tuple_key_with_a_big_int(layout: Layout, clusters: Clusters) -> None:
    results = await run(
        layout, clusters, build_exchange_by_tuple_key_with_a_big_int, from_first(DATA)
    )
    assert everywhere(results, "out") == DATA


def build_equal_keys_meet_on_one_worker(stream: Any, _log: Log) -> dict[str, Any]:
    counts = stream.aggregate(lambda x: x, lambda n, _x: n + 1, lambda k, n: n, int)
    return {"counts": counts}


@pytest.mark.parametrize("layout", layouts(3))
async def test_equal_keys_meet_on_one_worker(layout: Layout, clusters: Clusters) -> None:
    # On one worker they already do (one dict entry each): this is the three-worker case.
    send = from_first({0: [1, 1.0, True], 1: [0.0, -0.0]})
    results = await run(layout, clusters, build_equal_keys_meet_on_one_worker, send)
    assert everywhere(results, "counts") == {0: [3], 1: [2]}


# --------------------------------------------------------------------------- route()


def test_route_splits_by_stable_hash_keeping_order_within_a_part() -> None:
    from operators.runtime.channels import route

    records = [{"k": k, "i": i} for i, k in enumerate(["a", 5, "b", 2**70, 5, None, 1.0, True])]
    parts = route(records, lambda r: r["k"], 3)
    expected: list[list[Any]] = [[], [], []]
    for record in records:
        expected[stable_hash(record["k"]) % 3].append(record)
    assert parts == expected
    # Equal keys meet: 1.0 and True both go where 1 goes, and both 5s to part 5 % 3.
    assert [[r["i"] for r in part] for part in parts] == [[], [6, 7], [0, 1, 2, 3, 4, 5]]


def test_route_of_small_ints_is_the_key_modulo_peers() -> None:
    from operators.runtime.channels import route

    assert route(list(range(10)), lambda r: r, 4) == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert route([], lambda r: r, 2) == [[], []]


def test_route_refuses_an_unroutable_key_by_its_type() -> None:
    from operators.runtime.channels import route

    with pytest.raises(TypeError, match="cannot route by a key of type list"):
        route([1, 2], lambda r: [r], 2)
    with pytest.raises(TypeError, match="cannot route by a key of type frozenset"):
        route([1, 2], lambda r: frozenset([r]), 2)
