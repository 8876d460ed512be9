"""An input port hands out batches until its worker's time slice is spent, then runs again.

A producer that sends many times before the workers step leaves many batches queued at an
operator. The port hands them out while the slice lasts (at least one per run); the rest
stay in flight, holding the frontier at their times, and the operator is scheduled again
for them in a later step. Tests set the slice's deadline from inside the logic, so what
"spent" means does not depend on the machine's speed.
"""

from typing import Any

import pyarrow as pa
import pytest

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, run
from operators.runtime import Columns

BATCHES = 6


def _recording(expire: bool, runs: list[list[Any]], kind: str) -> Any:
    def constructor(capability: Any, info: Any) -> Any:
        capability.drop()
        worker = info.scope.worker

        def logic(input: Any, output: Any) -> None:
            taken: list[Any] = []
            batches = input.containers() if kind == "containers" else input.batches()
            for time, batch in batches:
                taken.append(time)
                output.forward(time, batch)
                if expire:
                    worker.slice_deadline = 0.0  # spent: the port stops after this batch
            if taken:
                runs.append(taken)

        return logic

    return constructor


@pytest.mark.parametrize("kind", ["batches", "containers"])
@pytest.mark.parametrize("expire", [False, True])
def test_a_spent_slice_leaves_the_rest_for_the_next_run(expire: bool, kind: str) -> None:
    runs: list[list[Any]] = []
    seen: list[Any] = []
    passed: list[Any] = []

    async def work(worker: Worker) -> None:
        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            out = stream.unary(_recording(expire, runs, kind), name="Recording")
            return handle, out.inspect_batch(lambda t, rs: seen.append((t, rs))).probe()

        handle, probe = worker.dataflow(build)
        for t in range(BATCHES):
            handle.send_batch(Columns(pa.array([t, t])) if t % 2 else [t])
            handle.advance_to(t + 1)
        handle.close()
        while not probe.done():
            passed.append((sorted(probe.frontier()), len(seen)))
            await worker.step()

    run(work)
    if expire:
        assert runs == [[t] for t in range(BATCHES)]  # one batch per run, in order
    else:
        assert runs == [list(range(BATCHES))]
    assert seen == [(t, [t, t] if t % 2 else [t]) for t in range(BATCHES)]
    # The batches still queued held the frontier: it never passed a time before its batch.
    for frontier, arrived in passed:
        assert not frontier or frontier[0] <= arrived
