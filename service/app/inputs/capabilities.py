"""An input's capabilities, and when what producers do takes effect on the dataflow.

The input operator lives on one worker (its *owner*) and holds the input's own capability;
each producer session holds one of its own, made from it. A record sent, or a capability
moved or dropped, is an *effect* on the dataflow: with a journal that defers them
(``durability: fsync``) an effect waits until the operation that made it is durable, so
nothing downstream ever shows what a crash could take back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Protocol

from operators import Capability, OutputPort
from operators.progress import less_equal
from operators.runtime import Batch


class InputListener(Protocol):
    """Who hears that an input's frontier moved (its dataflow, which publishes it)."""

    def input_moved(self, name: str) -> None:
        """Input ``name``'s own capability moved or was dropped."""
        ...

    def records_arrived(self, name: str, times: Iterable[Hashable]) -> None:
        """Records at ``times`` entered the dataflow through input ``name``."""
        ...


class InputCapabilities:
    """The input's own capabilities, the sessions' capabilities, and the effects waiting.

    The input holds one capability per time of its own frontier (an antichain: with product
    times, open sessions at ``[2, 0]`` and ``[0, 2]`` hold exactly those two, so ``[1, 0]``,
    which nothing can send, completes).
    """

    __slots__ = ("_base", "_deferred", "_listener", "_name", "_output", "_position")

    def __init__(
        self,
        name: str,
        output: OutputPort,
        base: Capability,
        listener: InputListener,
        position: Callable[[], int],
        defer: bool,
    ) -> None:
        self._name = name
        self._output = output
        self._base: list[Capability] = [base]
        """The input's own capabilities, one per time of its frontier, as applied (none once
        the close is)."""
        self._listener = listener
        self._position = position
        """The log position of the operation being applied (what an effect waits for)."""
        self._deferred: deque[tuple[int, Callable[..., Any], tuple[Any, ...]]] | None = (
            deque() if defer else None
        )
        """Effects waiting for their operations to be durable, in order, each with its
        operation's log position (``None``: effects happen at once)."""

    def applied_frontier(self) -> list[Hashable]:
        """The input's frontier as the dataflow sees it."""
        return [capability.time for capability in self._base]

    def deferring(self, defer: bool) -> bool:
        """Defer effects from now on (or not); whether they were deferred before."""
        before = self._deferred is not None
        if defer and self._deferred is None:
            self._deferred = deque()
        elif not defer:
            self.apply_durable(1 << 62)
            self._deferred = None
        return before

    def session(self, time: Hashable) -> Capability:
        """A capability for a new session at ``time``.

        Made at once, deferred or not: holding a capability early only holds progress back.
        ``time`` is at or after a time of the input's frontier (checked), and so of the one
        applied, which can only be behind it.
        """
        return self._holding(time).delayed(time)

    def _holding(self, time: Hashable) -> Capability:
        """An own capability at or before ``time`` (there is one: checked before)."""
        for capability in self._base:
            if less_equal(capability.time, time):
                return capability
        raise AssertionError(f"no capability of the input holds {time!r}")

    def effect(self, effect: Callable[..., Any], *args: Any) -> None:
        """Apply ``effect(*args)`` now, or once the operation being logged is durable."""
        deferred = self._deferred
        if deferred is None:
            effect(*args)
        else:
            deferred.append((self._position(), effect, args))

    def apply_durable(self, synced: int) -> None:
        """Apply the held effects of operations logged before position ``synced``, in order."""
        deferred = self._deferred
        while deferred and deferred[0][0] < synced:
            _, effect, args = deferred.popleft()
            effect(*args)

    def emit(self, batches: Sequence[tuple[Hashable, Batch]]) -> None:
        """Send batches of records (lists, or columns), each at its time.

        The capabilities allow it: checked.
        """
        self.effect(self._emit, batches)

    def _emit(self, batches: Sequence[tuple[Hashable, Batch]]) -> None:
        output = self._output
        for at, records in batches:
            output.send_at(at, records)
        output.operator.touch()
        self._listener.records_arrived(self._name, [at for at, _ in batches])

    def downgrade(self, capability: Capability, time: Hashable) -> None:
        """Move a session's capability to ``time``."""
        self.effect(capability.downgrade, time)

    def drop(self, capability: Capability) -> None:
        """Drop a session's capability."""
        self.effect(capability.drop)

    def move_base(self, times: list[Hashable]) -> None:
        """Move the input's own capabilities to ``times`` (each at or after one of them)."""
        self.effect(self._move_base, list(times))

    def close(self) -> None:
        """Drop the input's own capability: the input is complete."""
        self.effect(self._drop_base)

    def _move_base(self, times: list[Hashable]) -> None:
        if not self._base:
            return
        kept: list[Capability] = []
        for time in times:
            same = next((c for c in self._base if c.time == time), None)
            kept.append(same if same is not None else self._holding(time).delayed(time))
        keeping = {id(capability) for capability in kept}
        for capability in self._base:
            if id(capability) not in keeping:
                capability.drop()
        self._base = kept
        self._listener.input_moved(self._name)

    def _drop_base(self) -> None:
        base, self._base = self._base, []
        for capability in base:
            capability.drop()
        if base:
            self._listener.input_moved(self._name)
