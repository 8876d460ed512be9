"""Benchmark of the progress :class:`~operators.progress.reachability.Tracker`.

What it measures, on graphs of N operators (N from ``--sizes``, default 10, 100, 1,000, 10,000)
built with :class:`~operators.progress.reachability.Builder` over integer times:

Topologies (N counts every operator except node 0, which has no ports):

* ``chain``: an input operator (node 1: no inputs, one output) followed by N-1 operators of one
  input and one output with the identity summary, connected in a line (2N-1 locations).
* ``loop``: the input operator, a head operator of two inputs and one output (input 0 fed by
  the input operator, input 1 by the feedback), N-3 identity operators in a line, and a
  feedback operator whose summary is +1 and whose output goes back to the head's input 1:
  the line closes into a cycle through a +1 (2N locations).

Measurements:

* ``advance``: the input holds one capability at time t; one step is
  ``update_source(Source(1, 0), t+1, +1); update_source(Source(1, 0), t, -1);
  propagate_all(); drain_pushed()``. Reported per step, and per frontier change (the entries
  ``drain_pushed`` returned, summed over the steps, divide the total time), with the number of
  locations whose frontier changed per step.
* ``churn``: the input holds its capability at t0, and batches of pointstamp count updates
  (``--batch`` per ``propagate_all``, default 1,000) that move no frontier are applied: +1 at
  t0+k (k >= 1, random) at random locations, or +1 at t0 itself at locations whose pointstamp
  count at t0 is already positive (the input, plus a few locations seeded with one, untimed);
  every pointstamp added in one batch is removed by a -1 in the next, so counts never go
  negative. The updates are pre-generated (fixed seed) outside the timed region, and after
  each batch it is asserted, untimed, that ``drain_pushed()`` is empty. Reported per update
  (the ``update_*`` calls and ``propagate_all`` together, divided by the number of updates).
* ``baseline``: a noise-normalising baseline, *not* the tracker: a plain Python loop that, for
  each of 2N locations per step, does one dict get/set and one list append. The tracker's
  times are also given as ratios to it, so runs on machines of different speed (or loads)
  can be compared.

Every measurement is warmed up, sized to take about ``--target`` seconds, repeated
(``--repeats``, default 5; ``--quick``: 1 repeat and short runs), and reported as median and
min over repeats. Each timed region runs after ``gc.collect()`` with gc disabled, timed with
``time.perf_counter_ns``. The last line gives the growth of the time per frontier change from
N=100 to N=10,000 and whether the targets are met: at most 2 µs per frontier change at a
location and flat from 100 to 10,000 operators (growth at most 1.5x), and at most 1 µs per
churn update.

Run from the repository root::

    .venv/bin/python bench/tracker.py                # full run, a few minutes
    .venv/bin/python bench/tracker.py --quick        # smoke run, seconds
    .venv/bin/python bench/tracker.py --sizes 10,100 --json bench/results/tracker.json
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from operators.progress import Antichain, Builder, Source, Target, Tracker

INPUT = Source(1, 0)
TOPOLOGIES = ("chain", "loop")
TARGET_CHANGE_US = 2.0  # per frontier change at a location
TARGET_FLAT_GROWTH = 1.5  # µs per frontier change, N=100 -> N=10,000
TARGET_CHURN_US = 1.0  # per churn update
T0_SHARE = 0.25  # share of churn increments made at t0 itself
K_MAX = 64  # churn increments at t0+k use 1 <= k <= K_MAX
HOLDERS = 32  # locations seeded (untimed) with a pointstamp at t0 for churn

Update = tuple[Callable[[Any, Hashable, int], None], Any, int, int]


# --------------------------------------------------------------------------- graphs


def build(topology: str, n: int) -> Tracker:
    """The tracker of a ``topology`` graph of ``n`` operators (node 0 not counted)."""
    builder = Builder()
    builder.add_node(0, inputs=0, outputs=0)
    builder.add_node(1, inputs=0, outputs=1)
    if topology == "chain":
        if n < 2:
            raise ValueError("a chain needs at least 2 operators")
        for node in range(2, n + 1):
            builder.add_node(node, inputs=1, outputs=1)
            builder.add_edge(Source(node - 1, 0), Target(node, 0))
    elif topology == "loop":
        if n < 3:
            raise ValueError("a loop needs at least 3 operators")
        builder.add_node(2, inputs=2, outputs=1)  # the head: identity from both inputs
        builder.add_edge(INPUT, Target(2, 0))
        for node in range(3, n):
            builder.add_node(node, inputs=1, outputs=1)
        builder.add_node(n, inputs=1, outputs=1, connectivity=[{0: Antichain([1])}])
        for node in range(3, n + 1):
            builder.add_edge(Source(node - 1, 0), Target(node, 0))
        builder.add_edge(Source(n, 0), Target(2, 1))
    else:
        raise ValueError(f"unknown topology {topology!r}")
    tracker, _ = builder.build()
    return tracker


# --------------------------------------------------------------------------- timing helpers


def timed(run: Callable[[], Any]) -> tuple[int, Any]:
    """Run ``run`` after a gc.collect() with gc disabled; return (elapsed ns, its result)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        result = run()
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return elapsed, result


