"""Benchmark of the CEL vector backend: which library a compiled expression runs on.

The work: ``--rows`` records (default 1,000,000) of ``key`` (a string of 64 values) and
``value`` (an int64), in record batches of ``--batch`` rows (default: one batch), through
``map {"key": r.key, "value": r.value * 2}``, ``filter r.value % 3 != 0``, then a count per
key. CEL's semantics hold on every path: ``* 2`` is checked for int64 overflow (a record that
overflows is dropped and counted), a null value fails its record. Four ways, timed in turn
in every repeat (so that machine noise spreads over all), medians of ``--repeats`` (and the
best) in ms for the whole work:

* **rows**: the row backend, as the row path runs it today: the map's and the filter's batch
  forms (``compile_expression(..., batch=...)``, one list comprehension per batch) on the
  records as Python dicts, then a ``dict`` count. Its dicts are made before timing; the line
  **rows + to_pylist** adds making them from the Arrow batches, as a typed input feeding the
  row path would.
* **pyarrow**: the vector backend (``operators.graph.cel.vector``): ``compile_vector`` of
  the map and of the filter, each batch through ``evaluate`` and ``predicate``, failed rows
  filtered out, ``pc.filter``, then ``pc.value_counts`` of the keys, summed over batches.
* **polars, fused**: the same work written by hand as one polars query per batch (the
  overflow check as bounds on ``value``, the remainder's sign irrelevant to ``!= 0``),
  ``pl.from_arrow`` in, the counts out: the best a compiler to polars could do.
* **polars, per operator**: the same, but each operator takes and gives Arrow (as operators
  exchange containers of Arrow columns): ``from_arrow`` and ``to_arrow`` around each.

Every way's counts (and dropped counts) are checked equal, untimed. ``POLARS_MAX_THREADS``
and Arrow's CPU count are set to 1 unless ``--threads``: a worker is one thread beside the
event loop. polars is not a dependency of Frontier (``pip install polars`` to run this).

    .venv/bin/python bench/cel_vector.py                     # 1M rows, one batch, 5 repeats
    .venv/bin/python bench/cel_vector.py --batch 10000       # 100 batches of 10,000
    .venv/bin/python bench/cel_vector.py --quick             # 100k rows, 3 repeats
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if "--threads" not in sys.argv:  # before polars and Arrow start their pools
    os.environ["POLARS_MAX_THREADS"] = "1"

import pyarrow as pa
import pyarrow.compute as pc

from bench.common import table
from operators.graph.cel import compile_expression
from operators.graph.cel.vector import VectorExpression, compile_vector

MAP = '{"key": r.key, "value": r.value * 2}'
FILTER = "r.value % 3 != 0"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
Counts = tuple[dict[str, int], int]
"""Records per key, and records dropped (their expression failed)."""


def make_batches(rows: int, batch: int) -> list[pa.RecordBatch]:
    keys = pa.array([f"key-{i % 64:02d}" for i in range(rows)], pa.string())
    values = pa.array([(i * 7919) % 1_000_003 - 500_000 for i in range(rows)], pa.int64())
    table = pa.table({"key": keys, "value": values})
    return [b for b in table.to_batches(max_chunksize=batch) if b.num_rows]


def by_rows(batches: list[list[dict[str, Any]]]) -> Counts:
    mapper = compile_expression(MAP, batch=("map",)).batch["map"]
    keep = compile_expression(FILTER, batch=("filter",)).batch["filter"]
    counts: dict[str, int] = {}
    for records in batches:  # the bench's records never fail: the batch forms never raise
        for record in keep(mapper(records)):
            key = record["key"]
            counts[key] = counts.get(key, 0) + 1
    return counts, 0


def by_rows_from_arrow(batches: list[pa.RecordBatch]) -> Counts:
    return by_rows([batch.to_pylist() for batch in batches])


def vector_expressions(batch_type: pa.DataType) -> tuple[VectorExpression, VectorExpression]:
    mapper = compile_vector(compile_expression(MAP), {"r": batch_type})
    assert isinstance(mapper, VectorExpression), mapper
    keep = compile_vector(compile_expression(FILTER), {"r": mapper.type})
    assert isinstance(keep, VectorExpression), keep
    return mapper, keep


def by_pyarrow(batches: list[pa.RecordBatch]) -> Counts:
    mapper, keep = vector_expressions(pa.struct(list(batches[0].schema)))
    counts: dict[str, int] = {}
    dropped = 0
    for batch in batches:
        records = batch.to_struct_array()
        mapped, failed = mapper.evaluate(records)
        if failed is not None:
            dropped += pc.sum(failed).as_py()
            mapped = pc.filter(mapped, pc.invert(failed))
        kept, failed = keep.predicate(mapped)
        if failed is not None:
            dropped += pc.sum(failed).as_py()
        survivors = pc.filter(mapped, kept)
        for entry in pc.value_counts(survivors.field("key")).to_pylist():
            counts[entry["values"]] = counts.get(entry["values"], 0) + entry["counts"]
    return counts, dropped


def polars_map(frame: Any, pl: Any) -> tuple[Any, int]:
    """``{"key": r.key, "value": r.value * 2}``: rows out of ``* 2``'s range, or null, fail."""
    value = pl.col("value")
    ok = value.is_not_null() & (value >= -(2**62)) & (value <= 2**62 - 1)
    checked = frame.with_columns(ok.alias("_ok"))
    dropped = checked.height - int(checked["_ok"].sum())
    return checked.filter(pl.col("_ok")).select("key", value * 2), dropped


