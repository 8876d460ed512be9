"""Benchmark of the engine end to end: workers, operators, channels and progress together.

What it measures (every dataflow runs on a fresh uvloop loop through ``execute``, and every
timed run starts after its dataflow is built, with a ``gc.collect()`` just before):

* **W1 -- throughput of a keyed pipeline.** 2,000,000 records ``(key, value)`` with
  ``key = i % 1000, value = i`` over 100 times (20,000 records per time, one ``send_batch``
  per time; the lists are built before timing). Dataflow: ``map((k, v * 2))`` ->
  ``filter(k % 2 == 0)`` -> ``count_by(k)`` counting records per key per time -> probe. All
  times are fed (``advance_to(t + 1)`` after each), the input is closed, and the workers step
  until the probe is done. Reported in records/s with 1 and 2 workers (with 2, worker ``w``
  sends the records ``i`` with ``i % 2 == w``: the total is still 2M). Both workers are
  coroutines on one event loop (one thread), so 2 workers measure the cost of exchange and
  progress broadcast, not a speed-up. Timed from the moment every worker has built its
  dataflow to the moment the last one sees its probe done. In the same run:

  - ``plain``: the plain Python loop doing the same work on the same lists (per time, a
    ``defaultdict(int)``; per record ``value * 2`` and, if the key is even,
    ``counts[key] += 1``). The engine's rate is also given as a ratio to it.
  - ``floor``: the same user functions applied the way separate operators apply them (per
    batch, ``list(map(...))`` and ``list(filter(...))``, then ``Counter(map(key, ...))``) with
    no engine around them: what is left between it and the engine is the engine's own cost.
  - ``fused floor``: the same, the way a fused chain applies them (``list(filter(keep,
    map(f, batch)))``, one list): the least the user functions cost called as Python calls
    per record, whatever the engine does around them.

  Every timed engine run is checked, outside the timed region, to produce exactly the plain
  loop's counts per key per time. Targets: >= 1.5M records/s on 1 worker, and >= 0.5x the
  plain loop.

* **W2 -- latency of one time through a pipeline.** 1 worker, input -> map -> filter (keeps
  all) -> map -> probe; 100 warm-up times, then 1,000 measured times of 100 integers each, fed
  one at a time: after ``send_batch``, the latency runs from just before ``advance_to(t + 1)``
  to the moment the probe no longer ``less_than(t + 1)`` (driven by
  ``worker.step_while(lambda: probe.less_than(t + 1))``), timed with ``perf_counter_ns``.
  Reported: p50, p99, mean and max per time. Targets: p50 <= 80 µs, p99 <= 160 µs. Baselines
  in the same run: ``await asyncio.sleep(0)`` on the same loop (one event-loop round trip,
  which every ``Worker.step`` takes), and a plain function doing the same map/filter/map on
  100 records (p50 of each). The pipeline's output is checked once, untimed.

* **W3 -- a loop in an iterative scope.** 100,000 records ``(value, 0)`` enter an iterative
  scope (10 ``send_batch`` of 10,000 at time 0); inside, ``enter.concat(feedback)`` ->
  ``map((value + 1, passes + 1))``; records with ``passes < 10`` go back through the
  ``Product(0, 1)`` feedback, the others leave the scope and reach the probe outside. Every
  record goes around exactly 10 times. The input is then advanced to 1 and the timed region
  ends when the probe has passed time 0 on every worker (all records have left the loop);
  closing the input comes after, untimed. (``--w3-close-first`` closes it right after
  sending instead, as W1 does, and times until the probe is done: with 2 workers that
  currently never completes -- a nested scope's last report can be left unpropagated -- and
  is reported as a hang.) Reported in record-iterations/s (records x 10 / s), with 1 and 2
  workers (2: split by ``i % 2``). Target: >= 1M record-iterations/s. Baselines:
  ``plain``, 10 passes of the same map function over the same list (``list(map(...))``);
  ``floor``, the same plus the two filters each pass (the user functions the engine calls,
  as its operators call them, without the engine). Each timed run's output is checked untimed.

* **G1 -- the graph compiler's fusion.** W1's records as objects ``{"k", "v"}`` (1,000,000
  over 50 times) through a compiled graph ``input -> map {"k": r.k, "v": r.v * 2} -> filter
  r.k % 2 == 0 -> count_by r.k -> output``, 1 worker, built with the plan as compiled (``map``
  and ``filter`` fused into one operator) and with no chains (every node its own operator),
  interleaved; records/s and the ratio fused / unfused. Each run's counts are checked.

Each measurement is repeated (``--repeats``, default 5; ``--quick``: 1 repeat and smaller
workloads), repeats interleave the engine runs with their baselines so a burst of machine
noise spreads over all, and the median over repeats is reported with the best (or min) in
brackets. The garbage collector stays enabled during timed regions (as in a service);
engine runs have it set as the library's ``run()`` sets it (``collecting_rarely``: what
existed before is frozen, gen-0 threshold 50,000), baselines have Python's defaults (a plain
program's); ``--no-gc`` disables it in both, as ``bench/tracker.py`` does. Any engine run
that takes more than ``--timeout`` seconds is reported as a hang, with its workload and
worker count.

Run from the repository root::

    .venv/bin/python bench/runtime.py                 # full run, a minute or two
    .venv/bin/python bench/runtime.py --quick         # smoke run, seconds
    .venv/bin/python bench/runtime.py --only W1,W3 --json bench/results/runtime.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Stat, percentile, table  # bench/common.py (the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop

import operators  # noqa: F401  (registers the stream-building scope)
from operators import Worker, execute
from operators.progress import Product
from operators.runtime.worker import collecting_rarely

WORKLOADS = ("W1", "W2", "W3", "G1")

TARGET_W1_RATE = 1.5e6  # records/s, 1 worker
TARGET_W1_RATIO = 0.5  # engine / plain loop
TARGET_W2_P50_US = 80.0
TARGET_W2_P99_US = 160.0
TARGET_W3_RATE = 1.0e6  # record-iterations/s
CPU_SHARE_WARNING = 0.9  # below this share of a CPU for a workload, say the run was contended

Record = tuple[int, int]


# --------------------------------------------------------------------------- helpers


def rate_stat() -> Stat:
    return Stat(higher_is_better=True)


class Options:
    """Run-wide settings the workloads share."""

    def __init__(self, gc_off: bool, timeout: float) -> None:
        self.gc_off = gc_off
        self.timeout = timeout


class EngineHang(RuntimeError):
    """An engine run did not finish within ``--timeout``."""


class Start:
    """A start line: the last worker to finish building collects garbage and starts the clock.

    Every worker awaits :meth:`wait` after building its dataflow; the timed region starts
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
        with collecting_rarely():  # as operators.run() runs dataflows
            return uvloop.run(main())
    finally:
        gc.enable()


