"""Benchmark of compiled CEL expressions (``operators.graph.cel``) against hand-written lambdas.

What it measures: the cost per record of calling an expression's compiled function on a list
of dict records, beside a hand-written Python lambda that computes the same thing, and the
ratio of the two. The main row is the expression of the graph-submission issue,
``r.value * 2 > 10 && r.key != "x"``, against ``lambda r: r["value"] * 2 > 10 and
r["key"] != "x"``; two more rows cover the helper-call paths (``/``, ``%``, ``in`` on a list
of ints) and a macro (``exists`` over a list in the record). The compiled code also checks
types (``r.value`` must be an int for ``* 2``) and int64 overflow, which the lambdas do not:
the ratio is the price of CEL's semantics.

* Records: ``--records`` dicts (default 1,000,000; ``--quick``: 100,000)
  ``{"value": i % 20, "key": "xyz"[i % 3], "tags": [...]}``, built before timing.
* Each timed run is ``collections.deque(map(fn, records), maxlen=0)`` (the cheapest way to
  call a function once per record from Python), after a ``gc.collect()``, timed with
  ``time.perf_counter_ns``. ``floor`` is the same loop around ``lambda r: True``: the part of
  every figure that is the loop and the call, not the expression.
* Repeats (``--repeats``, default 5; ``--quick``: 3) interleave the compiled function, its
  lambda and the floor, so that a burst of machine noise spreads over all; the median over
  repeats is reported, with the best in brackets, in ns per record.
* Untimed, the compiled function and its lambda are checked to give the same result on
  every record, and the cost of compiling each expression is reported (µs, median of 200).

Run from the repository root::

    .venv/bin/python bench/expressions.py                # 1M records, 5 repeats, ~1 minute
    .venv/bin/python bench/expressions.py --quick        # 100k records, 3 repeats, seconds
    .venv/bin/python bench/expressions.py --json bench/results/expressions.json
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from operators.graph.cel import compile_expression

Record = dict[str, Any]

CASES: list[tuple[str, str, Callable[[Record], Any]]] = [
    (
        "main",
        'r.value * 2 > 10 && r.key != "x"',
        lambda r: r["value"] * 2 > 10 and r["key"] != "x",
    ),
    (
        "div-mod-in",
        "r.value / 3 + r.value % 3 in [1, 2, 3]",
        lambda r: r["value"] // 3 + r["value"] % 3 in (1, 2, 3),
    ),
    (
        "macro",
        'r.tags.exists(t, t == "b")',
        lambda r: "b" in r["tags"],
    ),
]


def make_records(n: int) -> list[Record]:
    tags = [["a"], ["a", "b"], ["c", "d", "b"], []]
    return [{"value": i % 20, "key": "xyz"[i % 3], "tags": tags[i % 4]} for i in range(n)]


def time_per_record(function: Callable[[Record], Any], records: list[Record]) -> float:
    gc.collect()
    start = time.perf_counter_ns()
    deque(map(function, records), maxlen=0)
    return (time.perf_counter_ns() - start) / len(records)


def compile_cost_us(source: str, times: int = 200) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter_ns()
        compile_expression(source)
        samples.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(samples)


def show(samples: list[float]) -> str:
    return f"{statistics.median(samples):7.1f} [{min(samples):7.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100k records, 3 repeats")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    n = args.records or (100_000 if args.quick else 1_000_000)
    repeats = args.repeats or (3 if args.quick else 5)

    records = make_records(n)
    floor: Callable[[Record], Any] = lambda r: True  # noqa: E731 - the loop and the call only
    print(f"Python {platform.python_version()}, {n:,} records, {repeats} repeats")
    print("ns per record, median [best]; ratio = compiled / lambda (medians)")
    print()
    results: dict[str, Any] = {"records": n, "repeats": repeats, "cases": []}
    for name, source, reference in CASES:
        expression = compile_expression(source)
        compiled = expression.fn
        mismatches = sum(1 for r in records if compiled(r) != reference(r))
        if mismatches:
            raise SystemExit(f"{name}: {mismatches} records differ from the lambda")
        times: dict[str, list[float]] = {"compiled": [], "lambda": [], "floor": []}
        time_per_record(compiled, records)  # warm up
        for _ in range(repeats):
            times["compiled"].append(time_per_record(compiled, records))
            times["lambda"].append(time_per_record(reference, records))
            times["floor"].append(time_per_record(floor, records))
        ratio = statistics.median(times["compiled"]) / statistics.median(times["lambda"])
        compile_us = compile_cost_us(source)
        print(f"{name}: {source}")
        print(f"  compiled {show(times['compiled'])}")
        print(f"  lambda   {show(times['lambda'])}")
        print(f"  floor    {show(times['floor'])}")
        print(f"  ratio    {ratio:7.2f}      compile {compile_us:.0f} µs")
        print()
        results["cases"].append(
            {
                "name": name,
                "source": source,
                "ns_per_record": {key: statistics.median(value) for key, value in times.items()},
                "best_ns_per_record": {key: min(value) for key, value in times.items()},
                "ratio": ratio,
                "compile_us": compile_us,
            }
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
