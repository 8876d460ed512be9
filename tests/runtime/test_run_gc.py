"""``run()`` tunes the garbage collector while dataflows run, and restores it afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from api.cli import GC_GEN0_THRESHOLD as SERVER_GC_GEN0_THRESHOLD
from operators import Worker, run
from operators.runtime.worker import GC_GEN0_THRESHOLD, collecting_rarely


@pytest.fixture
def collector() -> Iterator[None]:
    """Default settings before each test, and the test's own put back after it."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if not enabled:
            gc.disable()


def seen_inside(worker: Worker) -> Any:
    """What a worker sees of the collector while it runs a dataflow."""

    async def look() -> tuple[tuple[int, int, int], bool, bool]:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            return handle, stream.map(lambda x: x + 1).probe()

        handle, probe = worker.dataflow(build)
        handle.send_batch([1])
        handle.close()
        await worker.step_while(lambda: not probe.done())
        return gc.get_threshold(), gc.get_freeze_count() > 0, gc.isenabled()

    return look()


def test_run_collects_rarely_and_freezes_what_was_there(collector: None) -> None:
    before = [object() for _ in range(10)]
    inside = run(seen_inside, workers=2)
    assert inside == [((GC_GEN0_THRESHOLD, 20, 20), True, True)] * 2
    assert GC_GEN0_THRESHOLD == SERVER_GC_GEN0_THRESHOLD  # as the server does
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == ((700, 10, 10), 0, True)
    assert len(before) == 10


def test_settings_are_restored_when_the_run_fails(collector: None) -> None:
    async def failing(_worker: Worker) -> None:
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 20, 20)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run(failing)
    assert (gc.get_threshold(), gc.get_freeze_count()) == ((700, 10, 10), 0)


def test_a_program_that_manages_its_collector_is_left_alone(collector: None) -> None:
    gc.set_threshold(1234, 5, 6)
    gc.freeze()  # as the server does at startup
    frozen = gc.get_freeze_count()
    assert run(seen_inside) == [((1234, 5, 6), True, True)]
    assert (gc.get_threshold(), gc.get_freeze_count()) == ((1234, 5, 6), frozen)
    gc.unfreeze()
    gc.disable()
    with collecting_rarely():
        assert (gc.get_threshold(), gc.isenabled()) == ((1234, 5, 6), False)
    assert not gc.isenabled()
