"""Nested scopes (seeds 003 and 004): progress reported upwards, summaries, loops.

A nested scope is one operator to its parent: it summarises itself (which inputs reach which
outputs, and how far times advance on the way), receives the paths outside it, and reports
the frontier of its inner capabilities projected to its outputs. These tests look at the
built scopes directly and run dataflows that depend on each part.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from operators import Worker, execute
from operators.progress import Antichain, Product, Source, Target, summarize
from operators.runtime import Fabric, Subgraph
from tests.runtime.fabrics import Clusters, Layout, layouts
from tests.runtime.harness import SafetyLog, checked, within


def p(outer: int, inner: int) -> Product[int, int]:
    return Product(outer, inner)


def built(build: Any) -> tuple[Worker, Subgraph, Any]:
    """Build one dataflow on a lone worker (not run); return it with its root scope."""
    worker = Worker(0, 1, Fabric(1))
    result = worker.dataflow(build)
    return worker, worker._dataflows[0], result


def child(scope: Subgraph, index: int) -> Any:
    entry = scope._children[index]
    assert entry is not None
    return entry.operator


def gate(stream: Any) -> Any:
    """Hold every batch (with a capability) until the input frontier has passed its time.

    Inside an iterative scope, right after ``enter``, this releases records only once the
    outer frontier has moved on, so the loop's progress is not hidden behind the outer
    frontier at the scope input (which covers every ``(t, i)`` while it is at ``t``).
    """

    def constructor(capability: Any, _core: Any) -> Any:
        capability.drop()
        stash: list[tuple[Any, list[Any]]] = []

        def logic(input: Any, output: Any) -> None:
            for held, records in input:
                stash.append((held.retain(), records))
            for entry in list(stash):
                held, records = entry
                if not input.frontier.less_equal(held.time):
                    stash.remove(entry)
                    output.give_batch(held, records)
                    held.drop()

        return logic

    return stream.unary_frontier(constructor, name="Gate")


# ---------------------------------------------------------------------- (a) progress upwards


def loop_to_ten(scope: Any, stream: Any, log: SafetyLog, events: list[Any], gated: bool) -> Any:
    """enter → concat(loop) → map(+1) → filter(<10) → feedback (0, 1); filter(>=10) → leave."""
    inner = scope.iterative()
    loop_handle, loop = inner.feedback(Product(0, 1))
    entered = stream.enter(inner)
    if gated:
        entered = gate(entered)
    body = entered.concat(loop).map(lambda x: x + 1)
    body = body.inspect_batch(lambda t, r: events.append(("inner", t, sorted(r))))
    body = checked(body, "inner", log)
    body.filter(lambda x: x < 10).connect_loop(loop_handle)
    left = checked(body.filter(lambda x: x >= 10).leave(), "outer", log)
    left = left.inspect_batch(lambda t, r: events.append(("out", t, sorted(r))))
    return frontier_events(left, events)


def frontier_events(stream: Any, events: list[Any]) -> Any:
    """Append ``("frontier", f)`` to ``events`` whenever the stream's frontier changes."""

    def constructor(capability: Any, _core: Any) -> Any:
        capability.drop()
        last: list[Any] = [None]

        def logic(input: Any, output: Any) -> None:
            frontier = input.frontier.frontier()
            if frontier != last[0]:
                last[0] = frontier
                events.append(("frontier", frontier))
            for time, records in input.batches():
                output.forward(time, records)

        return logic

    return stream.unary_frontier(constructor, name="FrontierEvents")