def calibrate(run: Callable[[int], int], warmup_s: float, target_s: float, minimum: int) -> int:
    """Warm up by calling ``run(count)`` (returning elapsed ns) with growing counts, then
    return the count that should take about ``target_s``."""
    count, spent_ns, done = 1, 0, 0
    while True:
        spent_ns += run(count)
        done += count
        if spent_ns >= warmup_s * 1e9 and done >= 2:
            break
        count *= 2
    per_unit_ns = spent_ns / done
    return max(minimum, round(target_s * 1e9 / per_unit_ns))


@dataclass
class Stat:
    values: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def min(self) -> float:
        return min(self.values)

    def show(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f} ({self.min:.{digits}f})"

    def as_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "values": self.values}


# --------------------------------------------------------------------------- advance


class Advance:
    """The input's capability stepping forward one time per step."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.t = 0
        tracker.update_source(INPUT, self.t, +1)
        tracker.propagate_all()
        tracker.drain_pushed()
        # One untimed step to learn how many locations (and entries) a step changes.
        self.entries_per_step, self.locations_per_step = self._probe()

    def _probe(self) -> tuple[int, int]:
        tracker, t = self.tracker, self.t
        tracker.update_source(INPUT, t + 1, +1)
        tracker.update_source(INPUT, t, -1)
        tracker.propagate_all()
        changes = tracker.drain_pushed()
        self.t = t + 1
        return len(changes), len({location for location, _, _ in changes})

    def run(self, steps: int) -> tuple[int, int]:
        """Time ``steps`` steps; return (elapsed ns, frontier-change entries drained)."""
        tracker = self.tracker
        update = tracker.update_source
        propagate = tracker.propagate_all
        drain = tracker.drain_pushed
        source, t = INPUT, self.t

        def steps_loop() -> int:
            entries = 0
            for now in range(t, t + steps):
                update(source, now + 1, +1)
                update(source, now, -1)
                propagate()
                entries += len(drain())
            return entries

        elapsed, entries = timed(steps_loop)
        self.t = t + steps
        return elapsed, entries


# --------------------------------------------------------------------------- churn


class Churn:
    """Count updates that move no frontier, in batches, against a capability held at t0."""

    def __init__(self, tracker: Tracker, seed: int, batch: int) -> None:
        self.tracker = tracker
        self.rng = random.Random(seed)
        self.batch = batch
        self.t0 = t0 = 1_000
        tracker.update_source(INPUT, t0, +1)
        tracker.propagate_all()
        tracker.drain_pushed()
        self.locations = tracker.locations()
        by_kind = {Source: tracker.update_source, Target: tracker.update_target}
        self.update_of = {location: by_kind[type(location)] for location in self.locations}
        # Locations holding a pointstamp at t0 (so a further +1 at t0 changes only a count):
        # the input, and a few more seeded here, untimed, where t0 is already the frontier.
        at_t0 = [
            location
            for location in self.locations
            if location != INPUT and tracker.frontier(location) == Antichain([t0])
        ]
        seeded = self.rng.sample(at_t0, min(HOLDERS, len(at_t0)))
        for location in seeded:
            tracker.update(location, t0, +1)
        tracker.propagate_all()
        if tracker.drain_pushed():
            raise AssertionError("seeding the t0 holders moved a frontier")
        self.holders = [INPUT, *seeded]
        self.previous: list[tuple[Any, int]] = []  # pointstamps added by the last batch

    def _increments(self, count: int) -> list[tuple[Any, int]]:
        rng, t0 = self.rng, self.t0
        locations, holders = self.locations, self.holders
        added = []
        for _ in range(count):
            if rng.random() < T0_SHARE:
                added.append((rng.choice(holders), t0))
            else:
                added.append((rng.choice(locations), t0 + rng.randint(1, K_MAX)))
        return added

    def _bind(self, changes: list[tuple[Any, int, int]]) -> list[Update]:
        update_of = self.update_of
        return [(update_of[location], location, t, diff) for location, t, diff in changes]

    def batches(self, count: int) -> list[list[Update]]:
        """Pre-generate ``count`` batches: fresh increments plus the last batch's decrements."""
        out = []
        half = self.batch // 2
        for _ in range(count):
            added = self._increments(self.batch - half if self.previous else self.batch)
            changes = [(loc, t, +1) for loc, t in added]
            changes.extend((loc, t, -1) for loc, t in self.previous[:half])
            leftover = self.previous[half:]
            self.previous = leftover + added
            self.rng.shuffle(changes)
            out.append(self._bind(changes))
        return out

    def close(self) -> None:
        """Retract every pointstamp still added (untimed), restoring the initial counts."""
        changes = [(loc, t, -1) for loc, t in self.previous]
        self.previous = []
        self.apply([self._bind(changes)])

    def apply(self, batches: list[list[Update]]) -> None:
        """Apply batches untimed, checking that no frontier moves."""
        tracker = self.tracker
        for batch in batches:
            for update, location, t, diff in batch:
                update(location, t, diff)
            tracker.propagate_all()
            if tracker.drain_pushed():
                raise AssertionError("a churn batch moved a frontier")

    def run(self, batches: list[list[Update]]) -> tuple[int, int]:
        """Time the batches; return (elapsed ns, updates applied)."""
        tracker = self.tracker
        propagate = tracker.propagate_all
        drain = tracker.drain_pushed
        clock = time.perf_counter_ns
        total_ns = 0
        updates = 0
        gc.collect()
        gc.disable()
        try:
            for batch in batches:
                start = clock()
                for update, location, t, diff in batch:
                    update(location, t, diff)
                propagate()
                total_ns += clock() - start
                updates += len(batch)
                if drain():  # untimed check
                    raise AssertionError("a churn batch moved a frontier")
        finally:
            gc.enable()
        return total_ns, updates

    def measure_batches(self, count: int) -> int:
        """Generate and time ``count`` batches (used for warm-up); return elapsed ns."""
        return self.run(self.batches(count))[0]