class EngineRuns:
    """Rates of one workload's engine runs per worker count; a hang skips that count."""

    def __init__(self, worker_counts: tuple[int, ...]) -> None:
        self.rates = {w: rate_stat() for w in worker_counts}
        self.failures: dict[int, str] = {}

    def attempt(self, workers: int, run: Callable[[], Any]) -> Any:
        """``run()``, or ``None`` if this worker count already hung or hangs now."""
        if workers in self.failures:
            return None
        try:
            return run()
        except EngineHang as hang:
            self.failures[workers] = str(hang)
            return None

    def ok(self, workers: int) -> bool:
        return workers not in self.failures and bool(self.rates[workers].values)

    def row(self, workers: int, plain: Stat) -> list[str]:
        name = f"engine, {workers} worker{'s' if workers > 1 else ''}"
        if not self.ok(workers):
            return [name, "HANG", "-"]
        rate = self.rates[workers]
        return [name, rate.show(1e6), f"{rate.median / plain.median:.2f}x"]

    def notes(self) -> list[str]:
        return [f"  hang: {message}" for message in self.failures.values()]

    def as_json(self, workers: int) -> dict[str, Any]:
        if not self.ok(workers):
            return {"hang": self.failures.get(workers, "no measurement")}
        return self.rates[workers].as_json()


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


def per_unit_cost(engine_rate: float, floor_rate: float) -> str:
    """The engine's time per unit beyond the floor's, in ns (noise can make it negative)."""
    cost = (1 / engine_rate - 1 / floor_rate) * 1e9
    return f"{cost:.0f} ns" if cost > 0 else f"none measurable ({cost:.0f} ns)"


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


# --------------------------------------------------------------------------- W1