@pytest.mark.parametrize("gated", [False, True])
async def test_inner_frontier_sequence_and_outer_completion(gated: bool) -> None:
    log = SafetyLog()
    events: list[Any] = []

    async def work(worker: Worker) -> list[Antichain[Hashable]]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, loop_to_ten(scope, stream, log, events, gated).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch([7, 3])
        handle.advance_to(1)
        seen = [probe.frontier()]
        while probe.less_than(1):
            await worker.step()
            if probe.frontier() != seen[-1]:
                seen.append(probe.frontier())
                events.append(("probe", probe.frontier()))
        handle.close()
        return seen

    [seen] = await within(execute(work, workers=1))
    assert log.violations == []
    inner = [f for name, _w, f in log.frontiers if name == "inner"]
    if gated:
        # Once the gate lets the records in, the outer frontier is already at 1: the inner
        # frontier then follows the records around the loop, one iteration at a time.
        assert inner == [
            Antichain([p(0, 0)]),
            *(Antichain([p(0, i), p(1, 0)]) for i in range(1, 7)),
            Antichain([p(1, 0)]),
            Antichain(),
        ]
    else:
        # The records circulate while the scope still sees the outer frontier at 0, which
        # is (0, 0) inside and covers every (0, i): no iteration shows in the frontier.
        assert inner == [Antichain([p(0, 0)]), Antichain([p(1, 0)]), Antichain()]
    assert [e for e in events if e[0] == "inner"] == [
        ("inner", p(0, 0), [4, 8]),
        ("inner", p(0, 1), [5, 9]),
        ("inner", p(0, 2), [6, 10]),
        ("inner", p(0, 3), [7]),
        ("inner", p(0, 4), [8]),
        ("inner", p(0, 5), [9]),
        ("inner", p(0, 6), [10]),
    ]
    assert [f for name, _w, f in log.frontiers if name == "outer"] == [
        Antichain([0]),
        Antichain([1]),
        Antichain(),
    ]
    assert seen == [Antichain([0]), Antichain([1])]
    # Outside, time 0 completes only after the last iteration and both outputs: seen by
    # an operator as it happens, and by the probe between steps.
    assert [e[1] for e in events if e[0] == "frontier"] == [
        Antichain([0]),
        Antichain([1]),
        Antichain(),
    ]
    last_inside = max(i for i, e in enumerate(events) if e[0] in ("inner", "out"))
    assert last_inside < events.index(("frontier", Antichain([1])))
    assert last_inside < events.index(("probe", Antichain([1])))
    assert [e for e in events if e[0] == "out"] == [("out", 0, [10]), ("out", 0, [10])]


async def inner_frontiers_of_several_workers(worker: Worker) -> tuple[SafetyLog, list[Any]]:
    log = SafetyLog()
    events: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        left = loop_to_ten(scope, stream.exchange(lambda x: x), log, events, True)
        return handle, left.probe()

    handle, probe = worker.dataflow(build)
    for time in range(3):
        handle.send_batch([worker.index + time, 9 - worker.index])
        handle.advance_to(time + 1)
        await worker.step_while(lambda t=time + 1: probe.less_than(t))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return log, events


@pytest.mark.parametrize("layout", layouts(2, 3, 4))
async def test_inner_frontiers_advance_with_several_workers(
    layout: Layout, clusters: Clusters
) -> None:
    peers = layout.peers
    log = SafetyLog()
    events: list[Any] = []
    for part, seen in await clusters.run(layout, inner_frontiers_of_several_workers):
        log.frontiers.extend(part.frontiers)
        log.violations.extend(part.violations)
        events.extend(seen)
    assert log.violations == []
    for worker in range(peers):
        inner = [f for name, w, f in log.frontiers if name == "inner" and w == worker]
        assert inner[0] == Antichain([p(0, 0)])
        assert inner[-1] == Antichain()
        assert all(isinstance(t, Product) for f in inner for t in f)
    outs = sorted((e[1], x) for e in events if e[0] == "out" for x in e[2])
    assert outs == sorted((t, 10) for t in range(3) for _ in range(2 * peers))


# ---------------------------------------------------------------------- (b) summaries