# --------------------------------------------------------------------------- baseline


def baseline(locations: int, steps: int) -> int:
    """Per step, for each location: one dict get/set and one list append. Elapsed ns."""
    counts: dict[int, int] = {}

    def loop() -> None:
        for _ in range(steps):
            out: list[int] = []
            for here in range(locations):
                counts[here] = counts.get(here, 0) + 1
                out.append(here)

    return timed(loop)[0]


# --------------------------------------------------------------------------- driver


@dataclass
class Result:
    topology: str
    n: int
    locations: int
    steps: int = 0
    entries_per_step: int = 0
    locations_per_step: int = 0
    step_us: Stat = field(default_factory=Stat)
    change_us: Stat = field(default_factory=Stat)
    batches: int = 0
    updates: int = 0
    update_us: Stat = field(default_factory=Stat)

    def as_json(self, base: BaselineResult) -> dict[str, Any]:
        return {
            "topology": self.topology,
            "n": self.n,
            "locations": self.locations,
            "advance": {
                "steps": self.steps,
                "entries_per_step": self.entries_per_step,
                "locations_changed_per_step": self.locations_per_step,
                "us_per_step": self.step_us.as_json(),
                "us_per_frontier_change": self.change_us.as_json(),
                "ratio_to_baseline": self.step_us.median / base.step_us.median,
            },
            "churn": {
                "batches": self.batches,
                "updates": self.updates,
                "us_per_update": self.update_us.as_json(),
                "ratio_to_baseline": self.update_us.median / base.op_us.median,
            },
        }


@dataclass
class BaselineResult:
    n: int
    locations: int
    steps: int = 0
    step_us: Stat = field(default_factory=Stat)
    op_us: Stat = field(default_factory=Stat)

    def as_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "locations": self.locations,
            "steps": self.steps,
            "us_per_step": self.step_us.as_json(),
            "ns_per_location_op": {
                "median": self.op_us.median * 1e3,
                "min": self.op_us.min * 1e3,
            },
        }


