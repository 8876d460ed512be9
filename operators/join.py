"""``join``: an equijoin of two streams, per time (a symmetric hash join).

Both inputs are exchanged by their key, so matching records meet on one worker. For every
time the operator keeps, per side, the records seen so far by key. A batch arriving on one
side is matched against the other side's records at the same time (its pairs are sent at
once, at the batch's own time), then stashed for the other side's later batches. A side's
records at a time are forgotten once the *other* input's frontier has passed that time (no
partner can arrive any more); by the time both frontiers have passed it, nothing is left.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from operators.builder import OperatorBuilder
from operators.ports import InputPort, OutputPort
from operators.progress import MutableAntichain
from operators.runtime import Interest
from operators.stream import Stream, attach

_Stash = dict[Hashable, dict[Hashable, list[Any]]]
"""Per time, per key, the records one side has delivered so far."""


@attach(Stream.join)
def join(
    left: Stream,
    other: Stream,
    key_left: Callable[[Any], Hashable],
    key_right: Callable[[Any], Hashable],
    name: str = "Join",
) -> Stream:
    """Pairs ``(left_record, right_record)`` whose keys are equal, at the same time.

    Args:
        left: The left input.
        other: The right input (same scope).
        key_left: The join key of a left record (used to route it, too: an ``int``, ``str``,
            ``bytes``, ``float``, ``bool``, ``None`` or a tuple of these).
        key_right: The join key of a right record.
        name: The operator's name.

    Returns:
        For every time, the cross product of the left and right records of each key
        present on both sides at that time, as ``(left, right)`` tuples. Pairs are sent as
        soon as both records have arrived, not when the time completes.
    """
    builder = OperatorBuilder(left.scope, name)
    first = builder.new_input(left, exchange=lambda r: key_left(r))
    second = builder.new_input(other, exchange=lambda r: key_right(r))
    output, result = builder.new_output()

    def constructor() -> Callable[[], None]:
        left_stash: _Stash = {}
        right_stash: _Stash = {}

        def logic() -> None:
            _take(first, key_left, left_stash, right_stash, True, output)
            _take(second, key_right, right_stash, left_stash, False, output)
            _prune(left_stash, second.frontier)
            _prune(right_stash, first.frontier)

        return logic

    builder.build_reactive(constructor, Interest.ALWAYS)
    return result


def _take(
    port: InputPort,
    key: Callable[[Any], Hashable],
    mine: _Stash,
    theirs: _Stash,
    is_left: bool,
    output: OutputPort,
) -> None:
    """Match each arrived batch of one side against the other's, then stash it."""
    for time, records in port.batches():
        partners = theirs.get(time)
        stash = mine.get(time)
        if stash is None:
            stash = mine[time] = {}
        pairs: list[tuple[Any, Any]] = []
        for record in records:
            k = key(record)
            if partners is not None:
                matches = partners.get(k)
                if matches:
                    if is_left:
                        pairs.extend((record, other) for other in matches)
                    else:
                        pairs.extend((other, record) for other in matches)
            bucket = stash.get(k)
            if bucket is None:
                stash[k] = [record]
            else:
                bucket.append(record)
        output.forward(time, pairs, port.port)


def _prune(stash: _Stash, other_frontier: MutableAntichain[Hashable]) -> None:
    """Forget the times of one side that the other side's frontier has passed."""
    if stash:
        for time in [t for t in stash if not other_frontier.less_equal(t)]:
            del stash[time]