def test_iterative_scope_with_feedback_summarises_itself() -> None:
    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        inner = scope.iterative()
        loop_handle, loop = inner.feedback(Product(0, 1))
        body = stream.enter(inner).concat(loop).map(lambda x: x + 1)
        body.filter(lambda x: x < 10).connect_loop(loop_handle)
        return inner, body.filter(lambda x: x >= 10).leave().probe()

    _worker, root, (inner, _probe) = built(build)
    assert inner.index_in_parent == 2
    scope = child(root, 2)
    assert isinstance(scope, Subgraph)
    assert (scope.inputs, scope.outputs) == (1, 1)
    # Inside, input 0 reaches output 0 with (0, 0) directly and (0, 1) around the loop; the
    # antichain keeps (0, 0). Outside only the outer coordinate is visible: 0.
    reach = scope._reach
    inside = summarize(reach.nodes(), reach.edges(), p(0, 0))[Source(0, 0)]
    assert inside == {Target(0, 0): Antichain([p(0, 0)])}
    assert reach.build()[1] == [{0: Antichain([p(0, 0)])}]
    assert scope.internal_summary == [{0: Antichain([0])}]
    assert scope.initialize()[0] == [{0: Antichain([0])}]
    # Nothing outside leads from the scope's output back to its input.
    assert scope.external_summary == [{}]
    # Each child inside was told its paths back around the loop (not through the outside).
    names = {i: child(scope, i).name for i in range(1, 6)}
    assert names == {1: "Feedback", 2: "Concat", 3: "Map", 4: "Filter", 5: "Filter"}
    assert child(scope, 1).external_summary == [{0: Antichain([p(0, 0)])}]
    assert child(scope, 2).external_summary == [{1: Antichain([p(0, 1)])}]
    assert child(scope, 3).external_summary == [{0: Antichain([p(0, 1)])}]
    assert child(scope, 4).external_summary == [{0: Antichain([p(0, 1)])}]
    assert child(scope, 5).external_summary == [{}]
    assert child(scope, 1).connectivity == [{0: Antichain([p(0, 1)])}]


@pytest.mark.parametrize("with_map", [False, True])
def test_region_pass_through_summary(with_map: bool) -> None:
    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        region = scope.region()
        entered = stream.enter(region)
        if with_map:
            entered = entered.map(lambda x: x)
        return entered.leave().probe()

    _worker, root, _probe = built(build)
    scope = child(root, 2)
    assert scope.internal_summary == [{0: Antichain([0])}]
    assert scope.initialize()[0] == [{0: Antichain([0])}]


def two_by_two(scope: Any, iterative: bool, crossed: bool) -> tuple[Any, Any, Any, Any]:
    """A scope with inputs a, b and outputs 0 = a, 1 = b (plus a when ``crossed``)."""
    a_handle, a = scope.new_input("A")
    b_handle, b = scope.new_input("B")
    nested = scope.iterative() if iterative else scope.region()
    a_in = a.enter(nested)
    b_in = b.enter(nested).map(lambda x: x)
    out0 = a_in.map(lambda x: x).leave()
    out1 = (b_in.concat(a_in) if crossed else b_in).leave()
    return a_handle, b_handle, out0, out1


@pytest.mark.parametrize("iterative", [False, True])
@pytest.mark.parametrize("crossed", [False, True])
def test_sparse_connectivity_is_reported(iterative: bool, crossed: bool) -> None:
    _worker, root, _ = built(lambda scope: two_by_two(scope, iterative, crossed))
    scope = child(root, 3)
    assert (scope.inputs, scope.outputs) == (2, 2)
    zero = Antichain([0])
    if crossed:
        assert scope.internal_summary == [{0: zero, 1: zero}, {1: zero}]
    else:
        assert scope.internal_summary == [{0: zero}, {1: zero}]
    # Input 1 never reaches output 0: the parent must not see that path.
    assert 0 not in scope.internal_summary[1]
    if iterative:
        identity = Antichain([p(0, 0)])
        expected = [{0: identity, 1: identity}, {1: identity}] if crossed else None
        if expected is not None:
            assert scope._reach.build()[1] == expected