def w1_build(out: dict[int, list[tuple[int, int]]]) -> Callable[[Any], Any]:
    """W1's dataflow: input -> map -> filter -> count_by, its counts per time into ``out``.

    The builder returns ``(input handle, probe)``.
    """

    def build(scope: Any) -> Any:
        handle, stream = scope.new_input()
        counted = (
            stream.map(w1_map)
            .filter(w1_keep)
            .count_by(w1_key)
            .inspect_batch(lambda t, rs: out[t].extend(rs))
        )
        return handle, counted.probe()

    return build


def w1_map(r: Record) -> Record:
    return (r[0], r[1] * 2)


def w1_keep(r: Record) -> bool:
    return r[0] % 2 == 0


def w1_key(r: Record) -> int:
    return r[0]


Counts = list[dict[int, int]]  # per time: key -> count


def w1_data(records: int, times: int, keys: int) -> list[list[Record]]:
    per = records // times
    return [[(i % keys, i) for i in range(t * per, (t + 1) * per)] for t in range(times)]


def w1_split(batches: list[list[Record]], workers: int) -> list[list[list[Record]]]:
    """Per worker, per time: the records ``i`` (the value) with ``i % workers == w``."""
    if workers == 1:
        return [batches]
    return [[[r for r in b if r[1] % workers == w] for b in batches] for w in range(workers)]


def w1_engine(parts: list[list[list[Record]]], options: Options) -> tuple[int, Counts]:
    """One timed run; returns elapsed ns and the counts per time, merged over workers."""
    workers = len(parts)
    outputs: list[dict[int, list[tuple[int, int]]]] = [defaultdict(list) for _ in parts]

    def make(start: Start) -> Callable[[Worker], Awaitable[int]]:
        async def work(worker: Worker) -> int:
            out = outputs[worker.index]

            handle, probe = worker.dataflow(w1_build(out))
            mine = parts[worker.index]
            await start.wait()
            for t, batch in enumerate(mine):
                handle.send_batch(batch)
                handle.advance_to(t + 1)
            handle.close()
            await worker.step_while(lambda: not probe.done())
            return time.perf_counter_ns()

        return work

    start_ns, ends = run_engine(make, workers, options, "W1")
    elapsed = max(ends) - start_ns
    # Untimed: merge the workers' outputs (each key is counted on exactly one worker).
    times = len(parts[0])
    merged: Counts = [{} for _ in range(times)]
    for out in outputs:
        for t, pairs in out.items():
            for k, a in pairs:
                if k in merged[t]:
                    raise AssertionError(f"W1: key {k} at time {t} emitted by two workers")
                merged[t][k] = a
    return elapsed, merged


def w1_plain(batches: list[list[Record]]) -> Counts:
    result: Counts = []
    for batch in batches:
        counts: defaultdict[int, int] = defaultdict(int)
        for key, value in batch:
            doubled = value * 2  # noqa: F841  (the same work as the engine's map)
            if key % 2 == 0:
                counts[key] += 1
        result.append(counts)
    return result


def w1_floor(batches: list[list[Record]]) -> Counts:
    """The user functions as the operators call them, with no engine around them."""
    result: Counts = []
    for batch in batches:
        mapped = list(map(w1_map, batch))
        kept = list(filter(w1_keep, mapped))
        result.append(dict(Counter(map(w1_key, kept))))
    return result


def w1_fused_floor(batches: list[list[Record]]) -> Counts:
    """The user functions as a fused chain calls them (one list), with no engine around."""
    result: Counts = []
    for batch in batches:
        kept = list(filter(w1_keep, map(w1_map, batch)))
        result.append(dict(Counter(map(w1_key, kept))))
    return result


