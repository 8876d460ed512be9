"""Benchmark of capture to a file and replay from it, and of the Sequencer.

What it measures (every dataflow runs on a fresh uvloop loop through ``execute``, every timed
run starts after its dataflow is built, with a ``gc.collect()`` just before):

* **C -- capture to a file, and replay.** 1,000,000 records, plain ``int`` s (record ``i``
  is the integer ``i``), in 1,000 batches of 1,000: time ``t`` carries one batch, sent with
  one ``send_batch`` then ``advance_to(t + 1)`` (the lists are built before timing). 1 worker.

  - *capture*: ``input -> capture_into(FileEventWriter(tmp))``, with a probe on the input.
    Timed from the first ``send_batch`` until the probe on the input is done **and** the
    capture operator has pushed the event that empties the captured frontier (a probe on
    the input says nothing about the capture having run: it is the input's own frontier,
    which passes the end as soon as the input is closed). The writer is closed after,
    untimed; it writes (and flushes to the OS) at the end of every run of the operator.
    Two ways of feeding, each a row:

    - ``live``: after each time, step until the capture has recorded that time complete
      (as a capture of a running dataflow sees it): one messages and one progress event per
      time, 2,001 events.
    - ``bulk``: every time is sent and advanced without stepping, the input is closed, then
      the worker steps until the end (as ``bench/runtime.py`` W1 feeds): the progress
      collapses to one event, 1,001 events.

  - *replay*: a fresh dataflow ``replay_into([FileEventReader(tmp)]) -> inspect_batch ->
    probe`` on the file just captured (the inspect counts the records and keeps the
    batches for the check), timed from the dataflow being built until the probe is done.
    It includes reading the file (one ``read`` of the whole file, on the replay's first
    run) and decoding every frame into an event.

  - *raw*, in the same run, on the same events: ``write`` is a plain loop over the events'
    JSON objects (decoded from the captured file before timing), ``orjson.dumps`` each, the
    4-byte little-endian length prefix, ``file.write`` (buffered) -- it must produce the
    captured file byte for byte; ``read`` reads that file back in one ``read``, splits the
    frames and ``orjson.loads`` each. The engine's cost is given as a ratio of times,
    engine / raw (how many times the raw loop's time the engine takes). The engine also
    builds the JSON objects from its ``Messages``/``Progress`` events and back, which the
    raw loop does not.

  Reported: events/s, records/s and MB/s (of the file), median (best) over repeats. Every
  run is checked untimed: the captured file holds exactly the sent batches at their times
  and a history that ends with an empty frontier, and the replay hands out exactly those
  records at those times.

* **S -- the Sequencer** (``operators.sync.Sequencer``; the section is skipped, with a note,
  if ``operators/sync/sequencer.py`` is not there or does not import). With 2 and 4
  workers (coroutines on one event loop, one thread), every worker pushes ``N`` items
  ``(worker, i, perf_counter_ns())`` and reads with ``next()`` between its steps until it
  has read all ``N x workers``; the latency of an item on a worker is the moment it was read
  there minus the moment it was pushed (one sample per item and reading worker). Items/s is
  ``N x workers`` over the time from the start line (every worker built its sequencer) to
  the last worker having read everything. The load is a row each:

  - ``ping``: one item in flight: item ``g`` is pushed by worker ``g % workers`` once that
    worker has read item ``g - 1`` (the latency of an otherwise idle sequencer);
  - ``k/step``: each worker pushes ``k`` items (1, 10, 100) before each of its steps;
  - ``burst``: each worker pushes all ``N`` before its first step (the latency is then
    mostly queueing).

  Every run is checked untimed: every worker read the same sequence, holding each item
  once, each worker's items in the order it pushed them.

Each measurement is repeated (``--repeats``; by default 9 for C, whose runs last tens of
milliseconds, and 5 for S; ``--quick``: 1 repeat and small sizes), repeats interleave the
engine runs with their baselines, and the median over repeats is reported with the best in
brackets. The garbage collector stays enabled in timed regions unless ``--no-gc``. A run
that takes more than ``--timeout`` seconds is reported as a hang. Files go to a temporary
directory (``--dir`` to choose where; the default is the system's, often a disk, whose page
cache takes the writes: nothing is ``fsync``-ed).

Run from the repository root::

    .venv/bin/python bench/capture.py                 # full run, well under a minute
    .venv/bin/python bench/capture.py --quick         # smoke run, seconds
    .venv/bin/python bench/capture.py --only C --json bench/results/capture.json
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Stat, percentile, table  # bench/common.py (the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
import uvloop

from operators import Worker, execute  # the public names: loads every operator
from operators.capture import Event, FileEventReader, FileEventWriter, Messages, Progress
from operators.capture.event import FRAME_HEADER, decode_event
from operators.progress import MutableAntichain

SECTIONS = ("C", "S")
DEFAULT_REPEATS = {"C": 9, "S": 5}  # C's runs are short: more repeats steady its medians
REPO = Path(__file__).resolve().parent.parent
SEQUENCER_FILE = REPO / "operators" / "sync" / "sequencer.py"
UVLOOP_VERSION: str = getattr(uvloop, "__version__", "?")
CPU_SHARE_WARNING = 0.9  # below this share of a CPU for a section, say the run was contended


# --------------------------------------------------------------------------- helpers


class Options:
    """Run-wide settings the sections share."""

    def __init__(self, gc_off: bool, timeout: float, directory: Path) -> None:
        self.gc_off = gc_off
        self.timeout = timeout
        self.directory = directory
        self._files = 0

    def new_path(self, stem: str) -> Path:
        """A path in the temporary directory that no run has used (writers append)."""
        self._files += 1
        return self.directory / f"{stem}-{self._files}.events"


class EngineHang(RuntimeError):
    """An engine run did not finish within ``--timeout``."""


class Start:
    """A start line: the last worker to finish building collects garbage and starts the clock.

    Every worker awaits :meth:`wait` after building its dataflows; the timed region starts
    when all have arrived, so no worker's construction is timed.
    """

    def __init__(self, workers: int, options: Options) -> None:
        self.waiting = workers
        self.options = options
        self.event = asyncio.Event()
        self.ns = 0

    async def wait(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            gc.collect()
            if self.options.gc_off:
                gc.disable()
            self.ns = time.perf_counter_ns()
            self.event.set()
        else:
            await self.event.wait()


def run_engine(
    make: Callable[[Start], Callable[[Worker], Awaitable[Any]]],
    workers: int,
    options: Options,
    what: str,
) -> tuple[int, list[Any]]:
    """Run ``make(start)`` on ``workers`` workers on a fresh uvloop loop.

    Returns the start time (ns, from the start line) and the workers' results.
    """

    async def main() -> tuple[int, list[Any]]:
        start = Start(workers, options)
        try:
            async with asyncio.timeout(options.timeout):
                results = await execute(make(start), workers)
        except TimeoutError:
            raise EngineHang(
                f"{what} with {workers} worker(s) did not finish within {options.timeout:g} s"
            ) from None
        return start.ns, results

    gc.collect()
    try:
        return uvloop.run(main())
    finally:
        gc.enable()


def timed(fn: Callable[[], Any], options: Options) -> tuple[int, Any]:
    """Run a baseline after ``gc.collect()`` (gc off if ``--no-gc``); (elapsed ns, result)."""
    gc.collect()
    if options.gc_off:
        gc.disable()
    try:
        begin = time.perf_counter_ns()
        result = fn()
        elapsed = time.perf_counter_ns() - begin
    finally:
        gc.enable()
    return elapsed, result


# --------------------------------------------------------------------------- C: capture


Batches = list[list[int]]
PerTime = dict[Hashable, list[Any]]  # time -> records, in the order they came


class CaptureWriter(FileEventWriter):
    """A :class:`FileEventWriter` that also follows the frontier of the captured history.

    The capture operator has no output to probe; the frontier it has recorded tells the
    benchmark when the capture has seen a time complete (``recorded.less_than(t)`` false)
    and when it has written its last event (``recorded.is_empty()``).
    """

    def __init__(self, path: Path, minimum: Hashable = 0) -> None:
        super().__init__(path)
        self.recorded: MutableAntichain[Hashable] = MutableAntichain([(minimum, 1)])
        self.events = 0

    def push(self, event: Event) -> None:
        super().push(event)
        self.events += 1
        if type(event) is Progress:
            self.recorded.update_iter(event.changes)


def capture_engine(batches: Batches, path: Path, live: bool, options: Options) -> int:
    """One timed capture of ``batches`` into ``path`` (a new file); the elapsed ns."""

    def make(start: Start) -> Callable[[Worker], Awaitable[int]]:
        async def work(worker: Worker) -> int:
            writer = CaptureWriter(path)

            def build(scope: Any) -> Any:
                handle, stream = scope.new_input()
                stream.capture_into(writer)
                return handle, stream.probe()

            handle, probe = worker.dataflow(build)
            recorded = writer.recorded
            await start.wait()
            for t, batch in enumerate(batches):
                handle.send_batch(batch)
                handle.advance_to(t + 1)
                if live:
                    await worker.step_while(functools.partial(recorded.less_than, t + 1))
            handle.close()
            await worker.step_while(lambda: not (probe.done() and recorded.is_empty()))
            end = time.perf_counter_ns()
            writer.close()
            return end

        return work

    start_ns, ends = run_engine(make, 1, options, "capture")
    end: int = ends[0]
    return end - start_ns


def replay_engine(path: Path, options: Options) -> tuple[int, int, PerTime]:
    """One timed replay of ``path``: elapsed ns, records counted, and the records per time."""
    seen: PerTime = {}
    count = [0]

    def inspect(time_: Hashable, records: list[Any]) -> None:
        count[0] += len(records)
        if time_ in seen:
            seen[time_].extend(records)
        else:
            seen[time_] = list(records)

    def make(start: Start) -> Callable[[Worker], Awaitable[int]]:
        async def work(worker: Worker) -> int:
            def build(scope: Any) -> Any:
                return scope.replay_into([FileEventReader(path)]).inspect_batch(inspect).probe()

            probe = worker.dataflow(build)
            await start.wait()
            await worker.step_while(lambda: not probe.done())
            return time.perf_counter_ns()

        return work

    start_ns, ends = run_engine(make, 1, options, "replay")
    return ends[0] - start_ns, count[0], seen


def split_frames(data: bytes) -> list[bytes]:
    """The payloads of the frames in ``data`` (untimed helper)."""
    payloads: list[bytes] = []
    position, header = 0, FRAME_HEADER.size
    while position < len(data):
        (length,) = FRAME_HEADER.unpack_from(data, position)
        payloads.append(data[position + header : position + header + length])
        position += header + length
    return payloads


def raw_write(objects: list[dict[str, Any]], path: Path) -> None:
    """The plain loop: ``orjson.dumps`` each event object, length prefix, buffered write."""
    dumps, pack = orjson.dumps, FRAME_HEADER.pack
    with open(path, "wb") as file:
        write = file.write
        for value in objects:
            payload = dumps(value)
            write(pack(len(payload)) + payload)


def raw_read(path: Path) -> list[Any]:
    """The plain loop: read the file, split the frames, ``orjson.loads`` each."""
    loads, unpack = orjson.loads, FRAME_HEADER.unpack_from
    header = FRAME_HEADER.size
    with open(path, "rb") as file:
        data = file.read()
    values: list[Any] = []
    append = values.append
    position, size = 0, len(data)
    while position < size:
        (length,) = unpack(data, position)
        end = position + header + length
        append(loads(data[position + header : end]))
        position = end
    return values


def check_captured(path: Path, batches: Batches) -> tuple[list[dict[str, Any]], PerTime]:
    """Untimed: the file's events hold exactly ``batches`` at their times and end complete.

    Returns the events' JSON objects (the raw loops' input) and the records per time.
    """
    payloads = split_frames(path.read_bytes())
    events = [decode_event(p) for p in payloads]
    captured: PerTime = {}
    frontier: MutableAntichain[Hashable] = MutableAntichain([(0, 1)])
    for event in events:
        if isinstance(event, Messages):
            if not frontier.less_equal(event.time):
                raise AssertionError(f"capture: messages at {event.time} after it was complete")
            captured.setdefault(event.time, []).extend(event.records)
        else:
            frontier.update_iter(event.changes)
    if not frontier.is_empty():
        raise AssertionError(f"capture: the history ends at {frontier.frontier()}, not empty")
    if captured != dict(enumerate(batches)):
        raise AssertionError("capture: the captured records differ from the ones sent")
    return [orjson.loads(p) for p in payloads], captured


@dataclass
class Timing:
    """Elapsed ns over repeats of one row, with what one run handles."""

    events: int = 0
    records: int = 0
    size: int = 0
    ns: Stat = field(default_factory=Stat)

    def rates(self) -> dict[str, dict[str, float]]:
        median, best = self.ns.median / 1e9, self.ns.best / 1e9
        return {
            name: {"median": amount / median, "best": amount / best}
            for name, amount in (
                ("events_per_s", self.events),
                ("records_per_s", self.records),
                ("bytes_per_s", self.size),
            )
        }

    def row(self, name: str, raw: Timing | None) -> list[str]:
        median, best = self.ns.median / 1e9, self.ns.best / 1e9

        def show(amount: float, scale: float) -> str:
            return f"{amount / median / scale:.2f} ({amount / best / scale:.2f})"

        ratio = f"{self.ns.median / raw.ns.median:.2f}x" if raw is not None else "1.00x"
        return [
            name,
            f"{self.events:,}",
            f"{median * 1e3:.1f} ({best * 1e3:.1f})",
            show(self.events, 1e3),
            show(self.records, 1e6),
            show(self.size, 1e6),
            ratio,
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "records": self.records,
            "bytes": self.size,
            "elapsed_ns": self.ns.as_json(),
            **self.rates(),
        }


def run_capture(args: argparse.Namespace, options: Options, repeats: int) -> dict[str, Any]:
    times, per = (100, 1_000) if args.quick else (1_000, 1_000)
    records = times * per
    batches: Batches = [list(range(t * per, (t + 1) * per)) for t in range(times)]
    modes = ("live", "bulk")

    # Warm-up (untimed): a tenth of the times, each way, captured and replayed.
    for live in (True, False):
        path = options.new_path("warm")
        capture_engine(batches[: max(1, times // 10)], path, live, options)
        replay_engine(path, options)
        path.unlink()

    rows: dict[str, Timing] = {
        f"{kind} {mode}": Timing(records=records)
        for kind in ("capture", "write", "replay", "read")
        for mode in modes
    }
    for _ in range(repeats):
        for mode in modes:
            path = options.new_path(f"capture-{mode}")
            elapsed = capture_engine(batches, path, mode == "live", options)
            objects, captured = check_captured(path, batches)
            size = path.stat().st_size
            for kind in ("capture", "write", "replay", "read"):
                rows[f"{kind} {mode}"].events = len(objects)
                rows[f"{kind} {mode}"].size = size
            rows[f"capture {mode}"].ns.values.append(elapsed)

            raw_path = options.new_path(f"raw-{mode}")
            elapsed, _ = timed(functools.partial(raw_write, objects, raw_path), options)
            rows[f"write {mode}"].ns.values.append(elapsed)
            if raw_path.read_bytes() != path.read_bytes():
                raise AssertionError(f"the raw write ({mode}) differs from the captured file")

            elapsed, count, replayed = replay_engine(path, options)
            if count != records or replayed != captured:
                raise AssertionError(
                    f"replay ({mode}): {count:,} records, not the {records:,} captured ones "
                    "at their times"
                )
            rows[f"replay {mode}"].ns.values.append(elapsed)

            elapsed, values = timed(functools.partial(raw_read, raw_path), options)
            if values != objects:
                raise AssertionError(f"the raw read ({mode}) differs from the captured events")
            rows[f"read {mode}"].ns.values.append(elapsed)
            path.unlink()
            raw_path.unlink()

    labels = {
        "capture live": ("engine capture, live", "write live"),
        "capture bulk": ("engine capture, bulk", "write bulk"),
        "write live": ("raw write, live events", None),
        "write bulk": ("raw write, bulk events", None),
        "replay live": ("engine replay, live file", "read live"),
        "replay bulk": ("engine replay, bulk file", "read bulk"),
        "read live": ("raw read, live file", None),
        "read bulk": ("raw read, bulk file", None),
    }
    table_rows = [
        rows[key].row(label, rows[raw] if raw else None) for key, (label, raw) in labels.items()
    ]
    ratios = {
        key: rows[key].ns.median / rows[raw].ns.median
        for key, (_, raw) in labels.items()
        if raw is not None
    }
    text = [
        f"C: capture to a file and replay, {records:,} int records in {times:,} batches of "
        f"{per:,} (one per time), 1 worker; file in {options.directory}; median (best) of "
        f"{repeats}; every run verified",
        table(
            ["", "events", "ms", "k events/s", "M records/s", "MB/s", "time vs raw"],
            table_rows,
        ),
        "live: each time captured before the next is sent (1 messages + 1 progress event per "
        "time); bulk: all sent, then stepped (1 progress event in all)",
        "time vs raw: engine time / the plain orjson loop's time on the same events "
        "(write: dumps + length prefix + file.write; read: file.read + split + loads)",
        f"capture costs {ratios['capture live']:.2f}x (live) and {ratios['capture bulk']:.2f}x "
        f"(bulk) the raw write; replay costs {ratios['replay live']:.2f}x (live file) and "
        f"{ratios['replay bulk']:.2f}x (bulk file) the raw read",
    ]
    summary = []
    for mode in modes:
        capture, replay = rows[f"capture {mode}"], rows[f"replay {mode}"]
        summary.append(
            f"C {mode}: capture {records / (capture.ns.median / 1e9) / 1e6:.2f}M records/s, "
            f"{ratios[f'capture {mode}']:.2f}x the raw write's time; replay "
            f"{records / (replay.ns.median / 1e9) / 1e6:.2f}M records/s, "
            f"{ratios[f'replay {mode}']:.2f}x the raw read's time"
        )
    document = {
        "records": records,
        "times": times,
        "batch": per,
        "record_type": "int",
        "directory": str(options.directory),
        "rows": {key: rows[key].as_json() for key in labels},
        "time_ratio_engine_to_raw": ratios,
    }
    return {"text": text, "summary": summary, "json": document, "failed": False}


# --------------------------------------------------------------------------- S: sequencer


@dataclass
class Load:
    """How the workers push: ``per_step`` items before each step (``0``: ping, one in flight;
    ``None``: all ``items`` at once)."""

    name: str
    per_step: int | None
    items: int  # per worker


@dataclass
class SequencerRow:
    rate: Stat = field(default_factory=lambda: Stat(higher_is_better=True))
    p50: Stat = field(default_factory=Stat)
    p99: Stat = field(default_factory=Stat)
    max: Stat = field(default_factory=Stat)

    def add(self, rate: float, latencies: list[int]) -> None:
        ordered = sorted(latencies)
        self.rate.values.append(rate)
        self.p50.values.append(percentile(ordered, 0.50) / 1e3)
        self.p99.values.append(percentile(ordered, 0.99) / 1e3)
        self.max.values.append(ordered[-1] / 1e3)

    def as_json(self) -> dict[str, Any]:
        return {
            "items_per_s": self.rate.as_json(),
            "latency_us": {k: getattr(self, k).as_json() for k in ("p50", "p99", "max")},
        }


Item = tuple[int, int, int]  # (pushing worker, its sequence number, perf_counter_ns at push)


def sequencer_engine(
    sequencer_type: Any, workers: int, load: Load, options: Options
) -> tuple[int, list[tuple[list[Item], list[int]]]]:
    """One timed run: elapsed ns, and per worker the items in the order read and latencies."""
    n = load.items
    total = n * workers
    clock = time.perf_counter_ns

    def make(start: Start) -> Callable[[Worker], Awaitable[tuple[int, list[Item], list[int]]]]:
        async def work(worker: Worker) -> tuple[int, list[Item], list[int]]:
            sequencer = sequencer_type(worker)
            index = worker.index
            read: list[Item] = []
            latencies: list[int] = []
            pushed = 0
            await start.wait()
            if load.per_step is None:
                for i in range(n):
                    sequencer.push((index, i, clock()))
                pushed = n
            while len(read) < total:
                if load.per_step == 0:
                    # Ping: item g (g = len(read)) is this worker's to push once it has read
                    # every earlier one; exactly one item is in flight at a time.
                    if len(read) % workers == index and len(read) // workers == pushed:
                        sequencer.push((index, pushed, clock()))
                        pushed += 1
                elif load.per_step is not None and pushed < n:
                    for i in range(pushed, min(n, pushed + load.per_step)):
                        sequencer.push((index, i, clock()))
                    pushed = min(n, pushed + load.per_step)
                item = sequencer.next()
                if item is not None:
                    now = clock()
                    while item is not None:
                        read.append(item)
                        latencies.append(now - item[2])
                        item = sequencer.next()
                    continue
                await worker.step()
            end = clock()
            sequencer.close()
            return end, read, latencies

        return work

    start_ns, results = run_engine(make, workers, options, f"sequencer ({load.name})")
    return max(r[0] for r in results) - start_ns, [(r[1], r[2]) for r in results]


def check_sequence(results: list[tuple[list[Item], list[int]]], workers: int, n: int) -> None:
    """Untimed: one same sequence on every worker, every item once, per sender in order."""
    first = [item[:2] for item in results[0][0]]
    for worker, (read, _) in enumerate(results):
        if [item[:2] for item in read] != first:
            raise AssertionError(f"sequencer: worker {worker} read another order than worker 0")
    if sorted(first) != [(w, i) for w in range(workers) for i in range(n)]:
        raise AssertionError("sequencer: the items read are not every pushed item once")
    for w in range(workers):
        mine = [i for sender, i in first if sender == w]
        if mine != sorted(mine):
            raise AssertionError(f"sequencer: worker {w}'s items came out of push order")


def load_sequencer() -> tuple[Any, str]:
    """The ``Sequencer`` class, or ``None`` and why the section is skipped."""
    if not SEQUENCER_FILE.exists():
        return None, f"{SEQUENCER_FILE.relative_to(REPO)} does not exist yet"
    try:
        module = importlib.import_module("operators.sync")
        return module.Sequencer, ""
    except Exception as problem:  # any failure to import means "skip"
        return None, f"operators.sync does not import: {type(problem).__name__}: {problem}"


def run_sequencer(args: argparse.Namespace, options: Options, repeats: int) -> dict[str, Any]:
    sequencer_type, why = load_sequencer()
    if sequencer_type is None:
        note = f"S: sequencer SKIPPED: {why}"
        return {"text": [note], "summary": [note], "json": {"skipped": why}, "failed": False}

    scale = 10 if args.quick else 1
    loads = [
        Load("ping", 0, 500 // scale),
        Load("1/step", 1, 2_000 // scale),
        Load("10/step", 10, 10_000 // scale),
        Load("100/step", 100, 20_000 // scale),
        Load("burst", None, 20_000 // scale),
    ]
    counts = (2, 4)
    for workers in counts:  # warm-up, untimed
        for load in loads:
            sequencer_engine(sequencer_type, workers, Load(load.name, load.per_step, 50), options)

    rows = {(w, load.name): SequencerRow() for w in counts for load in loads}
    for _ in range(repeats):
        for workers in counts:
            for load in loads:
                elapsed, results = sequencer_engine(sequencer_type, workers, load, options)
                check_sequence(results, workers, load.items)
                latencies = [x for _, samples in results for x in samples]
                rate = load.items * workers / (elapsed / 1e9)
                rows[(workers, load.name)].add(rate, latencies)

    table_rows = [
        [
            str(workers),
            load.name,
            f"{load.items:,}",
            rows[(workers, load.name)].rate.show(1e3, 1),
            rows[(workers, load.name)].p50.show(digits=0),
            rows[(workers, load.name)].p99.show(digits=0),
            rows[(workers, load.name)].max.show(digits=0),
        ]
        for workers in counts
        for load in loads
    ]
    text = [
        f"S: Sequencer, items pushed on every worker and read with next() on every worker "
        f"(one thread); median (best) of {repeats}; every run verified",
        table(
            ["workers", "load", "items/worker", "k items/s", "p50 µs", "p99 µs", "max µs"],
            table_rows,
        ),
        "items/s: distinct items (each read by every worker) / time until the last worker read "
        "all; latency: read - push, per (item, reading worker); ping: one item in flight, "
        "k/step: k pushes per worker before each step, burst: all pushed at the start",
    ]
    summary = [
        f"S {workers} workers: ping p50 {rows[(workers, 'ping')].p50.median:.0f} µs, p99 "
        f"{rows[(workers, 'ping')].p99.median:.0f} µs; burst "
        f"{rows[(workers, 'burst')].rate.median / 1e3:.1f}k items/s"
        for workers in counts
    ]
    document = {
        "loads": [
            {"name": load.name, "per_step": load.per_step, "items_per_worker": load.items}
            for load in loads
        ],
        "rows": {f"{w} workers, {name}": row.as_json() for (w, name), row in rows.items()},
    }
    return {"text": text, "summary": summary, "json": document, "failed": False}


# --------------------------------------------------------------------------- driver

RUNNERS = {"C": run_capture, "S": run_sequencer}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat, small sizes")
    parser.add_argument("--only", default=",".join(SECTIONS), help="C, S or C,S (default)")
    parser.add_argument("--repeats", type=int, help="repeats per measurement (default C: 9, S: 5)")
    parser.add_argument(
        "--no-gc", action="store_true", help="disable the garbage collector in timed regions"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds before an engine run counts as a hang (default 120; --quick: 20)",
    )
    parser.add_argument("--dir", type=Path, help="where to write the event files (a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)

    chosen = [s.strip().upper() for s in args.only.split(",") if s.strip()]
    if not chosen or any(s not in RUNNERS for s in chosen):
        parser.error(f"--only takes a comma-separated subset of {','.join(SECTIONS)}")
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    repeats = {
        name: args.repeats or (1 if args.quick else DEFAULT_REPEATS[name]) for name in chosen
    }
    timeout = args.timeout or (20.0 if args.quick else 120.0)

    print(
        f"capture/sequencer benchmark: "
        f"{', '.join(f'{name} x{repeats[name]}' for name in chosen)} repeat(s)"
        f"{', quick sizes' if args.quick else ''}, gc {'off' if args.no_gc else 'on'} in "
        f"timed regions; Python {platform.python_version()}, uvloop {UVLOOP_VERSION}, "
        f"orjson {orjson.__version__} on {platform.machine()}, {os.cpu_count()} CPUs, load "
        f"average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="frontier-bench-", dir=args.dir) as directory:
        options = Options(gc_off=args.no_gc, timeout=timeout, directory=Path(directory))
        for name in chosen:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                results[name] = RUNNERS[name](args, options, repeats[name])
            except (EngineHang, AssertionError) as problem:
                results[name] = {
                    "text": [f"{name}: FAILED: {problem}"],
                    "summary": [f"{name}: FAILED"],
                    "json": {"failed": str(problem)},
                    "failed": True,
                }
            failed = failed or results[name]["failed"]
            share = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
            results[name]["cpu_share"] = share
            if share < CPU_SHARE_WARNING:
                results[name]["text"].append(
                    f"NOTE: this process had only {share:.0%} of a CPU while running {name} "
                    f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs): other "
                    "processes competed for it, so these figures (latency tails above all) "
                    "are noisy"
                )
            elapsed = time.perf_counter() - started
            print(f"  {name} done ({elapsed:.0f} s)", file=sys.stderr, flush=True)
            print()
            print("\n".join(results[name]["text"]), flush=True)

    print()
    for name in chosen:
        for line in results[name]["summary"]:
            print(line, flush=True)

    if args.json:
        document = {
            "benchmark": "capture",
            "config": {
                "sections": chosen,
                "repeats": repeats,
                "quick": args.quick,
                "gc_in_timed_regions": not args.no_gc,
                "timeout_seconds": timeout,
            },
            "environment": {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "uvloop": UVLOOP_VERSION,
                "orjson": orjson.__version__,
                "machine": platform.machine(),
                "platform": platform.platform(),
            },
            "results": {name: results[name]["json"] for name in chosen},
            "cpu_share": {name: results[name]["cpu_share"] for name in chosen},
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
