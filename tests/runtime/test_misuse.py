"""Misuse gets a clear error, failures end ``execute`` cleanly, idle workers park.

Capabilities moved backwards, used after being dropped or on the wrong output, input
capabilities stretched past what their input's summary allows, inputs advanced backwards or
used after closing, cycles that do not advance time, exceptions in operators, and a worker
that has nothing to do (it must wait, not spin).

The tests with several workers run on one process and across processes
(``tests/runtime/fabrics.py``: 3x1, and 2x2 for two workers) as module-level programs with
the same exact expected values: across processes the failing worker's own exception is
raised, not the ``PeerLost`` it causes elsewhere, and a parked worker counts its own rounds
(patched on its instance, so a child process counts its own workers).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Hashable
from typing import Any

import pytest

from operators import CapabilityError, InputClosed, OperatorBuilder
from operators.progress import CycleError, Product, Source, Target
from operators.runtime import Fabric, Worker, execute
from tests.runtime.fabrics import Clusters, Layout, layouts
from tests.runtime.harness import within


def build_alone(build: Callable[[Any], Any]) -> Any:
    """Build one dataflow on a lone worker, without running it."""
    return Worker(0, 1, Fabric(1)).dataflow(build)


async def run_one(build: Callable[[Any], Any], times: list[tuple[int, list[Any]]]) -> None:
    """Run ``build``'s dataflow on one worker, sending ``records`` at each ``time``."""

    async def work(worker: Worker) -> None:
        handle, probe = worker.dataflow(build)
        for time, records in times:
            handle.advance_to(time)
            handle.send_batch(records)
        handle.close()
        await worker.step_while(lambda: not probe.done())

    await within(execute(work, workers=1))


# ---------------------------------------------------------------------- capabilities


def test_capability_cannot_move_earlier() -> None:
    errors: list[str] = []

    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()

        def constructor(capability: Any, _core: Any) -> Any:
            later = capability.delayed(5)
            for attempt in (lambda: later.delayed(3), lambda: later.downgrade(2)):
                with pytest.raises(CapabilityError) as caught:
                    attempt()
                errors.append(str(caught.value))
            assert later.time == 5  # a refused downgrade leaves it alone
            same = later.delayed(5)
            later.downgrade(5)
            for held in (capability, later, same):
                held.drop()
            return lambda _input, _output: None

        return stream.unary(constructor)

    build_alone(build)
    assert errors == [
        "cannot delay a capability at 5 to 3: not later or equal",
        "cannot downgrade a capability at 5 to 2: not later or equal",
    ]


def test_capability_cannot_move_to_an_incomparable_product_time() -> None:
    errors: list[str] = []

    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        inner = scope.iterative()

        def constructor(capability: Any, _core: Any) -> Any:
            assert capability.time == Product(0, 0)
            later = capability.delayed(Product(0, 2))
            with pytest.raises(CapabilityError) as caught:
                later.delayed(Product(1, 1))
            errors.append(str(caught.value))
            with pytest.raises(CapabilityError) as caught:
                later.downgrade(Product(3, 0))
            errors.append(str(caught.value))
            capability.drop()
            later.drop()
            return lambda _input, _output: None

        return stream.enter(inner).unary(constructor).leave()

    build_alone(build)
    assert "Product(outer=0, inner=2)" in errors[0]
    assert "Product(outer=1, inner=1)" in errors[0]
    assert "Product(outer=0, inner=2)" in errors[1]
    assert "Product(outer=3, inner=0)" in errors[1]


def test_dropped_capability_cannot_be_used_or_dropped_again() -> None:
    errors: list[str] = []

    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()

        def constructor(capability: Any, _core: Any) -> Any:
            capability.drop()
            assert capability.dropped
            assert "dropped" in repr(capability)
            for attempt in (
                capability.drop,
                lambda: capability.time,
                lambda: capability.delayed(1),
                lambda: capability.downgrade(1),
            ):
                with pytest.raises(CapabilityError) as caught:
                    attempt()
                errors.append(str(caught.value))
            return lambda _input, _output: None

        return stream.unary(constructor)

    build_alone(build)
    assert errors == ["capability was dropped"] * 4