async def sparse_connectivity(worker: Worker, iterative: bool) -> list[Any]:
    seen: list[Any] = []

    def build(scope: Any) -> Any:
        a_handle, b_handle, out0, out1 = two_by_two(scope, iterative, crossed=False)
        out0 = out0.inspect_batch(lambda t, r: seen.append((0, t, sorted(r))))
        return a_handle, b_handle, out0.probe(), out1.probe()

    a, b, probe0, probe1 = worker.dataflow(build)
    for time in range(5):
        a.send(time)
        a.advance_to(time + 1)
        await worker.step_while(lambda t=time + 1: probe0.less_than(t))
        assert probe1.frontier() == Antichain([0])
    seen.append(("held", probe1.frontier()))
    b.send(100)
    b.close()
    await worker.step_while(lambda: not probe1.done())
    a.close()
    return seen


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
@pytest.mark.parametrize("iterative", [False, True])
async def test_sparse_connectivity_lets_one_output_advance_alone(
    layout: Layout, iterative: bool, clusters: Clusters
) -> None:
    """Output 0 depends on input A only: it completes times while B is held back at 0."""

    results = await clusters.run(layout, sparse_connectivity, iterative)
    for seen in results:
        assert seen == [(0, t, [t]) for t in range(5)] + [("held", Antichain([0]))]


def test_external_summary_of_a_scope_inside_an_integer_loop() -> None:
    """The root tells a nested scope the path from its output back to its input: +1."""

    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        loop_handle, loop = scope.feedback(1)
        region = scope.region()
        through = stream.concat(loop).enter(region).map(lambda x: x + 1).leave()
        through.filter(lambda x: x < 5).connect_loop(loop_handle)
        return through.probe()

    _worker, root, _probe = built(build)
    names = {i: child(root, i).name for i in range(1, len(root._children))}
    # The region's index is reserved by ``scope.region()``, before the concat feeding it.
    assert names == {1: "Input", 2: "Feedback", 3: "Region", 4: "Concat", 5: "Filter"}
    region = child(root, 3)
    assert region.internal_summary == [{0: Antichain([0])}]
    assert region.external_summary == [{0: Antichain([1])}]
    assert child(root, 4).external_summary == [{1: Antichain([1])}]
    assert child(root, 2).external_summary == [{0: Antichain([0])}]
    # Inside the region the map sees no way back (paths through the outside are left out).
    assert child(region, 1).external_summary == [{}]


def test_external_summary_of_a_path_back_that_is_no_cycle_through_the_scope() -> None:
    """The region's output 0 leads back to its input 1, which leads only to its output 1.

    No cycle passes the region, yet it must be told that path: the search for it keeps to
    one strongly connected component of the graph where the region connects each input to
    each output (and a child on no such cycle searches nothing).
    """

    def build(scope: Any) -> Any:
        _a_handle, a = scope.new_input("A")
        _b_handle, b = scope.new_input("B")
        loop_handle, loop = scope.feedback(1)
        region = scope.region()
        out0 = a.enter(region).map(lambda x: x).leave()
        out1 = b.concat(loop).enter(region).map(lambda x: x).leave()
        out0.filter(lambda x: x < 3).connect_loop(loop_handle)
        return out1.probe()

    _worker, root, _probe = built(build)
    names = {i: child(root, i).name for i in range(1, len(root._children))}
    assert names == {1: "A", 2: "B", 3: "Feedback", 4: "Region", 5: "Concat", 6: "Filter"}
    region = child(root, 4)
    assert region.internal_summary == [{0: Antichain([0])}, {1: Antichain([0])}]
    assert region.external_summary == [{1: Antichain([1])}, {}]
    assert child(root, 3).external_summary == [{}]
    assert child(root, 5).external_summary == [{}]


# ---------------------------------------------------------------------- (c) integer loop


