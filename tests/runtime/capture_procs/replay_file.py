"""Process B: replay event files on some workers and report what arrives, as JSON lines.

    python tests/runtime/capture_procs/replay_file.py PATH [PATH ...] --workers M

The files are read with :class:`FileEventReader` (they may not exist yet, or still be being
written). Printed, one JSON object a line, as it happens:

* ``{"frontier": [...]}`` each time worker 0's probe moves (first at build: ``[0]``);
* ``{"time": t, "records": [...]}`` for every batch that reaches any worker;
* ``{"violation": "..."}`` if a batch arrives at a time some probe had already passed;

and at the end ``{"result": {"records": [[t, sorted records], ...], "frontiers": [...]}}``
with the records by time and every worker's final frontier.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from operators import Worker, run
from operators.capture import FileEventReader


def emit(value: Any) -> None:
    print(json.dumps(value), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    arrived: dict[int, list[Any]] = {}
    probes: dict[int, Any] = {}

    def on_batch(time: int, records: list[Any]) -> None:
        for index, probe in probes.items():
            if not probe.less_equal(time):
                emit({"violation": f"records at {time} after worker {index} passed it"})
        arrived.setdefault(time, []).extend(records)
        emit({"time": time, "records": records})

    async def work(worker: Worker) -> list[Any]:
        def build(scope: Any) -> Any:
            readers = [FileEventReader(path, poll_interval=0.005) for path in args.paths]
            return scope.replay_into(readers).inspect_batch(on_batch).probe()

        probe = worker.dataflow(build)
        probes[worker.index] = probe
        last = None
        while True:
            frontier = sorted(probe.frontier())
            if worker.index == 0 and frontier != last:
                emit({"frontier": frontier})
                last = frontier
            if probe.done():
                return frontier
            await worker.step()

    frontiers = run(work, workers=args.workers)
    records = [[t, sorted(arrived[t])] for t in sorted(arrived)]
    emit({"result": {"records": records, "frontiers": frontiers}})


if __name__ == "__main__":
    main()
