"""Where the row path's time goes: W1 and G1 of ``bench/runtime.py``, part by part, in CPU time.

``bench/runtime.py`` gives wall-clock rates beside a plain loop; on a shared machine they move
with the load. This one runs the same timed regions (W1's dataflow on 1 worker, G1's compiled
graph) and reports the CPU time of this process from the start line to the end, per record,
which other processes do not inflate (their cache traffic still may). Each configuration is
one row; the rows interleave in every repeat; medians (min-max) of ``--repeats`` (default 5).

W1 (2,000,000 records, map -> filter -> count_by), the engine put together part by part:

* ``separate``: ``map`` and ``filter`` as separate operators (``per_batch``, as before fusion);
* ``fused``: as one chained operator (``operators.fused``, what ``Stream.map`` builds);
* the collector as Python leaves it (``default``), as ``run()`` sets it (``run()``, what
  ``collecting_rarely`` does) or disabled (``off``);
* runs of at most ``RUN_RECORDS`` records (``runs``), or of all that waits (``all``).

Then the plain loop and the *fused floor* (the user functions as a fused chain calls them,
one list per batch, with no engine) under Python's default collector.

G1 (1,000,000 records ``{k, v}`` through a compiled map -> filter -> count_by): the plan as
compiled (``m`` and ``f`` one operator) and with no chains, with batches of 20,000 and of 100.

Run from the repository root::

    .venv/bin/python bench/row_path.py              # about a minute
    .venv/bin/python bench/row_path.py --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import runtime as bench  # bench/runtime.py (the script's folder)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from operators import Stream, fused
from operators import map as map_module
from operators.runtime.worker import collecting_rarely

FUSED_METHODS = {"map": Stream.map, "filter": Stream.filter}


def separate_map(stream: Stream, fn: Callable[[Any], Any], name: str = "Map") -> Stream:
    return map_module.per_batch(stream, lambda _t, rs: list(map(fn, rs)), name)


def separate_filter(stream: Stream, fn: Callable[[Any], bool], name: str = "Filter") -> Stream:
    return map_module.per_batch(stream, lambda _t, rs: list(filter(fn, rs)), name)


@contextlib.contextmanager
def configured(fusion: bool, collector: str, runs: bool) -> Iterator[bench.Options]:
    """The engine as one row of the table has it (restored afterwards)."""
    if not fusion:
        Stream.map = separate_map  # type: ignore[method-assign]
        Stream.filter = separate_filter  # type: ignore[method-assign]
    bench.collecting_rarely = collecting_rarely if collector == "run()" else contextlib.nullcontext
    fused.RUN_RECORDS = 16_384 if runs else 10**12
    try:
        yield bench.Options(gc_off=collector == "off", timeout=120.0)
    finally:
        Stream.map = FUSED_METHODS["map"]  # type: ignore[method-assign]
        Stream.filter = FUSED_METHODS["filter"]  # type: ignore[method-assign]
        bench.collecting_rarely = collecting_rarely
        fused.RUN_RECORDS = 16_384


class CpuClock:
    """The process's CPU time when the start line is passed (the timed region's start)."""

    def __init__(self) -> None:
        self.started = 0.0
        wait = bench.Start.wait

        async def timed_wait(start: bench.Start) -> None:
            await wait(start)
            if not self.started:
                self.started = time.process_time()

        bench.Start.wait = timed_wait  # type: ignore[method-assign]

    def region(self, run: Callable[[], Any]) -> tuple[float, Any]:
        """CPU seconds of ``run()`` after its start line, and what it returned."""
        self.started = 0.0
        result = run()
        return time.process_time() - self.started, result


def cpu_of(fn: Callable[[], Any], collector_off: bool = False) -> float:
    gc.collect()
    if collector_off:
        gc.disable()
    try:
        began = time.process_time()
        fn()
        return time.process_time() - began
    finally:
        gc.enable()


W1_ROWS = [
    ("separate, default, all (before fusion)", False, "default", False),
    ("fused, default, all", True, "default", False),
    ("fused, run(), all", True, "run()", False),
    ("fused, default, runs", True, "default", True),
    ("fused, run(), runs (this branch)", True, "run()", True),
    ("separate, run(), runs", False, "run()", True),
    ("fused, off, runs", True, "off", True),
]


def w1(repeats: int, clock: CpuClock) -> dict[str, list[float]]:
    records = 2_000_000
    batches = bench.w1_data(records, 100, 1000)
    expected = [dict(c) for c in bench.w1_plain(batches)]
    rows: dict[str, list[float]] = {name: [] for name, *_ in W1_ROWS}
    rows["plain loop"] = []
    rows["fused floor (no engine)"] = []

    def floor() -> None:
        for batch in batches:
            kept = list(filter(bench.w1_keep, map(bench.w1_map, batch)))
            Counter(map(bench.w1_key, kept))

    for _ in range(repeats):
        for name, fusion, collector, runs in W1_ROWS:
            with configured(fusion, collector, runs) as options:
                engine = functools.partial(bench.w1_engine, [batches], options)
                seconds, (_elapsed, counts) = clock.region(engine)
            if counts != expected:
                raise AssertionError(f"W1 ({name}): counts unlike the plain loop's")
            rows[name].append(seconds / records * 1e9)
        rows["plain loop"].append(cpu_of(lambda: bench.w1_plain(batches)) / records * 1e9)
        rows["fused floor (no engine)"].append(cpu_of(floor) / records * 1e9)
    return rows


def g1(repeats: int, clock: CpuClock) -> dict[str, list[float]]:
    records = 1_000_000
    rows: dict[str, list[float]] = {}
    for times in (50, 10_000):
        plain = bench.w1_data(records, times, 1000)
        batches = [[{"k": k, "v": v} for k, v in batch] for batch in plain]
        expected = [dict(c) for c in bench.w1_plain(plain)]
        per = records // times
        for _ in range(repeats):
            for fuse in (True, False):
                name = f"batches of {per:,}, {'fused' if fuse else 'unfused'}"
                options = bench.Options(gc_off=False, timeout=120.0)
                engine = functools.partial(bench.g1_engine, batches, fuse, options)
                seconds, (_elapsed, counts) = clock.region(engine)
                if counts != expected:
                    raise AssertionError(f"G1 ({name}): wrong counts")
                rows.setdefault(name, []).append(seconds / records * 1e9)
    return rows


def show(title: str, rows: dict[str, list[float]]) -> None:
    print(title)
    width = max(len(name) for name in rows)
    for name, values in rows.items():
        print(
            f"  {name:<{width}}  {statistics.median(values):6.0f} ns "
            f"({min(values):.0f}-{max(values):.0f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=5, help="repeats (default 5)")
    args = parser.parse_args(argv)
    clock = CpuClock()
    print(f"row path, CPU per record, median (min-max) of {args.repeats}", flush=True)
    show("W1, 1 worker (fusion, collector, runs):", w1(args.repeats, clock))
    show("G1, compiled map -> filter -> count_by, 1 worker:", g1(args.repeats, clock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