def two_outputs(
    scope: Any, stream: Any, logic: Callable[[Any, Any, Any, list[Any]], None]
) -> tuple[Any, Any]:
    """An operator whose only input reaches output 0 (summary 0) and not output 1."""
    builder = OperatorBuilder(scope, "TwoOutputs")
    input = builder.new_input(stream, connection={0: 0})
    out0, stream0 = builder.new_output()
    out1, stream1 = builder.new_output()

    def constructor(capabilities: list[Any]) -> Callable[[], None]:
        return lambda: logic(input, out0, out1, capabilities)

    builder.build(constructor)
    assert builder.core.connectivity == [{0: _antichain(0)}]
    return stream0, stream1


def _antichain(*elements: Hashable) -> Any:
    from operators.progress import Antichain

    return Antichain(elements)


async def test_input_capability_limits() -> None:
    errors: list[tuple[str, str]] = []
    sent: list[Any] = []

    def attempt(name: str, action: Callable[[], object]) -> None:
        try:
            action()
        except CapabilityError as error:
            errors.append((name, str(error)))
        else:
            errors.append((name, "no error"))

    def logic(input: Any, out0: Any, out1: Any, initial: list[Any]) -> None:
        for capability in initial:
            if not capability.dropped:
                capability.drop()
        for capability, records in input:
            assert capability.time == 2
            attempt("other output", lambda c=capability: c.delayed(2, 1))
            attempt("retain other", lambda c=capability: c.retain(1))
            attempt("earlier", lambda c=capability: c.delayed(1, 0))
            attempt("no output", lambda c=capability: c.delayed(2, 2))
            attempt("forward", lambda r=records: out1.forward(2, r))
            held = capability.retain(0)
            attempt("wrong output", lambda h=held, r=records: out1.give_batch(h, r))
            attempt("wrong session", lambda h=held: out1.session(h))
            later = capability.delayed(4, 0)
            out0.give_batch(held, records)
            out0.give_batch(later, [r * 10 for r in records])
            held.drop()
            attempt("dropped", lambda h=held, r=records: out0.give_batch(h, r))
            attempt("dropped single", lambda h=held: out0.give(h, 1))
            later.drop()

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream0, stream1 = two_outputs(scope, stream, logic)
        stream0.inspect_batch(lambda t, r: sent.append((t, sorted(r))))
        return handle, stream0.concat(stream1).probe()

    await run_one(build, [(2, [1, 2])])
    assert sent == [(2, [1, 2]), (4, [10, 20])]
    messages = dict(errors)
    assert list(messages) == [
        "other output",
        "retain other",
        "earlier",
        "no output",
        "forward",
        "wrong output",
        "wrong session",
        "dropped",
        "dropped single",
    ]
    assert "input 0 does not reach output 1" in messages["other output"]
    assert "input 0 does not reach output 1" in messages["retain other"]
    assert "a record at 2 on input 0 cannot grant a capability at 1" in messages["earlier"]
    assert "there is no output 2" in messages["no output"]
    assert "does not reach output 1 unchanged" in messages["forward"]
    assert (
        "a capability for output 0 of TwoOutputs cannot send on output 1"
        in (messages["wrong output"])
    )
    assert "cannot send on output 1" in messages["wrong session"]
    assert messages["dropped"] == "capability was dropped"
    assert messages["dropped single"] == "capability was dropped"


async def test_capability_error_in_logic_ends_execute() -> None:
    """Left uncaught, the misuse ends the run with the error itself."""

    def logic(input: Any, _out0: Any, out1: Any, initial: list[Any]) -> None:
        for capability in initial:
            if not capability.dropped:
                capability.drop()
        for capability, records in input:
            out1.give_batch(capability.retain(1), records)

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        stream0, stream1 = two_outputs(scope, stream, logic)
        return handle, stream0.concat(stream1).probe()

    with pytest.raises(CapabilityError, match="does not reach output 1"):
        await run_one(build, [(0, [1])])


# ---------------------------------------------------------------------- inputs