def run_w1(args: argparse.Namespace, options: Options, repeats: int) -> dict[str, Any]:
    records, times, keys = (200_000, 10, 1000) if args.quick else (2_000_000, 100, 1000)
    batches = w1_data(records, times, keys)
    splits = {w: w1_split(batches, w) for w in (1, 2)}
    expected = [dict(c) for c in w1_plain(batches)]
    if w1_floor(batches) != expected or w1_fused_floor(batches) != expected:
        raise AssertionError("W1: a floor computation disagrees with the plain loop")
    # Warm-up (untimed): a tenth of the times on each configuration.
    warm = max(1, times // 10)
    engine = EngineRuns((1, 2))
    for w in (1, 2):
        engine.attempt(w, lambda w=w: w1_engine([p[:warm] for p in splits[w]], options))

    plain, floor, fused = rate_stat(), rate_stat(), rate_stat()
    for _ in range(repeats):
        for w in (1, 2):
            run = engine.attempt(w, lambda w=w: w1_engine(splits[w], options))
            if run is None:
                continue
            elapsed, counts = run
            if counts != expected:
                raise AssertionError(f"W1: {w} worker(s) produced counts unlike the plain loop")
            engine.rates[w].values.append(records / (elapsed / 1e9))
        elapsed, _ = timed(lambda: w1_plain(batches), options)
        plain.values.append(records / (elapsed / 1e9))
        elapsed, _ = timed(lambda: w1_floor(batches), options)
        floor.values.append(records / (elapsed / 1e9))
        elapsed, _ = timed(lambda: w1_fused_floor(batches), options)
        fused.values.append(records / (elapsed / 1e9))

    rows = [
        engine.row(1, plain),
        engine.row(2, plain),
        ["plain loop", plain.show(1e6), "1.00x"],
        ["floor (user fns, no engine)", floor.show(1e6), f"{floor.median / plain.median:.2f}x"],
        ["fused floor (as one chain)", fused.show(1e6), f"{fused.median / plain.median:.2f}x"],
    ]
    text = [
        f"W1: {records:,} records over {times} times, map -> filter -> count_by (count per "
        f"key) -> probe; M records/s, median (best) of {repeats}; output verified each run",
        table(["", "M records/s", "/ plain"], rows),
        *engine.notes(),
    ]
    one = engine.rates[1].median if engine.ok(1) else 0.0
    if one:
        text.append(
            f"engine cost beyond the user functions (1 worker): "
            f"{per_unit_cost(one, floor.median)}/record (engine {1e9 / one:.0f} ns, "
            f"floor {1e9 / floor.median:.0f} ns, plain {1e9 / plain.median:.0f} ns per record)"
        )
    ratio = one / plain.median
    met_rate = one >= TARGET_W1_RATE
    met_ratio = ratio >= TARGET_W1_RATIO
    targets = [
        f"W1 >= {TARGET_W1_RATE / 1e6:g}M records/s on 1 worker: {verdict(met_rate)} "
        f"({one / 1e6:.2f}M)",
        f"W1 >= {TARGET_W1_RATIO:g}x the plain loop: {verdict(met_ratio)} ({ratio:.2f}x)",
    ]
    document = {
        "records": records,
        "times": times,
        "keys": keys,
        "records_per_s": {
            "engine_1_worker": engine.as_json(1),
            "engine_2_workers": engine.as_json(2),
            "plain": plain.as_json(),
            "floor": floor.as_json(),
            "fused_floor": fused.as_json(),
        },
        "ratio_engine_1_worker_to_plain": ratio,
        "targets": {
            "records_per_s": TARGET_W1_RATE,
            "ratio_to_plain": TARGET_W1_RATIO,
            "records_per_s_met": met_rate,
            "ratio_met": met_ratio,
        },
    }
    return {"text": text, "targets": targets, "json": document, "hung": bool(engine.failures)}


# --------------------------------------------------------------------------- W2


def w2_inc(x: int) -> int:
    return x + 1


def w2_keep(x: int) -> bool:
    return x >= 0


def w2_double(x: int) -> int:
    return x * 2


def w2_chain(batch: list[int]) -> list[int]:
    mapped = list(map(w2_inc, batch))
    kept = list(filter(w2_keep, mapped))
    return list(map(w2_double, kept))


@dataclass
class Latencies:
    p50: Stat = field(default_factory=Stat)
    p99: Stat = field(default_factory=Stat)
    mean: Stat = field(default_factory=Stat)
    max: Stat = field(default_factory=Stat)

    def add(self, samples: list[int]) -> None:
        ordered = sorted(samples)
        self.p50.values.append(percentile(ordered, 0.50) / 1e3)
        self.p99.values.append(percentile(ordered, 0.99) / 1e3)
        self.mean.values.append(statistics.fmean(ordered) / 1e3)
        self.max.values.append(ordered[-1] / 1e3)

    def row(self, name: str) -> list[str]:
        return [name, self.p50.show(), self.p99.show(), self.mean.show(), self.max.show()]

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k).as_json() for k in ("p50", "p99", "mean", "max")}