def polars_filter(frame: Any, pl: Any) -> tuple[Any, int]:
    """``r.value % 3 != 0`` (polars' ``%`` floors, but ``!= 0`` does not see the sign)."""
    dropped = int(frame["value"].null_count())
    return frame.filter(pl.col("value").is_not_null() & (pl.col("value") % 3 != 0)), dropped


def by_polars_fused(batches: list[pa.RecordBatch]) -> Counts:
    import polars as pl

    counts: dict[str, int] = {}
    dropped = 0
    for batch in batches:
        mapped, lost = polars_map(pl.from_arrow(batch), pl)
        kept, lost_too = polars_filter(mapped, pl)
        dropped += lost + lost_too
        for key, n in kept.group_by("key").len().iter_rows():
            counts[key] = counts.get(key, 0) + n
    return counts, dropped


def by_polars_per_operator(batches: list[pa.RecordBatch]) -> Counts:
    import polars as pl

    counts: dict[str, int] = {}
    dropped = 0
    for batch in batches:
        mapped, lost = polars_map(pl.from_arrow(batch), pl)
        between = mapped.to_arrow()  # the map's output container
        kept, lost_too = polars_filter(pl.from_arrow(between), pl)
        survivors = kept.to_arrow()  # the filter's
        dropped += lost + lost_too
        grouped = pl.from_arrow(survivors).group_by("key").len()
        for key, n in grouped.iter_rows():
            counts[key] = counts.get(key, 0) + n
    return counts, dropped


def timed(fn: Callable[[Any], Counts], data: Any) -> tuple[float, Counts]:
    gc.collect()
    start = time.perf_counter()
    result = fn(data)
    return (time.perf_counter() - start) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--batch", type=int, default=None, help="rows per batch (default: all)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="100k rows, 3 repeats")
    parser.add_argument("--threads", action="store_true", help="leave the thread pools as they are")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    repeats = args.repeats or (3 if args.quick else 5)
    if not args.threads:
        pa.set_cpu_count(1)
    batches = make_batches(rows, args.batch or rows)
    dicts = [batch.to_pylist() for batch in batches]
    ways: list[tuple[str, Callable[[Any], Counts], Any]] = [
        ("rows", by_rows, dicts),
        ("rows + to_pylist", by_rows_from_arrow, batches),
        ("pyarrow", by_pyarrow, batches),
        ("polars, fused", by_polars_fused, batches),
        ("polars, per operator", by_polars_per_operator, batches),
    ]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in ways}
    expected = by_rows(dicts)
    for name, fn, data in ways:  # warm up, and check
        assert timed(fn, data)[1] == expected, name
    for _ in range(repeats):
        for name, fn, data in ways:
            samples[name].append(timed(fn, data)[0])
    import polars

    print(
        f"Python {platform.python_version()}, pyarrow {pa.__version__}, polars "
        f"{polars.__version__}; {rows:,} rows in {len(batches)} batches; {repeats} repeats;"
        f" load {os.getloadavg()[0]:.2f}"
    )
    base = statistics.median(samples["rows"])
    lines = [
        [
            name,
            f"{statistics.median(values):.1f}",
            f"{min(values):.1f}",
            f"{rows / statistics.median(values) / 1000:.2f}",
            f"{base / statistics.median(values):.1f}",
        ]
        for name, values in samples.items()
    ]
    print(table(["way", "ms (median)", "ms (best)", "M rows/s", "x rows"], lines))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        results = {"rows": rows, "batches": len(batches), "repeats": repeats, "ms": samples}
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
