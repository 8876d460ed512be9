"""A small demonstration of the progress core: frontiers moving as a loop runs.

The graph is an iterative scope with ``Product(epoch, iteration)`` times::

    input(1) --> step(2) --> probe(4)
                  ^  |
                  |  v
               feedback(3), +Product(0, 1)

Each epoch the input sends one record, which goes around the loop three times. The demo
plays the pointstamp changes a runtime would report (a record in flight is a count at the
target it travels to; consuming it and sending its successor happen in one batch) and prints
every frontier change the tracker reports at the probe and at the feedback's input.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import cast

from operators.progress import Antichain, Builder, MutableAntichain, Product, Source, Target

_ROUNDS = 3
_EPOCHS = 3


def _build() -> Builder:
    builder = Builder(identity=Product(0, 0))
    builder.add_node(1, inputs=0, outputs=1)
    builder.add_node(2, inputs=2, outputs=1)
    builder.add_node(3, inputs=1, outputs=1, connectivity=[{0: Antichain([Product(0, 1)])}])
    builder.add_node(4, inputs=1, outputs=0)
    builder.add_edge(Source(1, 0), Target(2, 0))
    builder.add_edge(Source(2, 0), Target(3, 0))
    builder.add_edge(Source(3, 0), Target(2, 1))
    builder.add_edge(Source(2, 0), Target(4, 0))
    return builder


def _show(frontier: Antichain[Hashable]) -> str:
    times = sorted(cast("Iterable[Product[int, int]]", frontier))
    return "{" + ", ".join(f"({t.outer}, {t.inner})" for t in times) + "}"


def run(emit: list[str]) -> None:
    """Play the demo, appending one line per reported frontier change to ``emit``."""
    tracker, _ = _build().build()
    watched = {Target(4, 0): "probe", Target(3, 0): "feedback"}
    views = {location: MutableAntichain[Hashable]() for location in watched}

    def settle(label: str) -> None:
        tracker.propagate_all()
        for location, time, diff in tracker.drain_pushed():
            if location in views:
                views[location].update_iter([(time, diff)])
        shown = "  ".join(f"{name}={_show(views[loc].frontier())}" for loc, name in watched.items())
        emit.append(f"{label:<34} {shown}")

    tracker.update_source(Source(1, 0), Product(0, 0), +1)
    settle("input holds epoch 0")
    for epoch in range(_EPOCHS):
        time = Product(epoch, 0)
        # The input sends a record to step, then moves its capability to the next epoch.
        tracker.update_target(Target(2, 0), time, +1)
        tracker.update_source(Source(1, 0), Product(epoch + 1, 0), +1)
        tracker.update_source(Source(1, 0), time, -1)
        settle(f"epoch {epoch}: record sent, input at {epoch + 1}")
        port = Target(2, 0)
        for iteration in range(_ROUNDS):
            time = Product(epoch, iteration)
            # step consumes the record and sends it on to the feedback and the probe ...
            tracker.update_target(port, time, -1)
            tracker.update_target(Target(3, 0), time, +1)
            tracker.update_target(Target(4, 0), time, +1)
            settle(f"  step passes {tuple(time)}")
            tracker.update_target(Target(4, 0), time, -1)
            # ... and the feedback returns it one iteration later, until the last round.
            tracker.update_target(Target(3, 0), time, -1)
            port = Target(2, 1)
            if iteration + 1 < _ROUNDS:
                tracker.update_target(port, Product(epoch, iteration + 1), +1)
            settle(f"  feedback {'returns' if iteration + 1 < _ROUNDS else 'drops'} it")
    tracker.update_source(Source(1, 0), Product(_EPOCHS, 0), -1)
    settle("input closed")


def main() -> None:
    """Print the demo's frontier changes to standard output."""
    lines: list[str] = []
    run(lines)
    print("\n".join(lines))