def w2_engine(
    batches: list[list[int]], warmup: int, options: Options, collect: bool = False
) -> tuple[list[int], list[int], list[list[int]]]:
    """One run: per-time latencies (ns, after the warm-up), sleep(0) samples, and (if
    ``collect``) the output batches through an extra inspect (for the untimed check)."""
    seen: list[list[int]] = []

    def make(start: Start) -> Callable[[Worker], Awaitable[tuple[list[int], list[int]]]]:
        async def work(worker: Worker) -> tuple[list[int], list[int]]:
            def build(scope: Any) -> Any:
                handle, stream = scope.new_input()
                out = stream.map(w2_inc).filter(w2_keep).map(w2_double)
                if collect:
                    out = out.inspect_batch(lambda _t, rs: seen.append(list(rs)))
                return handle, out.probe()

            handle, probe = worker.dataflow(build)
            await start.wait()
            clock = time.perf_counter_ns
            latencies: list[int] = []
            for t, batch in enumerate(batches):
                handle.send_batch(batch)
                begin = clock()
                handle.advance_to(t + 1)
                await worker.step_while(functools.partial(probe.less_than, t + 1))
                end = clock()
                if t >= warmup:
                    latencies.append(end - begin)
            handle.close()
            await worker.step_while(lambda: not probe.done())
            # Baseline on the same loop: one event-loop round trip.
            sleeps: list[int] = []
            for _ in range(len(latencies)):
                begin = clock()
                await asyncio.sleep(0)
                sleeps.append(clock() - begin)
            return latencies, sleeps

        return work

    _, results = run_engine(make, 1, options, "W2")
    latencies, sleeps = results[0]
    return latencies, sleeps, seen


def w2_chain_samples(batches: list[list[int]], options: Options) -> list[int]:
    clock = time.perf_counter_ns
    samples: list[int] = []
    gc.collect()
    if options.gc_off:
        gc.disable()
    try:
        for batch in batches:
            begin = clock()
            w2_chain(batch)
            samples.append(clock() - begin)
    finally:
        gc.enable()
    return samples


def run_w2(args: argparse.Namespace, options: Options, repeats: int) -> dict[str, Any]:
    times, warmup, size = (200, 50, 100) if args.quick else (1000, 100, 100)
    batches = [list(range(t * size, (t + 1) * size)) for t in range(warmup + times)]
    # Untimed check of the pipeline's output, with an extra inspect to see it.
    _, _, seen = w2_engine(batches, warmup, options, collect=True)
    if seen != [w2_chain(b) for b in batches]:
        raise AssertionError("W2: the pipeline's output differs from the plain chain's")

    engine, sleep, chain = Latencies(), Latencies(), Latencies()
    for _ in range(repeats):
        latencies, sleeps, _ = w2_engine(batches, warmup, options)
        engine.add(latencies)
        sleep.add(sleeps)
        chain.add(w2_chain_samples(batches[warmup:], options))

    p50, p99 = engine.p50.median, engine.p99.median
    overhead = p50 - sleep.p50.median - chain.p50.median
    text = [
        f"W2: {times} times x {size} records (after {warmup} warm-up times), input -> map -> "
        f"filter -> map -> probe, 1 worker; µs per time, median (min) of {repeats}",
        table(
            ["", "p50", "p99", "mean", "max"],
            [
                engine.row("engine: advance_to -> probe passes"),
                sleep.row("await asyncio.sleep(0)"),
                chain.row("plain map/filter/map call"),
            ],
        ),
        f"engine cost per time beyond one sleep(0) and the plain chain (p50): {overhead:.1f} µs",
    ]
    met_p50 = p50 <= TARGET_W2_P50_US
    met_p99 = p99 <= TARGET_W2_P99_US
    targets = [
        f"W2 p50 <= {TARGET_W2_P50_US:g} µs: {verdict(met_p50)} ({p50:.1f} µs)",
        f"W2 p99 <= {TARGET_W2_P99_US:g} µs: {verdict(met_p99)} ({p99:.1f} µs)",
    ]
    document = {
        "times": times,
        "warmup_times": warmup,
        "records_per_time": size,
        "engine_us": engine.as_json(),
        "sleep0_us": sleep.as_json(),
        "plain_chain_us": chain.as_json(),
        "overhead_p50_us": overhead,
        "targets": {
            "p50_us": TARGET_W2_P50_US,
            "p99_us": TARGET_W2_P99_US,
            "p50_met": met_p50,
            "p99_met": met_p99,
        },
    }
    return {"text": text, "targets": targets, "json": document, "hung": False}


