"""The dataflow that the capture/replay subprocess tests capture (shared by scripts and tests).

Worker ``w`` of the capturing process sends :func:`records_for` ``(w, t)`` at each time
``t < TIMES``, then closes its input. Records are JSON arrays, so what a replay reads back
from a file equals them exactly.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from operators.capture import Event, Progress
from operators.progress import MutableAntichain

TIMES = 10


def records_for(worker: int, time: int) -> list[list[int]]:
    """The records worker ``worker`` sends at ``time``: one to three ``[worker, time, i]``."""
    return [[worker, time, i] for i in range((worker + time) % 3 + 1)]


def expected(workers: int, times: int = TIMES) -> list[list[Any]]:
    """``[[t, sorted records at t], ...]`` for ``workers`` capturing workers, by time."""
    return [[t, sorted(r for w in range(workers) for r in records_for(w, t))] for t in range(times)]


def history_frontier(events: Iterable[Event], minimum: Hashable = 0) -> list[Hashable]:
    """The frontier a captured history has reached (it starts at ``{minimum}``)."""
    frontier: MutableAntichain[Hashable] = MutableAntichain([(minimum, 1)])
    for event in events:
        if isinstance(event, Progress):
            frontier.update_iter(event.changes)
    return sorted(frontier.frontier())