def measure_size(
    n: int, repeats: int, target_s: float, warmup_s: float, seed: int, batch: int
) -> tuple[list[Result], BaselineResult]:
    advances: dict[str, Advance] = {}
    churns: dict[str, Churn] = {}
    results: dict[str, Result] = {}
    for topology in TOPOLOGIES:
        # Builder.build is the slow part of setup for big N; a deep copy is much cheaper.
        built = build(topology, n)
        churn = Churn(copy.deepcopy(built), seed, batch)
        advance = Advance(built)
        advances[topology], churns[topology] = advance, churn
        result = Result(topology, n, len(advance.tracker.locations()))
        result.entries_per_step = advance.entries_per_step
        result.locations_per_step = advance.locations_per_step
        # Warm up and size each measurement.
        result.steps = calibrate(lambda k, a=advance: a.run(k)[0], warmup_s, target_s, 1)
        churn.apply(churn.batches(1))  # prime: the first batch has no decrements
        result.batches = calibrate(churn.measure_batches, warmup_s, target_s, 1)
        results[topology] = result

    base = BaselineResult(n, 2 * n)
    base.steps = calibrate(lambda k: baseline(2 * n, k), warmup_s, target_s, 1)

    # Repeats interleave the measurements, so a burst of machine noise spreads over all.
    for _ in range(repeats):
        for topology in TOPOLOGIES:
            result = results[topology]
            elapsed, entries = advances[topology].run(result.steps)
            result.step_us.values.append(elapsed / 1e3 / result.steps)
            result.change_us.values.append(elapsed / 1e3 / max(entries, 1))

            churn = churns[topology]
            batches = churn.batches(result.batches)
            elapsed, updates = churn.run(batches)
            result.updates = updates
            result.update_us.values.append(elapsed / 1e3 / updates)
        elapsed = baseline(base.locations, base.steps)
        base.step_us.values.append(elapsed / 1e3 / base.steps)
        base.op_us.values.append(elapsed / 1e3 / base.steps / base.locations)

    for churn in churns.values():
        churn.close()
    return [results[t] for t in TOPOLOGIES], base


# --------------------------------------------------------------------------- report


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(lines)