# --------------------------------------------------------------------------- W3

W3_PASSES = 10


def w3_step(r: Record) -> Record:
    return (r[0] + 1, r[1] + 1)


def w3_again(r: Record) -> bool:
    return r[1] < W3_PASSES


def w3_finished(r: Record) -> bool:
    return r[1] >= W3_PASSES


def w3_engine(
    parts: list[list[list[Record]]], options: Options, close_first: bool = False
) -> tuple[int, list[Record]]:
    """One timed run: elapsed ns and every record that left the loop (all workers).

    The timed region ends when the probe has passed time 0 on every worker (every record
    has left the loop); the input is closed after that. With ``close_first`` the input is
    closed straight after sending instead and the region ends when the probe is done.
    """
    workers = len(parts)
    left: list[Record] = []

    def make(start: Start) -> Callable[[Worker], Awaitable[int]]:
        async def work(worker: Worker) -> int:
            def build(scope: Any) -> Any:
                handle, stream = scope.new_input()
                inner = scope.iterative()
                loop_handle, loop = inner.feedback(Product(0, 1))
                body = stream.enter(inner).concat(loop).map(w3_step)
                body.filter(w3_again).connect_loop(loop_handle)
                done = (
                    body.filter(w3_finished).leave().inspect_batch(lambda _t, rs: left.extend(rs))
                )
                return handle, done.probe()

            handle, probe = worker.dataflow(build)
            await start.wait()
            for batch in parts[worker.index]:
                handle.send_batch(batch)
            if close_first:
                handle.close()
                await worker.step_while(lambda: not probe.done())
                return time.perf_counter_ns()
            handle.advance_to(1)
            await worker.step_while(lambda: probe.less_than(1))
            end = time.perf_counter_ns()
            handle.close()  # untimed: time 0 is complete, the rest is shutting down
            await worker.step_while(lambda: not probe.done())
            return end

        return work

    start_ns, ends = run_engine(make, workers, options, "W3")
    return max(ends) - start_ns, left


def w3_plain(records: list[Record]) -> list[Record]:
    xs = records
    for _ in range(W3_PASSES):
        xs = list(map(w3_step, xs))
    return xs


def w3_floor(records: list[Record]) -> list[Record]:
    """Per pass: the map and both filters, as the operators call them, without the engine."""
    xs = records
    done: list[Record] = []
    while xs:
        body = list(map(w3_step, xs))
        xs = list(filter(w3_again, body))
        done.extend(filter(w3_finished, body))
    return done