async def test_input_handle_misuse() -> None:
    async def work(worker: Worker) -> list[str]:
        errors: list[str] = []
        handle, _stream = worker.dataflow(lambda scope: scope.new_input())
        handle.advance_to(3)
        with pytest.raises(ValueError, match="from 3 to the earlier 2") as caught:
            handle.advance_to(2)
        errors.append(str(caught.value))
        assert handle.time == 3
        with pytest.raises(ValueError, match="outside"):
            handle.advance_to(2**64)
        with pytest.raises(TypeError, match="not a timestamp"):
            handle.advance_to("4")
        handle.advance_to(3)  # the same time is fine
        handle.send(1)
        handle.close()
        assert handle.closed
        handle.close()  # closing twice is harmless
        for action in (
            lambda: handle.send(2),
            lambda: handle.send_batch([2]),
            lambda: handle.advance_to(4),
            lambda: handle.time,
        ):
            with pytest.raises(InputClosed, match="the input is closed"):
                action()
        return errors

    [errors] = await within(execute(work, workers=1))
    assert errors == ["cannot advance an input from 3 to the earlier 2"]


# ---------------------------------------------------------------------- construction


def test_feedback_must_advance_time() -> None:
    def root(scope: Any) -> Any:
        with pytest.raises(ValueError, match="must advance time, and 0 does not"):
            scope.feedback(0)
        return None

    def iterative(scope: Any) -> Any:
        inner = scope.iterative()
        with pytest.raises(ValueError, match=r"Product\(outer=0, inner=0\) does not"):
            inner.feedback(Product(0, 0))
        return None

    build_alone(root)
    build_alone(iterative)


def hand_built_cycle(scope: Any, summary: Hashable | None) -> None:
    """A -> B -> A with OperatorBuilder; A's input reaches its output with ``summary``."""
    a = OperatorBuilder(scope, "A")
    _a_out, a_stream = a.new_output()
    b = OperatorBuilder(scope, "B")
    b.new_input(a_stream)
    _b_out, b_stream = b.new_output()
    a.new_input(b_stream, connection=None if summary is None else {0: summary})

    def constructor(capabilities: list[Any]) -> Callable[[], None]:
        for capability in capabilities:
            capability.drop()
        return lambda: None

    b.build(constructor)
    a.build(constructor)
    assert (a.index, b.index) == (1, 2)


def test_cycle_without_increment_is_refused() -> None:
    with pytest.raises(CycleError) as caught:
        build_alone(lambda scope: hand_built_cycle(scope, None))
    assert sorted(caught.value.transitions) == sorted(
        [
            (Source(1, 0), Target(2, 0)),
            (Target(2, 0), Source(2, 0)),
            (Source(2, 0), Target(1, 0)),
            (Target(1, 0), Source(1, 0)),
        ]
    )
    message = str(caught.value)
    assert message.startswith("cycle without timestamp increment through: ")
    for step in ("Source(1, 0)->Target(2, 0)", "Target(2, 0)->Source(2, 0)"):
        assert step in message
    for step in ("Source(2, 0)->Target(1, 0)", "Target(1, 0)->Source(1, 0)"):
        assert step in message


def test_hand_built_cycle_with_increment_is_accepted() -> None:
    build_alone(lambda scope: hand_built_cycle(scope, 1))


async def build_a_cycle(worker: Worker) -> None:
    worker.dataflow(lambda scope: hand_built_cycle(scope, 0))


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_cycle_error_ends_execute(layout: Layout, clusters: Clusters) -> None:
    before = asyncio.all_tasks()
    with pytest.raises(CycleError, match="cycle without timestamp increment"):
        await clusters.run(layout, build_a_cycle)
    assert asyncio.all_tasks() == before


def test_streams_stay_in_their_scope() -> None:
    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        region = scope.region()
        inner = region.region()
        with pytest.raises(ValueError, match="nested directly"):
            stream.enter(inner)
        with pytest.raises(ValueError, match="nested scope"):
            stream.leave()
        handle, loop = scope.feedback(1)
        loop.connect_loop(handle)
        with pytest.raises(RuntimeError, match="already connected"):
            loop.connect_loop(handle)
        return None

    build_alone(build)


def test_operator_reading_another_scopes_stream_is_refused() -> None:
    def build(scope: Any) -> Any:
        _handle, stream = scope.new_input()
        OperatorBuilder(scope.region(), "Wrong").new_input(stream)

    with pytest.raises(ValueError, match=r"stream belongs to another scope; use enter\(\)"):
        build_alone(build)


async def test_execute_checks_its_fabric() -> None:
    with pytest.raises(ValueError, match="workers must be at least 1"):
        Fabric(0)

    async def work(_worker: Worker) -> None:
        return None

    with pytest.raises(ValueError, match="connects 2 workers, not 3"):
        await execute(work, workers=3, fabric=Fabric(2))


