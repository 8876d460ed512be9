"""Benchmark of Frontier's compiled CEL beside two other CEL engines for Python.

Run by hand. The expressions and records are ``bench/expressions.py``'s. Three engines
evaluate each expression on each record, and the cost per record is reported for each, with
the ratio to Frontier's compiled form:

* **frontier**: ``operators.graph.cel.compile_expression(source).fn``, one call per record
  (the per-record form; the graph's operators use the batch form, which is faster still).
* **cel-python** (PyPI ``cel-python``, module ``celpy``): a pure-Python interpreter;
  ``Environment().program(compile(source)).evaluate({"r": json_to_cel(record)})``, with
  the record's conversion done before timing.
* **common-expression-language** (PyPI, module ``cel``): bindings to a compiled CEL engine;
  ``cel.compile(source).execute({"r": record})``.

Each engine gets as many records as fit a short run (a slow engine fewer), the same records
for all; every engine's results are checked equal to Frontier's, untimed. Medians of
``--repeats`` runs, in ns per record. Neither other engine is a dependency of Frontier:
``pip install cel-python common-expression-language`` to run this.

    .venv/bin/python bench/cel_engines.py
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cel
import celpy

from bench.common import table
from bench.expressions import CASES, make_records
from operators.graph.cel import compile_expression


def timed(call: Callable[[Any], Any], inputs: list[Any]) -> float:
    gc.collect()
    start = time.perf_counter_ns()
    deque(map(call, inputs), maxlen=0)
    return (time.perf_counter_ns() - start) / len(inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for name, source, _reference in CASES:
        ours = compile_expression(source).fn
        environment = celpy.Environment()
        interpreted = environment.program(environment.compile(source))
        bound = cel.compile(source)
        engines: dict[str, tuple[Callable[[Any], Any], int, Callable[[Any], Any]]] = {
            "frontier": (ours, 200_000, lambda r: r),
            "cel-python": (
                lambda a, program=interpreted: program.evaluate(a),
                2_000,
                lambda r: {"r": celpy.json_to_cel(r)},
            ),
            "common-expression-language": (
                lambda a, program=bound: program.execute(a),
                50_000,
                lambda r: {"r": r},
            ),
        }
        figures: dict[str, float] = {}
        for engine, (call, count, prepare) in engines.items():
            records = make_records(count)
            inputs = [prepare(r) for r in records]
            got = [bool(call(a)) for a in inputs[:500]]
            assert got == [bool(ours(r)) for r in records[:500]], f"{engine} disagrees on {name}"
            figures[engine] = statistics.median(timed(call, inputs) for _ in range(args.repeats))
        for engine, ns in figures.items():
            rows.append([name, engine, f"{ns:,.0f}", f"{ns / figures['frontier']:.1f}x"])
    print(f"ns per record, median of {args.repeats}; x = times Frontier's compiled form")
    print(table(["expression", "engine", "ns/record", "x frontier"], rows))


if __name__ == "__main__":
    main()