def run_w3(args: argparse.Namespace, options: Options, repeats: int) -> dict[str, Any]:
    records, batch = (10_000, 1_000) if args.quick else (100_000, 10_000)
    data: list[Record] = [(i, 0) for i in range(records)]
    expected = sorted(w3_plain(data))
    if sorted(w3_floor(data)) != expected:
        raise AssertionError("W3: the floor computation disagrees with the plain loop")

    def split(workers: int) -> list[list[list[Record]]]:
        mine = [[r for r in data if r[0] % workers == w] for w in range(workers)]
        return [[m[i : i + batch] for i in range(0, len(m), batch)] for m in mine]

    splits = {w: split(w) for w in (1, 2)}
    close_first = args.w3_close_first
    engine = EngineRuns((1, 2))
    for w in (1, 2):  # warm-up, untimed
        engine.attempt(w, lambda w=w: w3_engine([p[:1] for p in splits[w]], options, close_first))

    work_units = records * W3_PASSES
    plain, floor = rate_stat(), rate_stat()
    for _ in range(repeats):
        for w in (1, 2):
            run = engine.attempt(w, lambda w=w: w3_engine(splits[w], options, close_first))
            if run is None:
                continue
            elapsed, left = run
            if sorted(left) != expected:
                raise AssertionError(f"W3: {w} worker(s): the records leaving the loop are wrong")
            engine.rates[w].values.append(work_units / (elapsed / 1e9))
        elapsed, _ = timed(lambda: w3_plain(data), options)
        plain.values.append(work_units / (elapsed / 1e9))
        elapsed, _ = timed(lambda: w3_floor(data), options)
        floor.values.append(work_units / (elapsed / 1e9))

    rows = [
        engine.row(1, plain),
        engine.row(2, plain),
        ["plain (10 passes of the map)", plain.show(1e6), "1.00x"],
        ["floor (map + both filters)", floor.show(1e6), f"{floor.median / plain.median:.2f}x"],
    ]
    ending = (
        "input closed at once, timed until the probe is done"
        if close_first
        else "advance_to(1), timed until the probe passes 1, then closed"
    )
    text = [
        f"W3: {records:,} records x {W3_PASSES} passes around a Product(0, 1) feedback in an "
        f"iterative scope ({records // batch} batches of {batch:,} at time 0; {ending}); "
        f"M record-iterations/s, median (best) of {repeats}; output verified each run",
        table(["", "M rec-iter/s", "/ plain"], rows),
        *engine.notes(),
    ]
    one = engine.rates[1].median if engine.ok(1) else 0.0
    if one:
        text.append(
            f"engine cost beyond the user functions (1 worker): "
            f"{per_unit_cost(one, floor.median)}/record-iteration"
        )
    two = f"{engine.rates[2].median / 1e6:.2f}M" if engine.ok(2) else "HANG"
    met = one >= TARGET_W3_RATE
    targets = [
        f"W3 >= {TARGET_W3_RATE / 1e6:g}M record-iterations/s on 1 worker: {verdict(met)} "
        f"({one / 1e6:.2f}M; 2 workers {two})"
    ]
    document = {
        "records": records,
        "passes": W3_PASSES,
        "batch": batch,
        "close_first": close_first,
        "record_iterations_per_s": {
            "engine_1_worker": engine.as_json(1),
            "engine_2_workers": engine.as_json(2),
            "plain": plain.as_json(),
            "floor": floor.as_json(),
        },
        "targets": {"record_iterations_per_s": TARGET_W3_RATE, "met": met},
    }
    return {"text": text, "targets": targets, "json": document, "hung": bool(engine.failures)}


# --------------------------------------------------------------------------- G1

G1_GRAPH = {
    "nodes": {
        "in": {"op": "input"},
        "m": {"op": "map", "expr": '{"k": r.k, "v": r.v * 2}'},
        "f": {"op": "filter", "expr": "r.k % 2 == 0"},
        "c": {"op": "count_by", "key": "r.k"},
        "out": {"op": "output"},
    },
    "edges": [["in", "m"], ["m", "f"], ["f", "c"], ["c", "out"]],
}


class G1Context:
    """The graph's input is a handle; its output is collected per time and probed."""

    def __init__(self, out: dict[int, list[Any]]) -> None:
        self.out = out
        self.handles: dict[str, Any] = {}
        self.probes: list[Any] = []

    def input(self, name: str, scope: Any) -> Any:
        handle, stream = scope.new_input(name)
        self.handles[name] = handle
        return stream

    def output(self, _name: str, stream: Any) -> None:
        collected = stream.inspect_batch(lambda t, rs: self.out[t].extend(rs))
        self.probes.append(collected.probe())


def g1_engine(
    batches: list[list[dict[str, int]]], fuse: bool, options: Options
) -> tuple[int, Counts]:
    """One timed run of the compiled graph (its ``m -> f`` fused or not), 1 worker."""
    from operators.graph import compile_graph, parse_graph

    plan = compile_graph(parse_graph(G1_GRAPH))
    if not fuse:
        plan = dataclasses.replace(plan, chains=[])
    out: dict[int, list[Any]] = defaultdict(list)

    def make(start: Start) -> Callable[[Worker], Awaitable[int]]:
        async def work(worker: Worker) -> int:
            context = G1Context(out)
            worker.dataflow(lambda scope: plan.build(scope, context))
            handle = context.handles["in"]
            await start.wait()
            for t, batch in enumerate(batches):
                handle.send_batch(batch)
                handle.advance_to(t + 1)
            handle.close()
            await worker.step_while(lambda: not all(p.done() for p in context.probes))
            return time.perf_counter_ns()

        return work

    start_ns, ends = run_engine(make, 1, options, "G1")
    counts: Counts = [{r["key"]: r["count"] for r in out[t]} for t in range(len(batches))]
    return max(ends) - start_ns, counts


