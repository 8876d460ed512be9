"""Process A: run the known dataflow and capture each worker's stream into an event file.

    python tests/runtime/capture_procs/capture_file.py PATTERN --workers K
        [--interval SECONDS] [--pause-at T]

Worker ``w`` captures into ``PATTERN.format(w)`` with a :class:`FileEventWriter`. With
``--interval`` each worker sleeps that long after each time, so a reader sees the file grow.
With ``--pause-at T`` every worker stops once its file shows the frontier ``[T]``; it then
sends its records at ``T`` and writes only the first half of their frame, prints ``paused``
(once, when every worker is there) and waits for a line ``go`` on stdin before writing the
rest of that frame and carrying on. It prints ``done`` at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from operators import Worker, run
from operators.capture import Event, FileEventWriter, Messages, frame
from tests.runtime.capture_procs.known import TIMES, history_frontier, records_for


class HoldBack:
    """A file pusher that can leave a frame half written (a reader sees a partial frame).

    Events go through a :class:`FileEventWriter`, except while ``holding``: the first event
    pushed then is written half (with a separate append handle), and it and anything after
    it wait in ``rest`` until :meth:`release`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.writer = FileEventWriter(path)
        self.events: list[Event] = []
        self.holding = False
        self.rest = b""

    def push(self, event: Event) -> None:
        self.events.append(event)
        if not self.holding:
            self.writer.push(event)
            return
        data = frame(event)
        if not self.rest:
            self.writer.flush()
            cut = len(data) // 2
            with open(self.path, "ab") as file:
                file.write(data[:cut])
            data = data[cut:]
        self.rest += data

    def flush(self) -> None:
        if not self.holding:
            self.writer.flush()

    def release(self) -> None:
        self.holding = False
        with open(self.path, "ab") as file:
            file.write(self.rest)
        self.rest = b""

    def records_at(self, time: int) -> int:
        return sum(
            len(e.records) for e in self.events if isinstance(e, Messages) and e.time == time
        )

    def close(self) -> None:
        self.writer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pattern")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--interval", type=float, default=0.0)
    parser.add_argument("--pause-at", type=int, default=None)
    args = parser.parse_args()
    pushers = [HoldBack(args.pattern.format(w)) for w in range(args.workers)]
    paused: list[int] = []
    go = asyncio.Event()

    async def work(worker: Worker) -> None:
        pusher = pushers[worker.index]

        def build(scope: Any) -> Any:
            handle, stream = scope.new_input()
            stream.capture_into(pusher)
            return handle, stream.probe()

        handle, probe = worker.dataflow(build)
        for t in range(TIMES):
            records = records_for(worker.index, t)
            if t == args.pause_at:
                await pause(worker, pusher, handle, t, records)
            else:
                handle.send_batch(records)
            handle.advance_to(t + 1)
            await worker.step_while(lambda: probe.less_than(handle.time))
            if args.interval:
                await asyncio.sleep(args.interval)
        handle.close()
        await worker.step_while(lambda: not probe.done())

    async def pause(
        worker: Worker, pusher: HoldBack, handle: Any, time: int, records: list[Any]
    ) -> None:
        await worker.step_while(lambda: history_frontier(pusher.events) != [time])
        pusher.holding = True
        handle.send_batch(records)
        await worker.step_while(lambda: pusher.records_at(time) < len(records))
        paused.append(worker.index)
        if len(paused) == worker.peers:
            print("paused", flush=True)
            loop = asyncio.get_running_loop()
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if line.strip() != "go":
                raise SystemExit(f"expected go, got {line!r}")
            for other in pushers:
                other.release()
            go.set()
        await go.wait()

    try:
        run(work, workers=args.workers)
    finally:
        for pusher in pushers:
            pusher.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
