"""First end-to-end checks of the engine: pipelines, exchange and a loop, 1 and N workers.

Every test runs in one process and across processes (:mod:`tests.runtime.fabrics`): its
program is a module-level function, and the same exact values are expected on every layout.
"""

from collections.abc import Hashable
from typing import Any

import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker
from operators.progress import Product
from tests.runtime.fabrics import Clusters, Layout, layouts


async def map_filter_aggregate(worker: Worker) -> list[Any]:
    out: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = (
            stream.map(lambda x: x * 2)
            .filter(lambda x: x % 3 == 0)
            .aggregate(lambda x: x % 4, lambda acc, _r: acc + 1, lambda k, a: (k, a), int)
            .inspect_batch(lambda t, r: out.append((t, sorted(r))))
        )
        return handle, counted.probe()

    handle, probe = worker.dataflow(build)
    for t in range(3):
        if worker.index == 0:
            handle.send_batch(range(t * 10, t * 10 + 10))
        handle.advance_to(t + 1)
        await worker.step_while(lambda: probe.less_than(handle.time))
        out.append(("passed", t, sorted(probe.frontier())))
    handle.close()
    return out


@pytest.mark.parametrize("layout", layouts(1, 3, 4))
async def test_map_filter_aggregate_per_time(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, map_filter_aggregate)
    emitted_by_time: dict[Any, list[Any]] = {}
    for result in results:
        for event in result:
            if event[0] != "passed":
                emitted_by_time.setdefault(event[0], []).extend(event[1])
    # With several workers each key is counted on one worker: merge the workers' outputs.
    emitted = sorted((t, sorted(pairs)) for t, pairs in emitted_by_time.items())
    # time 0: 0, 6, 12, 18 -> mod 4: 0, 2, 0, 2; time 1: 24, 30, 36 -> 0, 2, 0;
    # time 2: 42, 48, 54 -> 2, 0, 2.
    assert emitted == [(0, [(0, 2), (2, 2)]), (1, [(0, 2), (2, 1)]), (2, [(0, 1), (2, 2)])]
    for result in results:
        assert [e for e in result if e[0] == "passed"] == [
            ("passed", 0, [1]),
            ("passed", 1, [2]),
            ("passed", 2, [3]),
        ]


async def loop_in_iterative_scope(worker: Worker) -> tuple[list[Any], list[Hashable]]:
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        inner = scope.iterative()
        loop_handle, loop = inner.feedback(Product(0, 1))
        body = (
            stream.enter(inner)
            .concat(loop)
            .map(lambda x: x + 1)
            .inspect_batch(lambda t, r: seen.append((tuple(t), sorted(r))))
        )
        body.filter(lambda x: x < 10).connect_loop(loop_handle)
        done = body.filter(lambda x: x >= 10).leave()
        done = done.inspect_batch(lambda t, r: seen.append(("out", t, sorted(r))))
        return handle, done.probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch([7, 3])
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    frontier = sorted(probe.frontier())
    handle.close()
    return seen, frontier


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_loop_in_iterative_scope(layout: Layout, clusters: Clusters) -> None:
    results = await clusters.run(layout, loop_in_iterative_scope)
    seen = results[0][0]
    assert seen == [
        ((0, 0), [4, 8]),
        ((0, 1), [5, 9]),
        ((0, 2), [6, 10]),
        ((0, 3), [7]),
        ((0, 4), [8]),
        ((0, 5), [9]),
        ((0, 6), [10]),
        ("out", 0, [10]),
        ("out", 0, [10]),
    ]
    assert all(frontier == [1] for _, frontier in results)


class Boom(Exception):
    pass


def explode(_x: object) -> object:
    raise Boom("bad record")


async def exploding_map(worker: Worker) -> None:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.map(explode).probe()

    handle, probe = worker.dataflow(build)
    handle.send(1)
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_operator_exception_ends_execute(layout: Layout, clusters: Clusters) -> None:
    with pytest.raises(Boom, match="bad record"):
        await clusters.run(layout, exploding_map)


async def nested_scope_closed_at_once(worker: Worker, nest: str) -> list[Hashable]:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        inner = getattr(scope, nest)()
        return handle, stream.enter(inner).map(lambda x: x).leave().probe()

    handle, probe = worker.dataflow(build)
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return sorted(probe.frontier())


@pytest.mark.parametrize("nest", ["region", "iterative"])
@pytest.mark.parametrize("layout", layouts(1, 2, 3, 4))
async def test_nested_scope_closed_before_the_first_step_completes(
    layout: Layout, nest: str, clusters: Clusters
) -> None:
    # Regression: a nested scope's last capability retraction went into its parent's
    # tracker without being propagated, and nothing woke the parent again: a hang.
    results = await clusters.run(layout, nested_scope_closed_at_once, nest)
    assert results == [[]] * layout.peers


async def woken_again(worker: Worker) -> tuple[list[Any], int]:
    seen: list[Any] = []
    runs = [0]

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()

        def constructor(capability: Any, info: Any) -> Any:
            capability.drop()

            def logic(input: Any, output: Any) -> None:
                runs[0] += 1
                for _ in range(2):
                    if input.is_empty():
                        return
                    cap, records = next(iter(input))
                    output.give_batch(cap.retain(), [r * 10 for r in records])
                if not input.is_empty():
                    info.activate()

            return logic

        out = stream.unary(constructor, name="Slow")
        out = out.inspect_batch(lambda t, r: seen.append((t, list(r))))
        return handle, out.probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        for i in range(5):
            handle.send_batch([i])
            handle.flush()
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    return seen, runs[0]


@pytest.mark.parametrize("layout", layouts(1, 3, 4))
async def test_operator_that_asks_to_be_woken_runs_again(
    layout: Layout, clusters: Clusters
) -> None:
    # An operator handles at most 2 batches per run and re-activates itself for the rest:
    # nothing else would schedule it, since no new data or frontier change arrives.
    seen, runs = (await clusters.run(layout, woken_again))[0]
    assert seen == [(0, [0]), (0, [10]), (0, [20]), (0, [30]), (0, [40])]
    assert runs >= 3