# ---------------------------------------------------------------------- failures


class Boom(Exception):
    pass


async def explode_on(worker: Worker, where: str) -> None:
    culprit = worker.peers - 1

    def explode(x: int) -> int:
        raise Boom(f"bad record {x} on worker {worker.index}")

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        return handle, stream.map(explode).probe()

    handle, probe = worker.dataflow(build)
    if where == "every worker":
        handle.send(7)
    elif worker.index == culprit:
        await asyncio.sleep(0.01)  # the others are parked, waiting for this one
        handle.send(7)
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))


@pytest.mark.parametrize("layout", layouts(1, 3))
@pytest.mark.parametrize("where", ["every worker", "last worker only"])
async def test_operator_exception_ends_execute_and_leaves_no_task(
    layout: Layout, where: str, clusters: Clusters
) -> None:
    """Across processes the failing process's error is raised, not the others' PeerLost."""
    before = asyncio.all_tasks()
    with pytest.raises(Boom) as caught:
        await clusters.run(layout, explode_on, where)
    assert type(caught.value) is Boom  # the exception itself, not a group
    if where == "every worker":
        assert re.fullmatch(r"bad record 7 on worker \d", str(caught.value))
    else:
        assert str(caught.value) == f"bad record 7 on worker {layout.peers - 1}"
    assert asyncio.all_tasks() == before


async def fail_in_function(worker: Worker) -> None:
    handle, probe = worker.dataflow(lambda scope: (lambda h, s: (h, s.probe()))(*scope.new_input()))
    if worker.index == 0:
        await asyncio.sleep(0.01)
        raise Boom("worker function failed")
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))


@pytest.mark.parametrize("layout", layouts(1, 3))
async def test_exception_in_worker_function_ends_execute(
    layout: Layout, clusters: Clusters
) -> None:
    before = asyncio.all_tasks()
    with pytest.raises(Boom) as caught:
        await clusters.run(layout, fail_in_function)
    assert str(caught.value) == "worker function failed"
    assert asyncio.all_tasks() == before


# ---------------------------------------------------------------------- parking


PARKED = 20
"""At most this many rounds for a worker that waits 60 ms for the others, or for the
dataflow to complete once its function returned: a few per progress message it receives.
One that spins instead runs thousands."""


def count_steps(worker: Worker) -> dict[str, int]:
    """Count this worker's rounds (``step_nowait`` calls), into the dict returned."""
    calls = {"steps": 0}
    original = worker.step_nowait

    def counting() -> bool:
        calls["steps"] += 1
        return original()

    worker.step_nowait = counting  # type: ignore[method-assign]
    return calls


async def wait_for_worker_zero(worker: Worker) -> dict[str, int] | None:
    calls = count_steps(worker)
    handle, probe = worker.dataflow(lambda scope: (lambda h, s: (h, s.probe()))(*scope.new_input()))
    if worker.index == 0:
        await asyncio.sleep(0.06)
    handle.advance_to(1)
    await worker.step_while(lambda: probe.less_than(1))
    return None if worker.index == 0 else calls


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_waiting_worker_parks(layout: Layout, clusters: Clusters) -> None:
    """The others wait 60 ms for worker 0's input (in this process or another): they must
    wait, not spin. Each counts its own rounds over the whole run."""
    results = await clusters.run(layout, wait_for_worker_zero)
    assert results[0] is None
    for calls in results[1:]:
        assert calls is not None and calls["steps"] < PARKED, results


async def finish_at_once(worker: Worker) -> dict[str, int] | None:
    calls = count_steps(worker)
    worker.dataflow(lambda scope: scope.new_input())
    if worker.index == 0:
        # Returns now: from here on execute steps it until the dataflow completes, and
        # the dict returned holds the count once the run is over.
        calls["steps"] = 0
        return calls
    await asyncio.sleep(0.06)
    return None


@pytest.mark.parametrize("layout", layouts(2, 4))
async def test_finished_worker_parks_while_others_work(layout: Layout, clusters: Clusters) -> None:
    """Worker 0's function returns at once; it then waits 60 ms for the others (in this
    process or another) without spinning: its rounds after returning are counted."""
    results = await clusters.run(layout, finish_at_once)
    assert results[1:] == [None] * (layout.peers - 1)
    assert results[0]["steps"] < PARKED, results