def report(results: list[Result], bases: dict[int, BaselineResult]) -> tuple[str, dict[str, Any]]:
    out = []
    out.append(
        "advance: input capability t -> t+1, propagate_all, drain_pushed; median (min) over repeats"
    )
    out.append(
        table(
            [
                "topology",
                "N",
                "locs",
                "steps",
                "µs/step",
                "µs/frontier change",
                "entries/step",
                "locs changed/step",
                "step / baseline",
            ],
            [
                [
                    r.topology,
                    str(r.n),
                    str(r.locations),
                    str(r.steps),
                    r.step_us.show(1),
                    r.change_us.show(3),
                    str(r.entries_per_step),
                    str(r.locations_per_step),
                    f"{r.step_us.median / bases[r.n].step_us.median:.1f}x",
                ]
                for r in results
            ],
        )
    )
    out.append("")
    out.append(
        "churn: count updates that move no frontier, "
        "update_* + propagate_all per batch; median (min)"
    )
    out.append(
        table(
            ["topology", "N", "locs", "batches", "updates", "µs/update", "update / baseline op"],
            [
                [
                    r.topology,
                    str(r.n),
                    str(r.locations),
                    str(r.batches),
                    str(r.updates),
                    r.update_us.show(3),
                    f"{r.update_us.median / bases[r.n].op_us.median:.1f}x",
                ]
                for r in results
            ],
        )
    )
    out.append("")
    out.append(
        "noise-normalising baseline (plain Python, NOT the tracker): "
        "per location, one dict get/set + one list append"
    )
    out.append(
        table(
            ["N", "locs", "steps", "µs/step", "ns/location op"],
            [
                [
                    str(b.n),
                    str(b.locations),
                    str(b.steps),
                    b.step_us.show(1),
                    f"{b.op_us.median * 1e3:.1f} ({b.op_us.min * 1e3:.1f})",
                ]
                for b in bases.values()
            ],
        )
    )
    out.append("")

    sizes = sorted(bases)
    small = next((n for n in sizes if n >= 100), sizes[0])
    large = sizes[-1]
    growth: dict[str, float | None] = {}
    normalised: dict[str, float | None] = {}  # the same, each divided by its size's baseline
    for topology in TOPOLOGIES:
        by_n = {r.n: r for r in results if r.topology == topology}
        if large > small:
            growth[topology] = by_n[large].change_us.median / by_n[small].change_us.median
            normalised[topology] = growth[topology] / (
                bases[large].op_us.median / bases[small].op_us.median
            )
        else:
            growth[topology] = normalised[topology] = None
    worst_change = max(r.change_us.median for r in results)
    worst_update = max(r.update_us.median for r in results)
    flat: bool | None = None  # unknown with a single size at or above 100
    if all(g is not None for g in growth.values()):
        flat = all(g is not None and g <= TARGET_FLAT_GROWTH for g in growth.values())
    change_met: bool | None = worst_change <= TARGET_CHANGE_US
    if change_met and flat is not True:
        change_met = flat  # None: the flatness half could not be checked
    churn_met = worst_update <= TARGET_CHURN_US
    full_range = small == 100 and large == 10_000

    def verdict(met: bool | None) -> str:
        return "UNCHECKED" if met is None else "MET" if met else "NOT MET"

    shown_growth = ", ".join(
        f"{t} {g:.2f}x (baseline-normalised {normalised[t]:.2f}x)" if g is not None else f"{t} n/a"
        for t, g in growth.items()
    )
    scope = "" if full_range else " [sizes do not span 100..10000: partial check]"
    out.append(
        f"growth of µs/frontier change N={small} -> N={large}: {shown_growth} | "
        f"target <= {TARGET_CHANGE_US:g} µs/frontier change, flat (growth <= "
        f"{TARGET_FLAT_GROWTH:g}x): {verdict(change_met)} (worst {worst_change:.3f} µs) | "
        f"target churn <= {TARGET_CHURN_US:g} µs/update: {verdict(churn_met)} "
        f"(worst {worst_update:.3f} µs){scope}"
    )
    summary = {
        "growth_from": small,
        "growth_to": large,
        "growth_us_per_frontier_change": growth,
        "growth_baseline_normalised": normalised,
        "worst_us_per_frontier_change": worst_change,
        "worst_us_per_update": worst_update,
        "frontier_change_target_met": change_met,
        "churn_target_met": churn_met,
        "targets": {
            "us_per_frontier_change": TARGET_CHANGE_US,
            "flat_growth": TARGET_FLAT_GROWTH,
            "us_per_update": TARGET_CHURN_US,
        },
        "full_range": full_range,
    }
    return "\n".join(out), summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat, short runs")
    parser.add_argument(
        "--sizes",
        default="10,100,1000,10000",
        help="comma-separated operator counts (default 10,100,1000,10000)",
    )
    parser.add_argument("--repeats", type=int, help="repeats per measurement (default 5)")
    parser.add_argument("--target", type=float, help="seconds per timed measurement (default 0.4)")
    parser.add_argument("--batch", type=int, default=1000, help="churn updates per batch")
    parser.add_argument("--seed", type=int, default=20240611, help="random seed for churn")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 3:
        parser.error("--sizes must list operator counts of at least 3")
    repeats = args.repeats or (1 if args.quick else 5)
    target_s = args.target or (0.02 if args.quick else 0.4)
    warmup_s = target_s / 4

    print(
        f"tracker benchmark: sizes {sizes}, {repeats} repeat(s), ~{target_s:g} s per "
        f"measurement, churn batch {args.batch}, seed {args.seed}; "
        f"Python {platform.python_version()} on {platform.machine()}",
        flush=True,
    )
    results: list[Result] = []
    bases: dict[int, BaselineResult] = {}
    started = time.perf_counter()
    for n in sorted(sizes):
        size_results, base = measure_size(n, repeats, target_s, warmup_s, args.seed, args.batch)
        results.extend(size_results)
        bases[n] = base
        print(f"  N={n} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)

    text, summary = report(results, bases)
    print()
    print(text)

    if args.json:
        document = {
            "benchmark": "tracker",
            "config": {
                "sizes": sorted(sizes),
                "repeats": repeats,
                "target_seconds": target_s,
                "batch": args.batch,
                "seed": args.seed,
                "quick": args.quick,
            },
            "environment": {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "machine": platform.machine(),
                "platform": platform.platform(),
            },
            "results": [r.as_json(bases[r.n]) for r in results],
            "baseline": [b.as_json() for b in bases.values()],
            "summary": summary,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