async def loop_in_region(worker: Worker) -> list[Any]:
    out: list[Any] = []

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        region = scope.region()
        loop_handle, loop = region.feedback(1)
        body = stream.enter(region).concat(loop).exchange(lambda x: x).map(lambda x: x + 1)
        body.filter(lambda x: x < 10).connect_loop(loop_handle)
        left = body.filter(lambda x: x >= 10).leave()
        left = left.inspect_batch(lambda t, r: out.append((t, sorted(r))))
        return handle, left.probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.send_batch([7, 5])  # leave at 2 and 4
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    out.append(("passed", probe.frontier()))
    handle.advance_to(3)
    await worker.step_while(lambda: probe.less_than(3))
    out.append(("passed", probe.frontier()))
    handle.close()
    await worker.step_while(lambda: not probe.done())
    return out


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
async def test_loop_in_region_with_integer_feedback(layout: Layout, clusters: Clusters) -> None:
    """Every iteration is one time later: x at t leaves as 10 at t + 9 - x."""

    results = await clusters.run(layout, loop_in_region)
    emitted = sorted(e for result in results for e in result if e[0] != "passed")
    assert emitted == [(2, [10]), (4, [10])]
    for result in results:
        passed = [e[1] for e in result if e[0] == "passed"]
        assert passed == [Antichain([1]), Antichain([3])]


def test_region_loop_summaries() -> None:
    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        region = scope.region()
        loop_handle, loop = region.feedback(1)
        body = stream.enter(region).concat(loop).map(lambda x: x + 1)
        body.filter(lambda x: x < 10).connect_loop(loop_handle)
        return body.filter(lambda x: x >= 10).leave().probe()

    _worker, root, _probe = built(build)
    region = child(root, 2)
    assert region.internal_summary == [{0: Antichain([0])}]
    assert child(region, 2).name == "Concat"
    assert child(region, 2).external_summary == [{1: Antichain([1])}]
    assert child(region, 1).external_summary == [{0: Antichain([0])}]


# ---------------------------------------------------------------------- regressions


async def nested_report(worker: Worker, iterative: bool) -> tuple[bool, Any]:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        nested = scope.iterative() if iterative else scope.region()
        return handle, stream.enter(nested).map(lambda x: x).leave().probe()

    handle, probe = worker.dataflow(build)
    if worker.index == 0:
        handle.advance_to(1)
    else:
        handle.close()
    await worker.step_while(lambda: probe.less_than(1))
    # Worker 0 reads its own frontier: [1], its input still open. The others only know
    # that their probe passed 1: across processes, worker 0 may have finished (closing its
    # input) before they look, and they would see [].
    return probe.less_than(1), probe.frontier() if worker.index == 0 else None


@pytest.mark.parametrize("layout", layouts(2, 4))
@pytest.mark.parametrize("iterative", [False, True])
async def test_nested_scope_report_reaches_the_parent_without_other_activity(
    layout: Layout, iterative: bool, clusters: Clusters
) -> None:
    """The other workers close their inputs at once; worker 0 advances to 1 and waits.

    The last thing worker 0 needs is worker 1's inner map dropping its initial capability:
    it arrives on the nested scope's progress channel, the nested scope reports "output
    capability at 0 released" to the root, and the root must propagate it. Before 4bcf7e7
    the root went to sleep with that report unpropagated, and worker 0 waited forever.
    """

    results = await clusters.run(layout, nested_report, iterative)
    assert results == [(False, Antichain([1]))] + [(False, None)] * (layout.peers - 1)


async def unread_scope_input(worker: Worker, shape: str) -> Antichain[Hashable]:
    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        region = scope.region()
        entered = stream.enter(region)
        out = entered.leave() if shape == "enter-leave" else stream
        return handle, out.probe()

    handle, probe = worker.dataflow(build)
    handle.send(1)
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    return probe.frontier()


@pytest.mark.parametrize("layout", layouts(1, 2, 4))
@pytest.mark.parametrize("shape", ["enter-leave", "unused"])
async def test_scope_input_read_by_no_inner_operator_completes(
    shape: str, layout: Layout, clusters: Clusters
) -> None:
    """Records entering a scope where no operator reads them are still reported consumed.

    Before 4bcf7e7 the ingress counts of such an input were never broadcast: the scope
    re-activated itself forever (a busy spin) and the dataflow never completed.
    """

    results = await clusters.run(layout, unread_scope_input, shape)
    assert results == [Antichain([1])] * layout.peers