def run_g1(args: argparse.Namespace, options: Options, repeats: int) -> dict[str, Any]:
    records, times, keys = (100_000, 10, 1000) if args.quick else (1_000_000, 50, 1000)
    plain = w1_data(records, times, keys)
    batches = [[{"k": k, "v": v} for k, v in batch] for batch in plain]
    expected = [dict(c) for c in w1_plain(plain)]
    runs = EngineRuns((1, 2))  # 1: fused, 2: not fused
    for fuse in (True, False):  # warm-up, untimed
        runs.attempt(1 if fuse else 2, lambda f=fuse: g1_engine(batches[:2], f, options))
    for _ in range(repeats):
        for key, fuse in ((1, True), (2, False)):
            run = runs.attempt(key, lambda f=fuse: g1_engine(batches, f, options))
            if run is None:
                continue
            elapsed, counts = run
            if counts != expected:
                raise AssertionError(f"G1 ({'fused' if fuse else 'unfused'}): wrong counts")
            runs.rates[key].values.append(records / (elapsed / 1e9))
    fused, unfused = runs.rates[1], runs.rates[2]
    ratio = fused.median / unfused.median if runs.ok(1) and runs.ok(2) else 0.0
    rows = [
        ["graph, m -> f fused", fused.show(1e6), f"{ratio:.2f}x"],
        ["graph, every node its own", unfused.show(1e6), "1.00x"],
    ]
    text = [
        f"G1: {records:,} records {{k, v}} over {times} times through a compiled graph, map "
        f"-> filter -> count_by -> output, 1 worker; M records/s, median (best) of {repeats}; "
        "output verified each run",
        table(["", "M records/s", "/ unfused"], rows),
        *runs.notes(),
    ]
    document = {
        "records": records,
        "times": times,
        "records_per_s": {"fused": runs.as_json(1), "unfused": runs.as_json(2)},
        "ratio_fused_to_unfused": ratio,
    }
    targets = [f"G1 fused / unfused (no target): {ratio:.2f}x"]
    return {"text": text, "targets": targets, "json": document, "hung": bool(runs.failures)}


# --------------------------------------------------------------------------- driver

RUNNERS = {"W1": run_w1, "W2": run_w2, "W3": run_w3, "G1": run_g1}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat, small sizes")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="e.g. W1,W3 (default all)")
    parser.add_argument("--repeats", type=int, help="repeats per measurement (default 5)")
    parser.add_argument(
        "--no-gc", action="store_true", help="disable the garbage collector in timed regions"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds before an engine run counts as a hang (default 120; --quick: 20)",
    )
    parser.add_argument(
        "--w3-close-first",
        action="store_true",
        help="W3: close the input right after sending instead of advancing it first",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)

    chosen = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in chosen if w not in RUNNERS]
    if unknown or not chosen:
        parser.error(f"--only takes a comma-separated subset of {','.join(WORKLOADS)}")
    repeats = args.repeats or (1 if args.quick else 5)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    timeout = args.timeout or (20.0 if args.quick else 120.0)
    options = Options(gc_off=args.no_gc, timeout=timeout)

    print(
        f"runtime benchmark: {','.join(chosen)}, {repeats} repeat(s)"
        f"{', quick sizes' if args.quick else ''}, gc {'off' if args.no_gc else 'on'} in "
        f"timed regions; Python {platform.python_version()}, uvloop {uvloop.__version__} "
        f"on {platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    failed = False
    for name in chosen:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            results[name] = RUNNERS[name](args, options, repeats)
            failed = failed or results[name]["hung"]
        except (EngineHang, AssertionError) as problem:
            failed = True
            results[name] = {
                "text": [f"{name}: FAILED: {problem}"],
                "targets": [],
                "json": None,
                "hung": False,
            }
        share = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
        results[name]["cpu_share"] = share
        if share < CPU_SHARE_WARNING:
            results[name]["text"].append(
                f"NOTE: this process had only {share:.0%} of a CPU while running {name} (load "
                f"average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs): other processes "
                "competed for it, so these figures (latency tails above all) are noisy"
            )
        print(f"  {name} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        print()
        print("\n".join(results[name]["text"]), flush=True)

    print()
    for name in chosen:
        for line in results[name]["targets"]:
            print(line, flush=True)

    if args.json:
        document = {
            "benchmark": "runtime",
            "config": {
                "workloads": chosen,
                "repeats": repeats,
                "quick": args.quick,
                "gc_in_timed_regions": not args.no_gc,
                "timeout_seconds": timeout,
            },
            "environment": {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "uvloop": uvloop.__version__,
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
